// Spare-segment recycling: the file of a dropped segment, kept to become the log's next segment.
//
// Owns: `Spares` — at most one spare file per log: kept when a removed segment is at least half
// a segment, reused (linked under the new segment's name, its header rewritten) by the next
// segment the log creates, deleted at close. Its blocks are allocated and written, so the appends
// that overwrite them sync no size or allocation change. Guarantees: a spare is named by no
// manifest, so an open after a crash deletes it as garbage like any leftover; its old frames
// carry another segment's salt and indices, so none of them validates in the new segment (the
// format's argument, docs/format.md "Recycled files"); a link that fails drops the spare and the
// caller creates a fresh file.

import { HEADER_BYTES } from './format.js';
import type { Segment } from './segment.js';
import type { SegmentFiles } from './segment-files.js';
import type { LogState } from './state.js';

export interface SpareFile {
  path: string;
  size: number;
}

export class Spares {
  readonly #s: LogState;
  readonly #files: SegmentFiles;
  /** The spare's file under its old name, or none. */
  #spare: SpareFile | null = null;

  constructor(s: LogState, files: SegmentFiles) {
    this.#s = s;
    this.#files = files;
  }

  /** Takes the spare, if any, for a new segment (`reuse` it, or it is dropped). */
  take(): SpareFile | null {
    const spare = this.#spare;
    this.#spare = null;
    return spare;
  }

  /**
   * Keeps a removed segment's file as the spare when there is none yet and it is at least half a
   * segment (a log that fills segments; a small one is not worth holding on to).
   */
  async keep(seg: Segment): Promise<boolean> {
    const s = this.#s;
    if (!s.recycle || this.#spare !== null || s.closing !== null || s.poison !== null) return false;
    let size: number;
    try {
      size = (await s.fs.stat(seg.segPath))?.size ?? 0;
    } catch {
      return false;
    }
    if (size < s.segmentBytes / 2 || this.#spare !== null || s.closing !== null) return false;
    this.#spare = { path: seg.segPath, size };
    return true;
  }

  /**
   * Makes `seg` out of a spare: a second name (link, which fails rather than replace an existing
   * file, as O_EXCL does), the old name removed, a new header written and synced, the directory
   * synced. The old frames stay behind the header: they carry another segment's salt and indices,
   * so none of them validates here (as bytes a torn write leaves do not), and the first append
   * overwrites them. Answers false (the spare is dropped) when the spare cannot be linked, so that
   * the caller creates a fresh file instead.
   */
  async reuse(seg: Segment, spare: SpareFile): Promise<boolean> {
    try {
      await this.#s.fs.link(spare.path, seg.segPath);
    } catch {
      await this.#files.unlinkQuietly(spare.path);
      return false;
    }
    // The old name goes while the header is written: its removal need not be durable (a name no
    // manifest gives is garbage), only the new name must be, by the directory sync below.
    const oldNameGone = this.#files.unlinkQuietly(spare.path);
    try {
      await this.#files.startSegmentFile(seg, 'write', 0);
    } finally {
      await oldNameGone;
    }
    seg.allocated = Math.max(spare.size, HEADER_BYTES);
    seg.stale = spare.size > HEADER_BYTES;
    seg.offsets = new Uint32Array(64);
    seg.headerChecked = true;
    this.#s.stats.recycled++;
    return true;
  }

  /** Deletes the spare (the log closes). */
  async discard(): Promise<void> {
    if (this.#spare !== null) {
      await this.#files.unlinkQuietly(this.#spare.path);
      this.#spare = null;
    }
  }
}
