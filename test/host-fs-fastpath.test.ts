// The one-writer fast path of the fs host store's commit (docs/host-store.md, "The commit path"):
// a group whose locks are kept from the groups before claims them without a pause, and the view it
// checks against must still be exact. These pin down that the shortcut is taken only while this
// handle has held the lock without a break: once another process took the stripe's lock and wrote,
// the next commit must see that write (CONFLICT on a stale version, Ok on the current one).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../lib/clock.js';
import { MemoryFs } from '../lib/fs/memory.js';
import { Mutex } from '../lib/host/fs/mutex.js';
import { CommitBatch, FenceTiming, openFsHostStore, type ScopeRef } from '../lib/host/index.js';

const te = new TextEncoder();
const scope: ScopeRef = { kind: 'session', name: 'fast' };
const step = (id: string, token: number, previous: number): CommitBatch =>
  CommitBatch.tryNew(id, token, [{ scope, previous, next: previous + 1, head: te.encode(id), append: [te.encode(`row-${id}`)] }]);

test('Mutex.tryLock: at once when free, null while held or awaited, and later lock() waits for its release', async () => {
  const m = new Mutex();
  const release = m.tryLock();
  assert.ok(release !== null);
  assert.equal(m.busy, true);
  assert.equal(m.tryLock(), null);
  const order: string[] = [];
  const waiter = m.lock().then((r) => {
    order.push('lock');
    r();
  });
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(order, [], 'lock() waits for the tryLock holder');
  assert.equal(m.tryLock(), null, 'a waiter makes tryLock refuse');
  release();
  release(); // twice is harmless
  await waiter;
  assert.deepEqual(order, ['lock']);
  assert.equal(m.busy, false);
  const again = m.tryLock();
  assert.ok(again !== null);
  again();
});

test('a kept lock is claimed without a pause only while held without a break: another process\'s commit is seen next', async () => {
  const machine = new MemoryFs({ trace: false });
  const clock = new ManualClock(1_000_000);
  const timing = FenceTiming.tryNew(1000, 3000);
  const options = { clock, timing, bootId: () => 'boot-1', stripes: 1, lockWaitMs: 5000, checkpointBytes: 1 << 30 };
  const a = await openFsHostStore('/realm', { ...options, fs: machine.newProcess(), holderId: 'a', lockLingerMs: 20 });
  const b = await openFsHostStore('/realm', { ...options, fs: machine.newProcess(), holderId: 'b', lockLingerMs: 0 });
  try {
    const { token } = await b.acquireFence('exclusive');
    await a.commit(CommitBatch.tryNew('create', token, [{ scope, previous: null, next: 1, head: te.encode('create') }]));
    // Back to back: every group after the first finds its lock kept (the fast path).
    for (let v = 1; v < 40; v++) await a.commit(step(`a-${v}`, token, v));
    assert.match(a.describeLocks(), /stripe 0: flock held, lingering, fresh/);
    // B waits for A's lingering lock to be let go, then writes version 41.
    await b.commit(step('b-40', token, 40));
    assert.equal((await b.loadHead(scope))?.version, 41);
    // A's next group takes the lock again and reads B's record first.
    await assert.rejects(a.commit(step('a-stale', token, 40)), (e: { code?: string; current?: number }) => e.code === 'CONFLICT' && e.current === 41);
    await a.commit(step('a-41', token, 41));
    await a.commit(step('a-42', token, 42));
    const head = await b.loadHead(scope);
    assert.equal(head?.version, 43);
    assert.equal(head?.commitId, 'a-42');
    const rows = await b.readRows(scope, 0, 100);
    assert.equal(rows.length, 43 - 1);
  } finally {
    await a.close();
    await b.close();
  }
});
