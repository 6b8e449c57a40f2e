// `seglog bench ...`: the benchmark commands.
//
// Owns: its flag table, the choice of sections per command, the package's performance targets, and the
// outputs (Markdown on stdout or --out, JSON with --json, an SVG chart with --svg). Guarantees:
// - The measured filesystem is the one under --dir (default: the current directory, as
//   pg_test_fsync does; os.tmpdir() is often tmpfs, where a sync costs nothing). Scratch files live
//   in a fresh `.seglog-bench-*` directory there, removed at the end, on failure and on Ctrl-C.
// - --quick finishes in under a minute on a 2-core VM; the full run in a few minutes.
// - Exit code 0 when the run completed (whether or not targets were met), 2 on bad usage,
//   1 on a failure.

import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  durableLargeSection,
  durableSmallSection,
  granularitySection,
  loadEngine,
  openTimeMeasurement,
  type OpenLog,
} from './engine.js';
import { describeMachine, loadAverage } from './harness/machine.js';
import { renderMarkdown } from './harness/markdown.js';
import { Progress } from './harness/progress.js';
import { checkTarget, REPORT_SCHEMA_ID, REPORT_VERSION, type BenchReport, type SectionResult, type TargetCheck } from './harness/report.js';
import { plannedMs, runSection, type SectionPlan } from './harness/runner.js';
import { REPORT_JSON_SCHEMA, validateReport } from './harness/schema.js';
import { formatBytes, MIB } from './harness/stats.js';
import { chartSeriesFromSection, renderChart } from './harness/svg.js';
import { concurrencySection, metadataSection, syncMethodSections, writevSection, type SuiteConfig } from './raw.js';
import { STORES_SECTION_IDS } from './stores/sections.js';
import { formatColumns, formatFlags, parseOrExplain, synopsis, type FlagTable, type FlagValues } from '../lib/tools/cli.js';

/**
 * The flags of every `seglog bench` command, one entry each. EXTENSION POINT: a new flag is one
 * entry here (its type and bounds are checked, its line of help is printed), read where it is
 * used as `options['its-name']`; say in its help which commands read it.
 */
export const BENCH_FLAGS = {
  dir: { type: 'string', value: 'D', help: 'measure the filesystem under D (default: the current directory)' },
  quick: { type: 'boolean', help: 'short runs (under a minute); figures are indicative only' },
  json: { type: 'boolean', help: 'print the report as JSON on stdout instead of Markdown' },
  out: { type: 'string', value: 'FILE', help: 'also write the Markdown report to FILE' },
  svg: { type: 'string', value: 'FILE', help: 'write the latency-against-throughput chart (SVG) to FILE' },
  rounds: { type: 'integer', min: 5, help: 'measured rounds per section (default 5, at least 5)' },
  'log-bytes': {
    type: 'integer',
    min: MIB,
    help: 'size of the log whose open time is measured (default 1 GiB; quick: 64 MiB; stores, the Raft log opened cold: quick 32 MiB)',
  },
  in: { type: 'string', value: 'FILE', help: 'render: the saved JSON report to render again' },
  into: {
    type: 'string',
    value: 'FILE',
    help: "render: replace everything after the document's report marker line (a stores report: what lies between the two stores markers)",
  },
  scopes: { type: 'integer', min: 1, help: 'stores: scopes in the realm whose open is measured (default 10000; quick: 1000)' },
  'payload-bytes': { type: 'integer', min: MIB, help: 'stores: the large payload whose memory is watched (default 1 GiB; quick: 32 MiB)' },
  'snapshot-bytes': { type: 'integer', min: MIB, help: "stores: the Raft state whose snapshot's memory is watched (default 1 GiB; quick: 32 MiB)" },
  only: {
    type: 'list',
    choices: STORES_SECTION_IDS,
    help: `stores: run only these sections (comma-separated: ${STORES_SECTION_IDS.join(', ')}); the targets of the others read "not measured"`,
  },
} as const satisfies FlagTable;

