// Crash workloads of Raft groups of the layout an earlier version made: the vote, the committed
// pointer and the purged id in three cells (vote.cell, committed.cell, purged.cell) and a GROUP
// file without the GROUP_STATE_CELL flag. This version makes every group with one state cell
// (lib/raft/group-state.ts) and keeps writing an earlier group's three cells as they are, so both
// write paths stay under the crash engine.
//
// Owns: `toThreeCellLayout` (rewrites a closed group of this version into the earlier layout, the
// same values in three cells made as the earlier version made them: two 256-byte slots) and
// `onThreeCells` (a workload whose set-up disk holds its groups in that layout; the run and the
// checker are the workload's own: they read the group through the node, which answers the same
// values whichever layout holds them). Run by test/crash-raft.test.ts, which builds the set-up disk
// off the recording layer: the rewrite is a test's fixture, made in place as no store makes a file,
// so its own crash states say nothing (`seglog crash raft` records its set-ups: not run there).

import * as path from 'node:path';
import { encodeNewCellFile } from '../../../cells/format.js';
import { peekGrowingCell } from '../../../cells/index.js';
import type { FileSystem } from '../../fs/types.js';
import { GROUPS_DIR, GROUP_CELL_MAX_SLOT_BYTES, GROUP_CELL_SLOT_BYTES, GROUP_STATE_CELL, STATE_CELL, groupFlagsOf, isGroupDirName, readGroupFile, rewriteGroupFile, writeFilesDurably } from '../../raft/fs-layout.js';
import { decodeGroupState } from '../../raft/group-state.js';
import type { RaftCrashWorkload } from './raft.js';

/** The three cells of the earlier layout, in the order the state cell holds their values. */
export const THREE_CELLS = ['vote.cell', 'committed.cell', 'purged.cell'] as const;

/**
 * Rewrites the closed group in `groupDir` into the three-cell layout, holding the values its state
 * cell held; the state cell is removed. Throws unless the group has one.
 */
export async function toThreeCellLayout(groupDir: string, fs: FileSystem): Promise<void> {
  const file = await readGroupFile(fs, groupDir);
  if (!file.stateCell) throw new Error(`${groupDir} has no state cell`);
  const statePath = path.join(groupDir, STATE_CELL);
  const value = await peekGrowingCell(fs, statePath, GROUP_CELL_SLOT_BYTES, GROUP_CELL_MAX_SLOT_BYTES);
  if (value === null) throw new Error(`${statePath} holds no value`);
  const state = decodeGroupState(value, statePath);
  const values = [state.vote, state.committed, state.purged];
  // The store's own writers: new files whole and synced, the GROUP file replaced durably.
  await writeFilesDurably(
    fs,
    THREE_CELLS.map((name, k) => ({ file: path.join(groupDir, name), bytes: encodeNewCellFile(GROUP_CELL_SLOT_BYTES, values[k]!) })),
    [groupDir],
  );
  await rewriteGroupFile(fs, groupDir, file.id, groupFlagsOf(file) & ~GROUP_STATE_CELL);
  await fs.unlink(statePath);
  await fs.syncDir(groupDir);
}

/** `w` with every group its set-up made rewritten into the three-cell layout before the run. */
export function onThreeCells(w: RaftCrashWorkload): RaftCrashWorkload {
  return {
    ...w,
    name: `${w.name} (three cells)`,
    async setup(fs, env) {
      await w.setup(fs, env);
      const groups = path.join(env.dir, GROUPS_DIR);
      const names = (await fs.readdir(groups)).filter(isGroupDirName);
      if (names.length === 0) throw new Error(`${w.name}: the set-up made no group to rewrite`);
      for (const name of names) await toThreeCellLayout(path.join(groups, name), fs);
    },
  };
}
