// The section runner: runs every variant of a comparison several times, interleaved.
//
// Owns: `Variant` (one thing to measure), `runSection` and `measureRepeated`. Guarantees:
// - Interleaving: a section runs in rounds; in each round every variant runs once, and the order
//   rotates by one per round (round r starts at variant r mod n). A disk whose speed drifts over
//   minutes therefore slows every variant alike, and no variant always runs first or last. With
//   `slices` > 1 each variant's run is cut into shorter slices interleaved the same way (slice s
//   of round r starts at variant r+s mod n) and merged back into one run per round.
// - Warm-up rounds run the same way with a shorter budget and are discarded.
// - A ratio pairs each variant's run with the baseline's run from the same round.
// - Teardown runs for every variant that was set up, also when a run throws.

import type { Progress } from './progress.js';
import {
  ratioToBaseline,
  summarizeRuns,
  toRunMetrics,
  type Measurement,
  type ParamValue,
  type RunMetrics,
  type SectionResult,
  type VariantResult,
} from './report.js';
import { summarize } from './stats.js';
import { nowNs, type Budget, type RunSample } from './timing.js';

/** One thing to measure: a workload against one implementation, with its parameters. */
export interface Variant {
  id: string;
  label: string;
  /** Chart series (e.g. flush granularity); variants without one are left out of charts. */
  group?: string;
  params?: Record<string, ParamValue>;
  /** Overrides of the section's budget (e.g. a cap on 1 MiB writes). */
  budget?: Partial<Budget>;
  /** Untimed, once before the first round. */
  setup?(): Promise<void>;
  /** One measured run: do untimed preparation first, then time with `closedLoop`. */
  run(budget: Budget): Promise<RunSample>;
  /** Untimed, once after the last round (also after a failure). */
  teardown?(): Promise<void>;
  notes?: string[];
}

export interface SectionPlan {
  id: string;
  title: string;
  description: string;
  variants: Variant[];
  /** Variant id that ratios are taken against. */
  baseline?: string;
  rounds: number;
  warmupRounds?: number;
  /**
   * Slices per round (default 1): each variant's run in a round is split into this many shorter
   * runs, interleaved variant by variant, and merged back into one run. Finer interleaving leaves
   * less room for drift between the variants of one round.
   */
  slices?: number;
  budget: Budget;
  notes?: string[];
}

/** The order of variants in round `r`: the list rotated left by r mod n. */
export function roundOrder<T>(items: readonly T[], r: number): T[] {
  const n = items.length;
  if (n === 0) return [];
  const k = ((r % n) + n) % n;
  return [...items.slice(k), ...items.slice(0, k)];
}

/** Planned wall time of a section in ms (for the progress bar). */
export function plannedMs(plan: SectionPlan): number {
  const warm = plan.warmupRounds ?? 1;
  let total = 0;
  // Slicing splits a run's time, it does not add to it.
  for (const v of plan.variants) {
    const d = v.budget?.durationMs ?? plan.budget.durationMs;
    total += d * plan.rounds + warmupBudget({ ...plan.budget, ...v.budget }).durationMs * warm;
  }
  return total;
}

/** One slice of a run's budget: a 1/k share of its time and operations (at least one op). */
export function sliceBudget(b: Budget, k: number): Budget {
  if (k <= 1) return b;
  return {
    durationMs: b.durationMs / k,
    maxOps: Math.max(1, Math.ceil(b.maxOps / k)),
    minOps: Math.ceil(b.minOps / k),
  };
}

/** Merges the slices of one run: counts and elapsed times add up, latencies are pooled. */
export function mergeSamples(parts: readonly RunSample[]): RunSample {
  if (parts.length === 0) throw new RangeError('no samples to merge');
  if (parts.length === 1) return parts[0] as RunSample;
  let ops = 0;
  let records = 0;
  let bytes = 0;
  let elapsedNs = 0;
  for (const p of parts) {
    ops += p.ops;
    records += p.records;
    bytes += p.bytes;
    elapsedNs += p.elapsedNs;
  }
  const latenciesNs = new Float64Array(ops);
  let at = 0;
  for (const p of parts) {
    latenciesNs.set(p.latenciesNs.subarray(0, p.ops), at);
    at += p.ops;
  }
  return { ops, records, bytes, elapsedNs, latenciesNs };
}

function warmupBudget(b: Budget): Budget {
  return {
    durationMs: Math.max(1, Math.round(b.durationMs / 4)),
    maxOps: Math.max(1, Math.ceil(b.maxOps / 4)),
    minOps: Math.min(b.minOps, 1),
  };
}

