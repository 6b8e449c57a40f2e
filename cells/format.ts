// The cell file's byte layout: two fixed-size slots, each one version of the value, every 512-byte
// sector of a slot stamped with the generation of the write that put it there.
//
// Owns: encoding a slot, classifying a slot (whole, torn by a crash, damaged, or a slot of the
// first format), and `decodeCell`, the rule that picks the live value of a file — or refuses it.
// Guarantees: pure functions over bytes (no I/O); a value is returned only when every sector of its
// slot passes its own check and carries one generation; a length read from disk is checked against
// the slot's capacity before it drives anything. docs/format.md (two-slot cell) is the prose twin;
// the argument that the rule tells a torn write from damage is in docs/crash-safety.md (two-slot cell).
//
// A slot is `slotBytes / unit` units, where a unit is a 512-byte sector (slots of 512 bytes or
// more, which must be a multiple of 512), or the whole slot (slots of 64 to 256 bytes: both slots
// then lie in the file's first sector). Every unit, little-endian:
//   0        payload (unit − 12 bytes)
//   unit−12  u64  stamp: the generation of the write (≥ 1; each write takes a stamp above every one
//                  the file holds)
//   unit−4   u32  CRC-32 of bytes [0, unit − 4) of the unit, seeded with the unit's file offset
// The payloads of a slot's units, joined, are:
//   0   u32  magic 'SGC2' (53 47 43 32)
//   4   u32  slotBytes the file was created with
//   8   u32  value length (≤ capacity), or 0xFFFFFFFF: a filler (a slot that holds no value)
//  12   u32  CRC-32 of the slot's units after the first (bytes [unit, slotBytes) of the slot),
//            seeded like the second unit; 0 in a one-unit slot. With the first unit's own check
//            it vouches for the whole slot in two CRC calls (the read path); the per-unit checks
//            are what tell a tear from damage when it fails.
//  16   ...  value, then zeros
// The first format ('SGC1', one CRC per slot, no stamps per sector) is still read (`decodeSlotV1`);
// a writer converts such a file before its first write (cells/cell.ts).

import { crc32 } from 'node:zlib';
import { corrupt, invalid } from '../lib/errors.js';

/** 'SGC2' read as a little-endian u32: the current format. */
export const CELL_MAGIC = 0x32434753;
/** 'SGC1' read as a little-endian u32: the first format (read, converted on the first write). */
export const CELL_MAGIC_V1 = 0x31434753;
/** The sector size the crash model tears at: a unit never spans two. */
export const SECTOR_BYTES = 512;
export const UNIT_TRAILER_BYTES = 12;
export const SLOT_HEADER_BYTES = 16;
export const DEFAULT_SLOT_BYTES = 4096;
/** Bounds on `slotBytes`: small enough that open's one read is cheap, large enough for a header. */
export const MIN_SLOT_BYTES = 64;
export const MAX_SLOT_BYTES = 1 << 24;
/** The largest slot that is one unit: two of them fit in the file's first sector. */
const MAX_SMALL_SLOT_BYTES = SECTOR_BYTES / 2;
const NO_VALUE = 0xffffffff;
/** Header of a first-format slot: magic, slotBytes, u64 sequence, length, CRC. */
const V1_HEADER_BYTES = 24;

/** Why `slotBytes` is not a slot size a cell can have, or null when it is one. */
export function slotBytesProblem(slotBytes: unknown): string | null {
  if (typeof slotBytes !== 'number' || !Number.isSafeInteger(slotBytes)) return `slotBytes must be an integer, got ${String(slotBytes)}`;
  if (slotBytes >= MIN_SLOT_BYTES && slotBytes <= MAX_SMALL_SLOT_BYTES) return null;
  if (slotBytes >= SECTOR_BYTES && slotBytes <= MAX_SLOT_BYTES && slotBytes % SECTOR_BYTES === 0) return null;
  return `slotBytes must be ${MIN_SLOT_BYTES}…${MAX_SMALL_SLOT_BYTES}, or a multiple of ${SECTOR_BYTES} up to ${MAX_SLOT_BYTES}, got ${slotBytes}`;
}

/** The unit (the piece of a slot that carries its own stamp and check) of a slot size. */
export function unitBytesOf(slotBytes: number): number {
  return slotBytes <= MAX_SMALL_SLOT_BYTES ? slotBytes : SECTOR_BYTES;
}

