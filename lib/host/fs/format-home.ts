// The bytes of a scope's home: its cell value (`state`) and its row files (`r-<gen>`). Pure
// encoders and decoders, no I/O.
//
// Owns: the home value (version, bounds, head inline or in a blob, the row files that hold the
// rows, the per-stripe cut) and the row file header and frame (docs/format-host.md).
// Guarantees: a home value is accepted only when its lengths agree, every number is a safe
// integer in range and its row files cover exactly [first, end) (else CORRUPT naming the file);
// a row file header only with its magic, version, CRC, gen and start; row frames are CRC-seeded
// with the file's gen, so a frame of another row file never validates.

import { crc32 } from 'node:zlib';
import { corrupt } from '../../errors.js';
import type { ScopeKind } from '../types.js';
import { closingCrcHolds, FORMAT_VERSION, hasOpening, MAGIC, putClosingCrc, putOpening, putU16, putU32, putU64, text, u16, u32, u64, utf8 } from './format-bytes.js';
import { KIND_CODE, kindOfCode } from './format-names.js';

// ---------------------------------------------------------------------------------------------
// A scope's home cell value (`scopes/<xx>/<k><digest>/state`, a cell with 8 KiB slots).
//  0 magic 'SGHH' | 4 version u8 | 5 kind u8 | 6 flags u8 (1 deleted, 2 head in a blob file)
//  7 stripes u8 (K) | 8 version u64 | 16 first u64 | 24 end u64 | 32 head length u32
// 36 head CRC32 u32 | 40 name length u16 | 42 commit id length u8 | 43 row file count u8
// 44 reserved u32 | 48 cut: K × u64 (per stripe, the lsn below which the checkpoint round that
// wrote this value had read every record) | name | commit id | head bytes (inline) or blob gen
// (8 bytes) | row files, 32 bytes each: gen (8), start u64, count u64, end offset u48, flags u16
// (1: sealed)

export const HOME_SLOT_BYTES = 8192;
/** Heads up to this many bytes live in the home cell itself; longer ones in a blob file. */
export const INLINE_HEAD_BYTES = 2048;
export const MAX_ROW_FILES = 150;
const H_DELETED = 1;
const H_BLOB = 2;

export interface RowFileRef {
  gen: string; // 16 hex
  start: number;
  count: number;
  /** Offset just after the file's last counted frame (below 2^48). */
  endOffset: number;
  /** No more rows go to this file (it was cut by a truncation: bytes past its end were named once). */
  sealed: boolean;
}

export interface HomeValue {
  kind: ScopeKind;
  name: string;
  version: number;
  commitId: string;
  deleted: boolean;
  /** Per stripe: the checkpoint round that wrote this value had read every record below this lsn. */
  cut: number[];
  first: number;
  end: number;
  headLength: number;
  headCrc: number;
  /** Inline head bytes, or null when the head is in blob `headGen`. */
  head: Uint8Array | null;
  headGen: string | null;
  rowFiles: RowFileRef[];
  /** A small scope's rows [first, end), when the base is its scope table entry (no row files then). */
  inlineRows?: readonly Uint8Array[];
}

export function encodeHome(h: HomeValue): Uint8Array {
  const name = utf8(h.name);
  const id = utf8(h.commitId);
  if (h.rowFiles.length > MAX_ROW_FILES) throw new RangeError('too many row files');
  const headBytes = h.head !== null ? h.head.length : 8;
  const cutBytes = 8 * h.cut.length;
  const b = new Uint8Array(48 + cutBytes + name.length + id.length + headBytes + 32 * h.rowFiles.length);
  putU32(b, 0, MAGIC.home);
  b[4] = FORMAT_VERSION;
  b[5] = KIND_CODE[h.kind];
  b[6] = (h.deleted ? H_DELETED : 0) | (h.head === null ? H_BLOB : 0);
  b[7] = h.cut.length;
  putU64(b, 8, h.version);
  putU64(b, 16, h.first);
  putU64(b, 24, h.end);
  putU32(b, 32, h.headLength);
  putU32(b, 36, h.headCrc);
  putU16(b, 40, name.length);
  b[42] = id.length;
  b[43] = h.rowFiles.length;
  let p = 48;
  for (const c of h.cut) {
    putU64(b, p, c);
    p += 8;
  }
  b.set(name, p);
  p += name.length;
  b.set(id, p);
  p += id.length;
  if (h.head !== null) b.set(h.head, p);
  else b.set(Buffer.from(h.headGen ?? '0000000000000000', 'hex'), p);
  p += headBytes;
  for (const r of h.rowFiles) {
    b.set(Buffer.from(r.gen, 'hex'), p);
    putU64(b, p + 8, r.start);
    putU64(b, p + 16, r.count);
    putU32(b, p + 24, r.endOffset >>> 0);
    putU16(b, p + 28, Math.floor(r.endOffset / 0x100000000));
    putU16(b, p + 30, r.sealed ? 1 : 0);
    p += 32;
  }
  return b;
}

