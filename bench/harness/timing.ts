// Timing: per-operation latencies on the monotonic high-resolution clock, and the closed loop that
// drives one or many concurrent workers against an operation.
//
// Owns: `LatencyRecorder`, `closedLoop`, the `Budget` of one measured run and the `RunSample` it
// produces. Guarantees: every latency is `process.hrtime.bigint()` after the operation settled minus
// before it was issued (so it includes the time an operation queued in the libuv pool); throughput is
// counted over the wall-clock time of the whole loop, not over the sum of latencies, so concurrent
// workers are not double-counted. Nothing here allocates per operation beyond the op itself.

/** Monotonic nanoseconds as a number (exact below 2^53 ns ≈ 104 days of uptime). */
export function nowNs(): number {
  return Number(process.hrtime.bigint());
}

/** How long one measured run of a variant may last. The run stops at whichever limit comes first. */
export interface Budget {
  /** Wall-clock time to keep issuing operations (ms). */
  durationMs: number;
  /** Hard cap on operations (bounds disk use for large writes). */
  maxOps: number;
  /** Keep going past durationMs until at least this many operations completed. */
  minOps: number;
}

/** What one measured run of a variant produced. */
export interface RunSample {
  /** Operations completed (one latency each). */
  ops: number;
  /** Logical records those operations carried (a writev of 16 chunks is one op and 16 records). */
  records: number;
  /** Payload bytes those operations carried. */
  bytes: number;
  /** Wall-clock nanoseconds from the first issue to the last completion. */
  elapsedNs: number;
  /** Per-operation latencies in nanoseconds (length >= ops is allowed; the first `ops` count). */
  latenciesNs: Float64Array;
}

/** Collects latencies into a growing Float64Array (no per-sample allocation). */
export class LatencyRecorder {
  #values: Float64Array;
  #count = 0;

  constructor(initialCapacity = 1024) {
    this.#values = new Float64Array(Math.max(16, initialCapacity));
  }

  get count(): number {
    return this.#count;
  }

  record(ns: number): void {
    if (this.#count === this.#values.length) {
      const bigger = new Float64Array(this.#values.length * 2);
      bigger.set(this.#values);
      this.#values = bigger;
    }
    this.#values[this.#count++] = ns;
  }

  /** The recorded latencies, trimmed to the count. */
  values(): Float64Array {
    return this.#values.slice(0, this.#count);
  }
}

export interface ClosedLoopOptions {
  /** Workers issuing operations at once; each waits for its previous op before the next. */
  concurrency: number;
  budget: Budget;
  /** Records carried by one operation (default 1). */
  recordsPerOp?: number;
  /** Payload bytes carried by one operation. */
  bytesPerOp: number;
  /**
   * One operation. `worker` is 0..concurrency-1 and `seq` counts that worker's operations, so that
   * an op can pick its file or offset without shared state.
   */
  op: (worker: number, seq: number) => Promise<unknown>;
}

/**
 * Runs `concurrency` workers, each issuing `op` back to back, until the budget is spent; then waits
 * for the operations in flight. Every completed op's latency is recorded.
 */
export async function closedLoop(options: ClosedLoopOptions): Promise<RunSample> {
  const { concurrency, budget, op, bytesPerOp } = options;
  const recordsPerOp = options.recordsPerOp ?? 1;
  if (!(concurrency >= 1)) throw new RangeError('concurrency must be >= 1');
  const recorder = new LatencyRecorder(Math.min(budget.maxOps, 1 << 16));
  const start = nowNs();
  const deadline = start + budget.durationMs * 1e6;
  let issued = 0;
  const worker = async (w: number): Promise<void> => {
    let seq = 0;
    let t0 = nowNs();
    for (;;) {
      if (issued >= budget.maxOps) return;
      if (issued >= budget.minOps && t0 >= deadline) return;
      issued++;
      await op(w, seq++);
      // The end of one op is the start of the next: one clock read per op.
      const t1 = nowNs();
      recorder.record(t1 - t0);
      t0 = t1;
    }
  };
  const workers: Promise<void>[] = [];
  for (let w = 0; w < concurrency; w++) workers.push(worker(w));
  await Promise.all(workers);
  const elapsedNs = Math.max(1, nowNs() - start);
  const ops = recorder.count;
  return { ops, records: ops * recordsPerOp, bytes: ops * bytesPerOp, elapsedNs, latenciesNs: recorder.values() };
}
