// Recovery: what open does before a log serves anything.
//
// Owns: `recoverLog` and its steps, one function each, in this order: list the directory and read
// the manifest; then either `startNewLog` (no manifest ever committed: remove leftovers, make the
// directory durable, commit the first manifest) or `adoptManifest` (the segments it names must
// exist; files it does not name are garbage, unless one holds records a later generation wrote —
// then the manifest went back: CORRUPT) and `recoverTail` (the last segment: its valid index is
// the durable floor — the file must still hold it, its last listed frame must check, or CORRUPT
// naming file and offset, nothing cut; then scan on from there, cut a torn tail, sync).
// Guarantees (docs/crash-safety.md, segmented log, "Open"): open costs O(segments) plus a scan
// of the last segment past its index; sealed segments are not read; after it the log holds a
// contiguous prefix of what was written (asserted), every frame of it durable, never less than
// its floor (asserted), nothing after it that could line up behind a new frame.

import * as path from 'node:path';
import { assert } from '../lib/assert.js';
import { corrupt, fromIo } from '../lib/errors.js';
import type { FileHandle } from '../lib/fs/types.js';
import {
  FRAME_HEADER_BYTES,
  HEADER_BYTES,
  INDEX_SUFFIX,
  MANIFEST_NAME,
  SEGMENT_SUFFIX,
  checkFrame,
  decodeManifest,
  decodeSegmentHeader,
  parseSegmentFileName,
  readU32,
  saltOf,
  type FrameCheck,
  type Manifest,
} from './format.js';
import { scanFrames } from './scan.js';
import { Segment } from './segment.js';
import { isZeroRange, type IndexTable, type SegmentFiles } from './segment-files.js';
import type { LogState } from './state.js';
import type { Structure } from './structure.js';
import type { Syncer } from './syncer.js';
import type { TableCache } from './table-cache.js';

/** Beyond this much space past the valid tail at open, cut without looking. */
const MAX_ZERO_CHECK = 8 << 20;

/** The rooms recovery works through. */
export interface RecoveryRooms {
  s: LogState;
  files: SegmentFiles;
  tables: TableCache;
  structure: Structure;
  syncer: Syncer;
}

/** Reads the manifest, removes garbage, validates the last segment and cuts its torn tail. */
export async function recoverLog(r: RecoveryRooms, firstIndex: number, createdDirs: readonly string[]): Promise<void> {
  const s = r.s;
  let names: string[];
  try {
    names = await s.fs.readdir(s.dir);
  } catch (err) {
    throw fromIo(err, 'list log directory', s.dir);
  }
  const value = await s.cell.read();
  const files = new Map<string, number>(); // segment/index file name -> base
  for (const n of names) {
    const p = parseSegmentFileName(n);
    if (p !== null) files.set(n, p.base);
  }
  if (value === null) {
    await startNewLog(r, files, firstIndex, createdDirs);
    return;
  }
  const manifestPath = path.join(s.dir, MANIFEST_NAME);
  const manifest = decodeManifest(value, manifestPath);
  await adoptManifest(r, manifest, files);
  const last = s.segments[s.segments.length - 1]!;
  s.active = last;
  await recoverTail(r, last);
  s.end = last.base + last.count;
  if (s.first > s.end) {
    throw corrupt(`log ${s.dir}: manifest's first index ${s.first} is past the end ${s.end}`, {
      file: manifestPath,
      offset: 8,
    });
  }
}

/**
 * A log whose manifest was never committed: any segment file is the leftover of a creation that
 * crashed before its first manifest, so it can hold no record (one that does means the manifest
 * was lost: CORRUPT). Removes them, makes the directory durable, and commits the first manifest,
 * naming one empty segment at `firstIndex`.
 */
