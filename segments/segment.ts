// One segment of a log, as the log holds it in memory: its identity, its files and its frame table.
//
// Owns: `Segment` (base, id, salt, paths, the live record count, the offset table of its frames,
// the bookkeeping of reads in flight) and `segmentAt` (which segment of a list holds an index).
// Guarantees: the offset table only grows by `push` and its entries increase (asserted); the
// table's bookkeeping (`tableCount`, `tableEnd`) is what every read trusts, so only the writer,
// recovery, the table cache and a failed sync's rollback change it.

import * as path from 'node:path';
import { assert } from '../lib/assert.js';
import { FRAME_HEADER_BYTES, HEADER_BYTES, INDEX_SUFFIX, SEGMENT_SUFFIX, saltOf, segmentBaseName, type SegmentId } from './format.js';

export class Segment {
  readonly base: number;
  readonly id: SegmentId;
  readonly salt: number;
  readonly name: string;
  readonly segPath: string;
  readonly idxPath: string;
  /** Live records in this segment (for a sealed one: the next segment's base minus this base). */
  count = 0;
  /** Frame start offsets; may hold more entries than `count` (a truncated sealed segment). Null: not loaded. */
  offsets: Uint32Array | null = null;
  /** Entries valid in `offsets`. */
  tableCount = 0;
  /** Offset just after frame `tableCount - 1`. */
  tableEnd = HEADER_BYTES;
  loading: Promise<void> | null = null;
  headerChecked = false;
  /**
   * File size including the space ahead of the tail (the active segment only): zeros, or, when
   * `stale`, bytes left from the file's previous life as another segment.
   */
  allocated = HEADER_BYTES;
  /** The space past `tableEnd` holds a recycled file's old bytes, not zeros (cut before sealing or closing). */
  stale = false;
  /** This process synced the directory after writing the segment's index: its name is durable. */
  indexNamed = false;
  /**
   * The segment's index file lists exactly its table and is durable: read at open from a log
   * known durable, with nothing scanned past it and nothing cut (recovery.ts). A close that
   * changed nothing need not write it again.
   */
  indexDurable = false;
  /** Reads in flight: an unlink waits for them. */
  readers = 0;
  removed = false;
  lastUse = 0;

  constructor(dir: string, base: number, id: SegmentId) {
    this.base = base;
    this.id = id;
    this.salt = saltOf(id);
    this.name = segmentBaseName(base, id);
    this.segPath = path.join(dir, this.name + SEGMENT_SUFFIX);
    this.idxPath = path.join(dir, this.name + INDEX_SUFFIX);
  }

  /** Appends a frame offset to the in-memory table (the active segment). */
  push(offset: number): void {
    let t = this.offsets;
    if (t === null) t = this.offsets = new Uint32Array(64);
    // Frames follow one another: each starts at least a frame header past the previous one.
    assert(this.tableCount === 0 ? offset >= HEADER_BYTES : offset >= t[this.tableCount - 1]! + FRAME_HEADER_BYTES, 'frame offsets increase');
    if (this.tableCount === t.length) {
      const bigger = new Uint32Array(t.length * 2);
      bigger.set(t);
      this.offsets = t = bigger;
    }
    t[this.tableCount++] = offset;
  }

  frameStart(k: number): number {
    return this.offsets![k]!;
  }
  frameEnd(k: number): number {
    return k + 1 < this.tableCount ? this.offsets![k + 1]! : this.tableEnd;
  }
}

/** The position in `list` of the segment holding index `i` (largest base <= i). */
export function segmentAt(list: readonly Segment[], i: number): number {
  let lo = 0;
  let hi = list.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (list[mid]!.base <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
