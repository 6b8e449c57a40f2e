// The values of the fs host store's two realm-wide cells: the checkpoint (`checkpoint`) and the
// fence state (`fence/state`). Pure encoders and decoders, no I/O.
//
// Owns: both layouts (docs/format-host.md). Guarantees: a value is accepted only with its magic,
// version and lengths right and every number in range (safe integers, a holder token not above
// the highest, a finite lease end, a holder id that is UTF-8); anything else throws CORRUPT
// naming the file. The cells themselves (two slots, CRC) are cells/.

import { corrupt } from '../../errors.js';
import { f64, hasOpening, MAGIC, putF64, putOpening, putU16, putU32, putU64, text, u16, u32, u64, utf8 } from './format-bytes.js';
import { TABLE_FOOTER_BYTES, type TableRef } from './format-table.js';
import { isPosition, putPosition, readPosition, type Position } from './format-stripe.js';

// ---------------------------------------------------------------------------------------------
// The checkpoint value (a cell `checkpoint`): per stripe, the position before which every record
// is applied to the scopes' homes.
//  0 magic 'SGHC' | 4 version u16 | 6 stripes u16 | 8 round u64 | 16 per stripe: seq u64,
//  offset u64, lsn u64, fence u64 | then the scope table: seq u64 (0: none yet), bytes u64,
//  footer CRC32 u32, 0 u32

export interface CheckpointValue {
  round: number;
  positions: Position[];
  /** The scope table that holds every scope applied before the positions (null: no round wrote one yet). */
  table: TableRef | null;
}

export function encodeCheckpoint(c: CheckpointValue): Uint8Array {
  const b = new Uint8Array(16 + 32 * c.positions.length + 24);
  putOpening(b, MAGIC.checkpoint);
  putU16(b, 6, c.positions.length);
  putU64(b, 8, c.round);
  let at = 16;
  for (const p of c.positions) {
    putPosition(b, at, p);
    at += 32;
  }
  if (c.table !== null) {
    putU64(b, at, c.table.seq);
    putU64(b, at + 8, c.table.bytes);
    putU32(b, at + 16, c.table.footerCrc);
  }
  return b;
}

export function decodeCheckpoint(b: Uint8Array, stripes: number, file: string): CheckpointValue {
  if (!hasOpening(b, MAGIC.checkpoint, 16)) throw corrupt(`${file}: not a checkpoint value`, { file });
  if (u16(b, 6) !== stripes || b.length !== 16 + 32 * stripes + 24) throw corrupt(`${file}: names ${u16(b, 6)} stripes, the realm has ${stripes}`, { file });
  const positions: Position[] = [];
  let at = 16;
  for (let i = 0; i < stripes; i++, at += 32) {
    const p = readPosition(b, at);
    if (!isPosition(p)) throw corrupt(`${file}: position ${i} out of range`, { file });
    positions.push(p);
  }
  const seq = u64(b, at);
  const bytes = u64(b, at + 8);
  const footerCrc = u32(b, at + 16);
  if (!Number.isSafeInteger(seq) || !Number.isSafeInteger(bytes) || u32(b, at + 20) !== 0) throw corrupt(`${file}: the scope table's reference is out of range`, { file });
  if (seq === 0 ? bytes !== 0 || footerCrc !== 0 : bytes < TABLE_FOOTER_BYTES) throw corrupt(`${file}: the scope table's reference is out of range`, { file });
  return { round: u64(b, 8), positions, table: seq === 0 ? null : { seq, bytes, footerCrc } };
}

// ---------------------------------------------------------------------------------------------
// The fence state (a cell `fence/state`).
//  0 magic 'SGHL' | 4 version u16 | 6 holder id length u16 | 8 highest token u64
// 16 holder token u64 | 24 lease end f64 (the store clock's ms) | 32 boot id (16) | 48 holder id

export const MAX_HOLDER_ID_BYTES = 1024;

export interface FenceState {
  highest: number;
  holderToken: number;
  leaseEnd: number;
  boot: Uint8Array;
  holder: string;
}

export function encodeFenceState(s: FenceState): Uint8Array {
  const id = utf8(s.holder);
  const b = new Uint8Array(48 + id.length);
  putOpening(b, MAGIC.fence);
  putU16(b, 6, id.length);
  putU64(b, 8, s.highest);
  putU64(b, 16, s.holderToken);
  putF64(b, 24, s.leaseEnd);
  b.set(s.boot.subarray(0, 16), 32);
  b.set(id, 48);
  return b;
}

export function decodeFenceState(b: Uint8Array, file: string): FenceState {
  if (!hasOpening(b, MAGIC.fence, 48)) throw corrupt(`${file}: not a fence state`, { file });
  const idLen = u16(b, 6);
  if (b.length !== 48 + idLen) throw corrupt(`${file}: holder id length disagrees`, { file });
  const highest = u64(b, 8);
  const holderToken = u64(b, 16);
  const leaseEnd = f64(b, 24);
  if (!Number.isSafeInteger(highest) || !Number.isSafeInteger(holderToken) || holderToken > highest || !Number.isFinite(leaseEnd)) {
    throw corrupt(`${file}: fence state out of range`, { file });
  }
  let holder: string;
  try {
    holder = text(b.subarray(48));
  } catch {
    throw corrupt(`${file}: holder id is not UTF-8`, { file });
  }
  return { highest, holderToken, leaseEnd, boot: b.slice(32, 48), holder };
}