/** Largest value a cell with this slot size holds. */
export function cellValueCapacity(slotBytes: number = DEFAULT_SLOT_BYTES): number {
  const unit = unitBytesOf(slotBytes);
  return (slotBytes / unit) * (unit - UNIT_TRAILER_BYTES) - SLOT_HEADER_BYTES;
}

function seedOf(fileOffset: number): number {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, fileOffset, true);
  return crc32(b);
}

/** The seeds of every unit of one slot, in order (kept per slot size and slot: writes reuse them). */
const slotSeeds = new Map<number, Uint32Array>();
function seedsOf(slotBytes: number, slot: 0 | 1): Uint32Array {
  const key = slotBytes * 2 + slot;
  let out = slotSeeds.get(key);
  if (out === undefined) {
    const unit = unitBytesOf(slotBytes);
    out = new Uint32Array(slotBytes / unit);
    for (let k = 0; k < out.length; k++) out[k] = seedOf(slot * slotBytes + k * unit);
    if (slotSeeds.size < 64) slotSeeds.set(key, out);
  }
  return out;
}

/**
 * The bytes of one whole slot of a file with `slotBytes` slots, for slot `slot`: the value (null:
 * a filler, which holds none) and every unit stamped `stamp`.
 */
export function encodeSlot(slotBytes: number, slot: 0 | 1, stamp: number, value: Uint8Array | null): Uint8Array {
  const unit = unitBytesOf(slotBytes);
  const units = slotBytes / unit;
  const payload = unit - UNIT_TRAILER_BYTES;
  if (value !== null && value.length > cellValueCapacity(slotBytes)) throw invalid(`a value of ${value.length} bytes exceeds the cell capacity`);
  if (!Number.isSafeInteger(stamp) || stamp < 1) throw invalid(`a cell stamp must be a safe integer ≥ 1, got ${stamp}`);
  const out = new Uint8Array(slotBytes);
  const view = new DataView(out.buffer);
  view.setUint32(0, CELL_MAGIC, true);
  view.setUint32(4, slotBytes, true);
  view.setUint32(8, value === null ? NO_VALUE : value.length, true);
  // The value flows through the units' payloads: SLOT_HEADER_BYTES into the first, then on.
  let from = 0;
  const length = value?.length ?? 0;
  for (let k = 0; k < units && from < length; k++) {
    const start = k === 0 ? SLOT_HEADER_BYTES : 0;
    const n = Math.min(payload - start, length - from);
    out.set(value!.subarray(from, from + n), k * unit + start);
    from += n;
  }
  const seed = seedsOf(slotBytes, slot);
  const lo = stamp >>> 0;
  const hi = Math.floor(stamp / 0x100000000);
  // Units after the first, then the slot check over them, then the first unit (which holds it).
  for (let k = units - 1; k >= 0; k--) {
    const at = k * unit;
    view.setUint32(at + payload, lo, true);
    view.setUint32(at + payload + 4, hi, true);
    if (k === 0 && units > 1) view.setUint32(12, crc32(out.subarray(unit), seed[1]!), true);
    view.setUint32(at + unit - 4, crc32(out.subarray(at, at + unit - 4), seed[k]!), true);
  }
  return out;
}

/** A whole new file: slot 0 holds `value` (stamp 2), slot 1 a filler (stamp 1). */
export function encodeNewCellFile(slotBytes: number, value: Uint8Array): Uint8Array {
  const file = new Uint8Array(2 * slotBytes);
  file.set(encodeSlot(slotBytes, 0, 2, value), 0);
  file.set(encodeSlot(slotBytes, 1, 1, null), slotBytes);
  return file;
}

/** What one slot holds. */
export type SlotView =
  /** Every unit passes its check and carries one stamp. `value` null: a filler. */
  | { readonly kind: 'whole'; readonly stamp: number; readonly value: Uint8Array | null }
  /** Every unit passes its check, but they carry different stamps: a write torn by a crash (or being written now). */
  | { readonly kind: 'torn'; readonly minStamp: number; readonly maxStamp: number }
  /**
   * Some unit fails its check: damage (no crash leaves a unit half-written), or the prefix a failed
   * write call left. `maxStamp`: of the units that pass, null when none does; `lastStamp`: of the
   * slot's last unit when it passes (the last bytes a write of the slot puts down), else null.
   */
  | { readonly kind: 'damaged'; readonly maxStamp: number | null; readonly lastStamp: number | null; readonly reason: string }
  /** A valid slot of the first format. */
  | { readonly kind: 'v1'; readonly sequence: number; readonly value: Uint8Array };