async function startNewLog(r: RecoveryRooms, files: ReadonlyMap<string, number>, firstIndex: number, createdDirs: readonly string[]): Promise<void> {
  const s = r.s;
  for (const n of files.keys()) {
    const st = await r.files.stat(path.join(s.dir, n));
    if (n.endsWith(SEGMENT_SUFFIX) && st !== null) await checkCreationLeftover(r, path.join(s.dir, n), firstIndex);
    if (n.endsWith(SEGMENT_SUFFIX) && st !== null && st.size > HEADER_BYTES) {
      const all = await r.files.isZero(path.join(s.dir, n), HEADER_BYTES, st.size);
      if (!all) {
        throw corrupt(`log ${s.dir}: segment ${n} holds data but the log has no manifest`, {
          file: path.join(s.dir, n),
          offset: HEADER_BYTES,
        });
      }
    }
    await r.files.unlinkQuietly(path.join(s.dir, n));
  }
  // The log's directory (and any parent this open created) must be a durable entry before the
  // log acknowledges anything. The parent is synced even when the directory already existed: an
  // earlier open may have created it and crashed before syncing.
  const parents = new Set([path.dirname(path.resolve(s.dir)), ...createdDirs.map((d) => path.dirname(d))]);
  for (const p of parents) {
    try {
      await s.fs.syncDir(p);
    } catch (err) {
      throw fromIo(err, 'sync directory', p);
    }
  }
  const seg = await r.structure.createSegment(firstIndex);
  await r.structure.commit(firstIndex, [seg], path.join(s.dir, MANIFEST_NAME));
  s.segments = [seg];
  s.active = seg;
  s.physFirst = s.first = s.end = firstIndex;
  seg.offsets = new Uint32Array(64);
  seg.headerChecked = true;
  r.syncer.adoptActive(seg);
}

/**
 * A segment found in a log with no manifest must be what a creation at `firstIndex` makes before
 * its first manifest: a header of manifest generation 1 and base `firstIndex` (or a header a crash
 * tore). One of a later generation, or of another base, was named by a manifest that is now
 * missing — the log's first index (a `reset`, a `dropBefore`) would silently go back: CORRUPT.
 */
async function checkCreationLeftover(r: RecoveryRooms, file: string, firstIndex: number): Promise<void> {
  const header = await r.files.withReadHandle(file, async (h) => {
    const head = new Uint8Array(HEADER_BYTES);
    try {
      const n = await h.read(head, 0);
      return decodeSegmentHeader(head.subarray(0, n));
    } catch (err) {
      throw fromIo(err, 'read', file);
    }
  });
  if (header === null || (header.generation === 1 && header.base === firstIndex)) return;
  throw corrupt(`log ${r.s.dir}: segment ${path.basename(file)} (base ${header.base}, manifest generation ${header.generation}) was named by a manifest, but the log has no manifest`, {
    file,
    offset: header.generation === 1 ? 8 : 24,
  });
}

/**
 * Adopts the segments `manifest` names (each must exist) and removes every file it does not name.
 * The cell made the value it answered durable (it syncs its file and directory at open), so this
 * process never builds on a manifest that a power loss could take back.
 */
async function adoptManifest(r: RecoveryRooms, manifest: Manifest, files: ReadonlyMap<string, number>): Promise<void> {
  const s = r.s;
  s.generation = manifest.generation;
  const named = new Set<string>();
  s.segments = manifest.segments.map((x) => new Segment(s.dir, x.base, x.id));
  for (const seg of s.segments) {
    named.add(seg.name + SEGMENT_SUFFIX);
    named.add(seg.name + INDEX_SUFFIX);
    if (!files.has(seg.name + SEGMENT_SUFFIX)) {
      throw corrupt(`log ${s.dir}: segment ${seg.name}${SEGMENT_SUFFIX} named by the manifest is missing`, {
        file: seg.segPath,
        offset: 0,
      });
    }
  }
  // Files no manifest names are leftovers of an interrupted change, or segments a change removed
  // before the unlink was durable: garbage. One exception, which is corruption: a segment created
  // for a later manifest generation that holds a record. Records are appended to a segment only
  // after the manifest naming it is durable, so the manifest went back.
  for (const n of files.keys()) {
    if (named.has(n)) continue;
    const file = path.join(s.dir, n);
    if (n.endsWith(SEGMENT_SUFFIX) && (await holdsYoungerRecords(r, file, manifest.generation))) {
      throw corrupt(`log ${s.dir}: segment ${n} holds records but is named by no manifest up to generation ${manifest.generation}`, {
        file,
        offset: HEADER_BYTES,
      });
    }
    await r.files.unlinkQuietly(file);
  }
  for (let k = 0; k + 1 < s.segments.length; k++) {
    s.segments[k]!.count = s.segments[k + 1]!.base - s.segments[k]!.base;
  }
  s.physFirst = s.first = manifest.firstIndex;
}

