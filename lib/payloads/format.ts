// The payload store's bytes on disk: blob files, refcount files, the format marker, and names.
//
// Owns: encoding and validating the blob header, the per-chunk checksum rule, the refcount file
// (a set of holders), the format marker, digests and the paths they map to. Guarantees: pure
// functions over bytes (no I/O); a decoded header or holder set is returned only when every magic,
// bound, length and CRC32 checks, and a length read from disk is checked against its bound before
// it drives an allocation. docs/payloads.md is the prose twin of this file, byte by byte.
//
// Blob file `blobs/<hh>/<64 hex>` (little-endian):
//    0   8  magic 'SGLPAYLD'
//    8   4  u32 format version (1)
//   12   4  u32 chunkBytes: payload bytes per chunk (the last chunk may be shorter)
//   16   8  u64 size: payload bytes (<= 2^53 - 1)
//   24   8  u64 written: store time (ms, see store.ts) when this copy was written
//   32   8  salt: 8 random bytes, seeds every chunk's CRC (a chunk of another blob never checks)
//   40  32  SHA-256 of the payload (must equal the file name)
//   72   4  reserved, zero
//   76   4  CRC32 of bytes [0, 76)
//   80   ... ceil(size / chunkBytes) frames: the chunk's bytes, then u32 CRC32 of
//            (salt ‖ u64 chunk index ‖ chunk bytes)
// File length = 80 + size + 4 * chunks, exactly.
//
// Refcount file `refs/<hh>/<64 hex>` (little-endian), present only while the holder set is not empty:
//    0   8  magic 'SGLREFS1'
//    8   4  u32 holder count n (1 .. MAX_HOLDERS)
//   12   4  u32 body bytes b
//   16  32  SHA-256 of the payload it counts for (must equal the file name)
//   48   b  n holders, each u16 length L (1 .. MAX_HOLDER_BYTES) then L bytes of UTF-8, in strictly
//            increasing byte order (a set: no duplicates)
//   48+b 4  CRC32 of bytes [0, 48 + b)
//
// Format marker `FORMAT`: 'SGLPSTOR', u32 version 1, u32 CRC32 of the 12 bytes before it.

import { crc32 } from '../checksum.js';
import { corrupt } from '../errors.js';
import { decodeUtf8Exact } from '../text.js';

export const BLOB_MAGIC: Uint8Array = new TextEncoder().encode('SGLPAYLD');
export const REFS_MAGIC: Uint8Array = new TextEncoder().encode('SGLREFS1');
export const FORMAT_MAGIC: Uint8Array = new TextEncoder().encode('SGLPSTOR');
export const FORMAT_VERSION = 1;
export const BLOB_VERSION = 1;

export const BLOB_HEADER_BYTES = 80;
export const CHUNK_CRC_BYTES = 4;
export const REFS_HEADER_BYTES = 48;
export const FORMAT_BYTES = 16;

export const DEFAULT_CHUNK_BYTES = 64 * 1024;
/** Bounds on chunkBytes, read from disk before it sizes a read buffer. */
export const MIN_CHUNK_BYTES = 64;
export const MAX_CHUNK_BYTES = 4 * 1024 * 1024;

/** A holder is 1..256 bytes of UTF-8. */
export const MAX_HOLDER_BYTES = 256;
/** At most this many holders per payload (bounds a refcount file to about 4.2 MiB). */
export const MAX_HOLDERS = 16384;
export const MAX_REFS_BODY_BYTES = MAX_HOLDERS * (2 + MAX_HOLDER_BYTES);

// The store directory's entries (docs/payloads.md "Layout"): the store and the offline check
// name them from here.
export const LOCK_NAME = 'LOCK';
export const FORMAT_NAME = 'FORMAT';
export const CLOCK_NAME = 'CLOCK';
/** The CLOCK cell's slot size. */
export const CLOCK_SLOT_BYTES = 64;
export const BLOBS = 'blobs';
export const REFS = 'refs';
/** The suffix of a refcount file's marker `refs/<hh>/<hex>.held` (docs/payloads.md, "The marker"). */
export const HELD_SUFFIX = '.held';
export const TMP = 'tmp';

export const DIGEST_PREFIX = 'sha256:';
const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;
const HEX_RE = /^[0-9a-f]{64}$/;
const FANOUT_RE = /^[0-9a-f]{2}$/;

/** True for `'sha256:'` followed by 64 lowercase hex digits. */
export function isPayloadDigest(s: unknown): s is string {
  return typeof s === 'string' && DIGEST_RE.test(s);
}

/** True for a blob or refcount file name (64 lowercase hex). */
export function isHexName(s: string): boolean {
  return HEX_RE.test(s);
}

/** True for a fan-out directory name (2 lowercase hex). */
export function isFanoutName(s: string): boolean {
  return FANOUT_RE.test(s);
}

/** The 64 hex digits of a digest. */
export function hexOf(digest: string): string {
  return digest.slice(DIGEST_PREFIX.length);
}

