// Which thread waits for a writer's syncs (and its large writes): a running estimate of how long
// they take, and what else this thread's writers have in hand.
//
// Owns: `InlineSyncPolicy`, and the thread-wide record of writers with work queued (`setQueued`)
// and of the calls the policies sent to the pool. A writer about to sync one lone group (nothing
// else of its own in flight) syncs through `datasync(handle, true, writer)`: the sync waits on the
// calling thread ('inline') when no other writer of this thread has work queued, no call sent
// through a policy is on the pool, and this policy's recent calls took less than `belowMs` on
// average; else on the pool. A writer keeps one policy per kind of call (its syncs; its group
// writes, through `where` and `run`), so that each mean is of like calls. Guarantees: where a call
// waits changes nothing of what is durable or of the order of writes and syncs; the event loop is
// blocked by an inline call only while such calls have been fast (one slow call, a disk stall,
// lifts the mean past the bound, and the next ones go to the pool until pool calls show the disk
// fast again) and only when nothing else of this thread's stores waits for the loop; a bound of 0
// never blocks. The first call of a policy goes to the pool (nothing is known yet).

import type { FileHandle, SyncWhere } from './types.js';

/** How much of the mean one new sync's duration moves (an exponentially weighted mean). */
const WEIGHT = 1 / 8;

/** Writers of this thread (host committers, segmented logs) with work queued and not yet issued. */
const queuedWriters = new Set<object>();
/** Calls sent to the pool through a policy and not answered yet. */
let poolCalls = 0;

/**
 * Records whether `writer` has work queued that it has not issued yet. Call it whenever the
 * writer's queue changes (idempotent: the record follows the last call).
 */
export function setQueued(writer: object, queued: boolean): void {
  if (queued) queuedWriters.add(writer);
  else queuedWriters.delete(writer);
}

/** Whether a writer other than `self` has work queued, or a policy's call is on the pool. */
export function othersBusy(self: object): boolean {
  return poolCalls > 0 || queuedWriters.size > (queuedWriters.has(self) ? 1 : 0);
}

export class InlineSyncPolicy {
  /** Calls that take longer than this on average stay on the pool (ms; 0: always the pool). */
  readonly belowMs: number;
  #meanMs: number | null = null;

  constructor(belowMs: number) {
    if (!Number.isFinite(belowMs) || belowMs < 0) throw new RangeError(`belowMs must be a non-negative number, not ${belowMs}`);
    this.belowMs = belowMs;
  }

  /** The mean duration of the calls seen so far (ms), or null before the first. */
  get meanMs(): number | null {
    return this.#meanMs;
  }

  /** Whether recent calls were fast enough for a lone writer's call to wait inline. */
  fast(): boolean {
    return this.#meanMs !== null && this.#meanMs < this.belowMs;
  }

  /** Where `writer`'s next call waits, given whether its own work is only this call (`lone`). */
  where(lone: boolean, writer: object): SyncWhere {
    return lone && this.fast() && !othersBusy(writer) ? 'inline' : 'pool';
  }

  /** Counts one call that took `ms` (wherever it waited). */
  observe(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) return;
    this.#meanMs = this.#meanMs === null ? ms : this.#meanMs + (ms - this.#meanMs) * WEIGHT;
  }

  /**
   * Makes `call` wait `where` (as `where(...)` answered for it), timed; while a pool call is
   * outstanding, other writers of the thread see `othersBusy`.
   */
  run(where: SyncWhere, call: (where: SyncWhere) => Promise<void>): Promise<void> {
    const started = performance.now();
    // Inline: the call's promise is answered as it settles, timed then (no async frame of its own).
    if (where === 'inline') {
      let called: Promise<void>;
      try {
        called = call('inline');
      } catch (err) {
        return Promise.reject(err as Error);
      }
      return called.then(() => this.observe(performance.now() - started));
    }
    return this.#pool(call, started);
  }

  async #pool(call: (where: SyncWhere) => Promise<void>, started: number): Promise<void> {
    poolCalls++;
    try {
      await call('pool');
    } finally {
      poolCalls--;
    }
    this.observe(performance.now() - started);
  }

  /** fdatasyncs `handle` for `writer`, where `where(lone, writer)` says; timed. */
  datasync(handle: FileHandle, lone: boolean, writer: object): Promise<void> {
    return this.run(this.where(lone, writer), (where) => handle.datasync(where));
  }
}
