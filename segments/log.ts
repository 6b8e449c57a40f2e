// The segmented log: an append-only sequence of records addressed by index, stored as a directory
// of segment files under a manifest.
//
// Owns: `openSegmentedLog` and the log it returns. Guarantees (argued step by step in
// docs/crash-safety.md (segmented log); the bytes are in docs/format.md (segmented log)):
// - Under the default sync policy an append resolves only after the fdatasync that covers it; a
//   crash at any moment reopens to a contiguous prefix of the records written, holding every
//   acknowledged one, and no torn, stale or foreign record is ever served (each frame carries its
//   index and a CRC seeded with its segment's random salt, checked on every read).
// - The manifest (a two-slot cell) is the single commit point of every structural change (roll,
//   truncateAfter, dropBefore, reset): a crash leaves the old structure or the new one.
// - Operations take effect in call order. Records are readable as soon as `stage` returns.
// - A failed write makes the failed records (and every one staged after them) vanish and leaves
//   no hole; a failed sync poisons the log (POISONED) until it is reopened.
// - Open costs O(segments) plus a scan of the last segment's tail past its index: sealed segments
//   are not read until a read needs them.

import { lockDirectory } from '../lib/fs/lock.js';
import * as path from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { SeglogError, closed, corrupt, fromIo, invalid, poisoned } from '../lib/errors.js';
import { assert, isIndex } from '../lib/assert.js';
import type { FileHandle, FileSystem } from '../lib/fs/types.js';
import { realFs } from '../lib/fs/real.js';
import { InlineSyncPolicy, setQueued } from '../lib/fs/inline-sync.js';
import { FdCache, defaultFdCache } from './fd-cache.js';
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
  encodeIndex,
  encodeManifest,
  encodeSegmentHeader,
  frameChecksum,
  manifestBytes,
  newSegmentId,
  parseSegmentFileName,
  saltOf,
  segmentBaseName,
  writeFrame,
  writeFrameHeader,
  writeFrameHeaderFields,
  type Manifest,
  type SegmentId,
} from './format.js';
import { MANIFEST_CAPACITY, openManifestCell, type ManifestCell } from './manifest.js';
import { scanFrames } from './scan.js';

// ---------------------------------------------------------------------------------------------
// Public shapes

/**
 * When appended records are made durable.
 * - `'always'` (default): every append resolves after the fdatasync that covers it (group commit).
 * - `{ everyBytes }`: appends resolve once written; a sync runs when that many bytes are unsynced.
 * - `{ everyMs }`: appends resolve once written; a sync runs at most that long after a write.
 * - `'none'`: appends resolve once written; only `sync()`, structural changes and `close()` sync.
 * Whatever the policy, `stage(...).durable` settles only after the covering sync.
 */
export type SyncPolicy = 'always' | 'none' | { everyBytes: number } | { everyMs: number };

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
 * Test-only switches that plant a known durability mistake, so that the crash runner
 * (lib/crash/workloads/segments.ts) can prove it catches each class. Never set outside tests; not
 * exported from the package. Passed as `{ ...options, mistakes }` (not part of SegmentedLogOptions).
 * @internal
 */
export interface SegmentMistakes {
  /** `append` resolves once its records are written, before the sync that covers them. */
  ackBeforeSync?: boolean;
  /** A new segment file's directory entry is not synced. */
  skipDirSync?: boolean;
  /** Segments a change removes are unlinked before the manifest that removes them is durable. */
  unlinkBeforeCommit?: boolean;
}

export interface SegmentedLogStats {
  /** Live segments. */
  segments: number;
  /** Sealed-segment indexes rebuilt by a scan (missing or failing their checksum). */
  indexRebuilds: number;
  /** Group writes (one writev each). */
  groupWrites: number;
  /** fdatasyncs of segment data. */
  syncs: number;
  /** Segments sealed by a roll. */
  rolls: number;
  /** Bytes of the last segment that open validated by a scan (past what its index claimed). */
  recoveryScanBytes: number;
  /** New segments made out of the file of a dropped one (instead of a fresh file). */
  recycled: number;
}

/** A segmented log; see the module header and docs/usage.md. */
export interface SegmentedLog {
  /** First record not dropped. */
  readonly firstIndex: number;
  /** Index the next appended record takes. */
  readonly endIndex: number;
  /** Appends records; answers the index of the first. Durable on resolve under the default policy. */
  append(records: Uint8Array[]): Promise<number>;
  /**
   * Assigns indices now and makes the records readable at once; `durable` settles after the sync
   * that covers them (rejecting if their write or sync failed: the records then vanish). The
   * caller must not modify the records' bytes until `durable` settles.
   */
  stage(records: Uint8Array[]): { first: number; durable: Promise<void> };
  /**
   * At most `limit` records from `from` and, past the first, at most `maxBytes` bytes of record
   * data (default: no byte bound). `from` below `firstIndex` is INVALID; at or past the end, [].
   */
  read(from: number, limit: number, maxBytes?: number): Promise<Uint8Array[]>;
  /** Removes [index, end); a no-op at or past the end; INVALID below `firstIndex`. */
  truncateAfter(index: number): Promise<void>;
  /** Removes [first, index); past the end it removes every record and first becomes end. */
  dropBefore(index: number): Promise<void>;
  /** Durably empties the log so that first = end = nextIndex. */
  reset(nextIndex: number): Promise<void>;
  /** Makes everything issued before it durable. */
  sync(): Promise<void>;
  /** Waits for in-flight work, syncs, releases files and the directory lock. Idempotent. */
  close(): Promise<void>;
  stats(): SegmentedLogStats;
}

// ---------------------------------------------------------------------------------------------
// Limits and tuning

const MiB = 1 << 20;
export const DEFAULT_SEGMENT_BYTES = 64 * MiB;
export const DEFAULT_MAX_RECORD_BYTES = 64 * MiB;
const MIN_SEGMENT_BYTES = 64;
const MAX_SEGMENT_BYTES = 1024 * MiB;
const MAX_RECORD_LIMIT = 1024 * MiB;
/** Offsets are u32: a segment file never grows past this. */
const MAX_SEGMENT_FILE_BYTES = 0xffffffff;
/** Frame bytes of one stage() call: a batch never splits across segments, so it must fit a file. */
const MAX_BATCH_FRAME_BYTES = 2048 * MiB;
/** Payloads at least this large go to writev by reference instead of being copied. */
const COPY_LIMIT = 32 * 1024;
/**
 * Payloads at least this large have their CRC computed while the pool copies them into the file
 * (the CRC field follows in a small write of its own), so that the two overlap (1 MiB: ~0.2 ms of
 * CRC beside ~0.25 ms of copying; 1 MiB appends +4-5 %, docs/raft-store.md).
 */
const LATE_CRC_LIMIT = 256 * 1024;
/**
 * A lone group of at most this many bytes may be written on the calling thread (`writes`): a
 * page-cache copy of about a millisecond at most, the bound the inline calls keep to by default.
 */
const INLINE_WRITE_LIMIT = 4 * MiB;
/** Preallocation: zero-filled space written ahead of the tail, so most syncs change no size. */
const MIN_PREALLOC = 16 * 1024;
const MAX_PREALLOC = 4 * MiB;
/** A group of this many bytes or more extends the file itself instead of writing zeros ahead. */
const PREALLOC_GROUP_LIMIT = 256 * 1024;
/** Largest single pread of a read call. */
const READ_CHUNK = MiB;
/** Sealed-segment offset tables kept in memory per log (least recently used dropped first). */
const MAX_LOADED_TABLES = 8;
/**
 * The active segment's index is rewritten (unsynced: it is derived data) each time at least this
 * much more of it, and at least CHECKPOINT_RECORDS more records, are synced, so that recovery
 * after a crash scans at most about that much of its tail (never more than the segment). The
 * record count keeps large records from paying four file calls every few appends (1 MiB records:
 * every 64 MiB, about once per default segment, instead of every 4 MiB).
 */
const CHECKPOINT_BYTES = 4 * MiB;
const CHECKPOINT_RECORDS = 64;
/** Beyond this much space past the valid tail at open, cut without looking. */
const MAX_ZERO_CHECK = 8 * MiB;

const ZEROS = new Uint8Array(MAX_PREALLOC);

// ---------------------------------------------------------------------------------------------
// Internal state

