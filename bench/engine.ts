// The engine benchmarks: seglog's segmented log at each flush granularity, and the segmented log's
// targets (durable appends against a raw write+fdatasync loop, and the open time of a large log).
//
// Owns: the section plans that drive `openSegmentedLog`, and the loader that finds it. Guarantees:
// the engine is driven only through its public API (docs/usage.md); every
// engine figure sits in a section with its raw baseline, measured in the same interleaved rounds;
// each run starts from a new, empty log (opened outside the timed loop) so runs are alike and disk
// use stays bounded. The segments module is loaded at run time: when it is missing, the engine
// sections are skipped with a note rather than failing the raw report.

import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { rawAppendVariant, type SuiteConfig } from './raw.js';
import * as raw from './rawfs.js';
import type { Measurement } from './harness/report.js';
import { measureRepeated, type SectionPlan, type Variant } from './harness/runner.js';
import { formatBytes, MIB } from './harness/stats.js';
import { closedLoop, nowNs, type Budget, type RunSample } from './harness/timing.js';

import type { SyncPolicy } from '../segments/sync-policy.js';

// The one definition of the sync policies is the engine's (a type-only import: erased at run
// time, so the engine is still loaded on demand below). `policyName` and `policyParam` name each
// policy; a new policy is a compile error in them until it is named.
export type { SyncPolicy };

/** The part of the segmented log's API the benchmarks use (docs/usage.md). */

export interface BenchLog {
  readonly firstIndex: number;
  readonly endIndex: number;
  append(records: Uint8Array[]): Promise<number>;
  read(from: number, limit: number): Promise<Uint8Array[]>;
  sync(): Promise<void>;
  close(): Promise<void>;
}

export type OpenLog = (dir: string, options?: { sync?: SyncPolicy; segmentBytes?: number }) => Promise<BenchLog>;

/** Finds `openSegmentedLog` in the compiled segments module; null when it does not exist (yet). */
export async function loadEngine(): Promise<{ open: OpenLog } | { missing: string }> {
  const url = new URL('../segments/index.js', import.meta.url);
  try {
    const mod = (await import(url.href)) as { openSegmentedLog?: unknown };
    if (typeof mod.openSegmentedLog !== 'function') return { missing: 'segments/index.js exports no openSegmentedLog' };
    return { open: mod.openSegmentedLog as OpenLog };
  } catch (err) {
    return { missing: `cannot load ${url.pathname}: ${err instanceof Error ? err.message : String(err)}` };
  }
}

export function policyName(p: SyncPolicy): string {
  if (p === 'always') return 'sync every append';
  if (p === 'none') return 'no sync';
  if ('everyBytes' in p) return `sync every ${formatBytes(p.everyBytes)}`;
  if ('everyMs' in p) return `sync every ${p.everyMs} ms`;
  return unnamed(p);
}

function policyParam(p: SyncPolicy): string {
  if (typeof p === 'string') return p;
  if ('everyBytes' in p) return `everyBytes:${p.everyBytes}`;
  if ('everyMs' in p) return `everyMs:${p.everyMs}`;
  return unnamed(p);
}

/** Reached only by a policy the two functions above do not name yet: a compile error. */
function unnamed(p: never): never {
  throw new TypeError(`no name for sync policy ${JSON.stringify(p)}`);
}

/**
 * `concurrency` appenders, each appending one `size`-byte record per call and waiting for it, to one
 * log under `policy`. Under 'always' a resolved append is durable; under the others it is only
 * acknowledged (the policy's window bounds what a crash may lose).
 */
export function engineAppendVariant(o: {
  open: OpenLog;
  id: string;
  label?: string;
  dir: string;
  size: number;
  policy: SyncPolicy;
  concurrency: number;
  maxBytesPerRun: number;
  group?: string;
}): Variant {
  const record = raw.payload(o.size, 7);
  let log: BenchLog | null = null;
  const closeLog = async (): Promise<void> => {
    if (log !== null) await log.close();
    log = null;
  };
  const v: Variant = {
    id: o.id,
    label: o.label ?? `seglog, ${policyName(o.policy)}, ${o.concurrency} appender${o.concurrency === 1 ? '' : 's'}, ${formatBytes(o.size)}`,
    params: { size: o.size, sync: policyParam(o.policy), concurrency: o.concurrency },
    budget: { maxOps: Math.max(8, Math.floor(o.maxBytesPerRun / o.size)) },
    async run(budget: Budget): Promise<RunSample> {
      await closeLog();
      await rm(o.dir, { recursive: true, force: true });
      await mkdir(o.dir, { recursive: true });
      const l = await o.open(o.dir, { sync: o.policy });
      log = l;
      return closedLoop({
        concurrency: o.concurrency,
        budget,
        bytesPerOp: o.size,
        op: () => l.append([record]),
      });
    },
    async teardown() {
      await closeLog();
      await rm(o.dir, { recursive: true, force: true });
    },
  };
  if (o.group !== undefined) v.group = o.group;
  return v;
}

