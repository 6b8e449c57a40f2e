// Result objects: what a benchmark run produces, as plain JSON-ready data.
//
// Owns: the `BenchReport` shape (versioned; its JSON Schema is in ./schema.ts and must change with
// it), and the reduction of raw samples into per-run metrics and per-variant summaries.
// Guarantees: every figure is derived in one place with the methods of ./stats.ts; a summary is the
// median, min and max over runs; a ratio is paired by round (see `pairedRatios`).

import type { MachineInfo } from './machine.js';
import { mibPerSecond, MIB, nsToUs, pairedRatios, pairedRatiosToBest, percentileSorted, perSecond, sortedCopy, summarize, type Stat } from './stats.js';
import type { Budget, RunSample } from './timing.js';

/** Identifies a report document; a reader checks both before trusting the shape. */
export const REPORT_SCHEMA_ID = 'seglog-bench-report';
/** Bumped on any incompatible change of the shape (and of ./schema.ts with it). */
export const REPORT_VERSION = 1;

export type ParamValue = string | number | boolean;

/** The figures of one measured run of one variant. */
export interface RunMetrics {
  ops: number;
  records: number;
  bytes: number;
  elapsedMs: number;
  opsPerSec: number;
  recordsPerSec: number;
  /** MiB/s, 2^20 bytes per second. */
  mibPerSec: number;
  p50Us: number;
  p99Us: number;
  p999Us: number;
  maxUs: number;
}

/** Each figure as median (min–max) over the runs. */
export interface VariantSummary {
  opsPerSec: Stat;
  recordsPerSec: Stat;
  mibPerSec: Stat;
  p50Us: Stat;
  p99Us: Stat;
  p999Us: Stat;
  /** Total operations timed over all runs. */
  samples: number;
  /** The fewest operations in one run: p99.9 is the run's maximum when this is below 1000. */
  minOpsPerRun: number;
}

export interface VariantResult {
  id: string;
  label: string;
  /** The series this variant belongs to in a chart (e.g. its flush granularity), or null. */
  group: string | null;
  params: Record<string, ParamValue>;
  runs: RunMetrics[];
  summary: VariantSummary;
  /** records/s of this variant over the section's baseline, paired by round; null for none. */
  ratio: { baseline: string; recordsPerSec: Stat } | null;
  notes: string[];
}

/** The units a Measurement may be in: a duration, or a memory size (resident memory growth). */
export type MeasurementUnit = 'ms' | 'MiB' | 'KiB' | 'count';

/**
 * A figure measured once per run (an open time, a resident-memory growth), not as a stream of
 * operations.
 */
export interface Measurement {
  id: string;
  label: string;
  unit: MeasurementUnit;
  params: Record<string, ParamValue>;
  runs: number[];
  summary: Stat;
  notes: string[];
}

export interface SectionResult {
  id: string;
  title: string;
  description: string;
  /** Measured rounds; in each, every variant ran once, in an order rotated by one per round. */
  rounds: number;
  /** Rounds run first and discarded (files created, caches and JIT warm). */
  warmupRounds: number;
  /** Slices each variant's run was cut into within a round, interleaved and merged back. */
  slices: number;
  budget: Budget;
  baseline: string | null;
  variants: VariantResult[];
  measurements: Measurement[];
  notes: string[];
}

/** One performance target, and whether this run met it (null: not measured in this run). */
export interface TargetCheck {
  id: string;
  /** What the target is about: the store or tool it concerns, e.g. "segmented log". */
  source: string;
  description: string;
  /** measured >= threshold, measured < threshold (strictly below), or measured <= threshold (at most). */
  comparator: '>=' | '<' | '<=';
  threshold: number;
  unit: string;
  measured: number | null;
  met: boolean | null;
  note: string;
}

