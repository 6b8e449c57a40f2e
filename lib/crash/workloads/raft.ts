// Crash workloads of the file-system Raft store: runs that record a trace on MemoryFs, and the
// checkers that judge every disk a crash may leave of them (lib/crash/explore.ts).
//
// Owns: `raftCrashWorkloads` — append (sequential, batched, a large entry, one naming a payload,
// then appends in flight together), truncate, purge, saveVote + saveCommitted (with appends in
// flight, to check that a vote and a committed id are durable only after the appends before
// them), and installSnapshot (+ apply and build around it) — and `runRaftCrashWorkload`, which
// sets a node up, records the workload, explores the crash states and checks each. Guarantees of
// every checker: the state opens (every crash state must); every acknowledged entry, vote,
// committed id, purge and install is in effect; what is visible is a state some prefix of the
// calls produces (a call in flight: before or after it, an append in flight: a prefix of it); no
// hole in the log; no entry at or below the purged id.

import assert from 'node:assert/strict';

import { ManualClock } from '../../clock.js';
import { MemoryFs, type DiskImage, type TraceEntry } from '../../fs/memory.js';
import type { FileSystem } from '../../fs/types.js';
import type { RaftMistakes } from '../../raft/mistakes.js';
import { encodeKvCommand, type KvPlugin } from '../../raft/kv.js';
import { openRaftNode, type RaftGroup, type RaftNode, type RaftNodeOptions } from '../../raft/node.js';
import { compareLogId, compareVote, logIdEquals, type Entry, type LogId, type Vote } from '../../raft/types.js';
import { checkAckAfterSync, type AckCheckResult } from '../linear.js';
import { exploreCrashStates, type CrashState, type ExploreOptions, type ExploreResult } from '../explore.js';
import type { CrashWorkload, WorkloadContext, WorkloadRun } from './types.js';

/** The node directory of a workload run on its own. */
export const RAFT_CRASH_NODE = '/n';
/**
 * Small segments, so that the workloads roll and truncate across segment files; every close
 * writes the reference checkpoint (no scan allowance: reference-checkpoint.ts), so that the
 * checkpoint's writes and lowerings are in the traces of these small logs.
 */
const NODE_OPTIONS = { segmentBytes: 2048, journalSegmentBytes: 2048, referenceScanAllowanceBytes: 0 } as const;

/** Where a workload runs: its node directory, the prefix of its marks, and any planted mistake. */
export interface RaftCrashEnv {
  dir: string;
  tag: string;
  mistakes?: RaftMistakes;
  /** The group logs' segment size, when a workload needs another than NODE_OPTIONS'. */
  segmentBytes?: number;
  /** The node journal's checkpoint threshold (test-only, node-options.ts), when a workload needs checkpoints within a few calls. */
  journalCheckpointBytes?: number;
  /** Groups always journal their writes, or never (test-only, fs-log.ts JournalMode; default: by whether others write). */
  journalMode?: 'journal' | 'direct' | 'alternate';
}

const standalone: RaftCrashEnv = { dir: RAFT_CRASH_NODE, tag: '' };

/** Opens a workload's node on `fs` (a fresh manual clock: the payload grace never expires). */
export function openCrashNode(fs: FileSystem, env: RaftCrashEnv = standalone): Promise<RaftNode<KvPlugin>> {
  return openRaftNode(env.dir, {
    fs,
    clock: new ManualClock(),
    ...NODE_OPTIONS,
    ...(env.segmentBytes === undefined ? {} : { segmentBytes: env.segmentBytes }),
    ...(env.mistakes === undefined ? {} : { mistakes: env.mistakes }),
    ...(env.journalCheckpointBytes === undefined ? {} : { journalCheckpointBytes: env.journalCheckpointBytes }),
    ...(env.journalMode === undefined ? {} : { journalMode: env.journalMode }),
  } as RaftNodeOptions<KvPlugin>);
}

// ---------------------------------------------------------------------------------------------
// Entries and what a node shows

const enc = new TextEncoder();
const dec = new TextDecoder();

function lid(term: number, index: number, node = 1): LogId {
  return { leaderId: { term, nodeId: node }, index };
}

/** A KV set entry whose value names it (term, index) and pads it to `size` bytes. */
function kvEntry(term: number, index: number, size = 8, payloads?: string[]): Entry {
  const tag = `t${term}i${index}`;
  const value = tag.padEnd(Math.max(size, tag.length), '.');
  const data = encodeKvCommand({ op: 'set', key: `k${index % 7}`, value: enc.encode(value) });
  return { logId: lid(term, index), payload: payloads === undefined ? { type: 'normal', data } : { type: 'normal', data, payloads } };
}

function blank(term: number, index: number): Entry {
  return { logId: lid(term, index), payload: { type: 'blank' } };
}

/** A comparable rendering of an entry: its id and its bytes' first 24 characters. */
function show(e: Entry): string {
  const id = `${e.logId.leaderId.term}.${e.logId.leaderId.nodeId}.${e.logId.index}`;
  if (e.payload.type !== 'normal') return `${id}:${e.payload.type}`;
  return `${id}:${dec.decode(e.payload.data.subarray(0, 24))}:${e.payload.data.length}`;
}

/** What the log store shows after recovery. */
export interface ObservedLog {
  purged: LogId | null;
  /** The entries held, rendered (see `show`), from the first held index. */
  entries: string[];
  first: number;
  vote: Vote | null;
  committed: LogId | null;
}

