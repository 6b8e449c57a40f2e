// What the kill writers write, as pure functions of the ledger: a checker rebuilds every record
// and value from the ledger lines alone.

import { createHash } from 'node:crypto';

/** The segmented log writer's segment size (small: it rolls often). */
export const KILL_SEGMENT_BYTES = 8192;
/** The cell writer's cells and their slot size. */
export const KILL_CELLS = 4;
export const KILL_SLOT_BYTES = 2048;

/** Record `j` of operation `seq` of life `life`, `len` bytes: it names where it came from. */
export function killRecord(life: number, seq: number, j: number, len: number): Buffer {
  const b = Buffer.alloc(len);
  const tag = Buffer.from(`L${life}.${seq}.${j}:`);
  for (let i = 0; i < len; i++) b[i] = i < tag.length ? tag[i]! : (life * 131 + seq * 31 + j * 7 + i) & 0xff;
  return b;
}

/** The value of write `seq` of cell `cell` in life `life`, `len` bytes. */
export function killValue(life: number, cell: number, seq: number, len: number): Buffer {
  const b = Buffer.alloc(len);
  const tag = Buffer.from(`L${life}.c${cell}.${seq}:`);
  for (let i = 0; i < len; i++) b[i] = i < tag.length ? tag[i]! : (life * 17 + cell * 5 + seq * 3 + i) & 0xff;
  return b;
}

/** A short fingerprint of a value (or null), for ledger lines. */
export function digestOf(v: Uint8Array | null): string | null {
  return v === null ? null : createHash('sha256').update(v).digest('hex').slice(0, 16);
}
