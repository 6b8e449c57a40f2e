// The benchmark's peers are honest: the host store and the Raft log built on better-sqlite3 and on
// lmdb answer exactly what the in-memory reference stores answer, for random sequences of calls,
// and keep it across a reopen. Skipped when the peers are not installed (`npm run bench:peers`),
// as in CI, which never installs them. No timing is asserted.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { CommitBatch } from '../lib/host/batch.js';
import { HostStoreError } from '../lib/host/errors.js';
import { MemoryHostRealm } from '../lib/host/memory.js';
import type { HostStore, ScopeRef, ScopeUpdate } from '../lib/host/types.js';
import { SCOPE_KINDS } from '../lib/host/types.js';
import { SeglogError } from '../lib/errors.js';
import { ManualClock } from '../lib/clock.js';
import { FenceTiming } from '../lib/host/timing.js';
import { hostStoreConformance, type HostStoreFactory } from '../lib/conformance/host-store.js';
import { kvPlugin } from '../lib/raft/kv.js';
import { MemoryRaftDisk, openMemoryRaftGroup } from '../lib/raft/memory.js';
import type { Entry, RaftLogStorage } from '../lib/raft/types.js';
import { openLmdbHostStore } from '../bench/stores/host-lmdb.js';
import type { PeerHostBase } from '../bench/stores/host-peer-base.js';
import { openSqliteHostStore } from '../bench/stores/host-sqlite.js';
import { loadPeers, type Peers } from '../bench/stores/peers.js';
import { openLmdbRaftNode, openSqliteRaftNode, type PeerRaftNode } from '../bench/stores/raft-backends.js';

const loaded = loadPeers();
const peers: Peers | null = loaded.ok ? loaded.peers : null;
const skip = peers === null ? `peers not installed (npm run bench:peers): ${loaded.ok ? '' : loaded.missing}` : false;

type HostOpener = (dir: string) => Promise<PeerHostBase>;
const hostPeers: [string, HostOpener][] =
  peers === null
    ? []
    : [
        ['sqlite', (dir) => openSqliteHostStore(peers.Sqlite, dir)],
        ['lmdb', (dir) => openLmdbHostStore(peers.lmdb, dir)],
      ];
type RaftOpener = (dir: string) => Promise<PeerRaftNode>;
const raftPeers: [string, RaftOpener][] =
  peers === null
    ? []
    : [
        ['sqlite', (dir) => openSqliteRaftNode(peers.Sqlite, dir)],
        ['lmdb', (dir) => openLmdbRaftNode(peers.lmdb, dir)],
      ];

async function withDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'seglog-bench-peers-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function outcome(f: () => Promise<unknown>): Promise<string> {
  try {
    await f();
    return 'ok';
  } catch (err) {
    if (err instanceof SeglogError) return err.code;
    throw err;
  }
}

// ---------------------------------------------------------------- host store

const SCOPES: ScopeRef[] = [
  { kind: 'session', name: 'a' },
  { kind: 'session', name: 'b/../c' },
  { kind: 'session', name: '\u{1F600}' },
  { kind: 'mob', name: 'a' },
];

async function hostState(store: HostStore): Promise<unknown> {
  const out: unknown[] = [];
  for (const kind of SCOPE_KINDS) {
    let after: string | null = null;
    for (;;) {
      const page = await store.listHeads(kind, after, 2);
      out.push(page.heads.map((h) => [kind, h.name, h.head.version, h.head.commitId, [...h.head.head]]), page.next);
      if (page.next === null) break;
      after = page.next;
    }
  }
  for (const scope of SCOPES) {
    const head = await store.loadHead(scope);
    let rows: unknown = [];
    if (head !== null) {
      let from = 0;
      // Find the first visible row: readRows below it is INVALID.
      for (; from < 64; from++) if ((await outcome(() => store.readRows(scope, from, 0))) === 'ok') break;
      rows = (await store.readRows(scope, from, 100)).map((r) => [r.index, ...r.data]);
    }
    out.push(head === null ? null : [head.version, head.commitId, [...head.head]], rows);
  }
  return out;
}

const updateArb = fc.record({
  scope: fc.integer({ min: 0, max: SCOPES.length - 1 }),
  kind: fc.constantFrom('create', 'next', 'next', 'stale', 'delete'),
  head: fc.option(fc.integer({ min: 0, max: 255 }), { nil: undefined }),
  append: fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 3 }),
  truncateAfter: fc.option(fc.integer({ min: 0, max: 8 }), { nil: undefined }),
  dropBefore: fc.option(fc.integer({ min: 0, max: 8 }), { nil: undefined }),
});

