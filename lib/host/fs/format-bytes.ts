// The field helpers every encoding of the fs host store is written with: no I/O, no state.
//
// Owns: little-endian reads and writes of u16, u32, u64 (as safe integers) and f64 on a
// Uint8Array, exact UTF-8 text, the format version every file of a realm carries, and a byte
// comparison. Guarantees: no helper allocates more than the value it returns, and `text` throws
// on bytes that are not exactly UTF-8 (decoders turn that into CORRUPT). The layouts written with
// these are in format.ts and the modules it re-exports (docs/format-host.md).

import { decodeUtf8Exact } from '../../text.js';

/** The version of every file of a realm (FORMAT, stripe files, notes, cells, row files). */
export const FORMAT_VERSION = 1;

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
/** A u64 read as a number; values above 2^53 − 1 read as NaN-free but unsafe numbers (callers check). */
export function u64(b: Uint8Array, at: number): number {
  return u32(b, at) + u32(b, at + 4) * 0x100000000;
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
