// The syncer: when written groups become durable, and what a failed sync does.
//
// Owns: `Syncer` — the sequence numbers of group writes (written, covered by a sync started,
// covered by a sync finished), the one sync in flight, the policy's timer, the written appends'
// durable promises waiting for their sync (resolved in write order; the appends themselves are
// not kept: written, they are read from the file), the active segment's table as of its last
// sync (what a failed sync rolls back to), the index checkpoints of the active segment, and the
// poison. Guarantees (docs/crash-safety.md, segmented log):
// - an append's `durable` resolves only after an fdatasync issued after its group's write
//   finished (sync-before-ack: asserted where it resolves); one sync at a time;
// - a failed fsync is not retried (the kernel may have dropped the pages): the log is poisoned,
//   every waiter fails, and the view rolls back to what was last synced;
// - a checkpoint claims only frames a sync has made durable, and is written only after that sync
//   finished: it is the durable floor recovery holds the segment to. It is synced off the append
//   path (a torn or lost one means a lower floor and a longer scan at the next open, never a
//   false one).

import { setImmediate as nextTurn } from 'node:timers/promises';
import { assert } from '../lib/assert.js';
import type { Deferred } from '../lib/deferred.js';
import { fromIo, type SeglogError } from '../lib/errors.js';
import { HEADER_BYTES, encodeIndex } from './format.js';
import { failDurable, type AppendOp, type OpQueue } from './queue.js';
import type { Segment } from './segment.js';
import type { SegmentFiles } from './segment-files.js';
import type { LogState } from './state.js';

const MiB = 1 << 20;
/**
 * The active segment's index is rewritten (unsynced: it is derived data) each time at least this
 * much more of it, and at least CHECKPOINT_RECORDS more records, are synced, so that recovery
 * after a crash scans at most about that much of its tail (never more than the segment). The
 * record count keeps large records from paying four file calls every few appends (1 MiB records:
 * every 64 MiB, about once per default segment, instead of every 4 MiB).
 */
const CHECKPOINT_BYTES = 4 * MiB;
const CHECKPOINT_RECORDS = 64;

export class Syncer {
  readonly #s: LogState;
  readonly #files: SegmentFiles;
  readonly #queue: OpQueue;

  #writeSeq = 0; // group writes done
  #issuedSeq = 0; // covered by a sync started
  #syncedSeq = 0; // covered by a sync finished
  #syncInFlight: Promise<void> | null = null;
  #syncWanted = false;
  #timer: NodeJS.Timeout | null = null;
  /**
   * Written appends waiting for the sync that covers them, in write order: each one's durable
   * promise and the sequence number of its write, in two parallel arrays. Not the appends
   * themselves: a written append is served from its segment, and its records (and the op) are
   * garbage once no read that began before the write holds them. A journaled group log is synced
   * only by its node journal's checkpoint, so what waited here was every record written since the
   * last one (16 MiB of them), kept alive until then, and copied by every young collection.
   */
  #unsyncedDurable: Deferred[] = [];
  #unsyncedSeq: number[] = [];
  /** Active segment's table as of the last completed sync (rolled back to on a failed sync). */
  #durableCount = 0;
  #durableEnd = HEADER_BYTES;
  /** Active segment offset covered by its last index checkpoint. */
  #checkpointEnd = HEADER_BYTES;
  /** Active segment records covered by its last index checkpoint. */
  #checkpointCount = 0;
  #checkpointing: Promise<void> | null = null;

  constructor(s: LogState, files: SegmentFiles, queue: OpQueue) {
    this.#s = s;
    this.#files = files;
    this.#queue = queue;
  }

  /** Group writes covered by a finished sync. */
  get syncedSeq(): number {
    return this.#syncedSeq;
  }

  /** The sync in flight, if any. */
  get inFlight(): Promise<void> | null {
    return this.#syncInFlight;
  }

  /**
   * A segment became the active one with its `count` records and `tableEnd` durable (recovery
   * synced it; or a structural change made it, empty or sealed-then-reopened): the baseline of
   * a rollback and of the next checkpoint.
   */
  adoptActive(seg: Segment): void {
    this.#durableCount = seg.count;
    this.#durableEnd = seg.tableEnd;
    this.#checkpointEnd = seg.tableEnd;
    this.#checkpointCount = seg.count;
  }

  /** A group of `ops` (`bytes` frame bytes) was written: they wait for the sync that covers it. */
  written(ops: AppendOp[], bytes: number): void {
    const seq = ++this.#writeSeq;
    this.#s.schedule.written(ops, bytes);
    for (const op of ops) {
      op.written = op.records.length;
      op.seq = seq;
      this.#unsyncedDurable.push(op.durable);
      this.#unsyncedSeq.push(seq);
      op.done?.resolve();
    }
  }

