// The bytes of a realm's scope table (`tables/<seq>.tbl`): every scope a checkpoint round has
// applied, in name order, with the whole state of each small scope (head and rows) inline. Pure
// encoders and decoders, no I/O.
//
// Owns: the table's header, entries, blocks, index and footer (docs/format-host.md, "Scope
// table"), and the order of entries (kind code, then the name's UTF-8 bytes, which is the order a
// listing pages in). Guarantees: every decoder checks magic, version, CRC and every length against
// the bytes it has before it drives an allocation or a loop, and throws CORRUPT naming the file
// and the offset; an entry is accepted only when its lengths add up exactly and its numbers are
// safe integers in range; rows are never copied by the decoder (views into the block).

import { crc32 } from 'node:zlib';
import { corrupt } from '../../errors.js';
import type { ScopeKind } from '../types.js';
import { decodeUtf8Exact } from '../../text.js';
import { FORMAT_VERSION, MAGIC, putU16, putU32, putU64, u16, u32, u64, utf8 } from './format-bytes.js';
import { KIND_BY_CODE, KIND_CODE, parseSeqFileName, seqFileName } from './format-names.js';

/** Tables came with realm format 2: they carry the realm's version. */
const TABLE_VERSION = FORMAT_VERSION;
export const TABLE_FOOTER_BYTES = 64;
/** An entry of at most this many bytes (name, commit id, head and rows inline) stays in the table; a larger scope gets a home. */
export const INLINE_SCOPE_BYTES = 16 * 1024;
/** Blocks are cut once they pass this size (one entry may make a block larger, up to INLINE_SCOPE_BYTES + its fixed part). */
export const TABLE_BLOCK_BYTES = 16 * 1024;
const ENTRY_FIXED = 38;
const MAX_ENTRY_BYTES = 1 << 30;

export const T_DELETED = 1;
/** The scope's state is in its home (`scopes/…/state`); the entry only says it exists, at least at `version`. */
export const T_HOMED = 2;

export function tableFileName(seq: number): string {
  return seqFileName(seq, '.tbl');
}
/** A table's seq (tables start at 1); null for any other name. */
export function parseTableFileName(name: string): number | null {
  const n = parseSeqFileName(name, '.tbl');
  return n !== null && n > 0 ? n : null;
}

/** The sort key of a scope: its kind code, then its name's UTF-8 bytes. */
export function compareKeys(kindA: number, nameA: Uint8Array, kindB: number, nameB: Uint8Array): number {
  if (kindA !== kindB) return kindA - kindB;
  return Buffer.compare(nameA, nameB);
}

/**
 * `x[a, b)` against `y[c, d)` in byte order (negative, zero, positive). A loop, not
 * `Buffer#compare` with offsets: names are short, and a listing compares one pair per entry, most of
 * them in code not yet optimised, where the method's argument checks cost more than the bytes.
 */
function compareRanges(x: Uint8Array, a: number, b: number, y: Uint8Array, c: number, d: number): number {
  for (; a < b && c < d; a++, c++) {
    const diff = x[a]! - y[c]!;
    if (diff !== 0) return diff;
  }
  return b - a - (d - c);
}

/** Buffer#latin1Slice, where this Node has it: what `toString('latin1', …)` calls once its arguments are checked. */
type Latin1Slicing = Buffer & { latin1Slice?: (start: number, end: number) => string };
const latin1Slice = (Buffer.prototype as Latin1Slicing).latin1Slice;

/** `bytes[start, end)` read as Latin-1 (one byte, one character): natively, without a view. */
function latin1At(bytes: Buffer, start: number, end: number): string {
  return latin1Slice !== undefined ? latin1Slice.call(bytes, start, end) : bytes.toString('latin1', start, end);
}
/** Any character a byte of 0x80 or more reads as in Latin-1: text that is not ASCII. */
const NOT_ASCII = /[^\x00-\x7f]/;

/**
 * One scope as a table holds it: its fixed fields decoded, its name and commit id as strings, and
 * the rest read on demand from the block it was decoded from (a listing of 100,000 scopes makes no
 * view it does not need).
 */
export class TableEntry {
  readonly kind: ScopeKind;
  /** The kind's code, the first part of the sort key. */
  readonly kindCode: number;
  readonly name: string;
  readonly deleted: boolean;
  readonly homed: boolean;
  readonly version: number;
  readonly commitId: string;
  readonly first: number;
  readonly end: number;
  readonly #block: Buffer;
  readonly #at: number;
  readonly #size: number;
  readonly #nameLen: number;
  readonly #headAt: number;
  readonly #headLen: number;

