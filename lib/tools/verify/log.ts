// Offline check of a segmented log directory (segments/, docs/format.md (segmented log)).
//
// Owns: `checkSegmentedLog`, `isLogDirectory`. Uses the log's own decoders and frame scanner
// (segments/format.ts, segments/scan.ts) and never opens the log (its open repairs). Covers every
// byte of every segment file: the header (CRC; base, id and generation against the manifest), each
// live frame (length, index, CRC seeded with the segment's salt), then whatever follows the live
// frames — dead frames a truncation left (never read, but they must still validate) and
// zero-filled space (it must be zeros). Index files are checked against their CRC and against the frames. The manifest is a
// cell (./cell.ts) whose live value must decode and agree with the files: every named segment
// present, unnamed segments only as garbage the next open deletes (or CORRUPT when a younger one
// holds records: the manifest went back).
// Memory: one window of at most 1 MiB (or one frame) per read, plus 4 bytes per record of the
// segment being checked.

import * as path from 'node:path';
import type { FileHandle } from '../../fs/types.js';
import {
  FRAME_HEADER_BYTES,
  HEADER_BYTES,
  INDEX_HEADER_BYTES,
  INDEX_SUFFIX,
  LOCK_NAME,
  MANIFEST_NAME,
  SEGMENT_SUFFIX,
  checkFrame,
  checkSegmentHeader,
  decodeIndex,
  decodeManifest,
  decodeSegmentHeader,
  idHex,
  parseSegmentFileName,
  saltOf,
  segmentBaseName,
  type Manifest,
} from '../../../segments/format.js';
import { scanFrames } from '../../../segments/scan.js';
import { indexClaimOf, type IndexClaim } from '../../../segments/segment-files.js';
import { cellTempPath } from '../../../cells/index.js';
import { checkCellFile } from './cell.js';
import { VerifyError, messageOf, preview, type VerifyContext } from './context.js';

/** The most a frame's length field may claim (segments/options.ts MAX_RECORD_LIMIT). */
const MAX_RECORD_BYTES = 1024 * 1024 * 1024;
const WINDOW = 1 << 20;

export interface LogCheckOptions {
  /** What the log is, in messages (default 'log'). */
  role?: string;
  /**
   * Called with each live record in index order (reading them costs a pass over the data): for
   * stores that decode their records. Throwing reports an error at that record.
   */
  onRecord?: (index: number, record: Uint8Array) => void | Promise<void>;
}

export interface LogResult {
  readonly firstIndex: number;
  readonly endIndex: number;
}

/** True when `names` (a directory's entries) look like a segmented log's. */
export function isLogDirectory(names: readonly string[]): boolean {
  return names.includes(MANIFEST_NAME) || names.some((n) => parseSegmentFileName(n) !== null);
}

interface SegmentReport {
  name: string;
  base: number;
  records: number;
  bytes: number;
  state: 'sealed' | 'active';
  index: string;
  deadFrames: number;
  zeroBytes: number;
}

/** The header of a segment file, or null when it is short or torn. */
async function readSegmentHeader(ctx: VerifyContext, file: string): Promise<ReturnType<typeof decodeSegmentHeader>> {
  const h = await ctx.fs.open(file, 'read');
  try {
    const head = new Uint8Array(HEADER_BYTES);
    const n = await h.read(head, 0);
    return decodeSegmentHeader(head.subarray(0, n));
  } finally {
    await h.close().catch(() => undefined);
  }
}