/** What the state machine shows after recovery. */
export interface ObservedSm {
  applied: LogId | null;
  kv: Record<string, string>;
  snapshot: LogId | null | undefined;
}

async function observeLog(g: RaftGroup<KvPlugin>): Promise<ObservedLog> {
  const st = await g.log.getLogState();
  const first = st.lastPurgedLogId === null ? 0 : st.lastPurgedLogId.index + 1;
  const entries = await g.log.tryGetLogEntries(0, Number.MAX_SAFE_INTEGER);
  // No hole: consecutive indices, the first right after the purged id (or anywhere if none).
  entries.forEach((e, i) => assert.equal(e.logId.index, (entries[0] as Entry).logId.index + i, 'no hole in the log'));
  if (st.lastPurgedLogId !== null && entries.length > 0) assert.equal(entries[0]?.logId.index, first, 'the log continues right after the purged id');
  const last = entries[entries.length - 1];
  assert.deepEqual(st.lastLogId, last === undefined ? st.lastPurgedLogId : last.logId, 'getLogState agrees with the entries');
  return {
    purged: st.lastPurgedLogId,
    entries: entries.map(show),
    first: entries[0]?.logId.index ?? first,
    vote: await g.log.readVote(),
    committed: await g.log.readCommitted(),
  };
}

async function observeSm(g: RaftGroup<KvPlugin>): Promise<ObservedSm> {
  const [applied] = await g.stateMachine.appliedState();
  const plugin = g.stateMachine.plugin;
  const kv: Record<string, string> = {};
  for (const k of plugin.keys()) kv[k] = dec.decode(plugin.get(k) ?? new Uint8Array());
  const snap = await g.stateMachine.getCurrentSnapshot();
  if (snap !== null) for await (const chunk of snap.data) void chunk; // streams back whole
  return { applied, kv, snapshot: snap === null ? undefined : snap.meta.lastLogId };
}

/** Opens the node on a crash state's disk (must succeed) and observes group `g` (and closes). */
async function observe(image: DiskImage, env: RaftCrashEnv, group = 'g'): Promise<{ log: ObservedLog; sm: ObservedSm }> {
  const node = await openCrashNode(new MemoryFs({ image, trace: false }), { dir: env.dir, tag: env.tag });
  try {
    const g = await node.openGroup(group);
    return { log: await observeLog(g), sm: await observeSm(g) };
  } finally {
    await node.close();
  }
}

export function maxAck(state: CrashState, env: RaftCrashEnv, label: string): number {
  let m = -1;
  for (const a of state.acknowledged) if (a.label === env.tag + label) m = Math.max(m, a.detail as number);
  return m;
}

// ---------------------------------------------------------------------------------------------
// Sequential log workloads: a list of steps, each awaited, with the log's content after each.

interface LogModel {
  purged: LogId | null;
  entries: Entry[];
}

type LogStep =
  | { op: 'append'; entries: Entry[] }
  | { op: 'truncate'; index: number }
  | { op: 'purge'; logId: LogId };

function step(m: LogModel, s: LogStep): LogModel {
  const firstIndex = m.entries[0]?.logId.index ?? (m.purged === null ? 0 : m.purged.index + 1);
  switch (s.op) {
    case 'append':
      return { purged: m.purged, entries: [...m.entries, ...s.entries] };
    case 'truncate':
      return { purged: m.purged, entries: m.entries.filter((e) => e.logId.index < s.index) };
    case 'purge':
      if (m.purged !== null && s.logId.index <= m.purged.index) return m;
      void firstIndex;
      return { purged: s.logId, entries: m.entries.filter((e) => e.logId.index > s.logId.index) };
  }
}

function sameLog(o: ObservedLog, m: LogModel): boolean {
  return logIdEquals(o.purged, m.purged) && o.entries.length === m.entries.length && o.entries.every((x, i) => x === show(m.entries[i] as Entry));
}

async function runLogSteps(g: RaftGroup<KvPlugin>, fs: MemoryFs, env: RaftCrashEnv, steps: LogStep[]): Promise<void> {
  for (const [k, s] of steps.entries()) {
    if (s.op === 'append') {
      await new Promise<void>((resolve, reject) => {
        g.log.append(s.entries, (err) => (err === null ? resolve() : reject(err))).catch(reject);
      });
    } else if (s.op === 'truncate') {
      await g.log.truncate(lid(1, s.index));
    } else {
      await g.log.purge(s.logId);
    }
    fs.mark(env.tag + 'ack', k + 1);
  }
}

function sequentialLogCheck(steps: LogStep[]) {
  const states: LogModel[] = [{ purged: null, entries: [] }];
  for (const s of steps) states.push(step(states[states.length - 1] as LogModel, s));
  return async (state: CrashState, env: RaftCrashEnv): Promise<void> => {
    const acked = Math.max(0, maxAck(state, env, 'ack'));
    const { log } = await observe(state.image, env);
    for (let k = acked; k < states.length; k++) {
      const s = states[k] as LogModel;
      if (sameLog(log, s)) return;
      const next = steps[k];
      if (next?.op === 'append') {
        // The append in flight: any prefix of its entries may have landed.
        for (let n = 1; n < next.entries.length; n++) if (sameLog(log, { purged: s.purged, entries: [...s.entries, ...next.entries.slice(0, n)] })) return;
      }
      // Nothing after the step in flight can be visible: stop at the first unacknowledged one.
      if (k > acked) break;
    }
    throw new Error(
      `the log shows a state no prefix of the calls makes (acked through step ${acked}): purged ${JSON.stringify(log.purged)}, entries [${log.entries.join(' ')}]`,
    );
  };
}

