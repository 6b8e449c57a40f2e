// Tests of the benchmark harness: its arithmetic (percentiles, medians, ratios, units), the runner's
// interleaving, the JSON Schema of a report, and the Markdown, SVG and progress renderers. No test
// here measures or asserts a timing: runs are driven by synthetic samples.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { collectTargets, REPORT_MARKER, renderEmbedded, spliceInto } from '../bench/cli.js';
import { readFile, writeFile } from 'node:fs/promises';
import {
  checkTarget,
  closedLoop,
  decadeRange,
  describeMachine,
  escapeXml,
  formatBytes,
  formatNumber,
  formatStat,
  LatencyRecorder,
  median,
  MIB,
  mibPerSecond,
  mountFor,
  nsToUs,
  pairedRatios,
  parseMounts,
  percentile,
  perSecond,
  Progress,
  ratio,
  ratioToBaseline,
  renderChart,
  renderMarkdown,
  REPORT_JSON_SCHEMA,
  REPORT_SCHEMA_ID,
  REPORT_VERSION,
  roundOrder,
  runSection,
  sideBySide,
  sliceBudget,
  mergeSamples,
  summarize,
  summarizeRuns,
  toRunMetrics,
  uvThreadpool,
  validate,
  validateReport,
  chartSeriesFromSection,
  type BenchReport,
  type Budget,
  type RunSample,
  type SectionResult,
  type Variant,
} from '../bench/harness/index.js';

// ---------------------------------------------------------------- percentiles, medians, summaries

test('percentile: nearest rank on 1..100', () => {
  const xs = Array.from({ length: 100 }, (_, i) => 100 - i); // unsorted on purpose
  assert.equal(percentile(xs, 50), 50);
  assert.equal(percentile(xs, 99), 99);
  assert.equal(percentile(xs, 99.9), 100);
  assert.equal(percentile(xs, 100), 100);
  assert.equal(percentile(xs, 1), 1);
  assert.equal(percentile(xs, 0.5), 1);
});

test('percentile: exact ranks do not round up on float error (p99.9 of 1000 samples is the 999th)', () => {
  const xs = Array.from({ length: 1000 }, (_, i) => i + 1);
  assert.equal(percentile(xs, 99.9), 999);
  assert.equal(percentile(xs, 99), 990);
  assert.equal(percentile(xs, 50), 500);
  const ys = Array.from({ length: 10 }, (_, i) => i + 1);
  assert.equal(percentile(ys, 70), 7);
  assert.equal(percentile(ys, 30), 3);
});

test('percentile: small samples answer an observed value', () => {
  assert.equal(percentile([5], 50), 5);
  assert.equal(percentile([5], 99.9), 5);
  assert.equal(percentile([4, 1, 3, 2], 50), 2);
  assert.equal(percentile([4, 1, 3, 2], 75), 3);
  assert.equal(percentile([4, 1, 3, 2], 76), 4);
  assert.equal(percentile([10, 2, 33], 50), 10); // numeric, not lexicographic, order
});

test('percentile: refuses empty samples, bad p and non-finite values', () => {
  assert.throws(() => percentile([], 50), RangeError);
  assert.throws(() => percentile([1], 0), RangeError);
  assert.throws(() => percentile([1], 101), RangeError);
  assert.throws(() => percentile([1, Number.NaN], 50), RangeError);
});

test('percentile: property: an observed value with the nearest-rank bounds, monotonic in p', () => {
  fc.assert(
    fc.property(
      fc.array(fc.double({ min: 0, max: 1e9, noNaN: true }), { minLength: 1, maxLength: 300 }),
      fc.double({ min: 0.01, max: 100, noNaN: true }),
      fc.double({ min: 0.01, max: 100, noNaN: true }),
      (xs, p, q) => {
        const v = percentile(xs, p);
        assert.ok(xs.includes(v));
        const n = xs.length;
        const atOrBelow = xs.filter((x) => x <= v).length;
        const below = xs.filter((x) => x < v).length;
        // nearest rank: at least p% of the samples are <= v, and fewer than p% are < v.
        assert.ok(atOrBelow >= (p / 100) * n - 1e-6, `${atOrBelow} >= ${(p / 100) * n}`);
        assert.ok(below < (p / 100) * n + 1e-6, `${below} < ${(p / 100) * n}`);
        const [lo, hi] = p <= q ? [p, q] : [q, p];
        assert.ok(percentile(xs, lo) <= percentile(xs, hi));
      },
    ),
    { numRuns: 300 },
  );
});

