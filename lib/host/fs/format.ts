// The file-system host store's bytes: pure encoders and decoders, no I/O.
//
// Owns: every on-disk encoding of the fs host store (docs/format-host.md is its prose twin, byte by
// byte): the realm's FORMAT value, the stripe file header, the stripe record frame and its three
// payloads (BATCH, FENCE, SEAL), the stripe's published note, the checkpoint value, the fence
// state value, a scope's home cell value, the home row file header and row frame, and the names of
// files and directories. Guarantees: every decoder checks magic, version, checksum (where the
// format has one) and every length against a bound before it drives an allocation or a loop, and
// answers null (or throws CORRUPT where the caller cannot go on) instead of trusting bad bytes.

import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { corrupt } from '../../errors.js';
import type { ScopeKind } from '../types.js';
import { decodeUtf8Exact } from '../../text.js';

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
function f64(b: Uint8Array, at: number): number {
  return new DataView(b.buffer, b.byteOffset, b.byteLength).getFloat64(at, true);
}
function putF64(b: Uint8Array, at: number, v: number): void {
  new DataView(b.buffer, b.byteOffset, b.byteLength).setFloat64(at, v, true);
}

const encoder = new TextEncoder();

function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}
function text(b: Uint8Array): string {
  return decodeUtf8Exact(b);
}

// ---------------------------------------------------------------------------------------------
// Names

export const KIND_CODE: Readonly<Record<ScopeKind, number>> = Object.freeze({ session: 1, identity: 2, mob: 3, record: 4 });
const KIND_BY_CODE: readonly (ScopeKind | undefined)[] = [undefined, 'session', 'identity', 'mob', 'record'];
const KIND_LETTER: Readonly<Record<ScopeKind, string>> = Object.freeze({ session: 's', identity: 'i', mob: 'm', record: 'r' });
const KIND_BY_LETTER: Readonly<Record<string, ScopeKind>> = Object.freeze({ s: 'session', i: 'identity', m: 'mob', r: 'record' });

export function kindOfCode(code: number): ScopeKind | undefined {
  return KIND_BY_CODE[code];
}

/** SHA-256 over kind code, 0, name bytes: a scope's name never becomes a path. Lowercase hex. */
export function scopeDigest(kind: ScopeKind, name: string): string {
  const h = createHash('sha256');
  h.update(Uint8Array.of(KIND_CODE[kind], 0));
  h.update(name, 'utf8');
  return h.digest('hex');
}

/** `scopes/<2 hex>/<kind letter><64 hex>`, relative to the realm. */
export function scopeDirName(kind: ScopeKind, digest: string): { fanout: string; leaf: string } {
  return { fanout: digest.slice(0, 2), leaf: `${KIND_LETTER[kind]}${digest}` };
}

/** Parses a scope directory's leaf name; null for anything else. */
export function parseScopeLeaf(leaf: string): { kind: ScopeKind; digest: string } | null {
  const m = /^([simr])([0-9a-f]{64})$/.exec(leaf);
  if (m === null) return null;
  return { kind: KIND_BY_LETTER[m[1]!]!, digest: m[2]! };
}

export function stripeFileName(seq: number): string {
  return `${String(seq).padStart(16, '0')}.wal`;
}
export function parseStripeFileName(name: string): number | null {
  const m = /^(\d{16})\.wal$/.exec(name);
  if (m === null) return null;
  const n = Number(m[1]);
  return Number.isSafeInteger(n) ? n : null;
}

export function rowFileName(gen: string): string {
  return `r-${gen}`;
}
export function headFileName(gen: string): string {
  return `h-${gen}`;
}

// ---------------------------------------------------------------------------------------------
// FORMAT: the realm's identity (a cell). 0 magic 'SGHF' | 4 version u16 | 6 stripes u16 | 8 realm id (16)

const FORMAT_MAGIC = 0x46484753; // 'SGHF'
export const FORMAT_VERSION = 1;
export const MAX_STRIPES = 64;

export interface RealmFormat {
  stripes: number;
  realmId: Uint8Array; // 16 bytes
}

export function encodeFormat(f: RealmFormat): Uint8Array {
  const b = new Uint8Array(24);
  putU32(b, 0, FORMAT_MAGIC);
  putU16(b, 4, FORMAT_VERSION);
  putU16(b, 6, f.stripes);
  b.set(f.realmId, 8);
  return b;
}

