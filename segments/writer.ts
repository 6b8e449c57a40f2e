// The group writer: appends at the head of the queue, encoded and written to the active segment in
// one writev.
//
// Owns: `GroupWriter` — choosing the group (the appends at the head of the queue that fit the
// active segment, rolling first when none does), encoding it (`encodeGroup`: frames, small
// payloads copied beside their headers, large ones by reference, the largest with their CRC
// computed while the pool copies them), preallocation ahead of the tail, the write itself (inline
// or on the pool, lib/fs/inline-sync.ts), and what a failed write leaves. Guarantees:
// - a group's frames take the indices that follow the segment's last frame (contiguous indices,
//   asserted), and the segment's table grows only after the whole group is written, so no read
//   ever sees part of a group's frames;
// - a failed write makes its records and every one queued after them vanish (no hole), and the
//   file is cut back to the old tail and synced so that no torn frame can line up behind a later
//   one; a failed cut poisons the log.

import { assert } from '../lib/assert.js';
import { SeglogError, fromIo } from '../lib/errors.js';
import type { FileHandle, SyncWhere } from '../lib/fs/types.js';
import { FRAME_HEADER_BYTES, frameChecksum, writeFrame, writeFrameHeader, writeFrameHeaderFields } from './format.js';
import { rejectOps, type AppendOp, type OpQueue } from './queue.js';
import type { Segment } from './segment.js';
import { ZEROS } from './segment-files.js';
import type { LogState } from './state.js';
import type { Structure } from './structure.js';
import type { Syncer } from './syncer.js';
import type { TableCache } from './table-cache.js';

const MiB = 1 << 20;
/** Offsets are u32: a segment file never grows past this. */
const MAX_SEGMENT_FILE_BYTES = 0xffffffff;
/** Payloads at least this large go to writev by reference instead of being copied. */
const COPY_LIMIT = 32 * 1024;
/**
 * Payloads at least this large have their CRC computed while the pool copies them into the file
 * (the CRC field follows in a small write of its own), so that the two overlap (1 MiB: ~0.2 ms of
 * CRC beside ~0.25 ms of copying; 1 MiB appends +4-5 %, docs/raft-store.md).
 */
const LATE_CRC_LIMIT = 256 * 1024;
/**
 * A lone group of at most this many bytes may be written on the calling thread (`writes`): a
 * page-cache copy of about a millisecond at most, the bound the inline calls keep to by default.
 */
const INLINE_WRITE_LIMIT = 4 * MiB;
/** Preallocation: zero-filled space written ahead of the tail, so most syncs change no size. */
const MIN_PREALLOC = 16 * 1024;
const MAX_PREALLOC = ZEROS.length;
/** A group of this many bytes or more extends the file itself instead of writing zeros ahead. */
const PREALLOC_GROUP_LIMIT = 256 * 1024;

/** A frame whose CRC field goes out in a write of its own, after its payload's. */
interface LateCrc {
  /** Offset of its header in the encoded buffer. */
  header: number;
  /** Offset of the frame in the file. */
  file: number;
  record: Uint8Array;
}

/** A group encoded for one writev at the segment's tail. */
export interface EncodedGroup {
  /** The writev's iovecs, in file order (zeros of the preallocation last). */
  chunks: Uint8Array[];
  /** The buffer of copied frames and headers (the late CRCs are computed from it). */
  buf: Buffer;
  /** Start offset of each frame in the file, in index order. */
  offsets: number[];
  late: LateCrc[];
}

/**
 * Encodes the records of `ops` as frames of `seg` from file offset `tail`. Small payloads are
 * copied next to their frame headers (one iovec for many records); large ones are passed by
 * reference, and the largest, when the pool writes them, get their CRC once the write is under
 * way (`late`: an inline write leaves nothing to overlap).
 */
