// Creating a directory and its missing ancestors, knowing which ones were created.
//
// Owns: `makeDirectories`. A directory a call creates is an entry of its parent, durable only
// after the parent's directory sync: the caller (a store's open) syncs the parents of the
// directories answered before it acknowledges anything stored under them.

import * as path from 'node:path';
import type { FileSystem } from './types.js';

/**
 * Creates `dir` and every missing ancestor (`mkdir -p`); answers the directories that did not
 * exist, deepest first. Errors are the file system's own (the caller names what it was doing).
 */
export async function makeDirectories(fs: FileSystem, dir: string): Promise<string[]> {
  const created: string[] = [];
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    const st = await fs.stat(d);
    if (st !== null) {
      // The common case of every reopen: the directory is there, nothing to make (the mkdir
      // would be a pool round trip per directory that fails with EEXIST).
      if (created.length === 0 && st.isDirectory) return created;
      break;
    }
    created.push(d);
    if (path.dirname(d) === d) break;
  }
  // Also when `dir` exists but is no directory: the mkdir's own error says so.
  await fs.mkdir(dir);
  return created;
}
