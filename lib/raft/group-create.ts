// Creating a group's directory in a Raft node.
//
// Owns: `createGroupDir`. Guarantees: a group id never becomes a path as is (the directory is
// `groups/<sha256(id)>/`, the id in a checksummed GROUP file); the group is built under a
// temporary name and renamed into place, then the groups directory synced: a crash leaves it
// whole or absent (the node's open removes a temporary leftover, fs-layout.ts names it).

import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { corrupt, fromIo } from '../errors.js';
import type { FileSystem } from '../fs/types.js';
import { GROUP_FILE, GROUP_TEMP_PREFIX, SM_DIR, SNAPSHOTS_DIR, encodeGroupFile, groupDirName, removeTree, writeFileDurably } from './fs-layout.js';

/**
 * Builds the empty directory of group `id` under `groupsDir` (the rename is the commit point);
 * answers its path. CORRUPT when the directory exists already (the node's open did not recover it).
 */
export async function createGroupDir(fs: FileSystem, groupsDir: string, id: string): Promise<string> {
  const final = path.join(groupsDir, groupDirName(id));
  if ((await fs.stat(final).catch((err: unknown) => Promise.reject(fromIo(err, 'stat', final)))) !== null) {
    throw corrupt(`group directory ${final} exists but was not recovered at open`, { group: id, path: final });
  }
  const temp = path.join(groupsDir, `${GROUP_TEMP_PREFIX}${randomBytes(8).toString('hex')}`);
  try {
    await fs.mkdir(path.join(temp, SM_DIR, SNAPSHOTS_DIR));
    await writeFileDurably(fs, path.join(temp, GROUP_FILE), encodeGroupFile(id));
    await fs.syncDir(path.join(temp, SM_DIR));
    await fs.syncDir(temp);
    await fs.rename(temp, final);
    await fs.syncDir(groupsDir);
  } catch (err) {
    await removeTree(fs, temp).catch(() => undefined);
    throw fromIo(err, 'create group', final);
  }
  return final;
}
