// `seglog crash`: the crash-injection runner as a command.
//
// Owns: its flags (parsed by ./cli.ts), the progress bar (on a terminal), the summary table, `--json`, the
// violation listing with reproducers, and `--replay`. The work is lib/crash/runner.ts.
// Exit codes: 0 no violation, 1 at least one violation (or a replayed state that fails its
// check), 2 bad usage.

import { replayCrashReproducer, runCrashWorkloads, type CrashProgress, type CrashRunReport } from '../crash/runner.js';
import { loadWorkload, workloadNames } from '../crash/workloads/index.js';
import { formatFlags, parseOrExplain, synopsis, UsageError, type CommandLine, type FlagTable } from './cli.js';

const FLAGS = {
  seed: { type: 'integer', min: 0, help: "seed of the workloads' choices and of the state sampling (default 1)" },
  'max-states': { type: 'integer', min: 1, help: 'most states checked per workload; more are sampled evenly (default 4000)' },
  exhaustive: {
    type: 'boolean',
    help: 'every subset of up to 14 unsynced operations, crossed with every torn write; no sampling unless --max-states is given (can take long)',
  },
  scale: { type: 'number', above: 0, max: 100, value: 'X', help: 'workload size multiplier (default 1)' },
  json: { type: 'boolean', help: 'print the report as JSON (no progress bar, no table)' },
  replay: {
    type: 'string',
    value: 'R',
    help: "record the reproducer's run again and check that one state alone, explaining the operations kept, dropped and torn",
  },
  list: { type: 'boolean', help: 'list the workloads and their planted mistakes' },
  plant: { type: 'string', value: 'NAME', help: 'plant a known mistake (test-only; shows what a violation looks like)' },
} as const satisfies FlagTable;

const USAGE = `usage: seglog crash [workload...] [options]
       seglog crash --replay <reproducer>
       seglog crash --list

Runs crash workloads on a recording file system and checks every disk state a crash can leave
(docs/crash-testing.md). Workloads: ${workloadNames().join(', ')} (default: all).

options:
${formatFlags(FLAGS)}
exit: 0 no violation, 1 violations, 2 bad usage`;

interface Args {
  workloads: string[];
  seed: number;
  maxStates: number | undefined;
  exhaustive: boolean;
  scale: number;
  json: boolean;
  replay: string | null;
  list: boolean;
  plant: string | null;
}

function argsOf(line: CommandLine<typeof FLAGS>): Args {
  const v = line.values;
  const unknown = line.positionals.find((w) => !workloadNames().includes(w));
  if (unknown !== undefined) throw new UsageError(`unknown workload '${unknown}' (known: ${workloadNames().join(', ')})`);
  return {
    workloads: line.positionals,
    seed: v.seed ?? 1,
    maxStates: v['max-states'],
    exhaustive: v.exhaustive,
    scale: v.scale ?? 1,
    json: v.json,
    replay: v.replay ?? null,
    list: v.list,
    plant: v.plant ?? null,
  };
}

function thousands(n: number): string {
  return n.toLocaleString('en-US');
}

