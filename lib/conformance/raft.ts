// Raft storage conformance suite: openraft's storage test suite, ported, for any seglog Raft store.
//
// Owns: `raftStorageConformance(builder, options?)`, which registers node:test tests (it calls
// `describe` and `test` itself). The tests are a port of openraft 0.9's `Suite::test_all` (all 35,
// named as in openraft), openraft 0.10's additions (a reader sees later appends; truncation in the
// middle), and seglog's own checks of the rules docs/contracts/raft-store.md adds (the flush callback, call order, input
// validation, snapshots while applying, installs that replace state). With `reopen` (the default)
// every test runs a second time with the store closed and reopened at each checkpoint — after the
// writes whose effect must survive — so the same assertions also check durability.
// docs/raft-store.md maps every test to its original.
//
// The state machine under test must run the KV plugin (lib/raft/kv.ts): the suite applies KV
// commands and reads the state back through the replies.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { isSeglogError } from '../errors.js';
import { encodeKvCommand, type KvReply } from '../raft/kv.js';
import {
  defaultSnapshotMeta,
  defaultVote,
  getInitialState,
  getLogEntries,
  getLogId,
  getMembership,
  lastMembershipInLog,
  tryGetLogEntry,
  type InitialState,
} from '../raft/storage-helper.js';
import {
  emptyStoredMembership,
  type Entry,
  type LogId,
  type Membership,
  type RaftLogReader,
  type RaftLogStorage,
  type RaftStateMachine,
  type Snapshot,
  type StoredMembership,
  type Vote,
} from '../raft/types.js';

/** One open handle on the store under test. */
export interface RaftStoreUnderTest {
  log: RaftLogStorage;
  /** A state machine running the KV plugin. */
  stateMachine: RaftStateMachine<unknown>;
  /** Closes both; the store can then be opened again by its fixture. */
  close(): Promise<void>;
}

/** One store (e.g. one directory): opened, closed and opened again, then removed. */
export interface RaftStoreFixture {
  /** Opens the store; after a close, opens the same store again with everything it holds. */
  open(): Promise<RaftStoreUnderTest>;
  /** Removes the store (after its last close). */
  cleanup(): Promise<void>;
}

/** Makes fresh, empty stores: one per test (two for the snapshot transfer). */
export interface RaftStorageBuilder {
  create(): Promise<RaftStoreFixture>;
}

export interface RaftStorageConformanceOptions {
  /** The title of the `describe` block (default 'raft storage conformance'). */
  name?: string;
  /** Also run every test with a close and reopen at each checkpoint (default true). */
  reopen?: boolean;
  /** Run only the tests with these names. */
  only?: readonly string[];
  /**
   * How long to wait for a flush callback before calling it lost (default 30 000 ms). It is a
   * deadlock detector, not a timing assertion: a correct store calls back far sooner.
   */
  callbackDeadlineMs?: number;
}

// ---------------------------------------------------------------------------------------------
// Test support: a store handle that can be reopened, and entry builders.

const NODE_ID = 0;

class StoreUnderTest {
  private current: RaftStoreUnderTest | null = null;

  constructor(private readonly fixture: RaftStoreFixture, private readonly reopens: boolean) {}

  async start(): Promise<this> {
    this.current = await this.fixture.open();
    return this;
  }

  get log(): RaftLogStorage {
    assert.ok(this.current, 'store is open');
    return this.current.log;
  }

  get sm(): RaftStateMachine<unknown> {
    assert.ok(this.current, 'store is open');
    return this.current.stateMachine;
  }

  /** A checkpoint: in the reopen pass, close the store and open it again. */
  async reopen(): Promise<void> {
    if (!this.reopens) return;
    assert.ok(this.current, 'store is open');
    await this.current.close();
    this.current = null;
    this.current = await this.fixture.open();
  }

  async dispose(): Promise<void> {
    try {
      if (this.current !== null) await this.current.close();
    } finally {
      this.current = null;
      await this.fixture.cleanup();
    }
  }
}

interface Ctx {
  deadlineMs: number;
}

/** A log id proposed by node 0 (openraft's `log_id_0`). */
function lid(term: number, index: number): LogId {
  return { leaderId: { term, nodeId: NODE_ID }, index };
}

/** A log id of any node. */
function lidOf(term: number, nodeId: number, index: number): LogId {
  return { leaderId: { term, nodeId }, index };
}

/** One voter set, with node data for each voter (openraft derives default nodes). */
function mem(...ids: number[]): Membership {
  return { configs: [ids], nodes: Object.fromEntries(ids.map((id) => [String(id), { addr: `10.0.0.${id}:7000` }])) };
}

function stored(logId: LogId | null, membership: Membership): StoredMembership {
  return { logId, membership };
}

/** openraft's `blank_ent_0`. */
function blank(term: number, index: number): Entry {
  return { logId: lid(term, index), payload: { type: 'blank' } };
}

/** openraft's `membership_ent_0`. */
function membershipEnt(term: number, index: number, ...ids: number[]): Entry {
  return { logId: lid(term, index), payload: { type: 'membership', membership: mem(...ids) } };
}

function kvSet(term: number, index: number, key: string, value: string): Entry {
  return { logId: lid(term, index), payload: { type: 'normal', data: encodeKvCommand({ op: 'set', key, value: bytes(value) }) } };
}

function kvDelete(term: number, index: number, key: string): Entry {
  return { logId: lid(term, index), payload: { type: 'normal', data: encodeKvCommand({ op: 'delete', key }) } };
}

function bytes(s: string): Uint8Array {
  return new Uint8Array(Buffer.from(s, 'utf8'));
}

function kvPrevious(previous: string | null): KvReply {
  return { ok: true, previous: previous === null ? null : bytes(previous) };
}

function vote(term: number, nodeId: number, committed = false): Vote {
  return { leaderId: { term, nodeId }, committed };
}

