// cells/: the two-slot checksummed cell (see ./cell.ts for its guarantees, docs/format.md (two-slot cell)
// for its bytes). Re-exports the public part.

export { openCell, cellTempPath } from './cell.js';
export type { Cell, CellOptions } from './cell.js';
export { cellValueCapacity, DEFAULT_SLOT_BYTES as CELL_DEFAULT_SLOT_BYTES } from './format.js';