for (const [name, open] of hostPeers.length > 0 ? hostPeers : [['peers', null] as const]) {
  test(`host store on ${name}: answers as the reference store does, for random batches, and again after a reopen`, { skip }, async () => {
    assert.ok(open !== null);
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ updates: fc.array(updateArb, { minLength: 1, maxLength: 3 }), token: fc.constantFrom(1, 1, 1, 1, 0, 2), retry: fc.boolean() }), { minLength: 4, maxLength: 20 }),
        async (batches) =>
          withDir(async (dir) => {
            const ref = new MemoryHostRealm().open();
            let peer = await open(dir);
            try {
              assert.deepEqual(await peer.acquireFence('exclusive'), await ref.acquireFence('exclusive'));
              let n = 0;
              let last: CommitBatch | null = null;
              for (const b of batches) {
                let batch: CommitBatch;
                if (b.retry && last !== null) batch = last;
                else {
                  const seen = new Set<number>();
                  const updates: ScopeUpdate[] = [];
                  for (const u of b.updates) {
                    if (seen.has(u.scope)) continue;
                    seen.add(u.scope);
                    const scope = SCOPES[u.scope] as ScopeRef;
                    const v = (await ref.loadHead(scope))?.version ?? null;
                    if (u.kind === 'create' || v === null) updates.push({ scope, previous: null, next: 1, head: new Uint8Array([u.head ?? 0]), append: u.append.map((x) => new Uint8Array([x])) });
                    else if (u.kind === 'delete') updates.push({ scope, previous: v, next: v + 1, delete: true });
                    else {
                      const previous = u.kind === 'stale' ? Math.max(1, v - 1) : v;
                      const upd: ScopeUpdate = { scope, previous, next: previous + 1, append: u.append.map((x) => new Uint8Array([x])) };
                      if (u.head !== undefined) upd.head = new Uint8Array([u.head]);
                      if (u.truncateAfter !== undefined) upd.truncateAfter = u.truncateAfter;
                      if (u.dropBefore !== undefined) upd.dropBefore = u.dropBefore;
                      updates.push(upd);
                    }
                  }
                  batch = CommitBatch.tryNew(`c${++n}`, b.token, updates);
                }
                last = batch;
                assert.equal(await outcome(() => peer.commit(batch)), await outcome(() => ref.commit(batch)), `batch ${batch.commitId}`);
              }
              const expected = await hostState(ref);
              assert.deepEqual(await hostState(peer), expected);
              await peer.close();
              peer = await open(dir);
              assert.deepEqual(await hostState(peer), expected, 'after a reopen');
            } finally {
              await peer.close();
            }
          }),
      ),
      { numRuns: 20 },
    );
  });

  test(`host store on ${name}: the fence across handles — HELD, takeover, FENCED_OUT, renew`, { skip }, async () => {
    assert.ok(open !== null);
    await withDir(async (dir) => {
      const a = await open(dir);
      const b = await open(dir);
      try {
        const scope: ScopeRef = { kind: 'record', name: 'r' };
        const { token: t1 } = await a.acquireFence('exclusive');
        await a.commit(CommitBatch.tryNew('c1', t1, [{ scope, previous: null, next: 1, head: new Uint8Array([1]) }]));
        await assert.rejects(b.acquireFence('exclusive'), (e: unknown) => e instanceof HostStoreError && e.code === 'HELD' && e.token === t1);
        const grant = await b.acquireFence('takeover');
        assert.equal(grant.token, t1 + 1);
        assert.ok(grant.supersededLease > 0);
        await assert.rejects(a.commit(CommitBatch.tryNew('c2', t1, [{ scope, previous: 1, next: 2 }])), (e: unknown) => e instanceof HostStoreError && e.code === 'FENCED_OUT');
        await assert.rejects(a.renewFence(t1), (e: unknown) => e instanceof HostStoreError && e.code === 'FENCED_OUT');
        await b.renewFence(grant.token);
        await b.commit(CommitBatch.tryNew('c3', grant.token, [{ scope, previous: 1, next: 2, append: [new Uint8Array([5])] }]));
        assert.equal((await a.loadHead(scope))?.commitId, 'c3');
        // A deleted scope is neither loaded, listed nor read, and its name is not created again.
        const other: ScopeRef = { kind: 'record', name: 's' };
        await b.commit(CommitBatch.tryNew('c4', grant.token, [{ scope: other, previous: null, next: 1, head: new Uint8Array([2]) }]));
        await b.commit(CommitBatch.tryNew('c5', grant.token, [{ scope, previous: 2, next: 3, delete: true }]));
        assert.equal(await a.loadHead(scope), null);
        assert.deepEqual(await a.readRows(scope, 0, 10), []);
        assert.deepEqual((await a.listHeads('record', null, 10)).heads.map((h) => h.name), ['s']);
        await assert.rejects(b.commit(CommitBatch.tryNew('c6', grant.token, [{ scope, previous: null, next: 1, head: new Uint8Array([3]) }])), (e: unknown) => e instanceof HostStoreError && e.code === 'INVALID');
      } finally {
        await a.close();
        await b.close();
      }
    });
  });
}

// ---------------------------------------------------------------- Raft log

type RaftOp =
  | { op: 'append'; count: number; skew: number }
  | { op: 'truncate'; at: number }
  | { op: 'purge'; at: number }
  | { op: 'vote'; term: number };

