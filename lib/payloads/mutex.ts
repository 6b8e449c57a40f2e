// A mutex per key (a payload's hex digest), in memory.
//
// Owns: `KeyedMutex`. Guarantees: `run(key, fn)` calls run one at a time per key, in call order;
// different keys never wait for each other; an idle key holds no memory. It orders the store's own
// operations on one digest (link, rename, unlink, refcount rewrite, GC's check-then-unlink, and
// the presence checks of stat/get); other processes are kept out by the store's LOCK file.

export class KeyedMutex {
  readonly #tails = new Map<string, Promise<void>>();

  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => mine);
    this.#tails.set(key, tail);
    await previous;
    try {
      return await fn();
    } finally {
      release();
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    }
  }

  /** Keys with a holder or a waiter (for tests). */
  get size(): number {
    return this.#tails.size;
  }
}
