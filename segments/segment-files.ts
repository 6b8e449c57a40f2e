// The files of a segmented log, one call each: the filer.
//
// Owns: `SegmentFiles` — starting a segment file (its header, then zeros, synced with its
// directory entry), cutting a segment file to a length, writing and reading a segment's index
// (`<segment>.idx`; also what an index too long to read whole claims, `indexClaimOf`, which
// `seglog verify` shares), syncing the directory, unlinking, and checking that a range of a file
// is all zeros. Every I/O error
// comes back as a typed SeglogError naming the file. Guarantees: a started segment file and its
// name are durable when `startSegmentFile` resolves (so a manifest may name it); a cut is
// durable when `cutFile` resolves; an index is derived data, synced only when its caller asks.
// The bytes are encoded by format.ts; this room only moves them.

import { crc32 } from 'node:zlib';
import { fromIo } from '../lib/errors.js';
import type { FileHandle } from '../lib/fs/types.js';
import { FRAME_HEADER_BYTES, HEADER_BYTES, INDEX_HEADER_BYTES, decodeIndex, decodeIndexHeader, encodeSegmentHeader, type SegmentId } from './format.js';
import type { Segment } from './segment.js';
import type { LogState } from './state.js';

/** Zero-filled space for preallocation (the largest run the writer writes ahead at once). */
export const ZEROS = new Uint8Array(4 << 20);
const ZEROS_BUF = Buffer.from(ZEROS.buffer, ZEROS.byteOffset, ZEROS.byteLength);

/** True when bytes [from, to) of `b` (at most ZEROS' length) are all zeros: one native comparison. */
export function isZeroBytes(b: Uint8Array, from: number, to: number): boolean {
  return Buffer.from(b.buffer, b.byteOffset + from, to - from).equals(ZEROS_BUF.subarray(0, to - from));
}

/** An index as read from its file: the frame table it claims. */
export interface IndexTable {
  offsets: Uint32Array;
  count: number;
  endOffset: number;
}

/** What a valid index claims, without its table: frames [0, count) ending at `endOffset`. */
export interface IndexClaim {
  count: number;
  endOffset: number;
}

/** The most bytes an index of a segment of `segmentSize` bytes can need (a frame takes at least 16). */
export function indexBound(segmentSize: number): number {
  return INDEX_HEADER_BYTES + 4 * Math.floor(Math.max(0, segmentSize - HEADER_BYTES) / FRAME_HEADER_BYTES);
}

/** The largest index the format allows: one of a 4 GiB segment of empty frames. */
const MAX_INDEX_BYTES = indexBound(2 ** 32);
const CLAIM_WINDOW = 1 << 20;

export class SegmentFiles {
  readonly #s: LogState;

  constructor(s: LogState) {
    this.#s = s;
  }

  /**
   * Writes `seg`'s header (then `zeros` zero bytes) at the start of its file, opened with `mode`,
   * and syncs the file and the directory (so that its name is durable too), then closes the file.
   * The two syncs run side by side: nothing may name the file before both are done (the manifest
   * that does comes after), and until then a crash leaves it garbage, whichever landed first.
   */
  async startSegmentFile(seg: Segment, mode: 'create-exclusive' | 'write', zeros: number): Promise<void> {
    const s = this.#s;
    const header = encodeSegmentHeader(seg.base, seg.id, s.generation + 1);
    try {
      const h = await s.fs.open(seg.segPath, mode);
      try {
        if (zeros > 0) await h.writev([header, ZEROS.subarray(0, zeros)], 0);
        else await h.write(header, 0);
        // (Called in this order: the file's sync is issued before the directory's.)
        const synced = await Promise.allSettled([h.datasync(), s.mistakes.skipDirSync === true ? Promise.resolve() : s.fs.syncDir(s.dir)]);
        for (const step of synced) if (step.status === 'rejected') throw step.reason;
      } finally {
        await h.close();
      }
    } catch (err) {
      throw fromIo(err, 'create segment', seg.segPath);
    }
  }

  /**
   * Cuts `seg`'s file to `end` and syncs the new length (when the file is longer, or `always`);
   * from then on the segment holds nothing past `end`.
   */
  async cutFile(seg: Segment, end: number, always: boolean): Promise<void> {
    let h: FileHandle;
    try {
      h = await this.#s.fs.open(seg.segPath, 'write');
    } catch (err) {
      throw fromIo(err, 'open segment', seg.segPath);
    }
    try {
      if (always || (await h.size()) > end) {
        await h.truncate(end);
        await h.datasync();
      }
    } catch (err) {
      throw fromIo(err, 'cut segment', seg.segPath);
    } finally {
      await h.close().catch(() => undefined);
    }
    seg.allocated = Math.min(seg.allocated, end);
    seg.stale = false;
  }

  async writeIndexFile(seg: Segment, bytes: Uint8Array, durable: boolean): Promise<void> {
    let h: FileHandle;
    try {
      h = await this.#s.fs.open(seg.idxPath, 'create');
    } catch (err) {
      throw fromIo(err, 'create index', seg.idxPath);
    }
    try {
      await h.write(bytes, 0);
      await h.truncate(bytes.length);
      if (durable) await h.datasync();
    } catch (err) {
      throw fromIo(err, 'write index', seg.idxPath);
    } finally {
      await h.close().catch(() => undefined);
    }
  }

