// The field helpers every encoding of the fs host store is written with: no I/O, no state.
//
// Owns: little-endian reads and writes of u16, u32, u64 (as safe integers) and f64 on a
// Uint8Array, exact UTF-8 text, the format version every file of a realm carries, the opening
// (magic, version) and the closing CRC32 most of them share, and a byte comparison. Guarantees: no helper allocates more than the value it returns, and `text` throws
// on bytes that are not exactly UTF-8 (decoders turn that into CORRUPT). The layouts written with
// these are in format.ts and the modules it re-exports (docs/format-host.md).

import { crc32 } from 'node:zlib';
import { decodeUtf8Exact } from '../../text.js';

/**
 * The version of every file of a realm (FORMAT, stripe files, notes, cells, row files, scope
 * tables). Version 1 (one home directory per scope, no scope table) is refused at open with its
 * number named (docs/format-host.md, "Versions").
 */
export const FORMAT_VERSION = 2;

/**
 * The magic (u32 at offset 0) of each kind of file or value of a realm, in one table so that no
 * two kinds share one: 'SGH' and a letter, little-endian.
 */
export const MAGIC = Object.freeze({
  format: 0x46484753, // 'SGHF'
  stripe: 0x53484753, // 'SGHS'
  published: 0x50484753, // 'SGHP'
  checkpoint: 0x43484753, // 'SGHC'
  fence: 0x4c484753, // 'SGHL'
  home: 0x48484753, // 'SGHH'
  row: 0x52484753, // 'SGHR'
  table: 0x54484753, // 'SGHT'
});

// ---------------------------------------------------------------------------------------------
// Little-endian helpers on Uint8Array (no BigInt on the hot path: u64 values are safe integers).

export function u16(b: Uint8Array, at: number): number {
  return b[at]! | (b[at + 1]! << 8);
}
export function putU16(b: Uint8Array, at: number, v: number): void {
  b[at] = v & 0xff;
  b[at + 1] = (v >>> 8) & 0xff;
}
export function u32(b: Uint8Array, at: number): number {
  return (b[at]! | (b[at + 1]! << 8) | (b[at + 2]! << 16)) + b[at + 3]! * 0x1000000;
}
export function putU32(b: Uint8Array, at: number, v: number): void {
  b[at] = v & 0xff;
  b[at + 1] = (v >>> 8) & 0xff;
  b[at + 2] = (v >>> 16) & 0xff;
  b[at + 3] = (v >>> 24) & 0xff;
}
/**
 * A u64 read as a number; values above 2^53 − 1 read as NaN-free but unsafe numbers (callers check).
 * A value below 2^32 is answered as the low word itself: the product with 2^32 (not a small
 * integer) would make every value a heap number, and the lsns, offsets and tokens read this way
 * end in the fields of the records a view keeps, whose every numeric field V8 then boxes.
 */
export function u64(b: Uint8Array, at: number): number {
  const hi = u32(b, at + 4);
  const lo = u32(b, at);
  return hi === 0 ? lo : lo + hi * 0x100000000;
}
export function putU64(b: Uint8Array, at: number, v: number): void {
  putU32(b, at, v >>> 0);
  putU32(b, at + 4, Math.floor(v / 0x100000000));
}
export function f64(b: Uint8Array, at: number): number {
  return new DataView(b.buffer, b.byteOffset, b.byteLength).getFloat64(at, true);
}
export function putF64(b: Uint8Array, at: number, v: number): void {
  new DataView(b.buffer, b.byteOffset, b.byteLength).setFloat64(at, v, true);
}

const encoder = new TextEncoder();

export function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}
export function text(b: Uint8Array): string {
  return decodeUtf8Exact(b);
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// The opening and the closing CRC shared by the realm's files (a home cell's value opens with a
// u8 version instead, and a FORMAT value tells a bad magic from a bad version).

/** Writes the opening: magic u32 at 0, FORMAT_VERSION u16 at 4. */
export function putOpening(b: Uint8Array, magic: number): void {
  putU32(b, 0, magic);
  putU16(b, 4, FORMAT_VERSION);
}

/** True when `b` holds at least `min` bytes and opens as `putOpening(b, magic)` writes. */
export function hasOpening(b: Uint8Array, magic: number, min: number): boolean {
  return b.length >= min && u32(b, 0) === magic && u16(b, 4) === FORMAT_VERSION;
}

/** Writes at `at` the CRC32 of bytes [0, at). */
export function putClosingCrc(b: Uint8Array, at: number): void {
  putU32(b, at, crc32(b.subarray(0, at)));
}

/** True when the u32 at `at` is the CRC32 of bytes [0, at) (as `putClosingCrc` writes). */
export function closingCrcHolds(b: Uint8Array, at: number): boolean {
  return crc32(b.subarray(0, at)) === u32(b, at);
}