  /** Waits until every written group has its sync started (the pipeline of two under 'always'). */
  async waitSyncIssued(): Promise<void> {
    while (this.#issuedSeq < this.#writeSeq && this.#s.poison === null) {
      if (this.#syncInFlight !== null) await this.#syncInFlight;
      else this.#startSync();
    }
  }

  /** Starts a sync when the policy (or a request) wants one, or arms the policy's timer. */
  maybeSync(): void {
    const s = this.#s;
    if (this.#syncedSeq === this.#writeSeq || s.poison !== null) return;
    if (this.#syncWanted || s.schedule.due()) {
      if (this.#syncInFlight === null) this.#startSync();
      return;
    }
    const ms = s.schedule.timerMs();
    if (ms > 0 && this.#timer === null) {
      this.#timer = setTimeout(() => {
        this.#timer = null;
        this.#syncWanted = true;
        this.maybeSync();
      }, ms);
      this.#timer.unref();
    }
  }

  #startSync(): void {
    const s = this.#s;
    assert(this.#syncInFlight === null, 'one sync at a time');
    assert(s.lease !== null, 'the active segment is held while data is unsynced');
    const target = this.#writeSeq;
    const seg = s.active;
    const count = seg.count;
    const end = seg.tableEnd;
    const handle = s.lease.handle;
    this.#issuedSeq = target;
    this.#syncWanted = false;
    s.schedule.syncStarted();
    s.stats.syncs++;
    // One append waits for this sync and nothing is queued behind it: the policy may sync inline.
    const lone = this.#unsyncedSeq.length === 1 && this.#queue.length === 0;
    // mistakes.ackBeforeSync: the sync starts a turn late, so that the acknowledgement really
    // comes first (a MemoryFs call takes effect the moment it is made).
    const synced = s.mistakes.ackBeforeSync === true ? nextTurn().then(() => handle.datasync()) : s.syncs.datasync(handle, lone, s.owner);
    this.#syncInFlight = synced.then(
      () => {
        this.#syncInFlight = null;
        if (s.poison !== null) return;
        assert(target >= this.#syncedSeq, 'syncs finish in the order they were issued');
        this.#syncedSeq = target;
        if (seg === s.active) {
          this.#durableCount = count;
          this.#durableEnd = end;
          const due = end - this.#checkpointEnd >= CHECKPOINT_BYTES && count - this.#checkpointCount >= CHECKPOINT_RECORDS;
          if (due && this.#checkpointing === null) this.#checkpoint(seg, count, end);
        }
        // One splice, not a shift per append: under a lazy policy thousands wait for one sync,
        // and each shift of a long array moves all the others (quadratic).
        let covered = 0;
        while (covered < this.#unsyncedSeq.length && this.#unsyncedSeq[covered]! <= target) covered++;
        const seqs = this.#unsyncedSeq.splice(0, covered);
        const durables = this.#unsyncedDurable.splice(0, covered);
        for (let k = 0; k < covered; k++) {
          assert(seqs[k]! <= this.#syncedSeq, 'an append is durable only after the sync that covers its write');
          durables[k]!.resolve();
        }
        this.maybeSync();
        if (s.pump === null) this.releaseLeaseIfIdle();
      },
      (err: unknown) => {
        this.#syncInFlight = null;
        this.poison(fromIo(err, 'sync', seg.segPath));
      },
    );
  }

  /**
   * Rewrites the active segment's index to claim its first `count` frames, which a sync has just
   * made durable: recovery trusts them without a scan, and takes them as the log's durable floor
   * (a shortfall below it is damage, not a torn tail). Synced (with the directory the first time
   * this process writes the segment's index), off the append path: no append waits for it. A
   * failed or lost checkpoint leaves the previous floor, a torn one none (it fails its CRC): a
   * longer scan, never a false claim.
   */
  #checkpoint(seg: Segment, count: number, end: number): void {
    const bytes = encodeIndex(seg.base, seg.id, seg.offsets!, count, end);
    this.#checkpointEnd = end;
    this.#checkpointCount = count;
    this.#checkpointing = this.#files
      .writeIndexFile(seg, bytes, true)
      .then(async () => {
        if (seg.indexNamed) return;
        await this.#files.syncDirectory();
        seg.indexNamed = true;
      })
      .catch(() => undefined)
      .finally(() => {
        this.#checkpointing = null;
      });
  }

  /** Waits until everything written is synced (starting a sync if needed) and no checkpoint runs. */
  async drain(): Promise<void> {
    for (;;) {
      if (this.#s.poison !== null) throw this.#s.poison;
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

  /** Releases the active segment's handle once nothing is queued, unsynced or syncing. */
  releaseLeaseIfIdle(): void {
    if (this.#s.lease !== null && this.#queue.length === 0 && this.#syncedSeq === this.#writeSeq && this.#syncInFlight === null) {
      this.#s.releaseLease();
    }
  }

  /**
   * A failed fsync is not retryable (the kernel may have dropped the pages): refuse every later
   * write, fail every waiter, and roll the view back to what was last synced.
   */
  poison(err: SeglogError): void {
    const s = this.#s;
    if (s.poison !== null) return;
    s.poison = err;
    for (const durable of this.#unsyncedDurable) failDurable(durable, err);
    this.#unsyncedDurable = [];
    this.#unsyncedSeq = [];
    this.#queue.failQueued(err);
    this.#queue.pending = [];
    const seg = s.active;
    if (seg !== undefined) {
      seg.count = seg.tableCount = Math.min(seg.tableCount, this.#durableCount);
      seg.tableEnd = this.#durableEnd;
      s.end = seg.base + seg.count;
      s.first = Math.min(s.physFirst, s.end);
    }
    this.stopTimer();
  }

  stopTimer(): void {
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
  }
}