/**
 * The last segment at open. Its index, when valid, is a floor: written at a clean close, a
 * checkpoint or a seal, only after a sync had made every frame it lists durable, so those frames
 * were acknowledged data, and a shortfall below it is damage, never a torn tail: CORRUPT naming
 * the segment file and the offset, with nothing cut (the evidence stays for `seglog verify`).
 * Above the floor (or with no valid index) the scan runs on to the first invalid frame; whatever
 * follows it is a torn tail, cut unless it is zeros; the prefix is synced.
 */
export async function recoverTail(r: RecoveryRooms, seg: Segment): Promise<void> {
  const s = r.s;
  const { handle, release } = await r.tables.acquire(seg);
  try {
    const size = await handle.size().catch((err: unknown) => {
      throw fromIo(err, 'stat segment', seg.segPath);
    });
    let start = HEADER_BYTES;
    seg.offsets = new Uint32Array(64);
    seg.tableCount = 0;
    seg.tableEnd = HEADER_BYTES;
    const idx = await durableFloor(r, handle, seg, size);
    if (idx !== null && idx.count > 0) {
      seg.offsets = idx.offsets;
      seg.tableCount = idx.count;
      seg.tableEnd = start = idx.endOffset;
    }
    const result = await scanFrames(handle, size, seg.salt, start, seg.base + seg.tableCount, s.maxRecordBytes, Number.MAX_SAFE_INTEGER, (off) =>
      seg.push(off),
    );
    seg.tableEnd = result.endOffset;
    seg.count = seg.tableCount;
    seg.allocated = size;
    s.stats.recoveryScanBytes = result.endOffset - start;
    assert(seg.tableEnd <= size && (seg.count === 0 || seg.frameStart(0) === HEADER_BYTES), 'the recovered frames run from the header to the valid end');
    assert(idx === null || seg.tableEnd >= idx.endOffset, 'recovery never cuts below the durable floor');
    const cut = await cutTornTail(handle, seg, result.endOffset, size, result.restIsZero);
    // The index on disk is the table as it stands, and durable (the owner says every file is):
    // a close that changes nothing leaves it as it is.
    seg.indexDurable = s.knownDurable && !cut && idx !== null && idx.count > 0 && seg.count === idx.count && seg.tableEnd === idx.endOffset;
    if (seg.indexDurable) seg.indexNamed = true;
    // The valid prefix may be in the page cache only (the last process was killed before its
    // sync). The next roll would seal it, so it is made durable now, with the cut — unless the
    // owner knows the file is durable and nothing was cut (LogConfig.knownDurable).
    if (cut || !s.knownDurable) {
      try {
        await handle.datasync();
      } catch (err) {
        throw fromIo(err, 'sync', seg.segPath);
      }
    }
    r.syncer.adoptActive(seg);
  } finally {
    release();
  }
}

/**
 * The last segment's durable floor: the frame table its valid index lists, once the segment file
 * is checked to still hold it (long enough, its last listed frame valid); null when there is no
 * valid index (never written, lost or torn by a crash, or damaged: derived data, the scan starts
 * at the header). CORRUPT when a valid index lists what the file no longer holds.
 */
