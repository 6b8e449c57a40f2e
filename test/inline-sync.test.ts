// Where syncs and large writes wait: the InlineSyncPolicy's rule (pool first, inline while the
// mean is under the bound, back to the pool after a slow call, never with a bound of 0, never for
// a writer that is not alone, never while another writer of the thread has work queued or a call
// on the pool), the real layer's inline fdatasync and writev, and their users: a lone host
// writer's and a lone appender's syncs go inline, and so do a lone appender's group writes up to
// 4 MiB; groups beside other work (in the handle or in other logs) go to the pool,
// `inlineSyncBelowMs: 0` keeps every sync and write on the pool, and on the real file system
// commits and appends synced and written inline survive a reopen.

import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { InlineSyncPolicy, othersBusy, setQueued } from '../lib/fs/inline-sync.js';
import { MemoryFs } from '../lib/fs/memory.js';
import { realFs } from '../lib/fs/real.js';
import type { FileHandle, FileSystem, OpenMode, SyncWhere } from '../lib/fs/types.js';
import { CommitBatch, openFsHostStore, type FsHostStoreOptions } from '../lib/host/index.js';
import { openRaftNode } from '../lib/raft/index.js';
import { openSegmentedLog } from '../segments/index.js';

/** A handle whose datasync records where it was asked to wait, and does nothing else. */
function fakeHandle(log: SyncWhere[]): FileHandle {
  return {
    path: '/fake',
    read: () => Promise.resolve(0),
    readv: () => Promise.resolve(0),
    write: () => Promise.resolve(),
    writev: () => Promise.resolve(),
    datasync: (where?: SyncWhere) => {
      log.push(where ?? 'pool');
      return Promise.resolve();
    },
    sync: () => Promise.resolve(),
    truncate: () => Promise.resolve(),
    size: () => Promise.resolve(0),
    tryLock: () => Promise.resolve(true),
    unlock: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
}

test('the policy: the first sync goes to the pool; inline while the mean stays under the bound; a slow sync sends the next ones to the pool', () => {
  const p = new InlineSyncPolicy(1);
  const me = {};
  assert.equal(p.where(true, me), 'pool', 'nothing measured yet');
  p.observe(0.3);
  assert.equal(p.where(true, me), 'inline');
  p.observe(40); // a disk stall: the mean passes the bound at once
  assert.ok(p.meanMs! > 1);
  assert.equal(p.where(true, me), 'pool');
  let syncs = 0;
  while (p.where(true, me) === 'pool') {
    p.observe(0.3);
    syncs++;
    assert.ok(syncs < 100, 'fast syncs bring the mean back under the bound');
  }
  assert.ok(syncs > 1, 'one fast sync does not undo a stall');
  p.observe(Number.NaN);
  p.observe(-5);
  assert.equal(p.where(true, me), 'inline', 'a reading that is no duration is ignored');
});

test('the policy: a bound of 0 never answers inline; a bound that is no duration is refused', () => {
  const p = new InlineSyncPolicy(0);
  for (let i = 0; i < 20; i++) p.observe(0);
  assert.equal(p.where(true, {}), 'pool');
  for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) assert.throws(() => new InlineSyncPolicy(bad), RangeError);
});

test('the policy: only a lone writer syncs inline; every sync is counted', async () => {
  const p = new InlineSyncPolicy(1_000);
  const me = {};
  const log: SyncWhere[] = [];
  const h = fakeHandle(log);
  await p.datasync(h, true, me);
  await p.datasync(h, true, me);
  await p.datasync(h, false, me);
  await p.datasync(h, true, me);
  assert.deepEqual(log, ['pool', 'inline', 'pool', 'inline']);
  assert.notEqual(p.meanMs, null);
});

test('the policy: no inline sync while another writer of the thread has work queued or a sync on the pool', async () => {
  const p = new InlineSyncPolicy(1_000);
  p.observe(0);
  const me = {};
  const other = {};
  assert.equal(p.where(true, me), 'inline');
  setQueued(me, true);
  assert.equal(p.where(true, me), 'inline', "the writer's own queue is its own business");
  setQueued(other, true);
  assert.ok(othersBusy(me));
  assert.equal(p.where(true, me), 'pool');
  setQueued(other, true); // idempotent
  setQueued(other, false);
  setQueued(me, false);
  assert.equal(p.where(true, me), 'inline');
  // A sync of another writer waiting on the pool: this one goes to the pool too.
  let answer: () => void = () => undefined;
  const slow: FileHandle = { ...fakeHandle([]), datasync: () => new Promise<void>((r) => (answer = r)) };
  const q = new InlineSyncPolicy(1_000);
  const pending = q.datasync(slow, false, other);
  assert.ok(othersBusy(me));
  assert.equal(p.where(true, me), 'pool');
  answer();
  await pending;
  assert.equal(p.where(true, me), 'inline');
});