export function encodeGroup(ops: readonly AppendOp[], seg: Segment, tail: number, where: SyncWhere): EncodedGroup {
  const chunks: Uint8Array[] = [];
  const late: LateCrc[] = [];
  let small = 0;
  for (const op of ops) for (const r of op.records) small += FRAME_HEADER_BYTES + (r.length < COPY_LIMIT ? r.length : 0);
  const buf = Buffer.allocUnsafe(small);
  const offsets: number[] = [];
  let p = 0;
  let cut = 0;
  let off = tail;
  for (const op of ops) {
    let index = op.first;
    for (const r of op.records) {
      offsets.push(off);
      if (r.length < COPY_LIMIT) {
        p += writeFrame(buf, p, index, r, seg.salt);
      } else {
        if (r.length < LATE_CRC_LIMIT || where === 'inline') writeFrameHeader(buf, p, index, r, seg.salt);
        else {
          writeFrameHeaderFields(buf, p, index, r.length);
          late.push({ header: p, file: off, record: r });
        }
        p += FRAME_HEADER_BYTES;
        chunks.push(buf.subarray(cut, p), r);
        cut = p;
      }
      off += FRAME_HEADER_BYTES + r.length;
      index++;
    }
  }
  if (cut < p) chunks.push(buf.subarray(cut, p));
  return { chunks, buf, offsets, late };
}

export class GroupWriter {
  readonly #s: LogState;
  readonly #queue: OpQueue;
  readonly #tables: TableCache;
  readonly #structure: Structure;
  readonly #syncer: Syncer;

  constructor(s: LogState, queue: OpQueue, tables: TableCache, structure: Structure, syncer: Syncer) {
    this.#s = s;
    this.#queue = queue;
    this.#tables = tables;
    this.#structure = structure;
    this.#syncer = syncer;
  }

  /** Writes the appends at the head of the queue that fit the active segment; rolls first if needed. */
  async writeNextGroup(): Promise<void> {
    const s = this.#s;
    const seg = s.active;
    const tail = seg.tableEnd;
    const { ops, bytes } = this.#chooseGroup(seg, tail);
    if (ops.length === 0) {
      if (seg.count > 0 && this.#structure.canAddSegment(2)) {
        await this.#structure.roll();
        return;
      }
      const err = new SeglogError('TOO_LARGE', `log ${s.dir} is full: its manifest names the most segments it can`);
      this.#queue.failFrom(this.#queue.ops[0] as AppendOp, err);
      return;
    }
    assert(ops[0]!.first === seg.base + seg.count, 'a group starts at the segment\'s end (contiguous indices)');
    this.#queue.take(ops.length);
    // Nothing queued behind this group, and at most INLINE_WRITE_LIMIT of it: the policy may write
    // it on this thread (no hand-offs).
    const inlineable = this.#queue.length === 0 && bytes <= INLINE_WRITE_LIMIT;
    const where = s.writes.where(inlineable, s.owner);
    const group = encodeGroup(ops, seg, tail, where);
    const newTail = tail + bytes;
    const allocated = this.#preallocate(group.chunks, seg, newTail, bytes);

    const { handle } = await this.#activeLease();
    try {
      await this.#write(handle, group, tail, where, seg.salt);
    } catch (err) {
      const e = fromIo(err, 'write', seg.segPath);
      if (s.poison !== null) {
        rejectOps(ops, s.poison);
        return;
      }
      this.#queue.failFrom(ops[0]!, e, ops);
      await this.#cutAfterFailedWrite(seg, handle, tail);
      return;
    }
    if (s.poison !== null) {
      // A sync failed while this group was being written: the view was rolled back to the last
      // sync; the group is not added to it.
      rejectOps(ops, s.poison);
      return;
    }
    s.stats.groupWrites++;
    for (const o of group.offsets) seg.push(o);
    seg.tableEnd = newTail;
    seg.count = seg.tableCount;
    seg.allocated = Math.max(allocated, newTail, seg.allocated);
    this.#syncer.written(ops, bytes);
    this.#queue.removePending(ops);
    this.#syncer.maybeSync();
  }