test('median: odd count takes the middle, even count the mean of the two middle values', () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.equal(median([7]), 7);
  assert.equal(median([1, 100]), 50.5);
  assert.throws(() => median([]), RangeError);
});

test('summarize: median, min, max and n over runs', () => {
  assert.deepEqual(summarize([5, 1, 9, 3, 7]), { median: 5, min: 1, max: 9, n: 5 });
  assert.deepEqual(summarize([2, 2]), { median: 2, min: 2, max: 2, n: 2 });
  assert.throws(() => summarize([]), RangeError);
  assert.throws(() => summarize([1, Infinity]), RangeError);
});

// ---------------------------------------------------------------- ratios and units

test('ratio and paired ratios', () => {
  assert.equal(ratio(90, 100), 0.9);
  assert.throws(() => ratio(1, 0), RangeError);
  assert.throws(() => ratio(Number.NaN, 1), RangeError);
  assert.deepEqual(pairedRatios([10, 30, 60], [10, 10, 20]), [1, 3, 3]);
  assert.throws(() => pairedRatios([1, 2], [1]), RangeError);
});

test('a paired ratio cancels drift that a ratio of medians keeps', () => {
  // The disk gets 3× slower over the rounds; the variant is always exactly 0.9× the baseline.
  const base = [3000, 2000, 1000, 1500, 2500];
  const variant = base.map((b) => b * 0.9);
  const runs = (xs: number[]) => xs.map((r) => ({ ...metrics(1000), recordsPerSec: r }));
  const s = ratioToBaseline(runs(variant), runs(base));
  assert.ok(Math.abs(s.median - 0.9) < 1e-12 && Math.abs(s.min - 0.9) < 1e-12 && Math.abs(s.max - 0.9) < 1e-12);
});

test('units: rates per second, MiB/s is binary, latencies ns → µs', () => {
  assert.equal(perSecond(100, 1e9), 100);
  assert.equal(perSecond(1, 250e3), 4000);
  assert.equal(mibPerSecond(MIB, 1e9), 1);
  assert.equal(mibPerSecond(2 * MIB, 0.5e9), 4);
  assert.ok(Math.abs(mibPerSecond(1e6, 1e9) - 0.95367431640625) < 1e-12); // 1 MB/s is not 1 MiB/s
  assert.equal(nsToUs(225_000), 225);
  assert.throws(() => perSecond(1, 0), RangeError);
});

test('formatting: sizes, numbers and stats', () => {
  assert.equal(formatBytes(512), '512 B');
  assert.equal(formatBytes(4096), '4 KiB');
  assert.equal(formatBytes(MIB), '1 MiB');
  assert.equal(formatBytes(1.5 * MIB), '1.5 MiB');
  assert.equal(formatBytes(1024 * MIB), '1 GiB');
  assert.equal(formatNumber(123456), '123,456');
  assert.equal(formatNumber(1234.5), '1,235');
  assert.equal(formatNumber(12.345), '12.3');
  assert.equal(formatNumber(0.98765), '0.988');
  assert.equal(formatNumber(40), '40');
  assert.equal(formatNumber(-1500), '-1,500');
  assert.equal(formatStat({ median: 2.5, min: 1.25, max: 3.5, n: 5 }, '×'), '2.50× (1.25–3.50)');
  assert.equal(formatStat({ median: 2, min: 1, max: 3, n: 5 }, '×'), '2× (1–3)');
  assert.equal(formatStat({ median: 2.5, min: 2.5, max: 2.5, n: 5 }), '2.50');
});

// ---------------------------------------------------------------- samples → metrics

function metrics(ops: number) {
  return toRunMetrics(sample(ops, 1e9, 256));
}

function sample(ops: number, elapsedNs: number, bytesPerOp: number, recordsPerOp = 1): RunSample {
  const lat = Float64Array.from({ length: ops }, (_, i) => (i + 1) * 1000); // 1..ops µs
  return { ops, records: ops * recordsPerOp, bytes: ops * bytesPerOp, elapsedNs, latenciesNs: lat };
}

