// cells/: the two-slot cell whose sectors carry the stamp of their write (see ./cell.ts for its
// guarantees, docs/format.md (two-slot cell) for its bytes). Re-exports the public part.

export { openCell, openOwnedCell, cellTempPath, peekCell, peekGrowingCell, readCellFile, writeCellFile } from './cell.js';
export type { Cell, CellOptions, GrowingSlots, KnownDurable } from './cell.js';
export { cellValueCapacity, encodeNewCellFile, DEFAULT_SLOT_BYTES as CELL_DEFAULT_SLOT_BYTES } from './format.js';
export type { CellState, SlotView } from './format.js';
