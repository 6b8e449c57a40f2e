// `seglog bench stores`: the host store, the Raft log and the payload store beside their peers and
// their raw floors, in one run, and a large Raft snapshot under an RSS watch.
//
// Owns: the run parameters (`storesConfig`), the section plans and measurements, and the targets
// of the three stores judged from them (`collectStoreTargets`). Guarantees:
// - every comparison is one section whose variants run interleaved round by round (runner.ts), with
//   the raw baseline in the same rounds, and every ratio is paired by round;
// - seglog, better-sqlite3 and lmdb get byte-identical input (workloads.ts);
// - a store of seglog's that is not built yet has no row and its targets say
//   "NOT MEASURED (store not built)"; a missing peer says "NOT MEASURED (peer not installed)";
//   nothing else ever stands in for either;
// - opens and memory are measured in child processes (child.ts), 5 runs or more, interleaved;
// - the Raft snapshot section drives seglog's own node and state machine, with a bench-only plugin
//   in place of the KV example (snapshot-bench.ts says why), and its report says so.

import { mkdir, readdir, rm, stat, statfs } from 'node:fs/promises';
import path from 'node:path';
import { CommitBatch } from '../../lib/host/batch.js';
import type { HostStore, ScopeRef } from '../../lib/host/types.js';
import { groupDirectory } from '../../lib/raft/node.js';
import type { Progress } from '../harness/progress.js';
import { bytesToMiB, checkTarget, measurement, ratioToBaseline, ratioToBest, type Measurement, type SectionResult, type TargetCheck } from '../harness/report.js';
import { plannedMs, roundOrder, runSection, type SectionPlan, type Variant } from '../harness/runner.js';
import { formatBytes, MIB, pairedRatios, summarize } from '../harness/stats.js';
import { sideBySide, type StoreImplementation } from '../harness/store-workload.js';
import { nowNs, type Budget } from '../harness/timing.js';
import { engineAppendVariant, type OpenLog } from '../engine.js';
import { rawAppendVariant } from '../raw.js';
import { payload } from '../rawfs.js';
import { runChild, type ChildTask, type HostOpenResult, type PayloadRssResult, type RaftOpenResult } from './child.js';
import { snapshotRssGrowth, type SnapshotRssResult } from './snapshot-bench.js';
import { RAFT_NODE_GROUPS, raftGroupsMeasurements, type RaftGroupsCreateResult, type RaftGroupsOpenResult } from './groups-bench.js';
import { pgHostSection, type BenchPostgres } from './host-pg.js';
import { IMPL_LABEL, type Available, type ImplName } from './impls.js';
import { getVariant, payloadBudget, putVariant, rawReadVariant, rawWriteFsyncVariant } from './payload-bench.js';
import type { SeglogStores } from './seglog.js';
import { appendDurably, hostCommitWorkload, normalEntry, raftAppendWorkload, type RaftNodeHandle } from './workloads.js';

export interface StoresConfig {
  quick: boolean;
  root: string;
  rounds: number;
  warmupRounds: number;
  slices: number;
  budget: Budget;
  /** Bytes one run of a large-record variant may write. */
  maxBytesPerRun: number;
  /** Scopes in the realm whose open is measured (the target is stated for 10,000). */
  realmScopes: number;
  /** Scopes of the second, larger realm measured the same way (0: none; the target is stated for 100,000). */
  realmScopesLarge: number;
  /** Size of the Raft log whose cold open is measured. */
  logBytes: number;
  /** Size of one payload in the put/get sections. */
  payloadBytes: number;
  /** Size of the payload of the large put/get sections (the seed's ordinary case is 33 MB). */
  largePayloadBytes: number;
  /** Workers at once in the concurrent payload sections (besides one). */
  payloadConcurrency: readonly number[];
  /** Bytes one run of a concurrent payload variant may move. */
  concurrentBytesPerRun: number;
  /** Size of the payload whose RSS growth is measured (the memory target is judged at 1 GiB). */
  bigPayloadBytes: number;
  /** Value bytes of the Raft state whose snapshot's RSS growth is measured (the target is stated for 1 GiB). */
  snapshotBytes: number;
  /** Runs of each child-process measurement (at least 5). */
  childRuns: number;
  /**
   * A fresh process for every run of a child-process measurement (full runs), or one process per
   * implementation doing all its runs (--quick: process starts dominate a quick run on a busy
   * machine; then only the first open of each is in a fresh process).
   */
  processPerRun: boolean;
  /** Run only these sections (ids of STORES_SECTION_IDS, `--only`); every section when absent. */
  only?: readonly string[];
}

/** True when `cfg` runs the section `id`. */
export function runsSection(cfg: Pick<StoresConfig, 'only'>, id: string): boolean {
  return cfg.only === undefined || cfg.only.includes(id);
}

export function storesConfig(root: string, quick: boolean, rounds: number, overrides: Partial<StoresConfig> = {}): StoresConfig {
  const base: StoresConfig = quick
    ? {
        quick,
        root,
        rounds,
        warmupRounds: 1,
        slices: 2,
        budget: { durationMs: 40, maxOps: 1_000_000, minOps: 5 },
        maxBytesPerRun: 16 * MIB,
        realmScopes: 1000,
        realmScopesLarge: 0,
        logBytes: 32 * MIB,
        payloadBytes: 4 * MIB,
        largePayloadBytes: 8 * MIB,
        payloadConcurrency: [4, 16],
        concurrentBytesPerRun: 32 * MIB,
        bigPayloadBytes: 32 * MIB,
        snapshotBytes: 32 * MIB,
        childRuns: 5,
        processPerRun: false,
      }
    : {
        quick,
        root,
        rounds,
        warmupRounds: 1,
        slices: 5,
        budget: { durationMs: 600, maxOps: 2_000_000, minOps: 20 },
        maxBytesPerRun: 128 * MIB,
        realmScopes: 10_000,
        realmScopesLarge: 100_000,
        logBytes: 1024 * MIB,
        payloadBytes: 16 * MIB,
        largePayloadBytes: 33 * MIB,
        payloadConcurrency: [4, 16],
        concurrentBytesPerRun: 128 * MIB,
        bigPayloadBytes: 1024 * MIB,
        snapshotBytes: 1024 * MIB,
        childRuns: 5,
        processPerRun: true,
      };
  return { ...base, ...overrides };
}

export interface StoresDeps {
  seglog: SeglogStores;
  host: Available<HostStore>;
  raft: Available<RaftNodeHandle>;
  /** The PostgreSQL server of the run (the host-pg section), or null when there is none. */
  pg?: BenchPostgres | null;
  /**
   * The bare segmented log (`openSegmentedLog`), the one-writer commit path's primitive: measured
   * beside the host store's one-writer commits. Null or absent: those rows are left out, with a note.
   */
  segments?: OpenLog | null;
}

/** The bare segmented log's one-appender rows of the host-commits section, by record size. */
export const PRIMITIVE_ROWS = [256, 300].map((size) => ({ id: `segments-${size}`, size }));

function missingNotes(what: string, missing: Partial<Record<ImplName, string>>): string[] {
  return (Object.entries(missing) as [ImplName, string][]).map(([name, why]) => `${IMPL_LABEL[name]} (${what}): ${why}`);
}

// ---- host store ----

export function hostCommitSection(cfg: StoresConfig, impls: Available<HostStore>, segments: OpenLog | null = null): SectionPlan {
  const dir = path.join(cfg.root, 'host-commits');
  // The primitive a one-writer commit stands on: one append to a bare segmented log, synced.
  const primitive =
    segments === null
      ? []
      : PRIMITIVE_ROWS.map(({ id, size }) =>
          engineAppendVariant({
            open: segments,
            id,
            label: `seglog segmented log alone, ${size} B, sync every append, 1 appender (the commit path's primitive)`,
            dir: path.join(dir, id),
            size,
            policy: 'always',
            concurrency: 1,
            maxBytesPerRun: cfg.maxBytesPerRun,
          }),
        );
  const one = hostCommitWorkload({ id: 'host-1', label: 'one writer, one scope', scopes: 1 });
  const many = hostCommitWorkload({ id: 'host-200', label: '200 scopes at once', scopes: 200 });
  const variants: Variant[] = [
    rawAppendVariant({ id: 'raw-300', label: 'raw write + fdatasync, 300 B, 1 writer', dir, size: 300, method: 'fdatasync', maxBytesPerRun: cfg.maxBytesPerRun }),
    rawAppendVariant({
      id: 'raw-300-x200',
      label: 'raw write + fdatasync, 300 B, 200 writers, one file each',
      dir,
      size: 300,
      method: 'fdatasync',
      concurrency: 200,
      maxBytesPerRun: cfg.maxBytesPerRun,
    }),
    ...primitive,
    ...sideBySide(one, impls.available, dir),
    ...sideBySide(many, impls.available, dir),
  ];
  return {
    id: 'host-commits',
    title: 'Host store commits, 300 B',
    description:
      'A commit is one CommitBatch that moves one scope to its next version with a new 100 B head and one appended ' +
      '200 B row (300 B in all), under the writer\'s fence token; it counts when `commit` resolved (durable). "One ' +
      'writer" commits to one scope, one commit at a time; "200 scopes at once" has 200 writers, each committing to a ' +
      'scope of its own. The scopes are created and the fence acquired before the first round; each implementation ' +
      'keeps its realm across rounds. Ratios are to the first row: one writer appending 300 B with write + fdatasync ' +
      'to a growing file. The segmented log rows are the one-writer commit\'s primitive: one appender on a bare ' +
      'segmented log (a new, empty log each run), each append of 256 B or of the commit\'s 300 B resolved after its ' +
      'fdatasync; a note gives the one-writer commit rate over the 300 B row\'s, paired by round.',
    variants,
    baseline: 'raw-300',
    rounds: cfg.rounds,
    warmupRounds: cfg.warmupRounds,
    slices: cfg.slices,
    budget: cfg.budget,
    notes: [
      ...missingNotes('host store', impls.missing),
      ...(segments === null ? ['The bare segmented log rows are not measured: segments/index.js did not load.'] : []),
    ],
  };
}