/** Checks the log in `dir`; `names` are its entries. Answers null when it cannot tell first/end. */
export async function checkSegmentedLog(ctx: VerifyContext, dir: string, names: readonly string[], options: LogCheckOptions = {}): Promise<LogResult | null> {
  const role = options.role ?? 'log';
  ctx.counts.logs++;
  const segFiles = new Map<string, { base: number; idHex: string; kind: 'seg' | 'idx' }>();
  for (const n of names) {
    const p = parseSegmentFileName(n);
    if (p !== null) segFiles.set(n, p);
  }
  if (names.includes(LOCK_NAME)) await checkEmpty(ctx, path.join(dir, LOCK_NAME), 'LOCK');
  const manifestPath = path.join(dir, MANIFEST_NAME);
  if (names.includes(path.basename(cellTempPath(manifestPath)))) {
    const p = cellTempPath(manifestPath);
    ctx.warning(p, `${role}: leftover of an interrupted first manifest write (never read; a new log's first write replaces it)`);
    const st = await ctx.fs.stat(p);
    ctx.sawFile(st?.size ?? 0);
  }
  for (const n of names) {
    if (n === LOCK_NAME || n === MANIFEST_NAME || n === path.basename(cellTempPath(manifestPath)) || segFiles.has(n)) continue;
    const st = await ctx.fs.stat(path.join(dir, n));
    if (st !== null && !st.isDirectory) ctx.unknown.push(path.join(dir, n));
  }

  if (!names.includes(MANIFEST_NAME)) {
    // A log that never committed: its segment files are leftovers of a creation that crashed.
    for (const [n, p] of segFiles) {
      const file = path.join(dir, n);
      const st = await ctx.fs.stat(file);
      ctx.sawFile(st?.size ?? 0);
      const header = p.kind === 'seg' && st !== null ? await readSegmentHeader(ctx, file) : null;
      if (p.kind === 'seg' && st !== null && st.size > HEADER_BYTES && !(await zerosFrom(ctx, file, HEADER_BYTES, st.size)).allZero) {
        ctx.error(file, `${role}: a segment holds data but the log has no MANIFEST (CORRUPT at open)`, HEADER_BYTES);
      } else if (header !== null && header.generation > 1) {
        // A creation's leftover is of manifest generation 1: a later one was named by a manifest.
        ctx.error(file, `${role}: a segment of manifest generation ${header.generation} but the log has no MANIFEST (CORRUPT at open)`, 24);
      } else {
        ctx.warning(file, `${role}: leftover of a log creation that crashed before its first manifest (deleted at the next open)`);
      }
    }
    ctx.describe({ kind: 'log', path: dir, role, state: 'no manifest' });
    return null;
  }

  // A Raft group's manifests start small and grow (segments/manifest.ts): the slot size the file's length names.
  const cell = await checkCellFile(ctx, manifestPath, undefined, `${role} MANIFEST`);
  if (cell.value === null) return null;
  let manifest: Manifest;
  try {
    manifest = decodeManifest(cell.value, manifestPath);
  } catch (err) {
    ctx.error(manifestPath, `${role}: ${messageOf(err)}`);
    return null;
  }

  const named = new Set<string>();
  for (const s of manifest.segments) {
    const base = segmentBaseName(s.base, s.id);
    named.add(base + SEGMENT_SUFFIX);
    named.add(base + INDEX_SUFFIX);
  }
  // Unnamed files: garbage the next open deletes, except a younger segment holding records.
  for (const [n, p] of segFiles) {
    if (named.has(n)) continue;
    const file = path.join(dir, n);
    const st = await ctx.fs.stat(file);
    ctx.sawFile(st?.size ?? 0);
    if (p.kind === 'seg' && st !== null && (await holdsYoungerRecords(ctx, file, st.size, manifest.generation))) {
      ctx.error(file, `${role}: segment named by no manifest up to generation ${manifest.generation} holds records: the manifest went back (CORRUPT at open)`, HEADER_BYTES);
    } else {
      ctx.warning(file, `${role}: file named by no manifest: a leftover of an interrupted change (deleted at the next open)`);
    }
  }

  const reports: SegmentReport[] = [];
  let end = manifest.firstIndex;
  const previewRecords: string[] = [];
  for (let k = 0; k < manifest.segments.length; k++) {
    const s = manifest.segments[k]!;
    const next = manifest.segments[k + 1];
    const last = next === undefined;
    const name = segmentBaseName(s.base, s.id);
    const segPath = path.join(dir, name + SEGMENT_SUFFIX);
    ctx.counts.segments++;
    if (!segFiles.has(name + SEGMENT_SUFFIX)) {
      ctx.error(segPath, `${role}: segment named by the manifest is missing (CORRUPT at open or at the first read)`);
      if (last) return null;
      continue;
    }
    const liveCount = last ? null : next.base - s.base;
    const report = await checkSegment(ctx, {
      role,
      segPath,
      idxPath: path.join(dir, name + INDEX_SUFFIX),
      hasIndex: segFiles.has(name + INDEX_SUFFIX),
      base: s.base,
      id: s.id,
      generation: manifest.generation,
      liveCount,
      firstIndex: manifest.firstIndex,
      onRecord: options.onRecord,
      preview: ctx.recordPreview > previewRecords.length ? (index, record) => {
        if (previewRecords.length < ctx.recordPreview) previewRecords.push(`${index}: ${preview(record)}`);
      } : undefined,
    });
    if (report === null) {
      if (last) return null;
      continue;
    }
    reports.push({ name, ...report });
    if (last) end = s.base + report.records;
  }
  if (manifest.firstIndex > end) {
    ctx.error(manifestPath, `${role}: the manifest's first index ${manifest.firstIndex} is past the end ${end} (CORRUPT at open)`, 8);
  }
  ctx.describe({
    kind: 'log',
    path: dir,
    role,
    firstIndex: manifest.firstIndex,
    endIndex: end,
    generation: manifest.generation,
    segments: reports,
    ...(ctx.recordPreview > 0 ? { records: previewRecords } : {}),
  });
  return { firstIndex: manifest.firstIndex, endIndex: end };
}