async function durableFloor(r: RecoveryRooms, handle: FileHandle, seg: Segment, size: number): Promise<IndexTable | null> {
  // An index longer than the file could need is not read whole; its header and CRC still tell.
  const { table: idx, claim } = await r.files.readIndexOrClaim(seg, size);
  if (claim === null || claim.count === 0) return idx;
  const last = seg.base + claim.count - 1;
  if (claim.endOffset > size) {
    throw corrupt(
      `segment ${seg.segPath}: ends at ${size} bytes, but its index lists ${claim.count} records (to ${last}) ending at ${claim.endOffset}, all durable when it was written: acknowledged records are lost`,
      idx === null ? { file: seg.segPath, offset: size } : { file: seg.segPath, offset: size, index: seg.base + firstFrameEndingPast(idx, size) },
    );
  }
  assert(idx !== null, 'an index that fits its segment file was read whole');
  const lastStart = idx.offsets[idx.count - 1]!;
  const check = await frameCheck(r, handle, seg, lastStart, idx.endOffset, last);
  if (check !== 'ok') {
    throw corrupt(
      `segment ${seg.segPath}: record ${last} at offset ${lastStart} fails its ${check} check, but the index lists it as durable: an acknowledged record is damaged`,
      { file: seg.segPath, offset: lastStart, index: last },
    );
  }
  return idx;
}

/** The first frame of `idx` that does not end within `size` bytes. */
function firstFrameEndingPast(idx: IndexTable, size: number): number {
  let k = 0;
  while (k < idx.count && (k + 1 < idx.count ? idx.offsets[k + 1]! : idx.endOffset) <= size) k++;
  return k;
}

/**
 * Whatever follows the valid prefix is a torn tail: never acknowledged. Zeros (preallocated
 * space) are harmless and kept; anything else is cut before any new append, so that stale frames
 * can never line up behind a new one. `restIsZero` is the scan's answer for the tail when its last
 * window held it (null: read it here). Answers whether it cut.
 */
async function cutTornTail(handle: FileHandle, seg: Segment, validEnd: number, size: number, restIsZero: boolean | null): Promise<boolean> {
  if (size <= validEnd) return false;
  const zero = size - validEnd <= MAX_ZERO_CHECK && (restIsZero ?? (await isZeroRange(handle, validEnd, size)));
  if (zero) return false;
  try {
    await handle.truncate(validEnd);
  } catch (err) {
    throw fromIo(err, 'cut torn tail of', seg.segPath);
  }
  seg.allocated = validEnd;
  return true;
}

/** True when `file` is a segment created after manifest generation `generation` with a valid first record. */
async function holdsYoungerRecords(r: RecoveryRooms, file: string, generation: number): Promise<boolean> {
  const maxRecordBytes = r.s.maxRecordBytes;
  return r.files.withReadHandle(file, async (h) => {
    try {
      const size = await h.size();
      const head = new Uint8Array(HEADER_BYTES + FRAME_HEADER_BYTES);
      const n = await h.read(head, 0);
      const header = decodeSegmentHeader(head.subarray(0, n));
      if (header === null || header.generation <= generation || n < head.length) return false;
      const len = readU32(head, HEADER_BYTES + 4);
      if (len > maxRecordBytes || HEADER_BYTES + FRAME_HEADER_BYTES + len > size) return false;
      const frame = new Uint8Array(FRAME_HEADER_BYTES + len);
      await h.read(frame, HEADER_BYTES);
      return checkFrame(frame, 0, header.base, saltOf(header.id), maxRecordBytes) === 'ok';
    } catch (err) {
      throw fromIo(err, 'read', file);
    }
  });
}

/** How the frame at [start, end) of `seg` checks as record `index` ('ok', or why not). */
async function frameCheck(r: RecoveryRooms, handle: FileHandle, seg: Segment, start: number, end: number, index: number): Promise<FrameCheck> {
  const maxRecordBytes = r.s.maxRecordBytes;
  if (end - start < FRAME_HEADER_BYTES) return 'short';
  if (end - start - FRAME_HEADER_BYTES > maxRecordBytes) return 'length';
  const b = new Uint8Array(end - start);
  try {
    if ((await handle.read(b, start)) !== b.length) return 'short';
  } catch (err) {
    throw fromIo(err, 'read segment', seg.segPath);
  }
  const check = checkFrame(b, 0, index, seg.salt, maxRecordBytes);
  // A frame whose length field disagrees with the index's table is damaged too.
  return check === 'ok' && readU32(b, 4) !== b.length - FRAME_HEADER_BYTES ? 'length' : check;
}
