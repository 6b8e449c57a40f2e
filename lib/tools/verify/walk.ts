// The walk of `seglog verify` and `seglog inspect`: which checker takes which part of a directory.
//
// Owns: `STORE_CHECKERS` (the registry of store-level checkers) and `walkDataDirectory`. A
// directory that a store checker recognises is handed to it whole (it answers which entries it
// accounted for; the walk descends into the others). Files nobody claimed are checked by their
// format when it can be recognised (a cell by its name `*.cell` or its magic, a Raft snapshot by
// its magic) and listed as unknown otherwise.
// EXTENSION POINT: a store whose directories need more than the primitive checks (the host store's
// realms, the Raft store's groups) adds one entry to STORE_CHECKERS, before 'log' (a store
// directory usually holds logs of its own, which its checker delegates to ./log.ts).

import * as path from 'node:path';
import { checkCellFile, looksLikeCell } from './cell.js';
import { checkEmpty, checkSegmentedLog, isLogDirectory } from './log.js';
import { checkHostRealm, isHostRealmDirectory } from './host.js';
import { checkPayloadStore, isPayloadStoreDirectory } from './payloads.js';
import { checkRaftGroup, checkSnapshotFile, isRaftGroupDirectory, isSnapshotFile } from './raft.js';
import { VerifyError, messageOf, type VerifyContext } from './context.js';

export interface StoreChecker {
  readonly name: string;
  /** True when a directory with these entries belongs to this store. */
  detects(names: readonly string[]): boolean;
  /** Checks the directory; answers the entry names it accounted for (the walk descends into the rest). */
  check(ctx: VerifyContext, dir: string, names: readonly string[]): Promise<ReadonlySet<string>>;
}

export const STORE_CHECKERS: readonly StoreChecker[] = [
  { name: 'payloads', detects: isPayloadStoreDirectory, check: checkPayloadStore },
  { name: 'raft-group', detects: isRaftGroupDirectory, check: checkRaftGroup },
  { name: 'host', detects: isHostRealmDirectory, check: checkHostRealm },
  {
    name: 'log',
    detects: isLogDirectory,
    check: async (ctx, dir, names) => {
      await checkSegmentedLog(ctx, dir, names);
      const files = new Set<string>();
      for (const n of names) {
        const st = await ctx.fs.stat(path.join(dir, n));
        if (st !== null && !st.isDirectory) files.add(n);
      }
      return files;
    },
  },
];

/** Walks `dir` (a directory or one file) and runs every checker that applies. */
export async function walkDataDirectory(ctx: VerifyContext, dir: string): Promise<void> {
  const st = await ctx.fs.stat(dir);
  if (st === null) {
    ctx.error(dir, 'no such file or directory');
    return;
  }
  if (!st.isDirectory) {
    await checkLooseFile(ctx, dir, [path.basename(dir)]);
  } else {
    await walkDirectory(ctx, dir);
  }
  for (const check of ctx.deferred.splice(0)) await check();
}

async function walkDirectory(ctx: VerifyContext, dir: string): Promise<void> {
  let names: string[];
  try {
    names = (await ctx.fs.readdir(dir)).sort();
  } catch (err) {
    if (err instanceof VerifyError) throw err;
    ctx.error(dir, `cannot list: ${messageOf(err)}`);
    return;
  }
  const claimed = new Set<string>();
  for (const checker of STORE_CHECKERS) {
    if (!checker.detects(names)) continue;
    for (const n of await checker.check(ctx, dir, names)) claimed.add(n);
    break;
  }
  for (const n of names) {
    if (claimed.has(n)) continue;
    const p = path.join(dir, n);
    const st = await ctx.fs.stat(p);
    if (st === null) continue;
    if (st.isDirectory) await walkDirectory(ctx, p);
    else await checkLooseFile(ctx, p, names);
  }
}

async function checkLooseFile(ctx: VerifyContext, file: string, siblings: readonly string[]): Promise<void> {
  const name = path.basename(file);
  const head = new Uint8Array(8);
  let size = 0;
  try {
    const h = await ctx.fs.open(file, 'read');
    try {
      size = await h.size();
      await h.read(head, 0);
    } finally {
      await h.close().catch(() => undefined);
    }
  } catch (err) {
    if (err instanceof VerifyError) throw err;
    ctx.error(file, `cannot read: ${messageOf(err)}`);
    return;
  }
  if (name.endsWith('.tmp') && siblings.includes(name.slice(0, -4))) {
    ctx.sawFile(size);
    ctx.warning(file, 'leftover temporary file of an interrupted first cell write (never read)');
  } else if (name.endsWith('.cell.tmp') && size === 0) {
    // A cell opened and never written keeps its (empty) temporary file: its lock until the first
    // write renames it into place. Nothing in it is read.
    ctx.sawFile(size);
  } else if (name.endsWith('.cell.tmp')) {
    ctx.sawFile(size);
    ctx.warning(file, 'leftover temporary file of a first cell write that did not complete (never read)');
  } else if (name === 'LOCK') {
    await checkEmpty(ctx, file, 'LOCK');
  } else if (name === 'CLEAN' && siblings.includes('groups')) {
    // A Raft node's clean-close mark (lib/raft/node.ts): empty, like a LOCK.
    await checkEmpty(ctx, file, 'raft node clean-close mark');
  } else if (name.endsWith('.part') && path.basename(path.dirname(file)) === 'snapshots') {
    ctx.sawFile(size);
    ctx.warning(file, 'leftover of a snapshot being built or received when its process stopped (removed at the next open)');
  } else if (looksLikeCell(name, head)) {
    await checkCellFile(ctx, file);
  } else if (isSnapshotFile(name, head)) {
    await checkSnapshotFile(ctx, file);
  } else {
    ctx.sawFile(size);
    ctx.unknown.push(file);
  }
}