test('toRunMetrics: rates, MiB/s and nearest-rank latencies in µs', () => {
  const m = toRunMetrics(sample(1000, 0.5e9, 1024, 16));
  assert.equal(m.ops, 1000);
  assert.equal(m.records, 16000);
  assert.equal(m.opsPerSec, 2000);
  assert.equal(m.recordsPerSec, 32000);
  assert.equal(m.mibPerSec, (1000 * 1024 * 2) / MIB);
  assert.equal(m.elapsedMs, 500);
  assert.equal(m.p50Us, 500);
  assert.equal(m.p99Us, 990);
  assert.equal(m.p999Us, 999);
  assert.equal(m.maxUs, 1000);
  assert.throws(() => toRunMetrics(sample(0, 1e9, 1)), RangeError);
});

test('summarizeRuns: each figure as median (min–max); samples and the smallest run', () => {
  const s = summarizeRuns([toRunMetrics(sample(10, 1e9, 1)), toRunMetrics(sample(30, 1e9, 1)), toRunMetrics(sample(20, 1e9, 1))]);
  assert.deepEqual(s.opsPerSec, { median: 20, min: 10, max: 30, n: 3 });
  assert.equal(s.samples, 60);
  assert.equal(s.minOpsPerRun, 10);
});

test('LatencyRecorder grows past its capacity and keeps every value', () => {
  const r = new LatencyRecorder(16);
  for (let i = 0; i < 1000; i++) r.record(i);
  const v = r.values();
  assert.equal(r.count, 1000);
  assert.equal(v.length, 1000);
  assert.equal(v[999], 999);
});

test('closedLoop: stops at maxOps, records one latency per op, spreads ops over workers', async () => {
  const seen = new Map<number, number>();
  const s = await closedLoop({
    concurrency: 4,
    budget: { durationMs: 60_000, maxOps: 50, minOps: 0 },
    bytesPerOp: 100,
    recordsPerOp: 2,
    op: async (w) => {
      seen.set(w, (seen.get(w) ?? 0) + 1);
      await new Promise<void>((r) => setImmediate(r));
    },
  });
  assert.equal(s.ops, 50);
  assert.equal(s.latenciesNs.length, 50);
  assert.equal(s.records, 100);
  assert.equal(s.bytes, 5000);
  assert.equal(seen.size, 4);
  assert.equal([...seen.values()].reduce((a, b) => a + b, 0), 50);
});

test('closedLoop: minOps keeps going past a spent duration', async () => {
  const s = await closedLoop({ concurrency: 1, budget: { durationMs: 0, maxOps: 1000, minOps: 7 }, bytesPerOp: 1, op: async () => {} });
  assert.equal(s.ops, 7);
});

// ---------------------------------------------------------------- the runner

test('roundOrder rotates by one per round', () => {
  assert.deepEqual(roundOrder(['a', 'b', 'c'], 0), ['a', 'b', 'c']);
  assert.deepEqual(roundOrder(['a', 'b', 'c'], 1), ['b', 'c', 'a']);
  assert.deepEqual(roundOrder(['a', 'b', 'c'], 5), ['c', 'a', 'b']);
  assert.deepEqual(roundOrder([], 3), []);
});

/** A variant whose runs report `rate(round)` ops per second, logging when it ran. */
function fakeVariant(id: string, log: string[], rate: (round: number) => number, extra: Partial<Variant> = {}): Variant {
  let round = -1;
  return {
    id,
    label: `${id} | label`,
    async run(b: Budget): Promise<RunSample> {
      round++;
      log.push(`${id}@${round}:${b.durationMs}`);
      const ops = 100;
      return sample(ops, (ops / rate(round)) * 1e9, 256);
    },
    ...extra,
  };
}

