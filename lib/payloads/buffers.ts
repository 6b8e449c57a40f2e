// Batch buffers in shared memory, reused across the puts and gets of one store.
//
// Owns: `BatchBuffers`. A put fills its batches in them (the hashing thread reads a batch while
// the thread pool writes it) and a get reads into them (the hashing thread reads a batch while
// the event loop copies it out for the consumer); neither keeps one after it is done. Why a pool:
// a fresh 1 MiB buffer costs its zero-filling and its page faults (about 70 µs here), and a
// discarded one stays in memory until the garbage collector finds it. Guarantees: `take` answers
// a buffer of exactly the size asked that no one else holds; `give` keeps at most MAX_IDLE_BUFFERS
// idle (the rest are left to the garbage collector), so a store holds at most that many MiB idle.
// The bytes of a buffer taken are whatever its last user left: callers overwrite what they use.

/** Idle buffers a store keeps for the next put or get (about 1 MiB each). */
export const MAX_IDLE_BUFFERS = 8;

export class BatchBuffers {
  readonly #idle: Uint8Array[] = [];

  /** A buffer of `bytes` bytes in shared memory. */
  take(bytes: number): Uint8Array {
    for (let i = this.#idle.length - 1; i >= 0; i--) {
      const b = this.#idle[i] as Uint8Array;
      if (b.length === bytes) {
        this.#idle.splice(i, 1);
        return b;
      }
    }
    return new Uint8Array(new SharedArrayBuffer(bytes));
  }

  /** Returns a buffer its taker no longer uses (nor anyone it lent it to). */
  give(buffer: Uint8Array): void {
    if (this.#idle.length < MAX_IDLE_BUFFERS) this.#idle.push(buffer);
  }

  /** Idle buffers (for tests). */
  get idle(): number {
    return this.#idle.length;
  }
}

/** Below this many bytes a copy is made with `set` (a Buffer view per call would cost more). */
const NATIVE_COPY_BYTES = 4096;

/**
 * Copies `source` into `target` at `at`. For shared memory this is several times faster than
 * `target.set(source, at)`, which V8 makes byte-safe for concurrent readers (a relaxed copy, 2.5–4×
 * slower than memcpy here): a Buffer's `fill` with a source as long as the range is one memcpy.
 */
export function copyInto(target: Uint8Array, at: number, source: Uint8Array): void {
  if (source.length < NATIVE_COPY_BYTES) target.set(source, at);
  else Buffer.from(target.buffer, target.byteOffset + at, source.length).fill(source);
}