async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing after ${ms} ms (deadlock?)`)), ms);
  });
  try {
    return await Promise.race([p, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Lets pending callbacks and I/O completions run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
}

/** A flush callback that counts its calls and can be awaited. */
function flushProbe(): { callback: (err: Error | null) => void; flushed: Promise<Error | null>; calls: () => number } {
  let calls = 0;
  let resolve!: (err: Error | null) => void;
  const flushed = new Promise<Error | null>((r) => (resolve = r));
  return {
    callback: (err) => {
      calls++;
      resolve(err);
    },
    flushed,
    calls: () => calls,
  };
}

/**
 * openraft's blocking `append` helper: append, then wait for the flush callback. It also checks
 * the two halves of the append contract: the entries are readable when the promise resolves, and
 * the callback comes exactly once, with no error.
 */
async function append(ctx: Ctx, log: RaftLogStorage, entries: Entry[]): Promise<void> {
  const probe = flushProbe();
  await log.append(entries, probe.callback);
  const first = entries[0];
  if (first !== undefined) {
    const got = await log.tryGetLogEntries(first.logId.index, first.logId.index + entries.length);
    assert.deepEqual(got.map((e) => e.logId), entries.map((e) => e.logId), 'appended entries are readable when append resolves');
  }
  const err = await within(probe.flushed, ctx.deadlineMs, 'append: onFlushed');
  assert.equal(err, null, 'onFlushed reports success');
  await settle();
  assert.equal(probe.calls(), 1, 'onFlushed is called exactly once');
}

async function apply(sm: RaftStateMachine<unknown>, entries: Entry[]): Promise<unknown[]> {
  const replies = await sm.apply(entries);
  assert.equal(replies.length, entries.length, 'apply answers one reply per entry');
  return replies;
}

/** openraft's `feed_10_logs_vote_self`: entries (0,0) and (1,1)..(1,10), and a vote for term 1. */
async function feed10LogsVoteSelf(ctx: Ctx, log: RaftLogStorage): Promise<void> {
  await append(ctx, log, [blank(0, 0)]);
  for (let i = 1; i <= 10; i++) await append(ctx, log, [blank(1, i)]);
  await saveDefaultVote(log);
}

/** openraft's `default_vote`. */
async function saveDefaultVote(log: RaftLogStorage): Promise<void> {
  await log.saveVote(vote(1, NODE_ID));
}

async function collect(data: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of data) parts.push(new Uint8Array(c));
  return new Uint8Array(Buffer.concat(parts));
}

async function pipeInto(snapshot: Snapshot, sm: RaftStateMachine<unknown>): Promise<void> {
  const sink = await sm.beginReceivingSnapshot();
  for await (const chunk of snapshot.data) await sink.write(chunk);
  await sm.installSnapshot(snapshot.meta, sink);
}

function rejectsWith(code: string): (err: unknown) => boolean {
  return (err) => {
    assert.ok(isSeglogError(err), `expected a SeglogError with code ${code}, got ${String(err)}`);
    assert.equal(err.code, code);
    return true;
  };
}

async function logIds(reader: RaftLogReader, start = 0, end = Number.MAX_SAFE_INTEGER): Promise<LogId[]> {
  return (await reader.tryGetLogEntries(start, end)).map((e) => e.logId);
}

// ---------------------------------------------------------------------------------------------
// The tests. `s` is the store; `s.reopen()` marks a checkpoint.

type Single = (s: StoreUnderTest, ctx: Ctx) => Promise<void>;
type Pair = (a: StoreUnderTest, b: StoreUnderTest, ctx: Ctx) => Promise<void>;
interface Case {
  name: string;
  origin: 'openraft 0.9' | 'openraft 0.10' | 'seglog';
  run: Single | Pair;
  stores: 1 | 2;
}

const cases: Case[] = [];
const single = (origin: Case['origin'], name: string, run: Single): void => void cases.push({ name, origin, run, stores: 1 });
const pair = (origin: Case['origin'], name: string, run: Pair): void => void cases.push({ name, origin, run, stores: 2 });

// --- openraft 0.9: Suite::test_store, in its order --------------------------------------------

single('openraft 0.9', 'last_membership_in_log_initial', async (s) => {
  await s.reopen();
  assert.deepEqual(await lastMembershipInLog(s.log, 0), []);
});

single('openraft 0.9', 'last_membership_in_log', async (s, ctx) => {
  // No membership in the log: the state machine's does not count.
  await apply(s.sm, [blank(1, 1), membershipEnt(1, 2, 3, 4, 5)]);
  await s.reopen();
  assert.deepEqual(await lastMembershipInLog(s.log, 0), []);

  // One membership in the log, below the applied id: still read from the log.
  await append(ctx, s.log, [membershipEnt(1, 1, 1, 2, 3)]);
  await s.reopen();
  assert.deepEqual(await lastMembershipInLog(s.log, 0), [stored(lid(1, 1), mem(1, 2, 3))]);
  assert.deepEqual(await lastMembershipInLog(s.log, 1), [stored(lid(1, 1), mem(1, 2, 3))]);
  assert.deepEqual(await lastMembershipInLog(s.log, 2), []);

  // Two memberships in the log.
  await append(ctx, s.log, [blank(1, 2), membershipEnt(1, 3, 7, 8, 9), blank(1, 4)]);
  await s.reopen();
  assert.deepEqual(await lastMembershipInLog(s.log, 0), [stored(lid(1, 1), mem(1, 2, 3)), stored(lid(1, 3), mem(7, 8, 9))]);

  // Since an index after the last membership: none.
  assert.deepEqual(await lastMembershipInLog(s.log, 4), []);

  // Three memberships: only the last two.
  await append(ctx, s.log, [membershipEnt(1, 5, 10, 11)]);
  await s.reopen();
  assert.deepEqual(await lastMembershipInLog(s.log, 0), [stored(lid(1, 3), mem(7, 8, 9)), stored(lid(1, 5), mem(10, 11))]);
});

single('openraft 0.9', 'last_membership_in_log_multi_step', async (s, ctx) => {
  // The backwards scan steps 64 entries at a time: put the memberships more than a step apart.
  await append(ctx, s.log, [membershipEnt(1, 1, 1, 2, 3), membershipEnt(1, 2, 3, 4, 5)]);
  for (let i = 3; i < 100; i++) await append(ctx, s.log, [blank(1, i)]);
  await append(ctx, s.log, [membershipEnt(1, 100, 5, 6, 7)]);
  await s.reopen();
  assert.deepEqual(await lastMembershipInLog(s.log, 0), [stored(lid(1, 2), mem(3, 4, 5)), stored(lid(1, 100), mem(5, 6, 7))]);
});

single('openraft 0.9', 'get_membership_initial', async (s) => {
  await s.reopen();
  const m = await getMembership(s.log, s.sm);
  assert.deepEqual(m.committed, emptyStoredMembership());
  assert.deepEqual(m.effective, emptyStoredMembership());
});

single('openraft 0.9', 'get_membership_from_log_and_empty_sm', async (s, ctx) => {
  await append(ctx, s.log, [membershipEnt(1, 1, 1, 2, 3)]);
  await s.reopen();
  const m = await getMembership(s.log, s.sm);
  assert.deepEqual(m.committed, emptyStoredMembership());
  assert.deepEqual(m.effective.membership, mem(1, 2, 3));
});

single('openraft 0.9', 'get_membership_from_empty_log_and_sm', async (s) => {
  await apply(s.sm, [blank(1, 1), membershipEnt(1, 2, 3, 4, 5)]);
  await s.reopen();
  const m = await getMembership(s.log, s.sm);
  assert.deepEqual(m.committed.membership, mem(3, 4, 5));
  assert.deepEqual(m.effective.membership, mem(3, 4, 5));
});

single('openraft 0.9', 'get_membership_from_log_le_sm_last_applied', async (s, ctx) => {
  // The log's membership is at or below the applied id: the state machine's wins.
  await apply(s.sm, [blank(1, 1), membershipEnt(1, 2, 3, 4, 5), blank(1, 3), blank(1, 4)]);
  // Deliberately not what the state machine applied, to see which one is loaded.
  await append(ctx, s.log, [blank(1, 1), blank(1, 2), membershipEnt(1, 3, 1, 2, 3)]);
  await s.reopen();
  const m = await getMembership(s.log, s.sm);
  assert.deepEqual(m.committed.membership, mem(3, 4, 5));
  assert.deepEqual(m.effective.membership, mem(3, 4, 5));
});

single('openraft 0.9', 'get_membership_from_log_gt_sm_last_applied_1', async (s, ctx) => {
  await apply(s.sm, [blank(1, 1), membershipEnt(1, 2, 3, 4, 5)]);
  await append(ctx, s.log, [membershipEnt(1, 1, 1, 2, 3), blank(1, 2), membershipEnt(1, 3, 7, 8, 9)]);
  await s.reopen();
  const m = await getMembership(s.log, s.sm);
  assert.deepEqual(m.committed.membership, mem(3, 4, 5));
  assert.deepEqual(m.effective.membership, mem(7, 8, 9));
});

single('openraft 0.9', 'get_membership_from_log_gt_sm_last_applied_2', async (s, ctx) => {
  await apply(s.sm, [blank(1, 1), membershipEnt(1, 2, 3, 4, 5)]);
  await append(ctx, s.log, [membershipEnt(1, 1, 1, 2, 3), blank(1, 2), membershipEnt(1, 3, 7, 8, 9), blank(1, 4), membershipEnt(1, 5, 10, 11)]);
  await s.reopen();
  const m = await getMembership(s.log, s.sm);
  assert.deepEqual(m.committed.membership, mem(7, 8, 9));
  assert.deepEqual(m.effective.membership, mem(10, 11));
});

single('openraft 0.9', 'get_initial_state_without_init', async (s) => {
  await s.reopen();
  const initial = await getInitialState(s.log, s.sm);
  const want: InitialState = {
    vote: defaultVote(),
    committed: null,
    applied: null,
    lastPurgedLogId: null,
    lastLogId: null,
    keyLogIds: [],
    membership: { committed: emptyStoredMembership(), effective: emptyStoredMembership() },
    snapshotMeta: defaultSnapshotMeta(),
  };
  assert.deepEqual(initial, want);
});

single('openraft 0.9', 'get_initial_state_membership_from_log_and_sm', async (s, ctx) => {
  // A membership in the log at or below the applied id never wins over the state machine's.
  await saveDefaultVote(s.log);

  await apply(s.sm, [blank(1, 1), membershipEnt(1, 2, 3, 4, 5)]);
  await s.reopen();
  assert.deepEqual((await getInitialState(s.log, s.sm)).membership.effective.membership, mem(3, 4, 5), 'no log: from the state machine');
  // The log ended before the applied id, so the helper purged it up to (1,2). openraft's memory
  // store then takes an entry at index 1, below its purged id; seglog's stores refuse that (no
  // entry at or below the purged id), so this port applies two more entries and appends at 3.
  assert.deepEqual((await s.log.getLogState()).lastPurgedLogId, lid(1, 2));
  await apply(s.sm, [blank(1, 3), blank(1, 4)]);

  await append(ctx, s.log, [membershipEnt(1, 3, 1, 2, 3)]);
  await s.reopen();
  assert.deepEqual((await getInitialState(s.log, s.sm)).membership.effective.membership, mem(3, 4, 5), 'in the log, not after the applied id');

  // A membership in the log after the applied id wins.
  await append(ctx, s.log, [membershipEnt(1, 5, 1, 2, 3)]);
  await s.reopen();
  assert.deepEqual((await getInitialState(s.log, s.sm)).membership.effective.membership, mem(1, 2, 3), 'in the log, after the applied id');
});

single('openraft 0.9', 'get_initial_state_with_state', async (s, ctx) => {
  await saveDefaultVote(s.log);
  await append(ctx, s.log, [blank(0, 0), blank(1, 1), blank(3, 2)]);
  await apply(s.sm, [blank(3, 1)]);
  await s.reopen();
  const initial = await getInitialState(s.log, s.sm);
  assert.deepEqual(initial.lastLogId, lid(3, 2), 'the log is ahead of the state machine');
  assert.deepEqual(initial.committed, lid(3, 1), 'committed is at least the applied id');
  assert.deepEqual(initial.vote, vote(1, NODE_ID), 'the saved vote');
});

single('openraft 0.9', 'get_initial_state_last_log_gt_sm', async (s, ctx) => {
  await saveDefaultVote(s.log);
  await append(ctx, s.log, [blank(0, 0), blank(2, 1)]);
  await apply(s.sm, [blank(1, 1), blank(1, 2)]);
  await s.reopen();
  const initial = await getInitialState(s.log, s.sm);
  assert.deepEqual(initial.lastLogId, lid(2, 1), 'the last log id is the greater one: the log');
});

single('openraft 0.9', 'get_initial_state_last_log_lt_sm', async (s, ctx) => {
  await saveDefaultVote(s.log);
  await append(ctx, s.log, [blank(1, 2)]);
  await apply(s.sm, [blank(3, 1)]);
  await s.reopen();
  const initial = await getInitialState(s.log, s.sm);
  assert.deepEqual(initial.lastLogId, lid(3, 1), 'the state machine is ahead: its id is the last');
  assert.deepEqual(initial.lastPurgedLogId, lid(3, 1), 'the log is purged up to the applied id');
  await s.reopen();
  assert.deepEqual((await s.log.getLogState()).lastPurgedLogId, lid(3, 1), 'that purge is durable');
});

single('openraft 0.9', 'get_initial_state_log_ids', async (s, ctx) => {
  const keyIds = async (): Promise<LogId[]> => {
    await s.reopen();
    return (await getInitialState(s.log, s.sm)).keyLogIds;
  };

  assert.deepEqual(await keyIds(), [], 'empty store');

  await append(ctx, s.log, [blank(0, 0)]);
  assert.deepEqual(await keyIds(), [lidOf(0, 0, 0)], 'terms [0]');

  await append(ctx, s.log, [blank(1, 1), blank(1, 2), blank(2, 3)]);
  assert.deepEqual(await keyIds(), [lidOf(0, 0, 0), lidOf(1, 0, 1), lidOf(2, 0, 3)], 'terms [0,1,1,2]');

  await append(ctx, s.log, [blank(2, 4), blank(3, 5), blank(3, 6)]);
  const all = [lidOf(0, 0, 0), lidOf(1, 0, 1), lidOf(2, 0, 3), lidOf(3, 0, 5), lidOf(3, 0, 6)];
  assert.deepEqual(await keyIds(), all, 'terms [0,1,1,2,2,3,3]');

  await s.log.purge(lidOf(0, 0, 0));
  assert.deepEqual(await keyIds(), all, 'terms [x,1,1,2,2,3,3], purged (0,0)');

  await s.log.purge(lidOf(1, 0, 1));
  assert.deepEqual(await keyIds(), [lidOf(1, 0, 1), lidOf(2, 0, 3), lidOf(3, 0, 5), lidOf(3, 0, 6)], 'terms [x,x,1,2,2,3,3], purged (1,1)');

  await s.log.purge(lidOf(1, 0, 2));
  assert.deepEqual(await keyIds(), [lidOf(1, 0, 2), lidOf(2, 0, 3), lidOf(3, 0, 5), lidOf(3, 0, 6)], 'terms [x,x,x,2,2,3,3], purged (1,2)');

  await s.log.purge(lidOf(2, 0, 3));
  assert.deepEqual(await keyIds(), [lidOf(2, 0, 3), lidOf(3, 0, 5), lidOf(3, 0, 6)], 'terms [x,x,x,x,2,3,3], purged (2,3)');

  await s.log.purge(lidOf(3, 0, 6));
  assert.deepEqual(await keyIds(), [lidOf(3, 0, 6)], 'all purged at (3,6)');
});

single('openraft 0.9', 'get_initial_state_re_apply_committed', async (s, ctx) => {
  await saveDefaultVote(s.log);
  await append(ctx, s.log, [blank(1, 2), blank(1, 3), blank(1, 4), blank(1, 5)]);
  await s.log.purge(lid(1, 1));
  await apply(s.sm, [blank(1, 2)]);
  await s.log.saveCommitted(lid(1, 4));
  await s.reopen();
  // openraft skips the rest for a store that does not keep `committed`; docs/contracts/raft-store.md (saveCommitted) requires it.
  assert.deepEqual(await s.log.readCommitted(), lid(1, 4), 'the store keeps the committed id');

  const initial = await getInitialState(s.log, s.sm);
  assert.deepEqual(initial.applied, lid(1, 4), 'committed entries were re-applied');
  assert.deepEqual((await s.sm.appliedState())[0], lid(1, 4), 'the state machine applied them');
  await s.reopen();
  assert.deepEqual((await s.sm.appliedState())[0], lid(1, 4), 'the applied position is durable');
});

single('openraft 0.9', 'save_vote', async (s) => {
  await s.log.saveVote(vote(100, NODE_ID));
  await s.reopen();
  assert.deepEqual(await s.log.readVote(), vote(100, NODE_ID));
});

single('openraft 0.9', 'get_log_entries', async (s, ctx) => {
  await feed10LogsVoteSelf(ctx, s.log);
  await s.reopen();
  assert.deepEqual(await getLogEntries(s.log, 3, 3), [], 'start == end');
  const got = await getLogEntries(s.log, 5, 7);
  assert.deepEqual(got.map((e) => e.logId), [lid(1, 5), lid(1, 6)], 'start < end');
});

single('openraft 0.9', 'limited_get_log_entries', async (s, ctx) => {
  await feed10LogsVoteSelf(ctx, s.log);
  await s.reopen();
  assert.deepEqual(await s.log.limitedGetLogEntries(3, 3), [], 'start == end');
  const got = await s.log.limitedGetLogEntries(5, 7);
  assert.ok(got.length >= 1 && got.length <= 2, `1 or 2 entries, got ${got.length}`);
  assert.deepEqual(got[0]?.logId, lid(1, 5));
});

single('openraft 0.9', 'try_get_log_entry', async (s, ctx) => {
  await feed10LogsVoteSelf(ctx, s.log);
  await s.log.purge(lidOf(0, 0, 0));
  await s.reopen();
  assert.deepEqual((await tryGetLogEntry(s.log, 3))?.logId, lid(1, 3));
  assert.equal(await tryGetLogEntry(s.log, 0), null, 'purged');
  assert.equal(await tryGetLogEntry(s.log, 11), null, 'past the end');
});

single('openraft 0.9', 'initial_logs', async (s) => {
  await s.reopen();
  assert.equal(await tryGetLogEntry(s.log, 0), null, 'a new store holds no entry');
});

single('openraft 0.9', 'get_log_state', async (s, ctx) => {
  await s.reopen();
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: null, lastLogId: null });

  await append(ctx, s.log, [blank(0, 0), blank(1, 1), blank(1, 2)]);
  await s.reopen();
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: null, lastLogId: lid(1, 2) }, 'only entries');

  await s.log.purge(lid(0, 0));
  await s.reopen();
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: lidOf(0, 0, 0), lastLogId: lid(1, 2) }, 'purged (0,0)');

  await s.log.purge(lid(1, 2));
  await s.reopen();
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: lid(1, 2), lastLogId: lid(1, 2) }, 'all purged');

  await s.log.purge(lid(2, 3));
  await s.reopen();
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: lid(2, 3), lastLogId: lid(2, 3) }, 'purged past the last entry');
});

single('openraft 0.9', 'get_log_id', async (s, ctx) => {
  await feed10LogsVoteSelf(ctx, s.log);
  await s.log.purge(lid(1, 3));
  await s.reopen();
  await assert.rejects(getLogId(s.log, 0), rejectsWith('NOT_FOUND'));
  await assert.rejects(getLogId(s.log, 3), rejectsWith('NOT_FOUND'));
  assert.deepEqual(await getLogId(s.log, 4), lid(1, 4));
  assert.deepEqual(await getLogId(s.log, 10), lid(1, 10));
  await assert.rejects(getLogId(s.log, 11), rejectsWith('NOT_FOUND'));
});

single('openraft 0.9', 'last_id_in_log', async (s, ctx) => {
  assert.equal((await s.log.getLogState()).lastLogId, null);

  await append(ctx, s.log, [blank(0, 0), blank(1, 1), blank(1, 2)]);
  await s.reopen();
  assert.deepEqual((await s.log.getLogState()).lastLogId, lid(1, 2), 'only entries');

  // The log's state never looks at the state machine.
  await apply(s.sm, [blank(1, 3)]);
  await s.reopen();
  assert.deepEqual((await s.log.getLogState()).lastLogId, lid(1, 2), 'applied beyond the log');

  await s.log.purge(lid(1, 2));
  await s.reopen();
  assert.deepEqual((await s.log.getLogState()).lastLogId, lid(1, 2), 'no entries: the purged id');
});

single('openraft 0.9', 'last_applied_state', async (s) => {
  await s.reopen();
  assert.deepEqual(await s.sm.appliedState(), [null, emptyStoredMembership()]);

  await apply(s.sm, [membershipEnt(1, 3, 1, 2)]);
  await s.reopen();
  assert.deepEqual(await s.sm.appliedState(), [lid(1, 3), stored(lid(1, 3), mem(1, 2))], 'applied and membership');

  await apply(s.sm, [blank(1, 5)]);
  await s.reopen();
  assert.deepEqual(await s.sm.appliedState(), [lid(1, 5), stored(lid(1, 3), mem(1, 2))], 'a blank entry moves only the applied id');
});

single('openraft 0.9', 'purge_logs_upto_0', async (s, ctx) => {
  await feed10LogsVoteSelf(ctx, s.log);
  await s.log.purge(lid(0, 0));
  await s.reopen();
  const got = await logIds(s.log, 0, 100);
  assert.equal(got.length, 10);
  assert.equal(got[0]?.index, 1);
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: lid(0, 0), lastLogId: lid(1, 10) });
});

single('openraft 0.9', 'purge_logs_upto_5', async (s, ctx) => {
  await feed10LogsVoteSelf(ctx, s.log);
  await s.log.purge(lid(1, 5));
  await s.reopen();
  const got = await logIds(s.log, 0, 100);
  assert.equal(got.length, 5);
  assert.equal(got[0]?.index, 6);
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: lid(1, 5), lastLogId: lid(1, 10) });
});

single('openraft 0.9', 'purge_logs_upto_20', async (s, ctx) => {
  await feed10LogsVoteSelf(ctx, s.log);
  await s.log.purge(lid(1, 20));
  await s.reopen();
  assert.deepEqual(await logIds(s.log, 0, 100), []);
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: lid(1, 20), lastLogId: lid(1, 20) });
});

single('openraft 0.9', 'delete_logs_since_11', async (s, ctx) => {
  await feed10LogsVoteSelf(ctx, s.log);
  await s.log.truncate(lid(1, 11));
  await s.reopen();
  assert.equal((await logIds(s.log, 0, 100)).length, 11);
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: null, lastLogId: lid(1, 10) });
});

single('openraft 0.9', 'delete_logs_since_0', async (s, ctx) => {
  await feed10LogsVoteSelf(ctx, s.log);
  await s.log.truncate(lid(0, 0));
  await s.reopen();
  assert.deepEqual(await logIds(s.log, 0, 100), []);
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: null, lastLogId: null });
});

single('openraft 0.9', 'append_to_log', async (s, ctx) => {
  await feed10LogsVoteSelf(ctx, s.log);
  await s.log.purge(lid(0, 0));
  await s.reopen();
  await append(ctx, s.log, [blank(2, 11)]);
  await s.reopen();
  const got = await logIds(s.log);
  assert.equal(got.length, 11, 'entries 1..11');
  assert.deepEqual(got[got.length - 1], lid(2, 11));
});

single('openraft 0.9', 'snapshot_meta', async (s) => {
  // Just initialized.
  await apply(s.sm, [membershipEnt(0, 0, 1, 2)]);
  let snap = await (await s.sm.getSnapshotBuilder()).buildSnapshot();
  assert.deepEqual(snap.meta.lastLogId, lid(0, 0));
  assert.deepEqual(snap.meta.lastMembership, stored(lid(0, 0), mem(1, 2)));
  await s.reopen();
  assert.deepEqual((await s.sm.getCurrentSnapshot())?.meta, snap.meta, 'the built snapshot is current, durably');

  // One application entry, one membership entry.
  await apply(s.sm, [blank(1, 1), membershipEnt(2, 2, 3, 4)]);
  snap = await (await s.sm.getSnapshotBuilder()).buildSnapshot();
  assert.deepEqual(snap.meta.lastLogId, lid(2, 2));
  assert.deepEqual(snap.meta.lastMembership, stored(lid(2, 2), mem(3, 4)));
  await s.reopen();
  assert.deepEqual((await s.sm.getCurrentSnapshot())?.meta, snap.meta);
  assert.deepEqual(await s.sm.appliedState(), [lid(2, 2), stored(lid(2, 2), mem(3, 4))]);
});

single('openraft 0.9', 'apply_single', async (s) => {
  assert.equal((await s.sm.appliedState())[0], null);

  await apply(s.sm, [blank(0, 0)]);
  await s.reopen();
  assert.deepEqual((await s.sm.appliedState())[0], lid(0, 0), 'a blank entry');

  await apply(s.sm, [membershipEnt(1, 1, 1, 2)]);
  await s.reopen();
  const [applied, m] = await s.sm.appliedState();
  assert.deepEqual(applied, lid(1, 1), 'a membership entry');
  assert.deepEqual(m.membership, mem(1, 2));

  // openraft leaves this as a TODO (it cannot build application data); the KV plugin can.
  assert.deepEqual(await apply(s.sm, [kvSet(2, 2, 'k', 'v1')]), [kvPrevious(null)], 'a normal entry');
  await s.reopen();
  assert.deepEqual((await s.sm.appliedState())[0], lid(2, 2));
  assert.deepEqual(await apply(s.sm, [kvSet(2, 3, 'k', 'v2')]), [kvPrevious('v1')], 'the state survived');
});

single('openraft 0.9', 'apply_multiple', async (s) => {
  assert.equal((await s.sm.appliedState())[0], null);
  await apply(s.sm, [blank(0, 0), membershipEnt(1, 1, 1, 2)]);
  await s.reopen();
  const [applied, m] = await s.sm.appliedState();
  assert.deepEqual(applied, lid(1, 1));
  assert.deepEqual(m.membership, mem(1, 2));
});

pair('openraft 0.9', 'transfer_snapshot', async (leader, follower) => {
  assert.equal(await leader.sm.getCurrentSnapshot(), null, 'a new leader store has no snapshot');
  assert.equal(await follower.sm.getCurrentSnapshot(), null, 'a new follower store has no snapshot');

  await leader.sm.apply([membershipEnt(1, 2, 1, 2, 3), blank(3, 3)]);
  const wantMembership = stored(lid(1, 2), mem(1, 2, 3));

  const built = await (await leader.sm.getSnapshotBuilder()).buildSnapshot();
  assert.deepEqual(built.meta.lastLogId, lid(3, 3), 'built snapshot: last log id');
  assert.deepEqual(built.meta.lastMembership, wantMembership, 'built snapshot: membership');
  await leader.reopen();
  const current = await leader.sm.getCurrentSnapshot();
  assert.ok(current, 'the leader has a current snapshot');
  assert.deepEqual(current.meta, built.meta, 'the built snapshot is the current one');

  await pipeInto(current, follower.sm);
  await follower.reopen();
  const installed = await follower.sm.getCurrentSnapshot();
  assert.ok(installed, 'the follower has a current snapshot');
  assert.deepEqual(installed.meta, built.meta, 'the installed snapshot is the current one');
  assert.deepEqual(await follower.sm.appliedState(), [lid(3, 3), wantMembership], 'the state is the snapshot');
});

// --- openraft 0.10 additions -------------------------------------------------------------------

single('openraft 0.10', 'log_reader_reads_new_entries', async (s, ctx) => {
  await append(ctx, s.log, [blank(0, 0), blank(1, 1)]);
  await s.reopen();
  const reader = await s.log.getLogReader();
  assert.deepEqual(await logIds(reader, 0, 2), [lid(0, 0), lid(1, 1)]);
  // Appended after the reader was made: the same reader sees them.
  await append(ctx, s.log, [blank(1, 2), blank(1, 3), blank(2, 4)]);
  assert.deepEqual(await logIds(reader, 2, 5), [lid(1, 2), lid(1, 3), lid(2, 4)]);
  assert.equal((await reader.tryGetLogEntries(0, 5)).length, 5);
});

single('openraft 0.10', 'delete_logs_after_5', async (s, ctx) => {
  // openraft 0.10's truncate_after(5) keeps 0..5; our truncate is inclusive: truncate(6).
  await feed10LogsVoteSelf(ctx, s.log);
  await s.log.truncate(lid(1, 6));
  await s.reopen();
  assert.equal((await logIds(s.log, 0, 100)).length, 6, 'entries 0..5 remain');
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: null, lastLogId: lid(1, 5) });
  // The log continues right after the cut.
  await append(ctx, s.log, [blank(2, 6)]);
  await s.reopen();
  assert.deepEqual((await logIds(s.log, 5, 100)), [lid(1, 5), lid(2, 6)]);
});

// --- seglog: the rules the Raft store contract adds ---------------------------------------------

single('seglog', 'append_flush_callback_not_held_back', async (s, ctx) => {
  // Each append's callback fires without any later append (openraft 0.9 waits for it before the
  // next append: holding it back deadlocks), exactly once, in call order.
  await append(ctx, s.log, [blank(1, 1)]);
  const order: number[] = [];
  const probes = [flushProbe(), flushProbe(), flushProbe()];
  const pending = probes.map((p, i) =>
    s.log.append([blank(1, 2 + i)], (err) => {
      order.push(i);
      p.callback(err);
    }),
  );
  await Promise.all(pending);
  assert.deepEqual(await logIds(s.log), [lid(1, 1), lid(1, 2), lid(1, 3), lid(1, 4)], 'readable when append resolves');
  for (const [i, p] of probes.entries()) assert.equal(await within(p.flushed, ctx.deadlineMs, `append ${i}: onFlushed`), null);
  await settle();
  assert.deepEqual(probes.map((p) => p.calls()), [1, 1, 1], 'each callback exactly once');
  assert.deepEqual(order, [0, 1, 2], 'callbacks in call order');
  await s.reopen();
  assert.deepEqual((await s.log.getLogState()).lastLogId, lid(1, 4), 'flushed entries survive');
});

single('seglog', 'write_io_in_call_order', async (s, ctx) => {
  // Writes issued back to back, none awaited before the next is called, take effect in call order.
  const probe = flushProbe();
  const calls = [
    s.log.append([blank(1, 0), blank(1, 1), blank(1, 2), blank(1, 3)], probe.callback),
    s.log.saveVote(vote(2, 1)),
    s.log.truncate(lid(1, 2)),
    s.log.append([blank(2, 2)], () => {}),
    s.log.purge(lid(1, 0)),
    s.log.saveCommitted(lid(1, 1)),
    s.log.saveVote(vote(2, 1, true)),
  ];
  await Promise.all(calls);
  assert.equal(await within(probe.flushed, ctx.deadlineMs, 'append: onFlushed'), null);
  await append(ctx, s.log, []); // an empty append: its flush covers everything before it
  await s.reopen();
  assert.deepEqual(await logIds(s.log), [lid(1, 1), lid(2, 2)]);
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: lid(1, 0), lastLogId: lid(2, 2) });
  assert.deepEqual(await s.log.readVote(), vote(2, 1, true));
  assert.deepEqual(await s.log.readCommitted(), lid(1, 1));
});

single('seglog', 'first_append_at_any_index', async (s, ctx) => {
  // An empty log that never purged takes its first entry at any index.
  await append(ctx, s.log, [blank(1, 7), blank(1, 8)]);
  await s.reopen();
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: null, lastLogId: lid(1, 8) });
  // After that, only the next index: no hole, no overwrite.
  await assert.rejects(s.log.append([blank(1, 10)], () => assert.fail('no callback for a refused append')), rejectsWith('INVALID'));
  await assert.rejects(s.log.append([blank(1, 8)], () => assert.fail('no callback for a refused append')), rejectsWith('INVALID'));
  await assert.rejects(s.log.append([blank(1, 9), blank(1, 11)], () => assert.fail('no callback for a refused append')), rejectsWith('INVALID'));
  assert.deepEqual(await logIds(s.log), [lid(1, 7), lid(1, 8)], 'nothing of a refused append');
  // A purge must reach the first entry, or (purged, first) would be a hole.
  await assert.rejects(s.log.purge(lid(1, 5)), rejectsWith('INVALID'), 'a purge short of the first entry');
  await s.log.purge(lid(1, 6));
  await s.reopen();
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: lid(1, 6), lastLogId: lid(1, 8) });
  // Purged past the end: the log continues right after the purged id.
  await s.log.purge(lid(2, 20));
  await s.reopen();
  await assert.rejects(s.log.append([blank(2, 22)], () => assert.fail('no callback')), rejectsWith('INVALID'), 'a hole after the purged id');
  await assert.rejects(s.log.append([blank(2, 15)], () => assert.fail('no callback')), rejectsWith('INVALID'), 'at or below the purged id');
  await append(ctx, s.log, [blank(2, 21)]);
  await s.reopen();
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: lid(2, 20), lastLogId: lid(2, 21) });
  assert.deepEqual(await logIds(s.log), [lid(2, 21)]);
});

single('seglog', 'truncate_and_purge_edges', async (s, ctx) => {
  await feed10LogsVoteSelf(ctx, s.log);
  await s.log.truncate(lid(1, 50)); // past the end: nothing
  await s.log.purge(lid(1, 4));
  await s.log.purge(lid(1, 2)); // behind the purged id: nothing (it never goes back)
  await s.reopen();
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: lid(1, 4), lastLogId: lid(1, 10) });
  await assert.rejects(s.log.truncate(lid(1, 4)), rejectsWith('INVALID'), 'truncating purged entries');
  await s.log.truncate(lid(1, 5)); // every entry left: the log is empty and continues after the purged id
  await s.reopen();
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: lid(1, 4), lastLogId: lid(1, 4) });
  await append(ctx, s.log, [blank(3, 5)]);
  await s.reopen();
  assert.deepEqual(await logIds(s.log), [lid(3, 5)]);
});

single('seglog', 'invalid_input_refused', async (s, ctx) => {
  await append(ctx, s.log, [blank(1, 0)]);
  const bad = [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, '1' as unknown as number];
  const none = (): void => assert.fail('no callback for a refused append');
  for (const n of bad) {
    await assert.rejects(s.log.append([{ logId: lidOf(1, 0, n), payload: { type: 'blank' } }], none), rejectsWith('INVALID'), `index ${String(n)}`);
    await assert.rejects(s.log.append([{ logId: lidOf(n, 0, 1), payload: { type: 'blank' } }], none), rejectsWith('INVALID'), `term ${String(n)}`);
    await assert.rejects(s.log.saveVote(vote(1, n)), rejectsWith('INVALID'), `vote node ${String(n)}`);
    await assert.rejects(s.log.saveCommitted(lidOf(1, n, 0)), rejectsWith('INVALID'), `committed node ${String(n)}`);
    await assert.rejects(s.log.truncate(lidOf(1, 0, n)), rejectsWith('INVALID'), `truncate ${String(n)}`);
    await assert.rejects(s.log.purge(lidOf(1, 0, n)), rejectsWith('INVALID'), `purge ${String(n)}`);
    await assert.rejects(s.log.tryGetLogEntries(n, 3), rejectsWith('INVALID'), `read start ${String(n)}`);
    await assert.rejects(s.log.limitedGetLogEntries(0, n), rejectsWith('INVALID'), `read end ${String(n)}`);
    await assert.rejects(s.sm.apply([{ logId: lidOf(1, 0, n), payload: { type: 'blank' } }]), rejectsWith('INVALID'), `apply ${String(n)}`);
  }
  const badMembership = { configs: [[1, -2]], nodes: {} };
  await assert.rejects(s.log.append([{ logId: lid(1, 1), payload: { type: 'membership', membership: badMembership } }], none), rejectsWith('INVALID'));
  const badDigest = { type: 'normal' as const, data: new Uint8Array(1), payloads: ['sha256:XYZ'] };
  await assert.rejects(s.log.append([{ logId: lid(1, 1), payload: badDigest }], none), rejectsWith('INVALID'));
  // An entry applied once is not applied again.
  await apply(s.sm, [blank(1, 3)]);
  await assert.rejects(s.sm.apply([blank(1, 3)]), rejectsWith('INVALID'));
  await assert.rejects(s.sm.apply([blank(1, 4), blank(1, 4)]), rejectsWith('INVALID'));
  await s.reopen();
  assert.deepEqual(await s.log.getLogState(), { lastPurgedLogId: null, lastLogId: lid(1, 0) }, 'nothing changed');
  assert.equal(await s.log.readVote(), null);
  assert.equal(await s.log.readCommitted(), null);
  assert.deepEqual((await s.sm.appliedState())[0], lid(1, 3));
});

single('seglog', 'limited_get_log_entries_bounded', async (s, ctx) => {
  // Large entries: a bounded read answers a prefix that starts at `start`, never nothing.
  const big = new Uint8Array(256 * 1024).fill(7);
  const entries: Entry[] = [];
  for (let i = 1; i <= 40; i++) entries.push({ logId: lid(1, i), payload: { type: 'normal', data: big } });
  for (let i = 0; i < entries.length; i += 8) await append(ctx, s.log, entries.slice(i, i + 8));
  await s.log.purge(lid(1, 4));
  await s.reopen();
  for (const [start, end] of [[0, 41], [5, 41], [20, 21], [3, 6], [40, 100]] as const) {
    const got = await s.log.limitedGetLogEntries(start, end);
    const from = Math.max(start, 5);
    assert.ok(got.length >= 1, `[${start}, ${end}) holds entries: never []`);
    assert.deepEqual(got.map((e) => e.logId), got.map((_, i) => lid(1, from + i)), 'a consecutive prefix from the first held index');
    assert.ok(got.length <= Math.min(end, 41) - from);
    const first = got[0]?.payload;
    assert.ok(first?.type === 'normal' && Buffer.from(first.data).equals(Buffer.from(big)), 'the data');
  }
  assert.deepEqual(await s.log.limitedGetLogEntries(0, 5), [], 'only purged entries');
  assert.deepEqual(await s.log.limitedGetLogEntries(41, 50), [], 'past the end');
});

single('seglog', 'apply_normal_entries', async (s) => {
  const replies = await apply(s.sm, [kvSet(1, 1, 'a', 'x'), kvSet(1, 2, 'b', 'y'), kvSet(1, 3, 'a', 'z'), blank(1, 4), kvDelete(1, 5, 'b')]);
  assert.deepEqual(replies.filter((_, i) => i !== 3), [kvPrevious(null), kvPrevious(null), kvPrevious('x'), kvPrevious('y')]);
  const bogus = await apply(s.sm, [{ logId: lid(1, 6), payload: { type: 'normal', data: new Uint8Array([0xff]) } }]);
  assert.equal((bogus[0] as KvReply).ok, false, 'a malformed command is answered, not thrown');
  await s.reopen();
  assert.deepEqual((await s.sm.appliedState())[0], lid(1, 6));
  assert.deepEqual(await apply(s.sm, [kvDelete(1, 7, 'a'), kvSet(1, 8, 'b', 'w')]), [kvPrevious('z'), kvPrevious(null)], 'the state after reopen');
});

pair('seglog', 'build_snapshot_while_applying', async (a, b) => {
  await apply(a.sm, [kvSet(1, 1, 'k', 'old'), membershipEnt(1, 2, 1, 2)]);
  const builder = await a.sm.getSnapshotBuilder();
  // Applied after the builder was obtained: not in its snapshot.
  await apply(a.sm, [kvSet(1, 3, 'k', 'new'), membershipEnt(1, 4, 1, 2, 3)]);
  const snap = await builder.buildSnapshot();
  assert.deepEqual(snap.meta.lastLogId, lid(1, 2));
  assert.deepEqual(snap.meta.lastMembership, stored(lid(1, 2), mem(1, 2)));
  assert.deepEqual(await a.sm.appliedState(), [lid(1, 4), stored(lid(1, 4), mem(1, 2, 3))], 'applying went on');
  await a.reopen();
  assert.deepEqual(await a.sm.appliedState(), [lid(1, 4), stored(lid(1, 4), mem(1, 2, 3))], 'entries after the snapshot survive it');
  assert.deepEqual(await apply(a.sm, [kvSet(1, 5, 'k', 'a')]), [kvPrevious('new')]);

  const current = await a.sm.getCurrentSnapshot();
  assert.ok(current);
  await pipeInto(current, b.sm);
  await b.reopen();
  assert.deepEqual(await b.sm.appliedState(), [lid(1, 2), stored(lid(1, 2), mem(1, 2))]);
  assert.deepEqual(await apply(b.sm, [kvSet(1, 3, 'k', 'b')]), [kvPrevious('old')], 'the snapshot holds the state at the builder');
});

pair('seglog', 'install_snapshot_replaces_state', async (a, b) => {
  await apply(a.sm, [kvSet(2, 1, 'x', 'leader'), kvSet(2, 2, 'y', 'leader'), membershipEnt(2, 3, 4, 5)]);
  const snap = await (await a.sm.getSnapshotBuilder()).buildSnapshot();
  const snapBytes = await collect(snap.data);

  // The follower has state of its own, and a snapshot of it.
  await apply(b.sm, [kvSet(1, 1, 'x', 'follower'), kvSet(1, 2, 'z', 'follower')]);
  await (await b.sm.getSnapshotBuilder()).buildSnapshot(); // to be deleted by the install
  await apply(b.sm, [kvSet(1, 3, 'w', 'follower')]);
  await b.reopen();

  const sink = await b.sm.beginReceivingSnapshot();
  // Cut the stream differently from how it was built.
  for (let at = 0; at < snapBytes.length; at += 7) await sink.write(snapBytes.subarray(at, at + 7));
  await b.sm.installSnapshot(snap.meta, sink);
  await b.reopen();
  assert.deepEqual(await b.sm.appliedState(), [lid(2, 3), stored(lid(2, 3), mem(4, 5))]);
  const current = await b.sm.getCurrentSnapshot();
  assert.ok(current);
  assert.deepEqual(current.meta, snap.meta, 'the installed snapshot is current');
  assert.ok(Buffer.from(await collect(current.data)).equals(Buffer.from(snapBytes)), 'and streams back the same bytes');
  const replies = await apply(b.sm, [kvDelete(2, 4, 'x'), kvDelete(2, 5, 'y'), kvDelete(2, 6, 'z'), kvDelete(2, 7, 'w')]);
  assert.deepEqual(replies, [kvPrevious('leader'), kvPrevious('leader'), kvPrevious(null), kvPrevious(null)], 'the state is the snapshot, nothing else');
});

pair('seglog', 'install_snapshot_refuses_damaged_stream', async (a, b) => {
  await apply(a.sm, [kvSet(1, 1, 'k', 'v'.repeat(1000)), blank(1, 2)]);
  const snap = await (await a.sm.getSnapshotBuilder()).buildSnapshot();
  const good = await collect(snap.data);
  await apply(b.sm, [kvSet(1, 1, 'k', 'mine')]);
  const mine = await (await b.sm.getSnapshotBuilder()).buildSnapshot();

  const attempts: [string, Uint8Array, string][] = [
    ['a flipped byte in the body', Uint8Array.from(good, (x, i) => (i === good.length - 100 ? x ^ 0x10 : x)), 'CORRUPT'],
    ['cut short', good.subarray(0, good.length - 3), 'CORRUPT'],
    ['extended', new Uint8Array([...good, 0]), 'CORRUPT'],
    ['empty', new Uint8Array(0), 'CORRUPT'],
  ];
  for (const [what, data, code] of attempts) {
    const sink = await b.sm.beginReceivingSnapshot();
    if (data.length > 0) await sink.write(data);
    await assert.rejects(b.sm.installSnapshot(snap.meta, sink), rejectsWith(code), what);
  }
  // Intact bytes, but for other metadata.
  const sink = await b.sm.beginReceivingSnapshot();
  await sink.write(good);
  await assert.rejects(b.sm.installSnapshot({ ...snap.meta, lastLogId: lid(1, 1) }, sink), rejectsWith('INVALID'), 'meta mismatch');

  await b.reopen();
  assert.deepEqual((await b.sm.appliedState())[0], lid(1, 1), 'state unchanged');
  assert.deepEqual((await b.sm.getCurrentSnapshot())?.meta, mine.meta, 'current snapshot unchanged');
  assert.deepEqual(await apply(b.sm, [kvSet(1, 2, 'k', 'x')]), [kvPrevious('mine')]);
});

pair('seglog', 'install_snapshot_behind_applied_refused', async (a, b) => {
  await apply(a.sm, [kvSet(1, 1, 'k', 'a'), blank(1, 2)]);
  const snap = await (await a.sm.getSnapshotBuilder()).buildSnapshot();
  await apply(b.sm, [kvSet(1, 1, 'k', 'b'), blank(1, 2), blank(1, 3)]);
  await b.reopen();
  await assert.rejects(pipeInto(snap, b.sm), rejectsWith('INVALID'), 'a snapshot that ends before the applied position');
  assert.deepEqual((await b.sm.appliedState())[0], lid(1, 3));
  assert.deepEqual(await apply(b.sm, [kvSet(1, 4, 'k', 'c')]), [kvPrevious('b')]);
});

single('seglog', 'vote_and_committed_overwrite', async (s) => {
  await s.reopen();
  assert.equal(await s.log.readVote(), null, 'never voted');
  assert.equal(await s.log.readCommitted(), null, 'never committed');
  await s.log.saveVote(vote(1, 3));
  await s.log.saveVote(vote(2, 5, true));
  await s.log.saveCommitted(lid(1, 9));
  await s.reopen();
  assert.deepEqual(await s.log.readVote(), vote(2, 5, true));
  assert.deepEqual(await s.log.readCommitted(), lid(1, 9));
  await s.log.saveCommitted(null);
  await s.reopen();
  assert.equal(await s.log.readCommitted(), null);
});

// ---------------------------------------------------------------------------------------------
// Registration

/** The names of every test, in order, with the suite each comes from. */
export const raftConformanceTests: readonly { name: string; origin: string }[] = cases.map(({ name, origin }) => ({ name, origin }));

async function runCase(c: Case, builder: RaftStorageBuilder, reopen: boolean, ctx: Ctx): Promise<void> {
  const stores: StoreUnderTest[] = [];
  try {
    for (let i = 0; i < c.stores; i++) {
      const st = new StoreUnderTest(await builder.create(), reopen);
      stores.push(st);
      await st.start();
    }
    if (c.stores === 1) await (c.run as Single)(stores[0] as StoreUnderTest, ctx);
    else await (c.run as Pair)(stores[0] as StoreUnderTest, stores[1] as StoreUnderTest, ctx);
  } finally {
    for (const st of stores) await st.dispose();
  }
}

/**
 * Runs one conformance test by name, outside node:test (for debugging a store, and for checking
 * that the suite fails on a broken one). Rejects with the test's assertion error.
 */
export async function runRaftConformanceTest(
  builder: RaftStorageBuilder,
  name: string,
  options: { reopen?: boolean; callbackDeadlineMs?: number } = {},
): Promise<void> {
  const c = cases.find((x) => x.name === name);
  if (c === undefined) throw new TypeError(`no raft conformance test named ${JSON.stringify(name)}`);
  await runCase(c, builder, options.reopen ?? false, { deadlineMs: options.callbackDeadlineMs ?? 30_000 });
}

/**
 * Registers the Raft storage conformance tests under node:test. `builder.create()` is called for
 * every test (twice for tests that need two stores) and must answer a fresh, empty store.
 */
export function raftStorageConformance(builder: RaftStorageBuilder, options: RaftStorageConformanceOptions = {}): void {
  const reopen = options.reopen ?? true;
  const ctx: Ctx = { deadlineMs: options.callbackDeadlineMs ?? 30_000 };
  const selected = options.only === undefined ? cases : cases.filter((c) => options.only?.includes(c.name));
  describe(options.name ?? 'raft storage conformance', () => {
    for (const pass of reopen ? [false, true] : [false]) {
      for (const c of selected) {
        test(pass ? `${c.name} (reopened at checkpoints)` : c.name, () => runCase(c, builder, pass, ctx));
      }
    }
  });
}