/**
 * The note on the one-writer commit over its primitive: seglog's one-writer commit rate over the
 * bare segmented log's 300 B one-appender rate, paired by round (null when either did not run).
 */
export function primitiveNote(section: SectionResult): string | null {
  const commit = section.variants.find((v) => v.id === 'host-1/seglog');
  const primitive = section.variants.find((v) => v.id === 'segments-300');
  if (commit === undefined || primitive === undefined || commit.runs.length === 0 || primitive.runs.length === 0) return null;
  const r = ratioToBest(commit.runs, [primitive.runs]);
  return (
    `One writer on one scope over its primitive (the bare segmented log, one appender, 300 B, sync every append): ` +
    `${r.median.toFixed(3)}× (${r.min.toFixed(3)}–${r.max.toFixed(3)}), median of ratios paired by round.`
  );
}

/** Creates a realm of `scopes` scopes (each a 100 B head and one 200 B row) through the SPI; answers ms. */
export async function buildRealm(store: HostStore, scopes: number): Promise<number> {
  const head = payload(100, 41);
  const row = payload(200, 42);
  const t0 = nowNs();
  const { token } = await store.acquireFence('exclusive');
  const perBatch = 500;
  const batches: Promise<void>[] = [];
  for (let at = 0; at < scopes; at += perBatch) {
    const updates = [];
    for (let i = at; i < Math.min(scopes, at + perBatch); i++) {
      const scope: ScopeRef = { kind: i % 10 === 0 ? 'mob' : 'session', name: `realm-scope-${String(i).padStart(6, '0')}` };
      updates.push({ scope, previous: null, next: 1, head, append: [row] });
    }
    batches.push(store.commit(CommitBatch.tryNew(`build-${at}`, token, updates)));
    // A few batches in flight at once: a realm is built by many writers over time.
    if (batches.length === 4) await Promise.all(batches.splice(0));
  }
  await Promise.all(batches);
  return (nowNs() - t0) / 1e6;
}

/** Bytes allocated on disk (st_blocks × 512) and files under `dir`. */
async function diskUse(dir: string): Promise<{ bytes: number; files: number; dirs: number }> {
  let bytes = 0;
  let files = 0;
  let dirs = 0;
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) {
        dirs++;
        await walk(p);
      } else {
        files++;
        bytes += (await stat(p)).blocks * 512;
      }
    }
  };
  await walk(dir);
  return { bytes, files, dirs };
}

export async function hostOpenSection(cfg: StoresConfig, impls: Available<HostStore>, progress?: Progress): Promise<SectionResult> {
  const measurements: Measurement[] = [];
  const notes: string[] = [];
  const sizes = [cfg.realmScopes, cfg.realmScopesLarge].filter((n, i, all) => n > 0 && all.indexOf(n) === i);
  for (const [sizeIndex, n] of sizes.entries()) {
    // The first size keeps the ids the targets name; the larger one's carry its size.
    const suffix = sizeIndex === 0 ? '' : `-${n}`;
    const dirs = new Map<string, string>();
    try {
      for (const impl of impls.available) {
        const dir = path.join(cfg.root, `realm-${impl.name}-${n}`);
        await rm(dir, { recursive: true, force: true });
        await mkdir(dir, { recursive: true });
        progress?.label(`host store: building a realm of ${n.toLocaleString('en-US')} scopes in ${impl.label}`);
        const store = await impl.open(dir);
        const ms = await buildRealm(store, n);
        const params = { scopes: n, implementation: impl.name };
        // The fs store's checkpoint round (what a realm at rest has been through), timed.
        const checkpointer = store as HostStore & { checkpoint?: () => Promise<boolean> };
        if (typeof checkpointer.checkpoint === 'function') {
          const t0 = nowNs();
          await checkpointer.checkpoint();
          measurements.push(measurement({ id: `checkpoint-realm${suffix}/${impl.name}`, label: `${impl.label}: one checkpoint round over the new realm`, unit: 'ms', runs: [(nowNs() - t0) / 1e6], params }));
        }
        await impl.close(store);
        progress?.advance(n * 0.2);
        dirs.set(impl.name, dir);
        const disk = await diskUse(dir);
        measurements.push(
          measurement({ id: `build-realm${suffix}/${impl.name}`, label: `${impl.label}: build the realm (${n.toLocaleString('en-US')} scopes, batches of 500, 4 in flight)`, unit: 'ms', runs: [ms], params }),
        );
        // A store that keeps nothing in the directory (the PostgreSQL store: its server's files) has no bytes to count here.
        if (disk.files === 0) continue;
        measurements.push(
          measurement({
            id: `disk-realm${suffix}/${impl.name}`,
            label: `${impl.label}: bytes on disk after the build (and, for seglog, a checkpoint round), closed`,
            unit: 'MiB',
            runs: [bytesToMiB(disk.bytes)],
            params,
            notes: [`${disk.files} file(s), ${disk.dirs} directorie(s); allocated blocks, not apparent sizes`],
          }),
        );
      }
      const results = await childRunsOf<HostOpenResult>(
        cfg,
        impls.available.map((i) => i.name),
        (name, repeat) => ({ task: 'host-open', impl: name as ImplName, dir: dirs.get(name) as string, repeat }),
        (name, r) => {
          progress?.label(`host store: opening the realm of ${n.toLocaleString('en-US')} scopes (${name}, run ${r + 1}/${cfg.childRuns})`);
          progress?.advance(500);
        },
      );
      for (const [name, runs] of results) {
        const bad = runs.find((x) => x.heads !== n);
        if (bad !== undefined) throw new Error(`${name}: the reopened realm listed ${bad.heads} of ${n} scopes`);
      }
      for (const impl of impls.available) {
        const runs = results.get(impl.name) ?? [];
        const params = { scopes: n, implementation: impl.name };
        measurements.push(
          measurement({ id: `open-realm${suffix}/${impl.name}`, label: `${impl.label}: open the realm (${n.toLocaleString('en-US')} scopes)`, unit: 'ms', runs: runs.map((x) => x.openMs), params }),
          measurement({
            id: `open-list-realm${suffix}/${impl.name}`,
            label: `${impl.label}: open the realm of ${n.toLocaleString('en-US')} scopes and list every head (Core's bulk load)`,
            unit: 'ms',
            runs: runs.map((x) => x.openListMs),
            params,
          }),
          measurement({
            id: `rss-open-realm${suffix}/${impl.name}`,
            label: `${impl.label}: resident memory growth, open + list every head (${n.toLocaleString('en-US')} scopes)`,
            unit: 'MiB',
            runs: runs.map((x) => bytesToMiB(x.rssAfterBytes - x.rssBeforeBytes)),
            params,
            notes: [`process RSS after: ${runs.map((x) => bytesToMiB(x.rssAfterBytes).toFixed(0)).join(', ')} MiB`],
          }),
        );
      }
    } finally {
      for (const dir of dirs.values()) await rm(dir, { recursive: true, force: true });
    }
  }
  notes.push(processNote(cfg), ...missingNotes('host store', impls.missing));
  return measurementSection({
    id: 'host-open',
    title: `Opening realms of ${sizes.map((n) => n.toLocaleString('en-US')).join(' and ')} scopes`,
    description:
      `Realms of ${sizes.map((n) => n.toLocaleString('en-US')).join(' and ')} scopes (each a 100 B head and one 200 B row; a tenth of them of kind "mob", ` +
      'the rest "session") are built once per implementation through the SPI; the fs store then runs one checkpoint round (timed), ' +
      'and every store is closed and its bytes on disk counted. Then, in a new Node process, the store is ' +
      'opened, and every head of every kind is listed in pages of 1,000, as Core does at open; resident memory is read ' +
      'before the open and after the listing. The page cache is warm (the realm was just written).',
    measurements,
    notes,
  });
}

/**
 * Runs `task` for every implementation `cfg.childRuns` times: a fresh process per run, rotating the
 * order of implementations per round (full runs), or one process per implementation (--quick).
 */
async function childRunsOf<R>(
  cfg: StoresConfig,
  names: readonly string[],
  task: (name: string, repeat: number) => ChildTask,
  onRun: (name: string, run: number) => void,
): Promise<Map<string, R[]>> {
  const results = new Map<string, R[]>(names.map((n) => [n, []]));
  if (cfg.processPerRun) {
    for (let r = 0; r < cfg.childRuns; r++) {
      for (const name of roundOrder(names, r)) {
        onRun(name, r);
        results.get(name)?.push(...(await runChild<R>(task(name, 1))));
      }
    }
  } else {
    for (const name of names) {
      onRun(name, 0);
      results.get(name)?.push(...(await runChild<R>(task(name, cfg.childRuns))));
      // One child made every run: report the others too, so that progress counts them all.
      for (let r = 1; r < cfg.childRuns; r++) onRun(name, r);
    }
  }
  return results;
}

function processNote(cfg: StoresConfig): string {
  return cfg.processPerRun
    ? `Each run in a fresh Node process (${cfg.childRuns} runs per implementation, interleaved).`
    : `--quick: the ${cfg.childRuns} runs of each implementation share one Node process (only the first is a fresh start; the others reopen after a close).`;
}

function measurementSection(o: { id: string; title: string; description: string; measurements: Measurement[]; notes: string[] }): SectionResult {
  return {
    id: o.id,
    title: o.title,
    description: o.description,
    rounds: Math.max(1, ...o.measurements.map((m) => m.summary.n)),
    warmupRounds: 0,
    slices: 1,
    budget: { durationMs: 0, maxOps: 1, minOps: 1 },
    baseline: null,
    variants: [],
    measurements: o.measurements,
    notes: o.notes,
  };
}

