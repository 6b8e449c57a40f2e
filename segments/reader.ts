// The reader: records by index, from memory (staged, not yet written) or from the segment files.
//
// Owns: `Reader` — a read's snapshot of the log (`ReadView`: the segment list and the staged
// appends as of its call), the holds that keep every segment it may touch from being unlinked
// under it, and the planning of preads (whole frames, at most READ_CHUNK each, within the byte
// budget). Guarantees: a read sees the log as of its call, whatever runs meanwhile (the segment
// list is replaced, never mutated, by a structural change, and frames once written never change in
// place); every frame served passes its index, length and salted CRC checks, else the read is
// CORRUPT naming the file, the offset and the index; a record is never served past the segment's
// live end.

import { closed, corrupt, fromIo, invalid } from '../lib/errors.js';
import { isIndex } from '../lib/assert.js';
import { deferred, type Deferred } from '../lib/deferred.js';
import { FRAME_HEADER_BYTES, checkFrame } from './format.js';
import type { AppendOp, OpQueue } from './queue.js';
import { segmentAt, type Segment } from './segment.js';
import type { LogState } from './state.js';
import type { Structure } from './structure.js';
import type { TableCache } from './table-cache.js';

/** Largest single pread of a read call. */
const READ_CHUNK = 1 << 20;

/** What a read sees: the segment list and the unwritten staged appends as of its call. */
interface ReadView {
  segments: Segment[];
  staged: AppendOp[];
}

interface Budget {
  bytes: number;
  max: number;
}

export class Reader {
  readonly #s: LogState;
  readonly #queue: OpQueue;
  readonly #tables: TableCache;
  readonly #structure: Structure;
  #readsInFlight = 0;
  #readsIdle: Deferred | null = null;

  constructor(s: LogState, queue: OpQueue, tables: TableCache, structure: Structure) {
    this.#s = s;
    this.#queue = queue;
    this.#tables = tables;
    this.#structure = structure;
  }

