// On-disk encodings of the segmented log: pure functions, no I/O.
//
// Owns: the segment header, the record frame, the segment index (`.idx`) and the manifest value,
// and the file names. Guarantees: every decoder checks every length against a bound before it
// allocates, and answers a typed CORRUPT (naming the file and the offset) instead of trusting bad
// bytes. The byte-by-byte layout is in docs/format.md (segmented log); keep the two in step.

import { crc32 } from '../lib/checksum.js';
import { randomFillSync } from 'node:crypto';
import { corrupt } from '../lib/errors.js';

/** Little-endian u32 helpers over a plain Uint8Array (a Buffer is one). */
function u32(b: Uint8Array, at: number): number {
  return (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16)) + b[at + 3]! * 0x1000000;
}
function putU32(b: Uint8Array, at: number, v: number): void {
  b[at] = v & 0xff;
  b[at + 1] = (v >>> 8) & 0xff;
  b[at + 2] = (v >>> 16) & 0xff;
  b[at + 3] = (v >>> 24) & 0xff;
}
/** A safe integer as two u32 halves (low first); no BigInt on the hot path. */
function u64(b: Uint8Array, at: number): number {
  return u32(b, at) + u32(b, at + 4) * 0x100000000;
}
function putU64(b: Uint8Array, at: number, v: number): void {
  putU32(b, at, v >>> 0);
  putU32(b, at + 4, Math.floor(v / 0x100000000));
}
export { u32 as readU32, putU32 as writeU32, u64 as readU64, putU64 as writeU64 };

// ---------------------------------------------------------------------------------------------
// Identities and names

/** A segment's random 64-bit identity; also the salt of every checksum in it. */
export type SegmentId = Uint8Array; // 8 bytes

export const SEGMENT_SUFFIX = '.seg';
export const INDEX_SUFFIX = '.idx';
export const MANIFEST_NAME = 'MANIFEST';
export const LOCK_NAME = 'LOCK';

/** The CRC seed of a segment: the CRC of its 8 id bytes. */
export function saltOf(id: SegmentId): number {
  return crc32(id);
}

/**
 * A fresh random id. An id whose salt would let an all-zero frame validate as record 0 is
 * refused (a 2^-32 event), so that zero-filled (preallocated) space can never read as a record.
 */
export function newSegmentId(): SegmentId {
  for (;;) {
    const id = new Uint8Array(8);
    randomFillSync(id);
    if (crc32(ZERO_FRAME_REST, saltOf(id)) !== 0) return id;
  }
}
const ZERO_FRAME_REST = new Uint8Array(12);

export function idHex(id: SegmentId): string {
  return Buffer.from(id.buffer, id.byteOffset, id.byteLength).toString('hex');
}

export function segmentBaseName(base: number, id: SegmentId): string {
  return `${String(base).padStart(20, '0')}-${idHex(id)}`;
}

/** Parses `<20 digits>-<16 hex>.seg|.idx`; null for any other name. */
export function parseSegmentFileName(name: string): { base: number; idHex: string; kind: 'seg' | 'idx' } | null {
  const m = /^(\d{20})-([0-9a-f]{16})\.(seg|idx)$/.exec(name);
  if (m === null) return null;
  const base = Number(m[1]);
  if (!Number.isSafeInteger(base)) return null;
  return { base, idHex: m[2]!, kind: m[3] as 'seg' | 'idx' };
}

// ---------------------------------------------------------------------------------------------
// Segment header: 40 bytes at offset 0 of every segment file.
//
//  0 magic "SLSG" | 4 version u16 | 6 flags u16 (0) | 8 base u64 | 16 id (8 bytes)
// 24 generation u64: the manifest generation that first names this segment
// 32 reserved u32 (0) | 36 CRC32 of bytes 0..36 (unseeded)

export const SEGMENT_MAGIC = 0x47534c53; // "SLSG" little-endian
export const FORMAT_VERSION = 1;
export const HEADER_BYTES = 40;

export interface SegmentHeader {
  base: number;
  id: SegmentId;
  generation: number;
}

export function encodeSegmentHeader(base: number, id: SegmentId, generation: number): Uint8Array {
  const b = new Uint8Array(HEADER_BYTES);
  putU32(b, 0, SEGMENT_MAGIC);
  b[4] = FORMAT_VERSION;
  putU64(b, 8, base);
  b.set(id, 16);
  putU64(b, 24, generation);
  putU32(b, 36, crc32(b.subarray(0, 36)));
  return b;
}