export interface BenchReport {
  schema: typeof REPORT_SCHEMA_ID;
  version: typeof REPORT_VERSION;
  /** The command line that produced it, e.g. "seglog bench fsync --quick". */
  command: string;
  quick: boolean;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
  units: { latency: 'us'; throughput: 'MiB/s'; rate: 'per second'; size: 'bytes' };
  machine: MachineInfo;
  /** Machine load while it ran: the 1-minute load average at the start and at the end. */
  load: { start: number; end: number };
  sections: SectionResult[];
  targets: TargetCheck[];
  notes: string[];
}

/** Reduces one run's raw sample to its figures. */
export function toRunMetrics(sample: RunSample): RunMetrics {
  if (sample.ops < 1) throw new RangeError('a run must complete at least one operation');
  const sorted = sortedCopy(sample.latenciesNs.subarray(0, sample.ops));
  return {
    ops: sample.ops,
    records: sample.records,
    bytes: sample.bytes,
    elapsedMs: sample.elapsedNs / 1e6,
    opsPerSec: perSecond(sample.ops, sample.elapsedNs),
    recordsPerSec: perSecond(sample.records, sample.elapsedNs),
    mibPerSec: mibPerSecond(sample.bytes, sample.elapsedNs),
    p50Us: nsToUs(percentileSorted(sorted, 50)),
    p99Us: nsToUs(percentileSorted(sorted, 99)),
    p999Us: nsToUs(percentileSorted(sorted, 99.9)),
    maxUs: nsToUs(sorted[sorted.length - 1] as number),
  };
}

/** Median (min–max) of each figure over the runs. */
export function summarizeRuns(runs: readonly RunMetrics[]): VariantSummary {
  if (runs.length === 0) throw new RangeError('no runs to summarise');
  const pick = (f: (r: RunMetrics) => number): Stat => summarize(runs.map(f));
  return {
    opsPerSec: pick((r) => r.opsPerSec),
    recordsPerSec: pick((r) => r.recordsPerSec),
    mibPerSec: pick((r) => r.mibPerSec),
    p50Us: pick((r) => r.p50Us),
    p99Us: pick((r) => r.p99Us),
    p999Us: pick((r) => r.p999Us),
    samples: runs.reduce((n, r) => n + r.ops, 0),
    minOpsPerRun: Math.min(...runs.map((r) => r.ops)),
  };
}

/** records/s of `variant` over `baseline`, paired run by run (both must have run the same rounds). */
export function ratioToBaseline(variant: readonly RunMetrics[], baseline: readonly RunMetrics[]): Stat {
  return summarize(
    pairedRatios(
      variant.map((r) => r.recordsPerSec),
      baseline.map((r) => r.recordsPerSec),
    ),
  );
}

/** records/s of `variant` over the fastest of `competitors` in the same round, paired run by run. */
export function ratioToBest(variant: readonly RunMetrics[], competitors: readonly (readonly RunMetrics[])[]): Stat {
  return summarize(
    pairedRatiosToBest(
      variant.map((r) => r.recordsPerSec),
      competitors.map((c) => c.map((r) => r.recordsPerSec)),
    ),
  );
}

/** A Measurement from per-run values (at least one). */
export function measurement(o: {
  id: string;
  label: string;
  unit: MeasurementUnit;
  runs: number[];
  params?: Record<string, ParamValue>;
  notes?: string[];
}): Measurement {
  return { id: o.id, label: o.label, unit: o.unit, params: o.params ?? {}, runs: o.runs, summary: summarize(o.runs), notes: o.notes ?? [] };
}

/** Bytes to MiB (the unit of memory measurements). */
export function bytesToMiB(bytes: number): number {
  return bytes / MIB;
}

/**
 * Judges a measured value against a target; `met` is null when it was not measured, or when
 * `judge` is false (measured under conditions the target does not speak of, e.g. a smaller log).
 */
export function checkTarget(t: Omit<TargetCheck, 'met'>, judge = true): TargetCheck {
  let met: boolean | null = null;
  if (t.measured !== null && judge) met = t.comparator === '>=' ? t.measured >= t.threshold : t.comparator === '<=' ? t.measured <= t.threshold : t.measured < t.threshold;
  return { ...t, met };
}