export function decodeFormat(b: Uint8Array, file: string): RealmFormat {
  if (b.length !== 24 || u32(b, 0) !== FORMAT_MAGIC) throw corrupt(`${file} is not a host store realm format`, { file });
  if (u16(b, 4) !== FORMAT_VERSION) throw corrupt(`${file}: unknown format version ${u16(b, 4)}`, { file });
  const stripes = u16(b, 6);
  if (stripes < 1 || stripes > MAX_STRIPES) throw corrupt(`${file}: stripe count ${stripes} out of range`, { file });
  return { stripes, realmId: b.slice(8, 24) };
}

// ---------------------------------------------------------------------------------------------
// Stripe file header: 64 bytes at offset 0 of every stripe file.
//  0 magic 'SGHS' | 4 version u16 | 6 stripe u16 | 8 seq u64 | 16 salt u32 | 20 reserved u32 (0)
// 24 first lsn u64 | 32 fence u64 (highest fence token before the file's first record)
// 40 realm id, first 8 bytes | 48 reserved (12 zero bytes) | 60 CRC32 of bytes 0..60

const STRIPE_MAGIC = 0x53484753; // 'SGHS'
export const STRIPE_HEADER_BYTES = 64;

export interface StripeHeader {
  stripe: number;
  seq: number;
  salt: number;
  firstLsn: number;
  fence: number;
  realmTag: Uint8Array; // 8 bytes
}

export function encodeStripeHeader(h: StripeHeader): Uint8Array {
  const b = new Uint8Array(STRIPE_HEADER_BYTES);
  putU32(b, 0, STRIPE_MAGIC);
  putU16(b, 4, FORMAT_VERSION);
  putU16(b, 6, h.stripe);
  putU64(b, 8, h.seq);
  putU32(b, 16, h.salt);
  putU64(b, 24, h.firstLsn);
  putU64(b, 32, h.fence);
  b.set(h.realmTag.subarray(0, 8), 40);
  putU32(b, 60, crc32(b.subarray(0, 60)));
  return b;
}

/** Null when the bytes are not a valid header (short, torn, foreign). */
export function decodeStripeHeader(b: Uint8Array): StripeHeader | null {
  if (b.length < STRIPE_HEADER_BYTES) return null;
  if (u32(b, 0) !== STRIPE_MAGIC || u16(b, 4) !== FORMAT_VERSION) return null;
  if (crc32(b.subarray(0, 60)) !== u32(b, 60)) return null;
  const seq = u64(b, 8);
  const firstLsn = u64(b, 24);
  const fence = u64(b, 32);
  if (!Number.isSafeInteger(seq) || !Number.isSafeInteger(firstLsn) || !Number.isSafeInteger(fence) || firstLsn < 1) return null;
  return { stripe: u16(b, 6), seq, salt: u32(b, 16), firstLsn, fence, realmTag: b.slice(40, 48) };
}

// ---------------------------------------------------------------------------------------------
// Record frame: 16-byte header, then the payload.
//  0 CRC32 of bytes 4..16+len, seeded with the file's salt | 4 len u32 | 8 lsn u64 | 16 payload
// lsn starts at 1 in a stripe and grows by one per record across its files, so zero-filled space
// (lsn 0) never validates.

export const FRAME_HEADER_BYTES = 16;
/** The largest payload a frame may carry; a longer length field is a torn or foreign frame. */
export const MAX_PAYLOAD_BYTES = 32 * 1024 * 1024;

export const REC_BATCH = 1;
export const REC_FENCE = 2;
export const REC_SEAL = 3;

/** Fills in the header of a frame whose payload already sits at `at + 16` of `b`. */
export function sealFrame(b: Uint8Array, at: number, payloadLength: number, lsn: number, salt: number): void {
  putU32(b, at + 4, payloadLength);
  putU64(b, at + 8, lsn);
  putU32(b, at, crc32(b.subarray(at + 4, at + FRAME_HEADER_BYTES + payloadLength), salt));
}

export type FrameCheck = 'ok' | 'short' | 'length' | 'lsn' | 'checksum';

/** Checks the frame at `at` of `b` against the expected lsn; 'short' when `b` does not hold all of it. */
export function checkFrame(b: Uint8Array, at: number, lsn: number, salt: number): FrameCheck {
  if (b.length - at < FRAME_HEADER_BYTES) return 'short';
  const len = u32(b, at + 4);
  if (len > MAX_PAYLOAD_BYTES || len < 1) return 'length';
  if (u64(b, at + 8) !== lsn) return 'lsn';
  if (b.length - at < FRAME_HEADER_BYTES + len) return 'short';
  if (crc32(b.subarray(at + 4, at + FRAME_HEADER_BYTES + len), salt) !== u32(b, at)) return 'checksum';
  return 'ok';
}

