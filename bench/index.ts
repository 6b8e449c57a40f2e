// `npm run bench`: the benchmark commands without the `seglog` front end (see bench/cli.ts).
// With no arguments it runs the full report (`all`). A failure is reported as `seglog bench`
// reports it (one line; the stack with --debug).

import { debugRequested, describeFailure, failureIsExpected } from '../lib/tools/cli.js';
import { runBenchCommand } from './cli.js';

const argv = process.argv.slice(2);
runBenchCommand(argv.length === 0 ? ['all'] : argv).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(`seglog bench: ${describeFailure(err)}`);
    if (debugRequested(argv)) console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    else if (!failureIsExpected(err)) console.error('(an unexpected failure: run again with --debug for the stack trace)');
    process.exitCode = 1;
  },
);