// ---- Raft log ----

export function raftAppendSection(cfg: StoresConfig, impls: Available<RaftNodeHandle>): SectionPlan {
  const dir = path.join(cfg.root, 'raft-appends');
  const variants: Variant[] = [
    rawAppendVariant({ id: 'raw-256', label: 'raw write + fdatasync, 256 B, 1 writer', dir, size: 256, method: 'fdatasync', maxBytesPerRun: cfg.maxBytesPerRun }),
    rawAppendVariant({
      id: 'raw-256-x64',
      label: 'raw write + fdatasync, 256 B, 64 writers, one file each',
      dir,
      size: 256,
      method: 'fdatasync',
      concurrency: 64,
      maxBytesPerRun: cfg.maxBytesPerRun,
    }),
    ...sideBySide(raftAppendWorkload({ id: 'raft-1', label: '256 B entries, one per append', groups: 1, perGroup: 1, entryBytes: 256 }), impls.available, dir),
    ...sideBySide(raftAppendWorkload({ id: 'raft-64', label: '256 B entries, 64 appends in flight', groups: 1, perGroup: 64, entryBytes: 256 }), impls.available, dir),
    ...sideBySide(raftAppendWorkload({ id: 'raft-64groups', label: '64 groups at once, 256 B entries', groups: 64, perGroup: 1, entryBytes: 256 }), impls.available, dir),
    ...sideBySide(raftAppendWorkload({ id: 'raft-256groups', label: '256 groups at once, 256 B entries', groups: 256, perGroup: 1, entryBytes: 256 }), impls.available, dir),
  ];
  return {
    id: 'raft-appends',
    title: 'Raft log appends, 256 B entries',
    description:
      'An operation is one `append([entry], onFlushed)` of one entry with 256 B of data, counted when the promise ' +
      'resolved AND onFlushed fired with null (durable). "One per append": one appender. "64 in flight": 64 appenders ' +
      'on one group, each append taking the next index when called. "64 groups" (256): one appender in each of 64 (256) groups of ' +
      'one node. Ratios are to the first row: one writer appending 256 B with write + fdatasync to a growing file.',
    variants,
    baseline: 'raw-256',
    rounds: cfg.rounds,
    warmupRounds: cfg.warmupRounds,
    slices: cfg.slices,
    budget: cfg.budget,
    notes: missingNotes('Raft log', impls.missing),
  };
}

export function raftLargeSection(cfg: StoresConfig, impls: Available<RaftNodeHandle>): SectionPlan {
  const dir = path.join(cfg.root, 'raft-1mib');
  const budget = { maxOps: Math.max(8, Math.floor(cfg.maxBytesPerRun / MIB)) };
  return {
    id: 'raft-1mib',
    title: 'Raft log appends, 1 MiB entries',
    description:
      'One appender; each append carries one entry with 1 MiB of data and counts once durable. The baseline writes ' +
      '1 MiB at the end of a growing file and fdatasyncs it. Before each run (untimed) the entries of the previous run ' +
      'are purged, bounding the disk used. MiB/s is the figure that matters; the ratio is the same for MiB/s and ' +
      'entries/s.',
    variants: [
      rawAppendVariant({ id: 'raw-1mib', label: 'raw write + fdatasync, 1 MiB', dir, size: MIB, method: 'fdatasync', maxBytesPerRun: cfg.maxBytesPerRun }),
      ...sideBySide(
        raftAppendWorkload({ id: 'raft-1mib', label: '1 MiB entries, one per append', groups: 1, perGroup: 1, entryBytes: MIB, purgeBetweenRuns: true, budget }),
        impls.available,
        dir,
      ),
    ],
    baseline: 'raw-1mib',
    rounds: cfg.rounds,
    warmupRounds: cfg.warmupRounds,
    slices: cfg.slices,
    budget: cfg.budget,
    notes: missingNotes('Raft log', impls.missing),
  };
}

/** Builds a log of `bytes` in 1 KiB entries, 1,024 entries (1 MiB) per durable append; answers ms. */
export async function buildLog(node: RaftNodeHandle, group: string, bytes: number): Promise<number> {
  const data = payload(1024, 51);
  const count = Math.floor(bytes / 1024);
  const t0 = nowNs();
  const log = await node.openGroup(group);
  await log.saveVote({ leaderId: { term: 1, nodeId: 1 }, committed: true });
  for (let at = 1; at <= count; at += 1024) {
    const n = Math.min(1024, count - at + 1);
    const entries = Array.from({ length: n }, (_, i) => normalEntry(at + i, data));
    await appendDurably(log, entries);
  }
  return (nowNs() - t0) / 1e6;
}

/** The row name of the floor of the Raft cold open: seglog's group log opened as a bare segmented log. */
const SEGMENTS_FLOOR = 'segments';

/**
 * The run name of seglog's open of the larger log (the target: an 8 GiB log opens within 1.2× of the
 * 1 GiB one). Its rows carry the id suffix `-8x`; it has a directory of its own, so that each open
 * is that of a node holding one log only.
 */
const SEGLOG_8X = 'seglog-8x';

/** How many times the 1× log the larger log is. */
export const RAFT_OPEN_SCALE = 8;

/** Bytes free to an unprivileged writer on the filesystem of `dir`. */
async function freeBytes(dir: string): Promise<number> {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
}

export async function raftOpenSection(cfg: StoresConfig, impls: Available<RaftNodeHandle>, progress?: Progress): Promise<SectionResult> {
  const dirs = new Map<string, string>();
  const measurements: Measurement[] = [];
  const notes: string[] = [];
  const group = 'big';
  const entries = Math.floor(cfg.logBytes / 1024);
  const bigBytes = RAFT_OPEN_SCALE * cfg.logBytes;
  const bigEntries = Math.floor(bigBytes / 1024);
  const seglog = impls.available.find((i) => i.name === 'seglog');
  const buildMs = new Map<string, number>();
  try {
    for (const impl of impls.available) {
      const dir = path.join(cfg.root, `raftlog-${impl.name}`);
      await rm(dir, { recursive: true, force: true });
      await mkdir(dir, { recursive: true });
      progress?.label(`Raft log: building a ${formatBytes(cfg.logBytes)} log in ${impl.label}`);
      const node = await impl.open(dir);
      const ms = await buildLog(node, group, cfg.logBytes);
      await impl.close(node);
      progress?.advance((cfg.logBytes / MIB) * 8);
      dirs.set(impl.name, dir);
      buildMs.set(impl.name, ms);
      measurements.push(
        measurement({
          id: `build-log/${impl.name}`,
          label: `${impl.label}: build the log (${entries.toLocaleString('en-US')} entries of 1 KiB, 1,024 per durable append)`,
          unit: 'ms',
          runs: [ms],
          params: { bytes: cfg.logBytes, implementation: impl.name },
          notes: [`${(cfg.logBytes / MIB / (ms / 1000)).toFixed(0)} MiB/s`],
        }),
      );
    }
    // The larger log, seglog's only: the peers' builds run at 70–90 MiB/s, minutes each at 8 GiB,
    // and the question is whether seglog's open grows with its log, not how the peers' do.
    if (seglog !== undefined) {
      // The whole 8× log is on disk at once beside the others: build it only if it fits with room to spare.
      const free = await freeBytes(cfg.root);
      const needed = Math.ceil(bigBytes * 1.25);
      if (free < needed) {
        notes.push(
          `The ${formatBytes(bigBytes)} log is not measured: ${formatBytes(free)} free under the scratch directory, ` +
            `${formatBytes(needed)} wanted (the log and a quarter for its framing and headroom).`,
        );
        progress?.advance((bigBytes / MIB) * 8 + cfg.childRuns * 500);
      } else {
        const dir = path.join(cfg.root, `raftlog-${SEGLOG_8X}`);
        await rm(dir, { recursive: true, force: true });
        await mkdir(dir, { recursive: true });
        // Set before the build, so that the finally block removes a half-built log too.
        dirs.set(SEGLOG_8X, dir);
        progress?.label(`Raft log: building a ${formatBytes(bigBytes)} log in ${seglog.label}`);
        const node = await seglog.open(dir);
        const ms = await buildLog(node, group, bigBytes);
        await seglog.close(node);
        progress?.advance((bigBytes / MIB) * 8);
        measurements.push(
          measurement({
            id: `build-log-${RAFT_OPEN_SCALE}x/seglog`,
            label: `${seglog.label}: build the ${formatBytes(bigBytes)} log (${bigEntries.toLocaleString('en-US')} entries of 1 KiB, 1,024 per durable append)`,
            unit: 'ms',
            runs: [ms],
            params: { bytes: bigBytes, implementation: 'seglog' },
            notes: [`${(bigBytes / MIB / (ms / 1000)).toFixed(0)} MiB/s`],
          }),
        );
        const peerBuilds = impls.available
          .filter((i) => i.name !== 'seglog')
          .map((i) => `${i.label} about ${(((buildMs.get(i.name) ?? 0) * RAFT_OPEN_SCALE) / 1000).toFixed(0)} s`);
        notes.push(
          `The ${formatBytes(bigBytes)} log is built and opened in seglog only` +
            (peerBuilds.length > 0 ? ` (building it in the peers would take, at this run's rates for the ${formatBytes(cfg.logBytes)} log: ${peerBuilds.join(', ')})` : '') +
            '; its opens run in the same rounds as the others.',
        );
      }
    }
    // The floor (seglog's group log opened as a bare segmented log) and seglog's larger log, in
    // runs interleaved with the others.
    const floor = dirs.has('seglog') ? [SEGMENTS_FLOOR] : [];
    const big = dirs.has(SEGLOG_8X) ? [SEGLOG_8X] : [];
    const results = await childRunsOf<RaftOpenResult>(
      cfg,
      [...impls.available.map((i) => i.name), ...floor, ...big],
      (name, repeat) =>
        name === SEGMENTS_FLOOR
          ? { task: 'segments-open', dir: path.join(groupDirectory(dirs.get('seglog') as string, group), 'log'), repeat }
          : name === SEGLOG_8X
            ? { task: 'raft-open', impl: 'seglog', dir: dirs.get(SEGLOG_8X) as string, group, repeat }
            : { task: 'raft-open', impl: name as ImplName, dir: dirs.get(name) as string, group, repeat },
      (name, r) => {
        progress?.label(`Raft log: cold open (${name}, run ${r + 1}/${cfg.childRuns})`);
        progress?.advance(500);
      },
    );
    for (const [name, runs] of results) {
      const want = name === SEGLOG_8X ? bigEntries : entries;
      const bad = runs.find((x) => x.entries !== want);
      if (bad !== undefined) throw new Error(`${name}: the reopened log holds ${bad.entries} of ${want} entries`);
    }
    const rows = [
      ...impls.available.map((i) => ({ name: i.name as string, label: i.label, suffix: '', bytes: cfg.logBytes, implementation: i.name as string })),
      ...floor.map((name) => ({ name, label: 'seglog segmented log alone (the floor)', suffix: '', bytes: cfg.logBytes, implementation: name })),
      ...big.map((name) => ({ name, label: seglog?.label ?? 'seglog', suffix: `-${RAFT_OPEN_SCALE}x`, bytes: bigBytes, implementation: 'seglog' })),
    ];
    for (const row of rows) {
      const runs = results.get(row.name) ?? [];
      const params = { bytes: row.bytes, implementation: row.implementation };
      const what = row.name === SEGMENTS_FLOOR ? 'open the group\'s segmented log, first and last record' : 'open node and group, log state, first and last entry';
      const size = row.suffix === '' ? '' : ` (the ${formatBytes(row.bytes)} log)`;
      measurements.push(
        measurement({ id: `open-log${row.suffix}/${row.implementation}`, label: `${row.label}: ${what}${size}`, unit: 'ms', runs: runs.map((x) => x.openMs), params }),
        measurement({
          id: `rss-open-log${row.suffix}/${row.implementation}`,
          label: `${row.label}: resident memory growth of that open${size}`,
          unit: 'MiB',
          runs: runs.map((x) => bytesToMiB(x.rssAfterBytes - x.rssBeforeBytes)),
          params,
        }),
      );
    }
  } finally {
    for (const dir of dirs.values()) await rm(dir, { recursive: true, force: true });
  }
  const sizes = seglog === undefined ? formatBytes(cfg.logBytes) : `${formatBytes(cfg.logBytes)} and ${formatBytes(bigBytes)}`;
  return measurementSection({
    id: 'raft-open',
    title: `Cold open of Raft logs of ${sizes}`,
    description:
      `One group's log of ${formatBytes(cfg.logBytes)} (${entries.toLocaleString('en-US')} entries of 1 KiB) is built once per ` +
      `implementation, and for seglog a second one of ${formatBytes(bigBytes)} (${bigEntries.toLocaleString('en-US')} entries, ` +
      `${RAFT_OPEN_SCALE}× as many) in a directory of its own: whether an open grows with the log. Then, in a new Node process, the node and the group are opened, ` +
      '`getLogState` answered, and the first and the last entry read; the rows without a size are those of the ' +
      `${formatBytes(cfg.logBytes)} log. The floor is seglog's ${formatBytes(cfg.logBytes)} group log opened as a bare ` +
      'segmented log. The opens of every log run in the same rounds. "Cold" means a new process with nothing of the ' +
      'store in memory; the OS page cache stays warm (dropping it is not for a shared machine).',
    measurements,
    notes: [processNote(cfg), ...notes, ...missingNotes('Raft log', impls.missing)],
  });
}