class Segment {
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

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
  reject: (err: unknown) => void;
}
function deferred(): Deferred {
  let resolve!: () => void;
  let reject!: (err: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

interface AppendOp {
  kind: 'append';
  first: number;
  records: Uint8Array[];
  frameBytes: number;
  /** Records of this op already written to a segment (then served from the file, not memory). */
  written: number;
  /** Sequence number of the group write that carried it. */
  seq: number;
  done: Deferred; // written (or failed)
  durable: Deferred;
}

interface StructOp {
  kind: 'truncate' | 'drop' | 'reset' | 'sync';
  index: number;
  done: Deferred;
}

type Op = AppendOp | StructOp;

function policyOf(p: SyncPolicy | undefined): SyncPolicy {
  if (p === undefined || p === 'always' || p === 'none') return p ?? 'always';
  if (typeof p === 'object' && p !== null) {
    const bytes = (p as { everyBytes?: unknown }).everyBytes;
    const ms = (p as { everyMs?: unknown }).everyMs;
    if (bytes !== undefined && ms === undefined && isIndex(bytes) && bytes > 0) return { everyBytes: bytes };
    if (ms !== undefined && bytes === undefined && typeof ms === 'number' && ms > 0 && Number.isFinite(ms)) return { everyMs: ms };
  }
  throw invalid(`sync policy must be 'always', 'none', { everyBytes: n } or { everyMs: n }`);
}

/** Opens (creating if needed) the segmented log stored in directory `dir`. */
export async function openSegmentedLog(dir: string, options: SegmentedLogOptions = {}): Promise<SegmentedLog> {
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
  const policy = policyOf(options.sync);
  const inlineBelowMs = options.inlineSyncBelowMs ?? 1;
  if (typeof inlineBelowMs !== 'number' || !Number.isFinite(inlineBelowMs) || inlineBelowMs < 0) {
    throw invalid('inlineSyncBelowMs must be a non-negative number');
  }
  const fs = options.fs ?? realFs;
  const fdCache = options.fdCache ?? defaultFdCache;
  if (!(fdCache instanceof FdCache)) throw invalid('fdCache must be an FdCache');

  // Directories this call creates must be made durable in their parents (a new directory is an
  // entry of its parent): the new-log path syncs them before its first manifest.
  const created: string[] = [];
  try {
    for (let d = path.resolve(dir); (await fs.stat(d)) === null; d = path.dirname(d)) {
      created.push(d);
      if (path.dirname(d) === d) break;
    }
    await fs.mkdir(dir);
  } catch (err) {
    throw fromIo(err, 'create log directory', dir);
  }
  const lock = await lockDirectory(fs, dir, LOCK_NAME);
  let cell: ManifestCell | null = null;
  try {
    cell = await openManifestCell(path.join(dir, MANIFEST_NAME), fs);
    const log = new Log(dir, fs, fdCache, policy, segmentBytes, maxRecordBytes, lock, cell);
    log.mistakes = (options as { mistakes?: SegmentMistakes }).mistakes ?? {};
    log.syncs = new InlineSyncPolicy(inlineBelowMs);
    log.writes = new InlineSyncPolicy(inlineBelowMs);
    const tuning = (options as { tuning?: SegmentTuning }).tuning ?? {};
    if (tuning.recycle !== undefined) log.recycle = tuning.recycle === true;
    try {
      await log.recover(firstIndex, created);
    } catch (err) {
      await log.forgetFiles();
      throw err;
    }
    return log;
  } catch (err) {
    if (cell !== null) await cell.close().catch(() => undefined);
    await lock.close().catch(() => undefined);
    throw err;
  }
}

class Log implements SegmentedLog {
  readonly #dir: string;
  readonly #fs: FileSystem;
  readonly #fdCache: FdCache;
  readonly #policy: SyncPolicy;
  readonly #segmentBytes: number;
  readonly #maxRecordBytes: number;
  readonly #lock: FileHandle;
  readonly #cell: ManifestCell;
  /** Test-only (SegmentMistakes); empty in every real use. @internal */
  mistakes: SegmentMistakes = {};
  /** Whether the file of a dropped segment is kept to become the next new segment (SegmentTuning). @internal */
  recycle = true;
  /** Where a lone append's sync waits (set at open from `inlineSyncBelowMs`). @internal */
  syncs = new InlineSyncPolicy(0);
  /** Where a lone group's write waits (set at open from `inlineSyncBelowMs`). @internal */
  writes = new InlineSyncPolicy(0);

  // Physical state: what the manifest and the files say (plus written-but-unsynced records).
  #segments: Segment[] = [];
  #active!: Segment;
  #physFirst = 0;
  /** Generation of the last committed manifest. */
  #generation = 0;

  // Logical state: what callers see; runs ahead of the physical state by the queued operations.
  #first = 0;
  #end = 0;

  /** Operations not yet started, in call order. */
  #queue: Op[] = [];
  /** Staged appends whose records are (partly) unwritten: reads take those records from memory. */
  #pending: AppendOp[] = [];
  /** Written appends waiting for the sync that covers them, in write order. */
  #unsynced: AppendOp[] = [];
  #pump: Promise<void> | null = null;

  #writeSeq = 0; // group writes done
  #issuedSeq = 0; // covered by a sync started
  #syncedSeq = 0; // covered by a sync finished
  #syncInFlight: Promise<void> | null = null;
  #syncWanted = false;
  #unsyncedBytes = 0;
  #timer: NodeJS.Timeout | null = null;
  /** Active segment's table as of the last completed sync (rolled back to on a failed sync). */
  #durableCount = 0;
  #durableEnd = HEADER_BYTES;
  /** Active segment offset covered by its last index checkpoint. */
  #checkpointEnd = HEADER_BYTES;
  /** Active segment records covered by its last index checkpoint. */
  #checkpointCount = 0;
  #checkpointing: Promise<void> | null = null;
  /** The active segment's handle, held while writes or syncs are outstanding. */
  #lease: { handle: FileHandle; release: () => void; segment: Segment } | null = null;

  #poison: SeglogError | null = null;
  #closing: Promise<void> | null = null;
  #readsInFlight = 0;
  #readsIdle: Deferred | null = null;
  #deferredUnlinks = new Set<Promise<void>>();
  /**
   * The file of a segment no manifest names any more, kept (under its old name) to be reused by
   * the next segment this log creates: its blocks are allocated and written, so the appends that
   * overwrite them sync no size or allocation change. Named by no manifest, it is garbage to an
   * open after a crash (deleted like any leftover), and it is deleted at close.
   */
  #spare: { path: string; size: number } | null = null;
  #useTick = 0;
  #stats: SegmentedLogStats = { segments: 0, indexRebuilds: 0, groupWrites: 0, syncs: 0, rolls: 0, recoveryScanBytes: 0, recycled: 0 };

  constructor(
    dir: string,
    fs: FileSystem,
    fdCache: FdCache,
    policy: SyncPolicy,
    segmentBytes: number,
    maxRecordBytes: number,
    lock: FileHandle,
    cell: ManifestCell,
  ) {
    this.#dir = dir;
    this.#fs = fs;
    this.#fdCache = fdCache;
    this.#policy = policy;
    this.#segmentBytes = segmentBytes;
    this.#maxRecordBytes = maxRecordBytes;
    this.#lock = lock;
    this.#cell = cell;
  }

  get firstIndex(): number {
    return this.#first;
  }
  get endIndex(): number {
    return this.#end;
  }

  stats(): SegmentedLogStats {
    return { ...this.#stats, segments: this.#segments.length };
  }

  // -------------------------------------------------------------------------------------------
  // Recovery

  /** Reads the manifest, removes garbage, validates the last segment and cuts its torn tail. */
  async recover(firstIndex: number, createdDirs: readonly string[]): Promise<void> {
    const manifestPath = path.join(this.#dir, MANIFEST_NAME);
    let names: string[];
    try {
      names = await this.#fs.readdir(this.#dir);
    } catch (err) {
      throw fromIo(err, 'list log directory', this.#dir);
    }
    const value = await this.#cell.read();
    const files = new Map<string, number>(); // segment/index file name -> base
    for (const n of names) {
      const p = parseSegmentFileName(n);
      if (p !== null) files.set(n, p.base);
    }

    if (value === null) {
      // Never committed: any segment file is the leftover of a creation that crashed before its
      // first manifest, so it can hold no record. One that does means the manifest was lost.
      for (const n of files.keys()) {
        const st = await this.#stat(path.join(this.#dir, n));
        if (n.endsWith(SEGMENT_SUFFIX) && st !== null && st.size > HEADER_BYTES) {
          const all = await this.#isZero(path.join(this.#dir, n), HEADER_BYTES, st.size);
          if (!all) {
            throw corrupt(`log ${this.#dir}: segment ${n} holds data but the log has no manifest`, {
              file: path.join(this.#dir, n),
              offset: HEADER_BYTES,
            });
          }
        }
        await this.#unlinkQuietly(path.join(this.#dir, n));
      }
      // The log's directory (and any parent this open created) must be a durable entry before
      // the log acknowledges anything. The parent is synced even when the directory already
      // existed: an earlier open may have created it and crashed before syncing.
      const parents = new Set([path.dirname(path.resolve(this.#dir)), ...createdDirs.map((d) => path.dirname(d))]);
      for (const p of parents) {
        try {
          await this.#fs.syncDir(p);
        } catch (err) {
          throw fromIo(err, 'sync directory', p);
        }
      }
      const seg = await this.#createSegment(firstIndex);
      await this.#commit(this.#manifestOf(firstIndex, [seg]), manifestPath);
      this.#segments = [seg];
      this.#active = seg;
      this.#physFirst = this.#first = this.#end = firstIndex;
      seg.offsets = new Uint32Array(64);
      seg.headerChecked = true;
      this.#durableCount = 0;
      this.#durableEnd = HEADER_BYTES;
      return;
    }

    const manifest = decodeManifest(value, manifestPath);
    this.#generation = manifest.generation;
    // The cell made the value it answered durable (it syncs its file and directory at open), so
    // this process never builds on a manifest that a power loss could take back.
    const named = new Set<string>();
    this.#segments = manifest.segments.map((s) => new Segment(this.#dir, s.base, s.id));
    for (const seg of this.#segments) {
      named.add(seg.name + SEGMENT_SUFFIX);
      named.add(seg.name + INDEX_SUFFIX);
      if (!files.has(seg.name + SEGMENT_SUFFIX)) {
        throw corrupt(`log ${this.#dir}: segment ${seg.name}${SEGMENT_SUFFIX} named by the manifest is missing`, {
          file: seg.segPath,
          offset: 0,
        });
      }
    }
    // Files no manifest names are leftovers of an interrupted change, or segments a change
    // removed before the unlink was durable: garbage. One exception, which is corruption: a
    // segment created for a later manifest generation that holds a record. Records are appended
    // to a segment only after the manifest naming it is durable, so the manifest went back.
    for (const n of files.keys()) {
      if (named.has(n)) continue;
      const file = path.join(this.#dir, n);
      if (n.endsWith(SEGMENT_SUFFIX) && (await this.#holdsYoungerRecords(file, manifest.generation))) {
        throw corrupt(`log ${this.#dir}: segment ${n} holds records but is named by no manifest up to generation ${manifest.generation}`, {
          file,
          offset: HEADER_BYTES,
        });
      }
      await this.#unlinkQuietly(file);
    }
    for (let k = 0; k + 1 < this.#segments.length; k++) {
      this.#segments[k]!.count = this.#segments[k + 1]!.base - this.#segments[k]!.base;
    }
    this.#physFirst = this.#first = manifest.firstIndex;
    const last = this.#segments[this.#segments.length - 1]!;
    this.#active = last;
    await this.#recoverLast(last);
    this.#end = last.base + last.count;
    if (this.#first > this.#end) {
      throw corrupt(`log ${this.#dir}: manifest's first index ${this.#first} is past the end ${this.#end}`, {
        file: manifestPath,
        offset: 8,
      });
    }
  }

  async #recoverLast(seg: Segment): Promise<void> {
    const { handle, release } = await this.#acquire(seg);
    try {
      const size = await handle.size().catch((err: unknown) => {
        throw fromIo(err, 'stat segment', seg.segPath);
      });
      let start = HEADER_BYTES;
      // The index written at a clean close claims only synced frames; trust it, then scan past it.
      const idx = await this.#readIndexFile(seg, size);
      if (idx !== null && idx.count > 0 && idx.endOffset <= size) {
        seg.offsets = idx.offsets;
        seg.tableCount = idx.count;
        seg.tableEnd = idx.endOffset;
        const lastStart = idx.offsets[idx.count - 1]!;
        const ok = await this.#frameValid(handle, seg, lastStart, idx.endOffset, seg.base + idx.count - 1);
        if (ok) start = idx.endOffset;
      }
      if (start === HEADER_BYTES) {
        seg.offsets = new Uint32Array(64);
        seg.tableCount = 0;
        seg.tableEnd = HEADER_BYTES;
      }
      const result = await scanFrames(
        handle,
        size,
        seg.salt,
        start,
        seg.base + seg.tableCount,
        this.#maxRecordBytes,
        Number.MAX_SAFE_INTEGER,
        (off) => seg.push(off),
      );
      seg.tableEnd = result.endOffset;
      seg.count = seg.tableCount;
      seg.allocated = size;
      this.#stats.recoveryScanBytes = result.endOffset - start;
      // Whatever follows the valid prefix is a torn tail: never acknowledged. Zeros (preallocated
      // space) are harmless and kept; anything else is cut before any new append, so that stale
      // frames can never line up behind a new one.
      if (size > result.endOffset) {
        const zero = size - result.endOffset <= MAX_ZERO_CHECK && (await this.#isZeroHandle(handle, result.endOffset, size));
        if (!zero) {
          try {
            await handle.truncate(result.endOffset);
          } catch (err) {
            throw fromIo(err, 'cut torn tail of', seg.segPath);
          }
          seg.allocated = result.endOffset;
        }
      }
      // The valid prefix may be in the page cache only (the last process was killed before its
      // sync). The next roll would seal it, so it is made durable now, with the cut.
      try {
        await handle.datasync();
      } catch (err) {
        throw fromIo(err, 'sync', seg.segPath);
      }
      this.#durableCount = seg.count;
      this.#durableEnd = seg.tableEnd;
      this.#checkpointEnd = seg.tableEnd;
      this.#checkpointCount = seg.count;
    } finally {
      release();
    }
  }

  /** True when `file` is a segment created after manifest generation `generation` with a valid first record. */
  async #holdsYoungerRecords(file: string, generation: number): Promise<boolean> {
    let h: FileHandle;
    try {
      h = await this.#fs.open(file, 'read');
    } catch (err) {
      throw fromIo(err, 'open', file);
    }
    try {
      const size = await h.size();
      const head = new Uint8Array(HEADER_BYTES + FRAME_HEADER_BYTES);
      const n = await h.read(head, 0);
      const header = decodeSegmentHeader(head.subarray(0, n));
      if (header === null || header.generation <= generation || n < head.length) return false;
      const len = head[HEADER_BYTES + 4]! | (head[HEADER_BYTES + 5]! << 8) | (head[HEADER_BYTES + 6]! << 16) | (head[HEADER_BYTES + 7]! << 24);
      if (len < 0 || len > this.#maxRecordBytes || HEADER_BYTES + FRAME_HEADER_BYTES + len > size) return false;
      const frame = new Uint8Array(FRAME_HEADER_BYTES + len);
      await h.read(frame, HEADER_BYTES);
      return checkFrame(frame, 0, header.base, saltOf(header.id), this.#maxRecordBytes) === 'ok';
    } catch (err) {
      throw fromIo(err, 'read', file);
    } finally {
      await h.close().catch(() => undefined);
    }
  }

  async #frameValid(handle: FileHandle, seg: Segment, start: number, end: number, index: number): Promise<boolean> {
    if (end - start < FRAME_HEADER_BYTES || end - start - FRAME_HEADER_BYTES > this.#maxRecordBytes) return false;
    const b = new Uint8Array(end - start);
    try {
      if ((await handle.read(b, start)) !== b.length) return false;
    } catch (err) {
      throw fromIo(err, 'read segment', seg.segPath);
    }
    return checkFrame(b, 0, index, seg.salt, this.#maxRecordBytes) === 'ok';
  }

  async #isZero(file: string, from: number, to: number): Promise<boolean> {
    let h: FileHandle;
    try {
      h = await this.#fs.open(file, 'read');
    } catch (err) {
      throw fromIo(err, 'open', file);
    }
    try {
      return await this.#isZeroHandle(h, from, to);
    } finally {
      await h.close().catch(() => undefined);
    }
  }

  async #isZeroHandle(h: FileHandle, from: number, to: number): Promise<boolean> {
    const buf = Buffer.alloc(Math.min(MiB, to - from));
    for (let at = from; at < to; at += buf.length) {
      const n = Math.min(buf.length, to - at);
      const view = buf.subarray(0, n);
      let got: number;
      try {
        got = await h.read(view, at);
      } catch (err) {
        throw fromIo(err, 'read', h.path);
      }
      if (!view.subarray(0, got).equals(ZEROS_BUF.subarray(0, got))) return false;
      if (got < n) return true;
    }
    return true;
  }

  async #stat(p: string): Promise<{ size: number } | null> {
    try {
      return await this.#fs.stat(p);
    } catch (err) {
      throw fromIo(err, 'stat', p);
    }
  }

  // -------------------------------------------------------------------------------------------
  // Appending

  #checkWritable(): void {
    if (this.#closing !== null) throw closed(`log ${this.#dir}`);
    if (this.#poison !== null) throw poisoned(`log ${this.#dir}`, this.#poison);
  }

  stage(records: Uint8Array[]): { first: number; durable: Promise<void> } {
    const { first, op } = this.#stage(records);
    return { first, durable: op === null ? Promise.resolve() : op.durable.promise };
  }

  async append(records: Uint8Array[]): Promise<number> {
    const { first, op } = this.#stage(records);
    if (op === null) return first;
    if (this.#policy === 'always' && this.mistakes.ackBeforeSync !== true) {
      await op.durable.promise;
    } else {
      op.durable.promise.catch(() => undefined);
      await op.done.promise;
    }
    return first;
  }

  #stage(records: Uint8Array[]): { first: number; op: AppendOp | null } {
    this.#checkWritable();
    if (!Array.isArray(records)) throw invalid('records must be an array of Uint8Array');
    let frameBytes = 0;
    for (const r of records) {
      if (!(r instanceof Uint8Array)) throw invalid('records must be an array of Uint8Array');
      if (r.length > this.#maxRecordBytes) {
        throw new SeglogError('TOO_LARGE', `record of ${r.length} bytes exceeds maxRecordBytes ${this.#maxRecordBytes}`, {
          details: { length: r.length, max: this.#maxRecordBytes },
        });
      }
      frameBytes += FRAME_HEADER_BYTES + r.length;
    }
    if (frameBytes > MAX_BATCH_FRAME_BYTES) {
      throw new SeglogError('TOO_LARGE', `a batch of ${frameBytes} frame bytes exceeds ${MAX_BATCH_FRAME_BYTES}`, {
        details: { bytes: frameBytes },
      });
    }
    const first = this.#end;
    if (!Number.isSafeInteger(first + records.length)) throw invalid('log index would pass 2^53');
    if (records.length === 0) return { first, op: null };
    this.#end += records.length;
    const op: AppendOp = {
      kind: 'append',
      first,
      records: records.slice(),
      frameBytes,
      written: 0,
      seq: 0,
      done: deferred(),
      durable: deferred(),
    };
    op.done.promise.catch(() => undefined);
    this.#pending.push(op);
    this.#enqueue(op);
    return { first, op };
  }

  #enqueue(op: Op): void {
    this.#queue.push(op);
    setQueued(this, true);
    this.#kick();
  }

  /** Tells the thread's sync policies whether this log has work queued (after the queue shrank). */
  #queueChanged(): void {
    setQueued(this, this.#queue.length > 0);
  }

  #kick(): void {
    if (this.#pump !== null) return;
    this.#pump = this.#run().finally(() => {
      this.#pump = null;
      // An op may have been queued after the loop saw an empty queue but before this ran.
      if (this.#queue.length > 0) this.#kick();
      else this.#maybeReleaseLease();
    });
  }

  /** The writer: takes operations in call order; appends go out in groups. */
  async #run(): Promise<void> {
    while (this.#queue.length > 0) {
      if (this.#poison !== null) {
        this.#failQueued(this.#poison);
        return;
      }
      const head = this.#queue[0]!;
      if (head.kind !== 'append') {
        this.#queue.shift();
        this.#queueChanged();
        try {
          await this.#drain();
          await this.#structural(head);
          head.done.resolve();
        } catch (err) {
          const e = err instanceof SeglogError ? err : fromIo(err, 'change', this.#dir);
          this.#setPoison(e);
          head.done.reject(e);
        }
        continue;
      }
      // Group commit: let the event loop run once so that concurrent appenders join the group;
      // under 'always', also wait until every written group has its sync started (pipeline of 2).
      await nextTurn();
      if (this.#policy === 'always') await this.#waitSyncIssued();
      if (this.#poison !== null) continue;
      try {
        await this.#writeNextGroup();
      } catch (err) {
        // Structural failure inside a roll: the log cannot know its manifest's state. Poison.
        const e = err instanceof SeglogError ? err : fromIo(err, 'roll', this.#dir);
        this.#setPoison(e);
      }
    }
  }

  async #waitSyncIssued(): Promise<void> {
    while (this.#issuedSeq < this.#writeSeq && this.#poison === null) {
      if (this.#syncInFlight !== null) await this.#syncInFlight;
      else this.#startSync();
    }
  }

  #canAddSegment(extra: number): boolean {
    return manifestBytes(this.#segments.length + extra) <= MANIFEST_CAPACITY;
  }

  /** Writes the appends at the head of the queue that fit the active segment; rolls first if needed. */
  async #writeNextGroup(): Promise<void> {
    const seg = this.#active;
    const tail = seg.tableEnd;
    const ops: AppendOp[] = [];
    let bytes = 0;
    for (const op of this.#queue) {
      if (op.kind !== 'append') break;
      const fits = tail + bytes + op.frameBytes <= this.#segmentBytes;
      if (!fits && (seg.count > 0 || ops.length > 0)) {
        // Keep 2 manifest entries spare so that a truncation (which adds one) always fits.
        if (ops.length > 0 || this.#canAddSegment(2)) break;
        if (tail + bytes + op.frameBytes > MAX_SEGMENT_FILE_BYTES) break;
      }
      ops.push(op);
      bytes += op.frameBytes;
    }
    if (ops.length === 0) {
      if (seg.count > 0 && this.#canAddSegment(2)) {
        await this.#roll();
        return;
      }
      const err = new SeglogError('TOO_LARGE', `log ${this.#dir} is full: its manifest names the most segments it can`);
      this.#failFrom(this.#queue[0] as AppendOp, err);
      return;
    }
    this.#queue.splice(0, ops.length);
    this.#queueChanged();
    // Nothing queued behind this group, and at most INLINE_WRITE_LIMIT of it: the policy may write
    // it on this thread (no hand-offs).
    const inlineable = this.#queue.length === 0 && bytes <= INLINE_WRITE_LIMIT;
    const where = this.writes.where(inlineable, this);

    // Encode: small payloads are copied next to their frame headers (one iovec for many records);
    // large ones are passed by reference, and the largest, when the pool writes them, get their
    // CRC once the write is under way (`late`: an inline write leaves nothing to overlap).
    const chunks: Uint8Array[] = [];
    const late: { header: number; file: number; record: Uint8Array }[] = [];
    let small = 0;
    for (const op of ops) for (const r of op.records) small += FRAME_HEADER_BYTES + (r.length < COPY_LIMIT ? r.length : 0);
    const buf = Buffer.allocUnsafe(small);
    const offsets: number[] = [];
    let p = 0;
    let cut = 0;
    let off = tail;
    for (const op of ops) {
      let index = op.first;
      for (const r of op.records) {
        offsets.push(off);
        if (r.length < COPY_LIMIT) {
          p += writeFrame(buf, p, index, r, seg.salt);
        } else {
          if (r.length < LATE_CRC_LIMIT || where === 'inline') writeFrameHeader(buf, p, index, r, seg.salt);
          else {
            writeFrameHeaderFields(buf, p, index, r.length);
            late.push({ header: p, file: off, record: r });
          }
          p += FRAME_HEADER_BYTES;
          chunks.push(buf.subarray(cut, p), r);
          cut = p;
        }
        off += FRAME_HEADER_BYTES + r.length;
        index++;
      }
    }
    if (cut < p) chunks.push(buf.subarray(cut, p));
    const newTail = tail + bytes;
    let allocated = seg.allocated;
    if (newTail > allocated && bytes < PREALLOC_GROUP_LIMIT) {
      // Grow by about the segment's size so far (16 KiB .. 4 MiB): small logs stay small, busy
      // ones rarely pay for a size change in their sync. A large group skips it: its own bytes
      // dominate the sync, and writing zeros beside them would double what reaches the disk.
      const grow = Math.min(MAX_PREALLOC, Math.max(MIN_PREALLOC, newTail));
      const target = Math.max(newTail, Math.min(newTail + grow, Math.max(this.#segmentBytes, newTail)));
      for (let at = newTail; at < target; at += ZEROS.length) chunks.push(ZEROS.subarray(0, Math.min(ZEROS.length, target - at)));
      allocated = target;
    }

    const { handle } = await this.#activeLease();
    try {
      const writing = this.writes.run(where, (w) => handle.writev(chunks, tail, w));
      if (late.length === 0) await writing;
      else {
        // The CRCs are computed while the pool copies the bytes (the writev has read `buf` by the
        // time it resolves, so the fields go out in writes of their own, after it). Until then
        // each late frame's CRC field is zero: a crash leaves it invalid, a torn tail like any
        // unsynced write, and no reader sees it (the table grows below, after these writes).
        const fields = new Uint8Array(4 * late.length);
        const view = new DataView(fields.buffer);
        for (let i = 0; i < late.length; i++) {
          const l = late[i]!;
          view.setUint32(4 * i, frameChecksum(buf, l.header, l.record, seg.salt), true);
        }
        await writing;
        for (let i = 0; i < late.length; i++) await handle.write(fields.subarray(4 * i, 4 * i + 4), late[i]!.file);
      }
    } catch (err) {
      const e = fromIo(err, 'write', seg.segPath);
      if (this.#poison !== null) {
        this.#rejectOps(ops, this.#poison);
        return;
      }
      this.#failFrom(ops[0]!, e, ops);
      await this.#cutAfterFailedWrite(seg, handle, tail);
      return;
    }
    if (this.#poison !== null) {
      // A sync failed while this group was being written: the view was rolled back to the last
      // sync; the group is not added to it.
      this.#rejectOps(ops, this.#poison);
      return;
    }
    this.#stats.groupWrites++;
    for (const o of offsets) seg.push(o);
    seg.tableEnd = newTail;
    seg.count = seg.tableCount;
    seg.allocated = Math.max(allocated, newTail, seg.allocated);
    const seq = ++this.#writeSeq;
    this.#unsyncedBytes += bytes;
    for (const op of ops) {
      op.written = op.records.length;
      op.seq = seq;
      this.#unsynced.push(op);
      op.done.resolve();
    }
    this.#removePending(ops);
    this.#maybeSync();
  }

  #removePending(ops: AppendOp[]): void {
    // Written ops are (almost always) the oldest pending ones.
    const gone = new Set(ops);
    this.#pending = this.#pending.filter((op) => !gone.has(op));
  }

  /**
   * A failed group write: its frames may be partly on disk. Cut the file back to the tail and
   * sync, so that they can never line up behind a later frame; if that fails too, poison.
   */
  async #cutAfterFailedWrite(seg: Segment, handle: FileHandle, tail: number): Promise<void> {
    try {
      await handle.truncate(tail);
      await handle.datasync();
      seg.allocated = tail;
      seg.stale = false;
    } catch (err) {
      this.#setPoison(fromIo(err, 'cut failed write of', seg.segPath));
    }
  }

  /**
   * Rejects `op` and everything queued after it (their indices depend on it), and rolls the
   * logical state back to the physical one: the failed records vanish, leaving no hole.
   */
  #failFrom(op: AppendOp, err: SeglogError, taken: AppendOp[] = []): void {
    const queued = this.#queue.splice(0);
    this.#queueChanged();
    const failed: Op[] = [...taken, ...queued];
    assert(taken.length > 0 || queued[0] === op, 'the failed op heads the queue');
    for (const o of failed) {
      o.done.reject(err);
      if (o.kind === 'append') o.durable.reject(err);
    }
    this.#pending = [];
    this.#end = this.#active.base + this.#active.count;
    this.#first = this.#physFirst;
  }

  #rejectOps(ops: AppendOp[], err: SeglogError): void {
    for (const o of ops) {
      o.done.reject(err);
      o.durable.reject(err);
    }
  }

  #failQueued(err: SeglogError): void {
    const queued = this.#queue.splice(0);
    this.#queueChanged();
    for (const o of queued) {
      o.done.reject(err);
      if (o.kind === 'append') o.durable.reject(err);
    }
  }

  async #activeLease(): Promise<{ handle: FileHandle }> {
    const seg = this.#active;
    if (this.#lease !== null && this.#lease.segment === seg) return this.#lease;
    if (this.#lease !== null) {
      this.#lease.release();
      this.#lease = null;
    }
    const { handle, release } = await this.#acquire(seg);
    this.#lease = { handle, release, segment: seg };
    return this.#lease;
  }

  #maybeReleaseLease(): void {
    if (this.#lease !== null && this.#queue.length === 0 && this.#syncedSeq === this.#writeSeq && this.#syncInFlight === null) {
      this.#lease.release();
      this.#lease = null;
    }
  }

  // -------------------------------------------------------------------------------------------
  // Syncing

  #maybeSync(): void {
    if (this.#syncedSeq === this.#writeSeq || this.#poison !== null) return;
    const p = this.#policy;
    const want =
      p === 'always' ||
      this.#syncWanted ||
      (typeof p === 'object' && 'everyBytes' in p && this.#unsyncedBytes >= p.everyBytes);
    if (want) {
      if (this.#syncInFlight === null) this.#startSync();
      return;
    }
    if (typeof p === 'object' && 'everyMs' in p && this.#timer === null) {
      this.#timer = setTimeout(() => {
        this.#timer = null;
        this.#syncWanted = true;
        this.#maybeSync();
      }, p.everyMs);
      this.#timer.unref();
    }
  }

  #startSync(): void {
    assert(this.#syncInFlight === null, 'one sync at a time');
    assert(this.#lease !== null, 'the active segment is held while data is unsynced');
    const target = this.#writeSeq;
    const seg = this.#active;
    const count = seg.count;
    const end = seg.tableEnd;
    const handle = this.#lease.handle;
    this.#issuedSeq = target;
    this.#syncWanted = false;
    this.#unsyncedBytes = 0;
    this.#stats.syncs++;
    // (The planted ackBeforeSync also starts the sync a turn late, so that the acknowledgement
    // really comes first: a MemoryFs call takes effect the moment it is made.)
    // One append waits for this sync and nothing is queued behind it: the policy may sync inline.
    const lone = this.#unsynced.length === 1 && this.#queue.length === 0;
    const synced = this.mistakes.ackBeforeSync === true ? nextTurn().then(() => handle.datasync()) : this.syncs.datasync(handle, lone, this);
    this.#syncInFlight = synced.then(
      () => {
        this.#syncInFlight = null;
        if (this.#poison !== null) return;
        this.#syncedSeq = target;
        if (seg === this.#active) {
          this.#durableCount = count;
          this.#durableEnd = end;
          const due = end - this.#checkpointEnd >= CHECKPOINT_BYTES && count - this.#checkpointCount >= CHECKPOINT_RECORDS;
          if (due && this.#checkpointing === null) this.#checkpoint(seg, count, end);
        }
        while (this.#unsynced.length > 0 && this.#unsynced[0]!.seq <= target) this.#unsynced.shift()!.durable.resolve();
        this.#maybeSync();
        if (this.#pump === null) this.#maybeReleaseLease();
      },
      (err: unknown) => {
        this.#syncInFlight = null;
        this.#setPoison(fromIo(err, 'sync', seg.segPath));
      },
    );
  }

  /**
   * Rewrites the active segment's index to claim its first `count` frames, which a sync has just
   * made durable (so recovery may trust them without a scan). Not synced: a torn or lost
   * checkpoint only means a longer scan.
   */
  #checkpoint(seg: Segment, count: number, end: number): void {
    const bytes = encodeIndex(seg.base, seg.id, seg.offsets!, count, end);
    this.#checkpointEnd = end;
    this.#checkpointCount = count;
    this.#checkpointing = this.#writeIndexFile(seg, bytes, false)
      .catch(() => undefined)
      .finally(() => {
        this.#checkpointing = null;
      });
  }

  /** Waits until everything written is synced (starting a sync if needed) and no checkpoint runs. */
  async #drain(): Promise<void> {
    for (;;) {
      if (this.#poison !== null) throw this.#poison;
      if (this.#syncedSeq < this.#writeSeq) {
        if (this.#syncInFlight !== null) await this.#syncInFlight;
        else {
          this.#syncWanted = true;
          this.#startSync();
        }
      } else if (this.#checkpointing !== null) {
        await this.#checkpointing;
      } else {
        return;
      }
    }
  }

  /**
   * A failed fsync is not retryable (the kernel may have dropped the pages): refuse every later
   * write, fail every waiter, and roll the view back to what was last synced.
   */
  #setPoison(err: SeglogError): void {
    if (this.#poison !== null) return;
    this.#poison = err;
    for (const op of this.#unsynced) op.durable.reject(err);
    this.#unsynced = [];
    this.#failQueued(err);
    this.#pending = [];
    const seg = this.#active;
    if (seg !== undefined) {
      seg.count = seg.tableCount = Math.min(seg.tableCount, this.#durableCount);
      seg.tableEnd = this.#durableEnd;
      this.#end = seg.base + seg.count;
      this.#first = Math.min(this.#physFirst, this.#end);
    }
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
  }

  sync(): Promise<void> {
    return this.#struct('sync', 0);
  }

  // -------------------------------------------------------------------------------------------
  // Structural changes: truncateAfter, dropBefore, reset, roll. Each commits one manifest.

  #struct(kind: StructOp['kind'], index: number): Promise<void> {
    try {
      this.#checkWritable();
    } catch (err) {
      return Promise.reject(err);
    }
    const op: StructOp = { kind, index, done: deferred() };
    this.#enqueue(op);
    return op.done.promise;
  }

  truncateAfter(index: number): Promise<void> {
    try {
      this.#checkWritable();
      if (!isIndex(index)) throw invalid('truncateAfter needs a safe non-negative integer index');
      if (index < this.#first) {
        throw invalid(`truncateAfter(${index}) is below the first index ${this.#first}`, { index, first: this.#first });
      }
    } catch (err) {
      return Promise.reject(err);
    }
    if (index >= this.#end) return Promise.resolve();
    this.#end = index;
    return this.#struct('truncate', index);
  }

  dropBefore(index: number): Promise<void> {
    try {
      this.#checkWritable();
      if (!isIndex(index)) throw invalid('dropBefore needs a safe non-negative integer index');
    } catch (err) {
      return Promise.reject(err);
    }
    if (index <= this.#first) return Promise.resolve();
    const first = Math.min(index, this.#end);
    this.#first = first;
    return this.#struct('drop', first);
  }

  reset(nextIndex: number): Promise<void> {
    try {
      this.#checkWritable();
      if (!isIndex(nextIndex)) throw invalid('reset needs a safe non-negative integer index');
    } catch (err) {
      return Promise.reject(err);
    }
    this.#first = this.#end = nextIndex;
    return this.#struct('reset', nextIndex);
  }

  async #structural(op: StructOp): Promise<void> {
    switch (op.kind) {
      case 'sync':
        return;
      case 'truncate':
        return this.#doTruncate(op.index);
      case 'drop':
        return this.#doDrop(op.index);
      case 'reset':
        return this.#doReset(op.index);
    }
  }

  #physEnd(): number {
    return this.#active.base + this.#active.count;
  }

  async #roll(): Promise<void> {
    await this.#drain();
    const old = this.#active;
    // Nothing but zero-filled space (or a recycled file's old bytes) follows the last record
    // here: cut it, so that every byte of a sealed segment lies under a checksum (a flipped byte
    // anywhere is detected). The cut, the seal and the new segment touch three different files
    // and need each other for nothing: they run together, so that their syncs can share journal
    // commits. All three are durable before the manifest names the new segment.
    const steps = await Promise.allSettled([this.#cutToEnd(old), this.#seal(old), this.#createSegment(old.base + old.count)]);
    for (const step of steps) if (step.status === 'rejected') throw step.reason;
    const seg = (steps[2] as PromiseFulfilledResult<Segment>).value;
    const next = this.#normalize([...this.#segments, seg], this.#physFirst);
    await this.#commit(this.#manifestOf(this.#physFirst, next));
    await this.#install(next, this.#physFirst);
    this.#stats.rolls++;
  }

  async #doTruncate(i: number): Promise<void> {
    if (i >= this.#physEnd()) return;
    assert(i >= this.#physFirst, 'truncation at or above the first index');
    const k = segmentAt(this.#segments, i);
    const holder = this.#segments[k]!;
    const keep = this.#segments.slice(0, k);
    if (i > holder.base) {
      if (holder === this.#active) {
        holder.count = i - holder.base;
        // The truncated frames stay (below); a recycled file's old bytes after them go.
        await this.#cutStale(holder);
        await this.#seal(holder);
      }
      keep.push(holder);
    }
    const seg = await this.#createSegment(i);
    keep.push(seg);
    const next = this.#normalize(keep, this.#physFirst);
    await this.#plantEarlyUnlink(next);
    await this.#commit(this.#manifestOf(this.#physFirst, next));
    await this.#install(next, this.#physFirst);
    // The truncated frames stay in the holder's file after its sealed end: reads never reach them
    // (its index bounds the segment), and cutting them here could pull bytes from under a read
    // that started before the truncation. `seglog verify` reports them as dead frames.
  }

  async #doDrop(first: number): Promise<void> {
    const newFirst = Math.min(first, this.#physEnd());
    if (newFirst <= this.#physFirst) return;
    const next = this.#normalize(this.#segments, newFirst);
    await this.#plantEarlyUnlink(next);
    await this.#commit(this.#manifestOf(newFirst, next));
    await this.#install(next, newFirst);
  }

  async #doReset(n: number): Promise<void> {
    const seg = await this.#createSegment(n);
    await this.#plantEarlyUnlink([seg]);
    await this.#commit(this.#manifestOf(n, [seg]));
    await this.#install([seg], n);
  }

  /** Test-only (SegmentMistakes.unlinkBeforeCommit): unlinks what `next` drops before the commit. */
  async #plantEarlyUnlink(next: Segment[]): Promise<void> {
    if (this.mistakes.unlinkBeforeCommit !== true) return;
    for (const s of this.#segments) if (!next.includes(s)) await this.#unlinkSegment(s, false);
  }

  /** Drops leading segments that hold no record at or after `first` (the last one always stays). */
  #normalize(list: Segment[], first: number): Segment[] {
    let k = 0;
    while (k + 1 < list.length && list[k + 1]!.base <= first) k++;
    return list.slice(k);
  }

  #manifestOf(first: number, list: Segment[]): Manifest {
    return { firstIndex: first, generation: this.#generation + 1, segments: list.map((s) => ({ base: s.base, id: s.id })) };
  }

  /** After a manifest commit: adopt the new segment list and remove what it no longer names. */
  async #install(next: Segment[], first: number): Promise<void> {
    const kept = new Set(next);
    const gone = this.#segments.filter((s) => !kept.has(s));
    for (let k = 0; k + 1 < next.length; k++) next[k]!.count = next[k + 1]!.base - next[k]!.base;
    const active = next[next.length - 1]!;
    if (active !== this.#active) {
      if (this.#lease !== null) {
        this.#lease.release();
        this.#lease = null;
      }
      this.#active = active;
      this.#durableCount = active.count;
      this.#durableEnd = active.tableEnd;
      this.#checkpointEnd = active.tableEnd;
      this.#checkpointCount = active.count;
    }
    this.#segments = next;
    this.#physFirst = first;
    this.#evictTables();
    await Promise.all(gone.map((s) => this.#retire(s)));
  }

  /** Cuts a segment's file to the end of its last live record and syncs the new length. */
  #cutToEnd(seg: Segment): Promise<void> {
    return this.#cutFile(seg, seg.frameEnd(seg.count - 1), false);
  }

  /**
   * Cuts `seg`'s file to `end` and syncs the new length (when the file is longer, or `always`);
   * from then on the segment holds nothing past `end`.
   */
  async #cutFile(seg: Segment, end: number, always: boolean): Promise<void> {
    let h: FileHandle;
    try {
      h = await this.#fs.open(seg.segPath, 'write');
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

  /** Seals a segment: writes its index (count = its live records) and syncs it. */
  async #seal(seg: Segment): Promise<void> {
    const bytes = encodeIndex(seg.base, seg.id, seg.offsets!, seg.count, seg.frameEnd(seg.count - 1));
    await this.#writeIndexFile(seg, bytes, true);
    seg.lastUse = ++this.#useTick;
  }

  async #writeIndexFile(seg: Segment, bytes: Uint8Array, durable: boolean): Promise<void> {
    let h: FileHandle;
    try {
      h = await this.#fs.open(seg.idxPath, 'create');
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

  /**
   * A new, empty segment at `base`, durable (header, zero-filled space or a spare's old bytes,
   * directory entry).
   */
  async #createSegment(base: number): Promise<Segment> {
    const seg = new Segment(this.#dir, base, newSegmentId());
    const spare = this.#spare;
    this.#spare = null;
    if (spare !== null && (await this.#reuseSpare(seg, spare))) return seg;
    const prealloc = Math.min(MIN_PREALLOC, Math.max(this.#segmentBytes, HEADER_BYTES) - HEADER_BYTES);
    await this.#startSegmentFile(seg, 'create-exclusive', prealloc);
    seg.allocated = HEADER_BYTES + prealloc;
    seg.offsets = new Uint32Array(64);
    seg.headerChecked = true;
    return seg;
  }

  /**
   * Writes `seg`'s header (then `zeros` zero bytes) at the start of its file, opened with `mode`,
   * and syncs the file and the directory (so that its name is durable too), then closes the file.
   * The two syncs run side by side: nothing may name the file before both are done (the manifest
   * that does comes after), and until then a crash leaves it garbage, whichever landed first.
   */
  async #startSegmentFile(seg: Segment, mode: 'create-exclusive' | 'write', zeros: number): Promise<void> {
    const header = encodeSegmentHeader(seg.base, seg.id, this.#generation + 1);
    try {
      const h = await this.#fs.open(seg.segPath, mode);
      try {
        if (zeros > 0) await h.writev([header, ZEROS.subarray(0, zeros)], 0);
        else await h.write(header, 0);
        const synced = await Promise.allSettled([h.datasync(), this.mistakes.skipDirSync === true ? Promise.resolve() : this.#fs.syncDir(this.#dir)]);
        for (const step of synced) if (step.status === 'rejected') throw step.reason;
      } finally {
        await h.close();
      }
    } catch (err) {
      throw fromIo(err, 'create segment', seg.segPath);
    }
  }

  /**
   * Makes `seg` out of a spare: a second name (link, which fails rather than replace an existing
   * file, as O_EXCL does), the old name removed, a new header written and synced, the directory
   * synced. The old frames stay behind the header: they carry another segment's salt and indices,
   * so none of them validates here (as bytes a torn write leaves do not), and the first append
   * overwrites them. Answers false (the spare is dropped) when the spare cannot be linked, so that
   * the caller creates a fresh file instead.
   */
  async #reuseSpare(seg: Segment, spare: { path: string; size: number }): Promise<boolean> {
    try {
      await this.#fs.link(spare.path, seg.segPath);
    } catch {
      await this.#unlinkQuietly(spare.path);
      return false;
    }
    // The old name goes while the header is written: its removal need not be durable (a name no
    // manifest gives is garbage), only the new name must be, by the directory sync below.
    const oldNameGone = this.#unlinkQuietly(spare.path);
    try {
      await this.#startSegmentFile(seg, 'write', 0);
    } finally {
      await oldNameGone;
    }
    seg.allocated = Math.max(spare.size, HEADER_BYTES);
    seg.stale = spare.size > HEADER_BYTES;
    seg.offsets = new Uint32Array(64);
    seg.headerChecked = true;
    this.#stats.recycled++;
    return true;
  }

  /**
   * Cuts a recycled file's old bytes past the segment's last frame, and syncs the new length (a
   * segment that is sealed or closed holds nothing but its frames and zeros).
   */
  async #cutStale(seg: Segment): Promise<void> {
    if (seg.stale) await this.#cutFile(seg, seg.tableEnd, true);
  }

  async #commit(m: Manifest, file = path.join(this.#dir, MANIFEST_NAME)): Promise<void> {
    try {
      await this.#cell.write(encodeManifest(m));
    } catch (err) {
      throw fromIo(err, 'write manifest', file);
    }
    this.#generation = m.generation;
  }

  /** Removes a segment no manifest names any more, once no read uses it. */
  async #retire(seg: Segment): Promise<void> {
    seg.removed = true;
    if (seg.readers === 0) await this.#unlinkSegment(seg);
  }

  async #unlinkSegment(seg: Segment, recycle = true): Promise<void> {
    await this.#fdCache.forget(this.#fs, seg.segPath);
    if (recycle && (await this.#keepAsSpare(seg))) {
      await this.#unlinkQuietly(seg.idxPath);
      return;
    }
    // Not followed by a directory sync: a file that reappears after a crash is named by no
    // manifest, and open deletes it as garbage.
    await this.#unlinkQuietly(seg.segPath);
    await this.#unlinkQuietly(seg.idxPath);
  }

  /**
   * Keeps a removed segment's file as the spare when there is none yet and it is at least half a
   * segment (a log that fills segments; a small one is not worth holding on to).
   */
  async #keepAsSpare(seg: Segment): Promise<boolean> {
    if (!this.recycle || this.#spare !== null || this.#closing !== null || this.#poison !== null) return false;
    let size: number;
    try {
      size = (await this.#fs.stat(seg.segPath))?.size ?? 0;
    } catch {
      return false;
    }
    if (size < this.#segmentBytes / 2 || this.#spare !== null || this.#closing !== null) return false;
    this.#spare = { path: seg.segPath, size };
    return true;
  }

  async #unlinkQuietly(p: string): Promise<void> {
    try {
      await this.#fs.unlink(p);
    } catch {
      // Already gone, or it stays as garbage that the next open removes.
    }
  }

  // -------------------------------------------------------------------------------------------
  // Reading

  async read(from: number, limit: number, maxBytes: number = Infinity): Promise<Uint8Array[]> {
    if (this.#closing !== null) throw closed(`log ${this.#dir}`);
    if (!isIndex(from) || !isIndex(limit)) throw invalid('read needs safe non-negative integers from and limit');
    if (typeof maxBytes !== 'number' || !(maxBytes >= 0)) throw invalid('maxBytes must be a non-negative number');
    if (from < this.#first) throw invalid(`read from ${from} is below the first index ${this.#first}`, { from, first: this.#first });
    const stop = Math.min(this.#end, from + Math.min(limit, Number.MAX_SAFE_INTEGER - from));
    if (from >= stop) return [];
    // A snapshot taken now makes the read see the log as of this call, whatever runs meanwhile:
    // the segment list (replaced, never mutated, by a structural change), and the staged records
    // not yet written (served from memory even if they are written while the read runs). Frames
    // once written never change in place, so the snapshot's segments keep serving them.
    const view: ReadView = {
      segments: this.#segments,
      staged: this.#pending.filter((op) => op.written === 0),
    };
    // Hold every segment the read may touch, so that none is unlinked under it.
    const kLo = segmentAt(view.segments, from);
    const kHi = segmentAt(view.segments, stop - 1);
    for (let k = kLo; k <= kHi; k++) view.segments[k]!.readers++;
    this.#readsInFlight++;
    try {
      const out: Uint8Array[] = [];
      const budget = { bytes: 0, max: maxBytes };
      let x = from;
      while (x < stop) {
        const mem = stagedRecord(view, x);
        if (mem !== undefined) {
          if (out.length > 0 && budget.bytes + mem.length > budget.max) break;
          out.push(mem.slice());
          budget.bytes += mem.length;
          x++;
          continue;
        }
        const runStop = Math.min(stop, nextStagedStart(view, x));
        const before = out.length;
        const more = await this.#readRun(view, x, runStop, out, budget);
        x += out.length - before;
        if (!more) break;
      }
      return out;
    } finally {
      for (let k = kLo; k <= kHi; k++) {
        const seg = view.segments[k]!;
        if (--seg.readers === 0 && seg.removed) this.#trackUnlink(this.#unlinkSegment(seg));
      }
      if (--this.#readsInFlight === 0 && this.#readsIdle !== null) this.#readsIdle.resolve();
    }
  }

  /**
   * Reads records [x, stop) of the one segment of the view holding x (stopping at its end) into
   * `out`. Answers false when the byte budget ended the read.
   */
  async #readRun(view: ReadView, x: number, stop: number, out: Uint8Array[], budget: { bytes: number; max: number }): Promise<boolean> {
    const at = segmentAt(view.segments, x);
    const seg = view.segments[at]!;
    const next = view.segments[at + 1];
    if (!(await this.#ensureTable(seg, x - seg.base + 1))) return false;
    const { handle, release } = await this.#acquire(seg);
    try {
      // A sealed segment may hold frames past its live count (a truncation sealed it there);
      // the next segment's base bounds it.
      const end = Math.min(stop, seg.base + seg.tableCount, next === undefined ? Infinity : next.base);
      let k = x - seg.base;
      const kEnd = end - seg.base;
      if (k >= kEnd) return false;
      while (k < kEnd) {
        // Plan one pread: whole frames, at most READ_CHUNK (or one larger frame), within budget.
        const start = seg.frameStart(k);
        let j = k;
        let span = 0;
        while (j < kEnd) {
          const fEnd = seg.frameEnd(j);
          const len = fEnd - seg.frameStart(j) - FRAME_HEADER_BYTES;
          if (out.length + (j - k) > 0 && budget.bytes + len > budget.max) break;
          if (j > k && fEnd - start > READ_CHUNK) break;
          budget.bytes += len;
          span = fEnd - start;
          j++;
        }
        if (j === k) return false;
        const buf = Buffer.allocUnsafe(span);
        let got: number;
        try {
          got = await handle.read(buf, start);
        } catch (err) {
          throw fromIo(err, 'read segment', seg.segPath);
        }
        for (let m = k; m < j; m++) {
          const off = seg.frameStart(m) - start;
          const len = seg.frameEnd(m) - seg.frameStart(m) - FRAME_HEADER_BYTES;
          const check = checkFrame(buf.subarray(0, got), off, seg.base + m, seg.salt, this.#maxRecordBytes);
          if (check !== 'ok' || buf.readUInt32LE(off + 4) !== len) {
            const why = check === 'ok' ? 'length' : check;
            throw corrupt(`segment ${seg.segPath}: record ${seg.base + m} at offset ${seg.frameStart(m)} fails its ${why} check`, {
              file: seg.segPath,
              offset: seg.frameStart(m),
              index: seg.base + m,
            });
          }
          out.push(buf.subarray(off + FRAME_HEADER_BYTES, off + FRAME_HEADER_BYTES + len));
        }
        k = j;
      }
      return true;
    } finally {
      release();
    }
  }

  #trackUnlink(p: Promise<void>): void {
    this.#deferredUnlinks.add(p);
    void p.finally(() => this.#deferredUnlinks.delete(p));
  }

  /** An fd-cache handle on the segment; checks its header the first time this log opens it. */
  async #acquire(seg: Segment): Promise<{ handle: FileHandle; release: () => void }> {
    let lease: { handle: FileHandle; release: () => void };
    try {
      lease = await this.#fdCache.acquire(this.#fs, seg.segPath);
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
        checkSegmentHeader(b.subarray(0, n), seg.segPath, seg.base, seg.id, this.#generation);
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
  async #ensureTable(seg: Segment, need: number): Promise<boolean> {
    seg.lastUse = ++this.#useTick;
    while (seg.offsets === null) {
      if (seg.loading === null) {
        seg.loading = this.#loadTable(seg, need).finally(() => {
          seg.loading = null;
        });
      }
      await seg.loading;
    }
    this.#evictTables();
    return seg.tableCount >= need;
  }

  async #loadTable(seg: Segment, need: number): Promise<void> {
    const want = Math.max(seg.count, need);
    const { handle, release } = await this.#acquire(seg);
    try {
      const size = await handle.size().catch((err: unknown) => {
        throw fromIo(err, 'stat segment', seg.segPath);
      });
      const idx = await this.#readIndexFile(seg, size);
      if (idx !== null && idx.count >= want && idx.endOffset <= size) {
        seg.offsets = idx.offsets;
        seg.tableCount = idx.count;
        seg.tableEnd = idx.endOffset;
        return;
      }
      // Missing, torn or stale index: rebuild it. A sealed segment must validate completely.
      const offsets = new Uint32Array(Math.max(16, want));
      let n = 0;
      const result = await scanFrames(handle, size, seg.salt, HEADER_BYTES, seg.base, this.#maxRecordBytes, want, (off) => {
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
      this.#stats.indexRebuilds++;
      // The rebuilt index is derived data: written without a sync (a torn one is rebuilt again).
      await this.#writeIndexFile(seg, encodeIndex(seg.base, seg.id, offsets, n, result.endOffset), false).catch(() => undefined);
    } finally {
      release();
    }
  }

  /** Reads and decodes `<segment>.idx`; null when absent or invalid (the caller rebuilds). */
  async #readIndexFile(seg: Segment, segmentSize: number): Promise<{ offsets: Uint32Array; count: number; endOffset: number } | null> {
    let h: FileHandle;
    try {
      h = await this.#fs.open(seg.idxPath, 'read');
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ENOENT') return null;
      throw fromIo(err, 'open index', seg.idxPath);
    }
    try {
      const size = await h.size();
      // A frame takes at least 16 bytes, so an index can never need more than this: a larger file
      // is not trusted to size an allocation.
      const bound = INDEX_HEADER_BYTES + 4 * Math.floor(Math.max(0, segmentSize - HEADER_BYTES) / FRAME_HEADER_BYTES);
      if (size > bound || size < INDEX_HEADER_BYTES) return null;
      const b = new Uint8Array(size);
      const n = await h.read(b, 0);
      return decodeIndex(b.subarray(0, n), seg.base, seg.id);
    } catch (err) {
      throw fromIo(err, 'read index', seg.idxPath);
    } finally {
      await h.close().catch(() => undefined);
    }
  }

  /** Keeps at most MAX_LOADED_TABLES sealed tables in memory (not those in use). */
  #evictTables(): void {
    const sealed = this.#segments.filter((s) => s !== this.#active && s.offsets !== null);
    if (sealed.length <= MAX_LOADED_TABLES) return;
    sealed.sort((a, b) => a.lastUse - b.lastUse);
    for (const s of sealed.slice(0, sealed.length - MAX_LOADED_TABLES)) {
      if (s.readers === 0 && s.loading === null) {
        s.offsets = null;
        s.tableCount = 0;
      }
    }
  }

  // -------------------------------------------------------------------------------------------
  // Closing

  /** Closes the cached handles of this log's segments (after a failed open). */
  async forgetFiles(): Promise<void> {
    for (const seg of this.#segments) await this.#fdCache.forget(this.#fs, seg.segPath);
  }

  close(): Promise<void> {
    if (this.#closing === null) this.#closing = this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    let failure: unknown = null;
    while (this.#pump !== null) await this.#pump;
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    if (this.#poison === null) {
      try {
        await this.#drain();
        // Record the active segment's table (every frame in it is synced now), so that the next
        // open scans only what is appended after this point.
        const seg = this.#active;
        await this.#cutStale(seg);
        if (seg.count > 0) {
          await this.#writeIndexFile(seg, encodeIndex(seg.base, seg.id, seg.offsets!, seg.count, seg.tableEnd), false);
        }
      } catch (err) {
        failure = err;
      }
    }
    while (this.#syncInFlight !== null) await this.#syncInFlight;
    if (this.#readsInFlight > 0) {
      this.#readsIdle = deferred();
      await this.#readsIdle.promise;
    }
    await Promise.all([...this.#deferredUnlinks]);
    if (this.#spare !== null) {
      await this.#unlinkQuietly(this.#spare.path);
      this.#spare = null;
    }
    if (this.#lease !== null) {
      this.#lease.release();
      this.#lease = null;
    }
    for (const seg of this.#segments) await this.#fdCache.forget(this.#fs, seg.segPath);
    await this.#cell.close().catch(() => undefined);
    await this.#lock.unlock().catch(() => undefined);
    await this.#lock.close().catch(() => undefined);
    if (failure !== null) throw failure;
  }
}

const ZEROS_BUF = Buffer.from(ZEROS.buffer, ZEROS.byteOffset, ZEROS.byteLength);

/** What a read sees: the segment list and the unwritten staged appends as of its call. */
interface ReadView {
  segments: Segment[];
  staged: AppendOp[];
}

/** The position in `list` of the segment holding index `i` (largest base <= i). */
function segmentAt(list: Segment[], i: number): number {
  let lo = 0;
  let hi = list.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (list[mid]!.base <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** The staged record at index x, newest staging first (a truncation may re-stage an index). */
function stagedRecord(view: ReadView, x: number): Uint8Array | undefined {
  const staged = view.staged;
  for (let k = staged.length - 1; k >= 0; k--) {
    const op = staged[k]!;
    if (x >= op.first && x < op.first + op.records.length) return op.records[x - op.first];
  }
  return undefined;
}

/** Smallest index above x where a staged append starts (where a disk run must stop). */
function nextStagedStart(view: ReadView, x: number): number {
  let next = Number.MAX_SAFE_INTEGER;
  for (const op of view.staged) if (op.first > x && op.first < next) next = op.first;
  return next;
}

