// Structural changes of a segmented log: roll, truncateAfter, dropBefore, reset. Each commits one
// manifest.
//
// Owns: `Structure` — creating a segment (fresh, or out of the spare), sealing and cutting one,
// building, committing and installing a manifest, and removing what a committed manifest no
// longer names (once no read holds it). Guarantees (docs/crash-safety.md, segmented log):
// - the manifest is the single commit point: every file a new manifest names is durable (header,
//   name, seal) before `commit` writes it, and nothing it drops is unlinked before it is durable
//   (both asserted at `commit` and `retire`); a crash leaves the old structure or the new one;
// - every change runs with nothing written and unsynced (the caller drains first), so a sealed
//   segment holds exactly its synced frames, every byte of it under a checksum.

import * as path from 'node:path';
import { assert } from '../lib/assert.js';
import { fromIo } from '../lib/errors.js';
import { HEADER_BYTES, MANIFEST_NAME, encodeIndex, encodeManifest, manifestBytes, newSegmentId, type Manifest } from './format.js';
import { MANIFEST_CAPACITY } from './manifest.js';
import { Segment, segmentAt } from './segment.js';
import type { SegmentFiles } from './segment-files.js';
import type { Spares } from './spare.js';
import type { LogState } from './state.js';
import type { Syncer } from './syncer.js';
import type { TableCache } from './table-cache.js';

/**
 * A fresh segment's file size: its header, then zeros, so that its first syncs change no size.
 * One file-system block: a node of a thousand mostly idle groups pays 4 KiB per log, not more;
 * the writer grows the file ahead of a busy log's tail (writer.ts `#preallocate`).
 */
const FIRST_FILE_BYTES = 4 * 1024;

/** The size of a new segment file of a log of `segmentBytes` segments: one block, or the whole segment when smaller. */
export function firstSegmentFileBytes(segmentBytes: number): number {
  return Math.min(FIRST_FILE_BYTES, Math.max(segmentBytes, HEADER_BYTES));
}

export class Structure {
  readonly #s: LogState;
  readonly #files: SegmentFiles;
  readonly #tables: TableCache;
  readonly #spares: Spares;
  readonly #syncer: Syncer;
  /** Unlinks started when the last read of a retired segment ended (close waits for them). */
  readonly #deferredUnlinks = new Set<Promise<void>>();

  constructor(s: LogState, files: SegmentFiles, tables: TableCache, spares: Spares, syncer: Syncer) {
    this.#s = s;
    this.#files = files;
    this.#tables = tables;
    this.#spares = spares;
    this.#syncer = syncer;
  }