// ---- Raft snapshot ----

export async function raftSnapshotRssSection(cfg: StoresConfig, seglog: SeglogStores, progress?: Progress): Promise<SectionResult | null> {
  if (!seglog.raft.ok) return null;
  const dir = path.join(cfg.root, 'raft-snapshot');
  // Always a fresh process per run: a run leaves freed memory resident in the allocator, which
  // the next run's phases could reuse unseen (see snapshot-bench.ts).
  const perRun = { ...cfg, processPerRun: true };
  let runs: SnapshotRssResult[] = [];
  try {
    const results = await childRunsOf<SnapshotRssResult>(
      perRun,
      ['seglog'],
      (_name, repeat) => ({ task: 'snapshot-rss', dir, bytes: cfg.snapshotBytes, repeat }),
      (_name, r) => {
        progress?.label(`Raft: a ${formatBytes(cfg.snapshotBytes)} snapshot through build, install and read (run ${r + 1}/${cfg.childRuns})`);
        progress?.advance(snapshotPlannedMs(cfg) / cfg.childRuns);
      },
    );
    runs = results.get('seglog') ?? [];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const first = runs[0];
  const params = { bytes: cfg.snapshotBytes, streamBytes: first?.snapshotBytes ?? 0, keys: first?.keys ?? 0, implementation: 'seglog' };
  const mib = (b: number): string => bytesToMiB(b).toFixed(1);
  const mibps = (ms: number, r: SnapshotRssResult): string => (bytesToMiB(r.snapshotBytes) / (ms / 1000)).toFixed(0);
  return measurementSection({
    id: 'raft-snapshot-rss',
    title: `A ${formatBytes(cfg.snapshotBytes)} Raft snapshot through build, install and read`,
    description:
      `In a new Node process, two Raft nodes are opened in new directories (a leader and a follower, group "g" on each). ` +
      `The leader's state is built through \`apply\`: ${first === undefined ? 'generated' : first.keys.toLocaleString('en-US')} ` +
      `key-value records with values of 64 KiB–1 MiB, ${formatBytes(cfg.snapshotBytes)} of values or just over. ` +
      'Then a full garbage collection (--expose-gc) and a 200 ms pause, and the RSS is read: the baseline. Three ' +
      'phases follow, each under an RSS watch (sampled every 2 ms and at every chunk): build (`getSnapshotBuilder`, ' +
      "`buildSnapshot`, and its stream read to the end); install (the leader's `getCurrentSnapshot` streamed chunk by " +
      "chunk into the follower's `beginReceivingSnapshot` sink, then `installSnapshot`, which restores the stream into " +
      "a fresh plugin, checking every byte, before it commits); read (the follower's `getCurrentSnapshot` read to the " +
      'end). The growth is the highest peak of the three over the baseline. The plugin is a bench-only one ' +
      '(`bench/stores/snapshot-bench.ts`): the shipped KV plugin keeps every value in memory, so with it a 1 GiB state ' +
      'is itself 1 GiB resident (and an install restores another); this one keeps only the keys, regenerates each ' +
      'value when a snapshot is captured and checks each one when it is restored, and its snapshot bytes are exactly ' +
      'those the KV plugin writes for the same map (test/bench-snapshot.test.ts). Its state is built with compact ' +
      '"add keys [a, b)" commands rather than 1 GiB of `set` commands, whose freed buffers the allocator would keep ' +
      "resident for the measured phases to reuse unseen. What is measured is therefore the state machine's snapshot " +
      "path (files, framing, checksums, chunking, the restore's parsing), not a plugin's state.",
    measurements: [
      measurement({
        id: 'raft-snapshot-rss-growth/seglog',
        label: 'resident memory growth, build + install + read (the highest peak)',
        unit: 'MiB',
        runs: runs.map((r) => bytesToMiB(snapshotRssGrowth(r))),
        params,
        notes: [
          `build peaks: ${runs.map((r) => mib(r.peakBuildRssBytes - r.baseRssBytes)).join(', ')} MiB; ` +
            `install peaks: ${runs.map((r) => mib(r.peakInstallRssBytes - r.baseRssBytes)).join(', ')} MiB; ` +
            `read peaks: ${runs.map((r) => mib(r.peakReadRssBytes - r.baseRssBytes)).join(', ')} MiB; ` +
            `baselines: ${runs.map((r) => bytesToMiB(r.baseRssBytes).toFixed(0)).join(', ')} MiB.`,
        ],
      }),
      measurement({
        id: 'raft-snapshot-build/seglog',
        label: 'build: buildSnapshot, and its stream read to the end',
        unit: 'ms',
        runs: runs.map((r) => r.buildMs),
        params,
        notes: [`${runs.map((r) => mibps(r.buildMs, r)).join(', ')} MiB/s`],
      }),
      measurement({
        id: 'raft-snapshot-install/seglog',
        label: 'install: streamed into a sink on the follower, then installSnapshot',
        unit: 'ms',
        runs: runs.map((r) => r.installMs),
        params,
        notes: [`${runs.map((r) => mibps(r.installMs, r)).join(', ')} MiB/s`],
      }),
      measurement({
        id: 'raft-snapshot-read/seglog',
        label: "read: the follower's current snapshot read to the end",
        unit: 'ms',
        runs: runs.map((r) => r.readMs),
        params,
        notes: [`${runs.map((r) => mibps(r.readMs, r)).join(', ')} MiB/s`],
      }),
    ],
    notes: [
      `Each run in a fresh Node process (${cfg.childRuns} runs${cfg.quick ? '; in --quick too' : ''}).`,
      ...(first === undefined ? [] : [`The snapshot stream is ${first.snapshotBytes.toLocaleString('en-US')} bytes (${first.stateBytes.toLocaleString('en-US')} of values).`]),
    ],
  });
}

/** A node of a thousand groups: create (one blank entry each), close, then open in a fresh process. */
export async function raftGroupsSection(cfg: StoresConfig, seglog: SeglogStores, progress?: Progress): Promise<SectionResult | null> {
  if (!seglog.raft.ok) return null;
  const dir = path.join(cfg.root, 'raft-groups');
  const groups = RAFT_NODE_GROUPS;
  const creates: RaftGroupsCreateResult[] = [];
  const opens: RaftGroupsOpenResult[] = [];
  try {
    for (let r = 0; r < cfg.childRuns; r++) {
      progress?.label(`Raft: a node of ${groups} groups, created, closed and opened (run ${r + 1}/${cfg.childRuns})`);
      creates.push(...(await runChild<RaftGroupsCreateResult>({ task: 'raft-groups', phase: 'create', dir, groups, repeat: 1 })));
      opens.push(...(await runChild<RaftGroupsOpenResult>({ task: 'raft-groups', phase: 'open', dir, groups, repeat: 1 })));
      progress?.advance(raftGroupsPlannedMs(cfg) / cfg.childRuns);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return measurementSection({
    id: 'raft-groups',
    title: `A Raft node of ${groups.toLocaleString('en-US')} groups`,
    description:
      `In a new Node process, \`openRaftNode\` on an empty directory, then ${groups.toLocaleString('en-US')} groups created ` +
      '(`openGroup`), each given one blank entry whose flush is awaited; then `close`; then the files under groups/ ' +
      'are counted (apparent sizes, and allocated blocks with the directories). In a second, fresh process (--expose-gc): ' +
      'a full collection and the RSS and /proc/self/fd count, then `openRaftNode`, then every group `openGroup` and ' +
      '`tryGetLogEntries` of its entry (checked), then the descriptors and, after a full collection, the RSS again: its ' +
      'growth over the group count is the memory of an idle open group (the node and its payload store included).',
    measurements: raftGroupsMeasurements(creates, opens),
    notes: [`Each phase of each run in a fresh Node process (${cfg.childRuns} runs). The node's open-file cache is the default (512 idle descriptors at most).`],
  });
}

function raftGroupsPlannedMs(cfg: StoresConfig): number {
  return cfg.childRuns * 10_000;
}

/** Rough wall time of the snapshot section, for the progress bar: ~15 ms per MiB and run. */
function snapshotPlannedMs(cfg: StoresConfig): number {
  return cfg.childRuns * ((cfg.snapshotBytes / MIB) * 15 + 500);
}

// ---- payloads ----

/** `put` beside raw write + fsync of the same bytes, one at a time. */
export function payloadPutSection(cfg: StoresConfig, seglog: SeglogStores, large = false): SectionPlan | null {
  if (!seglog.payloads.ok) return null;
  const id = large ? 'payload-put-large' : 'payload-put';
  const bytes = large ? cfg.largePayloadBytes : cfg.payloadBytes;
  const dir = path.join(cfg.root, id);
  const budget = payloadBudget(bytes, 1, cfg.maxBytesPerRun);
  return {
    id,
    title: `Payload put, ${formatBytes(bytes)} payloads`,
    description:
      `One writer. seglog's \`put\` streams a generated ${formatBytes(bytes)} body in 1 MiB chunks and resolves ` +
      'once the payload is durable (framed, hashed, written to a temporary file, synced, linked under its digest, directory synced). The ' +
      'baseline writes the same bytes to a new file with 1 MiB writes and fsyncs it. Each run starts with an empty store.',
    variants: [
      rawWriteFsyncVariant({ id: 'raw-write-fsync', dir: path.join(dir, 'raw'), bytes, budget }),
      putVariant({ id: 'put/seglog', dir: path.join(dir, 'seglog'), bytes, budget, open: seglog.payloads.open }),
    ],
    baseline: 'raw-write-fsync',
    rounds: cfg.rounds,
    warmupRounds: cfg.warmupRounds,
    slices: cfg.slices,
    budget: cfg.budget,
  };
}

/** `get` beside a raw read of a file of the same size, one at a time. */
export function payloadGetSection(cfg: StoresConfig, seglog: SeglogStores, large = false): SectionPlan | null {
  if (!seglog.payloads.ok) return null;
  const id = large ? 'payload-get-large' : 'payload-get';
  const bytes = large ? cfg.largePayloadBytes : cfg.payloadBytes;
  const dir = path.join(cfg.root, id);
  // Reads are cheap to repeat: twice the put's byte cap per run.
  const budget = payloadBudget(bytes, 1, 2 * cfg.maxBytesPerRun);
  return {
    id,
    title: `Payload get, ${formatBytes(bytes)} payloads`,
    description:
      `One reader. seglog's \`get\` streams a stored ${formatBytes(bytes)} payload to its end, verifying each ` +
      'chunk (and the digest before the last one). The baseline reads a file of the same size with 1 MiB reads, each into a new buffer. Both are served from ' +
      'the page cache (written moments before).',
    variants: [
      rawReadVariant({ id: 'raw-read', dir: path.join(dir, 'raw'), bytes, budget }),
      getVariant({ id: 'get/seglog', dir: path.join(dir, 'seglog'), bytes, budget, open: seglog.payloads.open }),
    ],
    baseline: 'raw-read',
    rounds: cfg.rounds,
    warmupRounds: cfg.warmupRounds,
    slices: cfg.slices,
    budget: cfg.budget,
  };
}

/** The concurrent payload sections: which operation, at which payload size. */
export interface ConcurrentPayloadSection {
  id: string;
  op: 'put' | 'get';
  bytes: number;
}

export function concurrentPayloadSections(cfg: StoresConfig): ConcurrentPayloadSection[] {
  return [
    { id: 'payload-put-concurrent-1mib', op: 'put', bytes: MIB },
    { id: 'payload-put-concurrent', op: 'put', bytes: cfg.payloadBytes },
    { id: 'payload-get-concurrent-1mib', op: 'get', bytes: MIB },
    { id: 'payload-get-concurrent', op: 'get', bytes: cfg.payloadBytes },
  ];
}

/** Variant ids of a concurrent payload section. */
export function concurrentVariantId(kind: 'raw' | 'seglog', op: 'put' | 'get', concurrency: number): string {
  return kind === 'raw' ? `raw-${op === 'put' ? 'write-fsync' : 'read'}-x${concurrency}` : `${op}-x${concurrency}/seglog`;
}

/**
 * `put` (or `get`) one at a time and N at once, each beside raw I/O at the same concurrency.
 * Ratios are to one seglog operation at a time: how the store scales with concurrent callers.
 */
export function concurrentPayloadSection(cfg: StoresConfig, seglog: SeglogStores, which: ConcurrentPayloadSection): SectionPlan | null {
  if (!seglog.payloads.ok) return null;
  const open = seglog.payloads.open;
  const { id, op, bytes } = which;
  const dir = path.join(cfg.root, id);
  const variants: Variant[] = [];
  for (const concurrency of [1, ...cfg.payloadConcurrency]) {
    const budget = payloadBudget(bytes, concurrency, cfg.concurrentBytesPerRun);
    const rawId = concurrentVariantId('raw', op, concurrency);
    const ownId = concurrentVariantId('seglog', op, concurrency);
    const o = { bytes, concurrency, budget };
    variants.push(
      op === 'put'
        ? rawWriteFsyncVariant({ ...o, id: rawId, dir: path.join(dir, rawId) })
        : rawReadVariant({ ...o, id: rawId, dir: path.join(dir, rawId) }),
      op === 'put'
        ? putVariant({ ...o, id: ownId, dir: path.join(dir, 'seglog', String(concurrency)), open })
        : getVariant({ ...o, id: ownId, dir: path.join(dir, 'seglog', String(concurrency)), open }),
    );
  }
  const atOnce = cfg.payloadConcurrency.join(' and ');
  return {
    id,
    title: `Payload ${op}, ${formatBytes(bytes)} payloads, one and ${atOnce} at once`,
    description:
      (op === 'put'
        ? `N workers each put generated ${formatBytes(bytes)} bodies back to back (every put a new payload, durable when it resolves); ` +
          'raw: N workers each write the same bytes to a new file with 1 MiB writes and fsync it. Each run starts with an empty store.'
        : `N workers each get their own stored ${formatBytes(bytes)} payload, streamed to its end and verified, back to back; ` +
          'raw: N workers each read their own file of the same size with 1 MiB reads into new buffers. Both from the page cache.') +
      ` MiB/s counts every worker's bytes. Ratios are to seglog's ${op} one at a time (how it scales with callers at once); ` +
      'the notes give each row of seglog against raw at the same concurrency, paired by round.',
    variants,
    baseline: concurrentVariantId('seglog', op, 1),
    rounds: cfg.rounds,
    warmupRounds: cfg.warmupRounds,
    // Whole runs: a slice must still hold at least two operations per worker.
    slices: 1,
    budget: cfg.budget,
  };
}

/** The notes of a concurrent payload section: seglog against raw at each concurrency, paired by round. */
export function concurrentPayloadNotes(section: SectionResult, cfg: StoresConfig, op: 'put' | 'get'): string[] {
  const out: string[] = [];
  for (const concurrency of [1, ...cfg.payloadConcurrency]) {
    const own = section.variants.find((v) => v.id === concurrentVariantId('seglog', op, concurrency));
    const base = section.variants.find((v) => v.id === concurrentVariantId('raw', op, concurrency));
    if (own === undefined || base === undefined) continue;
    const r = ratioToBaseline(own.runs, base.runs);
    out.push(`${op}, ${concurrency === 1 ? 'one at a time' : `${concurrency} at once`}, against raw at the same concurrency: ${r.median.toFixed(2)}× (${r.min.toFixed(2)}–${r.max.toFixed(2)}).`);
  }
  return out;
}

export async function payloadRssSection(cfg: StoresConfig, seglog: SeglogStores, progress?: Progress): Promise<SectionResult | null> {
  if (!seglog.payloads.ok) return null;
  const dir = path.join(cfg.root, 'payload-rss');
  let runs: PayloadRssResult[] = [];
  try {
    const results = await childRunsOf<PayloadRssResult>(
      cfg,
      ['seglog'],
      (_name, repeat) => ({ task: 'payload-rss', dir, bytes: cfg.bigPayloadBytes, chunkBytes: MIB, repeat }),
      (_name, r) => {
        progress?.label(`payloads: ${formatBytes(cfg.bigPayloadBytes)} in and out (run ${r + 1}/${cfg.childRuns})`);
        progress?.advance((cfg.bigPayloadBytes / MIB) * 8);
      },
    );
    runs = results.get('seglog') ?? [];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const params = { bytes: cfg.bigPayloadBytes, implementation: 'seglog' };
  const mibps = (ms: number): number => cfg.bigPayloadBytes / MIB / (ms / 1000);
  return measurementSection({
    id: 'payload-rss',
    title: `A ${formatBytes(cfg.bigPayloadBytes)} payload in and out`,
    description:
      `In a new Node process, seglog's payload store is opened (in a new, empty directory), a generated ${formatBytes(cfg.bigPayloadBytes)} body ` +
      'is put (1 MiB chunks), then got and streamed to its end. Resident memory is sampled at every chunk and every ' +
      '2 ms; the growth is the peak over the RSS right after the store was opened.',
    measurements: [
      measurement({
        id: 'payload-rss-growth/seglog',
        label: 'resident memory growth, put then get (the larger peak)',
        unit: 'MiB',
        runs: runs.map((x) => bytesToMiB(Math.max(x.peakPutRssBytes, x.peakGetRssBytes) - x.baseRssBytes)),
        params,
        notes: [
          `put peaks: ${runs.map((x) => bytesToMiB(x.peakPutRssBytes - x.baseRssBytes).toFixed(1)).join(', ')} MiB; ` +
            `get peaks: ${runs.map((x) => bytesToMiB(x.peakGetRssBytes - x.baseRssBytes).toFixed(1)).join(', ')} MiB.`,
        ],
      }),
      measurement({ id: 'payload-big-put/seglog', label: `put of ${formatBytes(cfg.bigPayloadBytes)}`, unit: 'ms', runs: runs.map((x) => x.putMs), params, notes: [`${runs.map((x) => mibps(x.putMs).toFixed(0)).join(', ')} MiB/s`] }),
      measurement({ id: 'payload-big-get/seglog', label: `get of ${formatBytes(cfg.bigPayloadBytes)}`, unit: 'ms', runs: runs.map((x) => x.getMs), params, notes: [`${runs.map((x) => mibps(x.getMs).toFixed(0)).join(', ')} MiB/s`] }),
    ],
    notes: [processNote(cfg)],
  });
}

// ---- targets ----

function variant(sections: readonly SectionResult[], sectionId: string, variantId: string) {
  return sections.find((s) => s.id === sectionId)?.variants.find((v) => v.id === variantId);
}

/** Raft: `groups` groups appending at once (one appender each), as a ratio to lmdb-js's entries/s in the same round. */
function raftGroupsVsLmdb(sections: readonly SectionResult[], groups: number, why: { raft: string | null; peers: string | null }): TargetCheck {
  const ours = variant(sections, 'raft-appends', `raft-${groups}groups/seglog`);
  const lmdb = variant(sections, 'raft-appends', `raft-${groups}groups/lmdb`);
  const ratio = ours !== undefined && lmdb !== undefined ? ratioToBest(ours.runs, [lmdb.runs]) : null;
  return checkTarget({
    id: `raft-${groups}-groups-vs-lmdb`,
    source: 'Raft log',
    description: `Raft log: ${groups} groups of one node appending at once (256 B entries, one appender each), as a ratio to lmdb-js's entries/s`,
    comparator: '>=',
    threshold: 1.5,
    unit: '× lmdb-js',
    measured: ratio?.median ?? null,
    note:
      ours === undefined
        ? (why.raft ?? 'not measured')
        : ratio === null
          ? (why.peers ?? 'lmdb-js is missing')
          : `median of per-round ratios (${ratio.min.toFixed(2)}–${ratio.max.toFixed(2)})`,
  });
}

function measured(sections: readonly SectionResult[], sectionId: string, id: string) {
  return sections.find((s) => s.id === sectionId)?.measurements.find((m) => m.id === id);
}

/**
 * The realm-scale targets, from the host-open section: open + list every head against
 * better-sqlite3 at 10,000 and 100,000 scopes (time no more, RSS growth under 1.5×), bytes on disk
 * at 10,000 under 2× better-sqlite3's file, one checkpoint round of the 10,000-scope realm under 1 s.
 */
function realmScaleTargets(sections: readonly SectionResult[], judged: boolean, whyHost: string | null): TargetCheck[] {
  const median = (id: string): number | null => measured(sections, 'host-open', id)?.summary.median ?? null;
  const out: TargetCheck[] = [];
  const sizes = [
    ['', '10,000'],
    ['-100000', '100,000'],
  ] as const;
  const missing = whyHost ?? 'NOT MEASURED (the host-open section did not run at this size, or a peer is missing)';
  for (const [suffix, label] of sizes) {
    const ours = median(`open-list-realm${suffix}/seglog`);
    const theirs = median(`open-list-realm${suffix}/sqlite`);
    out.push(
      checkTarget(
        {
          id: `host-open-list${suffix === '' ? '-10k' : '-100k'}-vs-sqlite`,
          source: 'host store',
          description: `host store: open a realm of ${label} scopes and list every head (fresh process), better-sqlite3's time over ours (at least 1: no slower)`,
          comparator: '>=',
          threshold: 1,
          unit: '× (sqlite ms / seglog ms)',
          measured: ours !== null && theirs !== null && ours > 0 ? theirs / ours : null,
          note: ours === null || theirs === null ? missing : `medians: seglog ${ours.toFixed(1)} ms, better-sqlite3 ${theirs.toFixed(1)} ms`,
        },
        judged,
      ),
    );
    const rssOurs = median(`rss-open-realm${suffix}/seglog`);
    const rssTheirs = median(`rss-open-realm${suffix}/sqlite`);
    out.push(
      checkTarget(
        {
          id: `host-open-rss${suffix === '' ? '-10k' : '-100k'}-vs-sqlite`,
          source: 'host store',
          description: `host store: RSS growth of open + list at ${label} scopes, as a ratio to better-sqlite3's`,
          comparator: '<',
          threshold: 1.5,
          unit: '× sqlite',
          measured: rssOurs !== null && rssTheirs !== null && rssTheirs > 0 ? rssOurs / rssTheirs : null,
          note: rssOurs === null || rssTheirs === null ? missing : `medians: seglog ${rssOurs.toFixed(1)} MiB, better-sqlite3 ${rssTheirs.toFixed(1)} MiB`,
        },
        judged,
      ),
    );
  }
  const diskOurs = median('disk-realm/seglog');
  const diskTheirs = median('disk-realm/sqlite');
  out.push(
    checkTarget(
      {
        id: 'host-disk-10k-vs-sqlite',
        source: 'host store',
        description: 'host store: bytes on disk of the 10,000-scope realm after a checkpoint, as a ratio to better-sqlite3\'s files',
        comparator: '<',
        threshold: 2,
        unit: '× sqlite',
        measured: diskOurs !== null && diskTheirs !== null && diskTheirs > 0 ? diskOurs / diskTheirs : null,
        note: diskOurs === null || diskTheirs === null ? missing : `seglog ${diskOurs.toFixed(2)} MiB, better-sqlite3 ${diskTheirs.toFixed(2)} MiB`,
      },
      judged,
    ),
  );
  const round = median('checkpoint-realm/seglog');
  out.push(
    checkTarget(
      {
        id: 'host-checkpoint-10k',
        source: 'host store',
        description: 'host store: one checkpoint round over a new realm of 10,000 scopes',
        comparator: '<',
        threshold: 1000,
        unit: 'ms',
        measured: round,
        note: round === null ? missing : 'one round, timed by the section',
      },
      judged,
    ),
  );
  return out;
}

/**
 * The scale targets of the Raft store: the cold open of the 1 GiB log (time and RSS), the
 * 8× log's open as a ratio to the 1× log's (paired by round: both opens ran in the same round), and
 * the node of 1,000 groups (open + first read of every group, descriptors, disk, RSS per group).
 */
function raftScaleTargets(sections: readonly SectionResult[], cfg: Pick<StoresConfig, 'logBytes'>, why: string | null): TargetCheck[] {
  const missing = why ?? 'NOT MEASURED (the section did not run)';
  const openJudged = cfg.logBytes >= 1024 * MIB;
  const notJudged = `measured with a ${formatBytes(cfg.logBytes)} log, not 1 GiB: not judged`;
  const open1 = measured(sections, 'raft-open', 'open-log/seglog');
  const open8 = measured(sections, 'raft-open', `open-log-${RAFT_OPEN_SCALE}x/seglog`);
  const rss1 = measured(sections, 'raft-open', 'rss-open-log/seglog');
  const rss8 = measured(sections, 'raft-open', `rss-open-log-${RAFT_OPEN_SCALE}x/seglog`);
  const growth = open1 !== undefined && open8 !== undefined && open1.runs.length === open8.runs.length ? summarize(pairedRatios(open8.runs, open1.runs)) : null;
  const rssWorst = rss1 === undefined ? null : Math.max(rss1.summary.median, rss8?.summary.median ?? -Infinity);
  const groupsMedian = (id: string): number | null => measured(sections, 'raft-groups', `${id}/seglog`)?.summary.median ?? null;
  const groupTarget = (id: string, description: string, threshold: number, unit: string): TargetCheck => {
    const v = groupsMedian(id);
    return checkTarget({ id: `${id}-1000`, source: 'Raft store', description, comparator: '<=', threshold, unit, measured: v, note: v === null ? missing : 'median of the section\'s runs' });
  };
  return [
    checkTarget(
      {
        id: 'raft-open-1gib',
        source: 'Raft store',
        description: 'Raft: cold open of a node whose one group holds a 1 GiB log (open node and group, log state, first and last entry; fresh process)',
        comparator: '<=',
        threshold: 20,
        unit: 'ms',
        measured: open1?.summary.median ?? null,
        note: open1 === undefined ? missing : openJudged ? `median of ${open1.summary.n} runs (${open1.summary.min.toFixed(1)}–${open1.summary.max.toFixed(1)})` : notJudged,
      },
      openJudged,
    ),
    checkTarget(
      {
        id: `raft-open-${RAFT_OPEN_SCALE}x-vs-1x`,
        source: 'Raft store',
        description: `Raft: cold open with a log ${RAFT_OPEN_SCALE}× larger (8 GiB beside 1 GiB), as a ratio to the 1× log's open in the same round`,
        comparator: '<=',
        threshold: 1.2,
        unit: '× the 1× open',
        measured: growth?.median ?? null,
        note: growth === null ? (open1 === undefined ? missing : `the ${RAFT_OPEN_SCALE}× log was not measured (see the raft-open section's notes)`) : openJudged ? `median of per-round ratios (${growth.min.toFixed(2)}–${growth.max.toFixed(2)})` : notJudged,
      },
      openJudged,
    ),
    checkTarget(
      {
        id: 'raft-open-rss',
        source: 'Raft store',
        description: 'Raft: resident memory growth of that cold open, the larger of the two logs\' medians',
        comparator: '<=',
        threshold: 4,
        unit: 'MiB',
        measured: rssWorst,
        note: rss1 === undefined ? missing : openJudged ? `medians: 1× ${rss1.summary.median.toFixed(2)} MiB${rss8 === undefined ? '' : `, ${RAFT_OPEN_SCALE}× ${rss8.summary.median.toFixed(2)} MiB`}` : notJudged,
      },
      openJudged,
    ),
    groupTarget('raft-groups-open-read', 'Raft: a node of 1,000 groups, open + first read of every group (fresh process)', 300, 'ms'),
    groupTarget('raft-groups-fds', 'Raft: descriptors open with those 1,000 groups open', 600, 'descriptors'),
    groupTarget('raft-groups-disk-allocated', 'Raft: disk per group holding one entry (blocks allocated, directories included)', 16, 'KiB'),
    groupTarget('raft-groups-rss', 'Raft: resident memory per idle open group', 8, 'KiB'),
  ];
}

/** Every target of the host, Raft and payload stores, judged from this run (null, with the reason, where not measured). */
export function collectStoreTargets(
  sections: readonly SectionResult[],
  cfg: Pick<StoresConfig, 'realmScopes' | 'bigPayloadBytes' | 'snapshotBytes' | 'payloadBytes' | 'largePayloadBytes' | 'logBytes'>,
  why: { host: string | null; raft: string | null; payloads: string | null; peers: string | null; pg?: string | null },
): TargetCheck[] {
  const notMeasured = (w: string | null, fallback: string): string => w ?? fallback;
  const hostOne = variant(sections, 'host-commits', 'host-1/seglog');
  const host200 = variant(sections, 'host-commits', 'host-200/seglog');
  const peers200 = ['sqlite', 'lmdb'].map((p) => variant(sections, 'host-commits', `host-200/${p}`)).filter((v) => v !== undefined);
  const vsPeers = host200 !== undefined && peers200.length === 2 ? ratioToBest(host200.runs, peers200.map((p) => p.runs)) : null;
  const open = measured(sections, 'host-open', 'open-list-realm/seglog');
  const raftOne = variant(sections, 'raft-appends', 'raft-1/seglog');
  const raftBig = variant(sections, 'raft-1mib', 'raft-1mib/seglog');
  const rss = measured(sections, 'payload-rss', 'payload-rss-growth/seglog');
  const openJudged = cfg.realmScopes >= 10_000;
  const rssJudged = cfg.bigPayloadBytes >= 1024 * MIB;
  const snapshot = measured(sections, 'raft-snapshot-rss', 'raft-snapshot-rss-growth/seglog');
  const snapshotJudged = cfg.snapshotBytes >= 1024 * MIB;
  const vsPgbench = (clients: 1 | 200): TargetCheck => {
    const store = variant(sections, 'host-pg', `pg-${clients}/pg`);
    const pgbench = variant(sections, 'host-pg', `pgbench-${clients}`);
    const ratio = store !== undefined && pgbench !== undefined ? ratioToBest(store.runs, [pgbench.runs]) : null;
    return checkTarget({
      id: `host-pg-vs-pgbench-${clients}`,
      source: 'the PostgreSQL host store',
      description: `PostgreSQL host store: ${clients === 1 ? 'one writer' : '200 writers'}, 300 B commits, as a ratio to pgbench's script of the same writes at ${clients} client${clients === 1 ? '' : 's'} on the same server`,
      comparator: '>=',
      threshold: 0.7,
      unit: '× pgbench',
      measured: ratio?.median ?? null,
      note: ratio === null ? (why.pg ?? 'NOT MEASURED (the host-pg section did not run)') : `median of per-round ratios (${ratio.min.toFixed(2)}–${ratio.max.toFixed(2)})`,
    });
  };
  return [
    checkTarget({
      id: 'host-one-scope',
      source: 'host store',
      description: 'host store: one writer on one scope, as a ratio to raw write + fdatasync',
      comparator: '>=',
      threshold: 0.9,
      unit: '× raw',
      measured: hostOne?.ratio?.recordsPerSec.median ?? null,
      note: hostOne === undefined ? notMeasured(why.host, 'not measured') : 'median of ratios paired by round',
    }),
    checkTarget({
      id: 'host-200-scopes-vs-peers',
      source: 'host store',
      description: 'host store: 200 scopes at once, as a ratio to the faster of better-sqlite3 and lmdb in the same round',
      comparator: '>=',
      threshold: 1,
      unit: '× best peer',
      measured: vsPeers?.median ?? null,
      note:
        host200 === undefined
          ? notMeasured(why.host, 'not measured')
          : vsPeers === null
            ? notMeasured(why.peers, 'a peer is missing')
            : `median of per-round ratios to the faster peer of that round (${vsPeers.min.toFixed(2)}–${vsPeers.max.toFixed(2)})`,
    }),
    checkTarget(
      {
        id: 'host-open-10k-scopes',
        source: 'host store',
        description: 'host store: open a realm of 10,000 scopes (open + list every head, fresh process)',
        comparator: '<',
        threshold: 1000,
        unit: 'ms',
        measured: open?.summary.median ?? null,
        note:
          open === undefined
            ? notMeasured(why.host, 'not measured')
            : openJudged
              ? `median of ${open.summary.n} runs`
              : `measured on ${cfg.realmScopes.toLocaleString('en-US')} scopes, not 10,000: not judged`,
      },
      openJudged,
    ),
    ...realmScaleTargets(sections, cfg.realmScopes >= 10_000, why.host),
    ...[64, 256].map((groups) => raftGroupsVsLmdb(sections, groups, why)),
    ...raftScaleTargets(sections, cfg, why.raft),
    vsPgbench(1),
    vsPgbench(200),
    checkTarget({
      id: 'raft-one-per-append',
      source: 'Raft store',
      description: 'Raft log: 256 B entries one per append, as a ratio to raw write + fdatasync',
      comparator: '>=',
      threshold: 0.9,
      unit: '× raw',
      measured: raftOne?.ratio?.recordsPerSec.median ?? null,
      note: raftOne === undefined ? notMeasured(why.raft, 'not measured') : 'median of ratios paired by round',
    }),
    checkTarget({
      id: 'raft-1mib-bandwidth',
      source: 'Raft store',
      description: 'Raft log: 1 MiB appends, as a ratio to raw sequential write + fdatasync bandwidth',
      comparator: '>=',
      threshold: 0.8,
      unit: '× raw',
      measured: raftBig?.ratio?.recordsPerSec.median ?? null,
      note: raftBig === undefined ? notMeasured(why.raft, 'not measured') : 'median of ratios paired by round',
    }),
    checkTarget(
      {
        id: 'raft-snapshot-1gib-rss',
        source: 'Raft store',
        description: 'Raft: resident memory growth for a 1 GiB snapshot through build, install and read',
        comparator: '<',
        threshold: 64,
        unit: 'MiB',
        measured: snapshot?.summary.median ?? null,
        note:
          snapshot === undefined
            ? notMeasured(why.raft, 'not measured')
            : snapshotJudged
              ? `median of ${snapshot.summary.n} runs; max ${snapshot.summary.max.toFixed(1)} MiB; bench plugin that regenerates values (see the section)`
              : `measured with ${formatBytes(cfg.snapshotBytes)}, not 1 GiB: not judged`,
      },
      snapshotJudged,
    ),
    checkTarget(
      {
        id: 'payload-1gib-rss',
        source: 'payload store',
        description: 'payloads: resident memory growth for a 1 GiB payload in and out',
        comparator: '<',
        threshold: 64,
        unit: 'MiB',
        measured: rss?.summary.median ?? null,
        note:
          rss === undefined
            ? notMeasured(why.payloads, 'not measured')
            : rssJudged
              ? `median of ${rss.summary.n} runs; max ${rss.summary.max.toFixed(1)} MiB`
              : `measured with ${formatBytes(cfg.bigPayloadBytes)}, not 1 GiB: not judged`,
      },
      rssJudged,
    ),
    ...payloadSpeedTargets(sections, cfg, notMeasured(why.payloads, 'not measured')),
  ];
}

/**
 * The payload store's speed against raw I/O (put and get at 16 MiB and at the seed's 33 MB case)
 * and how puts scale with callers at once; judged only at those sizes.
 */
function payloadSpeedTargets(sections: readonly SectionResult[], cfg: Pick<StoresConfig, 'payloadBytes' | 'largePayloadBytes'>, why: string): TargetCheck[] {
  const vsRaw = (sectionId: string, variantId: string, what: string, bytes: number, wanted: number, rawLabel: string): TargetCheck => {
    const v = variant(sections, sectionId, variantId);
    const judged = bytes >= wanted;
    return checkTarget(
      {
        id: `${sectionId}-vs-raw`,
        source: 'payload store',
        description: `payloads: ${what} of ${formatBytes(wanted)}, as a ratio to ${rawLabel}`,
        comparator: '>=',
        threshold: 0.8,
        unit: '× raw',
        measured: v?.ratio?.recordsPerSec.median ?? null,
        note:
          v === undefined
            ? why
            : judged
              ? `median of ratios paired by round (${(v.ratio?.recordsPerSec.min ?? 0).toFixed(2)}–${(v.ratio?.recordsPerSec.max ?? 0).toFixed(2)})`
              : `measured with ${formatBytes(bytes)}, not ${formatBytes(wanted)}: not judged`,
      },
      judged,
    );
  };
  const four = variant(sections, 'payload-put-concurrent', concurrentVariantId('seglog', 'put', 4));
  const fourJudged = cfg.payloadBytes >= 16 * MIB;
  return [
    vsRaw('payload-put', 'put/seglog', 'put', cfg.payloadBytes, 16 * MIB, 'raw write + fsync of a new file'),
    vsRaw('payload-put-large', 'put/seglog', 'put', cfg.largePayloadBytes, 33 * MIB, 'raw write + fsync of a new file'),
    vsRaw('payload-get', 'get/seglog', 'get', cfg.payloadBytes, 16 * MIB, 'raw read of a file of the same size'),
    vsRaw('payload-get-large', 'get/seglog', 'get', cfg.largePayloadBytes, 33 * MIB, 'raw read of a file of the same size'),
    checkTarget(
      {
        id: 'payload-4-puts-vs-one',
        source: 'payload store',
        description: 'payloads: 4 puts of 16 MiB at once, MiB/s as a ratio to one put at a time',
        comparator: '>=',
        threshold: 1.5,
        unit: '× one put',
        measured: four?.ratio?.recordsPerSec.median ?? null,
        note:
          four === undefined
            ? why
            : fourJudged
              ? `median of ratios paired by round (${(four.ratio?.recordsPerSec.min ?? 0).toFixed(2)}–${(four.ratio?.recordsPerSec.max ?? 0).toFixed(2)})`
              : `measured with ${formatBytes(cfg.payloadBytes)}, not 16 MiB: not judged`,
      },
      fourJudged,
    ),
  ];
}

/** The run-time target of this command (not judged when `--only` left sections out). */
export function durationTarget(quick: boolean, durationMs: number, partial = false): TargetCheck {
  return checkTarget(
    {
      id: quick ? 'stores-quick-under-60s' : 'stores-full-under-10min',
      source: 'bench stores',
      description: `\`seglog bench stores${quick ? ' --quick' : ''}\` runs end to end`,
      comparator: '<',
      threshold: quick ? 60 : 600,
      unit: 's',
      measured: durationMs / 1000,
      note: partial
        ? 'this run, wall clock; only some sections ran (--only): not judged'
        : 'this run, wall clock, including building the realm, the log and the payloads',
    },
    !partial,
  );
}

// ---- the whole run ----

export interface StoresRun {
  sections: SectionResult[];
  notes: string[];
}

/** The one-at-a-time payload sections this run includes, in report order. */
function payloadPlans(cfg: StoresConfig, seglog: SeglogStores): SectionPlan[] {
  const run = (id: string): boolean => runsSection(cfg, id);
  const plans = [
    run('payload-put') ? payloadPutSection(cfg, seglog) : null,
    run('payload-put-large') ? payloadPutSection(cfg, seglog, true) : null,
    run('payload-get') ? payloadGetSection(cfg, seglog) : null,
    run('payload-get-large') ? payloadGetSection(cfg, seglog, true) : null,
  ];
  return plans.filter((p): p is SectionPlan => p !== null);
}

/**
 * Plans, runs and measures the sections of `seglog bench stores` that `cfg` selects and `pick`
 * keeps, in report order (`pick` lets the command run them in two parts, those of
 * SEGLOG_ALONE_SECTIONS in sections.ts first).
 */
export async function runStores(cfg: StoresConfig, deps: StoresDeps, progress?: Progress, pick: (id: string) => boolean = () => true): Promise<StoresRun> {
  const notes: string[] = [];
  const sections: SectionResult[] = [];
  // Each section says how long it took, set-up and builds included (a target bounds the whole run).
  const timed = async (f: () => Promise<SectionResult | null>): Promise<void> => {
    const t0 = nowNs();
    const section = await f();
    if (section === null) return;
    section.notes.push(`This section took ${((nowNs() - t0) / 1e9).toFixed(1)} s of wall time, set-up and builds included.`);
    sections.push(section);
  };
  const run = (id: string): boolean => runsSection(cfg, id) && pick(id);
  if (run('host-commits')) {
    await timed(async () => {
      const section = await runSection(hostCommitSection(cfg, deps.host, deps.segments ?? null), progress);
      const note = primitiveNote(section);
      if (note !== null) section.notes.push(note);
      return section;
    });
  }
  if (run('host-open') && deps.host.available.length > 0) await timed(() => hostOpenSection(cfg, deps.host, progress));
  const pg = deps.pg ?? null;
  // host-pg runs whole seconds of pgbench per variant and round: in a --quick run only when --only names it.
  const runPg = run('host-pg') && pg !== null && (!cfg.quick || cfg.only !== undefined);
  if (runPg) await timed(() => runSection(pgHostSection(cfg, pg), progress));
  if (run('raft-appends')) await timed(() => runSection(raftAppendSection(cfg, deps.raft), progress));
  if (run('raft-1mib')) await timed(() => runSection(raftLargeSection(cfg, deps.raft), progress));
  if (run('raft-open') && deps.raft.available.length > 0) await timed(() => raftOpenSection(cfg, deps.raft, progress));
  if (run('raft-snapshot-rss')) await timed(() => raftSnapshotRssSection(cfg, deps.seglog, progress));
  if (run('raft-groups')) await timed(() => raftGroupsSection(cfg, deps.seglog, progress));
  for (const plan of payloadPlans(cfg, deps.seglog)) if (pick(plan.id)) await timed(() => runSection(plan, progress));
  for (const which of concurrentPayloadSections(cfg)) {
    const plan = run(which.id) ? concurrentPayloadSection(cfg, deps.seglog, which) : null;
    if (plan === null) continue;
    await timed(async () => {
      const section = await runSection(plan, progress);
      section.notes.push(...concurrentPayloadNotes(section, cfg, which.op));
      return section;
    });
  }
  if (run('payload-rss')) await timed(() => payloadRssSection(cfg, deps.seglog, progress));
  if (cfg.only !== undefined) notes.push(`Only these sections ran (--only): ${cfg.only.join(', ')}.`);
  return { sections, notes };
}

/** Planned wall time in ms (for the progress bar): the sections' budgets plus the builds, roughly. */
export function plannedStoresMs(cfg: StoresConfig, deps: StoresDeps): number {
  const run = (id: string): boolean => runsSection(cfg, id);
  const plans: SectionPlan[] = [];
  if (run('host-commits')) plans.push(hostCommitSection(cfg, deps.host, deps.segments ?? null));
  if (run('host-pg') && deps.pg && (!cfg.quick || cfg.only !== undefined)) plans.push(pgHostSection(cfg, deps.pg));
  if (run('raft-appends')) plans.push(raftAppendSection(cfg, deps.raft));
  if (run('raft-1mib')) plans.push(raftLargeSection(cfg, deps.raft));
  plans.push(...payloadPlans(cfg, deps.seglog));
  for (const which of concurrentPayloadSections(cfg)) {
    const plan = run(which.id) ? concurrentPayloadSection(cfg, deps.seglog, which) : null;
    if (plan !== null) plans.push(plan);
  }
  const sectionsMs = plans.reduce((t, p) => t + plannedMs(p), 0);
  const buildsMs =
    (run('host-open') ? deps.host.available.length * ((cfg.realmScopes + cfg.realmScopesLarge) * 0.2 + 2 * cfg.childRuns * 500) : 0) +
    (run('raft-open') ? deps.raft.available.length * ((cfg.logBytes / MIB) * 8 + cfg.childRuns * 500) : 0) +
    (run('raft-open') && deps.seglog.raft.ok ? RAFT_OPEN_SCALE * (cfg.logBytes / MIB) * 8 + cfg.childRuns * 500 : 0);
  const payloadMs = run('payload-rss') && deps.seglog.payloads.ok ? cfg.childRuns * (cfg.bigPayloadBytes / MIB) * 8 : 0;
  const snapshotMs = run('raft-snapshot-rss') && deps.seglog.raft.ok ? snapshotPlannedMs(cfg) : 0;
  const groupsMs = run('raft-groups') && deps.seglog.raft.ok ? raftGroupsPlannedMs(cfg) : 0;
  return sectionsMs + buildsMs + payloadMs + snapshotMs + groupsMs;
}

export type { StoreImplementation };