export function decodeHome(b: Uint8Array, file: string): HomeValue {
  const bad = (why: string): Error => corrupt(`home cell ${file}: ${why}`, { file });
  if (b.length < 48 || u32(b, 0) !== MAGIC.home || b[4] !== FORMAT_VERSION) throw bad('not a home value');
  const kind = kindOfCode(b[5]!);
  if (kind === undefined) throw bad('unknown kind');
  const flags = b[6]!;
  const stripes = b[7]!;
  const nameLen = u16(b, 40);
  const idLen = b[42]!;
  const files = b[43]!;
  const headLength = u32(b, 32);
  const blob = (flags & H_BLOB) !== 0;
  const headBytes = blob ? 8 : headLength;
  if (b.length !== 48 + 8 * stripes + nameLen + idLen + headBytes + 32 * files) throw bad('lengths disagree');
  let p = 48;
  const cut: number[] = [];
  for (let i = 0; i < stripes; i++, p += 8) cut.push(u64(b, p));
  let name: string;
  let commitId: string;
  try {
    name = text(b.subarray(p, p + nameLen));
    commitId = text(b.subarray(p + nameLen, p + nameLen + idLen));
  } catch {
    throw bad('name or commit id is not UTF-8');
  }
  p += nameLen + idLen;
  const head = blob ? null : b.slice(p, p + headLength);
  const headGen = blob ? Buffer.from(b.subarray(p, p + 8)).toString('hex') : null;
  p += headBytes;
  const rowFiles: RowFileRef[] = [];
  for (let i = 0; i < files; i++, p += 32) {
    rowFiles.push({
      gen: Buffer.from(b.subarray(p, p + 8)).toString('hex'),
      start: u64(b, p + 8),
      count: u64(b, p + 16),
      endOffset: u32(b, p + 24) + u16(b, p + 28) * 0x100000000,
      sealed: (u16(b, p + 30) & 1) !== 0,
    });
  }
  const h: HomeValue = {
    kind,
    name,
    version: u64(b, 8),
    commitId,
    deleted: (flags & H_DELETED) !== 0,
    cut,
    first: u64(b, 16),
    end: u64(b, 24),
    headLength,
    headCrc: u32(b, 36),
    head,
    headGen,
    rowFiles,
  };
  if (![h.version, h.first, h.end, ...cut].every(Number.isSafeInteger) || h.first > h.end || h.version < 1) throw bad('values out of range');
  // The files cover exactly [first, end): the first one starts at or below first, each next one
  // starts where the one before ends, and the last one ends at end.
  let at = -1;
  for (const r of rowFiles) {
    if (!Number.isSafeInteger(r.start) || !Number.isSafeInteger(r.count) || r.count < 1) throw bad('row file out of range');
    if (at === -1 ? r.start > h.first || r.start + r.count <= h.first : r.start !== at) throw bad('row files do not cover the rows');
    at = r.start + r.count;
  }
  if (rowFiles.length === 0 ? h.first !== h.end : at !== h.end) throw bad('row files disagree with the rows');
  return h;
}

// ---------------------------------------------------------------------------------------------
// Home row files (`r-<gen>`): a 32-byte header, then row frames.
//  header: 0 magic 'SGHR' | 4 version u16 | 6 reserved u16 | 8 gen (8 bytes) | 16 start u64
//          24 reserved u32 | 28 CRC32 of 0..28
//  frame:  0 CRC32 of bytes 4..16+len seeded with the file's salt (CRC32 of the gen bytes)
//          4 len u32 | 8 index u64 | 16 row bytes

export const ROW_HEADER_BYTES = 32;
export const ROW_FRAME_HEADER_BYTES = 16;

export function rowSalt(gen: string): number {
  return crc32(Buffer.from(gen, 'hex'));
}

export function encodeRowHeader(gen: string, start: number): Uint8Array {
  const b = new Uint8Array(ROW_HEADER_BYTES);
  putOpening(b, MAGIC.row);
  b.set(Buffer.from(gen, 'hex'), 8);
  putU64(b, 16, start);
  putClosingCrc(b, 28);
  return b;
}

export function checkRowHeader(b: Uint8Array, gen: string, start: number): boolean {
  if (!hasOpening(b, MAGIC.row, ROW_HEADER_BYTES) || !closingCrcHolds(b, 28)) return false;
  return Buffer.from(b.subarray(8, 16)).toString('hex') === gen && u64(b, 16) === start;
}

/** Writes a row frame (header and row) into `b` at `at`; answers its length. */
export function writeRowFrame(b: Uint8Array, at: number, index: number, row: Uint8Array, salt: number): number {
  putU32(b, at + 4, row.length);
  putU64(b, at + 8, index);
  b.set(row, at + ROW_FRAME_HEADER_BYTES);
  putU32(b, at, crc32(b.subarray(at + 4, at + ROW_FRAME_HEADER_BYTES + row.length), salt));
  return ROW_FRAME_HEADER_BYTES + row.length;
}
