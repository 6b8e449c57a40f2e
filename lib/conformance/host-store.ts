// Conformance: the host store chapter of the Host Store SPI (docs/contracts/host-store.md, section 12), for node:test.
//
// Owns: `hostStoreConformance(makeFactory, options?)`, which registers one node:test `describe`
// block with a test for each row of the contract's conformance chapter, the limits, every INVALID case
// and each obligation a test can observe. Guarantees: it speaks to a store only through the six
// HostStore operations plus the factory below, so any store (the memory reference store, the fs
// store, a user's) runs it unchanged; where an obligation may be met at commit or at load it
// accepts both; no test asserts a timing (a "deadline" only bounds how long progress may take).
//
// The factory. `makeFactory()` is called once per test and answers a HostStoreFactory over a NEW,
// EMPTY realm:
// - `open()`: a new process's handle over that realm, holding nothing of the handles before it
//   (for an on-disk store: a fresh open of the same directory, as another process would).
// - `lapseFenceLeases()`: lets every lease recorded so far run out (advance the store's clock, or wait).
// - `kill(handle)`: kills the process behind `handle`: the handle is dropped with any commit it has in
//   flight, each of which lands wholly or never. The suite never uses a killed handle again, and
//   never relies on the killed commits' promises settling.
// - `stallCommits(handle)`: arms a stall that holds the NEXT commit `handle` starts in flight (after
//   it was accepted as well formed, before its answer); `reached` resolves once that commit is held;
//   `release()` lets it go on (and disarms the stall if no commit was held). Commits started while
//   one is held are not stalled. Where it is held (before or after its commit point) is the
//   factory's choice: the suite treats the outcome as unknown.
// - `close(handle)` (optional): closes a live handle at the end of a test or when a test closes one.
// - `cleanup()` (optional): called once at the end of each test, after every close.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isIndex } from '../assert.js';
import { CommitBatch } from '../host/batch.js';
import type { HostStoreErrorCode } from '../host/errors.js';
import {
  MAX_BATCH_BYTES,
  MAX_COMMIT_ID_BYTES,
  MAX_ROW_BYTES,
  MAX_SCOPE_NAME_BYTES,
  SCOPE_KINDS,
  type HostStore,
  type ScopeKind,
  type ScopeRef,
  type ScopeUpdate,
  type VersionedHead,
} from '../host/types.js';

/** A commit held in flight by `HostStoreFactory.stallCommits`. */
export interface HostStoreStall {
  /** Resolves once the stalled commit is held. */
  readonly reached: Promise<void>;
  /** Lets the held commit go on; disarms the stall if none was held yet. */
  release(): void | Promise<void>;
}

/** Everything the suite needs of one realm (see the top of this file). */
export interface HostStoreFactory<H extends HostStore = HostStore> {
  open(): H | Promise<H>;
  lapseFenceLeases(): void | Promise<void>;
  kill(handle: H): void | Promise<void>;
  stallCommits(handle: H): HostStoreStall | Promise<HostStoreStall>;
  close?(handle: H): void | Promise<void>;
  cleanup?(): void | Promise<void>;
}

export interface HostStoreConformanceOptions {
  /** The title of the describe block (default 'host store conformance'). */
  name?: string;
  /** How many scopes commit at once in the independence test (default and minimum 200). */
  concurrentScopes?: number;
  /** How long any one step may take to make progress before the test fails (default 60 s). */
  progressDeadlineMs?: number;
}

interface Settings {
  concurrentScopes: number;
  deadline: number;
}

