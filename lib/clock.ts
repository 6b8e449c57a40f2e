// Clocks: where time comes from.
//
// Owns: the `Clock` interface of the public API, the real monotonic clock and a manual clock for
// tests. Guarantees: the real clock is the machine's CLOCK_MONOTONIC (via `process.hrtime`), so
// it never goes backwards, a wall-clock jump cannot move it, and every process on the machine
// reads the same clock — which is what lets a lease written by one process be judged by another.
// It restarts at a reboot; anything that persists its readings must also record the boot (see
// the fence's lease file in docs/host-store.md).

/** Monotonic milliseconds. Tests replace it through `options.clock`. */
export interface Clock {
  now(): number;
}

/** The machine's monotonic clock, in milliseconds (shared by every process until a reboot). */
export const monotonicClock: Clock = {
  now: () => Number(process.hrtime.bigint() / 1000n) / 1000,
};

/** A clock that only moves when told to: for deterministic tests. */
export class ManualClock implements Clock {
  #now: number;
  constructor(start = 0) {
    this.#now = start;
  }
  now(): number {
    return this.#now;
  }
  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError('a clock only moves forward');
    this.#now += ms;
  }
}