test('runSection: interleaves variants round by round, discards warm-up, pairs ratios by round', async () => {
  const log: string[] = [];
  const drift = (r: number) => [1000, 3000, 500, 2000, 800, 1200][r] ?? 1000;
  const events: string[] = [];
  const section = await runSection({
    id: 's',
    title: 'S',
    description: 'd',
    variants: [
      fakeVariant('base', log, drift, { setup: async () => void events.push('setup base'), teardown: async () => void events.push('teardown base') }),
      fakeVariant('half', log, (r) => drift(r) / 2),
      fakeVariant('double', log, (r) => drift(r) * 2, { group: 'g', params: { concurrency: 16 } }),
    ],
    baseline: 'base',
    rounds: 5,
    warmupRounds: 1,
    budget: { durationMs: 400, maxOps: 10, minOps: 1 },
  });
  // Round r starts at variant r mod 3; the warm-up round runs a quarter of the budget.
  assert.deepEqual(log.slice(0, 6), ['base@0:100', 'half@0:100', 'double@0:100', 'half@1:400', 'double@1:400', 'base@1:400']);
  assert.equal(log.length, 18);
  assert.deepEqual(events, ['setup base', 'teardown base']);
  const [base, half, double] = section.variants;
  assert.ok(base && half && double);
  assert.equal(base.runs.length, 5);
  assert.deepEqual(base.runs.map((r) => Math.round(r.opsPerSec)), [3000, 500, 2000, 800, 1200]);
  assert.deepEqual(base.summary.opsPerSec, { median: 1200, min: 500, max: 3000, n: 5 });
  for (const [v, want] of [[half, 0.5], [double, 2], [base, 1]] as const) {
    assert.ok(v.ratio !== null);
    assert.ok(Math.abs(v.ratio.recordsPerSec.median - want) < 1e-9);
    assert.ok(Math.abs(v.ratio.recordsPerSec.max - want) < 1e-9); // drift cancelled by pairing
  }
  assert.equal(double.group, 'g');
  assert.equal(half.group, null);
});

test('runSection with slices: slices alternate between variants, rotate, and merge into one run per round', async () => {
  const log: string[] = [];
  const section = await runSection({
    id: 's',
    title: 'S',
    description: '',
    variants: [fakeVariant('a', log, () => 1000), fakeVariant('b', log, () => 4000)],
    baseline: 'a',
    rounds: 5,
    warmupRounds: 1,
    slices: 3,
    budget: { durationMs: 300, maxOps: 30, minOps: 3 },
  });
  // Warm-up: one slice each at a quarter budget; round 1 (r = 1): slices start at b, a, b.
  assert.deepEqual(log.slice(0, 8), ['a@0:75', 'b@0:75', 'b@1:100', 'a@1:100', 'a@2:100', 'b@2:100', 'b@3:100', 'a@3:100']);
  assert.equal(log.length, 2 + 5 * 3 * 2);
  const [a, b] = section.variants;
  assert.equal(section.slices, 3);
  assert.equal(a?.runs.length, 5);
  assert.equal(a?.runs[0]?.ops, 300); // three slices of 100 ops merged
  assert.equal(Math.round(a?.runs[0]?.opsPerSec ?? 0), 1000);
  assert.ok(Math.abs((b?.ratio?.recordsPerSec.median ?? 0) - 4) < 1e-9);
  await assert.rejects(runSection({ id: 'x', title: '', description: '', variants: [], rounds: 5, slices: 0, budget: { durationMs: 1, maxOps: 1, minOps: 1 } }), /slices/);
});

test('sliceBudget and mergeSamples', () => {
  assert.deepEqual(sliceBudget({ durationMs: 600, maxOps: 1000, minOps: 20 }, 5), { durationMs: 120, maxOps: 200, minOps: 4 });
  assert.deepEqual(sliceBudget({ durationMs: 600, maxOps: 3, minOps: 1 }, 5), { durationMs: 120, maxOps: 1, minOps: 1 });
  const one = sliceBudget({ durationMs: 7, maxOps: 7, minOps: 7 }, 1);
  assert.deepEqual(one, { durationMs: 7, maxOps: 7, minOps: 7 });
  const m = mergeSamples([
    { ops: 2, records: 4, bytes: 20, elapsedNs: 100, latenciesNs: Float64Array.from([1, 2, 99]) },
    { ops: 1, records: 2, bytes: 10, elapsedNs: 50, latenciesNs: Float64Array.from([3]) },
  ]);
  assert.deepEqual({ ...m, latenciesNs: [...m.latenciesNs] }, { ops: 3, records: 6, bytes: 30, elapsedNs: 150, latenciesNs: [1, 2, 3] });
  assert.throws(() => mergeSamples([]), RangeError);
});