/** Decodes a segment header; null when it is short, torn or not a header of this format. */
export function decodeSegmentHeader(b: Uint8Array): SegmentHeader | null {
  if (b.length < HEADER_BYTES) return null;
  if (crc32(b.subarray(0, 36)) !== u32(b, 36) || u32(b, 0) !== SEGMENT_MAGIC) return null;
  if ((b[4]! | (b[5]! << 8)) !== FORMAT_VERSION) return null;
  return { base: u64(b, 8), id: b.slice(16, 24), generation: u64(b, 24) };
}

/**
 * Checks a header read from `file` against the base and id the manifest names, and against the
 * manifest's generation (a named segment cannot be younger than the manifest naming it).
 */
export function checkSegmentHeader(b: Uint8Array, file: string, base: number, id: SegmentId, generation: number): void {
  const h = decodeSegmentHeader(b);
  if (h === null) throw corrupt(`segment ${file}: header fails its checks`, { file, offset: 0 });
  if (h.base !== base) throw corrupt(`segment ${file}: header names base ${h.base}, manifest ${base}`, { file, offset: 8 });
  for (let i = 0; i < 8; i++) {
    if (h.id[i] !== id[i]) throw corrupt(`segment ${file}: header id differs from the manifest's`, { file, offset: 16 });
  }
  if (h.generation > generation) {
    throw corrupt(`segment ${file}: created for manifest generation ${h.generation}, manifest is at ${generation}`, { file, offset: 24 });
  }
}

// ---------------------------------------------------------------------------------------------
// Record frame: 16-byte header, then the payload.
//
//  0 CRC32 of bytes 4..16+len, seeded with the segment's salt | 4 len u32 | 8 index u64 | 16 payload

export const FRAME_HEADER_BYTES = 16;

/**
 * Writes a frame header's length and index into `into` at `at`, with a CRC field of zero: the frame
 * is not valid until `frameChecksum`'s value is put there.
 */
export function writeFrameHeaderFields(into: Uint8Array, at: number, index: number, length: number): void {
  putU32(into, at, 0);
  putU32(into, at + 4, length);
  putU64(into, at + 8, index);
}

/** The CRC field of the frame whose header fields are at `at` of `header` and whose payload is `payload`. */
export function frameChecksum(header: Uint8Array, at: number, payload: Uint8Array, salt: number): number {
  return crc32(payload, crc32(header.subarray(at + 4, at + 16), salt));
}

/** Writes a frame header for `payload` (already placed or not) into `into` at `at`. */
export function writeFrameHeader(into: Uint8Array, at: number, index: number, payload: Uint8Array, salt: number): void {
  writeFrameHeaderFields(into, at, index, payload.length);
  putU32(into, at, frameChecksum(into, at, payload, salt));
}

/**
 * Writes a complete frame (header and payload copy) into `into` at `at`; answers its length.
 * One CRC call over the contiguous bytes.
 */
export function writeFrame(into: Uint8Array, at: number, index: number, payload: Uint8Array, salt: number): number {
  putU32(into, at + 4, payload.length);
  putU64(into, at + 8, index);
  into.set(payload, at + 16);
  const end = at + 16 + payload.length;
  putU32(into, at, crc32(into.subarray(at + 4, end), salt));
  return end - at;
}

/** How a frame at some offset fails, or 'ok'. */
export type FrameCheck = 'ok' | 'short' | 'length' | 'index' | 'checksum';

/**
 * Checks the frame at `at` of `b` (which must hold at least its 16-byte header): the length
 * against `maxLen`, the index, and the checksum when the whole frame is in `b`.
 */
export function checkFrame(b: Uint8Array, at: number, expectedIndex: number, salt: number, maxLen: number): FrameCheck {
  if (b.length - at < FRAME_HEADER_BYTES) return 'short';
  const len = u32(b, at + 4);
  if (len > maxLen) return 'length';
  if (u64(b, at + 8) !== expectedIndex) return 'index';
  if (b.length - at < FRAME_HEADER_BYTES + len) return 'short';
  if (crc32(b.subarray(at + 4, at + 16 + len), salt) !== u32(b, at)) return 'checksum';
  return 'ok';
}