/** The fan-out directory name of a digest: its first two hex digits. */
export function fanoutOf(hex: string): string {
  return hex.slice(0, 2);
}

/** How many frames a payload of `size` bytes has. */
export function chunkCount(size: number, chunkBytes: number): number {
  return Math.ceil(size / chunkBytes);
}

/** The exact length of a blob file holding `size` payload bytes. */
export function blobFileBytes(size: number, chunkBytes: number): number {
  return BLOB_HEADER_BYTES + size + CHUNK_CRC_BYTES * chunkCount(size, chunkBytes);
}

/** The CRC32 a frame carries: over salt ‖ u64 LE index ‖ chunk bytes. */
export function chunkCrc(salt: Uint8Array, index: number, chunk: Uint8Array): number {
  // A fresh prefix per chunk, not a scratch one: the CPU it costs was not measurable, and this
  // small garbage is what drives the young-generation collections that also free the chunk
  // buffers a get's consumer dropped (with a scratch prefix a 256 MiB put and get on Node 24 grew
  // resident memory by 53–54 MiB instead of 45–47, test payloads.test.ts).
  const prefix = new Uint8Array(16);
  prefix.set(salt, 0);
  new DataView(prefix.buffer).setBigUint64(8, BigInt(index), true);
  return crc32(chunk, crc32(prefix));
}

export interface BlobHeader {
  readonly chunkBytes: number;
  readonly size: number;
  readonly written: number;
  readonly salt: Uint8Array;
  readonly sha256: Uint8Array;
}

export function encodeBlobHeader(h: BlobHeader): Uint8Array {
  const out = new Uint8Array(BLOB_HEADER_BYTES);
  const view = new DataView(out.buffer);
  out.set(BLOB_MAGIC, 0);
  view.setUint32(8, BLOB_VERSION, true);
  view.setUint32(12, h.chunkBytes, true);
  view.setBigUint64(16, BigInt(h.size), true);
  view.setBigUint64(24, BigInt(h.written), true);
  out.set(h.salt.subarray(0, 8), 32);
  out.set(h.sha256.subarray(0, 32), 40);
  view.setUint32(76, crc32(out.subarray(0, 76)), true);
  return out;
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Validates a blob header read from `file` (whose name says `hex`) and its file length. Throws
 * CORRUPT naming the first check that failed.
 */
export function decodeBlobHeader(bytes: Uint8Array, fileBytes: number, hex: string, file: string): BlobHeader {
  const bad = (why: string): never => {
    throw corrupt(`payload ${file}: ${why}`, { path: file });
  };
  if (bytes.length < BLOB_HEADER_BYTES || fileBytes < BLOB_HEADER_BYTES) bad(`shorter (${fileBytes} bytes) than its header`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, BLOB_HEADER_BYTES);
  if (view.getUint32(76, true) !== crc32(bytes.subarray(0, 76))) bad('header checksum mismatch');
  if (!equalBytes(bytes.subarray(0, 8), BLOB_MAGIC)) bad('bad magic');
  const version = view.getUint32(8, true);
  if (version !== BLOB_VERSION) bad(`unknown format version ${version}`);
  const chunkBytes = view.getUint32(12, true);
  if (chunkBytes < MIN_CHUNK_BYTES || chunkBytes > MAX_CHUNK_BYTES) bad(`chunk size ${chunkBytes} out of bounds`);
  const size = view.getBigUint64(16, true);
  const written = view.getBigUint64(24, true);
  if (size > BigInt(Number.MAX_SAFE_INTEGER) || written > BigInt(Number.MAX_SAFE_INTEGER)) bad('size or time out of range');
  if (view.getUint32(72, true) !== 0) bad('reserved field is not zero');
  const sha256 = bytes.slice(40, 72);
  if (Buffer.from(sha256).toString('hex') !== hex) bad('header digest differs from the file name');
  const header: BlobHeader = { chunkBytes, size: Number(size), written: Number(written), salt: bytes.slice(32, 40), sha256 };
  const expected = blobFileBytes(header.size, chunkBytes);
  if (fileBytes !== expected) bad(`file is ${fileBytes} bytes, its header implies ${expected}`);
  return header;
}

/** Encodes a holder set (sorted and deduplicated here) as a refcount file. */
export function encodeRefs(hex: string, holders: readonly string[]): Uint8Array {
  const encoded = sortedHolderBytes(holders);
  let body = 0;
  for (const h of encoded) body += 2 + h.length;
  const out = new Uint8Array(REFS_HEADER_BYTES + body + 4);
  const view = new DataView(out.buffer);
  out.set(REFS_MAGIC, 0);
  view.setUint32(8, encoded.length, true);
  view.setUint32(12, body, true);
  out.set(Buffer.from(hex, 'hex'), 16);
  let at = REFS_HEADER_BYTES;
  for (const h of encoded) {
    view.setUint16(at, h.length, true);
    out.set(h, at + 2);
    at += 2 + h.length;
  }
  view.setUint32(at, crc32(out.subarray(0, at)), true);
  return out;
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = (a[i] as number) - (b[i] as number);
    if (d !== 0) return d;
  }
  return a.length - b.length;
}

