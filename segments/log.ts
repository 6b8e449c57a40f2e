// The segmented log: an append-only sequence of records addressed by index, stored as a directory
// of segment files under a manifest.
//
// Owns: `openSegmentedLog` and the log it returns — the facade: the public calls, their
// admission (checks, index assignment, call order), the writer loop that takes queued operations
// in call order, and close. The work is done by the rooms listed in segments/README.md.
// Guarantees (argued step by step in docs/crash-safety.md (segmented log); the bytes are in
// docs/format.md (segmented log)):
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
import { makeDirectories } from '../lib/fs/make-dirs.js';
import * as path from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { assert, isIndex } from '../lib/assert.js';
import { deferred } from '../lib/deferred.js';
import { SeglogError, closed, fromIo, invalid, poisoned } from '../lib/errors.js';
import type { FileHandle } from '../lib/fs/types.js';
import type { InlineSyncPolicy } from '../lib/fs/inline-sync.js';
import { FRAME_HEADER_BYTES, LOCK_NAME, MANIFEST_NAME, encodeIndex } from './format.js';
import { openManifestCell, type ManifestCell } from './manifest.js';
import { parseLogOptions, type LogConfig, type SegmentedLogOptions } from './options.js';
import { OpQueue, type AppendOp, type StructOp } from './queue.js';
import { Reader } from './reader.js';
import { recoverLog } from './recovery.js';
import { SegmentFiles } from './segment-files.js';
import { Spares } from './spare.js';
import { LogState } from './state.js';
import { Structure } from './structure.js';
import { Syncer } from './syncer.js';
import { TableCache } from './table-cache.js';
import type { SegmentedLog, SegmentedLogStats } from './types.js';
import { GroupWriter } from './writer.js';
import { SyncSchedule, parseSyncPolicy, type SyncPolicy } from './sync-policy.js';

/** Frame bytes of one stage() call: a batch never splits across segments, so it must fit a file. */
const MAX_BATCH_FRAME_BYTES = 2048 * (1 << 20);

/** Opens (creating if needed) the segmented log stored in directory `dir`. */
export async function openSegmentedLog(dir: string, options: SegmentedLogOptions = {}): Promise<SegmentedLog> {
  const config = parseLogOptions(dir, options);
  const fs = config.fs;
  // One turn of the event loop first: a reopen may make every file-system call on the calling
  // thread (lib/fs/real.ts), and a loop of opens would never let timers or I/O run.
  await nextTurn();
  // Directories this call creates must be made durable in their parents (a new directory is an
  // entry of its parent): the new-log path syncs them before its first manifest.
  let created: string[];
  try {
    created = await makeDirectories(fs, dir);
  } catch (err) {
    throw fromIo(err, 'create log directory', dir);
  }
  // An owner-locked log relies on its owner's lock (options.ts, OwnerLocked): no LOCK of its own.
  const lock = config.ownerLocked ? null : await lockDirectory(fs, dir, LOCK_NAME);
  let cell: ManifestCell | null = null;
  try {
    cell = await openManifestCell(path.join(dir, MANIFEST_NAME), fs, config.ownerLocked, config.knownDurable, config.manifestSlotBytes);
    const log = new Log(dir, config, lock, cell);
    try {
      await log.recover(config.firstIndex, created);
    } catch (err) {
      await log.forgetFiles();
      throw err;
    }
    return log;
  } catch (err) {
    if (cell !== null) await cell.close().catch(() => undefined);
    await lock?.close().catch(() => undefined);
    throw err;
  }
}

class Log implements SegmentedLog {
  readonly #s: LogState;
  readonly #lock: FileHandle | null;
  readonly #queue: OpQueue;
  readonly #files: SegmentFiles;
  readonly #tables: TableCache;
  readonly #spares: Spares;
  readonly #syncer: Syncer;
  readonly #structure: Structure;
  readonly #writer: GroupWriter;
  readonly #reader: Reader;
  /** setWriteBehind's threshold (0: none). */
  #writeBehind = 0;
  /** An append or a structural change (truncate, drop, reset) was issued since open. */
  #changed = false;