/** How a section of this file is run: the suite's rounds, warm-up, slices and budget. */
function pacing(cfg: SuiteConfig): Pick<SectionPlan, 'rounds' | 'warmupRounds' | 'slices' | 'budget'> {
  return { rounds: cfg.rounds, warmupRounds: cfg.warmupRounds, slices: cfg.slices, budget: cfg.budget };
}

/** The flush-granularity section of `seglog bench fsync`: every policy at each concurrency. */
export function granularitySection(cfg: SuiteConfig, open: OpenLog): SectionPlan {
  const size = 256;
  const dir = path.join(cfg.root, 'granularity');
  const levels = cfg.quick ? [1, 16, 256] : [1, 16, 64, 256];
  const policies: SyncPolicy[] = ['always', { everyBytes: 64 * 1024 }, { everyMs: 5 }, 'none'];
  const variants: Variant[] = [
    rawAppendVariant({
      id: 'raw-fdatasync-256',
      label: 'raw write + fdatasync, 256 B, 1 writer',
      dir,
      size,
      method: 'fdatasync',
      maxBytesPerRun: cfg.maxBytesPerRun,
      group: 'raw write + fdatasync',
    }),
  ];
  for (const policy of policies) {
    for (const c of levels) {
      variants.push(
        engineAppendVariant({
          open,
          id: `seglog-${policyParam(policy)}-x${c}`,
          dir: path.join(dir, `${policyParam(policy).replace(/[^A-Za-z0-9]/g, '_')}-${c}`),
          size,
          policy,
          concurrency: c,
          maxBytesPerRun: cfg.maxBytesPerRun,
          group: policyName(policy),
        }),
      );
    }
  }
  return {
    id: 'flush-granularity',
    title: 'seglog appends at each flush granularity (256 B records)',
    description:
      'N appenders each call `append([record])` on one log and wait for it before the next. "sync every append" ' +
      'resolves after the fdatasync that covers the record (concurrent appends share one writev and one sync: group ' +
      'commit); the other policies resolve before the sync. Ratios are appends/s against the raw baseline: one writer ' +
      'appending 256 B with write + fdatasync to a growing file (the first row).',
    variants,
    baseline: 'raw-fdatasync-256',
    notes: [
      'Under "sync every 64 KiB", "sync every 5 ms" and "no sync" an append resolves once written, before its sync: ' +
        'those latencies are acknowledgement latencies, not durable ones; a crash may lose up to the policy\'s window.',
    ],
    ...pacing(cfg),
  };
}

/** Durable 256-byte appends one at a time, 16 and 256 at once, against raw write+fdatasync. */
export function durableSmallSection(cfg: SuiteConfig, open: OpenLog): SectionPlan {
  const dir = path.join(cfg.root, 'durable-256');
  const variants: Variant[] = [
    rawAppendVariant({
      id: 'raw-256',
      label: 'raw write + fdatasync, 256 B, 1 writer',
      dir,
      size: 256,
      method: 'fdatasync',
      maxBytesPerRun: cfg.maxBytesPerRun,
    }),
    ...[1, 16, 256].map((c) =>
      engineAppendVariant({
        open,
        id: `seglog-256-x${c}`,
        label: `seglog durable append, 256 B, ${c === 1 ? 'one at a time' : `${c} appenders at once`}`,
        dir: path.join(dir, `seglog-${c}`),
        size: 256,
        policy: 'always',
        concurrency: c,
        maxBytesPerRun: cfg.maxBytesPerRun,
      }),
    ),
  ];
  return {
    id: 'durable-256',
    title: 'Durable appends, 256 B records',
    description:
      'seglog under its default policy (sync every append): an append resolves only after the fdatasync that covers it. ' +
      'The baseline is the raw loop the targets name: one writer, `write` of 256 B at the end of a file that starts ' +
      'empty each run, then `fdatasync`, repeated.',
    variants,
    baseline: 'raw-256',
    ...pacing(cfg),
  };
}