  /** The appends at the head of the queue that go into one group at `tail` of `seg`. */
  #chooseGroup(seg: Segment, tail: number): { ops: AppendOp[]; bytes: number } {
    const ops: AppendOp[] = [];
    let bytes = 0;
    for (const op of this.#queue.ops) {
      if (op.kind !== 'append') break;
      const fits = tail + bytes + op.frameBytes <= this.#s.segmentBytes;
      if (!fits && (seg.count > 0 || ops.length > 0)) {
        // Keep 2 manifest entries spare so that a truncation (which adds one) always fits.
        if (ops.length > 0 || this.#structure.canAddSegment(2)) break;
        if (tail + bytes + op.frameBytes > MAX_SEGMENT_FILE_BYTES) break;
      }
      if (ops.length > 0) assert(op.first === ops[ops.length - 1]!.first + ops[ops.length - 1]!.records.length, 'a group\'s appends are contiguous');
      ops.push(op);
      bytes += op.frameBytes;
    }
    return { ops, bytes };
  }

  /**
   * Adds zero-filled space after a group that passes the segment's allocated size, to `chunks`;
   * answers the file size the write leaves. Grows by about the segment's size so far (16 KiB ..
   * 4 MiB): small logs stay small, busy ones rarely pay for a size change in their sync. A large
   * group skips it: its own bytes dominate the sync, and writing zeros beside them would double
   * what reaches the disk.
   */
  #preallocate(chunks: Uint8Array[], seg: Segment, newTail: number, bytes: number): number {
    let allocated = seg.allocated;
    if (newTail > allocated && bytes < PREALLOC_GROUP_LIMIT) {
      const grow = Math.min(MAX_PREALLOC, Math.max(MIN_PREALLOC, newTail));
      const target = Math.max(newTail, Math.min(newTail + grow, Math.max(this.#s.segmentBytes, newTail)));
      for (let at = newTail; at < target; at += ZEROS.length) chunks.push(ZEROS.subarray(0, Math.min(ZEROS.length, target - at)));
      allocated = target;
    }
    return allocated;
  }

  /** Writes an encoded group at `tail`, then the late CRC fields. */
  async #write(handle: FileHandle, group: EncodedGroup, tail: number, where: SyncWhere, salt: number): Promise<void> {
    const late = group.late;
    const writing = this.#s.writes.run(where, (w) => handle.writev(group.chunks, tail, w));
    if (late.length === 0) {
      await writing;
      return;
    }
    // The CRCs are computed while the pool copies the bytes (the writev has read `buf` by the
    // time it resolves, so the fields go out in writes of their own, after it). Until then each
    // late frame's CRC field is zero: a crash leaves it invalid, a torn tail like any unsynced
    // write, and no reader sees it (the table grows after these writes).
    const fields = new Uint8Array(4 * late.length);
    const view = new DataView(fields.buffer);
    for (let i = 0; i < late.length; i++) {
      const l = late[i]!;
      view.setUint32(4 * i, frameChecksum(group.buf, l.header, l.record, salt), true);
    }
    await writing;
    for (let i = 0; i < late.length; i++) await handle.write(fields.subarray(4 * i, 4 * i + 4), late[i]!.file);
  }

  /**
   * A failed group write: its frames may be partly on disk. Cut the file back to the tail and
   * sync, so that they can never line up behind a later frame; if that fails too, poison.
   */
  async #cutAfterFailedWrite(seg: Segment, handle: FileHandle, tail: number): Promise<void> {
    try {
      await handle.truncate(tail);
      await handle.datasync();
      seg.allocated = tail;
      seg.stale = false;
    } catch (err) {
      this.#syncer.poison(fromIo(err, 'cut failed write of', seg.segPath));
    }
  }

  async #activeLease(): Promise<{ handle: FileHandle }> {
    const s = this.#s;
    const seg = s.active;
    if (s.lease !== null && s.lease.segment === seg) return s.lease;
    s.releaseLease();
    const { handle, release } = await this.#tables.acquire(seg);
    s.lease = { handle, release, segment: seg };
    return s.lease;
  }
}
