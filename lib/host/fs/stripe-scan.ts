// Reading a stripe's records: the scan from a position to a published note or to the valid end,
// and the view's record for a decoded BATCH.
//
// Owns: `scanStripe` (windowed reads, frame checks, FENCE tokens, following a SEAL into the next
// file) and `recOf`. Guarantees: up to a published note every frame must validate, in lsn order,
// ending exactly at the note, or the scan throws CORRUPT (a published record is durable: damage
// there is never a torn tail); without a note it stops at the first frame that does not validate
// (only under the stripe's lock is that end stable). A file the scan needs that is gone (a
// checkpoint round removed it) is StripeGone, never CORRUPT: only the caller, which can read the
// checkpoint, tells a removed file from a missing one. A record whose token is below a fence token
// before it is void and left out. A read is bounded by MAX_PAYLOAD_BYTES plus a frame header.

import { corrupt } from '../../errors.js';
import { scopeKey } from '../names.js';
import {
  checkFrame,
  decodeBatchPayload,
  decodeStripeHeader,
  FRAME_HEADER_BYTES,
  frameLength,
  MAX_PAYLOAD_BYTES,
  REC_BATCH,
  REC_FENCE,
  REC_SEAL,
  sameBytes,
  STRIPE_HEADER_BYTES,
  u64,
  type BatchOut,
  type Position,
} from './format.js';
import { StripeGone } from './stripe-files.js';
import type { Rec, RecUpdate } from './view.js';

const WINDOW_BYTES = 256 * 1024;

/** What a scan found: its records (void ones left out), where it ended, the files it crossed. */
export interface ScanResult {
  recs: Rec[];
  end: Position;
  endSalt: number;
  /** The stripe ends in a SEAL whose next file does not exist (a writer died rolling). */
  sealedWithoutNext: boolean;
  /** Files of the scan, oldest first. */
  seqs: number[];
}

/** What a scan reads through: the stripe's files, and where it notes the salts it learns. */
export interface ScanSource {
  readonly index: number;
  readonly realmTag: Uint8Array;
  fileOf(seq: number): string;
  /** Reads into `into` at `offset` of file `seq`; answers the bytes read; StripeGone when the file does not exist. */
  readAt(seq: number, into: Uint8Array, offset: number): Promise<number>;
  /** The salt of file `seq`, read from its header while following a SEAL. */
  learnSalt(seq: number, salt: number): void;
}

/** The view's record for a decoded BATCH whose frame starts at `offset` of file `seq`. */
export function recOf(stripe: number, seq: number, offset: number, lsn: number, fence: number, batch: BatchOut): Rec {
  const base = offset + FRAME_HEADER_BYTES;
  const updates: RecUpdate[] = batch.updates.map((u) => ({
    key: scopeKey({ kind: u.kind, name: u.name }),
    kind: u.kind,
    name: u.name,
    previous: u.previous,
    next: u.next,
    del: u.del,
    truncateAfter: u.truncateAfter,
    dropBefore: u.dropBefore,
    head: u.head === undefined ? undefined : ([base + u.head[0], u.head[1]] as const),
    rows: u.rows.map((v, i) => (i % 2 === 0 ? base + v : v)),
  }));
  return { stripe, seq, offset, lsn, fence, token: batch.token, commitId: batch.commitId, updates };
}

/**
 * Reads the records from `from` on: up to `limit` (a published position: every frame before it
 * must be valid, or the stripe is corrupt) or, with `limit` null, up to the first frame that
 * does not validate (the valid end; only under the lock is that end stable). Records whose
 * token is below a fence token before them in the stripe are void and left out.
 */
