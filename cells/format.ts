// The cell file's byte layout: two fixed-size slots, each one checksummed version of the value.
//
// Owns: encoding a slot, decoding a slot, and the rule that picks the live slot of a file.
// Guarantees: pure functions over bytes (no I/O); a decoded value is returned only when its
// magic, slot size, sequence, length and CRC32 all check, and a length read from disk is checked
// against the slot's capacity before it drives anything. docs/format.md (two-slot cell) is the prose twin.
//
// Slot layout (little-endian), at offset `slot * slotBytes` of the file:
//   0  u32  magic 'SGC1' (bytes 53 47 43 31)
//   4  u32  slotBytes the file was created with
//   8  u64  sequence number (>= 1; a write takes the live sequence + 1)
//  16  u32  value length (<= slotBytes - 24)
//  20  u32  CRC32 of bytes [0, 20) followed by bytes [24, slotBytes): the value and the zeros
//           after it, so that every byte of a slot lies under its checksum
//  24  ...  value, then zeros to the end of the slot

import { crc32 } from 'node:zlib';
import { corrupt } from '../lib/errors.js';

/** 'SGC1' read as a little-endian u32. */
export const CELL_MAGIC = 0x31434753;
export const SLOT_HEADER_BYTES = 24;
export const DEFAULT_SLOT_BYTES = 4096;
/** Bounds on `slotBytes`: small enough that open's one read is cheap, large enough for a header. */
export const MIN_SLOT_BYTES = 64;
export const MAX_SLOT_BYTES = 1 << 24;

/** Largest value a cell with this slot size holds. */
export function cellValueCapacity(slotBytes: number = DEFAULT_SLOT_BYTES): number {
  return slotBytes - SLOT_HEADER_BYTES;
}

/** The bytes of one whole slot: header, value, zeros to `slotBytes`. */
export function encodeSlot(slotBytes: number, sequence: number, value: Uint8Array): Uint8Array {
  const out = new Uint8Array(slotBytes);
  const view = new DataView(out.buffer);
  view.setUint32(0, CELL_MAGIC, true);
  view.setUint32(4, slotBytes, true);
  view.setBigUint64(8, BigInt(sequence), true);
  view.setUint32(16, value.length, true);
  out.set(value, SLOT_HEADER_BYTES);
  const crc = crc32(out.subarray(SLOT_HEADER_BYTES), crc32(out.subarray(0, 20)));
  view.setUint32(20, crc, true);
  return out;
}

export type SlotState =
  | { readonly valid: true; readonly sequence: number; readonly value: Uint8Array }
  | { readonly valid: false; readonly reason: string; readonly writtenSlotBytes?: number };

/**
 * Decodes the slot that starts at `offset` of `file` (bytes past the end of `file` read as zeros).
 * A valid slot's value is a copy, never a view of `file`.
 */
export function decodeSlot(file: Uint8Array, offset: number, slotBytes: number): SlotState {
  let slot: Uint8Array;
  if (offset + slotBytes <= file.length) slot = file.subarray(offset, offset + slotBytes);
  else {
    slot = new Uint8Array(slotBytes);
    if (offset < file.length) slot.set(file.subarray(offset));
  }
  const view = new DataView(slot.buffer, slot.byteOffset, slot.byteLength);
  if (view.getUint32(0, true) !== CELL_MAGIC) {
    return { valid: false, reason: isAllZero(slot) ? 'empty' : 'bad magic' };
  }
  const writtenSlotBytes = view.getUint32(4, true);
  if (writtenSlotBytes !== slotBytes) {
    return { valid: false, reason: `slot size ${writtenSlotBytes}, expected ${slotBytes}`, writtenSlotBytes };
  }
  const length = view.getUint32(16, true);
  if (length > slotBytes - SLOT_HEADER_BYTES) return { valid: false, reason: `length ${length} beyond the slot` };
  const value = slot.subarray(SLOT_HEADER_BYTES, SLOT_HEADER_BYTES + length);
  const crc = crc32(slot.subarray(SLOT_HEADER_BYTES), crc32(slot.subarray(0, 20)));
  if (crc !== view.getUint32(20, true)) return { valid: false, reason: 'checksum mismatch' };
  const sequence = view.getBigUint64(8, true);
  if (sequence < 1n || sequence > BigInt(Number.MAX_SAFE_INTEGER)) {
    return { valid: false, reason: `sequence ${sequence} out of range` };
  }
  return { valid: true, sequence: Number(sequence), value: value.slice() };
}

let zeros = Buffer.alloc(0);

/** True when every byte is zero (a native compare: a never-written slot is the common case). */
function isAllZero(bytes: Uint8Array): boolean {
  if (zeros.length < bytes.length) zeros = Buffer.alloc(bytes.length);
  return Buffer.compare(bytes, zeros.subarray(0, bytes.length)) === 0;
}

export interface LiveSlot {
  readonly slot: 0 | 1;
  readonly sequence: number;
  readonly value: Uint8Array;
}

/**
 * The live slot of a file whose slots decoded as `a` (slot 0) and `b` (slot 1): the valid one
 * with the higher sequence; null when neither is valid. Two valid slots must be one write apart
 * (every write takes the live sequence + 1 into the other slot): an equal sequence or a gap is
 * corruption, because no sequence of writes and crashes produces it.
 */
export function chooseLive(a: SlotState, b: SlotState, path: string): LiveSlot | null {
  if (a.valid && b.valid) {
    if (Math.abs(a.sequence - b.sequence) !== 1) {
      throw corrupt(`cell ${path}: both slots valid with sequences ${a.sequence} and ${b.sequence}`, {
        path,
        sequences: [a.sequence, b.sequence],
      });
    }
    return a.sequence > b.sequence ? { slot: 0, ...a } : { slot: 1, ...b };
  }
  if (a.valid) return { slot: 0, sequence: a.sequence, value: a.value };
  if (b.valid) return { slot: 1, sequence: b.sequence, value: b.value };
  return null;
}