/** Reads slot `slot` of `file` (two slots of `slotBytes`, zeros past the file's end). */
export function decodeSlot(file: Uint8Array, slot: 0 | 1, slotBytes: number): SlotView {
  const unit = unitBytesOf(slotBytes);
  const units = slotBytes / unit;
  const payload = unit - UNIT_TRAILER_BYTES;
  const base = slot * slotBytes;
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  const seed = seedsOf(slotBytes, slot);
  const unitCheck = (k: number): boolean => {
    const at = base + k * unit;
    return crc32(file.subarray(at, at + unit - 4), seed[k]!) === view.getUint32(at + unit - 4, true);
  };
  // The stamps first (no CRC): one stamp in every unit is the common case.
  const stamps = new Array<number>(units);
  let uniform = true;
  for (let k = 0; k < units; k++) {
    const at = base + k * unit + payload;
    const lo = view.getUint32(at, true);
    const hi = view.getUint32(at + 4, true);
    // A stamp is 1 … 2^53 − 1 (0 marks a unit no write put there, such as zeros).
    stamps[k] = (lo === 0 && hi === 0) || hi >= 0x200000 ? 0 : hi * 0x100000000 + lo;
    if (stamps[k] !== stamps[0]) uniform = false;
  }
  // Fast path: one stamp, the first unit's own check, and the slot check over the other units.
  if (uniform && stamps[0]! > 0 && unitCheck(0) && (units === 1 || crc32(file.subarray(base + unit, base + slotBytes), seed[1]!) === view.getUint32(base + 12, true))) {
    return wholeSlot(file, base, slotBytes, stamps[0]!);
  }
  let min = Number.POSITIVE_INFINITY;
  let max = 0;
  let bad = 0;
  let zeros = 0;
  let firstBad = -1;
  let last: number | null = null;
  for (let k = 0; k < units; k++) {
    const s = stamps[k]!;
    if (s === 0 || !unitCheck(k)) {
      bad++;
      if (firstBad < 0) firstBad = k;
      const at = base + k * unit;
      if (isAllZero(file.subarray(at, at + unit))) zeros++;
      continue;
    }
    if (k === units - 1) last = s;
    if (s < min) min = s;
    if (s > max) max = s;
  }
  if (bad > 0) {
    const v1 = decodeSlotV1(file, base, slotBytes);
    if (v1 !== null) return v1;
    const reason =
      zeros === units
        ? 'all zeros'
        : zeros === bad
          ? `${bad} of ${units} sector(s) zeroed (the first at byte ${base + firstBad * unit})`
          : `${bad} of ${units} sector(s) fail their check (the first at byte ${base + firstBad * unit})`;
    return { kind: 'damaged', maxStamp: bad === units ? null : max, lastStamp: last, reason };
  }
  if (min !== max) return { kind: 'torn', minStamp: min, maxStamp: max };
  // Every unit checks and carries one stamp, but the slot check fails: units of two writes that
  // used one stamp (a filler written again over its own torn remnant); never a value.
  return { kind: 'damaged', maxStamp: max, lastStamp: max, reason: 'sectors of two writes with one stamp' };
}

/** The slot at `base` once its units are known to be one write's: its header checked, its value copied out. */
function wholeSlot(file: Uint8Array, base: number, slotBytes: number, stamp: number): SlotView {
  const unit = unitBytesOf(slotBytes);
  const units = slotBytes / unit;
  const payload = unit - UNIT_TRAILER_BYTES;
  const view = new DataView(file.buffer, file.byteOffset, file.byteLength);
  if (view.getUint32(base, true) !== CELL_MAGIC || view.getUint32(base + 4, true) !== slotBytes) {
    return { kind: 'damaged', maxStamp: stamp, lastStamp: stamp, reason: 'a slot header that no write produced' };
  }
  const length = view.getUint32(base + 8, true);
  if (length === NO_VALUE) return { kind: 'whole', stamp, value: null };
  if (length > cellValueCapacity(slotBytes)) return { kind: 'damaged', maxStamp: stamp, lastStamp: stamp, reason: `length ${length} beyond the capacity` };
  const value = new Uint8Array(length);
  let from = 0;
  for (let k = 0; k < units && from < length; k++) {
    const start = k === 0 ? SLOT_HEADER_BYTES : 0;
    const n = Math.min(payload - start, length - from);
    value.set(file.subarray(base + k * unit + start, base + k * unit + start + n), from);
    from += n;
  }
  return { kind: 'whole', stamp, value };
}

