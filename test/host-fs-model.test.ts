// The fs host store against the in-memory reference store, operation by operation: seeded random
// batches (creates, appends, heads small and large, truncateAfter, dropBefore, deletes, multi-scope
// batches, stale versions, truncations below the first row, re-creates of deleted names, retries)
// go to both stores; every answer must agree, and every so often everything a load can see must
// agree (heads, versions, commit ids, first rows, rows, listings). In between, the fs store rolls
// small stripe files, runs checkpoint rounds (automatic and explicit: rows and heads move to the
// scopes' homes), is reopened, reopened after a simulated reboot, and read by a second process.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../lib/clock.js';
import { seededRandom } from '../lib/crash/determinism.js';
import { MemoryFs } from '../lib/fs/memory.js';
import {
  CommitBatch,
  FenceTiming,
  MemoryHostRealm,
  openFsHostStore,
  SCOPE_KINDS,
  type FsHostStore,
  type HostStore,
  type ScopeRef,
  type ScopeUpdate,
} from '../lib/host/index.js';

const DIR = '/realm';

/** The lowest `from` a scope's readRows accepts (its first row), by bisection. */
async function firstOf(store: HostStore, scope: ScopeRef): Promise<number> {
  let lo = 0;
  let hi = 1 << 20;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    try {
      await store.readRows(scope, mid, 0);
      hi = mid;
    } catch (err) {
      assert.equal((err as { code?: unknown }).code, 'INVALID');
      lo = mid + 1;
    }
  }
  return lo;
}

async function snapshot(store: HostStore, scopes: readonly ScopeRef[]): Promise<unknown> {
  const out: unknown[] = [];
  for (const scope of scopes) {
    const head = await store.loadHead(scope);
    if (head === null) {
      out.push([scope.kind, scope.name, null, await store.readRows(scope, 0, 5)]);
      continue;
    }
    const first = await firstOf(store, scope);
    const rows = await store.readRows(scope, first, 100_000);
    out.push([scope.kind, scope.name, head.version, head.commitId, Buffer.from(head.head).toString('hex'), first, rows.map((r) => [r.index, Buffer.from(r.data).toString('hex')])]);
  }
  for (const kind of SCOPE_KINDS) {
    for (const limit of [1, 3, 1000]) {
      const names: string[] = [];
      let after: string | null = null;
      for (;;) {
        const page = await store.listHeads(kind, after, limit);
        for (const h of page.heads) names.push(`${h.name}@${h.head.version}:${h.head.commitId}`);
        if (page.next === null) break;
        after = page.next;
      }
      out.push([kind, limit, names]);
    }
  }
  return out;
}

async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code !== 'string') throw err;
    return code;
  }
}

function bytes(rng: () => number, size: number, tag: string): Uint8Array {
  const b = Buffer.alloc(size);
  b.write(tag.slice(0, size));
  for (let i = tag.length; i < size; i++) b[i] = Math.floor(rng() * 256);
  return b;
}