export function frameLength(b: Uint8Array, at: number): number {
  return u32(b, at + 4);
}

/** A FENCE payload: type 2, token u64. */
export function encodeFencePayload(token: number): Uint8Array {
  const b = new Uint8Array(9);
  b[0] = REC_FENCE;
  putU64(b, 1, token);
  return b;
}

/** A SEAL payload: type 3 (the file ends here; the stripe continues in file seq + 1). */
export function encodeSealPayload(): Uint8Array {
  return Uint8Array.of(REC_SEAL);
}

// ---------------------------------------------------------------------------------------------
// BATCH payload.
//  0 type u8 (1) | 1 token u64 | 9 commit id length u8 | 10 commit id | update count u32 | updates
// update: kind u8 | name length u16 | name | flags u8 | next u64 | [truncateAfter u64] [dropBefore u64]
//         [head length u32, head bytes] | row count u32 | rows: length u32, bytes
// flags: 1 creating (previous is null; else previous = next − 1) | 2 head | 4 truncateAfter |
//        8 dropBefore | 16 delete

export const F_CREATE = 1;
export const F_HEAD = 2;
export const F_TRUNCATE = 4;
export const F_DROP = 8;
export const F_DELETE = 16;

/** What an encoder needs of an update (a ScopeUpdate, already validated). */
export interface UpdateIn {
  readonly scope: { readonly kind: ScopeKind; readonly name: string };
  previous: number | null;
  next: number;
  head?: Uint8Array;
  append?: readonly Uint8Array[];
  truncateAfter?: number;
  dropBefore?: number;
  delete?: boolean;
}

/** Bytes of the BATCH payload for these updates (names pre-encoded). */
export function batchPayloadBytes(commitId: Uint8Array, updates: readonly UpdateIn[], names: readonly Uint8Array[]): number {
  let n = 1 + 8 + 1 + commitId.length + 4;
  for (let i = 0; i < updates.length; i++) {
    const u = updates[i]!;
    n += 1 + 2 + names[i]!.length + 1 + 8 + 4;
    if (u.truncateAfter !== undefined) n += 8;
    if (u.dropBefore !== undefined) n += 8;
    if (u.head !== undefined) n += 4 + u.head.length;
    for (const r of u.append ?? []) n += 4 + r.length;
  }
  return n;
}

/**
 * Writes the BATCH payload into `b` at `at`; answers the end offset. With `layout`, records where
 * each update's head and rows went: offsets relative to `at` (the payload's start).
 */
export function writeBatchPayload(
  b: Uint8Array,
  at: number,
  token: number,
  commitId: Uint8Array,
  updates: readonly UpdateIn[],
  names: readonly Uint8Array[],
  layout?: { heads: ([number, number] | undefined)[]; rows: number[][] },
): number {
  b[at] = REC_BATCH;
  putU64(b, at + 1, token);
  b[at + 9] = commitId.length;
  b.set(commitId, at + 10);
  let p = at + 10 + commitId.length;
  putU32(b, p, updates.length);
  p += 4;
  for (let i = 0; i < updates.length; i++) {
    const u = updates[i]!;
    const name = names[i]!;
    b[p] = KIND_CODE[u.scope.kind];
    putU16(b, p + 1, name.length);
    b.set(name, p + 3);
    p += 3 + name.length;
    let flags = 0;
    if (u.previous === null) flags |= F_CREATE;
    if (u.head !== undefined) flags |= F_HEAD;
    if (u.truncateAfter !== undefined) flags |= F_TRUNCATE;
    if (u.dropBefore !== undefined) flags |= F_DROP;
    if (u.delete === true) flags |= F_DELETE;
    b[p] = flags;
    putU64(b, p + 1, u.next);
    p += 9;
    if (u.truncateAfter !== undefined) {
      putU64(b, p, u.truncateAfter);
      p += 8;
    }
    if (u.dropBefore !== undefined) {
      putU64(b, p, u.dropBefore);
      p += 8;
    }
    if (u.head !== undefined) {
      putU32(b, p, u.head.length);
      b.set(u.head, p + 4);
      layout?.heads.push([p + 4 - at, u.head.length]);
      p += 4 + u.head.length;
    } else layout?.heads.push(undefined);
    const rows = u.append ?? [];
    putU32(b, p, rows.length);
    p += 4;
    const offsets: number[] | undefined = layout === undefined ? undefined : [];
    for (const r of rows) {
      putU32(b, p, r.length);
      b.set(r, p + 4);
      offsets?.push(p + 4 - at, r.length);
      p += 4 + r.length;
    }
    if (offsets !== undefined) layout!.rows.push(offsets);
  }
  return p;
}

