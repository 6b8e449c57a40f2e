// The fs host store under I/O faults (FaultyFs over a simulated machine): EIO and ENOSPC on the
// stripe write, on its fdatasync and on the published note; a failed void; faults on loads and on
// the fence. Each answer must be typed (UNAVAILABLE when nothing was applied, INDETERMINATE when
// the outcome is unknown); nothing acknowledged may be lost (to another process, and on the disk
// a power loss would leave); a batch answered UNAVAILABLE or INDETERMINATE (after a void that
// reached the page cache) never shows later, even when other processes write the same stripe.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../lib/clock.js';
import { FaultyFs, type FaultRule } from '../lib/fs/faulty.js';
import { MemoryFs } from '../lib/fs/memory.js';
import type { FileSystem } from '../lib/fs/types.js';
import { CommitBatch, FenceTiming, openFsHostStore, type FsHostStore, type ScopeRef, type ScopeUpdate } from '../lib/host/index.js';

const DIR = '/realm';
const te = new TextEncoder();
const X: ScopeRef = { kind: 'session', name: 'x' };

function setup(): { machine: MemoryFs; open: (fs: FileSystem, boot?: string) => Promise<FsHostStore> } {
  const machine = new MemoryFs({ trace: false });
  const clock = new ManualClock(1_000_000);
  const timing = FenceTiming.tryNew(1000, 3000);
  const open = (fs: FileSystem, boot = 'boot-1'): Promise<FsHostStore> =>
    openFsHostStore(DIR, { fs, clock, timing, bootId: () => boot, stripes: 1, lockLingerMs: 0, lockWaitMs: 2000, holderId: `h-${Math.random()}` });
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

function next(version: number, tag: string): ScopeUpdate[] {
  return [{ scope: X, previous: version, next: version + 1, head: te.encode(tag), append: [te.encode(`${tag}-row`)] }];
}

/** What a fresh process sees of X: its commit id and rows (null when absent). */
async function seen(store: FsHostStore): Promise<{ commitId: string; version: number; rows: string[] } | null> {
  const h = await store.loadHead(X);
  if (h === null) return null;
  const rows = await store.readRows(X, 0, 100);
  return { commitId: h.commitId, version: h.version, rows: rows.map((r) => Buffer.from(r.data).toString()) };
}

/** A writer over a FaultyFs holding the fence, with X committed twice (c1, c2). */
async function writerWithTwoCommits(): Promise<{ machine: MemoryFs; open: ReturnType<typeof setup>['open']; faulty: FaultyFs; a: FsHostStore; token: number }> {
  const { machine, open } = setup();
  const faulty = new FaultyFs(machine.newProcess());
  const a = await open(faulty);
  const { token } = await a.acquireFence('exclusive');
  await a.commit(CommitBatch.tryNew('c1', token, [{ scope: X, previous: null, next: 1, head: te.encode('h1'), append: [te.encode('r1')] }]));
  await a.commit(CommitBatch.tryNew('c2', token, next(1, 'c2')));
  return { machine, open, faulty, a, token };
}

/**
 * A writer that committed `acked` batches, then met `rule` inside batch `bad`: answers the code, and
 * checks what a second process and the power-loss image (durable only) show.
 */
async function faultInCommit(rules: FaultRule[]): Promise<{ answer: string; after: string; other: Awaited<ReturnType<typeof seen>>; durable: Awaited<ReturnType<typeof seen>>; laterWrites: Awaited<ReturnType<typeof seen>> }> {
  const { machine, open, faulty, a, token } = await writerWithTwoCommits();
  for (const rule of rules) faulty.fail(rule);
  const answer = await code(a.commit(CommitBatch.tryNew('bad', token, next(2, 'bad'))));
  faulty.clearFaults();
  // The stripe is poisoned in this handle: later commits refuse until a reopen.
  const after = await code(a.commit(CommitBatch.tryNew('c3', token, next(2, 'c3'))));
  const b = await open(machine.newProcess());
  const other = await seen(b);
  // Another process writes the same stripe (adopting what it finds): the failed batch stays out.
  const grant = await b.acquireFence('takeover');
  const base = (await b.loadHead(X))!.version;
  await b.commit(CommitBatch.tryNew('later', grant.token, next(base, 'later')));
  const laterWrites = await seen(b);
  await b.close();
  const disk = new MemoryFs({ image: machine.durableImage(), trace: false });
  const c = await open(disk, 'boot-2');
  const durable = await seen(c);
  await c.close();
  await a.close();
  return { answer, after, other, durable, laterWrites };
}

const STRIPE = /\.wal$/;

for (const [what, rules, expected] of [
  ['EIO on the stripe writev', [{ kind: 'writev', path: STRIPE, error: 'EIO' }], 'UNAVAILABLE'],
  ['ENOSPC after a short stripe write', [{ kind: 'writev', path: STRIPE, shortWrite: 40 }], 'UNAVAILABLE'],
  ['EIO on the stripe fdatasync (the void holds)', [{ kind: 'datasync', path: STRIPE, error: 'EIO' }], 'UNAVAILABLE'],
  ['ENOSPC on the stripe fdatasync (the void holds)', [{ kind: 'datasync', path: STRIPE, error: 'ENOSPC' }], 'UNAVAILABLE'],
  ['EIO on the published note', [{ kind: 'write', path: /published$/, error: 'EIO' }], 'UNAVAILABLE'],
  ['EIO on the fdatasync and on the void sync', [{ kind: 'datasync', path: STRIPE, error: 'EIO', times: 2 }], 'INDETERMINATE'],
] as const) {
  test(`a fault in a commit: ${what} answers ${expected}; nothing acknowledged is lost; the batch never shows`, async () => {
    const r = await faultInCommit([...rules] as FaultRule[]);
    assert.equal(r.answer, expected);
    assert.equal(r.after, 'UNAVAILABLE', 'the poisoned stripe refuses later commits of the handle');
    const acked = { commitId: 'c2', version: 2, rows: ['r1', 'c2-row'] };
    assert.deepEqual(r.other, acked, 'another process sees every acknowledged batch and not the failed one');
    assert.deepEqual(r.laterWrites, { commitId: 'later', version: 3, rows: ['r1', 'c2-row', 'later-row'] }, 'later writes by another process do not revive it');
    assert.deepEqual(r.durable, r.laterWrites, 'the disk after a power loss holds the acknowledged batches, not the failed one');
  });
}

test('a fault in a commit whose void cannot even be written answers INDETERMINATE', async () => {
  // The group's writev fails, and so does the void's (a writev of zeros over the group's frames).
  const r = await faultInCommit([{ kind: 'writev', path: STRIPE, error: 'EIO', times: 2 }]);
  assert.equal(r.answer, 'INDETERMINATE');
  // Nothing was written (the writev failed before writing), so nothing can land.
  assert.equal(r.other?.commitId, 'c2');
  assert.equal(r.laterWrites?.commitId, 'later');
});

test('faults on loads answer UNAVAILABLE and change nothing; the handle serves again afterwards', async () => {
  const { machine, open } = setup();
  const faulty = new FaultyFs(machine.newProcess());
  const a = await open(faulty);
  const { token } = await a.acquireFence('exclusive');
  await a.commit(CommitBatch.tryNew('c1', token, [{ scope: X, previous: null, next: 1, head: te.encode('h1'), append: [te.encode('r1')] }]));
  const b = await open(machine.newProcess());
  await b.commit(CommitBatch.tryNew('c2', token, next(1, 'c2')));
  const f = faulty.fail({ kind: 'read', path: /(published|\.wal)$/, error: 'EIO', every: true });
  assert.equal(await code(a.loadHead(X)), 'UNAVAILABLE');
  assert.equal(await code(a.readRows(X, 0, 10)), 'UNAVAILABLE');
  assert.equal(await code(a.listHeads('session', null, 10)), 'UNAVAILABLE');
  f.remove();
  assert.deepEqual(await seen(a), { commitId: 'c2', version: 2, rows: ['r1', 'c2-row'] });
  await a.close();
  await b.close();
});

test('a fault in an acquire answers UNAVAILABLE; tokens still only grow', async () => {
  const { machine, open } = setup();
  const faulty = new FaultyFs(machine.newProcess());
  const a = await open(faulty);
  const g1 = await a.acquireFence('exclusive');
  // The fence state's sync fails: nothing is granted.
  faulty.fail({ kind: 'datasync', path: /fence\/state$/, error: 'EIO' });
  assert.equal(await code(a.acquireFence('takeover')), 'UNAVAILABLE');
  faulty.clearFaults();
  const g2 = await a.acquireFence('takeover');
  assert.ok(g2.token > g1.token);
  // The FENCE record's write fails in a stripe: UNAVAILABLE, and the stripe is poisoned here.
  faulty.fail({ kind: 'writev', path: STRIPE, error: 'EIO' });
  assert.equal(await code(a.acquireFence('takeover')), 'UNAVAILABLE');
  faulty.clearFaults();
  const b = await open(machine.newProcess());
  const g3 = await b.acquireFence('takeover');
  assert.ok(g3.token > g2.token + 1, 'the token the failed acquire recorded is never issued again');
  // The old holders' tokens are fenced out.
  assert.equal(await code(b.commit(CommitBatch.tryNew('old', g2.token, [{ scope: X, previous: null, next: 1, head: te.encode('h') }]))), 'FENCED_OUT');
  await b.commit(CommitBatch.tryNew('new', g3.token, [{ scope: X, previous: null, next: 1, head: te.encode('h') }]));
  await a.close();
  await b.close();
});

test('a failed group of two commits is voided whole: the retry of the first (same size, same place) never brings back the second', async () => {
  const { machine, open } = setup();
  const faulty = new FaultyFs(machine.newProcess());
  const a = await open(faulty);
  const { token } = await a.acquireFence('exclusive');
  const Y: ScopeRef = { kind: 'session', name: 'y' };
  const bx = CommitBatch.tryNew('bx', token, [{ scope: X, previous: null, next: 1, head: te.encode('x1'), append: [te.encode('rx')] }]);
  const by = CommitBatch.tryNew('by', token, [{ scope: Y, previous: null, next: 1, head: te.encode('y1'), append: [te.encode('ry')] }]);
  faulty.fail({ kind: 'datasync', path: STRIPE, error: 'EIO' });
  // Issued in one turn: one group, two frames, one failed fdatasync.
  assert.deepEqual(await Promise.all([code(a.commit(bx)), code(a.commit(by))]), ['UNAVAILABLE', 'UNAVAILABLE']);
  faulty.clearFaults();
  const b = await open(machine.newProcess());
  assert.equal(await b.loadHead(Y), null, 'the second batch does not show after the void');
  assert.equal(await code(b.commit(bx)), 'ok', 'the retry of the first batch lands');
  // A later commit in the stripe adopts whatever follows the retry: nothing may.
  const Z: ScopeRef = { kind: 'session', name: 'z' };
  const c = await open(machine.newProcess());
  assert.equal(await code(c.commit(CommitBatch.tryNew('bz', token, [{ scope: Z, previous: null, next: 1, head: te.encode('z1') }]))), 'ok');
  const d = await open(machine.newProcess());
  assert.equal(await d.loadHead(Y), null, 'a batch answered UNAVAILABLE never shows');
  assert.equal((await d.loadHead(X))?.commitId, 'bx');
  for (const s of [a, b, c, d]) await s.close();
});

// A checkpoint round that meets a fault: in the scope table's write, its fdatasync, the checkpoint
// cell, or a home it moves. The round answers UNAVAILABLE; every load (this handle, another process,
// the power-loss image) shows exactly what was committed; the next round completes; nothing a round
// cut short left behind is ever read.
for (const [what, rule] of [
  ['the scope table write (ENOSPC, short)', { kind: 'writev', path: '*.tbl', shortWrite: 100 }],
  ['the scope table fdatasync (EIO)', { kind: 'datasync', path: '*.tbl' }],
  ['the checkpoint cell (EIO)', { kind: ['write', 'writev'], path: '*/checkpoint' }],
  ["a home's row file (EIO)", { kind: ['write', 'writev'], path: '*/r-*' }],
] as [string, FaultRule][]) {
  test(`a fault in a checkpoint round: ${what} answers UNAVAILABLE; loads show what was committed; the next round completes`, async () => {
    const { machine, open } = setup();
    const faulty = new FaultyFs(machine.newProcess());
    const a = await open(faulty);
    const { token } = await a.acquireFence('exclusive');
    const scopes: ScopeRef[] = Array.from({ length: 6 }, (_, i) => ({ kind: 'session', name: `s${i}` }));
    const big = (i: number): Uint8Array => new Uint8Array(9000).fill(i);
    for (const [i, scope] of scopes.entries()) {
      // s0 outgrows the scope table (a home); the others stay small.
      const append = i === 0 ? [big(1), big(2)] : [te.encode(`row-${i}`)];
      await a.commit(CommitBatch.tryNew(`c${i}`, token, [{ scope, previous: null, next: 1, head: te.encode(`h-${i}`), append }]));
    }
    const want = async (store: FsHostStore): Promise<void> => {
      for (const [i, scope] of scopes.entries()) {
        const h = await store.loadHead(scope);
        assert.equal(h?.commitId, `c${i}`, `${scope.name}`);
        assert.equal((await store.readRows(scope, 0, 10)).length, i === 0 ? 2 : 1);
      }
      let listed = 0;
      for (let after: string | null = null, page = 0; page < 10; page++) {
        const p = await store.listHeads('session', after, 2);
        listed += p.heads.length;
        if (p.next === null) break;
        after = p.next;
      }
      assert.equal(listed, scopes.length);
    };
    faulty.fail(rule);
    assert.equal(await code(a.checkpoint()), 'UNAVAILABLE');
    faulty.clearFaults();
    await want(a);
    const b = await open(machine.newProcess());
    await want(b);
    assert.equal(await b.checkpoint(), true, 'the next round completes');
    await want(b);
    await want(a);
    await b.close();
    await a.close();
    const disk = new MemoryFs({ image: machine.durableImage(), trace: false });
    const c = await open(disk, 'boot-2');
    await want(c);
    await c.close();
  });
}

// The trim of the stripes' zero-filled tails at close (docs/host-store.md, "Close") meets a fault:
// in the truncate, or in the fdatasync after it. The trim is best effort: close still resolves,
// nothing committed is lost (to another process, and on the disk a power loss would leave), and the
// next writer of the stripe commits on after the cut or the uncut tail.
for (const [what, rule] of [
  ['the truncate (EIO)', { kind: 'truncate', path: STRIPE }],
  ['the fdatasync after the cut (EIO)', { kind: 'datasync', path: STRIPE }],
] as [string, FaultRule][]) {
  test(`a fault in the stripe trim at close: ${what}; close resolves; nothing committed is lost; the next writer goes on`, async () => {
    const { machine, open, faulty, a } = await writerWithTwoCommits();
    const fault = faulty.fail(rule);
    await a.close();
    assert.equal(fault.hits, 1, 'the trim met the fault');
    faulty.clearFaults();
    const want = { commitId: 'c2', version: 2, rows: ['r1', 'c2-row'] };
    const b = await open(machine.newProcess());
    assert.deepEqual(await seen(b), want);
    const grant = await b.acquireFence('takeover');
    await b.commit(CommitBatch.tryNew('c3', grant.token, next(2, 'c3')));
    await b.close();
    const disk = new MemoryFs({ image: machine.durableImage(), trace: false });
    const c = await open(disk, 'boot-2');
    assert.deepEqual(await seen(c), { commitId: 'c3', version: 3, rows: ['r1', 'c2-row', 'c3-row'] });
    await c.close();
  });
}
