// Benchmark arithmetic: percentiles, medians, ratios and units.
//
// Owns: every number the reports derive from raw samples. Guarantees: one method per figure, stated
// here and in docs/benchmarks.md, and pure functions only (no clock, no I/O), so that tests can pin
// each rule exactly.
//
// - Percentiles use the nearest-rank method: the p-th percentile of n sorted samples is the sample
//   at rank ceil(p/100 * n) (1-based). It always answers a value that was observed; with fewer than
//   1000 samples p99.9 is therefore the maximum (reports carry the sample count so readers can tell).
// - The median of an even count is the mean of the two middle values.
// - Throughput is in MiB/s (2^20 bytes per second) and operations per second; latencies are kept in
//   nanoseconds and reported in microseconds.

/** Bytes in one MiB: every throughput in the reports is MiB/s (binary), never MB/s (10^6). */
export const MIB = 1024 * 1024;

/** Nanoseconds in one second / microsecond. */
export const NS_PER_S = 1e9;
export const NS_PER_US = 1e3;

/** median, min and max over the runs of one figure; n is how many runs it summarises. */
export interface Stat {
  median: number;
  min: number;
  max: number;
  n: number;
}

function assertFinite(values: ArrayLike<number>, what: string): void {
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    if (!Number.isFinite(v)) throw new RangeError(`${what}: sample ${i} is not a finite number (${v})`);
  }
}

/** Sorts a copy ascending (numeric, not lexicographic). */
export function sortedCopy(values: ArrayLike<number>): Float64Array {
  const copy = Float64Array.from(values);
  copy.sort();
  return copy;
}

/**
 * Nearest-rank percentile of samples that are already sorted ascending.
 * `p` is in percent, 0 < p <= 100. Throws on an empty sample.
 */
export function percentileSorted(sorted: ArrayLike<number>, p: number): number {
  if (!(p > 0 && p <= 100)) throw new RangeError(`percentile must be in (0, 100], got ${p}`);
  const n = sorted.length;
  if (n === 0) throw new RangeError('percentile of an empty sample');
  // The epsilon keeps p*n that is an integer in exact arithmetic from rounding up on a float error
  // (e.g. 99.9/100*1000 = 999.0000000000001).
  const rank = Math.max(1, Math.ceil((p / 100) * n - 1e-9));
  return sorted[Math.min(rank, n) - 1] as number;
}

/** Nearest-rank percentile of unsorted samples (see `percentileSorted`). */
export function percentile(values: ArrayLike<number>, p: number): number {
  assertFinite(values, 'percentile');
  return percentileSorted(sortedCopy(values), p);
}

/** Median: the middle value, or the mean of the two middle values for an even count. */
export function median(values: ArrayLike<number>): number {
  if (values.length === 0) throw new RangeError('median of an empty sample');
  assertFinite(values, 'median');
  const s = sortedCopy(values);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** The median, min and max of per-run values: the form every figure in a report takes. */
export function summarize(values: ArrayLike<number>): Stat {
  if (values.length === 0) throw new RangeError('summary of no runs');
  assertFinite(values, 'summarize');
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return { median: median(values), min, max, n: values.length };
}

/** value / baseline; a zero baseline has no ratio (throws rather than answer Infinity). */
export function ratio(value: number, baseline: number): number {
  if (!Number.isFinite(value) || !Number.isFinite(baseline)) throw new RangeError('ratio of a non-finite number');
  if (baseline === 0) throw new RangeError('ratio to a zero baseline');
  return value / baseline;
}

/**
 * Ratios paired by run: run i of the variant against run i of the baseline, which ran in the same
 * round and so saw the same disk. Pairing cancels the drift that a ratio of two medians keeps.
 */
export function pairedRatios(values: ArrayLike<number>, baselines: ArrayLike<number>): number[] {
  if (values.length !== baselines.length) {
    throw new RangeError(`paired ratio needs equal run counts (${values.length} vs ${baselines.length})`);
  }
  const out: number[] = [];
  for (let i = 0; i < values.length; i++) out.push(ratio(values[i] as number, baselines[i] as number));
  return out;
}

/**
 * Ratios to the best competitor, paired by run: run i of the variant against the highest of the
 * competitors' run i (all ran in the same round). A value of 1 or more in a run means the variant
 * was at least as fast as every competitor in that round.
 */
export function pairedRatiosToBest(values: ArrayLike<number>, competitors: readonly ArrayLike<number>[]): number[] {
  if (competitors.length === 0) throw new RangeError('a ratio to the best needs at least one competitor');
  const best: number[] = [];
  for (let i = 0; i < values.length; i++) {
    let b = -Infinity;
    for (const c of competitors) {
      if (c.length !== values.length) throw new RangeError(`paired ratio needs equal run counts (${values.length} vs ${c.length})`);
      b = Math.max(b, c[i] as number);
    }
    best.push(b);
  }
  return pairedRatios(values, best);
}

/** Operations per second from a count and an elapsed time in nanoseconds. */
export function perSecond(count: number, elapsedNs: number): number {
  if (!(elapsedNs > 0)) throw new RangeError(`elapsed time must be positive, got ${elapsedNs} ns`);
  return (count * NS_PER_S) / elapsedNs;
}

/** MiB per second from a byte count and an elapsed time in nanoseconds. */
export function mibPerSecond(bytes: number, elapsedNs: number): number {
  return perSecond(bytes, elapsedNs) / MIB;
}

/** Nanoseconds to microseconds. */
export function nsToUs(ns: number): number {
  return ns / NS_PER_US;
}

/** A byte size as people write it: 512 B, 4 KiB, 1 MiB, 1.5 GiB. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let u = 0;
  while (Math.abs(v) >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  const text = Number.isInteger(v) ? String(v) : v.toFixed(v < 10 ? 2 : 1).replace(/\.?0+$/, '');
  return `${text} ${units[u]}`;
}

/**
 * A measured number with about three significant figures and thousands separators:
 * 123456 → "123,456", 1234.5 → "1,235", 12.345 → "12.3", 0.98765 → "0.988"; integers below 100
 * keep no decimals (40 → "40").
 */
export function formatNumber(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  const abs = Math.abs(v);
  let digits: number;
  if (abs >= 100 || Number.isInteger(v)) digits = 0;
  else if (abs >= 10) digits = 1;
  else if (abs >= 1) digits = 2;
  else digits = 3;
  const fixed = v.toFixed(digits);
  const [int = '0', frac] = fixed.split('.');
  const sign = int.startsWith('-') ? '-' : '';
  const grouped = int.replace('-', '').replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${sign}${grouped}${frac === undefined ? '' : `.${frac}`}`;
}

/** "median (min–max)" of a Stat, each number formatted by `formatNumber`. */
export function formatStat(s: Stat, suffix = ''): string {
  if (s.n === 1 || s.min === s.max) return `${formatNumber(s.median)}${suffix}`;
  return `${formatNumber(s.median)}${suffix} (${formatNumber(s.min)}–${formatNumber(s.max)})`;
}