const raftOpArb: fc.Arbitrary<RaftOp> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('append' as const), count: fc.integer({ min: 0, max: 4 }), skew: fc.constantFrom(0, 0, 0, 0, 1, -1, 5) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('truncate' as const), at: fc.integer({ min: 0, max: 20 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('purge' as const), at: fc.integer({ min: 0, max: 20 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('vote' as const), term: fc.integer({ min: 1, max: 5 }) }) },
);

async function raftState(log: RaftLogStorage): Promise<unknown> {
  const entries = await log.tryGetLogEntries(0, 1000);
  const limited = await log.limitedGetLogEntries(0, 1000);
  return { state: await log.getLogState(), entries: entries.map(show), limited: limited.length > 0, vote: await log.readVote(), committed: await log.readCommitted() };
}

function show(e: Entry): unknown {
  return [e.logId.leaderId.term, e.logId.index, e.payload.type === 'normal' ? [...e.payload.data] : e.payload.type];
}

for (const [name, open] of raftPeers.length > 0 ? raftPeers : [['peers', null] as const]) {
  test(`Raft log on ${name}: answers as the reference log does, for random calls, and again after a reopen`, { skip }, async () => {
    assert.ok(open !== null);
    await fc.assert(
      fc.asyncProperty(fc.array(raftOpArb, { maxLength: 20 }), fc.integer({ min: 0, max: 5 }), async (ops, start) =>
        withDir(async (dir) => {
          const ref = (await openMemoryRaftGroup(new MemoryRaftDisk(), { plugin: kvPlugin })).log;
          let node = await open(dir);
          let peer = await node.openGroup('g');
          try {
            let term = 1;
            for (const o of ops) {
              const state = await ref.getLogState();
              let call: (log: RaftLogStorage) => Promise<unknown>;
              if (o.op === 'append') {
                const next = state.lastLogId === null ? start : state.lastLogId.index + 1;
                const entries: Entry[] = Array.from({ length: o.count }, (_, i) => ({
                  logId: { leaderId: { term, nodeId: 1 }, index: next + o.skew + i },
                  payload: i % 3 === 2 ? { type: 'blank' } : { type: 'normal', data: new Uint8Array([next + i, term]) },
                }));
                call = (log) =>
                  new Promise<void>((resolve, reject) => {
                    let flushed: Error | null | undefined;
                    log.append(entries, (err) => void (flushed = err)).then(() => {
                      // onFlushed fires once, with null, by the time a peer's append resolves.
                      if (flushed !== null) reject(new Error(`onFlushed: ${String(flushed)}`));
                      else resolve();
                    }, reject);
                  });
              } else if (o.op === 'truncate') call = (log) => log.truncate({ leaderId: { term, nodeId: 1 }, index: o.at });
              else if (o.op === 'purge') call = (log) => log.purge({ leaderId: { term, nodeId: 1 }, index: o.at });
              else {
                term = Math.max(term, o.term);
                call = (log) => log.saveVote({ leaderId: { term: o.term, nodeId: 2 }, committed: false });
              }
              assert.equal(await outcome(() => call(peer)), await outcome(() => call(ref)), JSON.stringify(o));
              assert.deepEqual(await peer.getLogState(), await ref.getLogState(), `state after ${JSON.stringify(o)}`);
            }
            await peer.saveCommitted((await ref.getLogState()).lastLogId);
            await ref.saveCommitted((await ref.getLogState()).lastLogId);
            const expected = await raftState(ref);
            assert.deepEqual(await raftState(peer), expected);
            await node.close();
            node = await open(dir);
            peer = await node.openGroup('g');
            assert.deepEqual(await raftState(peer), expected, 'after a reopen');
          } finally {
            await node.close();
          }
        }),
      ),
      { numRuns: 15 },
    );
  });
}

// ---------------------------------------------------------------- the SPI's conformance chapter

if (peers !== null) {
  for (const [name, openWith] of [
    ['sqlite', (dir: string, clock: ManualClock) => openSqliteHostStore(peers.Sqlite, dir, { clock })],
    ['lmdb', (dir: string, clock: ManualClock) => openLmdbHostStore(peers.lmdb, dir, { clock })],
  ] as const) {
    hostStoreConformance(
      async (): Promise<HostStoreFactory<PeerHostBase>> => {
        const dir = await mkdtemp(path.join(os.tmpdir(), 'seglog-bench-peer-conformance-'));
        const clock = new ManualClock(1_000_000);
        return {
          open: () => openWith(dir, clock),
          lapseFenceLeases: () => clock.advance(FenceTiming.default().lease + 1),
          kill: (h) => h.kill(),
          stallCommits: (h) => h.stallNextCommit(),
          close: (h) => h.close(),
          cleanup: () => rm(dir, { recursive: true, force: true }),
        };
      },
      { name: `host store conformance: the ${name} peer` },
    );
  }
}