// ---------------------------------------------------------------------------------------------
// The workloads

export interface RaftCrashWorkload {
  name: string;
  /** Builds the starting disk: a node in `env.dir`, cleanly closed. */
  setup(fs: MemoryFs, env: RaftCrashEnv): Promise<void>;
  /** Runs on the recording file system, marking each acknowledgement (labels prefixed by `env.tag`). */
  run(fs: MemoryFs, env: RaftCrashEnv): Promise<void>;
  /** Throws when a crash state breaks the contract. */
  check(state: CrashState, env: RaftCrashEnv): Promise<void>;
  /**
   * Whether the acknowledgement `marker` depends on `op` for the linear pass; omitted for
   * workloads with calls in flight together (the explorer checks those).
   */
  dependsOn?: (marker: TraceEntry, op: TraceEntry) => boolean;
}

async function withGroup(fs: MemoryFs, env: RaftCrashEnv, body: (g: RaftGroup<KvPlugin>, node: RaftNode<KvPlugin>) => Promise<void>, id = 'g'): Promise<void> {
  const node = await openCrashNode(fs, env);
  try {
    await body(await node.openGroup(id), node);
  } finally {
    await node.close();
  }
}

/**
 * Issues an append without waiting for it; the answer settles at its `onFlushed`, which first
 * marks the flush of its last entry (the acknowledgement the checker reads).
 */
function appendMarkingFlush(g: RaftGroup<KvPlugin>, fs: MemoryFs, env: RaftCrashEnv, entries: Entry[]): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    g.log
      .append(entries, (err) => {
        if (err !== null) return reject(err);
        fs.mark(env.tag + 'flushed', (entries[entries.length - 1] as Entry).logId.index);
        resolve();
      })
      .catch(reject);
  });
}

const emptyGroup = (fs: MemoryFs, env: RaftCrashEnv): Promise<void> => withGroup(fs, { dir: env.dir, tag: env.tag }, async () => {});

/**
 * Operations no acknowledgement depends on, by design: index files of the segmented logs (derived
 * data), LOCK files (no data), the unlinks of garbage (segments no manifest names, snapshot files
 * below the current one: open deletes any that come back), the payload store's clock
 * checkpoint at close, and the node's clean-close mark (created after every sync of a close,
 * unlinked unsynced by the next open: docs/raft-store.md, "Clean close", says why neither needs
 * a sync; the explorer checks the states either way leaves). And the writes of records into a
 * group's Raft log segments: the node journal's record makes an append durable (replay rebuilds
 * the group's log from it, docs/raft-store.md, "The node journal"); the group's log is synced by
 * the journal's checkpoints, which the explorer's states cover.
 */
function designNotDependedOn(op: TraceEntry): boolean {
  const p = op.path;
  if (p.endsWith('.idx') || p.endsWith('/LOCK') || p.endsWith('/CLEAN')) return true;
  if ((op.kind === 'write' || op.kind === 'writev') && /\/groups\/[0-9a-f]{64}\/log\/[^/]+\.seg$/.test(p)) return true;
  if (op.kind === 'unlink' && (p.endsWith('.seg') || p.endsWith('.snap') || p.endsWith('.part'))) return true;
  return false;
}

const appendSteps = (): LogEntryPlan => {
  const seq: Entry[][] = [[kvEntry(1, 0)], [kvEntry(1, 1), kvEntry(1, 2, 300), kvEntry(1, 3)], [kvEntry(1, 4, 40 * 1024)], [kvEntry(2, 5), kvEntry(2, 6)]];
  const flight: Entry[][] = [[kvEntry(2, 8)], [kvEntry(2, 9, 600)], [kvEntry(2, 10), kvEntry(2, 11)], [kvEntry(3, 12)], [kvEntry(3, 13, 900)]];
  return { seq, flight };
};

interface LogEntryPlan {
  seq: Entry[][];
  flight: Entry[][];
}

/** Appends one by one (each awaited), one naming a payload, then several in flight together. */
const appendWorkload: RaftCrashWorkload = {
  name: 'append',
  setup: emptyGroup,
  async run(fs, env) {
    const plan = appendSteps();
    await withGroup(fs, env, async (g, node) => {
      for (const entries of plan.seq) {
        await new Promise<void>((resolve, reject) => {
          g.log.append(entries, (err) => (err === null ? resolve() : reject(err))).catch(reject);
        });
        fs.mark(env.tag + 'flushed', (entries[entries.length - 1] as Entry).logId.index);
      }
      const { digest } = await node.payloads.put(
        (async function* () {
          yield enc.encode('a payload the next entry names');
        })(),
      );
      await new Promise<void>((resolve, reject) => {
        g.log.append([kvEntry(2, 7, 8, [digest])], (err) => (err === null ? resolve() : reject(err))).catch(reject);
      });
      fs.mark(env.tag + 'flushed', 7);
      const flushed: Promise<void>[] = [];
      for (const entries of plan.flight) flushed.push(appendMarkingFlush(g, fs, env, entries));
      await Promise.all(flushed);
    });
  },
  async check(state, env) {
    const plan = appendSteps();
    const all = [...plan.seq.flat(), kvEntry(2, 7, 8, ['sha256:' + '0'.repeat(64)]), ...plan.flight.flat()].map(show);
    const flushed = maxAck(state, env, 'flushed');
    const { log } = await observe(state.image, env);
    assert.equal(log.purged, null);
    assert.deepEqual(log.entries, all.slice(0, log.entries.length), 'the log is a prefix of what was appended');
    assert.ok(log.entries.length >= flushed + 1, `every flushed entry survives (flushed through ${flushed}, found ${log.entries.length})`);
  },
};