export function frameLength(b: Uint8Array, at: number): number {
  return u32(b, at + 4);
}

// ---------------------------------------------------------------------------------------------
// Segment index (`<segment>.idx`): derived data, written at seal (and at close for the active
// segment); a scan of the segment can always rebuild it.
//
//  0 magic "SLIX" | 4 version u16 | 6 flags u16 (0) | 8 base u64 | 16 id (8 bytes)
// 24 count u32 | 28 end offset u32 (just after the last frame) | 32 CRC32 of bytes 0..32 and
// 36..36+4*count, seeded with the segment's salt | 36 offsets: count × u32 (each frame's start)

export const INDEX_MAGIC = 0x58494c53; // "SLIX"
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
export const INDEX_HEADER_BYTES = 36;

export function encodeIndex(base: number, id: SegmentId, offsets: Uint32Array, count: number, endOffset: number): Uint8Array {
  const b = new Uint8Array(INDEX_HEADER_BYTES + 4 * count);
  putU32(b, 0, INDEX_MAGIC);
  b[4] = FORMAT_VERSION;
  putU64(b, 8, base);
  b.set(id, 16);
  putU32(b, 24, count);
  putU32(b, 28, endOffset);
  if (count > 0) {
    const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
    for (let i = 0; i < count; i++) view.setUint32(INDEX_HEADER_BYTES + 4 * i, offsets[i]!, true);
  }
  putU32(b, 32, indexCrc(b, saltOf(id)));
  return b;
}

function indexCrc(b: Uint8Array, salt: number): number {
  return crc32(b.subarray(INDEX_HEADER_BYTES), crc32(b.subarray(0, 32), salt));
}

/**
 * What an index file's 36-byte header claims for the segment (`base`, `id`), before its table is
 * read: null when it is not a header of this format and segment. `crcSeed` is the CRC of the
 * header's first 32 bytes: continue it over the offsets (`crc32(table, crcSeed)`) and compare with
 * `crc`. With a valid CRC the claim is the index's: frames [0, count) end at `endOffset`.
 */
export function decodeIndexHeader(
  b: Uint8Array,
  base: number,
  id: SegmentId,
): { count: number; endOffset: number; crc: number; crcSeed: number } | null {
  if (b.length < INDEX_HEADER_BYTES || u32(b, 0) !== INDEX_MAGIC) return null;
  if ((b[4]! | (b[5]! << 8)) !== FORMAT_VERSION) return null;
  if (u64(b, 8) !== base) return null;
  for (let i = 0; i < 8; i++) if (b[16 + i] !== id[i]) return null;
  const count = u32(b, 24);
  const endOffset = u32(b, 28);
  if (count > 0 ? endOffset < HEADER_BYTES + FRAME_HEADER_BYTES * count : endOffset !== HEADER_BYTES) return null;
  return { count, endOffset, crc: u32(b, 32), crcSeed: crc32(b.subarray(0, 32), saltOf(id)) };
}

/** The count an index file header claims, or -1 when the header is not a plausible index header. */
export function indexHeaderCount(b: Uint8Array): number {
  if (b.length < INDEX_HEADER_BYTES || u32(b, 0) !== INDEX_MAGIC) return -1;
  return u32(b, 24);
}

/**
 * Decodes an index file's bytes (exactly header + 4×count). Answers null when it is not a valid
 * index of this segment (torn, stale, foreign, or inconsistent): the caller then rebuilds it.
 */
