// Planted mistakes of the segmented log: test-only switches that make it commit a known durability
// mistake, so that the crash runner can prove it catches each class (docs/crash-testing.md, which
// lists every store's switches and the tests that require each to be caught).
//
// Owns: `SegmentMistakes` and `mistakesOf`. Never set outside tests; not exported from the
// package. Passed as `{ ...options, mistakes }` (not part of SegmentedLogOptions). The log holds
// one frozen object and consults it at three named points, each marked `mistakes.<name>`:
// - `ackBeforeSync`: `append` (log.ts) resolves when written, and the syncer (syncer.ts) starts
//   the covering sync a turn late, so that the acknowledgement really comes first;
// - `skipDirSync`: a new segment file (segment-files.ts) is not followed by a directory sync;
// - `unlinkBeforeCommit`: a structural change (structure.ts) unlinks the segments it drops before
//   the manifest that drops them is durable.

/** @internal */
export interface SegmentMistakes {
  /** `append` resolves once its records are written, before the sync that covers them. */
  readonly ackBeforeSync?: boolean;
  /** A new segment file's directory entry is not synced. */
  readonly skipDirSync?: boolean;
  /** Segments a change removes are unlinked before the manifest that removes them is durable. */
  readonly unlinkBeforeCommit?: boolean;
}

const NONE: SegmentMistakes = Object.freeze({});

/** The mistakes planted through `options` (none in every real use). */
export function mistakesOf(options: object): SegmentMistakes {
  const m = (options as { mistakes?: SegmentMistakes }).mistakes;
  return m === undefined ? NONE : Object.freeze({ ...m });
}