const truncateSteps: LogStep[] = [
  { op: 'append', entries: [blank(1, 0), kvEntry(1, 1), kvEntry(1, 2), kvEntry(1, 3)] },
  { op: 'append', entries: [kvEntry(1, 4, 700), kvEntry(1, 5), kvEntry(1, 6)] },
  { op: 'append', entries: [kvEntry(1, 7), kvEntry(1, 8, 900), kvEntry(1, 9)] },
  { op: 'truncate', index: 6 },
  { op: 'append', entries: [kvEntry(2, 6), kvEntry(2, 7, 500)] },
  { op: 'truncate', index: 2 },
  { op: 'truncate', index: 30 },
  { op: 'append', entries: [kvEntry(3, 2), kvEntry(3, 3)] },
  { op: 'truncate', index: 0 },
  { op: 'append', entries: [kvEntry(4, 5), kvEntry(4, 6)] },
];

/**
 * The node journal's checkpoints between the calls: with a threshold of one byte each record
 * starts one, so every crash state of a checkpoint — the groups' logs synced or not, the journal's
 * records dropped or not — is met between appends and truncations of two groups.
 */
const journalCheckpointSteps: LogStep[] = [
  { op: 'append', entries: [blank(1, 0), kvEntry(1, 1), kvEntry(1, 2, 600)] },
  { op: 'append', entries: [kvEntry(1, 3), kvEntry(1, 4)] },
  { op: 'truncate', index: 3 },
  { op: 'append', entries: [kvEntry(2, 3, 700), kvEntry(2, 4)] },
  { op: 'purge', logId: lid(1, 1) },
  { op: 'append', entries: [kvEntry(2, 5)] },
];
const journalCheckpointWorkload: RaftCrashWorkload = {
  name: 'journal-checkpoint',
  setup: emptyGroup,
  run: (fs, env) =>
    withGroup(fs, { ...env, journalCheckpointBytes: 1, journalMode: 'journal' }, async (g, node) => {
      // A second group writing between the first's calls: its records share the journal and its checkpoints.
      const other = await node.openGroup('other');
      let k = 0;
      const otherAppend = async (): Promise<void> => {
        const index = k++;
        await new Promise<void>((resolve, reject) => {
          other.log.append([kvEntry(1, index)], (err) => (err === null ? resolve() : reject(err))).catch(reject);
        });
      };
      await otherAppend();
      await runLogSteps(g, fs, env, journalCheckpointSteps);
      await otherAppend();
    }),
  check: sequentialLogCheck(journalCheckpointSteps),
  dependsOn: (_m, op) => !designNotDependedOn(op),
};

/** Truncations inside the active segment, into a sealed one, past the end, of everything. */
const truncateWorkload: RaftCrashWorkload = {
  name: 'truncate',
  setup: emptyGroup,
  run: (fs, env) => withGroup(fs, env, (g) => runLogSteps(g, fs, env, truncateSteps)),
  check: sequentialLogCheck(truncateSteps),
  dependsOn: (_m, op) => !designNotDependedOn(op),
};

const purgeSteps: LogStep[] = [
  { op: 'append', entries: [blank(1, 0), kvEntry(1, 1), kvEntry(1, 2, 800), kvEntry(1, 3)] },
  { op: 'append', entries: [kvEntry(1, 4), kvEntry(1, 5, 900), kvEntry(1, 6), kvEntry(1, 7)] },
  { op: 'purge', logId: lid(1, 0) },
  { op: 'purge', logId: lid(1, 4) },
  { op: 'purge', logId: lid(1, 2) },
  { op: 'append', entries: [kvEntry(2, 8), kvEntry(2, 9, 700)] },
  { op: 'purge', logId: lid(2, 9) },
  { op: 'purge', logId: lid(3, 20) },
  { op: 'append', entries: [kvEntry(3, 21), kvEntry(3, 22)] },
  { op: 'truncate', index: 22 },
];

/** Purges at the head, through a sealed segment, of everything, past the end; appends after. */
const purgeWorkload: RaftCrashWorkload = {
  name: 'purge',
  setup: emptyGroup,
  run: (fs, env) => withGroup(fs, env, (g) => runLogSteps(g, fs, env, purgeSteps)),
  check: sequentialLogCheck(purgeSteps),
  dependsOn: (_m, op) => !designNotDependedOn(op),
};

const votes: Vote[] = [
  { leaderId: { term: 1, nodeId: 1 }, committed: false },
  { leaderId: { term: 1, nodeId: 1 }, committed: true },
  { leaderId: { term: 2, nodeId: 3 }, committed: false },
  { leaderId: { term: 3, nodeId: 2 }, committed: true },
];
const commits: LogId[] = [lid(1, 3), lid(2, 6), lid(2, 8), lid(3, 9)];
const vcEntries: Entry[][] = [[blank(1, 0), kvEntry(1, 1)], [kvEntry(1, 2), kvEntry(1, 3, 600)], [kvEntry(2, 4), kvEntry(2, 5)], [kvEntry(2, 6, 900)], [kvEntry(2, 7), kvEntry(2, 8)], [kvEntry(3, 9)]];

