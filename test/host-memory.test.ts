// Tests of the host store's shared parts and of the in-memory reference store: the conformance
// suite twice (a commit stalled before and after its commit point), the well-formedness rules of
// CommitBatch and FenceTiming, the order of names, and a model-based test of random batches.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ManualClock } from '../lib/clock.js';
import { hostStoreConformance } from '../lib/conformance/host-store.js';
import { SeglogError } from '../lib/errors.js';
import {
  CommitBatch,
  compareNames,
  FENCE_LEASE_SECS,
  FENCE_MAX_COMMIT_LATENCY_SECS,
  FENCE_MIN_LEASE_RENEWALS,
  FENCE_RENEW_INTERVAL_SECS,
  FenceTiming,
  HostStoreError,
  isCommitId,
  isHostStoreError,
  isScopeName,
  MAX_BATCH_BYTES,
  MAX_COMMIT_ID_BYTES,
  MAX_ROW_BYTES,
  MAX_SCOPE_NAME_BYTES,
  MemoryHostRealm,
  ScopeVersion,
  type ScopeKind,
  type ScopeRef,
  type ScopeUpdate,
} from '../lib/host/index.js';

// ---- the conformance suite against the reference store ----

hostStoreConformance(() => new MemoryHostRealm(), { name: 'MemoryHostRealm conformance (stall before the commit point)' });

hostStoreConformance(
  () => {
    const clock = new ManualClock(5_000_000);
    const realm = new MemoryHostRealm({ clock, timing: FenceTiming.tryNew(1000, 3000) });
    return {
      open: () => realm.open(),
      lapseFenceLeases: () => clock.advance(realm.timing.lease),
      kill: (handle) => realm.kill(handle),
      stallCommits: (handle) => realm.stallCommits(handle, { at: 'after-commit-point' }),
      close: (handle) => handle.close(),
    };
  },
  { name: 'MemoryHostRealm conformance (stall after the commit point, manual clock)', concurrentScopes: 256 },
);

// ---- the package's entry points ----

test('the package entry points export the host store API', async () => {
  const main = (await import('../lib/index.js')) as Record<string, unknown>;
  for (const name of ['CommitBatch', 'FenceTiming', 'HostStoreError', 'MemoryHostRealm', 'MemoryHostStore', 'openFsHostStore', 'FsHostStore', 'compareNames', 'ScopeVersion', 'MAX_BATCH_BYTES', 'MAX_ROW_BYTES', 'MAX_SCOPE_NAME_BYTES', 'MAX_COMMIT_ID_BYTES', 'FENCE_RENEW_INTERVAL_SECS', 'FENCE_LEASE_SECS', 'FENCE_MIN_LEASE_RENEWALS', 'FENCE_MAX_COMMIT_LATENCY_SECS']) {
    assert.ok(main[name] !== undefined, `seglog exports ${name}`);
  }
  assert.equal(main['CommitBatch'], CommitBatch);
  const conformance = (await import('../lib/conformance/index.js')) as Record<string, unknown>;
  assert.equal(conformance['hostStoreConformance'], hostStoreConformance);
});

// ---- helpers ----

const te = new TextEncoder();
const b = (s: string): Uint8Array => te.encode(s);
const utf8Order = (x: string, y: string): number => Buffer.compare(Buffer.from(x, 'utf8'), Buffer.from(y, 'utf8'));
const sign = (n: number): number => (n < 0 ? -1 : n > 0 ? 1 : 0);

function invalidThrown(fn: () => unknown): HostStoreError {
  try {
    fn();
  } catch (err) {
    assert.ok(isHostStoreError(err, 'INVALID'), `expected INVALID, got ${String(err)}`);
    return err;
  }
  assert.fail('expected INVALID, nothing was thrown');
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'OK';
  } catch (err) {
    assert.ok(err instanceof HostStoreError, `a HostStoreError, not ${String(err)}`);
    return err.code;
  }
}

// ---- names ----

