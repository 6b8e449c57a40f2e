// A small async mutex: one holder at a time, waiters served in arrival order.
//
// Owns: `Mutex`. Guarantees: `lock()` resolves with a release function once every earlier holder
// released; releasing twice is harmless. In-process only: across processes the fs host store uses
// file locks (flock), which this does not replace.

export class Mutex {
  #tail: Promise<void> = Promise.resolve();
  #held = 0;

  /** Resolves once the mutex is this caller's; call the answer to release it. */
  lock(): Promise<() => void> {
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const before = this.#tail;
    this.#tail = before.then(() => mine);
    this.#held++;
    let done = false;
    return before.then(() => () => {
      if (done) return;
      done = true;
      this.#held--;
      release();
    });
  }

  /**
   * The mutex at once when nobody holds or waits for it (the release function), else null: the
   * uncontended path of `lock()` without its promise hops.
   */
  tryLock(): (() => void) | null {
    if (this.#held > 0) return null;
    let release!: () => void;
    this.#tail = new Promise<void>((resolve) => (release = resolve));
    this.#held++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#held--;
      release();
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
    return this.#held > 0;
  }
}
