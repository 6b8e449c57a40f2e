// A takeover while the holder's groups wait on each other: the acquire must get every stripe.
//
// The cycle this pins down (it starved real acquires in the kill test): the holder keeps stripe 1's
// lock lingering after a group; a takeover in another process closes gate 0, takes lock 0, closes
// gate 1 and waits for lock 1; the holder's group Y (stripes 0 and 2) holds the mutexes of 0 and 2
// and backs off at gate 0; its group X (stripes 1 and 2) holds stripe 1's mutex and waits for
// stripe 2's, held by Y. A lingering lock kept while its stripe's mutex is busy would close the
// cycle: the acquire waits for lock 1, lock 1 waits for X, X waits for Y, Y waits for the acquire.
// A lock no group claimed must be let go even while a group holds its stripe's mutex.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../lib/clock.js';
import { FaultyFs } from '../lib/fs/faulty.js';
import { MemoryFs } from '../lib/fs/memory.js';
import { CommitBatch, FenceTiming, openFsHostStore, type ScopeRef } from '../lib/host/index.js';
import { scopeDigest } from '../lib/host/fs/format.js';

const STRIPES = 3;
const te = new TextEncoder();

/** A session scope whose home is stripe `j` (the first 32 bits of its digest, modulo the stripes). */
function scopeHomedIn(j: number, tag: string): ScopeRef {
  for (let i = 0; ; i++) {
    const name = `${tag}-${i}`;
    if (parseInt(scopeDigest('session', name).slice(0, 8), 16) % STRIPES === j) return { kind: 'session', name };
  }
}

function create(id: string, token: number, scopes: ScopeRef[]): CommitBatch {
  return CommitBatch.tryNew(id, token, scopes.map((scope) => ({ scope, previous: null, next: 1, head: te.encode(id) })));
}

test('a takeover gets every stripe while the holder has a lingering lock and groups waiting on each other', async () => {
  const machine = new MemoryFs({ trace: false });
  const clock = new ManualClock(1_000_000);
  const timing = FenceTiming.tryNew(1000, 3000);
  const options = { clock, timing, bootId: () => 'boot-1', stripes: STRIPES, lockWaitMs: 5000, checkpointBytes: 1 << 30 };
  // The holder keeps a lock for a minute after a group: only letting go of unclaimed locks helps.
  const aFs = new FaultyFs(machine.newProcess());
  const a = await openFsHostStore('/realm', { ...options, fs: aFs, holderId: 'a', lockLingerMs: 60_000 });
  const b = await openFsHostStore('/realm', { ...options, fs: machine.newProcess(), holderId: 'b', lockLingerMs: 0 });
  try {
    // The fence is taken by a handle that keeps no lock: A then holds only what its groups linger.
    const { token } = await b.acquireFence('exclusive');
    await a.commit(create('warm', token, [scopeHomedIn(1, 'warm')]));
    assert.match(a.describeLocks(), /stripe 1: flock held, lingering/);
    // The lingering lock outlives this: B closes gates 0 and 1, holds lock 0, waits for lock 1.
    const takeover = b.acquireFence('takeover');
    for (let i = 0; i < 200 && !/stripe 1: flock free[^,]*, gate held/.test(b.describeLocks()); i++) await new Promise((r) => setTimeout(r, 5));
    assert.match(b.describeLocks(), /stripe 1: flock free[^,]*, gate held/, `the takeover waits for stripe 1:\n${b.describeLocks()}\n${a.describeLocks()}`);
    // Y (stripes 0 and 2) first, X (stripes 1 and 2) in the same turn: X waits for stripe 2's mutex.
    // Y's first look at gate 0 (the open of its file) is held until X waits, so that every time Y
    // backs off, X holds stripe 1's mutex.
    const gate0 = aFs.pause('open', /stripes\/0\/gate$/);
    const y = a.commit(create('y', token, [scopeHomedIn(0, 'y'), scopeHomedIn(2, 'y')])).then(() => 'ok', (e: { code?: string }) => e.code);
    const x = a.commit(create('x', token, [scopeHomedIn(1, 'x'), scopeHomedIn(2, 'x')])).then(() => 'ok', (e: { code?: string }) => e.code);
    await gate0.reached;
    for (let i = 0; i < 200 && !/stripe 1: .*mutex busy/.test(a.describeLocks()); i++) await new Promise((r) => setTimeout(r, 5));
    assert.match(a.describeLocks(), /stripe 1: flock held, lingering.*mutex busy/, 'X holds stripe 1 and waits');
    gate0.release();
    const grant = await takeover;
    assert.equal(grant.token, token + 1);
    assert.deepEqual(await Promise.all([y, x]), ['FENCED_OUT', 'FENCED_OUT']);
  } finally {
    await a.close();
    await b.close();
  }
});