/** 1 MiB durable appends against raw 1 MiB write+fdatasync. */
export function durableLargeSection(cfg: SuiteConfig, open: OpenLog): SectionPlan {
  const dir = path.join(cfg.root, 'durable-1m');
  return {
    id: 'durable-1mib',
    title: 'Durable appends, 1 MiB records',
    description:
      'One writer. seglog appends one 1 MiB record per call under sync every append; the baseline writes 1 MiB at the ' +
      'end of a growing file and fdatasyncs it. MiB/s is the figure that matters here.',
    variants: [
      rawAppendVariant({ id: 'raw-1mib', label: 'raw write + fdatasync, 1 MiB', dir, size: MIB, method: 'fdatasync', maxBytesPerRun: cfg.maxBytesPerRun }),
      engineAppendVariant({
        open,
        id: 'seglog-1mib-x1',
        label: 'seglog durable append, 1 MiB, one at a time',
        dir: path.join(dir, 'seglog'),
        size: MIB,
        policy: 'always',
        concurrency: 1,
        maxBytesPerRun: cfg.maxBytesPerRun,
      }),
    ],
    baseline: 'raw-1mib',
    ...pacing(cfg),
  };
}

/**
 * Builds a log of about `totalBytes` of `recordSize`-byte records (sync 'none', batches of records
 * per append, one sync at the end), then times open + first read `runs` times.
 */
export async function openTimeMeasurement(o: {
  open: OpenLog;
  dir: string;
  totalBytes: number;
  recordSize: number;
  runs: number;
  onProgress?: (text: string) => void;
}): Promise<{ build: Measurement; open: Measurement; openLast: Measurement }> {
  await rm(o.dir, { recursive: true, force: true });
  await mkdir(o.dir, { recursive: true });
  const count = Math.floor(o.totalBytes / o.recordSize);
  const batch = Math.max(1, Math.floor((1 << 20) / o.recordSize));
  const records = Array.from({ length: batch }, (_, i) => raw.payload(o.recordSize, i + 1));
  const t0 = nowNs();
  const log = await o.open(o.dir, { sync: 'none' });
  for (let done = 0; done < count; done += batch) {
    const n = Math.min(batch, count - done);
    await log.append(n === batch ? records : records.slice(0, n));
    if ((done / batch) % 64 === 0) o.onProgress?.(`building a ${formatBytes(o.totalBytes)} log: ${Math.round((100 * done) / count)}%`);
  }
  await log.sync();
  await log.close();
  const buildMs = (nowNs() - t0) / 1e6;
  const params = { bytes: o.totalBytes, records: count, recordSize: o.recordSize };
  const build: Measurement = {
    id: 'build-log',
    label: `build the log: ${formatBytes(o.totalBytes)} as ${count.toLocaleString('en-US')} records of ${formatBytes(o.recordSize)}, one sync`,
    unit: 'ms',
    params,
    runs: [buildMs],
    summary: { median: buildMs, min: buildMs, max: buildMs, n: 1 },
    notes: [`${((o.totalBytes / MIB) / (buildMs / 1000)).toFixed(0)} MiB/s (sync 'none', ${batch} records per append, fdatasync at the end).`],
  };
  /** Opens the log, reads one record (`pick`), checks it (`ok`); `warning` is noted when a check fails. */
  const measureOpen = async (m: { id: string; label: string; note: string; pick: (l: BenchLog) => number; ok: (l: BenchLog, got: Uint8Array[]) => boolean; warning: string }): Promise<Measurement> => {
    let handle: BenchLog | null = null;
    let allOk = true;
    const measured = await measureRepeated({
      id: m.id,
      label: m.label,
      runs: o.runs,
      warmup: 1,
      params,
      notes: [m.note],
      fn: async () => {
        handle = await o.open(o.dir);
        const got = await handle.read(m.pick(handle), 1);
        if (!m.ok(handle, got)) allOk = false;
      },
      after: async () => {
        const h = handle as BenchLog | null;
        if (h !== null) await h.close();
        handle = null;
      },
    });
    if (!allOk) measured.notes.push(m.warning);
    return measured;
  };
  const open = await measureOpen({
    id: 'open-log',
    label: `openSegmentedLog + read of the first record, ${formatBytes(o.totalBytes)} log`,
    note: 'page cache warm (the log was just written or opened); a cold-cache open after a reboot reads more from disk.',
    pick: (l) => l.firstIndex,
    ok: (l, first) => first.length === 1 && l.endIndex - l.firstIndex === count,
    warning: 'WARNING: the reopened log did not hold every record built, or its first read came back empty.',
  });
  const openLast = await measureOpen({
    id: 'open-log-read-last',
    label: `openSegmentedLog + read of the last record, ${formatBytes(o.totalBytes)} log`,
    note: 'not a target: shows whether open defers work that the first read of a late segment then pays.',
    pick: (l) => l.endIndex - 1,
    ok: (_l, last) => last.length === 1 && last[0]?.length === o.recordSize,
    warning: 'WARNING: the last record did not read back at its size.',
  });
  return { build, open, openLast };
}