describe('scope names and their order', () => {
  test('compareNames orders well-formed strings as their UTF-8 bytes', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 8 }), fc.string({ unit: 'binary', maxLength: 8 }), (x, y) => {
        assert.equal(sign(compareNames(x, y)), sign(utf8Order(x, y)));
      }),
      { numRuns: 2000 },
    );
    // The cases where UTF-16 order and UTF-8 order differ.
    assert.ok(compareNames('\uFF61', '\u{1F600}') < 0);
    assert.ok('\uFF61' > '\u{1F600}', 'JavaScript order differs here');
    assert.ok(compareNames('a\uE000', 'a\u{10000}') < 0);
    assert.ok(compareNames('\u{10FFFF}', '\uFFFF') > 0);
    assert.equal(compareNames('abc', 'abc'), 0);
    assert.ok(compareNames('ab', 'abc') < 0);
  });

  test('compareNames is a total order on all strings, lone surrogates included', () => {
    const unit = fc.oneof(fc.constantFrom(0xd800, 0xdbff, 0xdc00, 0xdfff, 0xe000, 0xffff, 0x61), fc.integer({ min: 0, max: 0xffff }));
    const anyString = fc.array(unit, { maxLength: 6 }).map((units) => String.fromCharCode(...units));
    fc.assert(
      fc.property(anyString, anyString, anyString, (x, y, z) => {
        assert.equal(sign(compareNames(x, y)) + sign(compareNames(y, x)), 0, 'antisymmetric');
        assert.equal(compareNames(x, y) === 0, x === y);
        if (compareNames(x, y) <= 0 && compareNames(y, z) <= 0) assert.ok(compareNames(x, z) <= 0);
      }),
      { numRuns: 2000 },
    );
  });

  test('a valid name: 1..512 UTF-8 bytes, well formed, no control character', () => {
    const controls = /\p{Cc}/u;
    const lone = /\p{Cs}/u;
    const unit = fc.oneof(
      fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
      fc.constantFrom('\u0000', '\u001f', '\u007f', '\u0085', '\u009f', '\uD800', '\uDFFF', '\u{1F600}', 'é', '中', 'a'),
    );
    fc.assert(
      fc.property(fc.array(unit, { maxLength: 200 }).map((parts) => parts.join('')), (name) => {
        const expected = name.length > 0 && !controls.test(name) && !lone.test(name) && Buffer.byteLength(name) <= MAX_SCOPE_NAME_BYTES;
        assert.equal(isScopeName(name), expected);
        const expectedId = name.length > 0 && !controls.test(name) && !lone.test(name) && Buffer.byteLength(name) <= MAX_COMMIT_ID_BYTES;
        assert.equal(isCommitId(name), expectedId);
      }),
      { numRuns: 1000 },
    );
    assert.ok(isScopeName('x'.repeat(512)));
    assert.ok(!isScopeName('x'.repeat(513)));
    assert.ok(isScopeName('\u{1F600}'.repeat(128)));
    assert.ok(!isScopeName('\u{1F600}'.repeat(128) + 'x'));
    assert.ok(!isScopeName(7));
  });
});

// ---- errors ----

test('HostStoreError carries the SPI fields and is a SeglogError', () => {
  const scope: ScopeRef = { kind: 'mob', name: 'm' };
  const conflict = HostStoreError.conflict(scope, null);
  assert.ok(conflict instanceof SeglogError);
  assert.equal(conflict.code, 'CONFLICT');
  assert.deepEqual(conflict.scope, scope);
  assert.equal(conflict.current, null);
  assert.ok(conflict.message.startsWith('CONFLICT: '));
  assert.deepEqual(conflict.details, { scope, current: null });
  const fenced = HostStoreError.fencedOut(9);
  assert.equal(fenced.current, 9);
  const held = HostStoreError.held('p1', 1500, 4);
  assert.deepEqual([held.code, held.holder, held.remaining, held.token], ['HELD', 'p1', 1500, 4]);
  const cause = new Error('disk');
  assert.equal(HostStoreError.indeterminate('lost', cause).cause, cause);
  assert.equal(HostStoreError.unavailable('down').code, 'UNAVAILABLE');
  assert.deepEqual(HostStoreError.invalid('bad', { field: 'x' }).details, { field: 'x' });
  assert.ok(isHostStoreError(held, 'HELD'));
  assert.ok(!isHostStoreError(held, 'CONFLICT'));
  assert.ok(!isHostStoreError(new SeglogError('INVALID', 'x')));
});

// ---- CommitBatch ----

