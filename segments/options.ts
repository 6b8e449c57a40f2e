// The options of a segmented log: their public shape, their limits, and their checking.
//
// Owns: `SegmentedLogOptions`, the test-only `SegmentTuning`, the defaults and bounds of every
// option, and `parseLogOptions`, which turns what a caller passed into a `LogConfig` or rejects
// it with INVALID before anything touches the disk.

import { invalid } from '../lib/errors.js';
import { isIndex } from '../lib/assert.js';
import type { FileSystem } from '../lib/fs/types.js';
import { realFs } from '../lib/fs/real.js';
import { FdCache, defaultFdCache } from './fd-cache.js';
import { mistakesOf, type SegmentMistakes } from './mistakes.js';
import { parseSyncPolicy, type SyncPolicy } from './sync-policy.js';
import { MANIFEST_SLOT_BYTES } from './manifest.js';

export interface SegmentedLogOptions {
  /** The file-system layer (default: the real one). */
  fs?: FileSystem;
  /** A segment rolls when the next batch would take it past this size (default 64 MiB). */
  segmentBytes?: number;
  /** Default 'always'. */
  sync?: SyncPolicy;
  /** Shared cache of open files (default: one process-wide cache of 512). */
  fdCache?: FdCache;
  /** Index of the first record of a NEW log (default 0); ignored when the log exists. */
  firstIndex?: number;
  /** Largest record accepted, and largest length field trusted when reading (default 64 MiB). */
  maxRecordBytes?: number;
  /**
   * The sync of a lone append (the only one the log has in hand, while no other log or store of
   * this thread has work queued) waits on the calling thread, blocking the event loop for the
   * sync, while this log's recent syncs took less than this on average (ms; default 1; 0: every
   * sync and every large write waits on libuv's pool). So does the write of a lone group of
   * appends (nothing queued behind it) of at most 4 MiB, while this log's recent group writes
   * took less than this on average. It saves a lone appender the two thread hand-offs of each
   * pool call; what is durable, and when an append resolves, are the same either way
   * (docs/crash-safety.md, segmented log).
   */
  inlineSyncBelowMs?: number;
}

/**
 * Test-only tuning, so that tests can compare a behaviour with and without an optimization.
 * Never set outside tests; not exported from the package. Passed as `{ ...options, tuning }` (not
 * part of SegmentedLogOptions).
 * @internal
 */
export interface SegmentTuning {
  /** Keep the file of a dropped segment to reuse as the next new segment (default true). */
  recycle?: boolean;
}

/**
 * For an owner that opens the log under a lock of its own which excludes every other opener of
 * this directory, in this process and every other (a Raft node's LOCK, with its registry of open
 * groups): the log then takes no LOCK file of its own and keeps no descriptor on its manifest.
 * Not exported from the package. Passed as `{ ...options, ownerLocked: true }`.
 * @internal
 */
export interface OwnerLocked {
  ownerLocked?: boolean;
  /**
   * The owner knows every file of the log is durable (the mark of its own clean close, taken after
   * every sync of that close, and nothing written since): open skips the syncs of what it read
   * (the manifest cell and its directory, the last segment's valid prefix). A torn tail it finds
   * is still cut and synced.
   */
  knownDurable?: boolean;
  /**
   * The slot size a new log's manifest starts with (512 … 8192, a power of two times 512; default
   * 8192): it grows as the log gains segments (manifest.ts). Only with `ownerLocked`.
   */
  manifestSlotBytes?: number;
}

const MiB = 1 << 20;
/** The first slot sizes a growing manifest may start with (each doubling reaches MANIFEST_SLOT_BYTES). */
const MANIFEST_FIRST_SLOTS: readonly number[] = [512, 1024, 2048, 4096, MANIFEST_SLOT_BYTES];
export const DEFAULT_SEGMENT_BYTES = 64 * MiB;
export const DEFAULT_MAX_RECORD_BYTES = 64 * MiB;
const MIN_SEGMENT_BYTES = 64;
const MAX_SEGMENT_BYTES = 1024 * MiB;
const MAX_RECORD_LIMIT = 1024 * MiB;

/** An open log's settings, checked. */
export interface LogConfig {
  readonly fs: FileSystem;
  readonly fdCache: FdCache;
  readonly segmentBytes: number;
  readonly maxRecordBytes: number;
  readonly firstIndex: number;
  readonly policy: SyncPolicy;
  readonly inlineBelowMs: number;
  readonly recycle: boolean;
  /** The owner's lock excludes every other opener (OwnerLocked): no LOCK file, no manifest descriptor. */
  readonly ownerLocked: boolean;
  /** Every file of the log is durable already (OwnerLocked.knownDurable): open syncs nothing it read. */
  readonly knownDurable: boolean;
  /** The first slot size of a new owned log's manifest (OwnerLocked.manifestSlotBytes). */
  readonly manifestSlotBytes: number;
  readonly mistakes: SegmentMistakes;
}

/** Checks `options` (INVALID on the first bad one) and fills in the defaults. */
export function parseLogOptions(dir: string, options: SegmentedLogOptions): LogConfig {
  if (typeof dir !== 'string' || dir.length === 0) throw invalid('a log needs a directory path');
  const segmentBytes = options.segmentBytes ?? DEFAULT_SEGMENT_BYTES;
  if (!isIndex(segmentBytes) || segmentBytes < MIN_SEGMENT_BYTES || segmentBytes > MAX_SEGMENT_BYTES) {
    throw invalid(`segmentBytes must be an integer in [${MIN_SEGMENT_BYTES}, ${MAX_SEGMENT_BYTES}]`);
  }
  const maxRecordBytes = options.maxRecordBytes ?? DEFAULT_MAX_RECORD_BYTES;
  if (!isIndex(maxRecordBytes) || maxRecordBytes > MAX_RECORD_LIMIT) {
    throw invalid(`maxRecordBytes must be an integer in [0, ${MAX_RECORD_LIMIT}]`);
  }
  const firstIndex = options.firstIndex ?? 0;
  if (!isIndex(firstIndex)) throw invalid('firstIndex must be a safe non-negative integer');
  const policy = parseSyncPolicy(options.sync);
  const inlineBelowMs = options.inlineSyncBelowMs ?? 1;
  if (typeof inlineBelowMs !== 'number' || !Number.isFinite(inlineBelowMs) || inlineBelowMs < 0) {
    throw invalid('inlineSyncBelowMs must be a non-negative number');
  }
  const fs = options.fs ?? realFs;
  const fdCache = options.fdCache ?? defaultFdCache;
  if (!(fdCache instanceof FdCache)) throw invalid('fdCache must be an FdCache');
  const tuning = (options as { tuning?: SegmentTuning }).tuning ?? {};
  const recycle = tuning.recycle === undefined ? true : tuning.recycle === true;
  const ownerLocked = (options as OwnerLocked).ownerLocked === true;
  const knownDurable = ownerLocked && (options as OwnerLocked).knownDurable === true;
  const manifestSlotBytes = ownerLocked ? ((options as OwnerLocked).manifestSlotBytes ?? MANIFEST_SLOT_BYTES) : MANIFEST_SLOT_BYTES;
  if (!MANIFEST_FIRST_SLOTS.includes(manifestSlotBytes)) throw invalid(`manifestSlotBytes must be one of ${MANIFEST_FIRST_SLOTS.join(', ')}`);
  return { fs, fdCache, segmentBytes, maxRecordBytes, firstIndex, policy, inlineBelowMs, recycle, ownerLocked, knownDurable, manifestSlotBytes, mistakes: mistakesOf(options) };
}