  async read(from: number, limit: number, maxBytes: number): Promise<Uint8Array[]> {
    const s = this.#s;
    if (s.closing !== null) throw closed(`log ${s.dir}`);
    if (!isIndex(from) || !isIndex(limit)) throw invalid('read needs safe non-negative integers from and limit');
    if (typeof maxBytes !== 'number' || !(maxBytes >= 0)) throw invalid('maxBytes must be a non-negative number');
    if (from < s.first) throw invalid(`read from ${from} is below the first index ${s.first}`, { from, first: s.first });
    const stop = Math.min(s.end, from + Math.min(limit, Number.MAX_SAFE_INTEGER - from));
    if (from >= stop) return [];
    // A snapshot taken now makes the read see the log as of this call, whatever runs meanwhile:
    // the segment list (replaced, never mutated, by a structural change), and the staged records
    // not yet written (served from memory even if they are written while the read runs). Frames
    // once written never change in place, so the snapshot's segments keep serving them.
    const view: ReadView = {
      segments: s.segments,
      staged: this.#queue.pending.filter((op) => op.written === 0),
    };
    // Hold every segment the read may touch, so that none is unlinked under it.
    const kLo = segmentAt(view.segments, from);
    const kHi = segmentAt(view.segments, stop - 1);
    for (let k = kLo; k <= kHi; k++) view.segments[k]!.readers++;
    this.#readsInFlight++;
    try {
      const out: Uint8Array[] = [];
      const budget: Budget = { bytes: 0, max: maxBytes };
      let x = from;
      while (x < stop) {
        const mem = stagedRecord(view, x);
        if (mem !== undefined) {
          if (out.length > 0 && budget.bytes + mem.length > budget.max) break;
          out.push(mem.slice());
          budget.bytes += mem.length;
          x++;
          continue;
        }
        const runStop = Math.min(stop, nextStagedStart(view, x));
        const before = out.length;
        const more = await this.#readRun(view, x, runStop, out, budget);
        x += out.length - before;
        if (!more) break;
      }
      return out;
    } finally {
      for (let k = kLo; k <= kHi; k++) this.#structure.readDone(view.segments[k]!);
      if (--this.#readsInFlight === 0 && this.#readsIdle !== null) this.#readsIdle.resolve();
    }
  }

  /** Resolves once no read is in flight (the log closes; no new read starts). */
  async idle(): Promise<void> {
    if (this.#readsInFlight > 0) {
      this.#readsIdle = deferred();
      await this.#readsIdle.promise;
    }
  }

  /**
   * Reads records [x, stop) of the one segment of the view holding x (stopping at its end) into
   * `out`. Answers false when the byte budget ended the read.
   */
  async #readRun(view: ReadView, x: number, stop: number, out: Uint8Array[], budget: Budget): Promise<boolean> {
    const at = segmentAt(view.segments, x);
    const seg = view.segments[at]!;
    const next = view.segments[at + 1];
    if (!(await this.#tables.ensureTable(seg, x - seg.base + 1))) return false;
    const { handle, release } = await this.#tables.acquire(seg);
    try {
      // A sealed segment may hold frames past its live count (a truncation sealed it there);
      // the next segment's base bounds it.
      const end = Math.min(stop, seg.base + seg.tableCount, next === undefined ? Infinity : next.base);
      let k = x - seg.base;
      const kEnd = end - seg.base;
      if (k >= kEnd) return false;
      while (k < kEnd) {
        const { j, span } = planRead(seg, k, kEnd, out.length, budget);
        if (j === k) return false;
        const start = seg.frameStart(k);
        const buf = Buffer.allocUnsafe(span);
        let got: number;
        try {
          got = await handle.read(buf, start);
        } catch (err) {
          throw fromIo(err, 'read segment', seg.segPath);
        }
        for (let m = k; m < j; m++) out.push(this.#checkedRecord(seg, m, buf.subarray(0, got), seg.frameStart(m) - start));
        k = j;
      }
      return true;
    } finally {
      release();
    }
  }

  /** The payload of frame `m` of `seg`, found at `off` of `buf`; CORRUPT unless it checks. */
  #checkedRecord(seg: Segment, m: number, buf: Buffer, off: number): Uint8Array {
    const len = seg.frameEnd(m) - seg.frameStart(m) - FRAME_HEADER_BYTES;
    const check = checkFrame(buf, off, seg.base + m, seg.salt, this.#s.maxRecordBytes);
    if (check !== 'ok' || buf.readUInt32LE(off + 4) !== len) {
      const why = check === 'ok' ? 'length' : check;
      throw corrupt(`segment ${seg.segPath}: record ${seg.base + m} at offset ${seg.frameStart(m)} fails its ${why} check`, {
        file: seg.segPath,
        offset: seg.frameStart(m),
        index: seg.base + m,
      });
    }
    return buf.subarray(off + FRAME_HEADER_BYTES, off + FRAME_HEADER_BYTES + len);
  }
}

/**
 * Plans one pread from frame `k`: whole frames, at most READ_CHUNK (or one larger frame), within
 * the budget (which it charges). Answers the frame after the last one planned and the span.
 */
function planRead(seg: Segment, k: number, kEnd: number, served: number, budget: Budget): { j: number; span: number } {
  const start = seg.frameStart(k);
  let j = k;
  let span = 0;
  while (j < kEnd) {
    const fEnd = seg.frameEnd(j);
    const len = fEnd - seg.frameStart(j) - FRAME_HEADER_BYTES;
    if (served + (j - k) > 0 && budget.bytes + len > budget.max) break;
    if (j > k && fEnd - start > READ_CHUNK) break;
    budget.bytes += len;
    span = fEnd - start;
    j++;
  }
  return { j, span };
}

/** The staged record at index x, newest staging first (a truncation may re-stage an index). */
function stagedRecord(view: ReadView, x: number): Uint8Array | undefined {
  const staged = view.staged;
  for (let k = staged.length - 1; k >= 0; k--) {
    const op = staged[k]!;
    if (x >= op.first && x < op.first + op.records.length) return op.records[x - op.first];
  }
  return undefined;
}

/** Smallest index above x where a staged append starts (where a disk run must stop). */
function nextStagedStart(view: ReadView, x: number): number {
  let next = Number.MAX_SAFE_INTEGER;
  for (const op of view.staged) if (op.first > x && op.first < next) next = op.first;
  return next;
}