describe('CommitBatch', () => {
  const X: ScopeRef = { kind: 'session', name: 'x' };

  test('constants', () => {
    assert.equal(MAX_BATCH_BYTES, 8 * 1024 * 1024);
    assert.equal(MAX_ROW_BYTES, 1024 * 1024);
    assert.equal(MAX_SCOPE_NAME_BYTES, 512);
    assert.equal(MAX_COMMIT_ID_BYTES, 128);
    assert.equal(ScopeVersion.FIRST, 1);
    assert.ok(Object.isFrozen(ScopeVersion));
  });

  test('copies every byte array and freezes its structure', () => {
    const head = b('head');
    const rows = [b('r0'), b('r1')];
    const scope = { kind: 'session' as ScopeKind, name: 'x' };
    const updates: ScopeUpdate[] = [{ scope, previous: null, next: 1, head, append: rows }];
    const batch = CommitBatch.tryNew('id', 3, updates);
    head.fill(0);
    rows[0]?.fill(0);
    rows.push(b('r2'));
    scope.name = 'y';
    updates.push({ scope: { kind: 'mob', name: 'z' }, previous: 1, next: 2 });
    const [u] = batch.updates;
    assert.ok(u !== undefined);
    assert.equal(batch.updates.length, 1);
    assert.equal(u.scope.name, 'x');
    assert.deepEqual([...(u.head ?? [])], [...b('head')]);
    assert.deepEqual(u.append?.map((r) => Buffer.from(r).toString()), ['r0', 'r1']);
    assert.equal(batch.payloadBytes, 8);
    for (const frozen of [batch, batch.updates, u, u.scope, u.append]) assert.ok(Object.isFrozen(frozen));
    assert.throws(() => (u.append as Uint8Array[]).push(b('x')), TypeError);
    assert.throws(() => {
      (u as { next: number }).next = 5;
    }, TypeError);
  });

  test('a copy of a view holds exactly the view bytes', () => {
    const backing = b('0123456789');
    const batch = CommitBatch.tryNew('id', 0, [{ scope: X, previous: 4, next: 5, head: backing.subarray(2, 5) }]);
    const head = batch.updates[0]?.head;
    assert.equal(head?.byteLength, 3);
    assert.equal(head?.buffer.byteLength, 3);
    assert.equal(Buffer.from(head ?? []).toString(), '234');
  });

  test('from() passes a CommitBatch through and validates a plain object', () => {
    const batch = CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2 }]);
    assert.equal(CommitBatch.from(batch), batch);
    const plain = CommitBatch.from({ commitId: 'p', token: 2, updates: [{ scope: X, previous: 1, next: 2, append: [b('a')] }] });
    assert.ok(plain instanceof CommitBatch);
    assert.equal(plain.payloadBytes, 1);
    invalidThrown(() => CommitBatch.from({ commitId: 'p', token: 2, updates: 'nope' }));
    invalidThrown(() => CommitBatch.from(undefined));
  });

  test('the byte limit counts heads and rows over every update, up to exactly 8 MiB', () => {
    const half = MAX_BATCH_BYTES / 2;
    const ok = CommitBatch.tryNew('id', 1, [
      { scope: X, previous: 1, next: 2, head: new Uint8Array(half - MAX_ROW_BYTES), append: [new Uint8Array(MAX_ROW_BYTES)] },
      { scope: { kind: 'mob', name: 'y' }, previous: 1, next: 2, head: new Uint8Array(half) },
    ]);
    assert.equal(ok.payloadBytes, MAX_BATCH_BYTES);
    invalidThrown(() =>
      CommitBatch.tryNew('id', 1, [
        { scope: X, previous: 1, next: 2, head: new Uint8Array(half), append: [new Uint8Array(1)] },
        { scope: { kind: 'mob', name: 'y' }, previous: 1, next: 2, head: new Uint8Array(half) },
      ]),
    );
  });

  test('the same name in two kinds is two scopes', () => {
    const batch = CommitBatch.tryNew('id', 1, [
      { scope: { kind: 'session', name: 'n' }, previous: 1, next: 2 },
      { scope: { kind: 'record', name: 'n' }, previous: 1, next: 2 },
    ]);
    assert.equal(batch.updates.length, 2);
    const err = invalidThrown(() =>
      CommitBatch.tryNew('id', 1, [
        { scope: { kind: 'record', name: 'n' }, previous: 1, next: 2 },
        { scope: { kind: 'record', name: 'n' }, previous: 2, next: 3 },
      ]),
    );
    assert.equal(err.details['update'], 1);
  });
});

// ---- FenceTiming ----

