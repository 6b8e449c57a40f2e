// Storage helper: what a consensus engine derives from a log store and a state machine at startup.
//
// Owns: a port, in TypeScript and in this package's words, of the parts of openraft 0.9 that its
// storage test suite relies on — `StorageHelper` (initial state, membership from log and state
// machine, last memberships in the log, re-applying committed entries), `LogIdList::load_log_ids`
// (the key log ids) and `RaftLogReaderExt` (single-entry and exact-range reads). Guarantees: the
// same answers openraft computes from the same store, and the same side effects on the store
// (re-apply up to the committed id; purge when the log ends before the applied id; build a snapshot
// when entries were purged and none exists). The conformance suite uses it; the live-group
// simulation will too.

import { corrupt, notFound } from '../errors.js';
import {
  compareLeaderId,
  compareLogId,
  emptyStoredMembership,
  nextIndex,
  type Entry,
  type LogId,
  type RaftLogReader,
  type RaftLogStorage,
  type RaftStateMachine,
  type SnapshotMeta,
  type StoredMembership,
  type Vote,
} from './types.js';

/** The vote of a node that never voted (term 0, node 0, not committed): openraft's default. */
export function defaultVote(): Vote {
  return { leaderId: { term: 0, nodeId: 0 }, committed: false };
}

/** The metadata of "no snapshot": openraft's `SnapshotMeta::default()`. */
export function defaultSnapshotMeta(): SnapshotMeta {
  return { lastLogId: null, lastMembership: emptyStoredMembership(), snapshotId: '' };
}

/** The entry at `index`, or null when the log does not hold it. */
export async function tryGetLogEntry(reader: RaftLogReader, index: number): Promise<Entry | null> {
  const got = await reader.tryGetLogEntries(index, index + 1);
  return got[got.length - 1] ?? null;
}

/**
 * The entries of `[start, end)`, every one of them: NOT_FOUND unless the log answers exactly that
 * range, in order.
 */
export async function getLogEntries(reader: RaftLogReader, start: number, end: number): Promise<Entry[]> {
  const got = await reader.tryGetLogEntries(start, end);
  const want = Math.max(0, end - start);
  const ok = got.length === want && got.every((e, i) => e.logId.index === start + i);
  if (!ok) {
    const first = got[0]?.logId.index ?? null;
    const last = got[got.length - 1]?.logId.index ?? null;
    throw notFound(`log entries [${start}, ${end}) are not all present (got ${got.length}: ${first}..${last})`, { start, end });
  }
  return got;
}

/** The log id of the entry at `index`; NOT_FOUND when the log does not hold it. */
export async function getLogId(reader: RaftLogReader, index: number): Promise<LogId> {
  const [entry] = await getLogEntries(reader, index, index + 1);
  return (entry as Entry).logId;
}

/**
 * The last two (at most) membership entries of the log at or after `sinceIndex`, oldest first,
 * scanning backwards from the end in steps of 64 entries.
 */
export async function lastMembershipInLog(log: RaftLogStorage, sinceIndex: number): Promise<StoredMembership[]> {
  const st = await log.getLogState();
  const start = Math.max(nextIndex(st.lastPurgedLogId), sinceIndex);
  let end = nextIndex(st.lastLogId);
  const step = 64;
  const found: StoredMembership[] = [];
  while (start < end) {
    const stepStart = Math.max(start, end - step);
    const entries = await log.tryGetLogEntries(stepStart, end);
    for (let i = entries.length - 1; i >= 0; i--) {
      const e = entries[i] as Entry;
      if (e.payload.type === 'membership') {
        found.unshift({ logId: e.logId, membership: e.payload.membership });
        if (found.length === 2) return found;
      }
    }
    end = Math.max(0, end - step);
  }
  return found;
}

/** The committed and the effective membership (openraft's `MembershipState`). */
export interface MembershipState {
  committed: StoredMembership;
  effective: StoredMembership;
}

/**
 * The membership state at startup: two memberships in the log after the applied id are
 * (committed, effective); one is the effective one over the state machine's committed one; none
 * means the state machine's membership is both.
 */
export async function getMembership(log: RaftLogStorage, sm: RaftStateMachine<unknown>): Promise<MembershipState> {
  const [applied, smMembership] = await sm.appliedState();
  const inLog = await lastMembershipInLog(log, nextIndex(applied));
  if (inLog.length === 2) return { committed: inLog[0] as StoredMembership, effective: inLog[1] as StoredMembership };
  return { committed: smMembership, effective: inLog[0] ?? smMembership };
}

/**
 * The key log ids of `(lastPurged, lastLog]`: the first id of every leader, then the last id; the
 * list starts with the last purged id (or the log's first id) — openraft's `LogIdList`. It finds
 * leader changes by bisection, reading only O(leaders × log n) entries.
 */
