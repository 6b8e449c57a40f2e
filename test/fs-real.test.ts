// The real file-system layer's handles after close: every call rejects with EBADF and touches no
// other file. A closed descriptor's number is reused by the next open in the process, so a late
// call through a stale handle would otherwise read, write or lock whatever file got that number.

import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { realFs } from '../lib/fs/real.js';

test('a closed real handle answers EBADF to every call and leaves the file that reused its descriptor alone', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'seglog-fs-real-'));
  try {
    const stale = await realFs.open(join(dir, 'a'), 'create');
    await stale.write(new TextEncoder().encode('aaaa'), 0);
    await stale.close();
    // Likely to get the descriptor number `stale` had.
    const other = await realFs.open(join(dir, 'b'), 'create');
    await other.write(new TextEncoder().encode('bbbb'), 0);
    const calls: [string, () => Promise<unknown>][] = [
      ['read', () => stale.read(new Uint8Array(4), 0)],
      ['readv', () => stale.readv([new Uint8Array(2), new Uint8Array(2)], 0)],
      ['write', () => stale.write(new TextEncoder().encode('XXXX'), 0)],
      ['writev', () => stale.writev([new TextEncoder().encode('XXXX')], 0)],
      ['datasync', () => stale.datasync()],
      ['datasync inline', () => stale.datasync('inline')],
      ['sync', () => stale.sync()],
      ['truncate', () => stale.truncate(0)],
      ['size', () => stale.size()],
      ['tryLock', () => stale.tryLock()],
      ['unlock', () => stale.unlock()],
    ];
    for (const [name, call] of calls) {
      await assert.rejects(call(), (err: NodeJS.ErrnoException) => err.code === 'EBADF', `${name} after close`);
    }
    // The file that may hold the old number is untouched, and its lock is free for it.
    assert.equal(await readFile(join(dir, 'b'), 'utf8'), 'bbbb');
    assert.equal(await other.tryLock(), true);
    await other.close();
    await stale.close(); // closing twice is harmless
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
