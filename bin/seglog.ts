#!/usr/bin/env node
// The `seglog` command: one entry point for the product's tools.
//
// Owns: argument dispatch and exit codes. Each sub-command lives with the layer it drives
// (bench/, lib/crash/, lib/tools/) and is loaded only when asked for, so that `seglog --help`
// starts fast and one tool's dependencies never burden another.

interface Command {
  summary: string;
  run(argv: string[]): Promise<number>;
}

const commands: Record<string, Command> = {
  demo: {
    summary: 'run the main job on an embedded data directory (default ./seglog-data)',
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

function usage(): string {
  const lines = ['usage: seglog <command> [options]', '', 'commands:'];
  for (const [name, command] of Object.entries(commands)) lines.push(`  ${name.padEnd(10)} ${command.summary}`);
  return lines.join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    console.log(usage());
    return name === undefined ? 2 : 0;
  }
  const command = commands[name];
  if (command === undefined) {
    console.error(`seglog: unknown command '${name}'\n\n${usage()}`);
    return 2;
  }
  return command.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exitCode = 1;
  },
);
