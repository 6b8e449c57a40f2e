// Which thread waits for a writer's syncs: a running estimate of how long they take, and what
// else this thread's writers have in hand.
//
// Owns: `InlineSyncPolicy`, and the thread-wide record of writers with work queued (`setQueued`)
// and of the syncs the policies sent to the pool. A writer about to sync one lone group (nothing
// else of its own in flight) syncs through `datasync(handle, true, writer)`: the sync waits on the
// calling thread ('inline') when no other writer of this thread has work queued, no sync sent
// through a policy is on the pool, and this policy's recent syncs took less than `belowMs` on
// average; else on the pool. Guarantees: where a sync waits changes nothing of what is durable or
// of the order of writes and syncs; the event loop is blocked by an inline sync only while syncs
// have been fast (one slow sync, a disk stall, lifts the mean past the bound, and the next syncs
// go to the pool until pool syncs show the disk fast again) and only when nothing else of this
// thread's stores waits for the loop; a bound of 0 never blocks. The first sync of a policy goes
// to the pool (nothing is known yet).

import type { FileHandle, SyncWhere } from './types.js';

/** How much of the mean one new sync's duration moves (an exponentially weighted mean). */
const WEIGHT = 1 / 8;

/** Writers of this thread (host committers, segmented logs) with work queued and not yet issued. */
const queuedWriters = new Set<object>();
/** Syncs sent to the pool through a policy and not answered yet. */
let poolSyncs = 0;

/**
 * Records whether `writer` has work queued that it has not issued yet. Call it whenever the
 * writer's queue changes (idempotent: the record follows the last call).
 */
export function setQueued(writer: object, queued: boolean): void {
  if (queued) queuedWriters.add(writer);
  else queuedWriters.delete(writer);
}

/** Whether a writer other than `self` has work queued, or a policy's sync is on the pool. */
export function othersBusy(self: object): boolean {
  return poolSyncs > 0 || queuedWriters.size > (queuedWriters.has(self) ? 1 : 0);
}

export class InlineSyncPolicy {
  /** Syncs that take longer than this on average stay on the pool (ms; 0: always the pool). */
  readonly belowMs: number;
  #meanMs: number | null = null;

  constructor(belowMs: number) {
    if (!Number.isFinite(belowMs) || belowMs < 0) throw new RangeError(`belowMs must be a non-negative number, not ${belowMs}`);
    this.belowMs = belowMs;
  }

  /** The mean duration of the syncs seen so far (ms), or null before the first. */
  get meanMs(): number | null {
    return this.#meanMs;
  }

  /** Whether recent syncs were fast enough for a lone writer's sync to wait inline. */
  fast(): boolean {
    return this.#meanMs !== null && this.#meanMs < this.belowMs;
  }

  /** Where `writer`'s next sync waits, given whether its own work is only this sync (`lone`). */
  where(lone: boolean, writer: object): SyncWhere {
    return lone && this.fast() && !othersBusy(writer) ? 'inline' : 'pool';
  }

  /** Counts one sync that took `ms` (wherever it waited). */
  observe(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) return;
    this.#meanMs = this.#meanMs === null ? ms : this.#meanMs + (ms - this.#meanMs) * WEIGHT;
  }

  /** fdatasyncs `handle` for `writer`, where `where(lone, writer)` says; timed. */
  async datasync(handle: FileHandle, lone: boolean, writer: object): Promise<void> {
    const where = this.where(lone, writer);
    const started = performance.now();
    if (where === 'inline') await handle.datasync('inline');
    else {
      poolSyncs++;
      try {
        await handle.datasync('pool');
      } finally {
        poolSyncs--;
      }
    }
    this.observe(performance.now() - started);
  }
}