async function runModel(seed: number, steps: number): Promise<{ checkpoints: number; reopens: number; commits: number; refusals: Record<string, number> }> {
  const rng = seededRandom(seed);
  const int = (lo: number, hi: number): number => lo + Math.floor(rng() * (hi - lo + 1));
  const clock = new ManualClock(1_000_000);
  const timing = FenceTiming.tryNew(1000, 3000);
  const machine = new MemoryFs({ trace: false });
  let boot = 'boot-1';
  const open = (holderId: string): Promise<FsHostStore> =>
    openFsHostStore(DIR, {
      fs: machine.newProcess(),
      clock,
      timing,
      holderId,
      bootId: () => boot,
      stripes: 3,
      stripeFileBytes: 64 * 1024,
      preallocBytes: 4096,
      checkpointBytes: 24 * 1024,
      lockLingerMs: int(0, 1),
    });
  const realm = new MemoryHostRealm({ clock, timing });
  const mem = realm.open({ holderId: 'model' });
  let fs = await open('fs-1');
  const scopes: ScopeRef[] = [];
  for (const kind of SCOPE_KINDS) for (let i = 0; i < 4; i++) scopes.push({ kind, name: `${kind[0]}${i}${i === 3 ? '/../é' : ''}` });
  // Names deleted stay in `scopes` (their loads and listings are compared too); each delete adds a
  // fresh name, and a re-create of a deleted name is tried only now and then (it is INVALID).
  const deleted = new Set<string>();
  const pickable = (): ScopeRef[] => scopes.filter((s) => !deleted.has(`${s.kind}/${s.name}`) || rng() < 0.02);
  const g1 = await fs.acquireFence('exclusive');
  const g2 = await mem.acquireFence('exclusive');
  assert.equal(g1.token, g2.token);
  let token = g1.token;
  let serial = 0;
  let last: CommitBatch | null = null;
  const stats = { checkpoints: 0, reopens: 0, commits: 0, refusals: {} as Record<string, number> };

  const updateOf = async (scope: ScopeRef): Promise<ScopeUpdate> => {
    const head = await mem.loadHead(scope);
    const id = `c${serial}`;
    if (head === null) {
      return { scope, previous: null, next: 1, head: bytes(rng, rng() < 0.1 ? 3000 : int(0, 40), `${id}h`), append: Array.from({ length: int(0, 4) }, (_, k) => bytes(rng, int(0, 300), `${id}r${k}`)) };
    }
    const stale = rng() < 0.04;
    const previous = stale ? Math.max(1, head.version - int(1, 2)) : head.version;
    const u: ScopeUpdate = { scope, previous, next: previous + 1 };
    const r = rng();
    if (r < 0.06) return { ...u, delete: true };
    const first = await firstOf(mem, scope);
    const end = first + (await mem.readRows(scope, first, 100_000)).length;
    if (r < 0.3) u.truncateAfter = rng() < 0.05 ? Math.max(0, first - 1) : int(first, end + 1);
    if (r > 0.2 && r < 0.45) u.dropBefore = int(Math.max(0, first - 1), end + 2);
    if (rng() < 0.7) u.append = Array.from({ length: int(1, 5) }, (_, k) => bytes(rng, rng() < 0.05 ? int(2000, 9000) : int(0, 200), `${id}r${k}`));
    if (rng() < 0.5) u.head = bytes(rng, rng() < 0.1 ? int(2100, 5000) : int(0, 50), `${id}h`);
    return u;
  };

  for (let step = 0; step < steps; step++) {
    const r = rng();
    if (r < 0.72) {
      serial++;
      let batch: CommitBatch;
      if (last !== null && rng() < 0.05) batch = last;
      else {
        const n = rng() < 0.7 ? 1 : int(2, 3);
        const chosen = pickable().sort(() => rng() - 0.5).slice(0, n);
        batch = CommitBatch.tryNew(`c${serial}`, token, await Promise.all(chosen.map(updateOf)));
      }
      const want = await outcome(mem.commit(batch));
      const got = await outcome(fs.commit(batch));
      assert.equal(got, want, `seed ${seed} step ${step}: commit ${batch.commitId} answered ${got}, the reference ${want}`);
      if (want === 'ok') {
        stats.commits++;
        for (const u of batch.updates) {
          if (u.delete === true && !deleted.has(`${u.scope.kind}/${u.scope.name}`)) {
            deleted.add(`${u.scope.kind}/${u.scope.name}`);
            scopes.push({ kind: u.scope.kind, name: `${u.scope.name}+${step}` });
          }
        }
      }
      else stats.refusals[want] = (stats.refusals[want] ?? 0) + 1;
      last = batch;
    } else if (r < 0.78) {
      // Concurrent single-scope commits on distinct scopes (one group per stripe).
      const chosen = pickable().sort(() => rng() - 0.5).slice(0, int(2, 6));
      const batches: CommitBatch[] = [];
      for (const scope of chosen) batches.push(CommitBatch.tryNew(`c${++serial}`, token, [await updateOf(scope)]));
      const want = await Promise.all(batches.map((b) => outcome(mem.commit(b))));
      const got = await Promise.all(batches.map((b) => outcome(fs.commit(b))));
      assert.deepEqual(got, want, `seed ${seed} step ${step}: concurrent commits`);
      stats.commits += want.filter((w) => w === 'ok').length;
    } else if (r < 0.84) {
      await fs.checkpoint();
      stats.checkpoints++;
    } else if (r < 0.9) {
      await fs.close();
      if (rng() < 0.3) {
        // A reboot: every lease ends; the stores take the fence again.
        boot = `boot-${step}`;
        fs = await open(`fs-${step}`);
        realm.lapseFenceLeases();
        const a = await fs.acquireFence('exclusive');
        const b = await mem.acquireFence('takeover');
        assert.equal(a.token, b.token);
        token = a.token;
      } else fs = await open(`fs-${step}`);
      stats.reopens++;
    } else if (r < 0.95) {
      const other = await open(`reader-${step}`);
      assert.deepEqual(await snapshot(other, scopes), await snapshot(mem, scopes), `seed ${seed} step ${step}: a second process`);
      await other.close();
    } else {
      assert.deepEqual(await snapshot(fs, scopes), await snapshot(mem, scopes), `seed ${seed} step ${step}`);
    }
  }
  assert.deepEqual(await snapshot(fs, scopes), await snapshot(mem, scopes), `seed ${seed} at the end`);
  await fs.checkpoint();
  const after = await open('after');
  assert.deepEqual(await snapshot(after, scopes), await snapshot(mem, scopes), `seed ${seed} after a last checkpoint`);
  await after.close();
  await fs.close();
  return stats;
}