test('runSection: tears down every set-up variant when a run throws', async () => {
  const events: string[] = [];
  const plan = {
    id: 's',
    title: 'S',
    description: '',
    variants: [
      { id: 'a', label: 'a', setup: async () => void events.push('setup a'), teardown: async () => void events.push('teardown a'), run: async () => sample(1, 1, 1) },
      {
        id: 'b',
        label: 'b',
        setup: async () => void events.push('setup b'),
        teardown: async () => void events.push('teardown b'),
        run: async (): Promise<RunSample> => {
          throw new Error('disk on fire');
        },
      },
    ],
    rounds: 5,
    budget: { durationMs: 1, maxOps: 1, minOps: 1 },
  };
  await assert.rejects(runSection(plan), /disk on fire/);
  assert.deepEqual(events, ['setup a', 'setup b', 'teardown b', 'teardown a']);
});

test('runSection: refuses duplicate ids and an unknown baseline', async () => {
  const v = (id: string): Variant => ({ id, label: id, run: async () => sample(1, 1, 1) });
  const budget = { durationMs: 1, maxOps: 1, minOps: 1 };
  await assert.rejects(runSection({ id: 's', title: '', description: '', variants: [v('a'), v('a')], rounds: 5, budget }), /duplicate/);
  await assert.rejects(runSection({ id: 's', title: '', description: '', variants: [v('a')], baseline: 'z', rounds: 5, budget }), /baseline/);
});

test('sideBySide: one variant per implementation, each with its own directory and handle', async () => {
  const parent = await mkdtemp(path.join(os.tmpdir(), 'seglog-bench-test-'));
  try {
    const opened: string[] = [];
    const closed: string[] = [];
    const impl = (name: string) => ({
      name,
      label: name.toUpperCase(),
      open: async (dir: string) => {
        opened.push(`${name}:${path.dirname(dir) === parent}`);
        return { name, ops: 0 };
      },
      close: async (h: { name: string; ops: number }) => void closed.push(`${h.name}:${h.ops}`),
    });
    const variants = sideBySide(
      { id: 'w', label: 'workload', concurrency: 2, bytesPerOp: 10, op: async (h: { ops: number }) => void h.ops++ },
      [impl('one'), impl('two')],
      parent,
    );
    assert.deepEqual(variants.map((v) => v.id), ['w/one', 'w/two']);
    const section = await runSection({ id: 's', title: '', description: '', variants, baseline: 'w/one', rounds: 5, warmupRounds: 0, budget: { durationMs: 60_000, maxOps: 10, minOps: 0 } });
    assert.deepEqual(opened, ['one:true', 'two:true']);
    assert.deepEqual(closed.sort(), ['one:50', 'two:50']);
    assert.equal(section.variants[1]?.params['implementation'], 'two');
  } finally {
    await rm(parent, { recursive: true, force: true });
  }
});

// ---------------------------------------------------------------- machine

test('parseMounts and mountFor: longest mount point prefix, escaped spaces decoded', () => {
  const mounts = parseMounts(
    ['/dev/vda / ext4 rw,relatime 0 0', 'tmpfs /tmp tmpfs rw 0 0', '/dev/vdb /data/my\\040disk xfs rw,noatime 0 0', '/dev/vdc /tmpfoo ext4 rw 0 0', ''].join('\n'),
  );
  assert.equal(mounts.length, 4);
  assert.equal(mounts[2]?.mountPoint, '/data/my disk');
  assert.equal(mountFor(mounts, '/tmp/x/y')?.type, 'tmpfs');
  assert.equal(mountFor(mounts, '/tmp')?.type, 'tmpfs');
  assert.equal(mountFor(mounts, '/tmpfoo/a')?.device, '/dev/vdc');
  assert.equal(mountFor(mounts, '/tmpx')?.type, 'ext4'); // a string prefix is not a path prefix
  assert.equal(mountFor(mounts, '/data/my disk/log')?.type, 'xfs');
  assert.equal(mountFor([], '/x'), null);
});

test('uvThreadpool: UV_THREADPOOL_SIZE when set and valid, else 4', () => {
  assert.deepEqual(uvThreadpool({}), { size: 4, from: 'default' });
  assert.deepEqual(uvThreadpool({ UV_THREADPOOL_SIZE: '16' }), { size: 16, from: 'env' });
  assert.deepEqual(uvThreadpool({ UV_THREADPOOL_SIZE: 'lots' }), { size: 4, from: 'default' });
  assert.deepEqual(uvThreadpool({ UV_THREADPOOL_SIZE: '5000' }), { size: 1024, from: 'env' });
});

// ---------------------------------------------------------------- targets