export async function runSection(plan: SectionPlan, progress?: Progress): Promise<SectionResult> {
  if (plan.rounds < 1) throw new RangeError('a section needs at least one round');
  if (!(Number.isInteger(plan.slices ?? 1) && (plan.slices ?? 1) >= 1)) throw new RangeError('slices must be an integer >= 1');
  const ids = new Set<string>();
  for (const v of plan.variants) {
    if (ids.has(v.id)) throw new RangeError(`duplicate variant id ${v.id} in section ${plan.id}`);
    ids.add(v.id);
  }
  if (plan.baseline !== undefined && !ids.has(plan.baseline)) {
    throw new RangeError(`baseline ${plan.baseline} is not a variant of section ${plan.id}`);
  }
  const warmupRounds = plan.warmupRounds ?? 1;
  const runs = new Map<string, RunMetrics[]>(plan.variants.map((v) => [v.id, []]));
  const setUp: Variant[] = [];
  const startUnits = progress?.done ?? 0;
  try {
    for (const v of plan.variants) {
      progress?.label(`${plan.title}: setting up ${v.label}`);
      await v.setup?.();
      setUp.push(v);
    }
    const slices = plan.slices ?? 1;
    for (let r = 0; r < warmupRounds + plan.rounds; r++) {
      const warm = r < warmupRounds;
      const parts = new Map<string, RunSample[]>(plan.variants.map((v) => [v.id, []]));
      const sliceCount = warm ? 1 : slices;
      for (let s = 0; s < sliceCount; s++) {
        for (const v of roundOrder(plan.variants, r + s)) {
          const budget: Budget = { ...plan.budget, ...v.budget };
          const b = warm ? warmupBudget(budget) : sliceBudget(budget, slices);
          progress?.label(`${plan.title}: ${v.label} (${warm ? 'warm-up' : `round ${r - warmupRounds + 1}/${plan.rounds}`})`);
          parts.get(v.id)?.push(await v.run(b));
          progress?.advance(b.durationMs);
        }
      }
      if (!warm) for (const v of plan.variants) runs.get(v.id)?.push(toRunMetrics(mergeSamples(parts.get(v.id) ?? [])));
    }
    progress?.settle(startUnits + plannedMs(plan));
  } finally {
    for (const v of setUp.reverse()) await v.teardown?.();
  }
  const baselineRuns = plan.baseline === undefined ? undefined : runs.get(plan.baseline);
  const variants: VariantResult[] = plan.variants.map((v) => {
    const own = runs.get(v.id) ?? [];
    return {
      id: v.id,
      label: v.label,
      group: v.group ?? null,
      params: v.params ?? {},
      runs: own,
      summary: summarizeRuns(own),
      ratio:
        baselineRuns === undefined || plan.baseline === undefined
          ? null
          : { baseline: plan.baseline, recordsPerSec: ratioToBaseline(own, baselineRuns) },
      notes: v.notes ?? [],
    };
  });
  return {
    id: plan.id,
    title: plan.title,
    description: plan.description,
    rounds: plan.rounds,
    warmupRounds,
    slices: plan.slices ?? 1,
    budget: plan.budget,
    baseline: plan.baseline ?? null,
    variants,
    measurements: [],
    notes: plan.notes ?? [],
  };
}

/**
 * Times `fn` `runs` times (after `warmup` discarded runs) and summarises the durations in ms.
 * For figures that are one duration per run, such as the open time of a log.
 */
export async function measureRepeated(options: {
  id: string;
  label: string;
  runs: number;
  warmup?: number;
  params?: Record<string, ParamValue>;
  notes?: string[];
  /** Untimed preparation before each run (e.g. closing the previous handle). */
  before?: () => Promise<void>;
  fn: () => Promise<void>;
  after?: () => Promise<void>;
}): Promise<Measurement> {
  const durations: number[] = [];
  for (let i = 0; i < (options.warmup ?? 0) + options.runs; i++) {
    await options.before?.();
    const t0 = nowNs();
    await options.fn();
    const ms = (nowNs() - t0) / 1e6;
    await options.after?.();
    if (i >= (options.warmup ?? 0)) durations.push(ms);
  }
  return {
    id: options.id,
    label: options.label,
    unit: 'ms',
    params: options.params ?? {},
    runs: durations,
    summary: summarize(durations),
    notes: options.notes ?? [],
  };
}
