// Tests of FaultyFs: fault rules, short writes, pauses, sever, counters.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { FaultyFs } from '../lib/fs/faulty.js';
import { MemoryFs } from '../lib/fs/memory.js';
import { realFs } from '../lib/fs/real.js';

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const text = (b: Uint8Array | undefined): string | undefined => (b === undefined ? undefined : new TextDecoder().decode(b));

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return String((err as NodeJS.ErrnoException).code);
  }
  return 'ok';
}

test('the nth matching call fails with the chosen errno; the others pass; counters count', async () => {
  const mem = new MemoryFs();
  const f = new FaultyFs(mem);
  const fault = f.fail({ kind: 'datasync', path: 'log', nth: 2 });
  const log = await f.open('/log', 'create');
  const other = await f.open('/other', 'create');
  assert.equal(await code(log.datasync()), 'ok');
  assert.equal(await code(other.datasync()), 'ok', 'another path does not count');
  assert.equal(await code(log.datasync()), 'EIO');
  assert.equal(await code(log.datasync()), 'ok', 'only the nth');
  assert.equal(fault.hits, 1);
  assert.equal(f.failures, 1);
  assert.equal(f.calls.datasync, 4);
  assert.equal(f.calls.open, 2);
  assert.equal(mem.trace.filter((e) => e.kind === 'datasync').length, 3, 'the failed call never reached the inner layer');
});

test('every, times, when, glob, RegExp and destination matching; remove and clearFaults disarm', async () => {
  const f = new FaultyFs(new MemoryFs());
  await f.mkdir('/d');
  const h = await f.open('/d/seg-1', 'create');
  const every = f.fail({ kind: ['write', 'writev'], path: '/d/seg-*', every: true, error: 'ENOSPC' });
  assert.equal(await code(h.write(bytes('x'), 0)), 'ENOSPC');
  assert.equal(await code(h.writev([bytes('x')], 0)), 'ENOSPC');
  every.remove();
  assert.equal(await code(h.write(bytes('x'), 0)), 'ok');
  f.fail({ kind: 'truncate', nth: 1, times: 2 });
  assert.equal(await code(h.truncate(0)), 'EIO');
  assert.equal(await code(h.truncate(0)), 'EIO');
  assert.equal(await code(h.truncate(0)), 'ok');
  f.fail({ kind: 'read', when: (c) => (c.position ?? 0) >= 100 });
  assert.equal(await code(h.read(new Uint8Array(1), 0)), 'ok');
  assert.equal(await code(h.read(new Uint8Array(1), 100)), 'EIO');
  assert.equal(await code(h.read(new Uint8Array(1), 200)), 'EIO', 'a predicate alone picks every call it likes');
  f.fail({ kind: 'rename', path: /final$/ });
  const t = await f.open('/d/tmp', 'create');
  await t.close();
  assert.equal(await code(f.rename('/d/tmp', '/d/final')), 'EIO', 'the destination matches too');
  assert.equal(await code(f.rename('/d/tmp', '/d/final')), 'ok');
  f.fail({ kind: '*', every: true });
  assert.equal(await code(f.stat('/d')), 'EIO');
  f.clearFaults();
  assert.equal(await code(f.stat('/d')), 'ok');
});

test('a short write lands exactly its prefix in the inner layer, then fails', async () => {
  const mem = new MemoryFs();
  const f = new FaultyFs(mem);
  const h = await f.open('/f', 'create');
  await h.write(bytes('0123456789'), 0);
  f.fail({ kind: 'write', shortWrite: 3 });
  assert.equal(await code(h.write(bytes('abcdef'), 2)), 'ENOSPC');
  assert.equal(text(mem.currentImage().files['/f']), '01abc56789');
  f.fail({ kind: 'writev', shortWrite: 4, error: 'EIO' });
  assert.equal(await code(h.writev([bytes('AB'), bytes('CD'), bytes('EF')], 8)), 'EIO');
  assert.equal(text(mem.currentImage().files['/f']), '01abc567ABCD');
  f.fail({ kind: 'write', shortWrite: 100 });
  assert.equal(await code(h.write(bytes('zz'), 0)), 'ENOSPC', 'a prefix longer than the data writes it all, then fails');
  assert.equal(text(mem.currentImage().files['/f']), 'zzabc567ABCD');
});

test('pause holds matching calls until released; others pass meanwhile', async () => {
  const f = new FaultyFs(new MemoryFs());
  const h = await f.open('/f', 'create');
  const pause = f.pause('datasync', '/f');
  let done = false;
  const sync = h.datasync().then(() => {
    done = true;
  });
  const call = await pause.reached;
  assert.equal(call.kind, 'datasync');
  assert.equal(pause.held, 1);
  await h.write(bytes('meanwhile'), 0);
  await new Promise((r) => setImmediate(r));
  assert.equal(done, false, 'still held');
  pause.release();
  await sync;
  assert.equal(done, true);
  assert.equal(await code(h.datasync()), 'ok', 'a released pause holds nothing more');
  const again = f.pause(['write', 'datasync']);
  const w = h.write(bytes('x'), 0);
  await again.reached;
  f.release();
  await w;
});

test('sever: held and later calls reject, inner handles close and their locks are released', async () => {
  const mem = new MemoryFs();
  const f = new FaultyFs(mem);
  const h = await f.open('/lock', 'create');
  assert.equal(await h.tryLock(), true);
  const pause = f.pause('write');
  const held = h.write(bytes('never'), 0);
  await pause.reached;
  await f.sever();
  assert.equal(await code(held), 'ESEVERED');
  assert.equal(await code(h.write(bytes('x'), 0)), 'ESEVERED');
  assert.equal(await code(f.open('/g', 'create')), 'ESEVERED');
  assert.equal(await code(f.syncDir('/')), 'ESEVERED');
  assert.equal(await code(h.close()), 'ok');
  assert.equal(mem.currentImage().files['/lock']?.length, 0, 'the held write never landed');
  const other = await mem.open('/lock', 'write');
  assert.equal(await other.tryLock(), true, 'the lock went with the killed process');
  await other.close();
});

test('sever over the real file system releases the kernel lock', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seglog-faulty-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'LOCK');
  const f = new FaultyFs(realFs);
  const h = await f.open(file, 'create');
  assert.equal(await h.tryLock(), true);
  const second = await realFs.open(file, 'write');
  assert.equal(await second.tryLock(), false);
  await f.sever();
  assert.equal(await second.tryLock(), true);
  await second.close();
});

test('a readv is a read to the fault rules: the nth read fails whichever of the two it is, and never reaches the inner layer', async () => {
  const mem = new MemoryFs();
  const f = new FaultyFs(mem);
  const h = await f.open('/blob', 'create');
  await h.write(bytes('abcdefgh'), 0);
  const fault = f.fail({ kind: 'read', path: 'blob', nth: 2 });
  const a = new Uint8Array(3);
  const b = new Uint8Array(5);
  assert.equal(await h.readv([a, b], 0), 8);
  assert.equal(new TextDecoder().decode(a) + new TextDecoder().decode(b), 'abcdefgh');
  const readsBefore = mem.trace.filter((e) => e.kind === 'read').length;
  await assert.rejects(h.readv([new Uint8Array(4)], 0), (err: NodeJS.ErrnoException) => err.code === 'EIO');
  assert.equal(mem.trace.filter((e) => e.kind === 'read').length, readsBefore, 'the failed readv never reached the inner layer');
  assert.equal(fault.hits, 1);
  assert.equal(await h.readv([new Uint8Array(4)], 4), 4, 'only the nth');
  await h.close();
});
