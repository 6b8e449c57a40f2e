// Raft codec: the compact binary encoding of entries, votes, log ids and stored memberships.
//
// Owns: the byte layout of every Raft value a store writes (log records, the vote and committed
// cells, the purged-id cell, the applied journal, snapshot headers). Guarantees:
// - encode(validated value) → bytes → decode gives a value deep-equal to the input;
// - decode never answers a wrong value for damaged bytes: a truncated, extended or altered input
//   that does not decode to a well-formed value throws CORRUPT (the frame CRC of the layer below
//   catches damage that happens to decode);
// - a length or count read from the bytes is checked against the bytes that remain before it
//   drives any allocation, so a decode allocates at most about the input's size;
// - one value, one encoding: decode accepts only what encode writes (minimal varints, canonical
//   JSON), so decode(b) = v implies encode(v) = b, and no damage can turn into a second spelling.
//
// Layout (all integers are unsigned LEB128 varints of at most 8 bytes, ≤ 2^53 − 1):
//   LogId            term, nodeId, index
//   opt LogId        0x00 | 0x01 LogId
//   Membership       configCount, (idCount, id*)*, nodesJsonLength, nodesJson (UTF-8)
//   Entry            tag (0x01 blank | 0x02 normal | 0x03 membership), LogId, then
//                      normal: digestCount, digest* (32 raw bytes each), dataLength, data
//                      membership: Membership
//   Vote doc         0x01, term, nodeId, committed (0x00 | 0x01)
//   opt LogId doc    0x01, opt LogId
//   StoredMembership doc  0x01, opt LogId, Membership
// The leading 0x01 of a document is its format version; an unknown version is CORRUPT.

import { corrupt } from '../errors.js';
import {
  MAX_MEMBERSHIP_CONFIGS,
  MAX_NODE_DATA_DEPTH,
  isWellFormed,
  type Entry,
  type LogId,
  type Membership,
  type StoredMembership,
  type Vote,
} from './types.js';
import { decodeUtf8Exact } from '../text.js';

const FORMAT_VERSION = 0x01;
const TAG_BLANK = 0x01;
const TAG_NORMAL = 0x02;
const TAG_MEMBERSHIP = 0x03;
const DIGEST_PREFIX = 'sha256:';
const DIGEST_BYTES = 32;

const utf8Encoder = new TextEncoder();

/**
 * A copy of `b` as a plain Uint8Array. (Buffer's `slice` answers a view, not a copy: never use
 * `slice` on bytes that may be a Buffer.)
 */