/**
 * Votes and committed ids, each issued right after an append that is not awaited: the vote (a
 * barrier) and the committed id must not be durable before the appends issued before them.
 */
const voteWorkload: RaftCrashWorkload = {
  name: 'saveVote+saveCommitted',
  setup: emptyGroup,
  async run(fs, env) {
    await withGroup(fs, env, async (g) => {
      const flushes: Promise<void>[] = [];
      const appendNoWait = (k: number): void => {
        flushes.push(appendMarkingFlush(g, fs, env, vcEntries[k] as Entry[]));
      };
      const mark = (label: string, k: number): void => void fs.mark(env.tag + label, k);
      // Each committed id points into the append issued just before it, still in flight.
      appendNoWait(0); // 0, 1
      await g.log.saveVote(votes[0] as Vote);
      mark('vote', 0);
      appendNoWait(1); // 2, 3
      await g.log.saveCommitted(commits[0] as LogId);
      mark('committed', 0);
      await g.log.saveVote(votes[1] as Vote);
      mark('vote', 1);
      appendNoWait(2); // 4, 5
      appendNoWait(3); // 6
      const c1 = g.log.saveCommitted(commits[1] as LogId);
      const v2 = g.log.saveVote(votes[2] as Vote);
      appendNoWait(4); // 7, 8
      await c1;
      mark('committed', 1);
      await v2;
      mark('vote', 2);
      const c2 = g.log.saveCommitted(commits[2] as LogId);
      appendNoWait(5); // 9
      await c2;
      mark('committed', 2);
      await g.log.saveVote(votes[3] as Vote);
      mark('vote', 3);
      await g.log.saveCommitted(commits[3] as LogId);
      mark('committed', 3);
      await Promise.all(flushes);
    });
  },
  async check(state, env) {
    const { log } = await observe(state.image, env);
    const all = vcEntries.flat().map(show);
    assert.deepEqual(log.entries, all.slice(0, log.entries.length), 'the log is a prefix of what was appended');
    const flushed = maxAck(state, env, 'flushed');
    assert.ok(log.entries.length >= flushed + 1, 'every flushed entry survives');
    // The vote: one that was written, never behind the last acknowledged one.
    const vAck = maxAck(state, env, 'vote');
    const vAt = log.vote === null ? -1 : votes.findIndex((v) => compareVote(v, log.vote as Vote) === 0);
    assert.ok(log.vote === null ? vAck < 0 : vAt >= 0, `the vote is one that was saved: ${JSON.stringify(log.vote)}`);
    assert.ok(vAt >= vAck, `the vote does not go back (acknowledged ${vAck}, found ${vAt})`);
    // A durable vote implies every append issued before it is durable (a barrier).
    const issuedBeforeVote = [2, 4, 7, 10]; // entries appended before votes[k] was saved
    if (vAt >= 0) assert.ok(log.entries.length >= (issuedBeforeVote[vAt] as number), `vote ${vAt} durable, but not the appends before it`);
    const cAck = maxAck(state, env, 'committed');
    const cAt = log.committed === null ? -1 : commits.findIndex((c) => logIdEquals(c, log.committed));
    assert.ok(log.committed === null ? cAck < 0 : cAt >= 0, 'the committed id is one that was saved');
    assert.ok(cAt >= cAck, `the committed id does not go back (acknowledged ${cAck}, found ${cAt})`);
    // A durable committed id never points past the durable log.
    if (log.committed !== null) assert.ok(log.entries.length > log.committed.index, `committed ${log.committed.index} past the log's end ${log.entries.length}`);
  },
};

// --- The state machine: install, apply, build ---------------------------------------------------

function kvCmd(term: number, index: number, key: string, value: string): Entry {
  return { logId: lid(term, index, 2), payload: { type: 'normal', data: encodeKvCommand({ op: 'set', key, value: enc.encode(value) }) } };
}

const gBefore: Entry[] = [kvCmd(1, 1, 'a', 'g1'), kvCmd(1, 2, 'b', 'g2'), kvCmd(1, 3, 'a', 'g3'), kvCmd(1, 4, 'c', 'g4'.padEnd(500, '-')), kvCmd(1, 5, 'd', 'g5'), kvCmd(1, 6, 'b', 'g6')];
const srcEntries: Entry[] = Array.from({ length: 10 }, (_, i) => kvCmd(3, i + 1, `s${i % 4}`, `src${i + 1}`.padEnd(i === 4 ? 3000 : 10, '+')));
const gAfter: Entry[] = [kvCmd(3, 11, 'a', 'after11'), kvCmd(3, 12, 's1', 'after12')];

function kvAfter(entries: Entry[]): Record<string, string> {
  const kv: Record<string, string> = {};
  for (const e of entries) {
    if (e.payload.type !== 'normal') continue;
    const data = e.payload.data;
    // set: 0x01, key length (one byte here), key, value
    const klen = data[1] as number;
    kv[dec.decode(data.subarray(2, 2 + klen))] = dec.decode(data.subarray(2 + klen));
  }
  return Object.fromEntries(Object.entries(kv).sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0)));
}

/**
 * Group g has applied six entries with a snapshot at the fourth; group src has a snapshot at ten
 * entries of its own. The workload streams src's snapshot into g and installs it, applies two
 * entries, builds a snapshot, applies one more.
 */