/** The commands of `seglog bench`, each with its line of help. */
const BENCH_COMMANDS: readonly (readonly [string, string])[] = [
  [
    'fsync',
    'what the filesystem under --dir costs (sync methods, sizes 512 B-1 MiB, writev batches, directory fsync, ' +
      "create/rename, concurrent syncs), then seglog's appends at each flush granularity with 1-256 appenders, as ratios to the raw figure",
  ],
  ['segments', 'the segmented log: durable appends (256 B x1/x16/x256, 1 MiB) against raw write+fdatasync in the same run, and the open time of a 1 GiB log'],
  ['all', 'fsync and segments in one report (what docs/benchmarks.md holds)'],
  [
    'stores',
    'the host store, the Raft log and the payload store beside better-sqlite3 and lmdb (installed on demand: npm run bench:peers) ' +
      'and the raw floors, in one run; realm and log opens, resident memory (a large payload, a large Raft snapshot)',
  ],
  ['schema', 'print the JSON Schema of a report'],
  ['aa', 'a check of the method: two identical variants (true ratio 1) measured by this harness (paired rounds) and by tinybench (sequential tasks); prints the spread'],
  ['render', 're-render a saved JSON report: --in report.json [--out report.md] [--svg chart.svg] [--into doc.md]'],
];

const USAGE = `usage: seglog bench <command> [options]

commands:
${formatColumns(BENCH_COMMANDS)}

options:
${formatFlags(BENCH_FLAGS)}
exit: 0 the run completed (whether or not its targets were met), 1 a failure, 2 bad usage`;

/** What every bench command reads: the parsed flags, with their defaults filled in. */
interface Options extends FlagValues<typeof BENCH_FLAGS> {
  dir: string;
  rounds: number;
}

function parse(argv: string[]): { command: string; options: Options } | number {
  const line = parseOrExplain('seglog bench', USAGE, argv, BENCH_FLAGS, { name: 'a command', min: 1, max: 1 });
  if (typeof line === 'number') return line;
  const command = line.positionals[0]!;
  if (!BENCH_COMMANDS.some(([name]) => name === command)) {
    console.error(`seglog bench: unknown command '${command}'\n\n${synopsis(USAGE)}\n(\`seglog bench --help\` for the commands)`);
    return 2;
  }
  return { command, options: { ...line.values, dir: line.values.dir ?? process.cwd(), rounds: line.values.rounds ?? 5 } };
}

/** Run parameters of the full and the quick mode. */
export function suiteConfig(root: string, quick: boolean, rounds: number): SuiteConfig {
  return quick
    ? {
        quick,
        root,
        rounds,
        warmupRounds: 1,
        slices: 2,
        budget: { durationMs: 40, maxOps: 1_000_000, minOps: 5 },
        sizes: [512, 4096, 65536, MIB],
        maxBytesPerRun: 16 * MIB,
      }
    : {
        quick,
        root,
        rounds,
        warmupRounds: 1,
        slices: 5,
        budget: { durationMs: 600, maxOps: 2_000_000, minOps: 20 },
        sizes: [512, 4096, 16384, 65536, 262144, MIB],
        maxBytesPerRun: 128 * MIB,
      };
}

function findVariant(sections: readonly SectionResult[], sectionId: string, variantId: string) {
  return sections.find((s) => s.id === sectionId)?.variants.find((v) => v.id === variantId);
}

const NOT_RUN = 'not measured by this command: `seglog bench segments` or `seglog bench all` measures it';