test('the real layer: an inline datasync makes the data durable like a pool one, and a closed handle rejects it with EBADF', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'seglog-inline-'));
  try {
    const h = await realFs.open(path.join(dir, 'f'), 'create');
    await h.write(new TextEncoder().encode('inline'), 0);
    await h.datasync('inline');
    await h.datasync('pool');
    await h.close();
    assert.equal(await readFile(path.join(dir, 'f'), 'utf8'), 'inline');
    const p = h.datasync('inline'); // answers with a promise even when the call fails at once
    await assert.rejects(p, (err: NodeJS.ErrnoException) => err.code === 'EBADF');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('the real layer: an inline writev writes every chunk like a pool one, and a closed handle rejects it with EBADF', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'seglog-inline-'));
  try {
    const h = await realFs.open(path.join(dir, 'f'), 'create');
    // Past the size the layer writes synchronously anyway, so that 'inline' is what decides.
    const chunks = [Buffer.alloc(20_000, 1), Buffer.alloc(0), Buffer.alloc(300_000, 2), Buffer.alloc(7, 3)];
    await h.writev(chunks, 10, 'inline');
    await h.writev(chunks, 10 + 320_007, 'pool');
    await h.close();
    const expected = Buffer.concat([Buffer.alloc(10), ...chunks, ...chunks]);
    assert.ok((await readFile(path.join(dir, 'f'))).equals(expected));
    const p = h.writev(chunks, 0, 'inline');
    await assert.rejects(p, (err: NodeJS.ErrnoException) => err.code === 'EBADF');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('the policy: run() makes the call wait where it is told, times it, and counts a pool call as busy while it runs', async () => {
  const p = new InlineSyncPolicy(1_000);
  const me = {};
  const seen: SyncWhere[] = [];
  await p.run('inline', (w) => {
    seen.push(w);
    return Promise.resolve();
  });
  assert.ok(p.meanMs !== null && p.fast());
  let answer!: () => void;
  const pending = p.run('pool', (w) => {
    seen.push(w);
    return new Promise<void>((r) => (answer = r));
  });
  assert.equal(othersBusy(me), true, 'a pool call of a policy is outstanding');
  answer();
  await pending;
  assert.equal(othersBusy(me), false);
  assert.deepEqual(seen, ['inline', 'pool']);
  await assert.rejects(p.run('pool', () => Promise.reject(new Error('EIO'))), /EIO/);
  assert.equal(othersBusy(me), false, 'a failed pool call is no longer counted');
});

/**
 * A file system that records where each sync of a file named `*<suffix>` was asked to wait (and,
 * into `writes`, each writev of one).
 */
function recordingFs(inner: FileSystem, log: SyncWhere[], suffix = '.wal', writes: SyncWhere[] = []): FileSystem {
  const wrap = (h: FileHandle): FileHandle =>
    new Proxy(h, {
      get(target, prop) {
        if (prop === 'datasync' && h.path.endsWith(suffix)) {
          return (where?: SyncWhere) => {
            log.push(where ?? 'pool');
            return target.datasync(where);
          };
        }
        if (prop === 'writev' && h.path.endsWith(suffix)) {
          return (chunks: readonly Uint8Array[], position: number, where?: SyncWhere) => {
            writes.push(where ?? 'pool');
            return target.writev(chunks, position, where);
          };
        }
        const v = Reflect.get(target, prop) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'open') return async (p: string, mode: OpenMode) => wrap(await target.open(p, mode));
      const v = Reflect.get(target, prop) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

async function hostRun(options: FsHostStoreOptions, writers: number, commitsEach: number): Promise<SyncWhere[]> {
  const log: SyncWhere[] = [];
  const machine = new MemoryFs({ trace: false });
  const store = await openFsHostStore('/realm', { fs: recordingFs(machine.newProcess(), log), bootId: () => 'boot', stripes: 2, lockLingerMs: 0, ...options });
  try {
    const { token } = await store.acquireFence('exclusive');
    log.length = 0; // the acquire's own syncs are not groups
    await Promise.all(
      Array.from({ length: writers }, async (_, w) => {
        const scope = { kind: 'session' as const, name: `s${w}` };
        for (let v = 0; v < commitsEach; v++) {
          await store.commit(CommitBatch.tryNew(`w${w}-c${v + 1}`, token, [{ scope, previous: v === 0 ? null : v, next: v + 1, head: new Uint8Array([v]) }]));
        }
      }),
    );
    // The groups' syncs only: a close also syncs the stripes whose zero-filled tails it gives back.
    return [...log];
  } finally {
    await store.close();
  }
}

// A bound no sync can reach: what is tested is the loneness rule, not this machine's timing.
const ANY_DURATION = 1e9;

test('the host store: a lone writer syncs inline after its first group; writers side by side sync on the pool', async () => {
  const lone = await hostRun({ inlineSyncBelowMs: ANY_DURATION }, 1, 10);
  assert.equal(lone.length, 10);
  assert.deepEqual(lone.slice(1), Array(9).fill('inline'));
  const many = await hostRun({ inlineSyncBelowMs: ANY_DURATION }, 40, 3);
  assert.ok(many.length > 0);
  assert.ok(many.filter((w) => w === 'pool').length >= many.length / 2, `most groups beside other work sync on the pool: ${many.join(',')}`);
});

test('the host store: inlineSyncBelowMs 0 keeps every sync on the pool; a bound that is no duration is INVALID', async () => {
  const never = await hostRun({ inlineSyncBelowMs: 0 }, 1, 10);
  assert.deepEqual(never, Array(10).fill('pool'));
  for (const bad of [-1, Number.NaN, 'fast']) {
    await assert.rejects(
      openFsHostStore('/realm', { fs: new MemoryFs({ trace: false }).newProcess(), bootId: () => 'boot', inlineSyncBelowMs: bad as number }),
      (err: { code?: string }) => err.code === 'INVALID',
    );
  }
});

test('segmented logs: a lone appender syncs inline after its first sync; appenders of several logs at once sync on the pool', async () => {
  const machine = new MemoryFs({ trace: false });
  const log: SyncWhere[] = [];
  const fs = recordingFs(machine, log, '.seg');
  const one = await openSegmentedLog('/logs/one', { fs, inlineSyncBelowMs: ANY_DURATION });
  log.length = 0; // the new segment's own sync
  for (let i = 0; i < 10; i++) await one.append([new Uint8Array([i])]);
  await one.close();
  assert.equal(log.length, 10);
  assert.deepEqual(log.slice(1), Array(9).fill('inline'));

  log.length = 0;
  const many = await Promise.all(Array.from({ length: 8 }, (_, k) => openSegmentedLog(`/logs/m${k}`, { fs, inlineSyncBelowMs: ANY_DURATION })));
  for (const l of many) await l.append([new Uint8Array([0])]); // each log's first sync (pool, nothing measured)
  log.length = 0;
  await Promise.all(many.map(async (l) => {
    for (let i = 0; i < 5; i++) await l.append([new Uint8Array([i])]);
  }));
  for (const l of many) await l.close();
  assert.ok(log.length >= 8 * 5 / 2);
  assert.ok(log.filter((w) => w === 'pool').length >= log.length / 2, `logs side by side sync on the pool: ${log.join(',')}`);
});

test('segmented logs: appends a log holds back (write-behind) are not queued work: a lone appender of another log still syncs inline', async () => {
  const machine = new MemoryFs({ trace: false });
  const log: SyncWhere[] = [];
  const fs = recordingFs(machine, log, '.seg');
  const held = await openSegmentedLog('/logs/held', { fs, inlineSyncBelowMs: ANY_DURATION });
  const lone = await openSegmentedLog('/logs/lone', { fs, inlineSyncBelowMs: ANY_DURATION });
  (held as unknown as { setWriteBehind(bytes: number): void }).setWriteBehind(1 << 20);
  // Staged, not awaited: held back until a megabyte of frames waits, or a sync or the close.
  const staged = held.stage([new Uint8Array(100)]);
  assert.equal(othersBusy({}), false, 'a held queue waits for no turn of the event loop');
  log.length = 0;
  for (let i = 0; i < 6; i++) await lone.append([new Uint8Array([i])]);
  assert.deepEqual(log.slice(1), Array(5).fill('inline'), `the lone appender's syncs: ${log.join(',')}`);
  // Released (the threshold lifted): queued work again until it is written.
  (held as unknown as { setWriteBehind(bytes: number): void }).setWriteBehind(0);
  assert.equal(othersBusy({}), true, 'released appends wait for the writer');
  await held.sync();
  await staged.durable;
  assert.equal(othersBusy({}), false);
  await held.close();
  await lone.close();
});

test('segmented logs: a lone group of up to 4 MiB is written inline after the first; groups with a call queued behind them, and larger ones, on the pool', async () => {
  const machine = new MemoryFs({ trace: false });
  const syncs: SyncWhere[] = [];
  const writes: SyncWhere[] = [];
  const fs = recordingFs(machine, syncs, '.seg', writes);
  const l = await openSegmentedLog('/logs/big', { fs, inlineSyncBelowMs: ANY_DURATION, segmentBytes: 64 * 1024 * 1024 });
  const record = (i: number, bytes = 256 * 1024): Uint8Array => new Uint8Array(bytes).fill(i);
  writes.length = 0; // the new segment's header
  for (let i = 0; i < 6; i++) await l.append([record(i)]);
  assert.deepEqual(writes, ['pool', ...Array(5).fill('inline')], 'lone appends: the first group on the pool, the rest inline');

  // Appends staged together form one lone group (inline); a group with a call queued behind it
  // (here a sync) is written on the pool.
  writes.length = 0;
  const staged = Array.from({ length: 4 }, (_, i) => l.stage([record(10 + i)]));
  await Promise.all(staged.map((s) => s.durable));
  assert.deepEqual(writes, ['inline'], 'appends staged together: one lone group');
  writes.length = 0;
  const behind = l.stage([record(14)]);
  await Promise.all([behind.durable, l.sync()]);
  assert.deepEqual(writes, ['pool'], 'a group with a call queued behind it');

  // One append of 5 MiB: past the bound, on the pool.
  writes.length = 0;
  await l.append(Array.from({ length: 5 }, (_, i) => record(20 + i, 1024 * 1024)));
  assert.deepEqual(writes, ['pool']);
  const all = await l.read(0, 100, 1 << 30);
  assert.equal(all.length, 16);
  await l.close();
});

test('segmented logs and Raft nodes: inlineSyncBelowMs 0 keeps every sync and write on the pool; a bound that is no duration is INVALID', async () => {
  const machine = new MemoryFs({ trace: false });
  const log: SyncWhere[] = [];
  const writes: SyncWhere[] = [];
  const l = await openSegmentedLog('/logs/never', { fs: recordingFs(machine, log, '.seg', writes), inlineSyncBelowMs: 0 });
  log.length = 0;
  writes.length = 0;
  for (let i = 0; i < 5; i++) await l.append([new Uint8Array(100_000).fill(i)]);
  await l.close();
  assert.deepEqual(log, Array(5).fill('pool'));
  assert.deepEqual(writes, Array(5).fill('pool'));
  for (const bad of [-1, Number.NaN, 'fast']) {
    await assert.rejects(openSegmentedLog('/logs/bad', { fs: machine, inlineSyncBelowMs: bad as number }), (err: { code?: string }) => err.code === 'INVALID');
    await assert.rejects(openRaftNode('/node', { fs: machine, inlineSyncBelowMs: bad as number }), (err: { code?: string }) => err.code === 'INVALID');
  }
});

test('on the real file system: a lone writer syncing inline loses nothing (host store and segmented log reopened)', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'seglog-inline-real-'));
  try {
    const where: SyncWhere[] = [];
    const store = await openFsHostStore(path.join(dir, 'realm'), { fs: recordingFs(realFs, where), inlineSyncBelowMs: ANY_DURATION });
    const { token } = await store.acquireFence('exclusive');
    const scope = { kind: 'session' as const, name: 'one' };
    for (let v = 0; v < 20; v++) {
      await store.commit(CommitBatch.tryNew(`c${v + 1}`, token, [{ scope, previous: v === 0 ? null : v, next: v + 1, head: new Uint8Array([v]), append: [new Uint8Array([v, v])] }]));
    }
    await store.close();
    assert.ok(where.filter((w) => w === 'inline').length >= 18, `the commits synced inline: ${where.join(',')}`);
    const again = await openFsHostStore(path.join(dir, 'realm'));
    const head = await again.loadHead(scope);
    assert.equal(head?.version, 20);
    assert.equal((await again.readRows(scope, 0, 100)).length, 20);
    await again.close();

    where.length = 0;
    const writes: SyncWhere[] = [];
    const log = await openSegmentedLog(path.join(dir, 'log'), { fs: recordingFs(realFs, where, '.seg', writes), inlineSyncBelowMs: ANY_DURATION });
    // Every other record is large (its group is written inline, CRC in its header) or small.
    const record = (i: number): Uint8Array => new Uint8Array(i % 2 === 0 ? 300_000 + i : 1).fill(i);
    for (let i = 0; i < 20; i++) await log.append([record(i)]);
    await log.close();
    assert.ok(where.filter((w) => w === 'inline').length >= 18, `the appends synced inline: ${where.join(',')}`);
    assert.ok(writes.filter((w) => w === 'inline').length >= 18, `the groups were written inline: ${writes.join(',')}`);
    const reopened = await openSegmentedLog(path.join(dir, 'log'));
    const back = await reopened.read(0, 100, 1 << 30);
    assert.equal(back.length, 20);
    for (let i = 0; i < 20; i++) assert.ok(Buffer.from(back[i]!).equals(Buffer.from(record(i))), `record ${i}`);
    await reopened.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
