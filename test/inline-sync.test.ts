// Where syncs wait: the InlineSyncPolicy's rule (pool first, inline while the mean is under the
// bound, back to the pool after a slow sync, never with a bound of 0, never for a writer that is
// not alone), the real layer's inline fdatasync, and the host store's use of both: a lone writer's
// syncs go inline, a group beside other work goes to the pool, and `inlineSyncBelowMs: 0` keeps
// every sync on the pool.

import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { InlineSyncPolicy } from '../lib/fs/inline-sync.js';
import { MemoryFs } from '../lib/fs/memory.js';
import { realFs } from '../lib/fs/real.js';
import type { FileHandle, FileSystem, OpenMode, SyncWhere } from '../lib/fs/types.js';
import { CommitBatch, openFsHostStore, type FsHostStoreOptions } from '../lib/host/index.js';

/** A handle whose datasync records where it was asked to wait, and does nothing else. */
function fakeHandle(log: SyncWhere[]): FileHandle {
  return {
    path: '/fake',
    read: () => Promise.resolve(0),
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
  assert.equal(p.where(), 'pool', 'nothing measured yet');
  p.observe(0.3);
  assert.equal(p.where(), 'inline');
  p.observe(40); // a disk stall: the mean passes the bound at once
  assert.ok(p.meanMs! > 1);
  assert.equal(p.where(), 'pool');
  let syncs = 0;
  while (p.where() === 'pool') {
    p.observe(0.3);
    syncs++;
    assert.ok(syncs < 100, 'fast syncs bring the mean back under the bound');
  }
  assert.ok(syncs > 1, 'one fast sync does not undo a stall');
  p.observe(Number.NaN);
  p.observe(-5);
  assert.equal(p.where(), 'inline', 'a reading that is no duration is ignored');
});

test('the policy: a bound of 0 never answers inline; a bound that is no duration is refused', () => {
  const p = new InlineSyncPolicy(0);
  for (let i = 0; i < 20; i++) p.observe(0);
  assert.equal(p.where(), 'pool');
  for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) assert.throws(() => new InlineSyncPolicy(bad), RangeError);
});

test('the policy: only a lone writer syncs inline; every sync is counted', async () => {
  const p = new InlineSyncPolicy(1_000);
  const log: SyncWhere[] = [];
  const h = fakeHandle(log);
  await p.datasync(h, true);
  await p.datasync(h, true);
  await p.datasync(h, false);
  await p.datasync(h, true);
  assert.deepEqual(log, ['pool', 'inline', 'pool', 'inline']);
  assert.notEqual(p.meanMs, null);
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

/** A file system that records where each sync of a stripe file was asked to wait. */
function recordingFs(inner: FileSystem, log: SyncWhere[]): FileSystem {
  const wrap = (h: FileHandle): FileHandle =>
    new Proxy(h, {
      get(target, prop) {
        if (prop === 'datasync' && h.path.endsWith('.wal')) {
          return (where?: SyncWhere) => {
            log.push(where ?? 'pool');
            return target.datasync(where);
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
    return log;
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
