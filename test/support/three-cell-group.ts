// Groups of the layout an earlier version made (three cells, no GROUP_STATE_CELL flag), for the
// tests that prove this version still opens, writes and checks them: the rewrite of
// lib/crash/workloads/raft-three-cells.ts, on the real file system unless told otherwise.

import type { FileSystem } from '../../lib/fs/types.js';
import { realFs } from '../../lib/fs/real.js';
import { THREE_CELLS, toThreeCellLayout as rewrite } from '../../lib/crash/workloads/raft-three-cells.js';

export { THREE_CELLS };

/** Rewrites the closed group in `groupDir` into the three-cell layout (see the module above). */
export function toThreeCellLayout(groupDir: string, fs: FileSystem = realFs): Promise<void> {
  return rewrite(groupDir, fs);
}