describe('FenceTiming', () => {
  test('default: 10 s, 30 s, margin 10 s, longest commit 2 s', () => {
    const t = FenceTiming.default();
    assert.deepEqual(
      [t.renewInterval, t.lease, t.selfFenceMargin, t.maxCommitLatency, t.selfFenceWindow],
      [10_000, 30_000, 10_000, 2_000, 20_000],
    );
    assert.equal(FENCE_RENEW_INTERVAL_SECS * 1000, t.renewInterval);
    assert.equal(FENCE_LEASE_SECS * 1000, t.lease);
    assert.equal(FENCE_MAX_COMMIT_LATENCY_SECS * 1000, t.maxCommitLatency);
    assert.equal(FENCE_MIN_LEASE_RENEWALS, 3);
    assert.equal(FenceTiming.MIN_RENEW_INTERVAL, 1000);
    assert.equal(FenceTiming.MAX_LEASE, 3_600_000);
    assert.ok(Object.isFrozen(t));
  });

  test('tryNew: renew at least 1 s; lease at least 3 renews and at most 1 hour; margin one renew', () => {
    const t = FenceTiming.tryNew(1000, 3000);
    assert.deepEqual([t.renewInterval, t.lease, t.selfFenceMargin, t.selfFenceWindow, t.maxCommitLatency], [1000, 3000, 1000, 2000, 2000]);
    FenceTiming.tryNew(60_000, 3_600_000);
    for (const [renew, lease] of [
      [999, 3000],
      [1000, 2999],
      [2000, 5999],
      [60_000, 3_600_001],
      [0, 3000],
      [-1000, 3000],
      [Number.NaN, 3000],
      [1000, Number.POSITIVE_INFINITY],
      ['1000' as never, 3000],
    ] as const) {
      invalidThrown(() => FenceTiming.tryNew(renew, lease));
    }
  });

  test('tryWithMargin: margin at least one renew, window at least two renews', () => {
    const t = FenceTiming.tryWithMargin(1000, 10_000, 4000);
    assert.deepEqual([t.selfFenceMargin, t.selfFenceWindow], [4000, 6000]);
    FenceTiming.tryWithMargin(1000, 3000, 1000);
    FenceTiming.tryWithMargin(1000, 10_000, 8000);
    invalidThrown(() => FenceTiming.tryWithMargin(1000, 10_000, 999));
    invalidThrown(() => FenceTiming.tryWithMargin(1000, 10_000, 8001));
    invalidThrown(() => FenceTiming.tryWithMargin(1000, 10_000, 0));
    invalidThrown(() => FenceTiming.tryWithMargin(1000, 2000, 1000));
  });

  test('tryWithMaxCommitLatency: more than 0, at most the lease; a new timing', () => {
    const base = FenceTiming.tryNew(1000, 3000);
    const t = base.tryWithMaxCommitLatency(3000);
    assert.equal(t.maxCommitLatency, 3000);
    assert.equal(base.maxCommitLatency, 2000);
    assert.deepEqual([t.renewInterval, t.lease, t.selfFenceMargin], [1000, 3000, 1000]);
    assert.equal(base.tryWithMaxCommitLatency(0.5).maxCommitLatency, 0.5);
    for (const bad of [0, -1, 3001, Number.NaN]) invalidThrown(() => base.tryWithMaxCommitLatency(bad));
  });
});

// ---- the memory store's own behaviour ----