export async function loadKeyLogIds(lastPurged: LogId | null, lastLog: LogId | null, reader: RaftLogReader): Promise<LogId[]> {
  const out: LogId[] = [];
  if (lastLog === null) return out;
  const first = lastPurged ?? (await getLogId(reader, 0));
  // Push `id` unless the list already ends with an id of its leader (or a later one).
  const pushFirstOfLeader = (id: LogId): void => {
    const tail = out[out.length - 1];
    if (tail === undefined || compareLeaderId(tail.leaderId, id.leaderId) < 0) out.push(id);
  };
  const stack: [LogId, LogId][] = [[first, lastLog]];
  for (let pair = stack.pop(); pair !== undefined; pair = stack.pop()) {
    const [lo, hi] = pair;
    if (compareLeaderId(lo.leaderId, hi.leaderId) === 0) {
      pushFirstOfLeader(lo);
      continue;
    }
    if (lo.index + 1 === hi.index) {
      pushFirstOfLeader(lo);
      out.push(hi);
      continue;
    }
    const mid = await getLogId(reader, Math.floor((lo.index + hi.index) / 2));
    if (compareLeaderId(lo.leaderId, mid.leaderId) === 0) {
      pushFirstOfLeader(lo);
      stack.push([mid, hi]);
    } else if (compareLeaderId(mid.leaderId, hi.leaderId) === 0) {
      stack.push([lo, mid]);
    } else {
      // Three leaders: do (lo, mid) first, then (mid, hi).
      stack.push([mid, hi]);
      stack.push([lo, mid]);
    }
  }
  if (compareLogId(out[out.length - 1] ?? null, lastLog) !== 0) out.push(lastLog);
  return out;
}

/**
 * Applies the log's entries `[start, end)` to the state machine, 64 at a time, through a reader
 * from `getLogReader`; CORRUPT when the log does not hold all of them.
 */
export async function reapplyCommitted(log: RaftLogStorage, sm: RaftStateMachine<unknown>, start: number, end: number): Promise<void> {
  const chunk = 64;
  const reader = await log.getLogReader();
  while (start < end) {
    const chunkEnd = Math.min(end, start + chunk);
    const entries = await reader.tryGetLogEntries(start, chunkEnd);
    const first = entries[0]?.logId.index;
    const last = entries[entries.length - 1]?.logId.index;
    if (first !== start || last !== chunkEnd - 1 || entries.length !== chunkEnd - start) {
      throw corrupt(`committed entries [${start}, ${chunkEnd}) are missing from the log (got ${first}..${last})`, { start, end: chunkEnd });
    }
    await sm.apply(entries);
    start = chunkEnd;
  }
}

/** What a node knows at startup (the persisted part of openraft's `RaftState`). */
export interface InitialState {
  vote: Vote;
  /** The committed id: at least the applied id. */
  committed: LogId | null;
  /** The applied id after re-applying committed entries (openraft's `io_applied`). */
  applied: LogId | null;
  lastPurgedLogId: LogId | null;
  lastLogId: LogId | null;
  keyLogIds: LogId[];
  membership: MembershipState;
  snapshotMeta: SnapshotMeta;
}

/**
 * Reads the initial state of a node from its stores, in openraft 0.9's order: vote, committed,
 * log state, applied state; then it re-applies committed entries the state machine lacks, purges
 * the log up to the applied id when the log ends before it (a snapshot installed, the log not yet
 * cleaned), loads the key log ids, and builds a snapshot when entries were purged but none exists.
 */
export async function getInitialState(log: RaftLogStorage, sm: RaftStateMachine<unknown>): Promise<InitialState> {
  const vote = (await log.readVote()) ?? defaultVote();
  let committed = await log.readCommitted();
  const st = await log.getLogState();
  let lastPurgedLogId = st.lastPurgedLogId;
  let lastLogId = st.lastLogId;
  let [applied] = await sm.appliedState();

  // A snapshot installed before the committed id was saved leaves committed behind applied.
  if (compareLogId(committed, applied) < 0) committed = applied;
  if (compareLogId(applied, committed) < 0) {
    await reapplyCommitted(log, sm, nextIndex(applied), nextIndex(committed));
    applied = committed;
  }

  const membership = await getMembership(log, sm);

  if (compareLogId(lastLogId, applied) < 0 && applied !== null) {
    await log.purge(applied);
    lastLogId = applied;
    lastPurgedLogId = applied;
  }

  const keyLogIds = await loadKeyLogIds(lastPurgedLogId, lastLogId, log);

  let snapshot = await sm.getCurrentSnapshot();
  if (snapshot === null && lastPurgedLogId !== null) {
    snapshot = await (await sm.getSnapshotBuilder()).buildSnapshot();
  }
  const snapshotMeta = snapshot?.meta ?? defaultSnapshotMeta();

  return { vote, committed: applied, applied, lastPurgedLogId, lastLogId, keyLogIds, membership, snapshotMeta };
}