test('checkTarget: >= and < comparators, not measured, not judged', () => {
  const t = { id: 't', source: 'segmented log', description: 'd', unit: 'x', note: '' };
  assert.equal(checkTarget({ ...t, comparator: '>=', threshold: 0.9, measured: 0.9 }).met, true);
  assert.equal(checkTarget({ ...t, comparator: '>=', threshold: 0.9, measured: 0.89 }).met, false);
  assert.equal(checkTarget({ ...t, comparator: '<', threshold: 100, measured: 100 }).met, false);
  assert.equal(checkTarget({ ...t, comparator: '<', threshold: 100, measured: 99.9 }).met, true);
  assert.equal(checkTarget({ ...t, comparator: '<', threshold: 100, measured: null }).met, null);
  assert.equal(checkTarget({ ...t, comparator: '<', threshold: 100, measured: 5 }, false).met, null);
});

// ---------------------------------------------------------------- a whole report: schema and renderers

async function syntheticReport(): Promise<BenchReport> {
  const log: string[] = [];
  const mk = (id: string, rate: number, extra: Partial<Variant> = {}) => fakeVariant(id, log, () => rate, extra);
  const durable = await runSection({
    id: 'durable-256',
    title: 'Durable appends',
    description: 'synthetic',
    variants: [
      mk('raw-256', 4000),
      mk('seglog-256-x1', 3800, { group: 'sync every append', params: { concurrency: 1 } }),
      mk('seglog-256-x256', 120_000, { group: 'sync every append', params: { concurrency: 256 } }),
      mk('seglog-none-x1', 900_000, { group: 'no sync', params: { concurrency: 1 }, notes: ['not durable'] }),
    ],
    baseline: 'raw-256',
    rounds: 5,
    budget: { durationMs: 1, maxOps: 1, minOps: 1 },
  });
  const openTime: SectionResult = {
    ...durable,
    id: 'open-time',
    title: 'Open time',
    baseline: null,
    variants: [],
    measurements: [
      { id: 'open-log', label: 'open', unit: 'ms', params: { bytes: 1024 * MIB }, runs: [40, 50, 45], summary: summarize([40, 50, 45]), notes: [] },
    ],
  };
  const sections = [durable, openTime];
  return {
    schema: REPORT_SCHEMA_ID,
    version: REPORT_VERSION,
    command: 'seglog bench all',
    quick: false,
    startedAt: new Date(0).toISOString(),
    finishedAt: new Date(1000).toISOString(),
    durationMs: 1000,
    units: { latency: 'us', throughput: 'MiB/s', rate: 'per second', size: 'bytes' },
    machine: describeMachine(os.tmpdir()),
    load: { start: 0.1, end: 0.2 },
    sections,
    targets: collectTargets(sections, true),
    notes: [],
  };
}

test('a produced report validates against the JSON Schema, also after a JSON round trip', async () => {
  const report = await syntheticReport();
  assert.deepEqual(validateReport(report), []);
  assert.deepEqual(validateReport(JSON.parse(JSON.stringify(report))), []);
  assert.equal(REPORT_JSON_SCHEMA['$id'], `${REPORT_SCHEMA_ID}/v${REPORT_VERSION}`);
});

test('the schema rejects missing, mistyped, extra and wrong-version fields', async () => {
  const good = JSON.parse(JSON.stringify(await syntheticReport())) as Record<string, unknown>;
  const broken = (mutate: (r: any) => void): string[] => {
    const r = JSON.parse(JSON.stringify(good));
    mutate(r);
    return validateReport(r);
  };
  assert.match(broken((r) => delete r.machine).join(), /missing required property machine/);
  assert.match(broken((r) => (r.version = 2)).join(), /\$\.version/);
  assert.match(broken((r) => (r.sections[0].variants[0].summary.p99Us.median = 'fast')).join(), /p99Us\.median: expected number/);
  assert.match(broken((r) => (r.sections[0].variants[0].extra = 1)).join(), /unexpected property extra/);
  assert.match(broken((r) => (r.sections[0].variants[0].runs[0].ops = 0)).join(), /below the minimum/);
  assert.match(broken((r) => (r.targets[0].comparator = '>')).join(), /not one of/);
  assert.match(broken((r) => (r.machine.filesystem = 'ext4')).join(), /anyOf/);
  assert.deepEqual(broken((r) => (r.machine.filesystem = null)), []);
  assert.deepEqual(broken((r) => (r.sections[0].variants[0].ratio = null)), []);
});

