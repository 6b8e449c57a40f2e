// The bytes of a stripe: the stripe file header, the record frame, the FENCE and SEAL payloads,
// and the published note. Pure encoders and decoders, no I/O.
//
// Owns: every byte of `stripes/<k>/<seq>.wal` but the BATCH payload (format-batch.ts), and of
// `stripes/<k>/published` (docs/format-host.md). Guarantees: a header, a frame or a note is
// accepted only with its magic, version and CRC32 right and every field in range; a frame's CRC
// is seeded with its file's salt and covers its lsn, so zero-filled space, a torn frame or a
// frame of another file never validates. Decoders answer null (or a FrameCheck) on bad bytes.

import { crc32 } from 'node:zlib';
import { closingCrcHolds, hasOpening, MAGIC, putClosingCrc, putOpening, putU16, putU32, putU64, u16, u32, u64 } from './format-bytes.js';

// ---------------------------------------------------------------------------------------------
// Stripe file header: 64 bytes at offset 0 of every stripe file.
//  0 magic 'SGHS' | 4 version u16 | 6 stripe u16 | 8 seq u64 | 16 salt u32 | 20 reserved u32 (0)
// 24 first lsn u64 | 32 fence u64 (highest fence token before the file's first record)
// 40 realm id, first 8 bytes | 48 reserved (12 zero bytes) | 60 CRC32 of bytes 0..60

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
  putOpening(b, MAGIC.stripe);
  putU16(b, 6, h.stripe);
  putU64(b, 8, h.seq);
  putU32(b, 16, h.salt);
  putU64(b, 24, h.firstLsn);
  putU64(b, 32, h.fence);
  b.set(h.realmTag.subarray(0, 8), 40);
  putClosingCrc(b, 60);
  return b;
}

/** Null when the bytes are not a valid header (short, torn, foreign). */
export function decodeStripeHeader(b: Uint8Array): StripeHeader | null {
  if (!hasOpening(b, MAGIC.stripe, STRIPE_HEADER_BYTES) || !closingCrcHolds(b, 60)) return null;
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
// The published note: 64 bytes at offset 0 of `stripes/<k>/published`, rewritten (never synced)
// after each sync of the stripe. It names the end of the stripe's records that are durable and
// that loads may show.
//  0 magic 'SGHP' | 4 version u16 | 6 reserved u16 | 8 boot id (16 bytes) | 24 seq u64 (file)
// 32 offset u64 (in that file, just after the last published record) | 40 lsn u64 (of the next
// record) | 48 fence u64 (highest fence token up to there) | 56 reserved u32 | 60 CRC32 of 0..60

export const PUBLISHED_BYTES = 64;

export interface Position {
  seq: number;
  offset: number;
  /** The lsn of the next record (the first one not covered). */
  lsn: number;
  /** The highest fence token among the records covered (and the file headers before). */
  fence: number;
}

/** Writes `p` as four u64 at `at`: seq, offset, lsn, fence (the published note's and the checkpoint's layout). */
export function putPosition(b: Uint8Array, at: number, p: Position): void {
  putU64(b, at, p.seq);
  putU64(b, at + 8, p.offset);
  putU64(b, at + 16, p.lsn);
  putU64(b, at + 24, p.fence);
}

/** Reads the four u64 `putPosition` writes (check them with `isPosition`). */
export function readPosition(b: Uint8Array, at: number): Position {
  return { seq: u64(b, at), offset: u64(b, at + 8), lsn: u64(b, at + 16), fence: u64(b, at + 24) };
}

/** True when every field is a safe integer and the lsn is at least 1 (lsns start at 1). */
export function isPosition(p: Position): boolean {
  return [p.seq, p.offset, p.lsn, p.fence].every(Number.isSafeInteger) && p.lsn >= 1;
}

export interface Published extends Position {
  boot: Uint8Array; // 16 bytes
}

export function encodePublished(p: Published): Uint8Array {
  const b = new Uint8Array(PUBLISHED_BYTES);
  putOpening(b, MAGIC.published);
  // A 16-byte boot id (every one this store makes) is copied without a view of it (one per commit).
  b.set(p.boot.length === 16 ? p.boot : p.boot.subarray(0, 16), 8);
  putPosition(b, 24, p);
  putClosingCrc(b, 60);
  return b;
}

export function decodePublished(b: Uint8Array): Published | null {
  if (!hasOpening(b, MAGIC.published, PUBLISHED_BYTES) || !closingCrcHolds(b, 60)) return null;
  const p = { boot: b.slice(8, 24), ...readPosition(b, 24) };
  if (!isPosition(p) || p.offset < STRIPE_HEADER_BYTES) return null;
  return p;
}