  constructor(dir: string, config: LogConfig, lock: FileHandle | null, cell: ManifestCell) {
    const s = (this.#s = new LogState(dir, config, cell, this));
    this.#lock = lock;
    this.#queue = new OpQueue(s);
    this.#queue.held = () => this.#holdsWrites();
    this.#files = new SegmentFiles(s);
    this.#tables = new TableCache(s, this.#files);
    this.#spares = new Spares(s, this.#files);
    this.#syncer = new Syncer(s, this.#files, this.#queue);
    this.#structure = new Structure(s, this.#files, this.#tables, this.#spares, this.#syncer);
    this.#writer = new GroupWriter(s, this.#queue, this.#tables, this.#structure, this.#syncer);
    this.#reader = new Reader(s, this.#queue, this.#tables, this.#structure);
  }

  /** Where a lone append's sync waits (set at open from `inlineSyncBelowMs`). @internal */
  get syncs(): InlineSyncPolicy {
    return this.#s.syncs;
  }
  /** Where a lone group's write waits (set at open from `inlineSyncBelowMs`). @internal */
  get writes(): InlineSyncPolicy {
    return this.#s.writes;
  }

  /**
   * Replaces the sync policy from now on; what is written and not yet synced is synced as the new
   * one says (at once under 'always'). For an owner whose records are made durable some other
   * way part of the time (a Raft node's journal, lib/raft/fs-log.ts). Whatever the policy, a
   * record's `durable` still settles only after a sync that covers it. @internal
   */
  setSyncPolicy(policy: SyncPolicy): void {
    this.#s.schedule = new SyncSchedule(parseSyncPolicy(policy));
    this.#syncer.maybeSync();
  }

  /**
   * Holds staged appends back from the file until `bytes` of frames wait (0: writes them at once,
   * the default), or a sync, a structural change or the close needs them written: for an owner
   * whose records are durable elsewhere (a Raft node's journal), so that one write carries many
   * appends. Held records are served to readers from memory, as every unwritten one is. @internal
   */
  setWriteBehind(bytes: number): void {
    assert(isIndex(bytes), 'write-behind is a byte count');
    this.#writeBehind = bytes;
    this.#queue.changed();
    if (bytes === 0 || this.#queue.queuedAppendBytes >= bytes) this.#kick();
  }

  /** Staged appends wait (setWriteBehind): too few bytes of them, and nothing behind them needs them written. */
  #holdsWrites(): boolean {
    const q = this.#queue;
    return this.#writeBehind > 0 && q.queuedOthers === 0 && q.queuedAppendBytes < this.#writeBehind && this.#s.closing === null;
  }

  get firstIndex(): number {
    return this.#s.first;
  }
  get endIndex(): number {
    return this.#s.end;
  }

  stats(): SegmentedLogStats {
    return { ...this.#s.stats, segments: this.#s.segments.length };
  }

  /** Reads the manifest, removes garbage, validates the last segment and cuts its torn tail. */
  recover(firstIndex: number, createdDirs: readonly string[]): Promise<void> {
    return recoverLog({ s: this.#s, files: this.#files, tables: this.#tables, structure: this.#structure, syncer: this.#syncer }, firstIndex, createdDirs);
  }

  // -------------------------------------------------------------------------------------------
  // Admission: checks, indices, call order

  #checkWritable(): void {
    const s = this.#s;
    if (s.closing !== null) throw closed(`log ${s.dir}`);
    if (s.poison !== null) throw poisoned(`log ${s.dir}`, s.poison);
  }

  stage(records: Uint8Array[]): { first: number; durable: Promise<void> } {
    const { first, op } = this.#stage(records, false);
    return { first, durable: op === null ? Promise.resolve() : op.durable.promise };
  }

  async append(records: Uint8Array[]): Promise<number> {
    // mistakes.ackBeforeSync: resolves once written, as the other policies do.
    const afterSync = this.#s.schedule.acksAfterSync && this.#s.mistakes.ackBeforeSync !== true;
    const { first, op } = this.#stage(records, !afterSync);
    if (op === null) return first;
    if (afterSync) {
      await op.durable.promise;
      assert(this.#syncer.syncedSeq >= op.seq, 'an append is acknowledged only after the sync that covers it');
    } else {
      assert(op.done !== null, 'an append acknowledged once written has a written promise');
      op.durable.promise.catch(() => undefined);
      await op.done.promise;
    }
    return first;
  }

  /** `whenWritten`: the caller waits for the write alone (AppendOp.done). */
  #stage(records: Uint8Array[], whenWritten: boolean): { first: number; op: AppendOp | null } {
    const s = this.#s;
    this.#checkWritable();
    if (!Array.isArray(records)) throw invalid('records must be an array of Uint8Array');
    let frameBytes = 0;
    for (const r of records) {
      if (!(r instanceof Uint8Array)) throw invalid('records must be an array of Uint8Array');
      if (r.length > s.maxRecordBytes) {
        throw new SeglogError('TOO_LARGE', `record of ${r.length} bytes exceeds maxRecordBytes ${s.maxRecordBytes}`, {
          details: { length: r.length, max: s.maxRecordBytes },
        });
      }
      frameBytes += FRAME_HEADER_BYTES + r.length;
    }
    if (frameBytes > MAX_BATCH_FRAME_BYTES) {
      throw new SeglogError('TOO_LARGE', `a batch of ${frameBytes} frame bytes exceeds ${MAX_BATCH_FRAME_BYTES}`, {
        details: { bytes: frameBytes },
      });
    }
    const first = s.end;
    if (!Number.isSafeInteger(first + records.length)) throw invalid('log index would pass 2^53');
    if (records.length === 0) return { first, op: null };
    this.#changed = true;
    s.end += records.length;
    const op: AppendOp = {
      kind: 'append',
      first,
      records: records.slice(),
      frameBytes,
      written: 0,
      seq: 0,
      done: whenWritten ? deferred() : null,
      durable: deferred(),
    };
    op.done?.promise.catch(() => undefined);
    this.#queue.push(op);
    this.#kick();
    return { first, op };
  }

  sync(): Promise<void> {
    return this.#struct('sync', 0);
  }

  truncateAfter(index: number): Promise<void> {
    const s = this.#s;
    try {
      this.#checkWritable();
      if (!isIndex(index)) throw invalid('truncateAfter needs a safe non-negative integer index');
      if (index < s.first) {
        throw invalid(`truncateAfter(${index}) is below the first index ${s.first}`, { index, first: s.first });
      }
    } catch (err) {
      return Promise.reject(err);
    }
    if (index >= s.end) return Promise.resolve();
    s.end = index;
    return this.#struct('truncate', index);
  }

  dropBefore(index: number): Promise<void> {
    const s = this.#s;
    try {
      this.#checkWritable();
      if (!isIndex(index)) throw invalid('dropBefore needs a safe non-negative integer index');
    } catch (err) {
      return Promise.reject(err);
    }
    if (index <= s.first) return Promise.resolve();
    const first = Math.min(index, s.end);
    s.first = first;
    return this.#struct('drop', first);
  }

  reset(nextIndex: number): Promise<void> {
    try {
      this.#checkWritable();
      if (!isIndex(nextIndex)) throw invalid('reset needs a safe non-negative integer index');
    } catch (err) {
      return Promise.reject(err);
    }
    this.#s.first = this.#s.end = nextIndex;
    return this.#struct('reset', nextIndex);
  }

  #struct(kind: StructOp['kind'], index: number): Promise<void> {
    try {
      this.#checkWritable();
    } catch (err) {
      return Promise.reject(err);
    }
    const op: StructOp = { kind, index, done: deferred() };
    if (kind !== 'sync') this.#changed = true;
    this.#queue.push(op);
    this.#kick();
    return op.done.promise;
  }

  read(from: number, limit: number, maxBytes: number = Infinity): Promise<Uint8Array[]> {
    return this.#reader.read(from, limit, maxBytes);
  }

  // -------------------------------------------------------------------------------------------
  // The writer loop: operations in call order

  #kick(): void {
    const s = this.#s;
    if (s.pump !== null || this.#holdsWrites()) return;
    s.pump = this.#run().finally(() => {
      s.pump = null;
      // An op may have been queued after the loop saw an empty queue but before this ran.
      if (this.#queue.length > 0) this.#kick();
      else this.#syncer.releaseLeaseIfIdle();
    });
  }

  /** Takes operations in call order; appends go out in groups. */
  async #run(): Promise<void> {
    const s = this.#s;
    while (this.#queue.length > 0) {
      if (s.poison !== null) {
        this.#queue.failQueued(s.poison);
        return;
      }
      const head = this.#queue.ops[0]!;
      if (head.kind !== 'append') {
        this.#queue.shift();
        try {
          await this.#syncer.drain();
          await this.#structural(head);
          head.done.resolve();
        } catch (err) {
          const e = err instanceof SeglogError ? err : fromIo(err, 'change', s.dir);
          this.#syncer.poison(e);
          head.done.reject(e);
        }
        continue;
      }
      // Group commit: let the event loop run once so that concurrent appenders join the group;
      // under 'always', also wait until every written group has its sync started (pipeline of 2).
      await nextTurn();
      if (this.#holdsWrites()) return;
      if (s.schedule.acksAfterSync) await this.#syncer.waitSyncIssued();
      if (s.poison !== null) continue;
      try {
        await this.#writer.writeNextGroup();
      } catch (err) {
        // Structural failure inside a roll: the log cannot know its manifest's state. Poison.
        const e = err instanceof SeglogError ? err : fromIo(err, 'roll', s.dir);
        this.#syncer.poison(e);
      }
    }
  }

  async #structural(op: StructOp): Promise<void> {
    switch (op.kind) {
      case 'sync':
        return;
      case 'truncate':
        return this.#structure.truncate(op.index);
      case 'drop':
        return this.#structure.drop(op.index);
      case 'reset':
        return this.#structure.reset(op.index);
    }
  }

