// The measurements `seglog bench stores` takes in a process of their own: opening a large realm,
// opening a large Raft log, streaming a large payload in and out under an RSS watch, and a large
// Raft snapshot through build, install and read under an RSS watch.
//
// Owns: the child entry point (`node child.js '<json task>'`, one JSON line on stdout) and
// `runChild`, which the suite uses to run one. Guarantees: in a full run each run is a fresh Node
// process (`repeat: 1`; in --quick the runs of one implementation share one process, to save
// process starts), so an open starts with nothing of the store in memory (no handle, no cache of the benchmark's process;
// the OS page cache stays warm: a benchmark on a shared machine does not drop it), and resident
// memory is that of a process that did only this: RSS growth is measured against the process
// right after the store was opened (payloads) or before it was (realm and log opens), sampled at
// every chunk and every 2 ms. The snapshot measurement runs with --expose-gc and collects the
// garbage of its set-up before it reads its baseline (see snapshot-bench.ts for why its state is
// built with small commands).

import { execFile } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SCOPE_KINDS } from '../../lib/host/types.js';
import type { RaftStateMachine } from '../../lib/raft/types.js';
import { BENCH_PG_ENV } from './host-pg.js';
import { hostImplementations, raftImplementations, type ImplName } from './impls.js';
import { loadPeers } from './peers.js';
import { loadRaftNodeOpener, loadSeglogStores, type SeglogStores } from './seglog.js';
import { generatedKvPlugin, snapshotStateBatches, snapshotStatePlan, type GeneratedKvPlugin, type SnapshotRssResult } from './snapshot-bench.js';
import { generatedBody } from './workloads.js';
import { raftGroupsCreate, raftGroupsOpen, type RaftGroupsCreateResult, type RaftGroupsOpenResult } from './groups-bench.js';
import { payload } from '../rawfs.js';

/** One measurement, `repeat` times in the same process (1: a fresh process per run). */
export type ChildTask = { repeat: number } & (
  | { task: 'host-open'; impl: ImplName; dir: string }
  | { task: 'raft-open'; impl: ImplName; dir: string; group: string }
  /** The floor of seglog's raft-open: the segmented log of that group opened on its own. */
  | { task: 'segments-open'; dir: string }
  | { task: 'payload-rss'; dir: string; bytes: number; chunkBytes: number }
  | { task: 'snapshot-rss'; dir: string; bytes: number }
  /** The node of many groups (groups-bench.ts): `create` builds it, `open` opens it in a fresh process. */
  | { task: 'raft-groups'; phase: 'create' | 'open'; dir: string; groups: number }
);

export interface HostOpenResult {
  openMs: number;
  /** open + every head of every kind listed (Core's bulk load at open). */
  openListMs: number;
  heads: number;
  rssBeforeBytes: number;
  rssAfterBytes: number;
}

export interface RaftOpenResult {
  /** open of the node and the group, getLogState, and a read of the first and the last entry. */
  openMs: number;
  entries: number;
  rssBeforeBytes: number;
  rssAfterBytes: number;
}

export interface PayloadRssResult {
  putMs: number;
  getMs: number;
  bytes: number;
  baseRssBytes: number;
  peakPutRssBytes: number;
  peakGetRssBytes: number;
}

const MIB = 1024 * 1024;