export function copyBytes(b: Uint8Array, start = 0, end = b.length): Uint8Array {
  const out = new Uint8Array(end - start);
  out.set(b.subarray(start, end));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writer

/** Appends bytes into a buffer that grows by doubling. */
export class ByteWriter {
  private buf: Uint8Array;
  private len = 0;

  constructor(initialCapacity = 64) {
    this.buf = new Uint8Array(Math.max(16, initialCapacity));
  }

  private reserve(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.len + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(0, this.len));
    this.buf = next;
  }

  u8(b: number): this {
    this.reserve(1);
    this.buf[this.len++] = b;
    return this;
  }

  /** An unsigned LEB128 varint; `n` must be a safe non-negative integer (validated upstream). */
  varint(n: number): this {
    this.reserve(8);
    while (n >= 0x80) {
      this.buf[this.len++] = (n % 0x80) | 0x80;
      n = Math.floor(n / 0x80);
    }
    this.buf[this.len++] = n;
    return this;
  }

  bytes(b: Uint8Array): this {
    this.reserve(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
    return this;
  }

  /** The bytes written so far, as a view (valid until the next write). */
  view(): Uint8Array {
    return this.buf.subarray(0, this.len);
  }

  /** The bytes written so far (a copy trimmed to size). */
  finish(): Uint8Array {
    return copyBytes(this.buf, 0, this.len);
  }
}

// ---------------------------------------------------------------------------------------------
// Reader

/** Reads from one buffer; every failure is CORRUPT naming `what` and the offset. */
export class ByteReader {
  private pos = 0;

  constructor(private readonly buf: Uint8Array, private readonly what: string) {}

  get remaining(): number {
    return this.buf.length - this.pos;
  }

  get offset(): number {
    return this.pos;
  }

  fail(reason: string): never {
    throw corrupt(`${this.what}: ${reason} at byte ${this.pos}`, { what: this.what, offset: this.pos });
  }

  u8(): number {
    if (this.pos >= this.buf.length) this.fail('truncated');
    return this.buf[this.pos++] as number;
  }

  /** A minimal LEB128 varint of at most 8 bytes whose value is a safe integer. */
  varint(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 8; i++) {
      const b = this.u8();
      value += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) {
        if (b === 0 && i > 0) this.fail('non-minimal varint');
        if (!Number.isSafeInteger(value)) this.fail('varint beyond 2^53 - 1');
        return value;
      }
      scale *= 0x80;
    }
    return this.fail('varint longer than 8 bytes');
  }

  /** A count of items that each take at least `minItemBytes`: bounded by what remains. */
  count(minItemBytes: number): number {
    const n = this.varint();
    if (n * minItemBytes > this.remaining) this.fail(`count ${n} exceeds the bytes that remain`);
    return n;
  }

  /** `n` bytes, copied (the answer never shares memory with the input). */
  bytes(n: number): Uint8Array {
    if (n > this.remaining) this.fail(`length ${n} exceeds the ${this.remaining} bytes that remain`);
    const out = copyBytes(this.buf, this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  /** `n` bytes as a view (for decoding in place; never handed out). */
  view(n: number): Uint8Array {
    if (n > this.remaining) this.fail(`length ${n} exceeds the ${this.remaining} bytes that remain`);
    const out = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  /** Throws unless every byte was consumed. */
  end(): void {
    if (this.pos !== this.buf.length) this.fail(`${this.buf.length - this.pos} trailing bytes`);
  }
}

// ---------------------------------------------------------------------------------------------
// Parts

function writeLogId(w: ByteWriter, l: LogId): void {
  w.varint(l.leaderId.term).varint(l.leaderId.nodeId).varint(l.index);
}

function readLogId(r: ByteReader): LogId {
  const term = r.varint();
  const nodeId = r.varint();
  const index = r.varint();
  return { leaderId: { term, nodeId }, index };
}

function writeOptionalLogId(w: ByteWriter, l: LogId | null): void {
  if (l === null) {
    w.u8(0);
  } else {
    w.u8(1);
    writeLogId(w, l);
  }
}

function readOptionalLogId(r: ByteReader): LogId | null {
  const tag = r.u8();
  if (tag === 0) return null;
  if (tag !== 1) r.fail(`bad optional tag ${tag}`);
  return readLogId(r);
}

function writeMembership(w: ByteWriter, m: Membership): void {
  w.varint(m.configs.length);
  for (const config of m.configs) {
    w.varint(config.length);
    for (const id of config) w.varint(id);
  }
  const json = utf8Encoder.encode(JSON.stringify(m.nodes));
  w.varint(json.length).bytes(json);
}

function jsonDepthOk(v: unknown, depth: number): boolean {
  if (depth > MAX_NODE_DATA_DEPTH) return false;
  if (typeof v === 'string') return isWellFormed(v);
  if (typeof v !== 'object' || v === null) return true;
  if (Array.isArray(v)) return v.every((x) => jsonDepthOk(x, depth + 1));
  for (const [k, x] of Object.entries(v)) {
    if (!isWellFormed(k) || !jsonDepthOk(x, depth + 1)) return false;
  }
  return true;
}

function readMembership(r: ByteReader): Membership {
  const configCount = r.count(1);
  if (configCount > MAX_MEMBERSHIP_CONFIGS) r.fail(`membership lists ${configCount} voter sets`);
  const configs: number[][] = [];
  for (let i = 0; i < configCount; i++) {
    const idCount = r.count(1);
    const config: number[] = [];
    for (let j = 0; j < idCount; j++) config.push(r.varint());
    configs.push(config);
  }
  const jsonLength = r.varint();
  const json = r.view(jsonLength);
  let nodes: unknown;
  try {
    nodes = JSON.parse(decodeUtf8Exact(json));
  } catch {
    return r.fail('membership nodes are not UTF-8 JSON');
  }
  if (typeof nodes !== 'object' || nodes === null || Array.isArray(nodes)) r.fail('membership nodes are not a JSON object');
  if (!jsonDepthOk(nodes, 0)) r.fail('membership nodes nest too deep or hold a lone surrogate');
  // Only the encoder's own text is accepted: one value, one encoding (no other spacing, escapes,
  // number spellings or duplicate keys).
  const canonical = utf8Encoder.encode(JSON.stringify(nodes));
  if (canonical.length !== json.length || !canonical.every((b, i) => b === json[i])) r.fail('membership nodes are not in canonical JSON');
  return { configs, nodes: nodes as Record<string, unknown> };
}

function writeDigest(w: ByteWriter, digest: string): void {
  w.bytes(Buffer.from(digest.slice(DIGEST_PREFIX.length), 'hex'));
}

function readDigest(r: ByteReader): string {
  return DIGEST_PREFIX + Buffer.from(r.view(DIGEST_BYTES)).toString('hex');
}

// ---------------------------------------------------------------------------------------------
// Documents

/** Encodes a validated entry. */
export function encodeEntry(e: Entry): Uint8Array {
  return encodeEntryWith(e, freshBytes);
}

function freshBytes(length: number): Uint8Array {
  return new Uint8Array(length);
}

/**
 * Encodes a validated entry; `alloc` supplies the buffer of a normal entry's record (exactly its
 * size): the log store passes a recycling pool for large records.
 */
export function encodeEntryWith(e: Entry, alloc: (length: number) => Uint8Array): Uint8Array {
  const p = e.payload;
  const w = new ByteWriter(64);
  switch (p.type) {
    case 'blank':
      w.u8(TAG_BLANK);
      writeLogId(w, e.logId);
      break;
    case 'normal': {
      // The header is built apart and the data copied once, straight into the answer: entries
      // may be megabytes, and this is the append path.
      const h = new ByteWriter(32 + (p.payloads?.length ?? 0) * DIGEST_BYTES);
      h.u8(TAG_NORMAL);
      writeLogId(h, e.logId);
      h.varint(p.payloads?.length ?? 0);
      for (const d of p.payloads ?? []) writeDigest(h, d);
      h.varint(p.data.length);
      const head = h.view();
      const out = alloc(head.length + p.data.length);
      out.set(head, 0);
      out.set(p.data, head.length);
      return out;
    }
    case 'membership':
      w.u8(TAG_MEMBERSHIP);
      writeLogId(w, e.logId);
      writeMembership(w, p.membership);
      break;
  }
  return w.finish();
}

/**
 * Decodes an entry; CORRUPT on anything else. A normal entry without digests decodes without a
 * `payloads` field. The answer never shares memory with `bytes`.
 */
export function decodeEntry(bytes: Uint8Array): Entry {
  const r = new ByteReader(bytes, 'raft entry');
  const tag = r.u8();
  const logId = readLogId(r);
  let entry: Entry;
  switch (tag) {
    case TAG_BLANK:
      entry = { logId, payload: { type: 'blank' } };
      break;
    case TAG_NORMAL: {
      const digestCount = r.count(DIGEST_BYTES);
      const payloads: string[] = [];
      for (let i = 0; i < digestCount; i++) payloads.push(readDigest(r));
      const data = r.bytes(r.varint());
      entry = digestCount === 0 ? { logId, payload: { type: 'normal', data } } : { logId, payload: { type: 'normal', data, payloads } };
      break;
    }
    case TAG_MEMBERSHIP:
      entry = { logId, payload: { type: 'membership', membership: readMembership(r) } };
      break;
    default:
      return r.fail(`unknown entry tag ${tag}`);
  }
  r.end();
  return entry;
}

/** Reads only the log id of an encoded entry (cheap: for recovery's continuity checks). */
export function decodeEntryLogId(bytes: Uint8Array): LogId {
  const r = new ByteReader(bytes, 'raft entry');
  const tag = r.u8();
  if (tag !== TAG_BLANK && tag !== TAG_NORMAL && tag !== TAG_MEMBERSHIP) r.fail(`unknown entry tag ${tag}`);
  return readLogId(r);
}

/**
 * Reads only the log id and the payload digests of an encoded entry (cheap: recovery's payload
 * check and reference rebuilds read every live record). CORRUPT on a malformed prefix.
 */
export function decodeEntryNames(bytes: Uint8Array): { logId: LogId; digests: string[] } {
  const r = new ByteReader(bytes, 'raft entry');
  const tag = r.u8();
  if (tag !== TAG_BLANK && tag !== TAG_NORMAL && tag !== TAG_MEMBERSHIP) r.fail(`unknown entry tag ${tag}`);
  const logId = readLogId(r);
  const digests: string[] = [];
  if (tag === TAG_NORMAL) {
    const digestCount = r.count(DIGEST_BYTES);
    for (let i = 0; i < digestCount; i++) digests.push(readDigest(r));
  }
  return { logId, digests };
}

function readVersion(r: ByteReader): void {
  const v = r.u8();
  if (v !== FORMAT_VERSION) r.fail(`unknown format version ${v}`);
}

/** Encodes a validated vote. */
export function encodeVote(v: Vote): Uint8Array {
  return new ByteWriter(24).u8(FORMAT_VERSION).varint(v.leaderId.term).varint(v.leaderId.nodeId).u8(v.committed ? 1 : 0).finish();
}

/** Decodes a vote; CORRUPT on anything else. */
export function decodeVote(bytes: Uint8Array): Vote {
  const r = new ByteReader(bytes, 'raft vote');
  readVersion(r);
  const term = r.varint();
  const nodeId = r.varint();
  const c = r.u8();
  if (c > 1) r.fail(`bad committed flag ${c}`);
  r.end();
  return { leaderId: { term, nodeId }, committed: c === 1 };
}

/** Encodes a validated log id or null (the committed and purged cells). */
export function encodeOptionalLogId(l: LogId | null): Uint8Array {
  const w = new ByteWriter(32).u8(FORMAT_VERSION);
  writeOptionalLogId(w, l);
  return w.finish();
}

/** Decodes a log id or null; CORRUPT on anything else. */
export function decodeOptionalLogId(bytes: Uint8Array): LogId | null {
  const r = new ByteReader(bytes, 'raft log id');
  readVersion(r);
  const l = readOptionalLogId(r);
  r.end();
  return l;
}

/** Encodes a validated log id. */
export function encodeLogId(l: LogId): Uint8Array {
  const w = new ByteWriter(32).u8(FORMAT_VERSION);
  writeLogId(w, l);
  return w.finish();
}

/** Decodes a log id; CORRUPT on anything else. */
export function decodeLogId(bytes: Uint8Array): LogId {
  const r = new ByteReader(bytes, 'raft log id');
  readVersion(r);
  const l = readLogId(r);
  r.end();
  return l;
}

/** Encodes a validated stored membership. */
export function encodeStoredMembership(s: StoredMembership): Uint8Array {
  const w = new ByteWriter(64).u8(FORMAT_VERSION);
  writeOptionalLogId(w, s.logId);
  writeMembership(w, s.membership);
  return w.finish();
}

/** Decodes a stored membership; CORRUPT on anything else. */
export function decodeStoredMembership(bytes: Uint8Array): StoredMembership {
  const r = new ByteReader(bytes, 'raft stored membership');
  readVersion(r);
  const logId = readOptionalLogId(r);
  const membership = readMembership(r);
  r.end();
  return { logId, membership };
}

/** Writes a stored membership into a larger document (snapshot headers). */
export function writeStoredMembership(w: ByteWriter, s: StoredMembership): void {
  writeOptionalLogId(w, s.logId);
  writeMembership(w, s.membership);
}

/** Reads a stored membership from a larger document. */
export function readStoredMembership(r: ByteReader): StoredMembership {
  const logId = readOptionalLogId(r);
  return { logId, membership: readMembership(r) };
}

export { writeOptionalLogId, readOptionalLogId };