/** One update of a decoded BATCH, with where its bytes lie (offsets relative to the payload). */
export interface UpdateOut {
  kind: ScopeKind;
  name: string;
  previous: number | null;
  next: number;
  del: boolean;
  truncateAfter?: number;
  dropBefore?: number;
  /** [offset, length] of the head bytes, relative to the payload start. */
  head?: [number, number];
  /** Offsets and lengths of the rows, relative to the payload start, interleaved. */
  rows: number[];
}

export interface BatchOut {
  token: number;
  commitId: string;
  updates: UpdateOut[];
}

/** Decodes a BATCH payload (which passed its frame checksum). Throws CORRUPT when it does not parse. */
export function decodeBatchPayload(b: Uint8Array, where: string): BatchOut {
  const bad = (why: string): Error => corrupt(`${where}: batch record ${why}`, { where });
  const end = b.length;
  const need = (p: number, n: number): void => {
    if (p + n > end) throw bad('is truncated');
  };
  need(0, 10);
  if (b[0] !== REC_BATCH) throw bad('has the wrong type');
  const token = u64(b, 1);
  if (!Number.isSafeInteger(token)) throw bad('has an unsafe token');
  const idLen = b[9]!;
  need(10, idLen + 4);
  let commitId: string;
  try {
    commitId = text(b.subarray(10, 10 + idLen));
  } catch {
    throw bad('has a commit id that is not UTF-8');
  }
  let p = 10 + idLen;
  const count = u32(b, p);
  p += 4;
  if (count < 1 || count > end) throw bad('has an impossible update count');
  const updates: UpdateOut[] = [];
  for (let i = 0; i < count; i++) {
    need(p, 3);
    const kind = kindOfCode(b[p]!);
    if (kind === undefined) throw bad('names an unknown kind');
    const nameLen = u16(b, p + 1);
    need(p + 3, nameLen + 9);
    let name: string;
    try {
      name = text(b.subarray(p + 3, p + 3 + nameLen));
    } catch {
      throw bad('has a name that is not UTF-8');
    }
    p += 3 + nameLen;
    const flags = b[p]!;
    const next = u64(b, p + 1);
    if (!Number.isSafeInteger(next) || next < 1) throw bad('has an impossible version');
    p += 9;
    const u: UpdateOut = { kind, name, previous: (flags & F_CREATE) !== 0 ? null : next - 1, next, del: (flags & F_DELETE) !== 0, rows: [] };
    if ((flags & F_TRUNCATE) !== 0) {
      need(p, 8);
      u.truncateAfter = u64(b, p);
      p += 8;
    }
    if ((flags & F_DROP) !== 0) {
      need(p, 8);
      u.dropBefore = u64(b, p);
      p += 8;
    }
    if ((flags & F_HEAD) !== 0) {
      need(p, 4);
      const len = u32(b, p);
      need(p + 4, len);
      u.head = [p + 4, len];
      p += 4 + len;
    }
    need(p, 4);
    const rows = u32(b, p);
    p += 4;
    if (rows > end - p) throw bad('has an impossible row count');
    for (let r = 0; r < rows; r++) {
      need(p, 4);
      const len = u32(b, p);
      need(p + 4, len);
      u.rows.push(p + 4, len);
      p += 4 + len;
    }
    updates.push(u);
  }
  if (p !== end) throw bad('has trailing bytes');
  return { token, commitId, updates };
}

// ---------------------------------------------------------------------------------------------
// The published note: 64 bytes at offset 0 of `stripes/<k>/published`, rewritten (never synced)
// after each sync of the stripe. It names the end of the stripe's records that are durable and
// that loads may show.
//  0 magic 'SGHP' | 4 version u16 | 6 reserved u16 | 8 boot id (16 bytes) | 24 seq u64 (file)
// 32 offset u64 (in that file, just after the last published record) | 40 lsn u64 (of the next
// record) | 48 fence u64 (highest fence token up to there) | 56 reserved u32 | 60 CRC32 of 0..60

const PUBLISHED_MAGIC = 0x50484753; // 'SGHP'
export const PUBLISHED_BYTES = 64;