test('validate: the supported subset of JSON Schema', () => {
  const schema = { type: 'object', required: ['a'], additionalProperties: { type: 'integer' }, properties: { a: { enum: ['x', 'y'] } } };
  assert.deepEqual(validate({ a: 'x', b: 3 }, schema), []);
  assert.equal(validate({ a: 'z' }, schema).length, 1);
  assert.equal(validate({ a: 'x', b: 3.5 }, schema).length, 1);
  assert.equal(validate([], schema).length, 1);
  assert.throws(() => validate(1, { $ref: '#/definitions/nope' }), /\$ref/);
});

test('collectTargets: judges the segmented log\'s targets from the sections and lists the stores\' as not measured', async () => {
  const report = await syntheticReport();
  const byId = new Map(report.targets.map((t) => [t.id, t]));
  assert.equal(byId.get('segments-one-at-a-time')?.met, true); // 3800 / 4000 = 0.95
  assert.ok(Math.abs((byId.get('segments-one-at-a-time')?.measured ?? 0) - 0.95) < 1e-9);
  assert.equal(byId.get('segments-256-at-once')?.met, true);
  assert.equal(byId.get('segments-open-1gib')?.measured, 45);
  assert.equal(byId.get('segments-open-1gib')?.met, true);
  assert.equal(byId.get('host-one-scope')?.met, null);
  assert.equal(byId.get('raft-1mib-bandwidth')?.met, null);
  const unjudged = collectTargets(report.sections, false).find((t) => t.id === 'segments-open-1gib');
  assert.equal(unjudged?.met, null);
  assert.equal(collectTargets([], true).every((t) => t.met === null), true);
});

test('renderMarkdown: machine first, targets in words, one escaped row per variant', async () => {
  const report = await syntheticReport();
  const md = renderMarkdown(report, { chart: 'chart.svg' });
  assert.ok(md.indexOf('## Machine') < md.indexOf('## Targets'));
  assert.ok(md.includes('![latency against throughput](chart.svg)'));
  assert.match(md, /\| durable 256 B appends one at a time, as a ratio to raw write \+ fdatasync \| segmented log \| >= 0\.900 × raw \| 0\.950 × raw \| MET \|/);
  assert.match(md, /NOT MEASURED/);
  assert.match(md, /3 met, 0 not met, 5 not measured/);
  // A '|' in a label is escaped, so each variant row keeps its column count.
  const rows = md.split('\n').filter((l) => l.startsWith('| seglog-256-x1 \\| label'));
  assert.equal(rows.length, 1);
  const header = md.split('\n').find((l) => l.startsWith('| Variant |')) ?? '';
  const cols = (l: string) => l.replace(/\\\|/g, '').split('|').length;
  assert.equal(cols(rows[0] ?? ''), cols(header));
  assert.match(md, /0\.950× \| *$/m);
  assert.match(md, /- seglog-none-x1 \| label: not durable/);
  assert.ok(!md.includes('Taken under load'));
  const loaded = renderMarkdown({ ...report, load: { start: 3, end: 1 }, machine: { ...report.machine, cpuCount: 2 } });
  assert.ok(loaded.includes('Taken under load'));
});

/** Checks that every tag opened is closed in order (a small well-formedness test for our SVG). */
function assertBalancedXml(svg: string): void {
  const stack: string[] = [];
  for (const m of svg.matchAll(/<(\/?)([a-zA-Z][\w:-]*)[^>]*?(\/?)>/g)) {
    const [, closing, name, selfClosing] = m;
    if (selfClosing === '/') continue;
    if (closing === '/') assert.equal(stack.pop(), name);
    else stack.push(name as string);
  }
  assert.deepEqual(stack, []);
  assert.ok(!/&(?!amp;|lt;|gt;|quot;|apos;)/.test(svg), 'every & is an entity');
}

