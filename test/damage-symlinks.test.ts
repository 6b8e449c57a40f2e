// Symbolic links inside a store directory: open never follows one where it expects its own
// leftover or directory, never removes one, and answers CORRUPT naming the path. Runs on the real
// file system (the memory file system has no links), each case in its own temporary directory,
// with a "victim" directory outside the store that must survive untouched.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';

import { isSeglogError } from '../lib/errors.js';
import { FaultyFs } from '../lib/fs/faulty.js';
import { MemoryFs } from '../lib/fs/memory.js';
import { realFs } from '../lib/fs/real.js';
import { openPayloadStore } from '../lib/payloads/index.js';
import { openRaftNode } from '../lib/raft/node.js';

async function withRoot(body: (root: string, victim: string) => Promise<void>): Promise<void> {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-damage-links-'));
  try {
    const victim = path.join(root, 'victim');
    await fsp.mkdir(victim);
    await fsp.writeFile(path.join(victim, 'precious'), 'not the store');
    await body(root, victim);
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
}

function corruptNaming(p: string): (err: unknown) => boolean {
  return (err) => {
    assert.ok(isSeglogError(err, 'CORRUPT'), `expected CORRUPT, got ${String(err)}`);
    assert.equal(err.details['path'], p);
    return true;
  };
}

async function victimIntact(victim: string): Promise<void> {
  assert.deepEqual(await fsp.readdir(victim), ['precious']);
  assert.equal(await fsp.readFile(path.join(victim, 'precious'), 'utf8'), 'not the store');
}

async function isLink(p: string): Promise<boolean> {
  return (await fsp.lstat(p)).isSymbolicLink();
}

test('raft node: a link planted as a groups/tmp-* leftover is CORRUPT, neither followed nor removed', async () => {
  await withRoot(async (root, victim) => {
    const dir = path.join(root, 'node');
    const node = await openRaftNode(dir);
    await node.openGroup('g');
    await node.close();
    const planted = path.join(dir, 'groups', 'tmp-0123456789abcdef');
    await fsp.symlink(victim, planted);
    await assert.rejects(openRaftNode(dir), corruptNaming(planted));
    await victimIntact(victim);
    assert.ok(await isLink(planted), 'the link is left in place');
  });
});

test('raft node: a link inside a groups/tmp-* leftover leaves the whole leftover in place', async () => {
  await withRoot(async (root, victim) => {
    const dir = path.join(root, 'node');
    await (await openRaftNode(dir)).close();
    const leftover = path.join(dir, 'groups', 'tmp-fedcba9876543210');
    await fsp.mkdir(path.join(leftover, 'a'), { recursive: true });
    await fsp.writeFile(path.join(leftover, 'GROUP'), 'leftover');
    await fsp.symlink(victim, path.join(leftover, 'sm'));
    await assert.rejects(openRaftNode(dir), corruptNaming(path.join(leftover, 'sm')));
    await victimIntact(victim);
    assert.deepEqual((await fsp.readdir(leftover)).sort(), ['GROUP', 'a', 'sm'], 'nothing of the leftover was removed');
  });
});

test('raft node: a group directory that is a link is CORRUPT, not opened through it', async () => {
  await withRoot(async (root) => {
    const dir = path.join(root, 'node');
    const node = await openRaftNode(dir);
    await node.openGroup('g');
    await node.close();
    const groups = path.join(dir, 'groups');
    const [name] = await fsp.readdir(groups);
    const real = path.join(root, 'elsewhere');
    await fsp.rename(path.join(groups, name as string), real);
    await fsp.symlink(real, path.join(groups, name as string));
    await assert.rejects(openRaftNode(dir), corruptNaming(path.join(groups, name as string)));
  });
});

test('raft node: a payloads/ directory that is a link is CORRUPT', async () => {
  await withRoot(async (root, victim) => {
    const dir = path.join(root, 'node');
    await fsp.mkdir(dir);
    await fsp.symlink(victim, path.join(dir, 'payloads'));
    await assert.rejects(openRaftNode(dir), corruptNaming(path.join(dir, 'payloads')));
    await victimIntact(victim);
  });
});

test('payload store: a tmp/ that is a link is CORRUPT and nothing behind it is removed', async () => {
  await withRoot(async (root, victim) => {
    const dir = path.join(root, 'payloads');
    await (await openPayloadStore(dir)).close();
    await fsp.rm(path.join(dir, 'tmp'), { recursive: true });
    await fsp.symlink(victim, path.join(dir, 'tmp'));
    await assert.rejects(openPayloadStore(dir), corruptNaming(path.join(dir, 'tmp')));
    await victimIntact(victim);
  });
});

test('payload store: a link to an outside file inside tmp/ is CORRUPT and stays', async () => {
  await withRoot(async (root, victim) => {
    const dir = path.join(root, 'payloads');
    await (await openPayloadStore(dir)).close();
    const planted = path.join(dir, 'tmp', 'put-0000000000000000');
    await fsp.symlink(path.join(victim, 'precious'), planted);
    await assert.rejects(openPayloadStore(dir), corruptNaming(planted));
    await victimIntact(victim);
    assert.ok(await isLink(planted));
  });
});

test('payload store: a new store whose tmp/ is a link is refused before anything is created', async () => {
  await withRoot(async (root, victim) => {
    const dir = path.join(root, 'payloads');
    await fsp.mkdir(dir);
    await fsp.symlink(victim, path.join(dir, 'tmp'));
    await assert.rejects(openPayloadStore(dir), corruptNaming(path.join(dir, 'tmp')));
    await victimIntact(victim);
    assert.deepEqual((await fsp.readdir(dir)).sort(), ['LOCK', 'tmp']);
  });
});

test('lstat: the real file system reports a link as one; memory and faulty answer the entry itself', async () => {
  await withRoot(async (root, victim) => {
    const link = path.join(root, 'link');
    await fsp.symlink(victim, link);
    assert.deepEqual(await realFs.lstat(link), { size: (await fsp.lstat(link)).size, isDirectory: false, isSymbolicLink: true });
    assert.equal((await realFs.stat(link))?.isDirectory, true, 'stat still follows');
    assert.equal(await realFs.lstat(path.join(root, 'absent')), null);
    assert.deepEqual(await realFs.lstat(victim), { size: (await fsp.lstat(victim)).size, isDirectory: true, isSymbolicLink: false });
  });
  const mem = new MemoryFs();
  await mem.mkdir('/d');
  const h = await mem.open('/d/f', 'create');
  await h.write(new Uint8Array(3), 0);
  await h.close();
  assert.deepEqual(await mem.lstat('/d/f'), { size: 3, isDirectory: false, isSymbolicLink: false });
  assert.deepEqual(await mem.lstat('/d'), { size: 0, isDirectory: true, isSymbolicLink: false });
  assert.equal(await mem.lstat('/d/none'), null);
  assert.ok(mem.trace.some((e) => e.kind === 'lstat' && e.path === '/d/f'), 'the memory file system records the call');
  const faulty = new FaultyFs(mem);
  faulty.fail({ kind: 'lstat', path: '/d/f', error: 'EIO' });
  await assert.rejects(faulty.lstat('/d/f'), (err: NodeJS.ErrnoException) => err.code === 'EIO');
  assert.equal(faulty.calls.lstat, 1);
});

test('payload store: a fan-out directory that is a link is CORRUPT; a collection removes nothing behind it', async () => {
  await withRoot(async (root, victim) => {
    const a = await openPayloadStore(path.join(root, 'a'));
    const info = await a.put(
      (async function* () {
        yield new TextEncoder().encode('a payload kept elsewhere');
      })(),
    );
    await a.close();
    const hex = info.digest.slice('sha256:'.length);
    const hh = hex.slice(0, 2);
    // The victim directory holds a valid blob of that digest (a copy from store a).
    await fsp.copyFile(path.join(root, 'a', 'blobs', hh, hex), path.join(victim, hex));
    const dir = path.join(root, 'b');
    await (await openPayloadStore(dir)).close();
    await fsp.symlink(victim, path.join(dir, 'blobs', hh));
    const b = await openPayloadStore(dir, { graceMs: 0 });
    try {
      await assert.rejects(b.collectGarbage(), corruptNaming(path.join(dir, 'blobs', hh)));
      await assert.rejects(b.stat(info.digest), corruptNaming(path.join(dir, 'blobs', hh)));
    } finally {
      await b.close();
    }
    assert.deepEqual((await fsp.readdir(victim)).sort(), [hex, 'precious'].sort());
  });
});
