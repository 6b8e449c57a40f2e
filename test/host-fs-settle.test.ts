// A dead writer's last batch in the fs host store: the first load after the death settles it.
//
// Deterministic cases over a simulated machine (MemoryFs processes, FaultyFs to kill one or to
// hold its fdatasync): a writer killed with its records complete in the page cache and unpublished
// (the first load from another process adopts them: the takeover, later loads, a reopen and the
// disk after a power loss all agree); the same with the old rule planted (loads answer from the
// published notes alone), which shows the disagreement the rule exists to prevent; a live writer
// whose sync is held (loads answer from the note at once, without waiting or settling); a writer
// killed inside a roll (nothing to settle); a writer whose own void failed (its handle refuses to
// settle its own records, another process settles them).

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../lib/clock.js';
import { FaultyFs } from '../lib/fs/faulty.js';
import { MemoryFs } from '../lib/fs/memory.js';
import type { FileSystem } from '../lib/fs/types.js';
import { CommitBatch, FenceTiming, openFsHostStore, type FsHostStore, type FsHostStoreOptions, type ScopeRef, type ScopeUpdate } from '../lib/host/index.js';

const DIR = '/realm';
const STRIPE = /\.wal$/;
const te = new TextEncoder();
const X: ScopeRef = { kind: 'session', name: 'x' };
const Y: ScopeRef = { kind: 'record', name: 'y' };

function setup(extra: Partial<FsHostStoreOptions> & { plant?: boolean } = {}) {
  const machine = new MemoryFs({ trace: false });
  const clock = new ManualClock(1_000_000);
  const timing = FenceTiming.tryNew(1000, 3000);
  const { plant, ...rest } = extra;
  const open = (fs: FileSystem, boot = 'boot-1'): Promise<FsHostStore> =>
    openFsHostStore(DIR, {
      fs,
      clock,
      timing,
      bootId: () => boot,
      stripes: 1,
      lockLingerMs: 0,
      lockWaitMs: 2000,
      holderId: `h-${Math.random()}`,
      ...rest,
      ...(plant === true ? ({ mistakes: { loadsIgnoreUnpublished: true } } as object) : {}),
    });
  return { machine, open };
}

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return String((err as { code?: unknown }).code);
  }
}

/** The commit ids a process sees in X and Y (null: absent). */
async function seen(store: FsHostStore): Promise<[string | null, string | null]> {
  return [(await store.loadHead(X))?.commitId ?? null, (await store.loadHead(Y))?.commitId ?? null];
}

function bump(scope: ScopeRef, version: number, tag: string, rowBytes = 8): ScopeUpdate {
  return { scope, previous: version, next: version + 1, head: te.encode(tag), append: [new Uint8Array(rowBytes).fill(7)] };
}

/** A writer that committed 'c1' to X and Y, then began 'bad' (X and Y) and died at the fdatasync of `path`. */
async function killedAtSync(open: (fs: FileSystem) => Promise<FsHostStore>, machine: MemoryFs, badRowBytes = 8): Promise<void> {
  const faulty = new FaultyFs(machine.newProcess());
  const a = await open(faulty);
  const { token } = await a.acquireFence('exclusive');
  await a.commit(CommitBatch.tryNew('c1', token, [
    { scope: X, previous: null, next: 1, head: te.encode('x1'), append: [new Uint8Array(2048)] },
    { scope: Y, previous: null, next: 1, head: te.encode('y1') },
  ]));
  const pause = faulty.pause('datasync', STRIPE);
  const dying = a.commit(CommitBatch.tryNew('bad', token, [bump(X, 1, 'bad', badRowBytes), bump(Y, 1, 'bad')])).catch(() => undefined);
  await pause.reached;
  await faulty.sever();
  await dying;
}

test('a writer killed with its batch unpublished: the first load settles it, and the acquire, a reopen and a power loss agree', async () => {
  const { machine, open } = setup();
  await killedAtSync(open, machine);
  const b = await open(machine.newProcess());
  assert.deepEqual(await seen(b), ['bad', 'bad'], 'the first load after the death adopts the dead writer\'s complete batch');
  // The settlement was synced before the load answered: a power loss now keeps it.
  const disk = await open(new MemoryFs({ image: machine.durableImage(), trace: false }), 'boot-2');
  assert.deepEqual(await seen(disk), ['bad', 'bad'], 'the disk after a power loss shows what the load answered');
  await disk.close();
  const c = await open(machine.newProcess());
  await c.acquireFence('takeover');
  assert.deepEqual(await seen(c), ['bad', 'bad'], 'the loads after the next acquire agree');
  assert.deepEqual(await seen(b), ['bad', 'bad'], 'the first loader again');
  const d = await open(machine.newProcess());
  assert.deepEqual(await seen(d), ['bad', 'bad'], 'a reopen agrees');
  for (const s of [b, c, d]) await s.close();
});

