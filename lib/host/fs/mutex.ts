// A small async mutex: one holder at a time, waiters served in arrival order.
//
// Owns: `Mutex`. Guarantees: `lock()` resolves with a release function once every earlier holder
// released; releasing twice is harmless. In-process only: across processes the fs host store uses
// file locks (flock), which this does not replace. A release hands the mutex straight to the
// first waiter (it stays held in between, so no `tryLock` slips in ahead of a waiter); the
// uncontended path allocates one release function and nothing else (the commit path takes a
// stripe's mutex once per group).

export class Mutex {
  #held = false;
  /** Waiters in arrival order: each is handed the mutex with its own release function. */
  readonly #waiters: ((release: () => void) => void)[] = [];

  /** Resolves once the mutex is this caller's; call the answer to release it. */
  lock(): Promise<() => void> {
    if (!this.#held) {
      this.#held = true;
      return Promise.resolve(this.#releaser());
    }
    return new Promise<() => void>((resolve) => this.#waiters.push(resolve));
  }

  /**
   * The mutex at once when nobody holds or waits for it (the release function), else null: the
   * uncontended path of `lock()` without its promise.
   */
  tryLock(): (() => void) | null {
    if (this.#held) return null;
    this.#held = true;
    return this.#releaser();
  }

  /** One holding's release: hands the mutex to the next waiter, or frees it. */
  #releaser(): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const next = this.#waiters.shift();
      if (next !== undefined) next(this.#releaser());
      else this.#held = false;
    };
  }

  /** Runs `fn` holding the mutex. */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    const release = await this.lock();
    try {
      return await fn();
    } finally {
      release();
    }
  }

  /** True while someone holds or waits for the mutex. */
  get busy(): boolean {
    return this.#held;
  }
}