describe('MemoryHostStore', () => {
  const X: ScopeRef = { kind: 'record', name: 'x' };

  test('leases run on the realm clock: HELD remaining, renew from now, a lease ends at its end', async () => {
    const clock = new ManualClock(100);
    const realm = new MemoryHostRealm({ clock, timing: FenceTiming.tryNew(1000, 3000) });
    const a = realm.open({ holderId: 'alpha' });
    const c = realm.open();
    const g = await a.acquireFence('exclusive');
    assert.deepEqual(g, { token: 1, supersededLease: 0 });
    clock.advance(1200);
    await assert.rejects(c.acquireFence('exclusive'), (err: HostStoreError) => err.code === 'HELD' && err.holder === 'alpha' && err.remaining === 1800 && err.token === 1);
    await a.renewFence(1);
    clock.advance(2999);
    await assert.rejects(c.acquireFence('exclusive'), (err: HostStoreError) => err.remaining === 1);
    clock.advance(1);
    assert.deepEqual(await c.acquireFence('exclusive'), { token: 2, supersededLease: 0 });
    clock.advance(500);
    assert.deepEqual(await a.acquireFence('takeover'), { token: 3, supersededLease: 2500 });
    assert.equal(await codeOf(c.renewFence(2)), 'FENCED_OUT');
    assert.equal(await codeOf(c.renewFence(4)), 'INVALID');
    assert.equal(a.fenceTiming(), realm.timing);
  });

  test('a commit carries a token: lower is FENCED_OUT, one never issued is INVALID, nothing applied', async () => {
    const realm = new MemoryHostRealm();
    const a = realm.open();
    await a.commit(CommitBatch.tryNew('zero', 0, [{ scope: X, previous: null, next: 1, head: b('h') }]));
    const { token } = await a.acquireFence('exclusive');
    assert.equal(await codeOf(a.commit(CommitBatch.tryNew('low', token - 1, [{ scope: X, previous: 1, next: 2 }]))), 'FENCED_OUT');
    assert.equal(await codeOf(a.commit(CommitBatch.tryNew('high', token + 1, [{ scope: X, previous: 1, next: 2 }]))), 'INVALID');
    assert.equal((await a.loadHead(X))?.version, 1);
  });

  test('a kill drops a commit held before its commit point and keeps one held after it', async () => {
    for (const at of ['before-commit-point', 'after-commit-point'] as const) {
      const realm = new MemoryHostRealm();
      const a = realm.open();
      const { token } = await a.acquireFence('exclusive');
      const stall = realm.stallCommits(a, { at });
      const p = a.commit(CommitBatch.tryNew('k', token, [{ scope: X, previous: null, next: 1, head: b('h') }]));
      await stall.reached;
      realm.kill(a);
      assert.equal(await codeOf(p), 'INDETERMINATE');
      assert.equal(await codeOf(a.loadHead(X)), 'UNAVAILABLE');
      const head = await realm.open().loadHead(X);
      assert.equal(head?.commitId ?? null, at === 'after-commit-point' ? 'k' : null, at);
    }
  });

  test('a closed handle answers UNAVAILABLE; close is idempotent', async () => {
    const realm = new MemoryHostRealm();
    const a = realm.open();
    await a.close();
    await a.close();
    assert.equal(await codeOf(a.loadHead(X)), 'UNAVAILABLE');
    assert.equal(await codeOf(a.acquireFence('exclusive')), 'UNAVAILABLE');
  });

  test('a stall released before any commit holds nothing', async () => {
    const realm = new MemoryHostRealm();
    const a = realm.open();
    realm.stallCommits(a).release();
    await a.commit(CommitBatch.tryNew('free', 0, [{ scope: X, previous: null, next: 1, head: b('h') }]));
    assert.equal((await a.loadHead(X))?.commitId, 'free');
  });

  test('commit ids are remembered for the last versions; an older retry is refused and never acts', async () => {
    const realm = new MemoryHostRealm({ rememberedCommitIds: 2 });
    const a = realm.open();
    const first = CommitBatch.tryNew('v1', 0, [{ scope: X, previous: null, next: 1, head: b('h'), append: [b('r')] }]);
    await a.commit(first);
    await a.commit(CommitBatch.tryNew('v2', 0, [{ scope: X, previous: 1, next: 2 }]));
    assert.equal(await codeOf(a.commit(first)), 'OK', 'within the window');
    await a.commit(CommitBatch.tryNew('v3', 0, [{ scope: X, previous: 2, next: 3 }]));
    assert.equal(await codeOf(a.commit(first)), 'CONFLICT', 'past the window');
    assert.equal((await a.readRows(X, 0, 10)).length, 1);
    assert.throws(() => new MemoryHostRealm({ rememberedCommitIds: 0 }), (err: HostStoreError) => err.code === 'INVALID');
  });

  test('a deleted name is not created again (INVALID), and its delete is remembered for retries', async () => {
    const realm = new MemoryHostRealm();
    const a = realm.open();
    await a.commit(CommitBatch.tryNew('c', 0, [{ scope: X, previous: null, next: 1, head: b('h') }]));
    const del = CommitBatch.tryNew('d', 0, [{ scope: X, previous: 1, next: 2, delete: true }]);
    await a.commit(del);
    assert.equal(await codeOf(a.commit(del)), 'OK');
    assert.equal(await codeOf(a.commit(CommitBatch.tryNew('c2', 0, [{ scope: X, previous: null, next: 1, head: b('h') }]))), 'INVALID');
    assert.equal(await codeOf(a.commit(CommitBatch.tryNew('c3', 0, [{ scope: X, previous: 2, next: 3, head: b('h') }]))), 'CONFLICT');
  });
});