function sortedHolderBytes(holders: readonly string[]): Uint8Array[] {
  const all = holders.map((h) => new Uint8Array(Buffer.from(h, 'utf8')));
  all.sort(compareBytes);
  return all.filter((h, i) => i === 0 || compareBytes(all[i - 1] as Uint8Array, h) !== 0);
}

/** Sorts holders by their UTF-8 bytes (the order refcount files and `refs()` use). */
export function sortHolders(holders: readonly string[]): string[] {
  return sortedHolderBytes(holders).map((h) => decodeUtf8Exact(h));
}

/** Reads the fixed header of a refcount file: the body length, checked against its bound. */
export function refsBodyBytes(header: Uint8Array, fileBytes: number, file: string): number {
  if (header.length < REFS_HEADER_BYTES || fileBytes < REFS_HEADER_BYTES + 4) {
    throw corrupt(`refcount file ${file} is too short (${fileBytes} bytes)`, { path: file });
  }
  const body = new DataView(header.buffer, header.byteOffset, REFS_HEADER_BYTES).getUint32(12, true);
  if (body > MAX_REFS_BODY_BYTES || fileBytes !== REFS_HEADER_BYTES + body + 4) {
    throw corrupt(`refcount file ${file}: body length ${body} does not fit the file (${fileBytes} bytes)`, { path: file });
  }
  return body;
}

/** Validates a whole refcount file and answers its holders in byte order. Throws CORRUPT. */
export function decodeRefs(bytes: Uint8Array, hex: string, file: string): string[] {
  const bad = (why: string): never => {
    throw corrupt(`refcount file ${file}: ${why}`, { path: file });
  };
  const body = refsBodyBytes(bytes, bytes.length, file);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  const end = REFS_HEADER_BYTES + body;
  if (view.getUint32(end, true) !== crc32(bytes.subarray(0, end))) bad('checksum mismatch');
  if (!equalBytes(bytes.subarray(0, 8), REFS_MAGIC)) bad('bad magic');
  if (Buffer.from(bytes.subarray(16, 48)).toString('hex') !== hex) bad('digest differs from the file name');
  const count = view.getUint32(8, true);
  if (count < 1 || count > MAX_HOLDERS) bad(`holder count ${count} out of bounds`);
  const holders: string[] = [];
  let previous: Uint8Array | null = null;
  let at = REFS_HEADER_BYTES;
  for (let i = 0; i < count; i++) {
    if (at + 2 > end) bad('holder list runs past its body');
    const len = view.getUint16(at, true);
    if (len < 1 || len > MAX_HOLDER_BYTES || at + 2 + len > end) bad(`holder ${i} has a bad length ${len}`);
    const raw = bytes.subarray(at + 2, at + 2 + len);
    if (previous !== null && compareBytes(previous, raw) >= 0) bad('holders are not strictly increasing');
    let text = '';
    try {
      text = decodeUtf8Exact(raw);
    } catch {
      bad(`holder ${i} is not UTF-8`);
    }
    holders.push(text);
    previous = raw;
    at += 2 + len;
  }
  if (at !== end) bad('bytes left after the last holder');
  return holders;
}

export function encodeFormat(): Uint8Array {
  const out = new Uint8Array(FORMAT_BYTES);
  const view = new DataView(out.buffer);
  out.set(FORMAT_MAGIC, 0);
  view.setUint32(8, FORMAT_VERSION, true);
  view.setUint32(12, crc32(out.subarray(0, 12)), true);
  return out;
}

export function checkFormat(bytes: Uint8Array, fileBytes: number, file: string): void {
  const ok =
    fileBytes === FORMAT_BYTES &&
    bytes.length >= FORMAT_BYTES &&
    equalBytes(bytes.subarray(0, 8), FORMAT_MAGIC) &&
    new DataView(bytes.buffer, bytes.byteOffset, FORMAT_BYTES).getUint32(12, true) === crc32(bytes.subarray(0, 12));
  if (!ok) throw corrupt(`format marker ${file} is damaged`, { path: file });
  const version = new DataView(bytes.buffer, bytes.byteOffset, FORMAT_BYTES).getUint32(8, true);
  if (version !== FORMAT_VERSION) throw corrupt(`format marker ${file}: unknown version ${version}`, { path: file });
}

/** Validates a holder name: 1..MAX_HOLDER_BYTES bytes of well-formed UTF-8. Answers an error text or null. */
export function holderProblem(holder: unknown): string | null {
  if (typeof holder !== 'string') return 'a holder must be a string';
  if (holder.length === 0) return 'a holder must not be empty';
  const bytes = Buffer.from(holder, 'utf8');
  if (bytes.length > MAX_HOLDER_BYTES) return `a holder is at most ${MAX_HOLDER_BYTES} bytes of UTF-8`;
  if (bytes.toString('utf8') !== holder) return 'a holder must be well-formed Unicode (no lone surrogates)';
  return null;
}
