// A directory tree on the real disk as a MemoryFs image, for tests that damage copies of it.
//
// Owns: `loadImage(root, subs)`. Reads every file under each of `root`'s `subs` (all of `root` by
// default) into memory; the image is rooted at /data (root/x/y becomes /data/x/y).

import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import type { DiskImage } from '../../lib/fs/memory.js';

export async function loadImage(root: string, subs: readonly string[] = ['']): Promise<DiskImage> {
  const files: Record<string, Uint8Array> = {};
  const dirs: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const e of await fsp.readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) {
        dirs.push('/data/' + path.relative(root, p));
        await walk(p);
      } else files['/data/' + path.relative(root, p)] = new Uint8Array(await fsp.readFile(p));
    }
  };
  for (const s of subs) {
    if (s !== '') dirs.push(`/data/${s}`);
    await walk(path.join(root, s));
  }
  return { dirs, files };
}
