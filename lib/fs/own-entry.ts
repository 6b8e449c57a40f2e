// Entries a store treats as its own: checked before they are listed, opened as a store's part or
// removed as a leftover.
//
// Owns: `ownEntry`, `listEntries` and `removeOwnTree`. Guarantees: a symbolic link found where a store expects
// one of its own files or directories is never followed and never removed: the answer is CORRUPT
// naming the path (no store writes a link, so one inside a store directory is not its data).
// `removeOwnTree` checks every entry of a tree before it removes the first, so a link anywhere
// inside a leftover leaves the whole leftover in place.

import * as path from 'node:path';
import { corrupt, fromIo } from '../errors.js';
import type { DirEntry, EntryStat, FileSystem } from './types.js';

/**
 * The entry at `p` as itself (never through a symbolic link), or null when it is absent.
 * CORRUPT when it is a symbolic link; IO_ERROR / NO_SPACE when the file system fails.
 * `what` names the entry for the message ("payload store tmp/ directory", ...).
 */
export async function ownEntry(fs: FileSystem, p: string, what: string): Promise<EntryStat | null> {
  let st: EntryStat | null;
  try {
    st = await fs.lstat(p);
  } catch (err) {
    throw fromIo(err, 'lstat', p);
  }
  if (st !== null && st.isSymbolicLink) {
    throw corrupt(`${what} ${p} is a symbolic link: a store never writes one, and never follows or removes one`, { path: p });
  }
  return st;
}

/**
 * The entries of `dir` with their kinds, never through a link: one `readdirEntries` where the
 * layer has it, else a `readdir` and an `lstat` per entry (an entry gone between the two is left
 * out). ENOENT (as the layer throws it) when `dir` is missing.
 */
export async function listEntries(fs: FileSystem, dir: string): Promise<DirEntry[]> {
  if (fs.readdirEntries !== undefined) return fs.readdirEntries(dir);
  const out: DirEntry[] = [];
  for (const name of await fs.readdir(dir)) {
    const st = await fs.lstat(path.join(dir, name));
    if (st !== null) out.push({ name, kind: st.isSymbolicLink ? 'symlink' : st.isDirectory ? 'directory' : 'file' });
  }
  return out;
}

/**
 * Removes `target` (a file, or a directory and everything under it) that the caller created and
 * no durable state refers to; nothing when it is absent. Every entry is checked first (CORRUPT,
 * with nothing removed, when one is a symbolic link). No directory sync: the caller's business.
 */
export async function removeOwnTree(fs: FileSystem, target: string, what: string): Promise<void> {
  const order: { path: string; isDirectory: boolean }[] = [];
  await collect(fs, target, what, order);
  for (const e of order) {
    try {
      if (e.isDirectory) await fs.rmdir(e.path);
      else await fs.unlink(e.path);
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'ENOENT') throw fromIo(err, e.isDirectory ? 'remove directory' : 'remove', e.path);
    }
  }
}

/** Every entry under `p`, children before their directory (the order of removal). */
async function collect(fs: FileSystem, p: string, what: string, into: { path: string; isDirectory: boolean }[]): Promise<void> {
  const st = await ownEntry(fs, p, what);
  if (st === null) return;
  if (st.isDirectory) {
    let names: string[];
    try {
      names = await fs.readdir(p);
    } catch (err) {
      throw fromIo(err, 'list', p);
    }
    for (const name of names.sort()) await collect(fs, path.join(p, name), what, into);
  }
  into.push({ path: p, isDirectory: st.isDirectory });
}
