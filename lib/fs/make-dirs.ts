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
  for (let d = path.resolve(dir); (await fs.stat(d)) === null; d = path.dirname(d)) {
    created.push(d);
    if (path.dirname(d) === d) break;
  }
  await fs.mkdir(dir);
  return created;
}