/** Registers the host store chapter under node:test. Call it at the top level of a test file. */
export function hostStoreConformance<H extends HostStore>(
  makeFactory: () => HostStoreFactory<H> | Promise<HostStoreFactory<H>>,
  options: HostStoreConformanceOptions = {},
): void {
  const settings: Settings = {
    concurrentScopes: Math.max(200, options.concurrentScopes ?? 200),
    deadline: options.progressDeadlineMs ?? 60_000,
  };
  const make = makeFactory as unknown as () => HostStoreFactory | Promise<HostStoreFactory>;
  describe(options.name ?? 'host store conformance', () => {
    for (const [title, body] of CASES) {
      test(title, async () => {
        const realm = new Realm(await make(), settings);
        try {
          await body(realm, settings);
        } finally {
          await realm.dispose();
        }
      });
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Harness

class Realm {
  readonly #factory: HostStoreFactory;
  readonly #settings: Settings;
  readonly #live = new Set<HostStore>();
  readonly #stalls: HostStoreStall[] = [];

  constructor(factory: HostStoreFactory, settings: Settings) {
    this.#factory = factory;
    this.#settings = settings;
  }

  async open(): Promise<HostStore> {
    const handle = await this.#factory.open();
    this.#live.add(handle);
    return handle;
  }

  async lapse(): Promise<void> {
    await this.#factory.lapseFenceLeases();
  }

  async kill(handle: HostStore): Promise<void> {
    assert.ok(this.#live.delete(handle), 'the suite kills only live handles');
    await this.#factory.kill(handle);
  }

  async close(handle: HostStore): Promise<void> {
    assert.ok(this.#live.delete(handle), 'the suite closes only live handles');
    await this.#factory.close?.(handle);
  }

  async stall(handle: HostStore): Promise<HostStoreStall> {
    const stall = await this.#factory.stallCommits(handle);
    this.#stalls.push(stall);
    return stall;
  }

  /** A handle that holds the fence (exclusive acquire on a realm without a live holder). */
  async writer(): Promise<{ store: HostStore; token: number }> {
    const store = await this.open();
    const grant = await within(store.acquireFence('exclusive'), this.#settings.deadline, 'acquireFence');
    return { store, token: grant.token };
  }

  async dispose(): Promise<void> {
    for (const stall of this.#stalls) await stall.release();
    for (const handle of this.#live) await this.#factory.close?.(handle);
    this.#live.clear();
    await this.#factory.cleanup?.();
  }
}

type Case = [string, (realm: Realm, settings: Settings) => Promise<void>];

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const noop = (): void => {};

function b(text: string): Uint8Array {
  return encoder.encode(text);
}

function text(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

function ref(kind: ScopeKind, name: string): ScopeRef {
  return { kind, name };
}

function batch(commitId: string, token: number, updates: ScopeUpdate[]): CommitBatch {
  return CommitBatch.tryNew(commitId, token, updates);
}

function create(scope: ScopeRef, head: string | Uint8Array, rows: (string | Uint8Array)[] = []): ScopeUpdate {
  return { scope, previous: null, next: 1, head: toBytes(head), append: rows.map(toBytes) };
}

function update(scope: ScopeRef, previous: number, parts: Partial<Omit<ScopeUpdate, 'scope' | 'previous' | 'next'>> = {}): ScopeUpdate {
  return { scope, previous, next: previous + 1, ...parts };
}

function rowsOf(...rows: string[]): Uint8Array[] {
  return rows.map(b);
}

function toBytes(value: string | Uint8Array): Uint8Array {
  return typeof value === 'string' ? b(value) : value;
}

/** Deterministic bytes (xorshift32) for byte-exact checks of large payloads. */
function pattern(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  let x = seed | 0 || 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

function sameBytes(actual: unknown, expected: Uint8Array, what: string): void {
  assert.ok(actual instanceof Uint8Array, `${what}: expected a Uint8Array`);
  assert.equal(actual.length, expected.length, `${what}: length`);
  const a = Buffer.from(actual.buffer, actual.byteOffset, actual.length);
  assert.ok(a.equals(expected), `${what}: bytes differ`);
}

function utf8Order(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** Fails the test if `promise` does not settle within `ms`. Not a timing assertion: a bound on progress. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} made no progress within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

type Outcome = { ok: true } | { ok: false; code: string; error: unknown };

async function outcome(promise: Promise<unknown>): Promise<Outcome> {
  try {
    await promise;
    return { ok: true };
  } catch (error) {
    return { ok: false, code: String((error as { code?: unknown } | null)?.code), error };
  }
}

interface CodedError {
  code: HostStoreErrorCode;
  scope?: ScopeRef;
  current?: number | null;
  holder?: string;
  remaining?: number;
  token?: number;
}

async function rejects(promise: Promise<unknown> | (() => unknown), codes: HostStoreErrorCode[], what: string): Promise<CodedError> {
  let error: unknown;
  try {
    await (typeof promise === 'function' ? promise() : promise);
  } catch (err) {
    error = err;
  }
  assert.ok(error !== undefined, `${what}: expected a rejection with ${codes.join(' or ')}, but it succeeded`);
  assert.ok(error instanceof Error, `${what}: expected an Error, got ${String(error)}`);
  const code = (error as { code?: unknown }).code;
  assert.ok(codes.includes(code as HostStoreErrorCode), `${what}: expected ${codes.join(' or ')}, got ${String(code)} (${error.message})`);
  return error as unknown as CodedError;
}

/** Every row of `scope` from `from` on, read in pages of `page`. */
async function rowsFrom(store: HostStore, scope: ScopeRef, from: number, page = 1000): Promise<{ index: number; data: Uint8Array }[]> {
  const out: { index: number; data: Uint8Array }[] = [];
  for (;;) {
    const rows = await store.readRows(scope, from + out.length, page);
    assert.ok(rows.length <= page, 'readRows answers at most limit rows');
    if (rows.length === 0) return out;
    out.push(...rows);
  }
}

/** What a store shows of one scope: head and rows (as text) from a known first index. */
interface Seen {
  version: number;
  commitId: string;
  head: string;
  rows: string[];
}

async function see(store: HostStore, scope: ScopeRef, first = 0): Promise<Seen | null> {
  const head = await store.loadHead(scope);
  if (head === null) {
    assert.deepEqual(await store.readRows(scope, first, 10), [], 'a scope that does not exist has no rows');
    return null;
  }
  const rows = await rowsFrom(store, scope, first);
  rows.forEach((row, i) => assert.equal(row.index, first + i, `row indices of ${scope.name} are consecutive from ${first}`));
  return { version: head.version, commitId: head.commitId, head: text(head.head), rows: rows.map((r) => text(r.data)) };
}

async function expectSeen(stores: HostStore[], scope: ScopeRef, expected: Seen | null, what: string, first = 0): Promise<void> {
  for (const [i, store] of stores.entries()) assert.deepEqual(await see(store, scope, first), expected, `${what} (loader ${i})`);
}

/** Every visible name of `kind`, paging with `limit`; checks the paging rules on the way. */
async function listAll(store: HostStore, kind: ScopeKind, limit: number): Promise<{ name: string; head: VersionedHead }[]> {
  const out: { name: string; head: VersionedHead }[] = [];
  let after: string | null = null;
  for (let pages = 0; ; pages++) {
    assert.ok(pages < 100_000, 'listing ends');
    const page = await store.listHeads(kind, after, limit);
    assert.ok(page.heads.length <= limit, 'a page holds at most limit heads');
    out.push(...page.heads);
    if (page.next === null) return out;
    const last = page.heads[page.heads.length - 1];
    assert.ok(last !== undefined, 'a page with a next holds at least one head');
    assert.equal(page.next, last.name, 'next names the last name returned');
    after = page.next;
  }
}

async function listedNames(store: HostStore, kind: ScopeKind, limit = 1000): Promise<string[]> {
  return (await listAll(store, kind, limit)).map((h) => h.name);
}

/**
 * Whether batch `landed` shows in every scope it touches, to every loader, or in none: answers
 * true or false, failing when a loader sees part of it or loaders disagree. `before` and `after`
 * are what each scope shows without and with the batch.
 */
async function wholeOrNone(
  loaders: HostStore[],
  scopes: { scope: ScopeRef; before: Seen | null; after: Seen | null }[],
  what: string,
): Promise<boolean> {
  let verdict: boolean | undefined;
  for (const [i, store] of loaders.entries()) {
    for (const { scope, before, after } of scopes) {
      const seen = await see(store, scope);
      let shows: boolean;
      if (isDeepEqual(seen, after)) shows = true;
      else if (isDeepEqual(seen, before)) shows = false;
      else assert.fail(`${what}: loader ${i} sees ${scope.kind}/${scope.name} as ${JSON.stringify(seen)}, neither with nor without the batch`);
      if (verdict === undefined) verdict = shows;
      assert.equal(shows, verdict, `${what}: loader ${i} sees the batch in part (${scope.name}) or loaders disagree`);
    }
  }
  return verdict === true;
}

function isDeepEqual(a: unknown, b: unknown): boolean {
  try {
    assert.deepEqual(a, b);
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------
// The chapter's rows

const CASES: Case[] = [];
const row = (title: string, body: Case[1]): void => {
  CASES.push([title, body]);
};

row('acquire on an empty realm: an exclusive acquire supersedes no lease', async (realm) => {
  const a = await realm.open();
  for (const kind of SCOPE_KINDS) assert.deepEqual(await a.listHeads(kind, null, 10), { heads: [], next: null });
  assert.equal(await a.loadHead(ref('session', 'nobody')), null);
  assert.deepEqual(await a.readRows(ref('session', 'nobody'), 0, 10), [], 'a scope that does not exist has no rows');
  assert.deepEqual(await a.readRows(ref('record', 'nobody'), 12, 10), []);
  const grant = await a.acquireFence('exclusive');
  assert.ok(isIndex(grant.token), 'a token is a safe non-negative integer');
  assert.equal(grant.supersededLease, 0);
});

row('fence: tokens grow across acquires and processes; HELD names the live holder', async (realm) => {
  const a = await realm.open();
  const lease = a.fenceTiming().lease;
  const g1 = await a.acquireFence('exclusive');
  const b2 = await realm.open();
  const held = await rejects(b2.acquireFence('exclusive'), ['HELD'], 'exclusive acquire over a live holder');
  assert.equal(held.token, g1.token, 'HELD carries the holder token');
  assert.equal(typeof held.holder, 'string');
  assert.ok(typeof held.remaining === 'number' && held.remaining > 0 && held.remaining <= lease, `HELD remaining ${held.remaining} is within the lease`);
  // Core recognises its own recorded lease by the token HELD answers.
  const own = await rejects(a.acquireFence('exclusive'), ['HELD'], 'exclusive re-acquire by the holder');
  assert.equal(own.token, g1.token);
  const g2 = await b2.acquireFence('takeover');
  assert.ok(g2.token > g1.token, 'a takeover answers a higher token');
  assert.ok(g2.supersededLease > 0 && g2.supersededLease <= lease, `supersededLease ${g2.supersededLease} is what remained of a live lease`);
  const c = await realm.open();
  const g3 = await c.acquireFence('takeover');
  assert.ok(g3.token > g2.token);
  await realm.lapse();
  const d = await realm.open();
  const g4 = await d.acquireFence('takeover');
  assert.ok(g4.token > g3.token);
  assert.equal(g4.supersededLease, 0, 'a takeover of a lapsed lease supersedes nothing live');
  await realm.lapse();
  const g5 = await (await realm.open()).acquireFence('exclusive');
  assert.ok(g5.token > g4.token);
  assert.equal(g5.supersededLease, 0);
});

row('reopen: a new process loads heads, versions, commit ids and rows', async (realm) => {
  const { store: a, token } = await realm.writer();
  const X = ref('session', 'reopen/session ✓ ../x');
  const Y = ref('record', 'reopen:record');
  const Z = ref('mob', 'reopen mob');
  await a.commit(batch('reopen-1', token, [create(X, 'x1', ['r0', 'r1', 'r2']), create(Y, 'y1')]));
  await a.commit(batch('reopen-2', token, [update(X, 1, { head: b('x2'), append: rowsOf('r3') }), create(Z, 'z1', ['z0'])]));
  await a.commit(batch('reopen-3', token, [update(Y, 1, { append: rowsOf('y0', 'y1') })]));
  const expected: [ScopeRef, Seen][] = [
    [X, { version: 2, commitId: 'reopen-2', head: 'x2', rows: ['r0', 'r1', 'r2', 'r3'] }],
    [Y, { version: 2, commitId: 'reopen-3', head: 'y1', rows: ['y0', 'y1'] }],
    [Z, { version: 1, commitId: 'reopen-2', head: 'z1', rows: ['z0'] }],
  ];
  const check = async (store: HostStore, what: string): Promise<void> => {
    for (const [scope, seen] of expected) await expectSeen([store], scope, seen, `${what}: ${scope.name}`);
    assert.deepEqual(await listedNames(store, 'session'), [X.name]);
    assert.deepEqual(await listedNames(store, 'record'), [Y.name]);
    assert.deepEqual(await listedNames(store, 'mob'), [Z.name]);
    assert.deepEqual(await listedNames(store, 'identity'), []);
  };
  await check(a, 'the writer');
  const b2 = await realm.open();
  await check(b2, 'a process opened while the writer lives');
  await realm.close(a);
  const c = await realm.open();
  await check(c, 'a process opened after the writer closed');
  await check(b2, 'the earlier reader');
});

for (const when of ['before', 'during', 'after'] as const) {
  row(`kill ${when} a batch over two scopes: the next writer sees it in both or neither, and settles it`, async (realm, settings) => {
    const { store: a, token } = await realm.writer();
    const X = ref('session', `kill-${when}-x`);
    const Y = ref('mob', `kill-${when}-y`);
    await a.commit(batch(`kill-${when}-setup`, token, [create(X, 'x1', ['x-row-0']), create(Y, 'y1')]));
    const B = batch(`kill-${when}-batch`, token, [
      update(X, 1, { head: b('x2'), append: rowsOf('x-row-1', 'x-row-2') }),
      update(Y, 1, { head: b('y2'), append: rowsOf('y-row-0') }),
    ]);
    const without = {
      x: { version: 1, commitId: `kill-${when}-setup`, head: 'x1', rows: ['x-row-0'] },
      y: { version: 1, commitId: `kill-${when}-setup`, head: 'y1', rows: [] },
    };
    const withB = {
      x: { version: 2, commitId: B.commitId, head: 'x2', rows: ['x-row-0', 'x-row-1', 'x-row-2'] },
      y: { version: 2, commitId: B.commitId, head: 'y2', rows: ['y-row-0'] },
    };
    const scopes = [
      { scope: X, before: without.x, after: withB.x },
      { scope: Y, before: without.y, after: withB.y },
    ];
    if (when === 'after') await a.commit(B);
    if (when === 'during') {
      const stall = await realm.stall(a);
      a.commit(B).catch(noop);
      await within(stall.reached, settings.deadline, 'the stalled commit');
      await realm.kill(a);
      await stall.release();
    } else {
      await realm.kill(a);
    }
    // A load from a new process before anyone acquires fixes the dead writer's batch for good: the
    // loads after the next acquire must show it the same way.
    const early = await wholeOrNone([await realm.open()], scopes, `kill ${when}, a load before the next acquire`);
    // The next process waits out the dead writer's lease, then acquires.
    const next = await realm.open();
    await realm.lapse();
    const grant = await next.acquireFence('exclusive');
    assert.ok(grant.token > token);
    assert.equal(grant.supersededLease, 0, 'a lapsed lease is not live');
    const landed = await wholeOrNone([next, await realm.open()], scopes, `kill ${when}`);
    assert.equal(landed, early, `kill ${when}: a load before the next acquire showed the batch ${early ? '' : 'not '}landed, the loads after it ${landed ? '' : 'not '}landed`);
    if (when === 'before') assert.equal(landed, false, 'a batch never sent is not visible');
    if (when === 'after') assert.equal(landed, true, 'an acknowledged batch survives the kill');
    // Settle the way Core does: the head's commit id tells whether the batch landed; then the next
    // writer commits the next version on what it loaded.
    const base = landed ? 2 : 1;
    const settle = batch(`kill-${when}-settle`, grant.token, [
      update(X, base, { head: b('x-next'), append: rowsOf('x-next-row') }),
      update(Y, base, { head: b('y-next') }),
    ]);
    await next.commit(settle);
    const settled = {
      x: { version: base + 1, commitId: settle.commitId, head: 'x-next', rows: [...(landed ? withB.x : without.x).rows, 'x-next-row'] },
      y: { version: base + 1, commitId: settle.commitId, head: 'y-next', rows: (landed ? withB.y : without.y).rows },
    };
    // The dead writer's batch, sent again by anyone, never acts again nor beats the settled state.
    const retry = await outcome((await realm.open()).commit(B));
    if (!retry.ok) assert.ok(['FENCED_OUT', 'CONFLICT'].includes(retry.code), `a stale retry answers ${retry.code}`);
    const loaders = [next, await realm.open()];
    await expectSeen(loaders, X, settled.x, 'after settling');
    await expectSeen(loaders, Y, settled.y, 'after settling');
  });
}

row('stale fence: the current holder renews even after its lease lapsed, and the renew records a lease', async (realm) => {
  const { store: a, token } = await realm.writer();
  await realm.lapse();
  await a.renewFence(token);
  const held = await rejects((await realm.open()).acquireFence('exclusive'), ['HELD'], 'exclusive acquire after the renew');
  assert.equal(held.token, token);
  await a.renewFence(token);
  // The holder's commits go on with its token after the renew.
  await a.commit(batch('renewed', token, [create(ref('record', 'after-renew'), 'ok')]));
  assert.equal((await (await realm.open()).loadHead(ref('record', 'after-renew')))?.commitId, 'renewed');
});

row('stale fence: a superseded writer can neither keep the fence nor make a batch visible', async (realm) => {
  const { store: a, token: old } = await realm.writer();
  const X = ref('session', 'stale-x');
  const Y = ref('identity', 'stale-y');
  await a.commit(batch('stale-setup', old, [create(X, 'x1', ['r0'])]));
  const b2 = await realm.open();
  const grant = await b2.acquireFence('takeover');
  assert.ok(grant.token > old);
  const fenced = await rejects(a.renewFence(old), ['FENCED_OUT'], 'renew of a superseded token');
  assert.ok(typeof fenced.current === 'number' && fenced.current >= grant.token, 'FENCED_OUT names the current token');
  await rejects(a.acquireFence('exclusive'), ['HELD'], 'an exclusive acquire by the superseded writer');
  // Its batches never become visible, whether refused at commit (FENCED_OUT) or hidden at load.
  for (const stale of [
    batch('stale-update', old, [update(X, 1, { head: b('x-stale'), append: rowsOf('stale-row') })]),
    batch('stale-create', old, [create(Y, 'y-stale')]),
    batch('stale-both', old, [update(X, 1, { truncateAfter: 0 }), create(ref('mob', 'stale-z'), 'z')]),
  ]) {
    const result = await outcome(a.commit(stale));
    if (!result.ok) assert.equal(result.code, 'FENCED_OUT', `a stale commit answers ${result.code}`);
  }
  const loaders = [b2, await realm.open(), a];
  await expectSeen(loaders, X, { version: 1, commitId: 'stale-setup', head: 'x1', rows: ['r0'] }, 'the superseded writer changed nothing');
  await expectSeen(loaders, Y, null, 'the superseded writer created nothing');
  for (const store of loaders) {
    assert.deepEqual(await listedNames(store, 'identity'), []);
    assert.deepEqual(await listedNames(store, 'mob'), []);
  }
  // The new holder commits the same version without meeting the stale batches.
  await b2.commit(batch('fresh-update', grant.token, [update(X, 1, { head: b('x-fresh') })]));
  await expectSeen([await realm.open()], X, { version: 2, commitId: 'fresh-update', head: 'x-fresh', rows: ['r0'] }, 'the new holder');
});

row('stale fence: an exclusive acquire waits out a live holder lease and no longer', async (realm) => {
  const a = await realm.open();
  const lease = a.fenceTiming().lease;
  const g1 = await a.acquireFence('exclusive');
  const b2 = await realm.open();
  const held = await rejects(b2.acquireFence('exclusive'), ['HELD'], 'exclusive acquire over a live holder');
  assert.equal(held.token, g1.token);
  assert.ok(typeof held.remaining === 'number' && held.remaining > 0 && held.remaining <= lease);
  await realm.lapse();
  const g2 = await b2.acquireFence('exclusive');
  assert.ok(g2.token > g1.token);
  assert.equal(g2.supersededLease, 0);
  await rejects(a.renewFence(g1.token), ['FENCED_OUT'], 'the lapsed holder renews after a new acquire');
  await b2.renewFence(g2.token);
});

row('stale fence: renewing a token never issued, or not a token, is refused', async (realm) => {
  const a = await realm.open();
  const { token } = await a.acquireFence('exclusive');
  await rejects(a.renewFence(token + 1000), ['INVALID', 'FENCED_OUT'], 'renew of a token never issued');
  for (const bad of [-1, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 1, '1' as unknown as number]) {
    await rejects(a.renewFence(bad), ['INVALID'], `renewFence(${String(bad)})`);
  }
  await rejects(a.acquireFence('shared' as never), ['INVALID'], 'acquireFence with an unknown mode');
  await a.renewFence(token);
});

row('takeover with a commit in flight: the old writer batch shows wholly or never, the same to every load', async (realm, settings) => {
  const { store: a, token: old } = await realm.writer();
  const X = ref('session', 'takeover-x');
  const Y = ref('record', 'takeover-y');
  await a.commit(batch('takeover-setup', old, [create(X, 'x1', ['x0']), create(Y, 'y1')]));
  const B = batch('takeover-inflight', old, [
    update(X, 1, { head: b('x-old'), append: rowsOf('x-old-row') }),
    update(Y, 1, { head: b('y-old'), append: rowsOf('y-old-row') }),
  ]);
  const stall = await realm.stall(a);
  const inflight = outcome(a.commit(B));
  await within(stall.reached, settings.deadline, 'the stalled commit');
  const b2 = await realm.open();
  const acquiring = b2.acquireFence('takeover');
  acquiring.catch(noop);
  // Released before the acquire is awaited: a store may let an acquire wait for commits in flight.
  await stall.release();
  const grant = await within(acquiring, settings.deadline, 'the takeover');
  assert.ok(grant.token > old);
  const result = await within(inflight, settings.deadline, 'the released commit');
  const before = {
    x: { version: 1, commitId: 'takeover-setup', head: 'x1', rows: ['x0'] },
    y: { version: 1, commitId: 'takeover-setup', head: 'y1', rows: [] },
  };
  const after = {
    x: { version: 2, commitId: B.commitId, head: 'x-old', rows: ['x0', 'x-old-row'] },
    y: { version: 2, commitId: B.commitId, head: 'y-old', rows: ['y-old-row'] },
  };
  const scopes = [
    { scope: X, before: before.x, after: after.x },
    { scope: Y, before: before.y, after: after.y },
  ];
  const landed = await wholeOrNone([b2, await realm.open(), a], scopes, 'the in-flight batch');
  if (!result.ok) {
    assert.ok(['FENCED_OUT', 'CONFLICT', 'INDETERMINATE', 'UNAVAILABLE'].includes(result.code), `the in-flight commit answered ${result.code}`);
    if (result.code !== 'INDETERMINATE') assert.equal(landed, false, `a commit answered ${result.code} applied nothing`);
  }
  const base = landed ? 2 : 1;
  const mine = batch('takeover-new', grant.token, [update(X, base, { head: b('x-new') }), update(Y, base, { head: b('y-new') })]);
  await b2.commit(mine);
  // The old writer retries its batch and tries the next version: neither becomes visible.
  const retry = await outcome(a.commit(B));
  if (!retry.ok) assert.ok(['FENCED_OUT', 'CONFLICT'].includes(retry.code), `the old writer retry answered ${retry.code}`);
  const late = await outcome(a.commit(batch('takeover-late', old, [update(X, base + 1, { head: b('x-late') })])));
  if (!late.ok) assert.equal(late.code, 'FENCED_OUT', `the old writer late commit answered ${late.code}`);
  const expectX = { version: base + 1, commitId: 'takeover-new', head: 'x-new', rows: (landed ? after : before).x.rows };
  const expectY = { version: base + 1, commitId: 'takeover-new', head: 'y-new', rows: (landed ? after : before).y.rows };
  const loaders = [b2, await realm.open(), await realm.open()];
  await expectSeen(loaders, X, expectX, 'after the takeover');
  await expectSeen(loaders, Y, expectY, 'after the takeover');
});

row('same version twice: every load resolves two concurrent batches one way; the loser is invisible in all its scopes', async (realm) => {
  const { store: a, token } = await realm.writer();
  const X = ref('session', 'twice-x');
  const Y = ref('mob', 'twice-y');
  const Z = ref('record', 'twice-z');
  await a.commit(batch('twice-setup', token, [create(X, 'x1', ['x0']), create(Y, 'y1'), create(Z, 'z1')]));
  const P = batch('twice-p', token, [update(X, 1, { head: b('x-p'), append: rowsOf('p-row') }), update(Y, 1, { head: b('y-p') })]);
  const Q = batch('twice-q', token, [update(X, 1, { head: b('x-q'), append: rowsOf('q-row') }), update(Z, 1, { head: b('z-q') })]);
  const b2 = await realm.open();
  const [p, q] = await Promise.all([outcome(a.commit(P)), outcome(b2.commit(Q))]);
  for (const [name, r] of [
    ['P', p],
    ['Q', q],
  ] as const) {
    if (!r.ok) assert.equal(r.code, 'CONFLICT', `batch ${name} answered ${r.code}`);
  }
  const loaders = [a, b2, await realm.open()];
  const xSeen = await see(loaders[2] as HostStore, X);
  const winner = xSeen?.commitId;
  assert.ok(winner === 'twice-p' || winner === 'twice-q' || (!p.ok && !q.ok && winner === 'twice-setup'), `X shows ${winner}`);
  if (winner === 'twice-p') assert.ok(p.ok, 'a batch answered CONFLICT does not win');
  if (winner === 'twice-q') assert.ok(q.ok, 'a batch answered CONFLICT does not win');
  const x1 = { version: 1, commitId: 'twice-setup', head: 'x1', rows: ['x0'] };
  const expectX =
    winner === 'twice-p'
      ? { version: 2, commitId: 'twice-p', head: 'x-p', rows: ['x0', 'p-row'] }
      : winner === 'twice-q'
        ? { version: 2, commitId: 'twice-q', head: 'x-q', rows: ['x0', 'q-row'] }
        : x1;
  await expectSeen(loaders, X, expectX, 'X');
  await expectSeen(loaders, Y, winner === 'twice-p' ? { version: 2, commitId: 'twice-p', head: 'y-p', rows: [] } : { version: 1, commitId: 'twice-setup', head: 'y1', rows: [] }, 'Y');
  await expectSeen(loaders, Z, winner === 'twice-q' ? { version: 2, commitId: 'twice-q', head: 'z-q', rows: [] } : { version: 1, commitId: 'twice-setup', head: 'z1', rows: [] }, 'Z');

  // One after the other: the second batch for a version that already moved never shows.
  const W = ref('session', 'twice-w');
  await a.commit(batch('twice-w1', token, [create(W, 'w1')]));
  await a.commit(batch('twice-w2a', token, [update(W, 1, { head: b('w2a') })]));
  const second = await outcome(b2.commit(batch('twice-w2b', token, [update(W, 1, { head: b('w2b') }), update(Y, winner === 'twice-p' ? 2 : 1, { head: b('y-w2b') })])));
  if (!second.ok) {
    const err = second.error as CodedError;
    assert.equal(second.code, 'CONFLICT');
    assert.deepEqual(err.scope, W, 'CONFLICT names the scope');
    assert.equal(err.current, 2, 'CONFLICT names its current version');
  }
  await expectSeen(loaders, W, { version: 2, commitId: 'twice-w2a', head: 'w2a', rows: [] }, 'W after a second batch for version 2');
  assert.notEqual((await loaders[2]?.loadHead(Y))?.commitId, 'twice-w2b', 'the losing batch is invisible in its other scope');
  // CONFLICT for a scope that does not exist names current null.
  const missing = await outcome(a.commit(batch('twice-missing', token, [update(ref('record', 'twice-none'), 3, { head: b('n') })])));
  if (!missing.ok) {
    assert.equal(missing.code, 'CONFLICT');
    assert.equal((missing.error as CodedError).current, null);
  }
  assert.equal(await a.loadHead(ref('record', 'twice-none')), null);
});

row('retry: a commit id sent again acts once, from the same handle or a new one', async (realm) => {
  const { store: a, token } = await realm.writer();
  const X = ref('session', 'retry-x');
  const Y = ref('record', 'retry-y');
  const C = batch('retry-create', token, [create(X, 'x1', ['x0', 'x1']), create(Y, 'y1', ['y0'])]);
  await a.commit(C);
  await a.commit(C); // the same handle, a creating batch: Ok, not a second create
  await (await realm.open()).commit(C); // a new process
  const U = batch('retry-update', token, [update(X, 1, { head: b('x2'), append: rowsOf('x2') }), update(Y, 1, { truncateAfter: 0, append: rowsOf('y-new') })]);
  await a.commit(U);
  await a.commit(U);
  await (await realm.open()).commit(U);
  const loaders = [a, await realm.open()];
  await expectSeen(loaders, X, { version: 2, commitId: 'retry-update', head: 'x2', rows: ['x0', 'x1', 'x2'] }, 'X after retries');
  await expectSeen(loaders, Y, { version: 2, commitId: 'retry-update', head: 'y1', rows: ['y-new'] }, 'Y after retries');
  // After the scopes moved on, a retry of an older batch still acts no more (Ok, or refused).
  await a.commit(batch('retry-later', token, [update(X, 2, { append: rowsOf('x3') })]));
  for (const old of [C, U]) {
    const r = await outcome(a.commit(old));
    if (!r.ok) assert.equal(r.code, 'CONFLICT', `a retry of an older batch answered ${r.code}`);
  }
  await expectSeen(loaders, X, { version: 3, commitId: 'retry-later', head: 'x2', rows: ['x0', 'x1', 'x2', 'x3'] }, 'X after old retries');
  await expectSeen(loaders, Y, { version: 2, commitId: 'retry-update', head: 'y1', rows: ['y-new'] }, 'Y after old retries');
  // A deleting batch retried.
  const D = batch('retry-delete', token, [{ scope: Y, previous: 2, next: 3, delete: true }, update(X, 3, { head: b('x4') })]);
  await a.commit(D);
  await a.commit(D);
  await (await realm.open()).commit(D);
  await expectSeen(loaders, Y, null, 'Y after a retried delete');
  await expectSeen(loaders, X, { version: 4, commitId: 'retry-delete', head: 'x4', rows: ['x0', 'x1', 'x2', 'x3'] }, 'X after a retried delete');
});

row('rows keep stable indices through truncation and drops; the parts apply truncate, drop, append, head', async (realm) => {
  const { store: a, token } = await realm.writer();
  const X = ref('mob', 'rows-x');
  const other = await realm.open();
  const both = [a, other];
  let v = 1;
  const step = async (parts: Parameters<typeof update>[2], first: number, expected: Omit<Seen, 'version' | 'commitId'>): Promise<void> => {
    const id = `rows-${v + 1}`;
    await a.commit(batch(id, token, [update(X, v, parts)]));
    v++;
    await expectSeen(both, X, { version: v, commitId: id, ...expected }, `after ${id}`, first);
  };
  await a.commit(batch('rows-1', token, [create(X, 'h1', ['r0', 'r1', 'r2'])]));
  const rows = await a.readRows(X, 0, 10);
  assert.deepEqual(rows.map((r) => r.index), [0, 1, 2], 'a new scope rows start at index 0');
  await step({ truncateAfter: 1, append: rowsOf('a1', 'a2') }, 0, { head: 'h1', rows: ['r0', 'a1', 'a2'] });
  await step({ dropBefore: 1 }, 1, { head: 'h1', rows: ['a1', 'a2'] });
  for (const store of both) {
    await rejects(store.readRows(X, 0, 10), ['INVALID'], 'readRows below the first visible row');
    assert.deepEqual((await store.readRows(X, 2, 10)).map((r) => [r.index, text(r.data)]), [[2, 'a2']]);
    assert.deepEqual(await store.readRows(X, 3, 10), [], 'from at the end');
    assert.deepEqual(await store.readRows(X, 1, 0), [], 'limit 0');
    assert.deepEqual((await store.readRows(X, 1, 1)).map((r) => r.index), [1], 'limit caps');
  }
  await step({ truncateAfter: 7, dropBefore: 0, append: rowsOf('a3') }, 1, { head: 'h1', rows: ['a1', 'a2', 'a3'] });
  await step({ dropBefore: 1 }, 1, { head: 'h1', rows: ['a1', 'a2', 'a3'] });
  // Past the end: every row goes and the end stays.
  await step({ dropBefore: 10, head: b('h2') }, 4, { head: 'h2', rows: [] });
  for (const store of both) {
    await rejects(store.readRows(X, 3, 10), ['INVALID'], 'readRows below the first row after a drop past the end');
    assert.deepEqual(await store.readRows(X, 4, 10), []);
    assert.deepEqual(await store.readRows(X, 100, 10), []);
  }
  await step({ append: rowsOf('a4') }, 4, { head: 'h2', rows: ['a4'] });
  await step({ truncateAfter: 4, dropBefore: 4, append: rowsOf('b4', 'b5'), head: b('h3') }, 4, { head: 'h3', rows: ['b4', 'b5'] });
  // Order: truncate (removes b5), then drop (removes b4), then append (takes 5), then head.
  await step({ truncateAfter: 5, dropBefore: 5, append: rowsOf('c5'), head: b('h4') }, 5, { head: 'h4', rows: ['c5'] });
  await step({ truncateAfter: 5, dropBefore: 9, append: rowsOf('d5', 'd6') }, 5, { head: 'h4', rows: ['d5', 'd6'] });
  // A truncateAfter below the first visible row is INVALID, and nothing of its batch applies.
  const Y = ref('mob', 'rows-y');
  await a.commit(batch('rows-y1', token, [create(Y, 'y1')]));
  await rejects(
    a.commit(batch('rows-bad', token, [update(Y, 1, { head: b('y2') }), update(X, v, { truncateAfter: 4, append: rowsOf('bad') })])),
    ['INVALID'],
    'truncateAfter below the first visible row',
  );
  await expectSeen(both, X, { version: v, commitId: `rows-${v}`, head: 'h4', rows: ['d5', 'd6'] }, 'X after the refused batch', 5);
  await expectSeen(both, Y, { version: 1, commitId: 'rows-y1', head: 'y1', rows: [] }, 'Y after the refused batch');
});

row('rows load in commit order', async (realm) => {
  const { store: a, token } = await realm.writer();
  const X = ref('record', 'order-x');
  await a.commit(batch('order-0', token, [create(X, 'h', ['0-0'])]));
  const expected = ['0-0'];
  for (let i = 1; i <= 20; i++) {
    const rows = [`${i}-0`, `${i}-1`, `${i}-2`];
    await a.commit(batch(`order-${i}`, token, [update(X, i, { append: rowsOf(...rows) })]));
    expected.push(...rows);
  }
  for (const store of [a, await realm.open()]) {
    const rows = await rowsFrom(store, X, 0, 7);
    assert.deepEqual(rows.map((r) => text(r.data)), expected);
    assert.deepEqual(rows.map((r) => r.index), expected.map((_, i) => i));
  }
});

row('removal takes effect with its batch; a deleted scope is neither loaded nor listed', async (realm) => {
  const { store: a, token } = await realm.writer();
  const X = ref('identity', 'remove-x');
  const Y = ref('identity', 'remove-y');
  await a.commit(batch('remove-1', token, [create(X, 'x1', ['x0', 'x1']), create(Y, 'y1', ['y0'])]));
  const D = batch('remove-2', token, [{ scope: X, previous: 1, next: 2, delete: true }, update(Y, 1, { dropBefore: 1, append: rowsOf('y1') })]);
  await a.commit(D);
  const loaders = [a, await realm.open()];
  for (const store of loaders) {
    assert.equal(await store.loadHead(X), null);
    assert.deepEqual(await store.readRows(X, 0, 10), []);
    assert.deepEqual(await listedNames(store, 'identity'), ['remove-y']);
  }
  await expectSeen(loaders, Y, { version: 2, commitId: 'remove-2', head: 'y1', rows: ['y1'] }, 'Y', 1);
  await rejects(a.commit(batch('remove-stale', token, [{ scope: Y, previous: 1, next: 2, delete: true }])), ['CONFLICT'], 'a delete at a stale version');
  await rejects(a.commit(batch('remove-absent', token, [{ scope: ref('identity', 'never'), previous: 1, next: 2, delete: true }])), ['CONFLICT'], 'a delete of a scope that does not exist');
  await rejects(a.commit(batch('remove-again', token, [{ scope: X, previous: 2, next: 3, delete: true }])), ['CONFLICT'], 'a delete of a deleted scope');
  // Core never creates a deleted name again; a store may refuse it (INVALID) or create it anew.
  const again = await outcome(a.commit(batch('remove-recreate', token, [create(X, 'x-new', ['n0']), update(Y, 2, { head: b('y2') })])));
  if (again.ok) {
    await expectSeen(loaders, X, { version: 1, commitId: 'remove-recreate', head: 'x-new', rows: ['n0'] }, 'a re-created scope starts afresh');
    for (const store of loaders) assert.deepEqual(await listedNames(store, 'identity'), ['remove-x', 'remove-y']);
  } else {
    assert.equal(again.code, 'INVALID', `re-creating a deleted name answered ${again.code}`);
    await expectSeen(loaders, X, null, 'a refused re-create applies nothing');
    await expectSeen(loaders, Y, { version: 2, commitId: 'remove-2', head: 'y1', rows: ['y1'] }, 'a refused re-create applies nothing', 1);
  }
});

row('listings page every visible scope once, in the order of their UTF-8 bytes', async (realm) => {
  const { store: a, token } = await realm.writer();
  const names = [
    'a', 'b', 'A', 'Z', 'z', '~', 'a/b', '..', '.', ' lead', 'a b', 'é', 'e\u0301', '中文', 'ｱ', '\uFF61',
    '\u{1F600}', 'a\u{10000}', 'a\uFFFF', 'a\uE000', '\u{10FFFF}', 'x'.repeat(300), '𝒳y', 'name:with:colons', 'aa', 'ab',
  ];
  const sessionNames = ['a', 'ｱ', '\u{1F600}', 'only-session'];
  for (let i = 0; i < names.length; i += 5) {
    const chunk = names.slice(i, i + 5);
    await a.commit(batch(`list-${i}`, token, chunk.map((name, j) => create(ref('record', name), `head-${i + j}`))));
  }
  await a.commit(batch('list-session', token, sessionNames.map((name) => create(ref('session', name), `s-${name}`))));
  await a.commit(batch('list-mob', token, [create(ref('mob', 'm'), 'm')]));
  const expected = [...names].sort(utf8Order);
  const loaders = [a, await realm.open()];
  for (const store of loaders) {
    for (const limit of [1, 2, 3, 7, expected.length, expected.length + 1, 1000]) {
      const listed = await listAll(store, 'record', limit);
      assert.deepEqual(listed.map((h) => h.name), expected, `record listing with limit ${limit}`);
      for (const { name, head } of listed) {
        assert.equal(head.version, 1);
        assert.equal(head.commitId, `list-${Math.floor(names.indexOf(name) / 5) * 5}`);
        assert.equal(text(head.head), `head-${names.indexOf(name)}`);
      }
    }
    const whole = await store.listHeads('record', null, expected.length);
    assert.equal(whole.next, null, 'next is null when nothing sorts after the last name returned');
    const firstPage = await store.listHeads('record', null, expected.length - 1);
    assert.equal(firstPage.next, expected[expected.length - 2], 'next names the last name when more follow');
    assert.deepEqual(await listedNames(store, 'session'), [...sessionNames].sort(utf8Order), 'kinds are separate namespaces');
    assert.deepEqual(await listedNames(store, 'mob'), ['m']);
    assert.deepEqual(await listedNames(store, 'identity'), []);
    // `after` is exclusive and need not name a scope.
    const afterA = await store.listHeads('record', 'a', 2);
    assert.deepEqual(afterA.heads.map((h) => h.name), expected.slice(expected.indexOf('a') + 1, expected.indexOf('a') + 3));
    const afterMissing = await store.listHeads('record', 'a0', 1000);
    assert.deepEqual(afterMissing.heads.map((h) => h.name), expected.filter((n) => utf8Order(n, 'a0') > 0));
    assert.deepEqual(await store.listHeads('record', expected[expected.length - 1] as string, 5), { heads: [], next: null });
  }
  // Deletions and creations show in the listing with their batch.
  await a.commit(batch('list-change', token, [
    { scope: ref('record', 'a'), previous: 1, next: 2, delete: true },
    { scope: ref('record', '\u{1F600}'), previous: 1, next: 2, delete: true },
    create(ref('record', 'a-new'), 'new'),
    update(ref('record', 'b'), 1, { head: b('b2') }),
  ]));
  const changed = [...names.filter((n) => n !== 'a' && n !== '\u{1F600}'), 'a-new'].sort(utf8Order);
  for (const store of loaders) {
    for (const limit of [1, 4, 1000]) assert.deepEqual(await listedNames(store, 'record', limit), changed);
    const bHead = (await listAll(store, 'record', 1000)).find((h) => h.name === 'b');
    assert.equal(bHead?.head.version, 2);
    assert.equal(bHead && text(bHead.head.head), 'b2');
  }
});

row('limits: a batch of 8 MiB of heads and rows lands byte-exact; 1 MiB rows', async (realm) => {
  const { store: a, token } = await realm.writer();
  const X = ref('record', 'limit-x');
  const Y = ref('record', 'limit-y');
  const MiB = 1024 * 1024;
  assert.equal(MAX_BATCH_BYTES, 8 * MiB);
  assert.equal(MAX_ROW_BYTES, MiB);
  const headX = pattern(MiB, 1);
  const headY = pattern(MiB, 2);
  const rowsX = [pattern(MAX_ROW_BYTES, 3), pattern(MAX_ROW_BYTES, 4), pattern(MAX_ROW_BYTES, 5)];
  const rowsY = [pattern(MAX_ROW_BYTES, 6), pattern(MAX_ROW_BYTES, 7), pattern(MAX_ROW_BYTES - 1, 8), pattern(1, 9)];
  const big = batch('limit-8mib', token, [
    { scope: X, previous: null, next: 1, head: headX, append: rowsX },
    { scope: Y, previous: null, next: 1, head: headY, append: rowsY },
  ]);
  await a.commit(big);
  for (const store of [a, await realm.open()]) {
    for (const [scope, head, rows] of [
      [X, headX, rowsX],
      [Y, headY, rowsY],
    ] as const) {
      const loaded = await store.loadHead(scope);
      assert.equal(loaded?.version, 1);
      sameBytes(loaded?.head, head, `${scope.name} head`);
      for (let i = 0; i < rows.length; i++) {
        const [got] = await store.readRows(scope, i, 1);
        assert.equal(got?.index, i);
        sameBytes(got?.data, rows[i] as Uint8Array, `${scope.name} row ${i}`);
      }
      assert.deepEqual(await store.readRows(scope, rows.length, 1), []);
    }
  }
  // One head of the whole 8 MiB.
  const Z = ref('session', 'limit-z');
  const headZ = pattern(MAX_BATCH_BYTES, 10);
  await a.commit(batch('limit-head', token, [create(Z, headZ)]));
  sameBytes((await (await realm.open()).loadHead(Z))?.head, headZ, 'an 8 MiB head');
  // A byte more is INVALID, before any store sees it.
  await rejects(() => batch('limit-over', token, [create(ref('record', 'over'), pattern(MAX_BATCH_BYTES + 1, 11))]), ['INVALID'], '8 MiB + 1 of head');
  await rejects(() => batch('limit-over-rows', token, [create(ref('record', 'over'), headX, rowsX), create(ref('record', 'over2'), headY, rowsY.concat([pattern(1, 12)]))]), ['INVALID'], '8 MiB + 1 over two scopes');
  await rejects(() => batch('limit-row', token, [create(ref('record', 'over'), 'h', [pattern(MAX_ROW_BYTES + 1, 13)])]), ['INVALID'], 'a row of 1 MiB + 1');
});

row('limits: 512-byte scope names and 128-byte commit ids', async (realm) => {
  const { store: a, token } = await realm.writer();
  assert.equal(MAX_SCOPE_NAME_BYTES, 512);
  assert.equal(MAX_COMMIT_ID_BYTES, 128);
  const longNames = ['n'.repeat(512), '\u{1F600}'.repeat(128), 'é'.repeat(256), `${'中'.repeat(170)}ab`, `${'/'.repeat(255)}..${'\\'.repeat(255)}`];
  for (const name of longNames) assert.equal(Buffer.byteLength(name), 512);
  const ids = ['c'.repeat(128), '\u{1F600}'.repeat(32), `${'é'.repeat(63)}ab`];
  for (const id of ids) assert.equal(Buffer.byteLength(id), 128);
  const idOf = (i: number): string => ids[i] ?? `name-${i}`;
  for (const [i, name] of longNames.entries()) {
    await a.commit(batch(idOf(i), token, [create(ref('session', name), `h${i}`, [`r${i}`])]));
  }
  for (const store of [a, await realm.open()]) {
    assert.deepEqual(await listedNames(store, 'session', 2), [...longNames].sort(utf8Order));
    for (const [i, name] of longNames.entries()) {
      const seen = await see(store, ref('session', name));
      assert.deepEqual(seen, { version: 1, commitId: idOf(i), head: `h${i}`, rows: [`r${i}`] });
    }
  }
  await rejects(() => batch('too-long', token, [create(ref('session', 'n'.repeat(513)), 'h')]), ['INVALID'], 'a 513-byte name');
  await rejects(() => batch('too-long', token, [create(ref('session', '\u{1F600}'.repeat(128) + 'a'), 'h')]), ['INVALID'], 'a 513-byte name of emoji');
  await rejects(() => batch('c'.repeat(129), token, [create(ref('session', 'ok'), 'h')]), ['INVALID'], 'a 129-byte commit id');
  await rejects(() => batch('é'.repeat(64) + 'a', token, [create(ref('session', 'ok'), 'h')]), ['INVALID'], 'a 129-byte commit id of 2-byte characters');
});

row('independence: 200 or more scopes commit concurrently without a stall', async (realm, settings) => {
  const { store: a, token } = await realm.writer();
  const n = settings.concurrentScopes;
  const scopes = Array.from({ length: n }, (_, i) => ref(SCOPE_KINDS[i % SCOPE_KINDS.length] as ScopeKind, `indep-${String(i).padStart(4, '0')}`));
  const all = (what: string, commits: Promise<void>[]): Promise<void[]> => within(Promise.all(commits), settings.deadline, what);
  await all('creating the scopes', scopes.map((s, i) => a.commit(batch(`indep-c-${i}`, token, [create(s, `h${i}-1`, [`r${i}-0`])]))));
  for (let round = 1; round <= 3; round++) {
    await all(
      `round ${round}`,
      scopes.map((s, i) => a.commit(batch(`indep-${round}-${i}`, token, [update(s, round, { head: b(`h${i}-${round + 1}`), append: rowsOf(`r${i}-${round}`) })]))),
    );
  }
  // Two-scope batches over disjoint pairs, all at once.
  const pairs: Promise<void>[] = [];
  for (let i = 0; i + 1 < n; i += 2) {
    pairs.push(a.commit(batch(`indep-pair-${i}`, token, [update(scopes[i] as ScopeRef, 4, { append: rowsOf(`r${i}-4`) }), update(scopes[i + 1] as ScopeRef, 4, { append: rowsOf(`r${i + 1}-4`) })])));
  }
  await all('pairs', pairs);
  const reader = await realm.open();
  const loads = scopes.map(async (s, i) => {
    const paired = i + 1 < n || i % 2 === 1;
    const seen = await see(reader, s);
    assert.deepEqual(seen, {
      version: paired ? 5 : 4,
      commitId: paired ? `indep-pair-${i - (i % 2)}` : `indep-3-${i}`,
      head: `h${i}-4`,
      rows: [`r${i}-0`, `r${i}-1`, `r${i}-2`, `r${i}-3`, ...(paired ? [`r${i}-4`] : [])],
    });
  });
  await within(Promise.all(loads), settings.deadline, 'loading every scope');
  let listed = 0;
  for (const kind of SCOPE_KINDS) listed += (await listAll(reader, kind, 64)).length;
  assert.equal(listed, n);
});

row('stalled commit: a commit held in flight on one scope does not hold up a commit on another', async (realm, settings) => {
  const { store: a, token } = await realm.writer();
  const X1 = ref('session', 'stall-x1');
  const X2 = ref('mob', 'stall-x2');
  const Y = ref('session', 'stall-y');
  await a.commit(batch('stall-setup', token, [create(X1, 'x1'), create(X2, 'x2'), create(Y, 'y1')]));
  const stall = await realm.stall(a);
  const B = batch('stall-held', token, [update(X1, 1, { head: b('x1-2'), append: rowsOf('x1-row') }), update(X2, 1, { head: b('x2-2') })]);
  const held = outcome(a.commit(B));
  await within(stall.reached, settings.deadline, 'the stalled commit');
  const W1 = ref('record', 'stall-w1');
  const W2 = ref('identity', 'stall-w2');
  await within(a.commit(batch('stall-other', token, [update(Y, 1, { head: b('y2'), append: rowsOf('y-row') })])), settings.deadline, 'a commit on another scope');
  await within(a.commit(batch('stall-create', token, [create(ref('record', 'stall-z'), 'z')])), settings.deadline, 'a creating commit');
  // Loads during the stall: the held batch shows in both of its scopes or in neither.
  const reader = await realm.open();
  const during = await within(
    wholeOrNone(
      [reader],
      [
        { scope: X1, before: { version: 1, commitId: 'stall-setup', head: 'x1', rows: [] }, after: { version: 2, commitId: 'stall-held', head: 'x1-2', rows: ['x1-row'] } },
        { scope: X2, before: { version: 1, commitId: 'stall-setup', head: 'x2', rows: [] }, after: { version: 2, commitId: 'stall-held', head: 'x2-2', rows: [] } },
      ],
      'the held batch',
    ),
    settings.deadline,
    'loading scopes during a stall',
  );
  assert.ok(typeof during === 'boolean');
  await expectSeen([reader], Y, { version: 2, commitId: 'stall-other', head: 'y2', rows: ['y-row'] }, 'the other scope committed');
  assert.deepEqual(await listedNames(reader, 'record'), ['stall-z']);
  // A creating batch held in flight: listed exactly when loaded, in both of its scopes.
  await stall.release();
  const result = await within(held, settings.deadline, 'the released commit');
  assert.deepEqual(result, { ok: true }, 'the released commit lands');
  await expectSeen([reader, a], X1, { version: 2, commitId: 'stall-held', head: 'x1-2', rows: ['x1-row'] }, 'X1 after release');
  const stall2 = await realm.stall(a);
  const creating = outcome(a.commit(batch('stall-creates', token, [create(W1, 'w1'), create(W2, 'w2')])));
  await within(stall2.reached, settings.deadline, 'the stalled creating commit');
  const h1 = await reader.loadHead(W1);
  const h2 = await reader.loadHead(W2);
  assert.equal(h1 === null, h2 === null, 'a creating batch in flight shows in both scopes or neither');
  assert.equal((await listedNames(reader, 'record')).includes(W1.name), h1 !== null, 'listed exactly when loaded');
  assert.equal((await listedNames(reader, 'identity')).includes(W2.name), h2 !== null, 'listed exactly when loaded');
  await stall2.release();
  assert.deepEqual(await within(creating, settings.deadline, 'the released creating commit'), { ok: true });
  assert.deepEqual(await listedNames(reader, 'identity'), ['stall-w2']);
});

row('payloads are opaque bytes the store keeps exactly: callers own what they pass and what they get', async (realm) => {
  const { store: a, token } = await realm.writer();
  const X = ref('record', 'opaque');
  const head = Uint8Array.from([0, 255, 1, 254, 0]);
  const rows = [new Uint8Array(0), Uint8Array.from([0, 0, 0]), Buffer.from('buffer row')];
  const source = { head: Uint8Array.from(head), rows: rows.map((r) => Uint8Array.from(r)) };
  const B = batch('opaque-1', token, [{ scope: X, previous: null, next: 1, head: source.head, append: source.rows }]);
  source.head.fill(7);
  for (const r of source.rows) r.fill(7);
  await a.commit(B);
  const loaded = await a.loadHead(X);
  sameBytes(loaded?.head, head, 'head');
  loaded?.head.fill(9);
  const got = await a.readRows(X, 0, 10);
  got.forEach((r, i) => sameBytes(r.data, rows[i] as Uint8Array, `row ${i}`));
  for (const r of got) r.data.fill(9);
  for (const store of [a, await realm.open()]) {
    sameBytes((await store.loadHead(X))?.head, head, 'head after the caller mutated its copies');
    (await store.readRows(X, 0, 10)).forEach((r, i) => sameBytes(r.data, rows[i] as Uint8Array, `row ${i} after the caller mutated its copies`));
  }
  // A head of zero bytes is a head.
  await a.commit(batch('opaque-2', token, [update(X, 1, { head: new Uint8Array(0) })]));
  assert.deepEqual((await (await realm.open()).loadHead(X))?.head.length, 0);
});

row('INVALID: CommitBatch.tryNew refuses every malformed batch', async () => {
  const X = ref('session', 'x');
  const h = b('h');
  const cases: [string, () => unknown][] = [
    ['no update', () => CommitBatch.tryNew('id', 1, [])],
    ['updates not an array', () => CommitBatch.tryNew('id', 1, null as never)],
    ['two updates of one scope', () => CommitBatch.tryNew('id', 1, [create(X, 'h'), update(X, 1)])],
    ['an update that is not an object', () => CommitBatch.tryNew('id', 1, [null as never])],
    ['a bad kind', () => CommitBatch.tryNew('id', 1, [create({ kind: 'table' as never, name: 'x' }, 'h')])],
    ['no scope', () => CommitBatch.tryNew('id', 1, [{ previous: null, next: 1, head: h } as never])],
    ['an empty name', () => CommitBatch.tryNew('id', 1, [create(ref('session', ''), 'h')])],
    ['a name that is not a string', () => CommitBatch.tryNew('id', 1, [create(ref('session', 7 as never), 'h')])],
    ['a name over 512 bytes', () => CommitBatch.tryNew('id', 1, [create(ref('session', 'é'.repeat(256) + 'a'), 'h')])],
    ['a name with NUL', () => CommitBatch.tryNew('id', 1, [create(ref('session', 'a\u0000b'), 'h')])],
    ['a name with a newline', () => CommitBatch.tryNew('id', 1, [create(ref('session', 'a\nb'), 'h')])],
    ['a name with DEL', () => CommitBatch.tryNew('id', 1, [create(ref('session', 'a\u007fb'), 'h')])],
    ['a name with a C1 control', () => CommitBatch.tryNew('id', 1, [create(ref('session', 'a\u0085b'), 'h')])],
    ['a name with a lone high surrogate', () => CommitBatch.tryNew('id', 1, [create(ref('session', 'a\uD800'), 'h')])],
    ['a name with a lone low surrogate', () => CommitBatch.tryNew('id', 1, [create(ref('session', '\uDC00a'), 'h')])],
    ['a name with reversed surrogates', () => CommitBatch.tryNew('id', 1, [create(ref('session', '\uDE00\uD83D'), 'h')])],
    ['previous negative', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: -1, next: 0 }])],
    ['previous fractional', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1.5, next: 2.5 }])],
    ['previous unsafe', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 2 ** 53, next: 2 ** 53 + 1 }])],
    ['previous NaN', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: Number.NaN, next: 1 }])],
    ['previous undefined', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: undefined as never, next: 1, head: h }])],
    ['previous 0 (no such version)', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 0, next: 1 }])],
    ['next not previous + 1', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 3 }])],
    ['next equal to previous', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 1 }])],
    ['next a string', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: '2' as never }])],
    ['creating with next 2', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: null, next: 2, head: h }])],
    ['creating with next 0', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: null, next: 0, head: h }])],
    ['creating without head', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: null, next: 1 }])],
    ['creating with truncateAfter', () => CommitBatch.tryNew('id', 1, [{ ...create(X, 'h'), truncateAfter: 0 }])],
    ['creating with dropBefore', () => CommitBatch.tryNew('id', 1, [{ ...create(X, 'h'), dropBefore: 0 }])],
    ['creating with delete', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: null, next: 1, delete: true }])],
    ['delete with head', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, delete: true, head: h }])],
    ['delete with append', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, delete: true, append: [h] }])],
    ['delete with an empty append', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, delete: true, append: [] }])],
    ['delete with truncateAfter', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, delete: true, truncateAfter: 0 }])],
    ['delete with dropBefore', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, delete: true, dropBefore: 0 }])],
    ['delete not a boolean', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, delete: 'yes' as never }])],
    ['head a string', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, head: 'h' as never }])],
    ['head an array of numbers', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, head: [1, 2] as never }])],
    ['head null', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, head: null as never }])],
    ['head an ArrayBuffer', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, head: new ArrayBuffer(2) as never }])],
    ['append not an array', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, append: h as never }])],
    ['a row a string', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, append: ['row' as never] }])],
    ['a row a DataView', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, append: [new DataView(new ArrayBuffer(1)) as never] }])],
    ['a row over 1 MiB', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, append: [new Uint8Array(MAX_ROW_BYTES + 1)] }])],
    ['truncateAfter negative', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, truncateAfter: -1 }])],
    ['truncateAfter fractional', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, truncateAfter: 0.5 }])],
    ['truncateAfter Infinity', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, truncateAfter: Infinity }])],
    ['dropBefore negative', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, dropBefore: -3 }])],
    ['dropBefore fractional', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, dropBefore: 2.5 }])],
    ['dropBefore a string', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, dropBefore: '1' as never }])],
    ['an empty commit id', () => CommitBatch.tryNew('', 1, [create(X, 'h')])],
    ['a commit id over 128 bytes', () => CommitBatch.tryNew('c'.repeat(129), 1, [create(X, 'h')])],
    ['a commit id with a control character', () => CommitBatch.tryNew('id\t1', 1, [create(X, 'h')])],
    ['a commit id with a lone surrogate', () => CommitBatch.tryNew('id\uD800', 1, [create(X, 'h')])],
    ['a commit id that is not a string', () => CommitBatch.tryNew(42 as never, 1, [create(X, 'h')])],
    ['a negative token', () => CommitBatch.tryNew('id', -1, [create(X, 'h')])],
    ['a fractional token', () => CommitBatch.tryNew('id', 1.5, [create(X, 'h')])],
    ['an unsafe token', () => CommitBatch.tryNew('id', 2 ** 53, [create(X, 'h')])],
    ['a token that is a string', () => CommitBatch.tryNew('id', '1' as never, [create(X, 'h')])],
    ['more than 8 MiB in all', () => CommitBatch.tryNew('id', 1, [{ scope: X, previous: 1, next: 2, head: new Uint8Array(MAX_BATCH_BYTES - 1), append: [new Uint8Array(2)] }])],
    ['more than 8 MiB over two updates', () => CommitBatch.tryNew('id', 1, [{ ...create(X, new Uint8Array(MAX_BATCH_BYTES / 2)) }, create(ref('mob', 'y'), new Uint8Array(MAX_BATCH_BYTES / 2 + 1))])],
  ];
  for (const [what, build] of cases) await rejects(build, ['INVALID'], what);
  // And the edges that are well formed.
  CommitBatch.tryNew('c'.repeat(128), 0, [create(ref('session', 'n'.repeat(512)), new Uint8Array(MAX_BATCH_BYTES))]);
  CommitBatch.tryNew('id', Number.MAX_SAFE_INTEGER, [{ scope: X, previous: 1, next: 2 }, { scope: ref('mob', 'x'), previous: 1, next: 2, delete: false, append: [] }]);
  CommitBatch.tryNew('id', 1, [{ scope: X, previous: Number.MAX_SAFE_INTEGER - 1, next: Number.MAX_SAFE_INTEGER, truncateAfter: 0, dropBefore: Number.MAX_SAFE_INTEGER }]);
});