export interface Position {
  seq: number;
  offset: number;
  /** The lsn of the next record (the first one not covered). */
  lsn: number;
  /** The highest fence token among the records covered (and the file headers before). */
  fence: number;
}

export interface Published extends Position {
  boot: Uint8Array; // 16 bytes
}

export function encodePublished(p: Published): Uint8Array {
  const b = new Uint8Array(PUBLISHED_BYTES);
  putU32(b, 0, PUBLISHED_MAGIC);
  putU16(b, 4, FORMAT_VERSION);
  b.set(p.boot.subarray(0, 16), 8);
  putU64(b, 24, p.seq);
  putU64(b, 32, p.offset);
  putU64(b, 40, p.lsn);
  putU64(b, 48, p.fence);
  putU32(b, 60, crc32(b.subarray(0, 60)));
  return b;
}

export function decodePublished(b: Uint8Array): Published | null {
  if (b.length < PUBLISHED_BYTES || u32(b, 0) !== PUBLISHED_MAGIC || u16(b, 4) !== FORMAT_VERSION) return null;
  if (crc32(b.subarray(0, 60)) !== u32(b, 60)) return null;
  const p = { boot: b.slice(8, 24), seq: u64(b, 24), offset: u64(b, 32), lsn: u64(b, 40), fence: u64(b, 48) };
  if (![p.seq, p.offset, p.lsn, p.fence].every(Number.isSafeInteger) || p.lsn < 1 || p.offset < STRIPE_HEADER_BYTES) return null;
  return p;
}

// ---------------------------------------------------------------------------------------------
// The checkpoint value (a cell `checkpoint`): per stripe, the position before which every record
// is applied to the scopes' homes.
//  0 magic 'SGHC' | 4 version u16 | 6 stripes u16 | 8 round u64 | 16 per stripe: seq u64,
//  offset u64, lsn u64, fence u64

const CHECKPOINT_MAGIC = 0x43484753; // 'SGHC'

export interface CheckpointValue {
  round: number;
  positions: Position[];
}

export function encodeCheckpoint(c: CheckpointValue): Uint8Array {
  const b = new Uint8Array(16 + 32 * c.positions.length);
  putU32(b, 0, CHECKPOINT_MAGIC);
  putU16(b, 4, FORMAT_VERSION);
  putU16(b, 6, c.positions.length);
  putU64(b, 8, c.round);
  let at = 16;
  for (const p of c.positions) {
    putU64(b, at, p.seq);
    putU64(b, at + 8, p.offset);
    putU64(b, at + 16, p.lsn);
    putU64(b, at + 24, p.fence);
    at += 32;
  }
  return b;
}

export function decodeCheckpoint(b: Uint8Array, stripes: number, file: string): CheckpointValue {
  if (b.length < 16 || u32(b, 0) !== CHECKPOINT_MAGIC || u16(b, 4) !== FORMAT_VERSION) throw corrupt(`${file}: not a checkpoint value`, { file });
  if (u16(b, 6) !== stripes || b.length !== 16 + 32 * stripes) throw corrupt(`${file}: names ${u16(b, 6)} stripes, the realm has ${stripes}`, { file });
  const positions: Position[] = [];
  for (let i = 0, at = 16; i < stripes; i++, at += 32) {
    const p = { seq: u64(b, at), offset: u64(b, at + 8), lsn: u64(b, at + 16), fence: u64(b, at + 24) };
    if (![p.seq, p.offset, p.lsn, p.fence].every(Number.isSafeInteger) || p.lsn < 1) throw corrupt(`${file}: position ${i} out of range`, { file });
    positions.push(p);
  }
  return { round: u64(b, 8), positions };
}

// ---------------------------------------------------------------------------------------------
// The fence state (a cell `fence/state`).
//  0 magic 'SGHL' | 4 version u16 | 6 holder id length u16 | 8 highest token u64
// 16 holder token u64 | 24 lease end f64 (the store clock's ms) | 32 boot id (16) | 48 holder id

const FENCE_MAGIC = 0x4c484753; // 'SGHL'
export const MAX_HOLDER_ID_BYTES = 1024;

export interface FenceState {
  highest: number;
  holderToken: number;
  leaseEnd: number;
  boot: Uint8Array;
  holder: string;
}

