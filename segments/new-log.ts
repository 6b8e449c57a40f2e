// The files of a new, empty owner-locked log, as bytes: for an owner that builds a whole
// directory tree under a temporary name and makes it durable at once (a Raft group's creation).
//
// Owns: `newLogFiles`. Guarantees: the files are exactly those the new-log path of
// `openSegmentedLog` (recovery.ts `startNewLog`) commits for an owner-locked log — one empty
// segment at `firstIndex` (a header of generation 1, zeros up to the first file size) and a
// manifest cell of `manifestSlotBytes` slots naming it (generation 1) — so the directory opens
// as that log would reopen (test/segments-new-log.test.ts compares the two). Nothing here writes
// or syncs: the caller writes the files, syncs them and the directory before anything names it.

import { encodeNewCellFile } from '../cells/index.js';
import { MANIFEST_NAME, SEGMENT_SUFFIX, encodeManifest, encodeSegmentHeader, newSegmentId, segmentBaseName } from './format.js';
import { firstSegmentFileBytes } from './structure.js';

/** One file of a new log: its name inside the log's directory, and its whole content. */
export interface NewLogFile {
  name: string;
  bytes: Uint8Array;
}

/**
 * The files of a new empty log whose first index is `firstIndex`, for a log opened with
 * `ownerLocked: true`, `segmentBytes` and `manifestSlotBytes`. The segment is listed first: a
 * caller that writes in order never leaves a manifest naming a missing file (not that it matters
 * under a temporary name).
 */
export function newLogFiles(firstIndex: number, segmentBytes: number, manifestSlotBytes: number): NewLogFile[] {
  if (!Number.isSafeInteger(firstIndex) || firstIndex < 0) throw new RangeError('firstIndex must be a safe non-negative integer');
  const id = newSegmentId();
  const segment = new Uint8Array(firstSegmentFileBytes(segmentBytes));
  segment.set(encodeSegmentHeader(firstIndex, id, 1), 0);
  const manifest = encodeManifest({ firstIndex, generation: 1, segments: [{ base: firstIndex, id }] });
  return [
    { name: segmentBaseName(firstIndex, id) + SEGMENT_SUFFIX, bytes: segment },
    { name: MANIFEST_NAME, bytes: encodeNewCellFile(manifestSlotBytes, manifest) },
  ];
}