  /** @internal Made by `decodeBlock`, which decoded and checked every field (`block` is a Buffer over the block). */
  constructor(block: Uint8Array, at: number, size: number, kind: ScopeKind, kindCode: number, flags: number, name: string, nameLen: number, commitId: string, version: number, first: number, end: number, headAt: number, headLen: number) {
    // A Buffer over the block (decodeBlock makes it); declared a Uint8Array so that the package's
    // declarations need no Node types.
    this.#block = block as Buffer;
    this.#at = at;
    this.#size = size;
    this.kind = kind;
    this.kindCode = kindCode;
    this.name = name;
    this.commitId = commitId;
    this.deleted = (flags & T_DELETED) !== 0;
    this.homed = (flags & T_HOMED) !== 0;
    this.version = version;
    this.first = first;
    this.end = end;
    this.#nameLen = nameLen;
    this.#headAt = headAt;
    this.#headLen = headLen;
  }

  get nameBytes(): Uint8Array {
    return this.#block.subarray(this.#at + ENTRY_FIXED, this.#at + ENTRY_FIXED + this.#nameLen);
  }
  /** A view of the head, valid only until the block's buffer is read into again: keep `copyHead()`. */
  get head(): Uint8Array {
    return this.#block.subarray(this.#headAt, this.#headAt + this.#headLen);
  }
  get headLength(): number {
    return this.#headLen;
  }
  /** The head, copied into a Uint8Array of its own (the block's buffer may be read into again). */
  copyHead(): Uint8Array {
    // A copy through TypedArray#slice of a plain view: one allocation, and none of a Buffer
    // method's argument checks (a listing copies a head per entry, mostly in unoptimised code).
    return new Uint8Array(this.#block.buffer, this.#block.byteOffset + this.#headAt, this.#headLen).slice();
  }

  /** Rows [first, end), each copied into a Uint8Array of its own. */
  copyRows(): Uint8Array[] {
    return this.rows.map((r) => {
      const out = new Uint8Array(r.length);
      out.set(r);
      return out;
    });
  }
  /** The entry's encoded bytes (length field included): what a round copies when the scope did not change. */
  get raw(): Uint8Array {
    return this.#block.subarray(this.#at, this.#at + this.#size);
  }
  /** Views of rows [first, end) when inline (none when homed or deleted), valid as `head` is: keep `copyRows()`. */
  get rows(): Uint8Array[] {
    const out: Uint8Array[] = [];
    if (this.deleted || this.homed) return out;
    let p = this.#headAt + this.#headLen;
    for (let i = this.first; i < this.end; i++) {
      const rl = u32(this.#block, p);
      out.push(this.#block.subarray(p + 4, p + 4 + rl));
      p += 4 + rl;
    }
    return out;
  }
  /** Compares this entry's key with (kind code, name bytes), without a view. */
  compareTo(code: number, name: Uint8Array): number {
    const k = this.kindCode;
    if (k !== code) return k - code;
    return compareRanges(this.#block, this.#at + ENTRY_FIXED, this.#at + ENTRY_FIXED + this.#nameLen, name, 0, name.length);
  }
}

/** What an entry is made from. */
export interface EntryParts {
  kind: ScopeKind;
  nameBytes: Uint8Array;
  deleted: boolean;
  homed: boolean;
  version: number;
  commitId: string;
  first: number;
  end: number;
  head: Uint8Array;
  rows: readonly Uint8Array[];
}

/** The size `encodeEntry` gives these parts. */
export function entryBytes(nameBytes: number, commitIdBytes: number, headBytes: number, rows: readonly Uint8Array[]): number {
  let n = ENTRY_FIXED + nameBytes + commitIdBytes + headBytes;
  for (const r of rows) n += 4 + r.length;
  return n;
}

// Entry: 0 length u32 (of what follows) | 4 kind u8 | 5 flags u8 | 6 name length u16
//  8 commit id length u8 | 9 0 u8 | 10 version u64 | 18 first u64 | 26 end u64 | 34 head length u32
//  38 name | commit id | head | rows (inline only): end − first × (length u32, bytes)
export function encodeEntry(p: EntryParts): Uint8Array {
  const id = utf8(p.commitId);
  const inline = !p.homed && !p.deleted;
  if (inline && p.rows.length !== p.end - p.first) throw new RangeError('an inline entry holds every row of [first, end)');
  const b = new Uint8Array(entryBytes(p.nameBytes.length, id.length, p.head.length, inline ? p.rows : []));
  putU32(b, 0, b.length - 4);
  b[4] = KIND_CODE[p.kind];
  b[5] = (p.deleted ? T_DELETED : 0) | (p.homed ? T_HOMED : 0);
  putU16(b, 6, p.nameBytes.length);
  b[8] = id.length;
  putU64(b, 10, p.version);
  putU64(b, 18, p.first);
  putU64(b, 26, p.end);
  putU32(b, 34, p.head.length);
  let at = ENTRY_FIXED;
  b.set(p.nameBytes, at);
  at += p.nameBytes.length;
  b.set(id, at);
  at += id.length;
  b.set(p.head, at);
  at += p.head.length;
  if (inline) {
    for (const r of p.rows) {
      putU32(b, at, r.length);
      b.set(r, at + 4);
      at += 4 + r.length;
    }
  }
  return b;
}

/** The entries of a block, in order, every length checked; CORRUPT naming the file and offset otherwise. */
function entryError(file: string, offset: number, why: string): Error {
  return corrupt(`scope table ${file}: entry at offset ${offset} ${why}`, { file, offset });
}

export function decodeBlock(bytes: Uint8Array, file: string, blockOffset: number): TableEntry[] {
  // Field reads through one DataView, strings through one native read each, an indexed loop of
  // plain statements: a listing decodes one entry per scope, most of them in code not yet
  // optimised, where every call and every iterator costs more than the bytes it reads.
  const block = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: TableEntry[] = [];
  let at = 0;
  let prevAt = -1;
  let prevEnd = 0;
  let prevName = '';
  let prevAscii = false;
  while (at < block.length) {
    if (block.length - at < 4) throw entryError(file, blockOffset + at, 'is cut short');
    const len = view.getUint32(at, true);
    if (len < ENTRY_FIXED - 4 || len > MAX_ENTRY_BYTES || at + 4 + len > block.length) throw entryError(file, blockOffset + at, 'has a length out of range');
    const stop = at + 4 + len;
    const code = block[at + 4]!;
    const kind = KIND_BY_CODE[code];
    const flags = block[at + 5]!;
    if (kind === undefined || (flags & ~(T_DELETED | T_HOMED)) !== 0 || block[at + 9] !== 0) throw entryError(file, blockOffset + at, 'has an unknown kind or flag');
    const nameLen = view.getUint16(at + 6, true);
    const idLen = block[at + 8]!;
    const headLen = view.getUint32(at + 34, true);
    // u64s: exact below 2^53, and any value at or above it fails the safe-integer checks.
    const version = view.getUint32(at + 10, true) + view.getUint32(at + 14, true) * 0x100000000;
    const first = view.getUint32(at + 18, true) + view.getUint32(at + 22, true) * 0x100000000;
    const end = view.getUint32(at + 26, true) + view.getUint32(at + 30, true) * 0x100000000;
    if (nameLen < 1 || idLen < 1 || !Number.isSafeInteger(version) || !Number.isSafeInteger(end) || version < 1 || first > end) {
      throw entryError(file, blockOffset + at, 'has values out of range');
    }
    const nameAt = at + ENTRY_FIXED;
    const headAt = nameAt + nameLen + idLen;
    if (headAt + headLen > stop) throw entryError(file, blockOffset + at, 'has lengths that disagree');
    // The name and the commit id are adjacent: ASCII (which most are) read as Latin-1 is the same
    // string, so both come from one native read and one native check; anything else goes
    // through the exact decoder.
    const text = latin1At(block, nameAt, headAt);
    const ascii = !NOT_ASCII.test(text);
    let name: string;
    let commitId: string;
    if (ascii) {
      name = text.slice(0, nameLen);
      commitId = text.slice(nameLen);
    } else {
      try {
        name = decodeUtf8Exact(block.subarray(nameAt, nameAt + nameLen));
        commitId = decodeUtf8Exact(block.subarray(nameAt + nameLen, headAt));
      } catch {
        throw entryError(file, blockOffset + at, 'has a name or commit id that is not UTF-8');
      }
    }
    const deleted = (flags & T_DELETED) !== 0;
    const homed = (flags & T_HOMED) !== 0;
    let p = headAt + headLen;
    if (!deleted && !homed) {
      // Each row's length is bounded by the entry's bytes, so the count of rows cannot outrun them.
      for (let i = first; i < end; i++) {
        if (p + 4 > stop) throw entryError(file, blockOffset + at, 'holds fewer rows than it names');
        const rl = view.getUint32(p, true);
        if (p + 4 + rl > stop) throw entryError(file, blockOffset + at, 'has a row longer than the entry');
        p += 4 + rl;
      }
    } else if (headLen !== 0 || (deleted && first !== end)) throw entryError(file, blockOffset + at, 'is a tombstone or homed entry with inline parts');
    if (p !== stop) throw entryError(file, blockOffset + at, 'has bytes past its end');
    if (prevAt >= 0) {
      // Two ASCII names compare as strings (natively) in the order of their bytes.
      const order =
        block[prevAt + 4]! - code ||
        (ascii && prevAscii ? (prevName < name ? -1 : prevName === name ? 0 : 1) : compareRanges(block, prevAt + ENTRY_FIXED, prevEnd, block, nameAt, nameAt + nameLen));
      if (order >= 0) throw entryError(file, blockOffset + at, 'is out of name order');
    }
    prevAt = at;
    prevEnd = nameAt + nameLen;
    prevName = name;
    prevAscii = ascii;
    out.push(new TableEntry(block, at, 4 + len, kind, code, flags, name, nameLen, commitId, version, first, end, headAt, headLen));
    at = stop;
  }
  return out;
}

// Header: 0 magic 'SGHT' | 4 version u16 | 6 stripes u16 (K) | 8 seq u64 | 16 realm tag (8)
//  24 cut: K × u64 | 24 + 8K CRC32 of the bytes before
export function tableHeaderBytes(stripes: number): number {
  return 28 + 8 * stripes;
}

export interface TableHeader {
  seq: number;
  realmTag: Uint8Array;
  /** Per stripe: the round that wrote the table had read every record below this lsn. */
  cut: number[];
}

export function encodeTableHeader(h: TableHeader): Uint8Array {
  const b = new Uint8Array(tableHeaderBytes(h.cut.length));
  putU32(b, 0, MAGIC.table);
  putU16(b, 4, TABLE_VERSION);
  putU16(b, 6, h.cut.length);
  putU64(b, 8, h.seq);
  b.set(h.realmTag.subarray(0, 8), 16);
  for (let j = 0; j < h.cut.length; j++) putU64(b, 24 + 8 * j, h.cut[j]!);
  putU32(b, b.length - 4, crc32(b.subarray(0, b.length - 4)));
  return b;
}

export function decodeTableHeader(b: Uint8Array, stripes: number, file: string): TableHeader {
  const n = tableHeaderBytes(stripes);
  const bad = (why: string): Error => corrupt(`scope table ${file}: header ${why}`, { file, offset: 0 });
  if (b.length < n || u32(b, 0) !== MAGIC.table || u16(b, 4) !== TABLE_VERSION || u16(b, 6) !== stripes) throw bad('is not a table header of this realm');
  if (crc32(b.subarray(0, n - 4)) !== u32(b, n - 4)) throw bad('fails its checksum');
  const cut: number[] = [];
  for (let j = 0; j < stripes; j++) cut.push(u64(b, 24 + 8 * j));
  const seq = u64(b, 8);
  if (!Number.isSafeInteger(seq) || !cut.every(Number.isSafeInteger)) throw bad('has values out of range');
  return { seq, realmTag: b.slice(16, 24), cut };
}

// Index: one item per block: 0 offset u64 | 8 length u32 | 12 CRC32 of the block u32
//  16 entries u32 | 20 first key: kind u8, name length u16, name
export interface BlockRef {
  offset: number;
  length: number;
  crc: number;
  entries: number;
  kind: number;
  firstName: Uint8Array;
}

export function encodeIndex(blocks: readonly BlockRef[]): Uint8Array {
  let n = 0;
  for (const k of blocks) n += 23 + k.firstName.length;
  const b = new Uint8Array(n);
  let at = 0;
  for (const k of blocks) {
    putU64(b, at, k.offset);
    putU32(b, at + 8, k.length);
    putU32(b, at + 12, k.crc);
    putU32(b, at + 16, k.entries);
    b[at + 20] = k.kind;
    putU16(b, at + 21, k.firstName.length);
    b.set(k.firstName, at + 23);
    at += 23 + k.firstName.length;
  }
  return b;
}

export function decodeIndex(b: Uint8Array, dataStart: number, dataEnd: number, file: string, indexOffset: number): BlockRef[] {
  // As decodeBlock: plain statements over one DataView (an open decodes one item per 16 KiB block
  // of the table, in code not yet optimised), and keys views into `b`, which the table keeps.
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const bad = (at: number, why: string): Error => corrupt(`scope table ${file}: index item at offset ${indexOffset + at} ${why}`, { file, offset: indexOffset + at });
  const out: BlockRef[] = [];
  let at = 0;
  let next = dataStart;
  let prevAt = -1;
  let prevEnd = 0;
  while (at < b.length) {
    if (b.length - at < 23) throw bad(at, 'is cut short');
    const nameLen = view.getUint16(at + 21, true);
    if (at + 23 + nameLen > b.length || nameLen < 1) throw bad(at, 'has a key length out of range');
    const offset = view.getUint32(at, true) + view.getUint32(at + 4, true) * 0x100000000;
    const length = view.getUint32(at + 8, true);
    const entries = view.getUint32(at + 16, true);
    const kind = b[at + 20]!;
    // Blocks lie back to back from the header to the index, in key order.
    if (offset !== next || length < 1 || offset + length > dataEnd || entries < 1 || KIND_BY_CODE[kind] === undefined) throw bad(at, 'names a block out of place');
    if (prevAt >= 0 && (b[prevAt + 20]! - kind || compareRanges(b, prevAt + 23, prevEnd, b, at + 23, at + 23 + nameLen)) >= 0) {
      throw bad(at, 'is out of key order');
    }
    out.push({ offset, length, crc: view.getUint32(at + 12, true), entries, kind, firstName: b.subarray(at + 23, at + 23 + nameLen) });
    next = offset + length;
    prevAt = at;
    prevEnd = at + 23 + nameLen;
    at += 23 + nameLen;
  }
  if (next !== dataEnd) throw corrupt(`scope table ${file}: the blocks do not reach the index`, { file, offset: next });
  return out;
}

// Footer (the last 64 bytes): 0 magic 'SGHT' | 4 version u16 | 6 0 u16 | 8 seq u64
//  16 index offset u64 | 24 index length u32 | 28 index CRC32 u32 | 32 entries u64
//  40 live scopes u64 | 48 bytes of the whole file u64 | 56 0 u32 | 60 CRC32 of bytes 0..59
export interface TableFooter {
  seq: number;
  indexOffset: number;
  indexLength: number;
  indexCrc: number;
  entries: number;
  live: number;
  fileBytes: number;
}

export function encodeTableFooter(f: TableFooter): Uint8Array {
  const b = new Uint8Array(TABLE_FOOTER_BYTES);
  putU32(b, 0, MAGIC.table);
  putU16(b, 4, TABLE_VERSION);
  putU64(b, 8, f.seq);
  putU64(b, 16, f.indexOffset);
  putU32(b, 24, f.indexLength);
  putU32(b, 28, f.indexCrc);
  putU64(b, 32, f.entries);
  putU64(b, 40, f.live);
  putU64(b, 48, f.fileBytes);
  putU32(b, 60, crc32(b.subarray(0, 60)));
  return b;
}

export function decodeTableFooter(b: Uint8Array, file: string, at: number): TableFooter {
  const bad = (why: string): Error => corrupt(`scope table ${file}: footer ${why}`, { file, offset: at });
  if (b.length !== TABLE_FOOTER_BYTES || u32(b, 0) !== MAGIC.table || u16(b, 4) !== TABLE_VERSION) throw bad('is not a table footer');
  if (crc32(b.subarray(0, 60)) !== u32(b, 60)) throw bad('fails its checksum');
  const f: TableFooter = { seq: u64(b, 8), indexOffset: u64(b, 16), indexLength: u32(b, 24), indexCrc: u32(b, 28), entries: u64(b, 32), live: u64(b, 40), fileBytes: u64(b, 48) };
  if (![f.seq, f.indexOffset, f.entries, f.live, f.fileBytes].every(Number.isSafeInteger) || f.indexOffset + f.indexLength + TABLE_FOOTER_BYTES !== f.fileBytes) {
    throw bad('has values out of range');
  }
  return f;
}

/** What the checkpoint cell says of the table it names: its seq, its size and its footer's CRC. */
export interface TableRef {
  seq: number;
  bytes: number;
  footerCrc: number;
}

export function footerCrcOf(footer: Uint8Array): number {
  return u32(footer, 60);
}
