// Creating a group's directory in a Raft node.
//
// Owns: `createGroupDir`, `GROUP_DEFINING_FILES` and `STATE_MACHINE_FILES`. Guarantees: a group
// id never becomes a path as is (the directory is `groups/<sha256(id)>/`, the id in a checksummed
// GROUP file); the group is built whole under a temporary name — its GROUP file (version 2, no
// flag set), its three cells holding their "nothing yet" values (256-byte slots: fs-layout.ts),
// its log with a first segment and manifest (512-byte slots) — every file written, then every
// file and directory synced at once, then renamed into place and the groups directory synced: a
// crash leaves it whole or absent (the node's open removes a temporary leftover, fs-layout.ts
// names it). So every group directory holds every file `groupDefiningFiles` names for its layout
// from its creation on, and open answers CORRUPT for one missing. The state machine's files (STATE_MACHINE_FILES)
// are made at its first write (fs-state-machine.ts), and required once the GROUP file says so.

import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { encodeNewCellFile } from '../../cells/index.js';
import { newLogFiles } from '../../segments/index.js';
import { corrupt, fromIo } from '../errors.js';
import { encodeOptionalLogId } from './codec.js';
import {
  COMMITTED_CELL,
  GROUP_CELL_SLOT_BYTES,
  GROUP_FILE,
  GROUP_MANIFEST_SLOT_BYTES,
  GROUP_STATE_CELL,
  GROUP_TEMP_PREFIX,
  JOURNAL_DIR,
  LOG_DIR,
  PURGED_CELL,
  SM_DIR,
  SNAPSHOTS_DIR,
  STATE_CELL,
  VOTE_CELL,
  encodeGroupFile,
  groupDirName,
  removeTree,
  writeFilesDurably,
} from './fs-layout.js';
import { encodeGroupState } from './group-state.js';
import type { NodeSettings } from './node-options.js';
import type { StateMachinePlugin } from './plugin.js';

/** The vote cell's value before the first vote: empty (a vote document is never empty). */
export const NO_VOTE = new Uint8Array(0);

/** The files of a group's log every group directory holds (relative to it); the log is named by its manifest. */
const LOG_DEFINING_FILES: readonly string[] = [LOG_DIR, path.join(LOG_DIR, 'MANIFEST')];
/** What a group made with the GROUP_STATE_CELL flag holds from its creation on. */
const STATE_CELL_GROUP_FILES: readonly string[] = [GROUP_FILE, STATE_CELL, ...LOG_DEFINING_FILES];
/** What a group an earlier version made (three cells) holds from its creation on. */
const THREE_CELL_GROUP_FILES: readonly string[] = [GROUP_FILE, VOTE_CELL, COMMITTED_CELL, PURGED_CELL, ...LOG_DEFINING_FILES];

/**
 * The files a group directory holds from its creation on (paths relative to it), for its layout
 * (`stateCell`: the GROUP file's GROUP_STATE_CELL flag): a group directory missing one lost it.
 */
export function groupDefiningFiles(stateCell: boolean): readonly string[] {
  return stateCell ? STATE_CELL_GROUP_FILES : THREE_CELL_GROUP_FILES;
}

/**
 * The files of a group's state machine (relative to the group directory): made at its first write,
 * and from then on (the GROUP file's GROUP_STATE_MACHINE_MADE flag; every group of the first
 * format) a group missing one lost it.
 */
export const STATE_MACHINE_FILES: readonly string[] = [SM_DIR, path.join(SM_DIR, JOURNAL_DIR), path.join(SM_DIR, JOURNAL_DIR, 'MANIFEST'), path.join(SM_DIR, SNAPSHOTS_DIR)];

/**
 * Builds the directory of group `id` under `groupsDir` (the rename is the commit point); answers
 * its path. CORRUPT when the directory exists already (the node's open did not recover it).
 */
export async function createGroupDir<P extends StateMachinePlugin<unknown>>(s: NodeSettings<P>, groupsDir: string, id: string): Promise<string> {
  const fs = s.fs;
  const final = path.join(groupsDir, groupDirName(id));
  if ((await fs.stat(final).catch((err: unknown) => Promise.reject(fromIo(err, 'stat', final)))) !== null) {
    throw corrupt(`group directory ${final} exists but was not recovered at open`, { group: id, path: final });
  }
  const temp = path.join(groupsDir, `${GROUP_TEMP_PREFIX}${randomBytes(8).toString('hex')}`);
  try {
    await fs.mkdir(path.join(temp, LOG_DIR));
    await writeFilesDurably(fs, groupFiles(s, temp, id), [temp, path.join(temp, LOG_DIR)]);
    await fs.rename(temp, final);
    await fs.syncDir(groupsDir);
  } catch (err) {
    await removeTree(fs, temp).catch(() => undefined);
    throw fromIo(err, 'create group', final);
  }
  return final;
}

/**
 * Every file of a new group directory at `temp`, whole: the GROUP file (GROUP_STATE_CELL set); the
 * state cell, written whole under its own name (the group directory is itself the temporary file
 * of the creation, so the cell's own first-write protocol — a temporary file renamed into place,
 * a directory sync — is not needed); and the log's first segment and manifest, the bytes its own
 * new-log path would commit (segments/new-log.ts).
 */
function groupFiles<P extends StateMachinePlugin<unknown>>(s: NodeSettings<P>, temp: string, id: string): { file: string; bytes: Uint8Array }[] {
  const none = encodeOptionalLogId(null);
  const files = [
    { file: path.join(temp, GROUP_FILE), bytes: encodeGroupFile(id, GROUP_STATE_CELL) },
    { file: path.join(temp, STATE_CELL), bytes: encodeNewCellFile(GROUP_CELL_SLOT_BYTES, encodeGroupState({ vote: NO_VOTE, committed: none, purged: none })) },
  ];
  for (const f of newLogFiles(0, s.segmentBytes, GROUP_MANIFEST_SLOT_BYTES)) files.push({ file: path.join(temp, LOG_DIR, f.name), bytes: f.bytes });
  return files;
}