test('renderChart: one series group and polyline per series, escaped text, points inside the plot', () => {
  const svg = renderChart(
    [
      { name: 'sync <every> append & co', points: [{ x: 4000, y: 250, label: '×1' }, { x: 120_000, y: 2000, label: '×256' }, { x: 40_000, y: 400 }] },
      { name: 'no sync', points: [{ x: 900_000, y: 1 }, { x: 0, y: 5 }] },
    ],
    { title: 'T "quoted"', xLabel: 'appends/s', yLabel: 'µs' },
  );
  assertBalancedXml(svg);
  assert.equal(svg.match(/<g class="series"/g)?.length, 2);
  assert.equal(svg.match(/<polyline/g)?.length, 1); // the second series keeps one valid point
  assert.equal(svg.match(/<circle/g)?.length, 4);
  assert.ok(svg.includes('sync &lt;every&gt; append &amp; co'));
  assert.ok(svg.includes('T &quot;quoted&quot;'));
  assert.ok(svg.includes('1 point(s) with a non-positive value left out'));
  const [, w, h] = /viewBox="0 0 (\d+) (\d+)"/.exec(svg) ?? [];
  for (const m of svg.matchAll(/<circle cx="([\d.]+)" cy="([\d.]+)"/g)) {
    assert.ok(Number(m[1]) >= 0 && Number(m[1]) <= Number(w));
    assert.ok(Number(m[2]) >= 0 && Number(m[2]) <= Number(h));
  }
  // Points along a series are joined in the order given (rising load), not sorted by throughput.
  const line = /<polyline[^>]*points="([^"]+)"/.exec(svg)?.[1]?.split(' ').map((p) => Number(p.split(',')[0]));
  assert.equal(line?.length, 3);
  assert.ok(line !== undefined && (line[0] as number) < (line[1] as number) && (line[2] as number) < (line[1] as number));
  assert.ok(renderChart([], { title: 't', xLabel: 'x', yLabel: 'y' }).includes('no data'));
  assert.equal(escapeXml(`<a href='x'>&</a>`), '&lt;a href=&apos;x&apos;&gt;&amp;&lt;/a&gt;');
  assert.deepEqual(decadeRange(4000, 900_000), [3, 6]);
  assert.deepEqual(decadeRange(100, 100), [2, 3]);
});

test('chartSeriesFromSection: one series per group, labelled by concurrency', async () => {
  const report = await syntheticReport();
  const series = chartSeriesFromSection(report.sections[0] as SectionResult);
  assert.deepEqual(series.map((s) => s.name), ['sync every append', 'no sync']);
  assert.deepEqual(series[0]?.points.map((p) => p.label), ['×1', '×256']);
  assertBalancedXml(renderChart(series, { title: 't', xLabel: 'x', yLabel: 'y' }));
});

test('Progress: silent unless the stream is a TTY; erases its line when done', () => {
  const written: string[] = [];
  const quiet = new Progress(100, { isTTY: false, write: (s) => written.push(s) });
  quiet.advance(50, 'x');
  quiet.finish();
  assert.equal(written.length, 0);
  const tty = new Progress(100, { isTTY: true, columns: 60, write: (s) => written.push(s) });
  tty.advance(25, 'sync methods, 4 KiB writes and a very long label that does not fit in the line');
  assert.equal(written.length, 1);
  assert.match(written[0] ?? '', /^\r\x1b\[K\[######-+\]  25% /);
  assert.ok(tty.line(60).length <= 60);
  tty.advance(1000);
  assert.match(tty.line(), /100%/);
  tty.finish();
  assert.equal(written.at(-1), '\r\x1b[K');
});

test('render --into: keeps the hand-written part, replaces what follows the marker, demotes headings', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'seglog-bench-test-'));
  try {
    const report = await syntheticReport();
    const doc = path.join(dir, 'doc.md');
    await writeFile(doc, `# Benchmarks\n\nhand-written\n\n${REPORT_MARKER}\n\nold generated text\n`);
    await spliceInto(doc, report, '<svg xmlns="http://www.w3.org/2000/svg"></svg>\n', path.join(dir, 'chart.svg'));
    const text = await readFile(doc, 'utf8');
    assert.ok(text.startsWith('# Benchmarks\n\nhand-written\n\n'));
    assert.ok(!text.includes('old generated text'));
    assert.ok(text.includes('## seglog benchmark report'));
    assert.ok(text.includes('### Machine'));
    assert.ok(text.includes('](chart.svg)'));
    assert.equal(await readFile(path.join(dir, 'chart.svg'), 'utf8'), '<svg xmlns="http://www.w3.org/2000/svg"></svg>\n');
    assert.ok(!/^# /m.test(renderEmbedded(report, undefined)));
    await writeFile(doc, 'no marker');
    await assert.rejects(spliceInto(doc, report, null, undefined), /has no line/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