export function decodeIndex(
  b: Uint8Array,
  base: number,
  id: SegmentId,
): { offsets: Uint32Array; count: number; endOffset: number } | null {
  if (b.length < INDEX_HEADER_BYTES || u32(b, 0) !== INDEX_MAGIC) return null;
  if ((b[4]! | (b[5]! << 8)) !== FORMAT_VERSION) return null;
  if (u64(b, 8) !== base) return null;
  for (let i = 0; i < 8; i++) if (b[16 + i] !== id[i]) return null;
  const count = u32(b, 24);
  if (b.length !== INDEX_HEADER_BYTES + 4 * count) return null;
  if (indexCrc(b, saltOf(id)) !== u32(b, 32)) return null;
  const endOffset = u32(b, 28);
  const offsets = new Uint32Array(Math.max(count, 16));
  const at = b.byteOffset + INDEX_HEADER_BYTES;
  if (LITTLE_ENDIAN && at % 4 === 0) {
    offsets.set(new Uint32Array(b.buffer, at, count));
  } else {
    const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
    for (let i = 0; i < count; i++) offsets[i] = view.getUint32(INDEX_HEADER_BYTES + 4 * i, true);
  }
  // Frames start at the header's end and follow one another, each at least a frame header long.
  if (count > 0 && offsets[0] !== HEADER_BYTES) return null;
  for (let i = 1; i < count; i++) if (offsets[i]! < offsets[i - 1]! + FRAME_HEADER_BYTES) return null;
  if (count > 0 ? endOffset < offsets[count - 1]! + FRAME_HEADER_BYTES : endOffset !== HEADER_BYTES) return null;
  return { offsets, count, endOffset };
}

// ---------------------------------------------------------------------------------------------
// Manifest value (stored in the two-slot cell `MANIFEST`, which adds its own checksum).
//
//  0 magic "SLMF" | 4 version u16 | 6 flags u16 (0) | 8 first index u64 | 16 generation u64
// 24 segment count u32 | 28 reserved u32 (0) | 32 per segment: base u64, id (8 bytes)

export const MANIFEST_MAGIC = 0x464d4c53; // "SLMF"
export const MANIFEST_HEADER_BYTES = 32;
export const MANIFEST_ENTRY_BYTES = 16;

export interface ManifestSegment {
  base: number;
  id: SegmentId;
}
export interface Manifest {
  firstIndex: number;
  /** Counts commits: 1 for a new log's first manifest, +1 for each structural change. */
  generation: number;
  segments: ManifestSegment[];
}

export function manifestBytes(segmentCount: number): number {
  return MANIFEST_HEADER_BYTES + MANIFEST_ENTRY_BYTES * segmentCount;
}

export function encodeManifest(m: Manifest): Uint8Array {
  const b = new Uint8Array(manifestBytes(m.segments.length));
  putU32(b, 0, MANIFEST_MAGIC);
  b[4] = FORMAT_VERSION;
  putU64(b, 8, m.firstIndex);
  putU64(b, 16, m.generation);
  putU32(b, 24, m.segments.length);
  let at = MANIFEST_HEADER_BYTES;
  for (const s of m.segments) {
    putU64(b, at, s.base);
    b.set(s.id, at + 8);
    at += MANIFEST_ENTRY_BYTES;
  }
  return b;
}

/** Decodes and checks a manifest value; CORRUPT (naming `file`) when it breaks an invariant. */
export function decodeManifest(b: Uint8Array, file: string): Manifest {
  const bad = (why: string, offset: number): Error => corrupt(`manifest ${file}: ${why}`, { file, offset });
  if (b.length < MANIFEST_HEADER_BYTES) throw bad('value too short', 0);
  if (u32(b, 0) !== MANIFEST_MAGIC) throw bad('bad magic', 0);
  const version = b[4]! | (b[5]! << 8);
  if (version !== FORMAT_VERSION) throw bad(`unknown format version ${version}`, 4);
  const firstIndex = u64(b, 8);
  if (!Number.isSafeInteger(firstIndex)) throw bad('first index out of range', 8);
  const generation = u64(b, 16);
  if (!Number.isSafeInteger(generation) || generation < 1) throw bad('generation out of range', 16);
  const count = u32(b, 24);
  if (count < 1) throw bad('names no segment', 24);
  if (b.length !== manifestBytes(count)) throw bad('length disagrees with its segment count', 24);
  const segments: ManifestSegment[] = [];
  let at = MANIFEST_HEADER_BYTES;
  for (let i = 0; i < count; i++) {
    const base = u64(b, at);
    if (!Number.isSafeInteger(base)) throw bad('segment base out of range', at);
    if (i > 0 && base <= segments[i - 1]!.base) throw bad('segment bases not increasing', at);
    segments.push({ base, id: b.slice(at + 8, at + 16) });
    at += MANIFEST_ENTRY_BYTES;
  }
  if (firstIndex < segments[0]!.base) throw bad('first index below the first segment', 8);
  if (segments.length > 1 && firstIndex > segments[1]!.base) throw bad('first index past the first segment', 8);
  return { firstIndex, generation, segments };
}