  // -------------------------------------------------------------------------------------------
  // Closing

  /** Closes the cached handles of this log's segments (after a failed open). */
  async forgetFiles(): Promise<void> {
    const s = this.#s;
    for (const seg of s.segments) await s.fdCache.forget(s.fs, seg.segPath);
  }

  close(): Promise<void> {
    if (this.#s.closing === null) this.#s.closing = this.#close();
    return this.#s.closing;
  }

  async #close(): Promise<void> {
    const s = this.#s;
    let failure: unknown = null;
    // Held appends (setWriteBehind) are written and synced like every other.
    this.#writeBehind = 0;
    this.#queue.changed();
    if (this.#queue.length > 0) this.#kick();
    while (s.pump !== null) await s.pump;
    this.#syncer.stopTimer();
    if (s.poison === null) {
      try {
        await this.#syncer.drain();
        // Record the active segment's table (every frame in it is synced now), so that the next
        // open scans only what is appended after this point, and knows how far the log reached:
        // synced, file and name, it is the durable floor below which a shortfall is damage.
        const seg = s.active;
        await this.#structure.cutStale(seg);
        // Unless nothing changed since an open that found that table durable in the index.
        if (seg.count > 0 && (this.#changed || !seg.indexDurable)) {
          await this.#files.writeIndexFile(seg, encodeIndex(seg.base, seg.id, seg.offsets!, seg.count, seg.tableEnd), true);
          if (!seg.indexNamed) await this.#files.syncDirectory();
          seg.indexNamed = true;
        }
      } catch (err) {
        failure = err;
      }
    }
    while (this.#syncer.inFlight !== null) await this.#syncer.inFlight;
    await this.#reader.idle();
    await this.#structure.settleUnlinks();
    await this.#spares.discard();
    s.releaseLease();
    for (const seg of s.segments) await s.fdCache.forget(s.fs, seg.segPath);
    await s.cell.close().catch(() => undefined);
    await this.#lock?.unlock().catch(() => undefined);
    await this.#lock?.close().catch(() => undefined);
    if (failure !== null) throw failure;
  }
}
