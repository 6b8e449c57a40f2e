// The operations of a segmented log in call order, and how a failure unwinds them.
//
// Owns: the operation shapes (`AppendOp`, `StructOp`), `OpQueue` — the operations admitted and not
// yet started, in call order, and the staged appends whose records are not all written (reads
// serve those from memory) — and the three ways queued work fails: `failFrom` (a write failed:
// the failed records and everything after them vanish, leaving no hole), `failQueued` (the log is
// poisoned) and `rejectOps`. Guarantees: operations leave the queue only from its head, in the
// order they were admitted (the writer takes a group of appends, or one structural change), so
// that they take effect in call order; the thread's record of queued writers
// (lib/fs/inline-sync.ts) follows every change of the queue, and of whether the log holds its
// queue back (write-behind: work that waits for bytes or a checkpoint, not for the event loop, is
// not queued work there — else one idle journaled group would send every lone writer of the
// thread to the pool).

import { assert } from '../lib/assert.js';
import type { Deferred } from '../lib/deferred.js';
import type { SeglogError } from '../lib/errors.js';
import { setQueued } from '../lib/fs/inline-sync.js';
import type { LogState } from './state.js';

export interface AppendOp {
  kind: 'append';
  first: number;
  records: Uint8Array[];
  frameBytes: number;
  /** Records of this op already written to a segment (then served from the file, not memory). */
  written: number;
  /** Sequence number of the group write that carried it. */
  seq: number;
  /**
   * Written (or failed); made only for an append whose caller waits for the write alone (a
   * policy that acknowledges before the sync): the others wait for `durable`, and a promise per
   * append that nobody awaits is garbage on the append path.
   */
  done: Deferred | null;
  durable: Deferred;
}

export interface StructOp {
  kind: 'truncate' | 'drop' | 'reset' | 'sync';
  index: number;
  done: Deferred;
}

export type Op = AppendOp | StructOp;

export class OpQueue {
  readonly #s: LogState;
  /** Operations not yet started, in call order. */
  ops: Op[] = [];
  /** Staged appends whose records are (partly) unwritten: reads take those records from memory. */
  pending: AppendOp[] = [];
  /** Frame bytes of the queued appends, and the queued operations that are not appends (`holdsWrites`, log.ts). */
  queuedAppendBytes = 0;
  queuedOthers = 0;
  /** Whether the log holds the queued operations back (its write-behind); set once by the log. */
  held: () => boolean = () => false;

  constructor(s: LogState) {
    this.#s = s;
  }

  get length(): number {
    return this.ops.length;
  }

  push(op: Op): void {
    if (op.kind === 'append') {
      this.pending.push(op);
      this.queuedAppendBytes += op.frameBytes;
    } else this.queuedOthers++;
    this.ops.push(op);
    this.changed();
  }

  /** Takes the head operation (a structural change). */
  shift(): Op {
    const op = this.ops.shift()!;
    if (op.kind === 'append') this.queuedAppendBytes -= op.frameBytes;
    else this.queuedOthers--;
    this.changed();
    return op;
  }

  /** Takes the first `n` operations (a group of appends about to be written). */
  take(n: number): void {
    for (const op of this.ops.splice(0, n)) {
      if (op.kind === 'append') this.queuedAppendBytes -= op.frameBytes;
      else this.queuedOthers--;
    }
    this.changed();
  }

  /**
   * Tells the thread's sync policies whether this log has work queued that waits for the event
   * loop (after the queue or the log's holding changed).
   */
  changed(): void {
    setQueued(this.#s.owner, this.ops.length > 0 && !this.held());
  }

  /** Written appends: their records are now served from the file. */
  removePending(ops: AppendOp[]): void {
    // Written ops are (almost always) the oldest pending ones.
    const gone = new Set(ops);
    this.pending = this.pending.filter((op) => !gone.has(op));
  }

  /**
   * Rejects `op` and everything queued after it (their indices depend on it), and rolls the
   * logical state back to the physical one: the failed records vanish, leaving no hole.
   */
  failFrom(op: AppendOp, err: SeglogError, taken: AppendOp[] = []): void {
    const queued = this.ops.splice(0);
    this.queuedAppendBytes = this.queuedOthers = 0;
    this.changed();
    const failed: Op[] = [...taken, ...queued];
    assert(taken.length > 0 || queued[0] === op, 'the failed op heads the queue');
    for (const o of failed) {
      o.done?.reject(err);
      if (o.kind === 'append') failDurable(o.durable, err);
    }
    this.pending = [];
    const s = this.#s;
    s.end = s.physEnd();
    s.first = s.physFirst;
  }

  /** Rejects every queued operation (the log is poisoned). */
  failQueued(err: SeglogError): void {
    const queued = this.ops.splice(0);
    this.queuedAppendBytes = this.queuedOthers = 0;
    this.changed();
    for (const o of queued) {
      o.done?.reject(err);
      if (o.kind === 'append') failDurable(o.durable, err);
    }
  }
}

/** Rejects appends taken from the queue whose write cannot count. */
export function rejectOps(ops: AppendOp[], err: SeglogError): void {
  for (const o of ops) {
    o.done?.reject(err);
    failDurable(o.durable, err);
  }
}

/**
 * Rejects an append's `durable` without its rejection ever being reported as unhandled: whoever
 * waits for it (an `append`, a `stage` caller that kept it) sees it as before; one nobody kept
 * must not end the process. A journaled Raft group keeps none but its newest (lib/raft/fs-log.ts,
 * "#watchLog": a handler per append would keep every append alive until the journal's
 * checkpoint syncs the group's log); the failure reaches the log's owner through that one, and
 * through the poison that refuses every later call.
 */
export function failDurable(durable: Deferred, err: SeglogError): void {
  durable.promise.catch(() => undefined);
  durable.reject(err);
}