export function encodeFenceState(s: FenceState): Uint8Array {
  const id = utf8(s.holder);
  const b = new Uint8Array(48 + id.length);
  putU32(b, 0, FENCE_MAGIC);
  putU16(b, 4, FORMAT_VERSION);
  putU16(b, 6, id.length);
  putU64(b, 8, s.highest);
  putU64(b, 16, s.holderToken);
  putF64(b, 24, s.leaseEnd);
  b.set(s.boot.subarray(0, 16), 32);
  b.set(id, 48);
  return b;
}

export function decodeFenceState(b: Uint8Array, file: string): FenceState {
  if (b.length < 48 || u32(b, 0) !== FENCE_MAGIC || u16(b, 4) !== FORMAT_VERSION) throw corrupt(`${file}: not a fence state`, { file });
  const idLen = u16(b, 6);
  if (b.length !== 48 + idLen) throw corrupt(`${file}: holder id length disagrees`, { file });
  const highest = u64(b, 8);
  const holderToken = u64(b, 16);
  const leaseEnd = f64(b, 24);
  if (!Number.isSafeInteger(highest) || !Number.isSafeInteger(holderToken) || holderToken > highest || !Number.isFinite(leaseEnd)) {
    throw corrupt(`${file}: fence state out of range`, { file });
  }
  let holder: string;
  try {
    holder = text(b.subarray(48));
  } catch {
    throw corrupt(`${file}: holder id is not UTF-8`, { file });
  }
  return { highest, holderToken, leaseEnd, boot: b.slice(32, 48), holder };
}

// ---------------------------------------------------------------------------------------------
// A scope's home cell value (`scopes/<xx>/<k><digest>/state`, a cell with 8 KiB slots).
//  0 magic 'SGHH' | 4 version u8 | 5 kind u8 | 6 flags u8 (1 deleted, 2 head in a blob file)
//  7 stripes u8 (K) | 8 version u64 | 16 first u64 | 24 end u64 | 32 head length u32
// 36 head CRC32 u32 | 40 name length u16 | 42 commit id length u8 | 43 row file count u8
// 44 reserved u32 | 48 cut: K × u64 (per stripe, the lsn below which the checkpoint round that
// wrote this value had read every record) | name | commit id | head bytes (inline) or blob gen
// (8 bytes) | row files, 32 bytes each: gen (8), start u64, count u64, end offset u48, flags u16
// (1: sealed)

const HOME_MAGIC = 0x48484753; // 'SGHH'
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
}

export function encodeHome(h: HomeValue): Uint8Array {
  const name = utf8(h.name);
  const id = utf8(h.commitId);
  if (h.rowFiles.length > MAX_ROW_FILES) throw new RangeError('too many row files');
  const headBytes = h.head !== null ? h.head.length : 8;
  const cutBytes = 8 * h.cut.length;
  const b = new Uint8Array(48 + cutBytes + name.length + id.length + headBytes + 32 * h.rowFiles.length);
  putU32(b, 0, HOME_MAGIC);
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
  if (b.length < 48 || u32(b, 0) !== HOME_MAGIC || b[4] !== FORMAT_VERSION) throw bad('not a home value');
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

const ROW_MAGIC = 0x52484753; // 'SGHR'
export const ROW_HEADER_BYTES = 32;
export const ROW_FRAME_HEADER_BYTES = 16;

export function rowSalt(gen: string): number {
  return crc32(Buffer.from(gen, 'hex'));
}

export function encodeRowHeader(gen: string, start: number): Uint8Array {
  const b = new Uint8Array(ROW_HEADER_BYTES);
  putU32(b, 0, ROW_MAGIC);
  putU16(b, 4, FORMAT_VERSION);
  b.set(Buffer.from(gen, 'hex'), 8);
  putU64(b, 16, start);
  putU32(b, 28, crc32(b.subarray(0, 28)));
  return b;
}

export function checkRowHeader(b: Uint8Array, gen: string, start: number): boolean {
  if (b.length < ROW_HEADER_BYTES || u32(b, 0) !== ROW_MAGIC || u16(b, 4) !== FORMAT_VERSION) return false;
  if (crc32(b.subarray(0, 28)) !== u32(b, 28)) return false;
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

// ---------------------------------------------------------------------------------------------
// Boot ids: the 16 bytes a lease and a published note carry (UUID text → bytes; anything else hashed).

export function bootBytes(bootId: string): Uint8Array {
  const hex = bootId.trim().toLowerCase().replace(/-/g, '');
  if (/^[0-9a-f]{32}$/.test(hex)) return Uint8Array.from(Buffer.from(hex, 'hex'));
  return Uint8Array.from(createHash('sha256').update(bootId, 'utf8').digest().subarray(0, 16));
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