test('the old rule planted (loads answer from the notes alone): the load before the acquire and the loads after it disagree', async () => {
  const { machine, open } = setup({ plant: true });
  await killedAtSync(open, machine);
  const b = await open(machine.newProcess());
  const before = await seen(b);
  const c = await open(machine.newProcess());
  await c.acquireFence('takeover');
  const after = await seen(c);
  assert.deepEqual(before, ['c1', 'c1']);
  assert.deepEqual(after, ['bad', 'bad'], 'the acquire adopted what the load had answered as not landed');
  await b.close();
  await c.close();
});

test('a live writer whose sync is held: a load answers from the note at once and settles nothing; the commit then lands', async () => {
  const { machine, open } = setup();
  const faulty = new FaultyFs(machine.newProcess());
  const a = await open(faulty);
  const { token } = await a.acquireFence('exclusive');
  await a.commit(CommitBatch.tryNew('c1', token, [
    { scope: X, previous: null, next: 1, head: te.encode('x1') },
    { scope: Y, previous: null, next: 1, head: te.encode('y1') },
  ]));
  const pause = faulty.pause('datasync', STRIPE);
  const committing = a.commit(CommitBatch.tryNew('live', token, [bump(X, 1, 'live'), bump(Y, 1, 'live')]));
  await pause.reached;
  const b = await open(machine.newProcess());
  // The writer holds the stripe's lock: its commit is in flight, and the load does not wait for it.
  assert.deepEqual(await seen(b), ['c1', 'c1']);
  assert.equal(pause.held, 1, 'the writer\'s sync is still held while the load answered');
  pause.release();
  await committing;
  assert.deepEqual(await seen(b), ['live', 'live']);
  await a.close();
  await b.close();
});

test('a writer killed inside a roll (a seal past the note, no batch record): nothing to settle, every load agrees', async () => {
  const { machine, open } = setup({ stripeFileBytes: 64 * 1024, preallocBytes: 4096 });
  // The batch fits a stripe file but not the rest of the first one: the roll's new file is being
  // synced at the kill, and no record of the batch was written.
  await killedAtSync(open, machine, 63 * 1024);
  assert.equal((await machine.readdir(`${DIR}/stripes/0`)).filter((f) => f.endsWith('.wal')).length, 2, 'the kill came inside a roll');
  const b = await open(machine.newProcess());
  assert.deepEqual(await seen(b), ['c1', 'c1']);
  const c = await open(machine.newProcess());
  const { token } = await c.acquireFence('takeover');
  assert.deepEqual(await seen(c), ['c1', 'c1']);
  await c.commit(CommitBatch.tryNew('next', token, [bump(X, 1, 'next', 60 * 1024)]));
  assert.deepEqual(await seen(b), ['next', 'c1']);
  await b.close();
  await c.close();
});

test('a writer whose own void failed: its handle answers UNAVAILABLE rather than settle its records; another process settles them for good', async () => {
  const { machine, open } = setup();
  const faulty = new FaultyFs(machine.newProcess());
  const a = await open(faulty);
  const { token } = await a.acquireFence('exclusive');
  await a.commit(CommitBatch.tryNew('c1', token, [
    { scope: X, previous: null, next: 1, head: te.encode('x1') },
    { scope: Y, previous: null, next: 1, head: te.encode('y1') },
  ]));
  // The group's fdatasync fails, then the void's writev (zeros over the frames) fails too: the
  // frames stay complete in the page cache and the answer is INDETERMINATE.
  faulty.fail({ kind: 'datasync', path: STRIPE, error: 'EIO' });
  faulty.fail({ kind: 'writev', path: STRIPE, error: 'EIO', nth: 2 });
  assert.equal(await code(a.commit(CommitBatch.tryNew('bad', token, [bump(X, 1, 'bad'), bump(Y, 1, 'bad')]))), 'INDETERMINATE');
  faulty.clearFaults();
  assert.equal(await code(a.loadHead(X)), 'UNAVAILABLE', 'the poisoned handle does not sync its own failed file again');
  const b = await open(machine.newProcess());
  const first = await seen(b);
  assert.deepEqual(first, ['bad', 'bad'], 'another process settles the unpublished batch (INDETERMINATE allowed either)');
  const c = await open(machine.newProcess());
  await c.acquireFence('takeover');
  assert.deepEqual(await seen(c), first, 'the acquire agrees with the first load');
  for (const s of [a, b, c]) await s.close();
});