class RssWatch {
  peak = 0;
  readonly #timer: NodeJS.Timeout;
  constructor() {
    this.sample();
    this.#timer = setInterval(() => this.sample(), 2);
  }
  sample(): void {
    const r = process.memoryUsage.rss();
    if (r > this.peak) this.peak = r;
  }
  stop(): number {
    clearInterval(this.#timer);
    this.sample();
    return this.peak;
  }
}

type BenchStateMachine = RaftStateMachine<unknown> & { plugin: GeneratedKvPlugin };

/**
 * One run of the snapshot measurement: two nodes in fresh directories under `t.dir` (a leader and
 * a follower, each with group "g" and the generated-KV plugin); the leader's state of at least
 * `t.bytes` of values is built through `apply` (compact commands); then, against the RSS after a
 * full collection, three watched phases: build (getSnapshotBuilder, buildSnapshot, its stream read
 * to the end), install (the leader's current snapshot streamed into the follower's sink, then
 * installSnapshot) and read (the follower's current snapshot read to the end).
 */
async function snapshotRss(t: Extract<ChildTask, { task: 'snapshot-rss' }>): Promise<SnapshotRssResult> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('the snapshot measurement needs node --expose-gc (runChild passes it)');
  const opener = await loadRaftNodeOpener();
  if (!opener.ok) throw new Error(opener.missing);
  await rm(t.dir, { recursive: true, force: true });
  await mkdir(t.dir, { recursive: true });
  const leader = await opener.open(path.join(t.dir, 'leader'), { plugin: generatedKvPlugin });
  const follower = await opener.open(path.join(t.dir, 'follower'), { plugin: generatedKvPlugin });
  try {
    const lsm = (await leader.openGroup('g')).stateMachine as BenchStateMachine;
    const fsm = (await follower.openGroup('g')).stateMachine as BenchStateMachine;
    const plan = snapshotStatePlan(t.bytes);
    const a0 = performance.now();
    for (const batch of snapshotStateBatches(plan.keys, 64, 16)) {
      const replies = (await lsm.apply(batch)) as { ok: boolean }[];
      if (replies.some((r) => !r.ok)) throw new Error('the generated state was refused by its plugin');
    }
    const applyMs = performance.now() - a0;
    if (lsm.plugin.size !== plan.keys) throw new Error(`the leader holds ${lsm.plugin.size} of ${plan.keys} keys`);

    // A full collection, then a pause: V8 frees external buffers after the collection, not in it.
    gc();
    await new Promise((resolve) => setTimeout(resolve, 200));
    gc();
    const baseRssBytes = process.memoryUsage.rss();

    const buildWatch = new RssWatch();
    const b0 = performance.now();
    const built = await (await lsm.getSnapshotBuilder()).buildSnapshot();
    let snapshotBytes = 0;
    for await (const chunk of built.data) {
      snapshotBytes += chunk.length;
      buildWatch.sample();
    }
    const buildMs = performance.now() - b0;
    const peakBuildRssBytes = buildWatch.stop();

    const installWatch = new RssWatch();
    const i0 = performance.now();
    const current = await lsm.getCurrentSnapshot();
    if (current === null) throw new Error('the leader has no current snapshot after a build');
    const sink = await fsm.beginReceivingSnapshot();
    let sent = 0;
    for await (const chunk of current.data) {
      await sink.write(chunk);
      sent += chunk.length;
      installWatch.sample();
    }
    await fsm.installSnapshot(current.meta, sink);
    const installMs = performance.now() - i0;
    const peakInstallRssBytes = installWatch.stop();

    const readWatch = new RssWatch();
    const r0 = performance.now();
    const installed = await fsm.getCurrentSnapshot();
    if (installed === null) throw new Error('the follower has no current snapshot after an install');
    let read = 0;
    for await (const chunk of installed.data) {
      read += chunk.length;
      readWatch.sample();
    }
    const readMs = performance.now() - r0;
    const peakReadRssBytes = readWatch.stop();

    if (sent !== snapshotBytes || read !== snapshotBytes) throw new Error(`snapshot of ${snapshotBytes} bytes: ${sent} sent, ${read} read back`);
    if (fsm.plugin.size !== plan.keys || fsm.plugin.restoredValueBytes !== plan.valueBytes) {
      throw new Error(`the follower restored ${fsm.plugin.size} keys and ${fsm.plugin.restoredValueBytes} value bytes of ${plan.keys} and ${plan.valueBytes}`);
    }
    return {
      keys: plan.keys,
      stateBytes: plan.valueBytes,
      snapshotBytes,
      applyMs,
      buildMs,
      installMs,
      readMs,
      baseRssBytes,
      peakBuildRssBytes,
      peakInstallRssBytes,
      peakReadRssBytes,
    };
  } finally {
    await leader.close();
    await follower.close();
    await rm(t.dir, { recursive: true, force: true });
  }
}