function seconds(ms: number): string {
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

/** A one-line progress bar on a terminal, redrawn in place. */
class ProgressBar {
  readonly #stream: NodeJS.WriteStream;
  #last = 0;
  #drawn = false;

  constructor(stream: NodeJS.WriteStream) {
    this.#stream = stream;
  }

  update(p: CrashProgress): void {
    const now = performance.now();
    if (p.phase === 'checking' && now - this.#last < 80) return;
    this.#last = now;
    const width = 30;
    const fraction = p.total > 0 ? Math.min(1, p.checked / p.total) : 0;
    const filled = Math.round(fraction * width);
    const bar = p.phase === 'checking' || p.phase === 'done' ? `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]` : `[${p.phase}...]`.padEnd(width + 2);
    const line = `${p.workload.padEnd(10)} ${bar} ${thousands(p.checked)}/${thousands(p.total)} states`;
    const columns = this.#stream.columns;
    this.#stream.write(`\r${line.slice(0, columns !== undefined && columns > 20 ? columns - 1 : 200)}\x1b[K`);
    this.#drawn = true;
  }

  clear(): void {
    if (this.#drawn) this.#stream.write('\r\x1b[K');
    this.#drawn = false;
  }
}

/** The summary table and the violations, as a person reads them. */
export function formatCrashReport(report: CrashRunReport, maxDetailed = 3): string {
  const rows = [['workload', 'states', 'of', 'mode', 'violations', 'time']];
  for (const w of report.workloads) {
    const mode = w.exhaustive ? 'exhaustive' : w.sampled ? `sampled` : 'all states';
    rows.push([w.workload + (w.plant === null ? '' : `+${w.plant}`), thousands(w.states), thousands(w.candidates), mode, String(w.violations.length), seconds(w.elapsedMs)]);
  }
  rows.push(['total', thousands(report.states), '', '', String(report.violations), seconds(report.elapsedMs)]);
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const numeric = [false, true, true, false, true, true];
  const lines = rows.map((r) => r.map((cell, c) => (numeric[c] === true ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!))).join('  ').trimEnd());
  lines.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('  '));
  lines.splice(lines.length - 1, 0, widths.map((w) => '-'.repeat(w)).join('  '));
  lines.unshift(`seglog crash, seed ${report.seed}`);
  for (const w of report.workloads) {
    lines.push('', `${w.workload}: ${w.summary}; ${thousands(w.traceEntries)} trace entries, ${thousands(w.points)} crash points` + (w.linearAcks === null ? '' : `, linear pass over ${w.linearAcks} acknowledgements`));
    w.violations.forEach((v, i) => {
      if (i < maxDetailed) {
        lines.push(`  VIOLATION (${v.family}, state ${v.stateId}): ${v.message}`);
        lines.push(`    reproduce: seglog crash --replay '${v.reproducer}'`);
        for (const d of v.description.split('\n')) lines.push(`    ${d}`);
      } else {
        lines.push(`  VIOLATION (${v.family}): ${v.message.slice(0, 160)}  [--replay '${v.reproducer}']`);
      }
    });
  }
  lines.push('', report.violations === 0 ? 'no violation' : `${report.violations} violation(s)`);
  return lines.join('\n');
}

export async function runCrashCommand(argv: string[]): Promise<number> {
  const line = parseOrExplain('seglog crash', USAGE, argv, FLAGS, { name: 'workload names', min: 0, max: Infinity });
  if (typeof line === 'number') return line;
  let args: Args;
  try {
    args = argsOf(line);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`seglog crash: ${err.message}\n\n${synopsis(USAGE)}\n(\`seglog crash --help\` for the options)`);
    return 2;
  }

  if (args.list) {
    for (const name of workloadNames()) {
      const w = await loadWorkload(name);
      console.log(`${name.padEnd(10)} ${w.description}`);
      for (const [plant, what] of Object.entries(w.plants ?? {})) console.log(`  --plant ${plant.padEnd(22)} ${what}`);
    }
    return 0;
  }

  if (args.replay !== null) {
    let replay;
    try {
      replay = await replayCrashReproducer(args.replay);
    } catch (err) {
      if (err instanceof TypeError || err instanceof RangeError) {
        console.error(`seglog crash: ${err.message}`);
        return 2;
      }
      throw err;
    }
    if (args.json) {
      const { state, ...rest } = replay;
      console.log(
        JSON.stringify(
          { ...rest, state: state === null ? null : { id: state.id, point: state.point, family: state.family, kept: state.kept, dropped: state.dropped, torn: state.torn } },
          null,
          2,
        ),
      );
    } else {
      console.log(replay.explanation);
    }
    return replay.passed ? 0 : 1;
  }

  const tty = !args.json && process.stderr.isTTY === true;
  const bar = tty ? new ProgressBar(process.stderr) : null;
  let report: CrashRunReport;
  try {
    report = await runCrashWorkloads({
      workloads: args.workloads,
      seed: args.seed,
      exhaustive: args.exhaustive,
      scale: args.scale,
      plant: args.plant,
      ...(args.maxStates === undefined ? {} : { maxStates: args.maxStates }),
      ...(bar === null ? {} : { onProgress: (p: CrashProgress) => bar.update(p) }),
    });
  } catch (err) {
    bar?.clear();
    if (err instanceof RangeError) {
      console.error(`seglog crash: ${err.message}`);
      return 2;
    }
    throw err;
  }
  bar?.clear();
  console.log(args.json ? JSON.stringify(report, null, 2) : formatCrashReport(report));
  return report.violations === 0 ? 0 : 1;
}
