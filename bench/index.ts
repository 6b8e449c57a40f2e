// `npm run bench`: the benchmark commands without the `seglog` front end (see bench/cli.ts).
// With no arguments it runs the full report (`all`).

import { runBenchCommand } from './cli.js';

const argv = process.argv.slice(2);
runBenchCommand(argv.length === 0 ? ['all'] : argv).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exitCode = 1;
  },
);