const installWorkload: RaftCrashWorkload = {
  name: 'installSnapshot',
  async setup(fs, env) {
    await withGroup(fs, env, async (g, node) => {
      await g.stateMachine.apply(gBefore.slice(0, 4));
      await (await g.stateMachine.getSnapshotBuilder()).buildSnapshot();
      await g.stateMachine.apply(gBefore.slice(4));
      const src = await node.openGroup('src');
      await src.stateMachine.apply(srcEntries);
      await (await src.stateMachine.getSnapshotBuilder()).buildSnapshot();
    });
  },
  async run(fs, env) {
    await withGroup(fs, env, async (g, node) => {
      const src = await node.openGroup('src');
      const snap = await src.stateMachine.getCurrentSnapshot();
      assert.ok(snap !== null);
      const sink = await g.stateMachine.beginReceivingSnapshot();
      for await (const chunk of snap.data) {
        for (let at = 0; at < chunk.length; at += 700) await sink.write(chunk.subarray(at, at + 700));
      }
      await g.stateMachine.installSnapshot(snap.meta, sink);
      fs.mark(env.tag + 'sm', 1);
      await g.stateMachine.apply(gAfter);
      fs.mark(env.tag + 'sm', 2);
      await (await g.stateMachine.getSnapshotBuilder()).buildSnapshot();
      fs.mark(env.tag + 'sm', 3);
      await g.stateMachine.apply([kvCmd(3, 13, 'z', 'after13')]);
      fs.mark(env.tag + 'sm', 4);
    });
  },
  async check(state, env) {
    const acked = maxAck(state, env, 'sm');
    const { sm } = await observe(state.image, env);
    // The states the calls go through, in order; a crash shows one at or after the last acknowledged.
    const phases: { applied: LogId; kv: Record<string, string> }[] = [
      { applied: lid(1, 6, 2), kv: kvAfter(gBefore) },
      { applied: lid(3, 10, 2), kv: kvAfter(srcEntries) },
      { applied: lid(3, 11, 2), kv: kvAfter([...srcEntries, ...gAfter.slice(0, 1)]) }, // a prefix of the apply
      { applied: lid(3, 12, 2), kv: kvAfter([...srcEntries, ...gAfter]) },
      { applied: lid(3, 13, 2), kv: kvAfter([...srcEntries, ...gAfter, kvCmd(3, 13, 'z', 'after13')]) },
    ];
    const minPhase = acked < 1 ? 0 : acked === 1 ? 1 : acked <= 3 ? 3 : 4;
    const at = phases.findIndex((p) => logIdEquals(p.applied, sm.applied));
    assert.ok(at >= 0, `applied ${JSON.stringify(sm.applied)} is a state the calls make`);
    assert.ok(at >= minPhase, `applied ${JSON.stringify(sm.applied)} is behind the acknowledged state (phase ${minPhase})`);
    assert.deepEqual(sm.kv, (phases[at] as { kv: Record<string, string> }).kv, 'the state is the one of its applied position');
    // The current snapshot: never beyond the applied position; the built one once acknowledged.
    assert.ok(sm.snapshot !== undefined, 'a snapshot is current');
    assert.ok(compareLogId(sm.snapshot, sm.applied) <= 0, 'the snapshot is not ahead of the state');
    if (acked >= 3) assert.deepEqual(sm.snapshot, lid(3, 12, 2), 'the built snapshot is current once acknowledged');
    else if (acked >= 1) assert.ok(compareLogId(sm.snapshot, lid(3, 10, 2)) >= 0, 'the installed snapshot (or the one built after it) is current once acknowledged');
  },
};

/**
 * The state machine files of a group, made at its first write: group g (three entries in its
 * log, nothing applied) applies two, then one more; group h (empty) receives and installs the
 * snapshot of group src. Every crash state opens; each group shows nothing applied, or a prefix
 * of its calls at or after the last acknowledged one; a group that shows anything applied has
 * its GROUP file marked (the open marks files made but not yet marked).
 */