/** A valid first-format slot at `base`, or null. */
function decodeSlotV1(file: Uint8Array, base: number, slotBytes: number): SlotView | null {
  const view = new DataView(file.buffer, file.byteOffset + base, slotBytes);
  if (view.getUint32(0, true) !== CELL_MAGIC_V1 || view.getUint32(4, true) !== slotBytes) return null;
  const length = view.getUint32(16, true);
  if (length > slotBytes - V1_HEADER_BYTES) return null;
  const slot = file.subarray(base, base + slotBytes);
  if (crc32(slot.subarray(V1_HEADER_BYTES), crc32(slot.subarray(0, 20))) !== view.getUint32(20, true)) return null;
  const sequence = view.getBigUint64(8, true);
  if (sequence < 1n || sequence > BigInt(Number.MAX_SAFE_INTEGER)) return null;
  return { kind: 'v1', sequence: Number(sequence), value: slot.slice(V1_HEADER_BYTES, V1_HEADER_BYTES + length) };
}

/**
 * The bytes of one first-format slot (the layout cells wrote before sector stamps). Kept so that
 * tests and tools can build files of that format; nothing writes it any more.
 */
export function encodeSlotV1(slotBytes: number, sequence: number, value: Uint8Array): Uint8Array {
  const out = new Uint8Array(slotBytes);
  const view = new DataView(out.buffer);
  view.setUint32(0, CELL_MAGIC_V1, true);
  view.setUint32(4, slotBytes, true);
  view.setBigUint64(8, BigInt(sequence), true);
  view.setUint32(16, value.length, true);
  out.set(value, V1_HEADER_BYTES);
  view.setUint32(20, crc32(out.subarray(V1_HEADER_BYTES), crc32(out.subarray(0, 20))), true);
  return out;
}

let zeroPage = Buffer.alloc(0);

/** True when every byte is zero (a native compare). */
function isAllZero(bytes: Uint8Array): boolean {
  if (zeroPage.length < bytes.length) zeroPage = Buffer.alloc(bytes.length);
  return Buffer.compare(bytes, zeroPage.subarray(0, bytes.length)) === 0;
}

/** The value a file serves and what a writer must know to write the next one. */
export interface CellState {
  /** The live slot, its stamp (a first-format slot: its sequence) and value. */
  readonly live: { readonly slot: 0 | 1; readonly stamp: number; readonly value: Uint8Array; readonly format: 1 | 2 };
  /** The other slot, as it decoded. */
  readonly standby: SlotView;
  /** The stamp the next write takes: above every stamp and sequence in the file. */
  readonly nextStamp: number;
  /**
   * What a writer writes before its next value: 'convert' — the live slot is of the first format
   * (its value goes into the standby slot in this format, then a filler over the live slot);
   * 'fill' — the standby slot is neither whole nor torn (damaged, or of the first format), so a
   * filler stamped just below the live slot goes there first, and a crash in the next write
   * leaves a torn slot, not a damaged one; null — nothing.
   */
  readonly prepare: 'convert' | 'fill' | null;
}

function stampsOf(v: SlotView): number {
  switch (v.kind) {
    case 'whole':
      return v.stamp;
    case 'torn':
      return v.maxStamp;
    case 'damaged':
      return v.maxStamp ?? 0;
    case 'v1':
      return v.sequence;
  }
}

/**
 * The live value of a cell file: `file` holds its first 2 × slotBytes bytes (zeros past its end),
 * `size` is its length. Throws INVALID when the file was created with another slot size, CORRUPT
 * when it is not a file that writes and crashes leave — above all when the newer slot is damaged:
 * the older value is never served in its place.
 */