/** Every performance target of the package, judged from this run's sections (null where not measured). */
export function collectTargets(sections: readonly SectionResult[], openTargetJudged: boolean): TargetCheck[] {
  const one = findVariant(sections, 'durable-256', 'seglog-256-x1');
  const many = findVariant(sections, 'durable-256', 'seglog-256-x256');
  const open = sections.find((s) => s.id === 'open-time')?.measurements.find((m) => m.id === 'open-log');
  const notStores = 'measured by `seglog bench stores`';
  return [
    checkTarget({
      id: 'segments-one-at-a-time',
      source: 'segmented log',
      description: 'durable 256 B appends one at a time, as a ratio to raw write + fdatasync',
      comparator: '>=',
      threshold: 0.9,
      unit: '× raw',
      measured: one?.ratio?.recordsPerSec.median ?? null,
      note: one === undefined ? NOT_RUN : 'median of ratios paired by round',
    }),
    checkTarget({
      id: 'segments-256-at-once',
      source: 'segmented log',
      description: 'durable 256 B appends with 256 appenders at once',
      comparator: '>=',
      threshold: 100_000,
      unit: 'appends/s',
      measured: many?.summary.recordsPerSec.median ?? null,
      note: many === undefined ? NOT_RUN : 'median over rounds',
    }),
    checkTarget(
      {
        id: 'segments-open-1gib',
        source: 'segmented log',
        description: 'open a 1 GiB log (openSegmentedLog + first read)',
        comparator: '<',
        threshold: 100,
        unit: 'ms',
        measured: open?.summary.median ?? null,
        note:
          open === undefined
            ? NOT_RUN
            : openTargetJudged
              ? 'median over runs, page cache warm'
              : `measured on a ${formatBytes(Number(open.params['bytes']))} log, not 1 GiB: not judged`,
      },
      openTargetJudged,
    ),
    ...[
      ['host-one-scope', 'host store', 'host store: one writer on one scope, as a ratio to raw write + fdatasync', '>=', 0.9, '× raw'],
      ['host-200-scopes-vs-peers', 'host store', 'host store: 200 scopes at once, as a ratio to the faster of better-sqlite3 and lmdb', '>=', 1, '× best peer'],
      ['host-open-10k-scopes', 'host store', 'host store: open a realm of 10,000 scopes', '<', 1000, 'ms'],
      ['raft-one-per-append', 'Raft store', 'Raft log: 256 B entries one per append, as a ratio to raw write + fdatasync', '>=', 0.9, '× raw'],
      ['raft-1mib-bandwidth', 'Raft store', 'Raft log: 1 MiB appends, as a ratio to raw sequential write + sync bandwidth', '>=', 0.8, '× raw'],
    ].map(([id, source, description, comparator, threshold, unit]) =>
      checkTarget({
        id: id as string,
        source: source as string,
        description: description as string,
        comparator: comparator as '>=' | '<',
        threshold: threshold as number,
        unit: unit as string,
        measured: null,
        note: notStores,
      }),
    ),
  ];
}

async function runSuite(command: 'fsync' | 'segments' | 'all', o: Options): Promise<{ report: BenchReport; chart: string | null }> {
  const startedAt = new Date();
  const loadStart = loadAverage();
  const root = await mkdtemp(path.join(o.dir, '.seglog-bench-'));
  const cleanup = (): void => {
    void rm(root, { recursive: true, force: true }).finally(() => process.exit(130));
  };
  process.once('SIGINT', cleanup);
  const progress = new Progress(1);
  try {
    const cfg = suiteConfig(root, o.quick, o.rounds);
    const machine = describeMachine(root);
    const notes: string[] = [];
    if (machine.filesystem?.type === 'tmpfs' || machine.filesystem?.type === 'ramfs') {
      notes.push(`${machine.filesystem.type} keeps files in memory: a sync there costs nothing, so these figures do not describe a disk.`);
    }
    const engine = await loadEngine();
    let open: OpenLog | null = null;
    if ('open' in engine) open = engine.open;
    else notes.push(`seglog's engine sections were skipped: ${engine.missing}.`);

    const plans: SectionPlan[] = [];
    if (command === 'fsync' || command === 'all') {
      plans.push(...syncMethodSections(cfg), writevSection(cfg), metadataSection(cfg), concurrencySection(cfg, machine.uvThreadpoolSize));
      if (open !== null) plans.push(granularitySection(cfg, open));
    }
    if ((command === 'segments' || command === 'all') && open !== null) {
      plans.push(durableSmallSection(cfg, open), durableLargeSection(cfg, open));
    }
    const logBytes = o['log-bytes'] ?? (o.quick ? 64 * MIB : 1024 * MIB);
    const measureOpen = (command === 'segments' || command === 'all') && open !== null;
    // Rough plan for the progress bar: the sections' budgets, plus the log build at ~200 MiB/s.
    progress.grow(plans.reduce((t, p) => t + plannedMs(p), 0) + (measureOpen ? (logBytes / MIB) * 5 : 0));

    const sections: SectionResult[] = [];
    for (const plan of plans) sections.push(await runSection(plan, progress));

    if (measureOpen && open !== null) {
      const { build, open: openTime, openLast } = await openTimeMeasurement({
        open,
        dir: path.join(root, 'open-time'),
        totalBytes: logBytes,
        recordSize: 1024,
        runs: o.quick ? 5 : 9,
        onProgress: (t) => progress.label(t),
      });
      progress.advance((logBytes / MIB) * 5);
      sections.push({
        id: 'open-time',
        title: `Open time of a ${formatBytes(logBytes)} log`,
        description:
          'A log is built once (1 KiB records, sync none, one sync at the end); then `openSegmentedLog` plus a read of ' +
          'the first record is timed several times, closing in between (untimed), after one discarded warm-up open; ' +
          'then the same with a read of the last record.',
        rounds: openTime.summary.n,
        warmupRounds: 1,
        slices: 1,
        budget: { durationMs: 0, maxOps: 1, minOps: 1 },
        baseline: null,
        variants: [],
        measurements: [build, openTime, openLast],
        notes: [],
      });
    }
    progress.finish();

    const targets = collectTargets(sections, logBytes >= 1024 * MIB);
    const finishedAt = new Date();
    const report: BenchReport = {
      schema: REPORT_SCHEMA_ID,
      version: REPORT_VERSION,
      command: ['seglog', 'bench', command, ...(o.quick ? ['--quick'] : [])].join(' '),
      quick: o.quick,
      startedAt: startedAt.toISOString(),
      finishedAt: finishedAt.toISOString(),
      durationMs: finishedAt.getTime() - startedAt.getTime(),
      units: { latency: 'us', throughput: 'MiB/s', rate: 'per second', size: 'bytes' },
      machine,
      load: { start: loadStart, end: loadAverage() },
      sections,
      targets,
      notes,
    };
    const problems = validateReport(report);
    if (problems.length > 0) throw new Error(`the report does not match its schema:\n${problems.join('\n')}`);
    return { report, chart: chartOf(report) };
  } finally {
    progress.finish();
    process.removeListener('SIGINT', cleanup);
    await rm(root, { recursive: true, force: true });
  }
}