  /** Reads and decodes `<segment>.idx`; null when absent or invalid (the caller rebuilds). */
  readIndexFile(seg: Segment, segmentSize: number): Promise<IndexTable | null> {
    // A frame takes at least 16 bytes, so an index can never need more than this: a larger file
    // is not trusted to size an allocation.
    return this.#withIndex(seg, (h, size) => (size > indexBound(segmentSize) ? Promise.resolve(null) : readTable(h, size, seg)));
  }

  /**
   * `<segment>.idx` at open, through one open of the file: `table` as `readIndexFile` answers it;
   * `claim`, the table itself when there is one, else what an index longer than a segment of
   * `segmentSize` bytes could need (which is not trusted to size an allocation) claims — its
   * header, and its CRC checked over the table in windows of 1 MiB — or null when it is not a
   * valid index of `seg`. Both null when the file is absent. A valid claim past the end of the
   * segment file says the file lost frames that were durable.
   */
  async readIndexOrClaim(seg: Segment, segmentSize: number): Promise<{ table: IndexTable | null; claim: IndexClaim | null }> {
    const got = await this.#withIndex<{ table: IndexTable | null; claim: IndexClaim | null }>(seg, async (h, size) => {
      if (size > indexBound(segmentSize)) return { table: null, claim: await indexClaimOf(h, size, seg.base, seg.id) };
      const table = await readTable(h, size, seg);
      return { table, claim: table };
    });
    return got ?? { table: null, claim: null };
  }

  /** Runs `read` on `<segment>.idx` opened for reading, with its size; null when it is absent. */
  async #withIndex<T>(seg: Segment, read: (h: FileHandle, size: number) => Promise<T | null>): Promise<T | null> {
    let h: FileHandle;
    try {
      h = await this.#s.fs.open(seg.idxPath, 'read');
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ENOENT') return null;
      throw fromIo(err, 'open index', seg.idxPath);
    }
    try {
      return await read(h, await h.size());
    } catch (err) {
      throw fromIo(err, 'read index', seg.idxPath);
    } finally {
      await h.close().catch(() => undefined);
    }
  }

  /** Syncs the log's directory (the names of files created since are durable). */
  async syncDirectory(): Promise<void> {
    try {
      await this.#s.fs.syncDir(this.#s.dir);
    } catch (err) {
      throw fromIo(err, 'sync directory', this.#s.dir);
    }
  }

  async unlinkQuietly(p: string): Promise<void> {
    try {
      await this.#s.fs.unlink(p);
    } catch {
      // Already gone, or it stays as garbage that the next open removes.
    }
  }

  async stat(p: string): Promise<{ size: number } | null> {
    try {
      return await this.#s.fs.stat(p);
    } catch (err) {
      throw fromIo(err, 'stat', p);
    }
  }

  /** Opens `file` for reading, runs `use` on it, closes it. */
  async withReadHandle<T>(file: string, use: (h: FileHandle) => Promise<T>): Promise<T> {
    let h: FileHandle;
    try {
      h = await this.#s.fs.open(file, 'read');
    } catch (err) {
      throw fromIo(err, 'open', file);
    }
    try {
      return await use(h);
    } finally {
      await h.close().catch(() => undefined);
    }
  }

  /** True when bytes [from, to) of `file` are all zeros (or the file ends before `to`). */
  isZero(file: string, from: number, to: number): Promise<boolean> {
    return this.withReadHandle(file, (h) => isZeroRange(h, from, to));
  }
}

/** The table of the index file open in `h` (`size` bytes, within the bound); null unless valid for `seg`. */
async function readTable(h: FileHandle, size: number, seg: Segment): Promise<IndexTable | null> {
  if (size < INDEX_HEADER_BYTES) return null;
  const b = new Uint8Array(size);
  const n = await h.read(b, 0);
  return decodeIndex(b.subarray(0, n), seg.base, seg.id);
}

/** True when bytes [from, to) of `h` are all zeros (or the file ends before `to`). */
export async function isZeroRange(h: FileHandle, from: number, to: number): Promise<boolean> {
  const buf = Buffer.alloc(Math.min(1 << 20, to - from));
  for (let at = from; at < to; at += buf.length) {
    const n = Math.min(buf.length, to - at);
    const view = buf.subarray(0, n);
    let got: number;
    try {
      got = await h.read(view, at);
    } catch (err) {
      throw fromIo(err, 'read', h.path);
    }
    if (!isZeroBytes(view, 0, got)) return false;
    if (got < n) return true;
  }
  return true;
}

/**
 * What the index file open in `h` (`size` bytes) claims for the segment (`base`, `id`), without
 * holding its table: its header, and its CRC computed over the table in windows of 1 MiB. Null
 * unless it is a valid index of that segment (the format's largest at most).
 */
export async function indexClaimOf(h: FileHandle, size: number, base: number, id: SegmentId): Promise<IndexClaim | null> {
  if (size > MAX_INDEX_BYTES || size < INDEX_HEADER_BYTES) return null;
  const head = new Uint8Array(INDEX_HEADER_BYTES);
  if ((await h.read(head, 0)) !== head.length) return null;
  const claim = decodeIndexHeader(head, base, id);
  if (claim === null || size !== INDEX_HEADER_BYTES + 4 * claim.count) return null;
  let crc = claim.crcSeed;
  const buf = new Uint8Array(Math.min(CLAIM_WINDOW, size - INDEX_HEADER_BYTES));
  for (let at = INDEX_HEADER_BYTES; at < size; at += buf.length) {
    const view = buf.subarray(0, Math.min(buf.length, size - at));
    if ((await h.read(view, at)) !== view.length) return null;
    crc = crc32(view, crc);
  }
  return crc === claim.crc ? { count: claim.count, endOffset: claim.endOffset } : null;
}
