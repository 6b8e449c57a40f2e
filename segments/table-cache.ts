// Sealed segments' frame tables in memory, and the checked handles reads use.
//
// Owns: `TableCache` — `acquire` (a shared fd-cache handle on a segment, its header checked
// against the manifest the first time this log opens it), `ensureTable` (a sealed segment's
// offset table, loaded from its index or rebuilt by a full scan when the index is missing, torn or
// stale), and the LRU that keeps at most MAX_LOADED_TABLES sealed tables in memory. Guarantees:
// memory for tables stays bounded by that count whatever the number of segments; a table in use
// by a read, or loading, is never evicted; a sealed segment whose frames do not all validate is
// CORRUPT, naming the file, the offset and the index; a rebuilt index is written back unsynced
// (derived data: a torn one is rebuilt again).

import { corrupt, fromIo } from '../lib/errors.js';
import type { FileHandle } from '../lib/fs/types.js';
import { HEADER_BYTES, checkSegmentHeader, encodeIndex } from './format.js';
import { scanFrames } from './scan.js';
import type { Segment } from './segment.js';
import type { SegmentFiles } from './segment-files.js';
import type { LogState } from './state.js';

/** Sealed-segment offset tables kept in memory per log (least recently used dropped first). */
const MAX_LOADED_TABLES = 8;

export class TableCache {
  readonly #s: LogState;
  readonly #files: SegmentFiles;

  constructor(s: LogState, files: SegmentFiles) {
    this.#s = s;
    this.#files = files;
  }

  /** An fd-cache handle on the segment; checks its header the first time this log opens it. */
  async acquire(seg: Segment): Promise<{ handle: FileHandle; release: () => void }> {
    const s = this.#s;
    let lease: { handle: FileHandle; release: () => void };
    try {
      lease = await s.fdCache.acquire(s.fs, seg.segPath);
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ENOENT') {
        throw corrupt(`segment ${seg.segPath} named by the manifest is missing`, { file: seg.segPath, offset: 0 });
      }
      throw fromIo(err, 'open segment', seg.segPath);
    }
    if (!seg.headerChecked) {
      try {
        const b = new Uint8Array(HEADER_BYTES);
        let n: number;
        try {
          n = await lease.handle.read(b, 0);
        } catch (err) {
          throw fromIo(err, 'read segment header', seg.segPath);
        }
        checkSegmentHeader(b.subarray(0, n), seg.segPath, seg.base, seg.id, s.generation);
        seg.headerChecked = true;
      } catch (err) {
        lease.release();
        throw err;
      }
    }
    return lease;
  }

  /**
   * Loads a sealed segment's offset table when it is not in memory (it was never loaded, or was
   * evicted), so that it holds at least `need` entries. Answers false when a table already in
   * memory is shorter (only a failed sync's rollback, racing a read, does that).
   */
  async ensureTable(seg: Segment, need: number): Promise<boolean> {
    seg.lastUse = ++this.#s.useTick;
    while (seg.offsets === null) {
      if (seg.loading === null) {
        seg.loading = this.#loadTable(seg, need).finally(() => {
          seg.loading = null;
        });
      }
      await seg.loading;
    }
    this.evict();
    return seg.tableCount >= need;
  }

  async #loadTable(seg: Segment, need: number): Promise<void> {
    const s = this.#s;
    const want = Math.max(seg.count, need);
    const { handle, release } = await this.acquire(seg);
    try {
      const size = await handle.size().catch((err: unknown) => {
        throw fromIo(err, 'stat segment', seg.segPath);
      });
      const idx = await this.#files.readIndexFile(seg, size);
      if (idx !== null && idx.count >= want && idx.endOffset <= size) {
        seg.offsets = idx.offsets;
        seg.tableCount = idx.count;
        seg.tableEnd = idx.endOffset;
        return;
      }
      // Missing, torn or stale index: rebuild it. A sealed segment must validate completely.
      const offsets = new Uint32Array(Math.max(16, want));
      let n = 0;
      const result = await scanFrames(handle, size, seg.salt, HEADER_BYTES, seg.base, s.maxRecordBytes, want, (off) => {
        offsets[n++] = off;
      });
      if (result.count < want) {
        throw corrupt(
          `segment ${seg.segPath}: record ${seg.base + result.count} at offset ${result.endOffset} fails its ${result.stop} check`,
          { file: seg.segPath, offset: result.endOffset, index: seg.base + result.count },
        );
      }
      seg.offsets = offsets;
      seg.tableCount = n;
      seg.tableEnd = result.endOffset;
      s.stats.indexRebuilds++;
      // The rebuilt index is derived data: written without a sync (a torn one is rebuilt again).
      await this.#files.writeIndexFile(seg, encodeIndex(seg.base, seg.id, offsets, n, result.endOffset), false).catch(() => undefined);
    } finally {
      release();
    }
  }

  /** Keeps at most MAX_LOADED_TABLES sealed tables in memory (not those in use). */
  evict(): void {
    const s = this.#s;
    const sealed = s.segments.filter((x) => x !== s.active && x.offsets !== null);
    if (sealed.length <= MAX_LOADED_TABLES) return;
    sealed.sort((a, b) => a.lastUse - b.lastUse);
    for (const x of sealed.slice(0, sealed.length - MAX_LOADED_TABLES)) {
      if (x.readers === 0 && x.loading === null) {
        x.offsets = null;
        x.tableCount = 0;
      }
    }
  }
}
