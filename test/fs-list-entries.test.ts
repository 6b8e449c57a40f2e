// The directory listing with kinds (FileSystem.readdirEntries, lib/fs/own-entry.ts listEntries):
// the real layer's answer (d_type), the fallback of a layer without the call (readdir + lstat),
// and MemoryFs's agree; a symbolic link is reported as one, never followed; a missing directory
// is ENOENT.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';

import { MemoryFs } from '../lib/fs/memory.js';
import { FaultyFs } from '../lib/fs/faulty.js';
import { listEntries } from '../lib/fs/own-entry.js';
import { realFs } from '../lib/fs/real.js';
import type { DirEntry, FileSystem } from '../lib/fs/types.js';

const sorted = (xs: DirEntry[]): DirEntry[] => [...xs].sort((a, b) => (a.name < b.name ? -1 : 1));

test('listEntries: real, fallback and faulty layers agree; links are links; a missing directory is ENOENT', async () => {
  const dir = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-list-'));
  try {
    await fsp.writeFile(path.join(dir, 'f'), 'x');
    await fsp.mkdir(path.join(dir, 'd'));
    await fsp.symlink(path.join(dir, 'd'), path.join(dir, 'to-d'));
    await fsp.symlink(path.join(dir, 'nowhere'), path.join(dir, 'dangling'));
    const want: DirEntry[] = [
      { name: 'd', kind: 'directory' },
      { name: 'dangling', kind: 'symlink' },
      { name: 'f', kind: 'file' },
      { name: 'to-d', kind: 'symlink' },
    ];
    const fallback: FileSystem = { ...realFs, readdirEntries: undefined };
    assert.deepEqual(sorted(await listEntries(realFs, dir)), want);
    assert.deepEqual(sorted(await listEntries(fallback, dir)), want);
    const faulty = new FaultyFs(realFs);
    assert.deepEqual(sorted(await listEntries(faulty, dir)), want);
    assert.equal(faulty.calls.readdir, 1, 'counted as one readdir');
    faulty.fail({ kind: 'readdir', path: (p) => p === dir, error: 'EIO' });
    await assert.rejects(listEntries(faulty, dir), { code: 'EIO' });
    await assert.rejects(listEntries(realFs, path.join(dir, 'absent')), { code: 'ENOENT' });
    await assert.rejects(listEntries(fallback, path.join(dir, 'absent')), { code: 'ENOENT' });
  } finally {
    await fsp.rm(dir, { recursive: true, force: true });
  }
});

test('listEntries on MemoryFs: files and directories, ENOENT and ENOTDIR', async () => {
  const fs = new MemoryFs({ trace: false });
  await fs.mkdir('/a/b');
  const h = await fs.open('/a/f', 'create-exclusive');
  await h.close();
  assert.deepEqual(sorted(await listEntries(fs, '/a')), [
    { name: 'b', kind: 'directory' },
    { name: 'f', kind: 'file' },
  ]);
  await assert.rejects(listEntries(fs, '/nope'), { code: 'ENOENT' });
  await assert.rejects(listEntries(fs, '/a/f'), { code: 'ENOTDIR' });
});