const smFirstEntries: Entry[] = [kvCmd(1, 0, 'a', 'first0'), kvCmd(1, 1, 'b', 'first1'.padEnd(700, '=')), kvCmd(1, 2, 'a', 'first2')];
const stateMachineFilesWorkload: RaftCrashWorkload = {
  name: 'state-machine-files',
  async setup(fs, env) {
    await withGroup(fs, env, async (g, node) => {
      await new Promise<void>((resolve, reject) => {
        g.log.append(smFirstEntries, (err) => (err === null ? resolve() : reject(err))).catch(reject);
      });
      await node.openGroup('h');
      const src = await node.openGroup('src');
      await src.stateMachine.apply(srcEntries);
      await (await src.stateMachine.getSnapshotBuilder()).buildSnapshot();
    });
  },
  async run(fs, env) {
    await withGroup(fs, env, async (g, node) => {
      await g.stateMachine.apply(smFirstEntries.slice(0, 2));
      fs.mark(env.tag + 'g', 1);
      await g.stateMachine.apply(smFirstEntries.slice(2));
      fs.mark(env.tag + 'g', 2);
      const src = await node.openGroup('src');
      const snap = await src.stateMachine.getCurrentSnapshot();
      assert.ok(snap !== null);
      const h = await node.openGroup('h');
      const sink = await h.stateMachine.beginReceivingSnapshot();
      for await (const chunk of snap.data) await sink.write(chunk);
      await h.stateMachine.installSnapshot(snap.meta, sink);
      fs.mark(env.tag + 'h', 1);
    });
  },
  async check(state, env) {
    const { readGroupFile } = await import('../../raft/fs-layout.js');
    const { groupDirectory } = await import('../../raft/node.js');
    const image = new MemoryFs({ image: state.image, trace: false });
    const node = await openCrashNode(image, { dir: env.dir, tag: env.tag });
    try {
      const g = await node.openGroup('g');
      const [gApplied] = await g.stateMachine.appliedState();
      const gPhases: (LogId | null)[] = [null, lid(1, 0, 2), lid(1, 1, 2), lid(1, 2, 2)];
      const at = gPhases.findIndex((p) => logIdEquals(p, gApplied));
      assert.ok(at >= 0, `group g: applied ${JSON.stringify(gApplied)} is a state the calls make`);
      const gAcked = maxAck(state, env, 'g');
      assert.ok(at >= (gAcked >= 2 ? 3 : gAcked >= 1 ? 2 : 0), `group g: applied ${JSON.stringify(gApplied)} is behind the acknowledged apply ${gAcked}`);
      const kv: Record<string, string> = {};
      for (const k of g.stateMachine.plugin.keys()) kv[k] = dec.decode(g.stateMachine.plugin.get(k) ?? new Uint8Array());
      assert.deepEqual(kv, kvAfter(smFirstEntries.slice(0, at)), 'group g: the state is the one of its applied position');
      const h = await node.openGroup('h');
      const [hApplied] = await h.stateMachine.appliedState();
      if (maxAck(state, env, 'h') >= 1) assert.deepEqual(hApplied, lid(3, 10, 2), 'group h: the acknowledged install is in effect');
      else assert.ok(hApplied === null || logIdEquals(hApplied, lid(3, 10, 2)), `group h: applied ${JSON.stringify(hApplied)} is nothing or the install`);
      for (const [id, applied] of [['g', gApplied], ['h', hApplied]] as const) {
        if (applied !== null) assert.ok((await readGroupFile(image, groupDirectory(env.dir, id))).stateMachineMade, `group ${id}: applied state with its files marked made`);
      }
    } finally {
      await node.close();
    }
  },
};

/**
 * A node created on an empty disk and two groups created in it (each built whole under a
 * temporary name, then renamed): every crash state opens — a creation cut short is never taken
 * for a damaged store — and shows exactly the groups whose creation was acknowledged, or also
 * the one in flight, each empty.
 */
const createWorkload: RaftCrashWorkload = {
  name: 'create',
  async setup() {},
  async run(fs, env) {
    const node = await openCrashNode(fs, env);
    try {
      await node.openGroup('g');
      fs.mark(env.tag + 'created', 1);
      await node.openGroup('h');
      fs.mark(env.tag + 'created', 2);
    } finally {
      await node.close();
    }
  },
  async check(state, env) {
    const node = await openCrashNode(new MemoryFs({ image: state.image, trace: false }), { dir: env.dir, tag: env.tag });
    try {
      const acked = maxAck(state, env, 'created');
      const ids = node.groupIds().sort();
      const allowed = ['g', 'h'].slice(0, Math.max(acked, 0) + 1);
      for (const id of ['g', 'h'].slice(0, Math.max(acked, 0))) assert.ok(ids.includes(id), `group ${id} was created (acknowledged), found [${ids.join(', ')}]`);
      for (const id of ids) {
        assert.ok(allowed.includes(id), `group ${id} shows before its creation was called`);
        const r = node.recovery.get(id);
        assert.ok(r !== undefined && r.vote === null && r.committed === null && r.lastLogId === null && r.applied === null, `group ${id} opens empty`);
      }
    } finally {
      await node.close();
    }
  },
  // Also not depended on: the payload store's tmp/ entries (the temporary name of FORMAT at its
  // creation; a leftover that comes back is removed at open).
  dependsOn: (_m, op) => !designNotDependedOn(op) && !op.path.includes('/payloads/tmp/'),
};

/** Every workload, in the order the test runs them. */
export const raftCrashWorkloads: readonly RaftCrashWorkload[] = [
  createWorkload,
  appendWorkload,
  truncateWorkload,
  purgeWorkload,
  voteWorkload,
  installWorkload,
  stateMachineFilesWorkload,
  journalCheckpointWorkload,
];

/**
 * The workloads that write a group's vote, committed pointer or purged id, run again on groups of
 * the earlier three-cell layout (raft-three-cells.ts): the write path an earlier version's groups
 * keep. Run by test/crash-raft.test.ts, whose set-up disk is built off the recording layer.
 */
export const THREE_CELL_WORKLOADS: readonly string[] = ['saveVote+saveCommitted', 'purge', 'truncate'];

export interface RaftCrashRun {
  workload: string;
  explore: ExploreResult;
  /** The linear pass (workloads that await each call). */
  linear: AckCheckResult | null;
  traceLength: number;
}

/** Sets the workload's node up, records the run, explores every crash state and checks each. */
export async function runRaftCrashWorkload(
  w: RaftCrashWorkload,
  options: Omit<ExploreOptions, 'initial' | 'trace' | 'check'> = {},
  mistakes?: RaftMistakes,
  journalMode?: 'journal' | 'direct' | 'alternate',
): Promise<RaftCrashRun> {
  const setupFs = new MemoryFs({ trace: false });
  await w.setup(setupFs, standalone);
  // The workload starts from the set-up disk as it stands (its close made everything durable
  // that matters; what it left unsynced is derived data).
  const fs = new MemoryFs({ image: setupFs.currentImage() });
  const env = { ...standalone, ...(mistakes === undefined ? {} : { mistakes }), ...(journalMode === undefined ? {} : { journalMode }) };
  await w.run(fs, env);
  const explore = await exploreCrashStates({ ...options, initial: fs.initialImage, trace: fs.trace, check: (s) => w.check(s, standalone) });
  const linear = w.dependsOn === undefined ? null : checkAckAfterSync(fs.trace, { dependsOn: w.dependsOn });
  return { workload: w.name, explore, linear, traceLength: fs.trace.length };
}