  /** Whether a manifest naming `extra` more segments still fits the manifest cell. */
  canAddSegment(extra: number): boolean {
    return manifestBytes(this.#s.segments.length + extra) <= MANIFEST_CAPACITY;
  }

  async roll(): Promise<void> {
    const s = this.#s;
    await this.#syncer.drain();
    const old = s.active;
    // Nothing but zero-filled space (or a recycled file's old bytes) follows the last record
    // here: cut it, so that every byte of a sealed segment lies under a checksum (a flipped byte
    // anywhere is detected). The cut, the seal and the new segment touch three different files
    // and need each other for nothing: they run together, so that their syncs can share journal
    // commits. All three are durable before the manifest names the new segment.
    const steps = await Promise.allSettled([this.#cutToEnd(old), this.#seal(old), this.createSegment(old.base + old.count)]);
    for (const step of steps) if (step.status === 'rejected') throw step.reason;
    const seg = (steps[2] as PromiseFulfilledResult<Segment>).value;
    const next = normalize([...s.segments, seg], s.physFirst);
    await this.commit(s.physFirst, next);
    await this.#install(next, s.physFirst);
    s.stats.rolls++;
  }

  async truncate(i: number): Promise<void> {
    const s = this.#s;
    if (i >= s.physEnd()) return;
    assert(i >= s.physFirst, 'truncation at or above the first index');
    const k = segmentAt(s.segments, i);
    const holder = s.segments[k]!;
    const keep = s.segments.slice(0, k);
    if (i > holder.base) {
      if (holder === s.active) {
        holder.count = i - holder.base;
        // The truncated frames stay (below); a recycled file's old bytes after them go.
        await this.cutStale(holder);
        await this.#seal(holder);
      }
      keep.push(holder);
    }
    const seg = await this.createSegment(i);
    keep.push(seg);
    const next = normalize(keep, s.physFirst);
    await this.#plantEarlyUnlink(next);
    await this.commit(s.physFirst, next);
    await this.#install(next, s.physFirst);
    // The truncated frames stay in the holder's file after its sealed end: reads never reach them
    // (its index bounds the segment), and cutting them here could pull bytes from under a read
    // that started before the truncation. `seglog verify` reports them as dead frames.
  }

  async drop(first: number): Promise<void> {
    const s = this.#s;
    const newFirst = Math.min(first, s.physEnd());
    if (newFirst <= s.physFirst) return;
    const next = normalize(s.segments, newFirst);
    await this.#plantEarlyUnlink(next);
    await this.commit(newFirst, next);
    await this.#install(next, newFirst);
  }

  async reset(n: number): Promise<void> {
    const seg = await this.createSegment(n);
    await this.#plantEarlyUnlink([seg]);
    await this.commit(n, [seg]);
    await this.#install([seg], n);
  }

  /** mistakes.unlinkBeforeCommit: unlinks what `next` drops before the commit. */
  async #plantEarlyUnlink(next: Segment[]): Promise<void> {
    if (this.#s.mistakes.unlinkBeforeCommit !== true) return;
    for (const x of this.#s.segments) if (!next.includes(x)) await this.#unlinkSegment(x, false);
  }

  /**
   * The commit point of every structural change: writes the manifest naming `list` from `first`
   * (durable when the cell write resolves). Every segment it names is one the current manifest
   * names, or one this process created and made durable (header and name).
   */
  async commit(first: number, list: Segment[], file = path.join(this.#s.dir, MANIFEST_NAME)): Promise<void> {
    const s = this.#s;
    const named = new Set(s.segments);
    for (let k = 0; k < list.length; k++) {
      const seg = list[k]!;
      assert(named.has(seg) || seg.headerChecked, 'a manifest names only durable segment files');
      assert(k === 0 || seg.base > list[k - 1]!.base, 'manifest segment bases increase');
    }
    const m: Manifest = { firstIndex: first, generation: s.generation + 1, segments: list.map((x) => ({ base: x.base, id: x.id })) };
    try {
      await s.cell.write(encodeManifest(m));
    } catch (err) {
      throw fromIo(err, 'write manifest', file);
    }
    s.generation = m.generation;
  }

  /** After a manifest commit: adopt the new segment list and remove what it no longer names. */
  async #install(next: Segment[], first: number): Promise<void> {
    const s = this.#s;
    const kept = new Set(next);
    const gone = s.segments.filter((x) => !kept.has(x));
    for (let k = 0; k + 1 < next.length; k++) next[k]!.count = next[k + 1]!.base - next[k]!.base;
    const active = next[next.length - 1]!;
    if (active !== s.active) {
      s.releaseLease();
      s.active = active;
      this.#syncer.adoptActive(active);
    }
    s.segments = next;
    s.physFirst = first;
    this.#tables.evict();
    await Promise.all(gone.map((x) => this.#retire(x)));
  }

  /** Cuts a segment's file to the end of its last live record and syncs the new length. */
  #cutToEnd(seg: Segment): Promise<void> {
    return this.#files.cutFile(seg, seg.frameEnd(seg.count - 1), false);
  }

  /**
   * Cuts a recycled file's old bytes past the segment's last frame, and syncs the new length (a
   * segment that is sealed or closed holds nothing but its frames and zeros).
   */
  async cutStale(seg: Segment): Promise<void> {
    if (seg.stale) await this.#files.cutFile(seg, seg.tableEnd, true);
  }

  /** Seals a segment: writes its index (count = its live records) and syncs it. */
  async #seal(seg: Segment): Promise<void> {
    const bytes = encodeIndex(seg.base, seg.id, seg.offsets!, seg.count, seg.frameEnd(seg.count - 1));
    await this.#files.writeIndexFile(seg, bytes, true);
    seg.lastUse = ++this.#s.useTick;
  }

  /**
   * A new, empty segment at `base`, durable (header, zero-filled space or a spare's old bytes,
   * directory entry).
   */
  async createSegment(base: number): Promise<Segment> {
    const s = this.#s;
    const seg = new Segment(s.dir, base, newSegmentId());
    const spare = this.#spares.take();
    if (spare !== null && (await this.#spares.reuse(seg, spare))) return seg;
    const prealloc = firstSegmentFileBytes(s.segmentBytes) - HEADER_BYTES;
    await this.#files.startSegmentFile(seg, 'create-exclusive', prealloc);
    seg.allocated = HEADER_BYTES + prealloc;
    seg.offsets = new Uint32Array(64);
    seg.headerChecked = true;
    return seg;
  }

  /** Removes a segment no manifest names any more, once no read uses it. */
  async #retire(seg: Segment): Promise<void> {
    assert(!this.#s.segments.includes(seg), 'a segment is removed only after a manifest that drops it is durable');
    seg.removed = true;
    if (seg.readers === 0) await this.#unlinkSegment(seg);
  }

  /** A read let go of `seg`: the last one of a retired segment unlinks it. */
  readDone(seg: Segment): void {
    if (--seg.readers === 0 && seg.removed) this.#trackUnlink(this.#unlinkSegment(seg));
  }

  #trackUnlink(p: Promise<void>): void {
    this.#deferredUnlinks.add(p);
    void p.finally(() => this.#deferredUnlinks.delete(p));
  }

  /** Waits for the unlinks started by reads that ended (the log closes). */
  async settleUnlinks(): Promise<void> {
    await Promise.all([...this.#deferredUnlinks]);
  }

  async #unlinkSegment(seg: Segment, recycle = true): Promise<void> {
    const s = this.#s;
    await s.fdCache.forget(s.fs, seg.segPath);
    if (recycle && (await this.#spares.keep(seg))) {
      await this.#files.unlinkQuietly(seg.idxPath);
      return;
    }
    // Not followed by a directory sync: a file that reappears after a crash is named by no
    // manifest, and open deletes it as garbage.
    await this.#files.unlinkQuietly(seg.segPath);
    await this.#files.unlinkQuietly(seg.idxPath);
  }
}

/** Drops leading segments that hold no record at or after `first` (the last one always stays). */
function normalize(list: Segment[], first: number): Segment[] {
  let k = 0;
  while (k + 1 < list.length && list[k + 1]!.base <= first) k++;
  return list.slice(k);
}