// ---- a model-based test: random batches against a plain model ----

interface ModelScope {
  version: number;
  commitId: string;
  head: string;
  first: number;
  rows: string[];
  deleted: boolean;
  history: string[]; // `${version}/${commitId}`
}

const KINDS: ScopeKind[] = ['session', 'record'];
const NAMES = ['a', 'b', '\u{1F600}', '\uFF61'];

type UpdatePlan = {
  scope: number;
  choice: 'create' | 'update' | 'delete';
  stale: number | null; // a wrong previous instead of the model's, when not null
  head: string | null;
  append: string[];
  truncateAfter: number | null;
  dropBefore: number | null;
};
type Op =
  | { op: 'commit'; updates: UpdatePlan[] }
  | { op: 'retry'; which: number }
  | { op: 'read'; scope: number; from: number; limit: number }
  | { op: 'list'; kind: number; after: number | null; limit: number };

const scopeCount = KINDS.length * NAMES.length;
const scopeAt = (i: number): ScopeRef => ({ kind: KINDS[Math.floor(i / NAMES.length)] as ScopeKind, name: NAMES[i % NAMES.length] as string });

const updatePlan: fc.Arbitrary<UpdatePlan> = fc.record({
  scope: fc.integer({ min: 0, max: scopeCount - 1 }),
  choice: fc.constantFrom('create', 'update', 'update', 'update', 'delete'),
  stale: fc.option(fc.integer({ min: 1, max: 6 }), { freq: 6 }),
  head: fc.option(fc.string({ maxLength: 3 }), { freq: 2 }),
  append: fc.array(fc.string({ maxLength: 3 }), { maxLength: 3 }),
  truncateAfter: fc.option(fc.integer({ min: 0, max: 8 }), { freq: 3 }),
  dropBefore: fc.option(fc.integer({ min: 0, max: 8 }), { freq: 3 }),
});

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ op: fc.constant('commit' as const), updates: fc.uniqueArray(updatePlan, { minLength: 1, maxLength: 3, selector: (u) => u.scope }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('retry' as const), which: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('read' as const), scope: fc.integer({ min: 0, max: scopeCount - 1 }), from: fc.integer({ min: 0, max: 10 }), limit: fc.integer({ min: 0, max: 4 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('list' as const), kind: fc.integer({ min: 0, max: KINDS.length - 1 }), after: fc.option(fc.integer({ min: 0, max: NAMES.length - 1 })), limit: fc.integer({ min: 1, max: 3 }) }) },
);

function modelCommit(model: Map<number, ModelScope>, batch: { commitId: string; plans: { index: number; update: ScopeUpdate }[] }): string {
  for (const { index, update } of batch.plans) if (model.get(index)?.history.includes(`${update.next}/${batch.commitId}`)) return 'OK';
  for (const { index, update } of batch.plans) {
    const s = model.get(index);
    if (update.previous === null && s?.deleted) return 'INVALID';
    const current = s === undefined || s.deleted ? null : s.version;
    if (current !== update.previous) return 'CONFLICT';
    if (s !== undefined && update.truncateAfter !== undefined && update.truncateAfter < s.first) return 'INVALID';
  }
  const text = (u: Uint8Array): string => Buffer.from(u).toString();
  for (const { index, update: u } of batch.plans) {
    let s = model.get(index);
    if (s === undefined) {
      s = { version: 1, commitId: batch.commitId, head: text(u.head as Uint8Array), first: 0, rows: (u.append ?? []).map(text), deleted: false, history: [] };
      model.set(index, s);
    } else if (u.delete) {
      s.deleted = true;
    } else {
      const end = () => s!.first + s!.rows.length;
      if (u.truncateAfter !== undefined && u.truncateAfter < end()) s.rows = s.rows.slice(0, u.truncateAfter - s.first);
      if (u.dropBefore !== undefined) {
        const newFirst = Math.min(Math.max(u.dropBefore, s.first), end());
        s.rows = s.rows.slice(newFirst - s.first);
        s.first = newFirst;
      }
      s.rows.push(...(u.append ?? []).map(text));
      if (u.head !== undefined) s.head = text(u.head);
    }
    s.version = u.next;
    s.commitId = batch.commitId;
    s.history.push(`${u.next}/${batch.commitId}`);
  }
  return 'OK';
}

