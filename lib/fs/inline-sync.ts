// Which thread waits for a caller's syncs: a running estimate of how long they take.
//
// Owns: `InlineSyncPolicy`. A writer about to sync with nothing else of its own in flight (one
// lone group) syncs through `datasync(handle, true)`: the sync waits on the calling thread
// ('inline') while recent syncs took less than `belowMs` on average, else on the pool. Every other
// sync goes to the pool. Guarantees: where a sync waits changes nothing of what is durable or of
// the order of writes and syncs; the event loop is blocked by an inline sync only while syncs have
// been fast (one slow sync, a disk stall, lifts the mean past the bound, and the next syncs go to
// the pool until pool syncs show the disk fast again); a bound of 0 never blocks. The first sync
// goes to the pool (nothing is known yet).

import type { FileHandle, SyncWhere } from './types.js';

/** How much of the mean one new sync's duration moves (an exponentially weighted mean). */
const WEIGHT = 1 / 8;

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

  /** Where a lone writer's next sync waits. */
  where(): SyncWhere {
    return this.#meanMs !== null && this.#meanMs < this.belowMs ? 'inline' : 'pool';
  }

  /** Counts one sync that took `ms` (wherever it waited). */
  observe(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) return;
    this.#meanMs = this.#meanMs === null ? ms : this.#meanMs + (ms - this.#meanMs) * WEIGHT;
  }

  /** fdatasyncs `handle`: inline when `lone` and recent syncs were fast, else on the pool; timed. */
  async datasync(handle: FileHandle, lone: boolean): Promise<void> {
    const where = lone ? this.where() : 'pool';
    const started = performance.now();
    await handle.datasync(where);
    this.observe(performance.now() - started);
  }
}