for (const seed of [1, 2, 3, 4]) {
  test(`the fs host store answers and loads like the reference store (seed ${seed})`, async () => {
    const stats = await runModel(seed, 260);
    console.log(`seed ${seed}: ${stats.commits} commits landed, refusals ${JSON.stringify(stats.refusals)}, ${stats.checkpoints} checkpoints, ${stats.reopens} reopens`);
    assert.ok(stats.commits > 100);
  });
}

test('two batches for one version on disk (checks skipped): every load resolves them one way; the loser is invisible in all its scopes; a higher token wins', async () => {
  const clock = new ManualClock(1_000_000);
  const timing = FenceTiming.tryNew(1000, 3000);
  const machine = new MemoryFs({ trace: false });
  let boot = 'boot-1';
  const open = (name: string, skip = false): Promise<FsHostStore> =>
    openFsHostStore(DIR, { fs: machine.newProcess(), clock, timing, holderId: name, bootId: () => boot, stripes: 3, lockLingerMs: 0, hooks: { skipVersionChecks: skip } });
  const X: ScopeRef = { kind: 'session', name: 'dup-x' };
  const Y: ScopeRef = { kind: 'mob', name: 'dup-y' };
  const Z: ScopeRef = { kind: 'record', name: 'dup-z' };
  const te = new TextEncoder();
  const a = await open('a');
  const { token } = await a.acquireFence('exclusive');
  await a.commit(CommitBatch.tryNew('setup', token, [X, Y, Z].map((scope) => ({ scope, previous: null, next: 1, head: te.encode('v1') }))));
  const p = await open('p', true);
  const q = await open('q', true);
  // Two batches for version 2 of X, both written (the version check is skipped).
  await q.commit(CommitBatch.tryNew('q', token, [{ scope: X, previous: 1, next: 2, head: te.encode('x-q') }, { scope: Z, previous: 1, next: 2, head: te.encode('z-q') }]));
  await p.commit(CommitBatch.tryNew('p', token, [{ scope: X, previous: 1, next: 2, head: te.encode('x-p') }, { scope: Y, previous: 1, next: 2, head: te.encode('y-p') }]));
  const seen = async (store: FsHostStore): Promise<string[]> => Promise.all([X, Y, Z].map(async (s) => `${s.name}@${(await store.loadHead(s))?.commitId}`));
  const expectAll = async (want: string[], what: string): Promise<void> => {
    const loaders = [a, p, q, await open(`reader-${what}`)];
    for (const [i, store] of loaders.entries()) assert.deepEqual(await seen(store), want, `${what}: loader ${i}`);
    for (const kind of ['session', 'mob', 'record'] as const) {
      const page = await loaders[3]!.listHeads(kind, null, 10);
      assert.deepEqual(page.heads.map((h) => `${h.name}@${h.head.commitId}`), want.filter((w) => w.startsWith(`dup-${kind === 'session' ? 'x' : kind === 'mob' ? 'y' : 'z'}`)), `${what}: listing`);
    }
    await loaders[3]!.close();
  };
  // Equal tokens: the lowest commit id wins the slot, in every scope it writes; q loses X, so it
  // shows nowhere (Z stays at version 1).
  await expectAll(['dup-x@p', 'dup-y@p', 'dup-z@setup'], 'same token');
  // A higher token at the same version wins over both.
  const r = await open('r', true);
  const g2 = await r.acquireFence('takeover');
  await r.commit(CommitBatch.tryNew('r', g2.token, [{ scope: X, previous: 1, next: 2, head: te.encode('x-r') }]));
  await expectAll(['dup-x@r', 'dup-y@setup', 'dup-z@setup'], 'higher token');
  // A checkpoint round applies the same rule; a reboot reads the same.
  assert.ok(await r.checkpoint());
  await expectAll(['dup-x@r', 'dup-y@setup', 'dup-z@setup'], 'after a checkpoint');
  boot = 'boot-2';
  const after = await open('after-reboot');
  assert.deepEqual(await seen(after), ['dup-x@r', 'dup-y@setup', 'dup-z@setup']);
  for (const store of [a, p, q, r, after]) await store.close();
});
