#!/usr/bin/env node
// The `seglog` command: one entry point for the product's tools.
//
// Owns: dispatch to the sub-commands, `--version`, and the exit code of a failure. Each
// sub-command lives with the layer it drives (bench/, lib/crash/, lib/tools/), parses its own
// flags with lib/tools/cli.ts, and is loaded only when asked for, so that `seglog --help` starts
// fast and one tool's dependencies never burden another.
// Exit codes: what the sub-command answers (0 success; 2 bad usage; others per command); 1 when
// it fails, reported in one line that names the path of a failed file operation (the stack only
// with --debug or SEGLOG_DEBUG=1).

import { readFileSync } from 'node:fs';
import { debugRequested, describeFailure, failureIsExpected } from '../lib/tools/cli.js';

interface Command {
  summary: string;
  run(argv: string[]): Promise<number>;
}

const commands: Record<string, Command> = {
  demo: {
    summary: 'run the main job on an embedded data directory: `seglog demo [--dir D] [--records N]`',
    run: async (argv) => (await import('../lib/tools/demo.js')).runDemo(argv),
  },
  bench: {
    summary: 'benchmarks: `seglog bench fsync|segments|stores|all [--quick] [--json]`',
    run: async (argv) => (await import('../bench/cli.js')).runBenchCommand(argv),
  },
  crash: {
    summary: 'crash-injection runner: `seglog crash [workload...] [--seed N] [--json] [--replay R]`',
    run: async (argv) => (await import('../lib/tools/crash-cli.js')).runCrashCommand(argv),
  },
  verify: {
    summary: 'check a data directory offline, without writing: `seglog verify <dir> [--json]`',
    run: async (argv) => (await import('../lib/tools/verify.js')).runVerifyCommand(argv),
  },
  inspect: {
    summary: 'a readable dump of a data directory: `seglog inspect <dir> [--records N] [--json]`',
    run: async (argv) => (await import('../lib/tools/inspect.js')).runInspectCommand(argv),
  },
};

/** The package's version, from the package.json two levels above dist/bin/. */
function version(): string {
  const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return manifest.version;
}

function usage(): string {
  const lines = ['usage: seglog <command> [options]', '       seglog <command> --help', '       seglog --version', '', 'commands:'];
  for (const [name, command] of Object.entries(commands)) lines.push(`  ${name.padEnd(9)} ${command.summary}`);
  lines.push('', 'every command takes --help (its usage) and --debug (the stack trace of a failure).');
  return lines.join('\n');
}

async function main(argv: string[]): Promise<number> {
  const args = argv.filter((a, i) => !(a === '--debug' && i === 0)); // `seglog --debug <command> ...`
  const [name, ...rest] = args;
  if (name === undefined) {
    console.error(usage());
    return 2;
  }
  if (name === '--help' || name === '-h') {
    console.log(usage());
    return 0;
  }
  if (name === '--version' || name === '-V') {
    console.log(version());
    return 0;
  }
  if (name === 'help') {
    const topic = rest[0];
    if (topic === undefined) {
      console.log(usage());
      return 0;
    }
    if (commands[topic] === undefined) {
      console.error(`seglog: unknown command '${topic}'\n\n${usage()}`);
      return 2;
    }
    return commands[topic].run(['--help']);
  }
  const command = commands[name];
  if (command === undefined) {
    console.error(`seglog: ${name.startsWith('-') ? 'unknown option' : 'unknown command'} '${name}'\n\n${usage()}`);
    return 2;
  }
  try {
    return await command.run(rest);
  } catch (err) {
    console.error(`seglog ${name}: ${describeFailure(err)}`);
    if (debugRequested(argv)) console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    else if (!failureIsExpected(err)) console.error('(an unexpected failure: run again with --debug for the stack trace)');
    return 1;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(`seglog: ${describeFailure(err)}`);
    process.exitCode = 1;
  },
);