export async function scanStripe(src: ScanSource, from: Position, fromSalt: number, limit: Position | null): Promise<ScanResult> {
  const recs: Rec[] = [];
  let seq = from.seq;
  let offset = from.offset;
  let lsn = from.lsn;
  let fence = from.fence;
  let salt = fromSalt;
  const seqs = [seq];
  let sealedWithoutNext = false;
  const file = (): string => src.fileOf(seq);
  const stop = (why: string): never => {
    throw corrupt(`stripe ${src.index}: ${why} before the published end (file ${file()}, offset ${offset}, lsn ${lsn})`, {
      file: file(),
      offset,
      lsn,
    });
  };
  let buf = new Uint8Array(0);
  let bufAt = -1; // file offset of buf[0] in file `seq`
  let bufLen = 0;
  outer: for (;;) {
    if (limit !== null && seq === limit.seq && offset >= limit.offset) {
      if (offset !== limit.offset || lsn !== limit.lsn) stop('the records do not end at the published position');
      break;
    }
    if (limit !== null && seq > limit.seq) stop('the stripe runs past the published file');
    // Make sure the frame header at `offset` is in the buffer.
    if (bufAt < 0 || offset < bufAt || offset + FRAME_HEADER_BYTES > bufAt + bufLen) {
      // Windows start small (most catch-ups find a few records or none) and grow while the
      // scan keeps finding records.
      let want = Math.min(WINDOW_BYTES, Math.max(4096, 2 * buf.length));
      if (limit !== null && seq === limit.seq) want = Math.min(want, limit.offset - offset);
      want = Math.max(want, FRAME_HEADER_BYTES);
      if (buf.length < want) buf = new Uint8Array(want);
      bufLen = await src.readAt(seq, buf.subarray(0, want), offset);
      bufAt = offset;
      if (bufLen < FRAME_HEADER_BYTES) {
        if (limit !== null) stop('a frame is cut short');
        break;
      }
    }
    let at = offset - bufAt;
    const len = frameLength(buf, at);
    if (len < 1 || len > MAX_PAYLOAD_BYTES) {
      if (limit !== null) stop('a frame has an impossible length');
      break;
    }
    const frameBytes = FRAME_HEADER_BYTES + len;
    if (limit !== null && seq === limit.seq && offset + frameBytes > limit.offset) stop('a frame crosses the published end');
    if (offset + frameBytes > bufAt + bufLen) {
      // The frame is not all in the buffer: read it whole (bounded by MAX_PAYLOAD_BYTES).
      let want = Math.max(frameBytes, Math.min(WINDOW_BYTES, 2 * buf.length));
      if (limit !== null && seq === limit.seq) want = Math.max(frameBytes, Math.min(want, limit.offset - offset));
      if (buf.length < want) buf = new Uint8Array(want);
      bufLen = await src.readAt(seq, buf.subarray(0, want), offset);
      bufAt = offset;
      at = 0;
      if (bufLen < frameBytes) {
        if (limit !== null) stop('a frame is cut short');
        break;
      }
    }
    const view = buf.subarray(0, bufLen);
    const check = checkFrame(view, at, lsn, salt);
    if (check !== 'ok') {
      if (limit !== null) stop(`a frame fails its check (${check})`);
      break;
    }
    const payloadAt = at + FRAME_HEADER_BYTES;
    const type = view[payloadAt];
    if (type === REC_BATCH) {
      const batch = decodeBatchPayload(view.subarray(payloadAt, payloadAt + len), `${file()}@${offset}`, { file: file(), offset });
      if (batch.token >= fence) recs.push(recOf(src.index, seq, offset, lsn, fence, batch));
      offset += frameBytes;
      lsn++;
    } else if (type === REC_FENCE && len === 9) {
      fence = Math.max(fence, u64(view, payloadAt + 1));
      offset += frameBytes;
      lsn++;
    } else if (type === REC_SEAL && len === 1) {
      lsn++;
      const nextSeq = seq + 1;
      let header = null;
      try {
        const hb = new Uint8Array(STRIPE_HEADER_BYTES);
        await src.readAt(nextSeq, hb, 0);
        header = decodeStripeHeader(hb);
      } catch (err) {
        if (!(err instanceof StripeGone)) throw err;
        // Up to a published note the successor existed (the records past the SEAL were written
        // there before the note named them): gone now, a checkpoint round removed it after this
        // scan read the sealed file (through a cached handle, or just before its unlink). The
        // caller jumps to the checkpoint, and reports the file missing if that did not move.
        if (limit !== null) throw err;
      }
      if (header === null || header.seq !== nextSeq || header.stripe !== src.index || header.firstLsn !== lsn || !sameBytes(header.realmTag, src.realmTag)) {
        if (limit !== null) stop(`a sealed file has no valid successor (${header === null ? 'no header' : JSON.stringify({ ...header, realmTag: undefined })}, lsn ${lsn})`);
        offset += frameBytes;
        sealedWithoutNext = true;
        break outer;
      }
      src.learnSalt(nextSeq, header.salt);
      seq = nextSeq;
      seqs.push(seq);
      offset = STRIPE_HEADER_BYTES;
      fence = Math.max(fence, header.fence);
      salt = header.salt;
      bufAt = -1;
    } else {
      if (limit !== null) stop(`a frame has an unknown type ${String(type)}`);
      break;
    }
  }
  return { recs, end: { seq, offset, lsn, fence }, endSalt: salt, sealedWithoutNext, seqs };
}