async function run(t: ChildTask): Promise<HostOpenResult | RaftOpenResult | PayloadRssResult | SnapshotRssResult | RaftGroupsCreateResult | RaftGroupsOpenResult> {
  if (t.task === 'snapshot-rss') return snapshotRss(t);
  if (t.task === 'raft-groups') return t.phase === 'create' ? raftGroupsCreate(t.dir, t.groups) : raftGroupsOpen(t.dir, t.groups);
  if (t.task === 'segments-open') return segmentsOpen(t.dir);
  // Load only what this run measures: seglog's one store, or the peers.
  const impl = t.task === 'payload-rss' ? 'seglog' : t.impl;
  const notLoaded = { ok: false, missing: 'not loaded in this process' } as const;
  const seglog: SeglogStores =
    impl === 'seglog'
      ? await loadSeglogStores(t.task === 'host-open' ? 'host' : t.task === 'raft-open' ? 'raft' : 'payloads')
      : { host: notLoaded, raft: notLoaded, payloads: notLoaded };
  const loaded = impl === 'seglog' ? notLoaded : loadPeers();
  const peers = loaded.ok ? loaded.peers : null;
  const missing = loaded.ok ? '' : loaded.missing;
  if (t.task === 'host-open') {
    const pgUrl = process.env[BENCH_PG_ENV];
    const pg = t.impl === 'pg' ? (pgUrl === undefined ? { ok: false as const, missing: `no ${BENCH_PG_ENV}` } : { ok: true as const, url: pgUrl }) : undefined;
    const impl = hostImplementations(seglog, peers, missing, pg).available.find((i) => i.name === t.impl);
    if (impl === undefined) throw new Error(`${t.impl} is not available`);
    const rssBeforeBytes = process.memoryUsage.rss();
    const t0 = performance.now();
    const store = await impl.open(t.dir);
    const t1 = performance.now();
    let heads = 0;
    for (const kind of SCOPE_KINDS) {
      let after: string | null = null;
      for (;;) {
        const page = await store.listHeads(kind, after, 1000);
        heads += page.heads.length;
        if (page.next === null) break;
        after = page.next;
      }
    }
    const t2 = performance.now();
    const rssAfterBytes = process.memoryUsage.rss();
    await impl.close(store);
    return { openMs: t1 - t0, openListMs: t2 - t0, heads, rssBeforeBytes, rssAfterBytes };
  }
  if (t.task === 'raft-open') {
    const impl = raftImplementations(seglog, peers, missing).available.find((i) => i.name === t.impl);
    if (impl === undefined) throw new Error(`${t.impl} is not available`);
    const rssBeforeBytes = process.memoryUsage.rss();
    const t0 = performance.now();
    const node = await impl.open(t.dir);
    const log = await node.openGroup(t.group);
    const state = await log.getLogState();
    const last = state.lastLogId?.index ?? 0;
    const first = (state.lastPurgedLogId?.index ?? 0) + 1;
    const head = await log.tryGetLogEntries(first, first + 1);
    const tail = await log.tryGetLogEntries(last, last + 1);
    const t1 = performance.now();
    if (head.length !== 1 || tail.length !== 1) throw new Error(`the reopened log lost its first or last entry (${first}..${last})`);
    const rssAfterBytes = process.memoryUsage.rss();
    await impl.close(node);
    return { openMs: t1 - t0, entries: last - first + 1, rssBeforeBytes, rssAfterBytes };
  }
  if (!seglog.payloads.ok) throw new Error(seglog.payloads.missing);
  await rm(t.dir, { recursive: true, force: true });
  await mkdir(t.dir, { recursive: true });
  const store = await seglog.payloads.open(t.dir);
  const pattern = payload(t.chunkBytes, 31);
  const baseRssBytes = process.memoryUsage.rss();
  const putWatch = new RssWatch();
  const t0 = performance.now();
  const body = generatedBody(t.bytes, 1, pattern);
  const counted: AsyncIterable<Uint8Array> = {
    async *[Symbol.asyncIterator]() {
      for await (const chunk of body) {
        putWatch.sample();
        yield chunk;
      }
    },
  };
  const info = await store.put(counted);
  const t1 = performance.now();
  const peakPutRssBytes = putWatch.stop();
  const getWatch = new RssWatch();
  let read = 0;
  const t2 = performance.now();
  for await (const chunk of await store.get(info.digest)) {
    read += chunk.length;
    getWatch.sample();
  }
  const t3 = performance.now();
  const peakGetRssBytes = getWatch.stop();
  await store.close();
  if (read !== t.bytes || info.size !== t.bytes) throw new Error(`payload came back with ${read} of ${t.bytes} bytes`);
  return { putMs: t1 - t0, getMs: t3 - t2, bytes: t.bytes, baseRssBytes, peakPutRssBytes, peakGetRssBytes };
}

/** Opens the segmented log in `dir`, reads its first and last record, closes it. */
async function segmentsOpen(dir: string): Promise<RaftOpenResult> {
  const { openSegmentedLog } = await import('../../segments/index.js');
  const rssBeforeBytes = process.memoryUsage.rss();
  const t0 = performance.now();
  // A Raft group's log: opened as its node opens it (no LOCK of its own, its growing manifest
  // read at its size; the node is closed, so this process is its only opener).
  const log = await openSegmentedLog(dir, { ownerLocked: true } as Parameters<typeof openSegmentedLog>[1]);
  const head = await log.read(log.firstIndex, 1);
  const tail = await log.read(log.endIndex - 1, 1);
  const t1 = performance.now();
  if (head.length !== 1 || tail.length !== 1) throw new Error(`the segmented log lost its first or last record`);
  const rssAfterBytes = process.memoryUsage.rss();
  const entries = log.endIndex - log.firstIndex;
  await log.close();
  return { openMs: t1 - t0, entries, rssBeforeBytes, rssAfterBytes };
}

async function runRepeated(t: ChildTask): Promise<unknown[]> {
  const results: unknown[] = [];
  for (let i = 0; i < t.repeat; i++) results.push(await run(t));
  return results;
}

/** Runs one task in a fresh Node process and answers its `repeat` results. */
export function runChild<R>(task: ChildTask): Promise<R[]> {
  const script = fileURLToPath(import.meta.url);
  return new Promise((resolve, reject) => {
    const flags = task.task === 'snapshot-rss' || task.task === 'raft-groups' ? ['--expose-gc'] : [];
    execFile(process.execPath, [...flags, script, JSON.stringify(task)], { maxBuffer: 4 * MIB, timeout: 600_000 }, (err, stdout, stderr) => {
      if (err !== null) {
        reject(new Error(`child ${task.task} failed: ${err.message}\n${stderr}`));
        return;
      }
      const line = stdout.trim().split('\n').pop() ?? '';
      try {
        resolve(JSON.parse(line) as R[]);
      } catch {
        reject(new Error(`child ${task.task} printed no result: ${stdout}\n${stderr}`));
      }
    });
  });
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  runRepeated(JSON.parse(process.argv[2] ?? '{}') as ChildTask).then(
    (result) => {
      process.stdout.write(`${JSON.stringify(result)}\n`);
    },
    (err: unknown) => {
      process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