row('INVALID: the store refuses malformed requests and applies nothing', async (realm) => {
  const { store: a, token } = await realm.writer();
  const X = ref('record', 'valid');
  await a.commit(batch('invalid-setup', token, [create(X, 'h', ['r0'])]));
  const badRefs: unknown[] = [
    null,
    'record/valid',
    { kind: 'record' },
    { kind: 'table', name: 'valid' },
    { kind: 'record', name: '' },
    { kind: 'record', name: 'a\u0000' },
    { kind: 'record', name: 'x'.repeat(513) },
    { kind: 'record', name: '\uD800' },
  ];
  for (const scope of badRefs) {
    await rejects(a.loadHead(scope as ScopeRef), ['INVALID'], `loadHead(${JSON.stringify(scope)})`);
    await rejects(a.readRows(scope as ScopeRef, 0, 1), ['INVALID'], `readRows(${JSON.stringify(scope)})`);
  }
  for (const [from, limit] of [
    [-1, 1],
    [0.5, 1],
    [0, -1],
    [0, 1.5],
    [Number.NaN, 1],
    [0, Number.POSITIVE_INFINITY],
  ] as const) {
    await rejects(a.readRows(X, from, limit), ['INVALID'], `readRows(from ${from}, limit ${limit})`);
  }
  await rejects(a.listHeads('table' as never, null, 1), ['INVALID'], 'listHeads of an unknown kind');
  for (const limit of [0, -1, 1.5, Number.NaN]) await rejects(a.listHeads('record', null, limit), ['INVALID'], `listHeads limit ${limit}`);
  for (const after of ['', 'a\u0001', '\uDC00', 'x'.repeat(513)]) await rejects(a.listHeads('record', after, 1), ['INVALID'], `listHeads after ${JSON.stringify(after)}`);
  // A commit of something that is not a well-formed batch (a caller that skipped tryNew).
  for (const bad of [
    null,
    {},
    { commitId: 'raw', token, updates: [] },
    { commitId: '', token, updates: [create(ref('record', 'raw'), 'h')] },
    { commitId: 'raw', token: -1, updates: [create(ref('record', 'raw'), 'h')] },
    { commitId: 'raw', token, updates: [{ scope: ref('record', 'raw'), previous: null, next: 1 }] },
    { commitId: 'raw', token, updates: [update(X, 1, { head: b('h2') }), update(X, 1, { head: b('h3') })] },
  ]) {
    await rejects(a.commit(bad as never), ['INVALID'], `commit(${JSON.stringify(bad)})`);
  }
  await expectSeen([a, await realm.open()], X, { version: 1, commitId: 'invalid-setup', head: 'h', rows: ['r0'] }, 'nothing applied');
  assert.equal(await a.loadHead(ref('record', 'raw')), null);
});