// ---------------------------------------------------------------------------------------------
// The registry entry (`seglog crash raft`): every workload above in one run, each in its own node
// directory under /data, its marks prefixed by its name.

const PLANTS: Record<string, RaftMistakes> = {
  'flush-before-sync': { flushBeforeSync: true },
  'vote-not-barrier': { voteNotBarrier: true },
  'committed-before-log': { committedBeforeLog: true },
  'drop-before-purged-id': { dropBeforePurgedId: true },
  'truncate-keeps-checkpoint': { truncateKeepsCheckpoint: true },
  'keep-clean-mark': { keepCleanMark: true },
  'drop-journal-before-group-sync': { dropJournalBeforeGroupSync: true },
  'mark-before-state-machine-files': { markBeforeStateMachineFiles: true },
};

/** The workload that exercises each plant. */
export const PLANT_WORKLOAD: Readonly<Record<string, string>> = {
  'flush-before-sync': 'append',
  'vote-not-barrier': 'saveVote+saveCommitted',
  'committed-before-log': 'saveVote+saveCommitted',
  'drop-before-purged-id': 'purge',
  'truncate-keeps-checkpoint': 'references',
  'keep-clean-mark': 'clean-close',
  'drop-journal-before-group-sync': 'journal-checkpoint',
  'mark-before-state-machine-files': 'state-machine-files',
};

async function runAll(context: WorkloadContext): Promise<WorkloadRun> {
  const mistakes = context.plant === null ? undefined : PLANTS[context.plant];
  if (context.plant !== null && mistakes === undefined) throw new RangeError(`raft workload: no plant '${context.plant}'`);
  // The reference checkpoint's workload imports this module: loaded when run, not at load.
  const { referencesWorkload } = await import('./raft-references.js');
  const { cleanCloseWorkload, manifestGrowthWorkload } = await import('./raft-clean.js');
  // Not the three-cell variants (THREE_CELL_WORKLOADS): their set-up rewrites files in place, as
  // no store does, and here the set-up runs on the recording layer too (its crash states checked).
  const all = [...raftCrashWorkloads, referencesWorkload, cleanCloseWorkload, manifestGrowthWorkload];
  // With a plant, only the workload that exercises it runs (so that the state budget reaches it).
  const chosen = context.plant === null ? all : all.filter((w) => w.name === PLANT_WORKLOAD[context.plant as string]);
  const envs = chosen.map((w) => ({ w, env: { dir: `/data/raft-${w.name.replace(/[^a-z0-9]+/gi, '-')}`, tag: `${w.name}:` } as RaftCrashEnv }));
  for (const { w, env } of envs) {
    await w.setup(context.fs, env);
    context.fs.mark(env.tag + 'ready', 1); // the set-up node is closed: all of it durable
    await w.run(context.fs, mistakes === undefined ? env : { ...env, mistakes });
  }
  return {
    async check(state) {
      for (const { w, env } of envs) {
        if (maxAck(state, env, 'ready') < 1) {
          // Crashed while setting this node up (or before): it must open, whatever it holds.
          await (await openCrashNode(new MemoryFs({ image: state.image, trace: false }), { dir: env.dir, tag: env.tag })).close();
          continue;
        }
        await w.check(state, env);
      }
    },
    // Appends in flight together: the explorer judges those; the linear pass's default
    // "everything earlier" does not hold for them.
    ackCheck: false,
    summary: `${envs.length} raft workloads (${envs.map((e) => e.w.name).join(', ')}), one node each`,
  };
}

/** The `raft` crash workload of the registry (lib/crash/workloads/index.ts). */
export const workload: CrashWorkload = {
  name: 'raft',
  description:
    'raft store: appends (batched, large, naming a payload, in flight together), truncate, purge, saveVote + saveCommitted behind appends in flight, installSnapshot + apply + build, state machine files made at the first apply and the first snapshot receive, the payload reference checkpoint across truncations and a purge, the clean-close mark across a kill, a group manifest growing',
  plants: {
    'flush-before-sync': 'append calls onFlushed when its entries are staged, before the sync that covers them',
    'vote-not-barrier': 'saveVote writes the vote cell without waiting for earlier appends to be durable',
    'committed-before-log': 'saveCommitted writes the committed cell without waiting for earlier appends to be durable',
    'drop-before-purged-id': 'purge drops entries before the purged id is durable',
    'truncate-keeps-checkpoint': 'truncate cuts records the reference checkpoint claims without lowering its coverage first',
    'keep-clean-mark': "a node's open leaves the clean-close mark, so that an open after a kill trusts what is in the page cache only",
    'mark-before-state-machine-files': "a group's GROUP file marks its state machine files made before they are renamed into place and synced",
  },
  run: runAll,
};

/** The planted mistakes of the `raft` workload, by name (for tests). */
export const raftPlants: Readonly<Record<string, RaftMistakes>> = PLANTS;