export function decodeCell(file: Uint8Array, size: number, slotBytes: number, path: string): CellState {
  const head = new DataView(file.buffer, file.byteOffset, file.byteLength);
  const magic = head.getUint32(0, true);
  const written = head.getUint32(4, true);
  if ((magic === CELL_MAGIC || magic === CELL_MAGIC_V1) && written !== slotBytes && size === 2 * written && slotBytesProblem(written) === null) {
    throw invalid(`cell ${path} was created with slotBytes ${written}, opened with ${slotBytes}`, { path, slotBytes: written });
  }
  if (size !== 2 * slotBytes) throw corrupt(`cell ${path} is ${size} bytes, expected ${2 * slotBytes}`, { path, size });
  const a = decodeSlot(file, 0, slotBytes);
  const b = decodeSlot(file, 1, slotBytes);
  const nextStamp = Math.max(stampsOf(a), stampsOf(b)) + 1;
  const fail = (why: string): never => {
    throw corrupt(`cell ${path}: ${why} (slot 0: ${describeSlot(a)}; slot 1: ${describeSlot(b)})`, { path });
  };
  const state = (slot: 0 | 1, live: SlotView, standby: SlotView): CellState => {
    if (live.kind === 'v1') return { live: { slot, stamp: live.sequence, value: live.value, format: 1 }, standby, nextStamp, prepare: 'convert' };
    if (live.kind !== 'whole') return fail('no valid slot');
    if (live.value === null) return fail('the only whole slot holds no value');
    const clean = standby.kind === 'whole' || standby.kind === 'torn';
    return { live: { slot, stamp: live.stamp, value: live.value, format: 2 }, standby, nextStamp, prepare: clean ? null : 'fill' };
  };

  // A file of the first format, or one being converted from it. A writer converts by writing the
  // live value into the standby slot (this format), then a filler over the first-format slot; both
  // hold the same value, so whichever a crash leaves, the value is the same.
  if (a.kind === 'v1' || b.kind === 'v1') {
    if (a.kind === 'v1' && b.kind === 'v1') {
      if (Math.abs(a.sequence - b.sequence) !== 1) fail(`both slots valid with sequences ${a.sequence} and ${b.sequence}`);
      return a.sequence > b.sequence ? state(0, a, b) : state(1, b, a);
    }
    const [old, oldSlot, other, otherSlot] = a.kind === 'v1' ? [a, 0 as const, b, 1 as const] : [b, 1 as const, a, 0 as const];
    // A whole slot of this format was written after the first-format one (the conversion's first step).
    if (other.kind === 'whole') return state(otherSlot, other, old);
    // Otherwise the first format's rule: the other slot is torn or was never written. That format
    // cannot tell damage from a tear; a file leaves it at its first write.
    return state(oldSlot, old, other);
  }

  if (a.kind === 'whole' && b.kind === 'whole') {
    if (a.stamp === b.stamp) fail(`both slots carry stamp ${a.stamp}`);
    return a.stamp > b.stamp ? state(0, a, b) : state(1, b, a);
  }
  const [live, liveSlot, standby] = a.kind === 'whole' ? [a, 0 as const, b] : b.kind === 'whole' ? [b, 1 as const, a] : [null, 0 as const, a];
  if (live === null) return fail('no whole slot');
  // The standby slot is torn or damaged. A crash tears only the slot being written, which is never
  // the live one, and a write takes a stamp above every stamp in the file; so a torn standby holds
  // the write's new units above the live stamp and its old units (the slot's previous content)
  // below it. A damaged unit is no crash: if any unit of the standby that still checks carries a
  // stamp above the live one, the standby was written after the live slot — it was the newer
  // value, now damaged — and the older value must not be served.
  if (standby.kind === 'torn') {
    if (standby.minStamp >= live.stamp) fail(`slot ${1 - liveSlot} is torn between stamps ${standby.minStamp} and ${standby.maxStamp}, all above the live stamp ${live.stamp}`);
    return state(liveSlot, live, standby);
  }
  if (standby.kind === 'damaged') {
    // The slot's last unit holds the last bytes any write of the slot puts down. When it checks and
    // is stamped below the live slot, no write after the live one completed there: whatever newer
    // units precede it are a write that never finished (a failed call's prefix, or a concurrent
    // write seen by a lock-free reader), not an acknowledged value.
    const last = standby.lastStamp;
    const stamp = standby.maxStamp;
    if (last !== null && last < live.stamp) return state(liveSlot, live, standby);
    if (stamp === null) fail(`slot ${1 - liveSlot} is damaged and nothing says whether it held a newer value`);
    else if (stamp >= live.stamp) fail(`slot ${1 - liveSlot} held a newer value (stamp ${stamp}) and is damaged`);
  }
  return state(liveSlot, live, standby);
}

/** How a slot decoded, in words (for messages and `seglog verify`). */
export function describeSlot(v: SlotView): string {
  switch (v.kind) {
    case 'whole':
      return v.value === null ? `filler, stamp ${v.stamp}` : `whole, stamp ${v.stamp}, ${v.value.length} bytes`;
    case 'torn':
      return `torn by a crash between stamps ${v.minStamp} and ${v.maxStamp}`;
    case 'damaged':
      return `damaged: ${v.reason}`;
    case 'v1':
      return `first format, sequence ${v.sequence}, ${v.value.length} bytes`;
  }
}