function toUpdate(plan: UpdatePlan, model: Map<number, ModelScope>): ScopeUpdate | null {
  const s = model.get(plan.scope);
  const scope = scopeAt(plan.scope);
  const current = s === undefined || s.deleted ? null : s.version;
  if (plan.choice === 'create') {
    if (plan.stale !== null) return null;
    return { scope, previous: null, next: 1, head: b(plan.head ?? ''), append: plan.append.map(b) };
  }
  const previous = plan.stale ?? current ?? 1;
  if (plan.choice === 'delete') return { scope, previous, next: previous + 1, delete: true };
  const u: ScopeUpdate = { scope, previous, next: previous + 1, append: plan.append.map(b) };
  if (plan.head !== null) u.head = b(plan.head);
  if (plan.truncateAfter !== null) u.truncateAfter = plan.truncateAfter;
  if (plan.dropBefore !== null) u.dropBefore = plan.dropBefore;
  return u;
}

test('model: random batches, retries, reads and listings agree with a plain model', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 40 }), async (ops) => {
      const realm = new MemoryHostRealm();
      const writer = realm.open();
      const reader = realm.open();
      const model = new Map<number, ModelScope>();
      const sent: { batch: CommitBatch; plans: { index: number; update: ScopeUpdate }[] }[] = [];
      let n = 0;
      for (const op of ops) {
        if (op.op === 'commit' || op.op === 'retry') {
          let entry = op.op === 'retry' ? sent[op.which % Math.max(1, sent.length)] : undefined;
          if (op.op === 'commit') {
            const plans = op.updates.flatMap((p) => {
              const update = toUpdate(p, model);
              return update === null ? [] : [{ index: p.scope, update }];
            });
            if (plans.length === 0) continue;
            entry = { batch: CommitBatch.tryNew(`c${n++}`, 0, plans.map((p) => p.update)), plans };
            sent.push(entry);
          }
          if (entry === undefined) continue;
          const expected = modelCommit(model, { commitId: entry.batch.commitId, plans: entry.plans });
          assert.equal(await codeOf(writer.commit(entry.batch)), expected, `commit ${entry.batch.commitId}`);
        } else if (op.op === 'read') {
          const s = model.get(op.scope);
          const got = await codeOf(reader.readRows(scopeAt(op.scope), op.from, op.limit));
          if (s === undefined || s.deleted) {
            assert.deepEqual(await reader.readRows(scopeAt(op.scope), op.from, op.limit), []);
          } else if (op.from < s.first) {
            assert.equal(got, 'INVALID');
          } else {
            const rows = await reader.readRows(scopeAt(op.scope), op.from, op.limit);
            const expected = s.rows.slice(op.from - s.first, op.from - s.first + op.limit).map((data, i) => [op.from + i, data]);
            assert.deepEqual(rows.map((r) => [r.index, Buffer.from(r.data).toString()]), expected);
          }
        } else {
          const kind = KINDS[op.kind] as ScopeKind;
          const after = op.after === null ? null : (NAMES[op.after] as string);
          const visible = [...model.entries()]
            .filter(([i, s]) => !s.deleted && scopeAt(i).kind === kind)
            .map(([i, s]) => ({ name: scopeAt(i).name, s }))
            .filter(({ name }) => after === null || utf8Order(name, after) > 0)
            .sort((x, y) => utf8Order(x.name, y.name));
          const page = await reader.listHeads(kind, after, op.limit);
          const taken = visible.slice(0, op.limit);
          assert.deepEqual(
            page.heads.map((h) => [h.name, h.head.version, h.head.commitId, Buffer.from(h.head.head).toString()]),
            taken.map(({ name, s }) => [name, s.version, s.commitId, s.head]),
          );
          assert.equal(page.next, visible.length > op.limit ? (taken[taken.length - 1]?.name ?? null) : null);
        }
      }
      // Every scope's head agrees at the end.
      for (let i = 0; i < scopeCount; i++) {
        const s = model.get(i);
        const head = await reader.loadHead(scopeAt(i));
        if (s === undefined || s.deleted) assert.equal(head, null);
        else assert.deepEqual([head?.version, head?.commitId, Buffer.from(head?.head ?? []).toString()], [s.version, s.commitId, s.head]);
      }
    }),
    { numRuns: 300 },
  );
});