/** The latency-against-throughput chart of a report's flush-granularity section, if it has one. */
export function chartOf(report: BenchReport): string | null {
  const granularity = report.sections.find((s) => s.id === 'flush-granularity');
  if (granularity === undefined) return null;
  return renderChart(chartSeriesFromSection(granularity), {
    title: 'seglog appends: p50 latency against throughput (256 B records)',
    xLabel: 'appends per second (median)',
    yLabel: 'p50 latency, µs (median)',
  });
}

/** The line in a document after which `render --into` writes the report. */
export const REPORT_MARKER = '<!-- seglog bench render --into: everything below this line is generated -->';

/** Renders `report` as a part of a larger document: every heading one level deeper. */
export function renderEmbedded(report: BenchReport, chart: string | undefined): string {
  return renderMarkdown(report, chart === undefined ? {} : { chart }).replace(/^(#+) /gm, '$1# ');
}

/** The lines between which `render --into` writes a `seglog bench stores` report. */
export const STORES_BEGIN = '<!-- seglog bench stores: the generated report begins here -->';
export const STORES_END = '<!-- seglog bench stores: the generated report ends here -->';

/**
 * Writes the rendered report into `file` (and the chart to `svg`): a `bench stores` report
 * between STORES_BEGIN and STORES_END; any other report in place of what follows REPORT_MARKER.
 */
export async function spliceInto(file: string, report: BenchReport, chart: string | null, svg: string | undefined): Promise<void> {
  const { readFile } = await import('node:fs/promises');
  const text = await readFile(file, 'utf8');
  const stores = /^seglog bench stores\b/.test(report.command);
  let chartRef: string | undefined;
  if (svg !== undefined && chart !== null) {
    await writeFile(svg, chart);
    chartRef = path.relative(path.dirname(path.resolve(file)), path.resolve(svg));
  }
  if (stores) {
    const begin = text.indexOf(STORES_BEGIN);
    const end = text.indexOf(STORES_END);
    if (begin < 0 || end < begin) throw new Error(`${file} has no line ${STORES_BEGIN} followed by ${STORES_END}`);
    await writeFile(file, `${text.slice(0, begin + STORES_BEGIN.length)}\n\n${renderEmbedded(report, chartRef)}\n${text.slice(end)}`);
    return;
  }
  const at = text.indexOf(REPORT_MARKER);
  if (at < 0) throw new Error(`${file} has no line ${REPORT_MARKER}`);
  await writeFile(file, `${text.slice(0, at + REPORT_MARKER.length)}\n\n${renderEmbedded(report, chartRef)}`);
}

async function emit(report: BenchReport, chart: string | null, o: Options): Promise<void> {
  if (o.svg !== undefined) {
    if (chart === null) console.error('seglog bench: no flush-granularity section in this report, so no chart was written');
    else await writeFile(o.svg, chart);
  }
  const chartRef = o.svg !== undefined && chart !== null && o.out !== undefined ? path.relative(path.dirname(path.resolve(o.out)), path.resolve(o.svg)) : undefined;
  const markdown = renderMarkdown(report, chartRef === undefined ? {} : { chart: chartRef });
  if (o.out !== undefined) await writeFile(o.out, markdown);
  process.stdout.write(o.json ? `${JSON.stringify(report, null, 2)}\n` : markdown);
}

/** The commands that write scratch files under --dir. */
const MEASURES: ReadonlySet<string> = new Set(['fsync', 'segments', 'all', 'stores', 'aa']);

/** Why `dir` cannot hold the scratch files (null when it can). */
async function dirProblem(dir: string): Promise<string | null> {
  try {
    return (await stat(dir)).isDirectory() ? null : 'not a directory';
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    return code === 'ENOENT' ? 'no such directory' : `cannot use it (${String(code ?? err)})`;
  }
}

/** Entry point of `seglog bench ...`; answers the process exit code. */
export async function runBenchCommand(argv: string[]): Promise<number> {
  const parsed = parse(argv);
  if (typeof parsed === 'number') return parsed;
  const { command, options } = parsed;
  if (MEASURES.has(command)) {
    const problem = await dirProblem(options.dir);
    if (problem !== null) {
      console.error(`seglog bench: --dir ${options.dir}: ${problem}`);
      return 1;
    }
  }
  switch (command) {
    case 'schema':
      process.stdout.write(`${JSON.stringify(REPORT_JSON_SCHEMA, null, 2)}\n`);
      return 0;
    case 'render': {
      const input = options.in;
      if (input === undefined) {
        console.error(`seglog bench render: --in report.json is required\n\n${synopsis(USAGE)}\n(\`seglog bench --help\` for the options)`);
        return 2;
      }
      const { readFile } = await import('node:fs/promises');
      const text = await readFile(input, 'utf8');
      let report: BenchReport;
      try {
        report = JSON.parse(text) as BenchReport;
      } catch (err) {
        console.error(`seglog bench render: ${input} is not JSON (${err instanceof Error ? err.message : String(err)})`);
        return 1;
      }
      const problems = validateReport(report);
      if (problems.length > 0) {
        console.error(`seglog bench render: ${input} is not a report of version ${REPORT_VERSION}:\n${problems.slice(0, 10).join('\n')}`);
        return 1;
      }
      if (options.into !== undefined) {
        await spliceInto(options.into, report, chartOf(report), options.svg);
        return 0;
      }
      await emit(report, chartOf(report), options);
      return 0;
    }
    case 'aa': {
      const { runAaCheck } = await import('./aa.js');
      const root = await mkdtemp(path.join(options.dir, '.seglog-bench-'));
      try {
        const slices = Number(process.env['SEGLOG_BENCH_SLICES'] ?? '5');
        const r = await runAaCheck(path.join(root, 'aa'), options.rounds, options.quick ? 100 : 500, slices);
        console.log(`slices per round: ${slices}`);
        const f = (s: { median: number; min: number; max: number }) => `${s.median.toFixed(3)} (${s.min.toFixed(3)}–${s.max.toFixed(3)})`;
        console.log(`A/A ratio, true value 1 (median (min–max) over ${options.rounds} rounds/repetitions):`);
        console.log(`  this harness, paired by round:      ${f(r.harnessPaired)}`);
        console.log(`  this harness, ratio of medians:     ${r.harnessUnpaired.toFixed(3)}`);
        console.log(`  tinybench, A then B per repetition: ${f(r.tinybench)}`);
        console.log(`fixed cost per op (empty async fn): harness ${r.overheadNs.harness.toFixed(0)} ns, tinybench ${r.overheadNs.tinybench.toFixed(0)} ns`);
      } finally {
        await rm(root, { recursive: true, force: true });
      }
      return 0;
    }
    case 'stores': {
      const { runStoresReport } = await import('./stores/command.js');
      const report = await runStoresReport({
        dir: options.dir,
        quick: options.quick,
        rounds: options.rounds,
        logBytes: options['log-bytes'],
        scopes: options.scopes,
        payloadBytes: options['payload-bytes'],
        snapshotBytes: options['snapshot-bytes'],
        only: options.only,
      });
      await emit(report, null, options);
      return 0;
    }
    case 'fsync':
    case 'segments':
    case 'all': {
      const { report, chart } = await runSuite(command, options);
      await emit(report, chart, options);
      return 0;
    }
    default:
      console.error(`seglog bench: unknown command '${command}'\n\n${USAGE}`);
      return 2;
  }
}
