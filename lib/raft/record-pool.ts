// Record pool: recycled memory for large encoded log records.
//
// Owns: `RecordPool`. Encoding a large entry needs a fresh buffer of the record's size, and on a
// busy machine a fresh megabyte costs more (page faults, zeroing, a later unmap) than the copy
// into it. The pool keeps the buffers of durable records for reuse. Guarantees:
// - A buffer is handed out again only after its record is durable (the segmented log then holds
//   no reference to it except in the view of a read that began before) AND no log read that could
//   hold such a view is in flight: released buffers wait in quarantine until the count of reads in
//   flight (kept by the log stores sharing the pool, which issue every read of their logs) drops
//   to zero. One pool serves a node's groups: a read in any of them delays recycling (safe side).
// - Records below `minBytes` are never pooled (small allocations are cheap); the idle buffers
//   held are at most `maxIdleBytes` (the oldest are dropped); a record is a view of exactly its
//   length on a buffer of a 64 KiB-rounded size class.

const CLASS_STEP = 64 * 1024;

export class RecordPool {
  readonly #minBytes: number;
  readonly #maxIdleBytes: number;
  readonly #free = new Map<number, ArrayBuffer[]>();
  #idleBytes = 0;
  #quarantine: ArrayBuffer[] = [];
  #reads = 0;

  constructor(minBytes = 64 * 1024, maxIdleBytes = 32 * 1024 * 1024) {
    this.#minBytes = minBytes;
    this.#maxIdleBytes = maxIdleBytes;
  }

  /**
   * A record buffer of exactly `length` bytes (contents unspecified: the caller writes every
   * byte). A small one is a slice of Node's shared allocation slab (`Buffer.allocUnsafe`), not an
   * ArrayBuffer of its own: at 256 groups appending at once, a fresh backing store per record
   * (allocated, tracked and freed by the collector) was a fifth of the main thread's time.
   */
  acquire(length: number): Uint8Array {
    if (length < this.#minBytes) return Buffer.allocUnsafe(length);
    const size = Math.ceil(length / CLASS_STEP) * CLASS_STEP;
    const list = this.#free.get(size);
    const buf = list?.pop();
    if (buf !== undefined) {
      this.#idleBytes -= size;
      return new Uint8Array(buf, 0, length);
    }
    return new Uint8Array(new ArrayBuffer(size), 0, length);
  }

  /** Whether `release` would take the record's buffer back (it is of a pooled size class). */
  pools(record: Uint8Array): boolean {
    const buf = record.buffer;
    return buf instanceof ArrayBuffer && record.byteOffset === 0 && buf.byteLength >= this.#minBytes && buf.byteLength % CLASS_STEP === 0;
  }

  /** Gives back a record's buffer once the record is durable. Not pooled ones are ignored. */
  release(record: Uint8Array): void {
    if (!this.pools(record)) return;
    const buf = record.buffer as ArrayBuffer;
    this.#quarantine.push(buf);
    if (this.#reads === 0) this.#drainQuarantine();
  }

  /** A log read begins: buffers released from now on wait until it ends. */
  readStarted(): void {
    this.#reads++;
  }

  readEnded(): void {
    if (--this.#reads === 0 && this.#quarantine.length > 0) this.#drainQuarantine();
  }

  #drainQuarantine(): void {
    for (const buf of this.#quarantine) {
      const size = buf.byteLength;
      if (size > this.#maxIdleBytes) continue;
      while (this.#idleBytes + size > this.#maxIdleBytes && this.#evictOne()) {
        // dropped the oldest idle buffer of some class
      }
      if (this.#idleBytes + size > this.#maxIdleBytes) continue;
      let list = this.#free.get(size);
      if (list === undefined) this.#free.set(size, (list = []));
      list.push(buf);
      this.#idleBytes += size;
    }
    this.#quarantine = [];
  }

  #evictOne(): boolean {
    for (const [size, list] of this.#free) {
      if (list.shift() !== undefined) {
        this.#idleBytes -= size;
        if (list.length === 0) this.#free.delete(size);
        return true;
      }
    }
    return false;
  }
}
