// The records of a node's journal (node-journal.ts): what one group's append or truncation looks
// like in the node-wide log that makes every group's writes durable with shared syncs.
//
// Owns: the byte layout of a journal record (docs/raft-store.md, "The node journal") and its
// checks. A record is one frame of the journal's segmented log, whose frame CRC covers it; what
// this module checks beyond that is that the bytes are a record at all (a CRC that passes over
// bytes no version of this code writes is damage or a bug, CORRUPT either way). Guarantees: a
// decoded record's fields are within their bounds (kind, zeros, an index below 2^53, an entry
// count ≥ 1 whose lengths add up to the record exactly); decoding copies nothing (the entries
// are views of the record).

import { corrupt } from '../errors.js';

/** A group's append of `count` entries, the first at Raft index `index`. */
export const JOURNAL_APPEND = 1;
/** A group's truncation: every entry at `index` and after goes. */
export const JOURNAL_TRUNCATE = 2;
/**
 * A group's every earlier journaled write is durable in its own log (written when the group stops
 * journaling its writes, fs-log.ts): replay starts after the group's last one.
 */
export const JOURNAL_FLUSHED = 3;

/** Bytes of a group's key: the SHA-256 of its id (its directory's name, as bytes). */
export const GROUP_KEY_BYTES = 32;
/** kind (1), three zero bytes, the group key (32), the index (u64 LE), the entry count (u32 LE). */
export const JOURNAL_HEADER_BYTES = 48;
const TWO_32 = 2 ** 32;

/** A decoded record's fields (the entries only for an append, as views of the record). */
export interface JournalRecordHeader {
  kind: typeof JOURNAL_APPEND | typeof JOURNAL_TRUNCATE | typeof JOURNAL_FLUSHED;
  /** The group's key as 64 lowercase hex digits (its directory name). */
  key: string;
  index: number;
  count: number;
}

function writeHeader(buf: Buffer, kind: number, key: Uint8Array, index: number, count: number): void {
  if (key.length !== GROUP_KEY_BYTES) throw new RangeError('a group key is 32 bytes');
  buf[0] = kind;
  buf[1] = buf[2] = buf[3] = 0;
  buf.set(key, 4);
  buf.writeUInt32LE(index % TWO_32, 36);
  buf.writeUInt32LE(Math.floor(index / TWO_32), 40);
  buf.writeUInt32LE(count, 44);
}

/** The record of an append: the header, then each entry's u32 LE length and bytes. */
export function encodeJournalAppend(key: Uint8Array, index: number, entries: readonly Uint8Array[]): Buffer {
  let bytes = JOURNAL_HEADER_BYTES;
  for (const e of entries) bytes += 4 + e.length;
  const buf = Buffer.allocUnsafe(bytes);
  writeHeader(buf, JOURNAL_APPEND, key, index, entries.length);
  let at = JOURNAL_HEADER_BYTES;
  for (const e of entries) {
    buf.writeUInt32LE(e.length, at);
    buf.set(e, at + 4);
    at += 4 + e.length;
  }
  return buf;
}

/** The record of a truncation at `index` (the header alone, count 0). */
export function encodeJournalTruncate(key: Uint8Array, index: number): Buffer {
  const buf = Buffer.allocUnsafe(JOURNAL_HEADER_BYTES);
  writeHeader(buf, JOURNAL_TRUNCATE, key, index, 0);
  return buf;
}

/** The mark that every earlier journaled write of the group is in its own log, durably (index 0, count 0). */
export function encodeJournalFlushed(key: Uint8Array): Buffer {
  const buf = Buffer.allocUnsafe(JOURNAL_HEADER_BYTES);
  writeHeader(buf, JOURNAL_FLUSHED, key, 0, 0);
  return buf;
}

function bad(what: string, at: number): never {
  throw corrupt(`node journal record ${at}: ${what}`, { record: at });
}

/** The header of the record at journal index `at`; CORRUPT unless it is a whole record. */
export function decodeJournalHeader(rec: Uint8Array, at: number): JournalRecordHeader {
  if (rec.length < JOURNAL_HEADER_BYTES) bad(`${rec.length} bytes, shorter than a header`, at);
  const buf = Buffer.from(rec.buffer, rec.byteOffset, rec.length);
  const kind = buf[0];
  if (kind !== JOURNAL_APPEND && kind !== JOURNAL_TRUNCATE && kind !== JOURNAL_FLUSHED) bad(`unknown kind ${kind}`, at);
  if (buf[1] !== 0 || buf[2] !== 0 || buf[3] !== 0) bad('reserved bytes are not zero', at);
  const hi = buf.readUInt32LE(40);
  if (hi >= 2 ** 21) bad('index past 2^53', at);
  const index = hi * TWO_32 + buf.readUInt32LE(36);
  const count = buf.readUInt32LE(44);
  if (kind === JOURNAL_APPEND ? count === 0 : count !== 0 || rec.length !== JOURNAL_HEADER_BYTES) bad(`count ${count} for kind ${kind}`, at);
  if (kind === JOURNAL_FLUSHED && index !== 0) bad('a flushed mark with an index', at);
  if (!Number.isSafeInteger(index + count)) bad('entries past index 2^53', at);
  return { kind, key: buf.toString('hex', 4, 4 + GROUP_KEY_BYTES), index, count };
}

/** The entries of an append record (views of `rec`); CORRUPT unless their lengths fill it exactly. */
export function decodeJournalEntries(rec: Uint8Array, at: number): Uint8Array[] {
  const h = decodeJournalHeader(rec, at);
  if (h.kind !== JOURNAL_APPEND) bad('not an append', at);
  const view = new DataView(rec.buffer, rec.byteOffset, rec.length);
  const out: Uint8Array[] = [];
  let pos = JOURNAL_HEADER_BYTES;
  for (let i = 0; i < h.count; i++) {
    if (pos + 4 > rec.length) bad(`entry ${i} has no length`, at);
    const n = view.getUint32(pos, true);
    pos += 4;
    if (n > rec.length - pos) bad(`entry ${i} runs past the record`, at);
    out.push(rec.subarray(pos, pos + n));
    pos += n;
  }
  if (pos !== rec.length) bad(`${rec.length - pos} bytes after the last entry`, at);
  return out;
}