interface SegmentSpec {
  role: string;
  segPath: string;
  idxPath: string;
  hasIndex: boolean;
  base: number;
  id: Uint8Array;
  generation: number;
  /** Live records of a sealed segment; null for the last one (its valid prefix is live). */
  liveCount: number | null;
  firstIndex: number;
  onRecord: LogCheckOptions['onRecord'];
  preview: ((index: number, record: Uint8Array) => void) | undefined;
}

async function checkSegment(ctx: VerifyContext, spec: SegmentSpec): Promise<Omit<SegmentReport, 'name'> | null> {
  const { role, segPath, base } = spec;
  let handle: FileHandle;
  try {
    handle = await ctx.fs.open(segPath, 'read');
  } catch (err) {
    ctx.error(segPath, `${role}: cannot open segment: ${messageOf(err)}`);
    return null;
  }
  try {
    const size = await handle.size();
    ctx.sawFile(size);
    const head = new Uint8Array(HEADER_BYTES);
    const n = await handle.read(head, 0);
    try {
      checkSegmentHeader(head.subarray(0, n), segPath, base, spec.id, spec.generation);
    } catch (err) {
      ctx.error(segPath, `${role}: ${messageOf(err)}`, 0);
      return null;
    }
    const salt = saltOf(spec.id);
    const offsets: number[] = [];
    const want = spec.liveCount ?? Number.MAX_SAFE_INTEGER;
    const live = await scanFrames(handle, size, salt, HEADER_BYTES, base, MAX_RECORD_BYTES, want, (off) => offsets.push(off));
    const sealed = spec.liveCount !== null;
    if (sealed && live.count < want) {
      ctx.error(
        segPath,
        `${role}: record ${base + live.count} of a sealed segment (which holds ${want}) at offset ${live.endOffset} fails its ${live.stop} check (a read of it fails with CORRUPT)`,
        live.endOffset,
      );
    }
    let deadFrames = 0;
    let tailFrom = live.endOffset;
    if (sealed && live.count === want) {
      // Frames past a sealed segment's live count: left there by a truncation (the log never cuts
      // a sealed file: a read may be using it). Never read, but still whole frames, each under its
      // CRC; after them nothing but zeros. So a flipped byte there is seen too.
      const dead = await scanFrames(handle, size, salt, live.endOffset, base + live.count, MAX_RECORD_BYTES, Number.MAX_SAFE_INTEGER, (off) => offsets.push(off));
      deadFrames = dead.count;
      tailFrom = dead.endOffset;
    }
    const recordCount = sealed ? Math.min(live.count, want) : live.count;
    const ends = (k: number): number => (k + 1 < offsets.length ? offsets[k + 1]! : tailFrom);

    // Whatever follows the frames must be zero-filled space.
    let zeroBytes = 0;
    if (tailFrom < size) {
      const z = await zerosFrom(ctx, segPath, tailFrom, size, handle);
      if (z.allZero) zeroBytes = size - tailFrom;
      else if (sealed) {
        ctx.warning(segPath, `${role}: ${size - tailFrom} byte(s) past the last frame of a sealed segment are not zero (never read: damage or a leftover)`, z.firstNonZero);
      } else {
        ctx.warning(
          segPath,
          `${role}: ${size - tailFrom} byte(s) after the last valid record (at ${tailFrom}: ${live.stop}) are not zero — a tail torn by a crash, never acknowledged, or damage; the next open cuts them`,
          z.firstNonZero,
        );
      }
    }

    // The index file: derived data (a missing or bad one is rebuilt), but one that lists frames
    // the scan rejects means records that were durable are damaged.
    let indexState = 'none';
    if (spec.hasIndex) {
      ctx.counts.indexes++;
      const bound = INDEX_HEADER_BYTES + 4 * Math.floor(Math.max(0, size - HEADER_BYTES) / FRAME_HEADER_BYTES);
      const st = await ctx.fs.stat(spec.idxPath);
      const idxSize = st?.size ?? 0;
      if (idxSize > bound) {
        ctx.sawFile(idxSize);
        // Not read whole (a length the segment cannot back); its header and CRC still tell whether
        // it is a valid index, which then lists frames the segment file no longer holds.
        const claim = sealed ? null : await indexClaim(ctx, spec, idxSize);
        if (claim !== null) {
          ctx.error(
            segPath,
            `${role}: the segment ends at ${size} bytes, but its index lists ${claim.count} records ending at ${claim.endOffset}, durable when it was written: acknowledged records are lost (CORRUPT at open)`,
            size,
          );
          indexState = `${claim.count} records (past the end of the segment)`;
        } else {
          ctx.warning(spec.idxPath, `${role}: index of ${idxSize} bytes is longer than its segment could need (ignored, rebuilt by a scan)`);
          indexState = 'invalid';
        }
      } else {
        const bytes = await ctx.readBounded(spec.idxPath, bound, 'index');
        if (bytes !== null) {
          ctx.sawFile(bytes.length);
          const idx = decodeIndex(bytes, base, spec.id);
          if (idx === null) {
            ctx.warning(spec.idxPath, `${role}: index file fails its checks (torn by a crash, stale, or damaged): the segment is rescanned when read`);
            indexState = 'invalid';
          } else {
            indexState = `${idx.count} records`;
            if (sealed) {
              // The log uses a sealed segment's index only when it lists every live record and
              // ends inside the file; otherwise (a truncation cut the file under it) it is stale
              // and rebuilt by a scan: a normal state, not damage.
              const usable = idx.count >= recordCount && idx.endOffset <= size;
              if (!usable) indexState = `${idx.count} records (stale: rebuilt by a scan on first read)`;
              for (let k = 0; usable && k < recordCount; k++) {
                if (idx.offsets[k] !== offsets[k]) {
                  ctx.error(spec.idxPath, `${role}: index lists record ${base + k} at offset ${idx.offsets[k]}, the segment has it at ${offsets[k]}`, INDEX_HEADER_BYTES + 4 * k);
                  break;
                }
              }
            } else {
              // The last segment's index claims only records that were durable when it was written:
              // the log's floor. A shortfall below it is damage, which the open refuses (the file
              // cut short, or the last listed record failing) or a read meets (a record before it).
              if (idx.endOffset > size) {
                ctx.error(
                  segPath,
                  `${role}: the segment ends at ${size} bytes, but its index lists ${idx.count} records ending at ${idx.endOffset}, durable when it was written: acknowledged records are lost (CORRUPT at open)`,
                  size,
                );
              } else if (idx.count > live.count) {
                const when = live.count === idx.count - 1 ? 'CORRUPT at open' : 'CORRUPT when read';
                ctx.error(
                  segPath,
                  `${role}: record ${base + live.count} at offset ${live.endOffset} fails its ${live.stop} check, but the index lists ${idx.count} records (durable when it was written): acknowledged records are damaged (${when})`,
                  live.endOffset,
                );
              }
              for (let k = 0; k < Math.min(idx.count, live.count); k++) {
                if (idx.offsets[k] !== offsets[k]) {
                  ctx.error(spec.idxPath, `${role}: index lists record ${base + k} at offset ${idx.offsets[k]}, the segment has it at ${offsets[k]}`, INDEX_HEADER_BYTES + 4 * k);
                  break;
                }
              }
            }
          }
        }
      }
    } else if (sealed && recordCount > 0) {
      ctx.warning(spec.idxPath, `${role}: sealed segment has no index file (rebuilt by a scan on its first read)`);
      indexState = 'missing';
    }

    ctx.counts.records += recordCount;
    if (spec.onRecord !== undefined || spec.preview !== undefined) {
      await forEachRecord(ctx, handle, spec, offsets, recordCount, ends);
    }
    return { base, records: recordCount, bytes: size, state: sealed ? 'sealed' : 'active', index: indexState, deadFrames, zeroBytes };
  } catch (err) {
    if (err instanceof VerifyError) throw err;
    ctx.error(segPath, `${role}: cannot read segment: ${messageOf(err)}`);
    return null;
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** What an index too long to read whole claims (read as the log's open reads it); null unless valid. */
async function indexClaim(ctx: VerifyContext, spec: SegmentSpec, size: number): Promise<IndexClaim | null> {
  const h = await ctx.fs.open(spec.idxPath, 'read');
  try {
    return await indexClaimOf(h, size, spec.base, spec.id);
  } finally {
    await h.close().catch(() => undefined);
  }
}

async function forEachRecord(
  ctx: VerifyContext,
  handle: FileHandle,
  spec: SegmentSpec,
  offsets: readonly number[],
  count: number,
  ends: (k: number) => number,
): Promise<void> {
  for (let k = Math.max(0, spec.firstIndex - spec.base); k < count; k++) {
    const start = offsets[k]!;
    const frame = new Uint8Array(ends(k) - start);
    await handle.read(frame, start);
    const record = frame.subarray(FRAME_HEADER_BYTES);
    spec.preview?.(spec.base + k, record);
    if (spec.onRecord !== undefined) {
      try {
        await spec.onRecord(spec.base + k, record);
      } catch (err) {
        ctx.error(spec.segPath, `${spec.role}: record ${spec.base + k}: ${messageOf(err)}`, start + FRAME_HEADER_BYTES);
      }
    }
  }
}

/** Whether bytes [from, to) of the file are all zero, and where the first one that is not sits. */
async function zerosFrom(ctx: VerifyContext, file: string, from: number, to: number, open?: FileHandle): Promise<{ allZero: boolean; firstNonZero: number }> {
  const h = open ?? (await ctx.fs.open(file, 'read'));
  try {
    const buf = new Uint8Array(Math.min(WINDOW, Math.max(1, to - from)));
    for (let at = from; at < to; at += buf.length) {
      const view = buf.subarray(0, Math.min(buf.length, to - at));
      const got = await h.read(view, at);
      for (let i = 0; i < got; i++) if (view[i] !== 0) return { allZero: false, firstNonZero: at + i };
      if (got < view.length) break;
    }
    return { allZero: true, firstNonZero: -1 };
  } finally {
    if (open === undefined) await h.close().catch(() => undefined);
  }
}

/** Mirrors the log's open: a segment younger than the manifest whose first record validates. */
async function holdsYoungerRecords(ctx: VerifyContext, file: string, size: number, generation: number): Promise<boolean> {
  const h = await ctx.fs.open(file, 'read');
  try {
    const head = new Uint8Array(HEADER_BYTES + FRAME_HEADER_BYTES);
    const n = await h.read(head, 0);
    const header = decodeSegmentHeader(head.subarray(0, n));
    if (header === null || header.generation <= generation || n < head.length) return false;
    const len = new DataView(head.buffer).getUint32(HEADER_BYTES + 4, true);
    if (len > MAX_RECORD_BYTES || HEADER_BYTES + FRAME_HEADER_BYTES + len > size) return false;
    const frame = new Uint8Array(FRAME_HEADER_BYTES + len);
    await h.read(frame, HEADER_BYTES);
    return checkFrame(frame, 0, header.base, saltOf(header.id), MAX_RECORD_BYTES) === 'ok';
  } finally {
    await h.close().catch(() => undefined);
  }
}

async function checkEmpty(ctx: VerifyContext, file: string, what: string): Promise<void> {
  const st = await ctx.fs.stat(file);
  ctx.sawFile(st?.size ?? 0);
  if (st !== null && st.size > 0) ctx.warning(file, `${what} holds ${st.size} byte(s); it never holds data (only its lock matters)`);
}

export { checkEmpty, idHex };
