// The shape of a crash workload: what `seglog crash` runs, and what a store owner writes to add one.
//
// Owns: `CrashWorkload`, `WorkloadContext`, `WorkloadRun`. A workload drives one store through a
// recording MemoryFs, marks each acknowledgement in the trace (`fs.mark('ack', step)`), and
// answers a checker that opens the store on a crash image and throws when the image breaks the
// store's contract: an acknowledged write missing, a batch visible in part, a state the contract
// does not allow, or a second open that changes what the first one saw.
// Guarantees the runner relies on: `run` is deterministic for a given context (seed, scale, plant)
// — the runner makes node:crypto and Math.random seeded while it runs (./../determinism.ts), and
// the workload must take every other choice from `context.random` — so that a reproducer
// (workload, seed, state id) rebuilds the same trace and the same state.

import type { MemoryFs } from '../../fs/memory.js';
import type { AckCheckOptions } from '../linear.js';
import type { CrashState } from '../explore.js';

export interface WorkloadContext {
  /**
   * A fresh recording MemoryFs whose disk holds the empty directory `/data` (durable). Run the
   * store under `/data`. `fs.newProcess()` gives a restarted process; `fs.sever()` (or a FaultyFs
   * around a process view) kills one.
   */
  readonly fs: MemoryFs;
  readonly seed: number;
  /** The seeded generator every choice of the workload must come from. */
  readonly random: () => number;
  /** Size multiplier (default 1): how many operations the workload issues, roughly linearly. */
  readonly scale: number;
  /**
   * A test-only planted mistake (one of `plants`), or null. Proves the runner catches that
   * class of bug; never set outside tests and demonstrations.
   */
  readonly plant: string | null;
}

export interface WorkloadRun {
  /** Opens the store on `state.image` and throws when the image breaks the contract. */
  check(state: CrashState): Promise<void>;
  /**
   * Options of the linear pass (lib/crash/linear.ts) over the trace, typically `dependsOn` to
   * exclude derived data (index files, lock files, garbage unlinks); false skips the pass.
   * Default: every earlier operation is depended on.
   */
  readonly ackCheck?: AckCheckOptions | false;
  /** One or two lines on what the workload was doing at the crash (for `--replay`). */
  explain?(state: CrashState): string;
  /** What the run did, for the report: e.g. "42 steps: 30 appends, 4 rolls, ...". */
  readonly summary?: string;
}

export interface CrashWorkload {
  /** Lowercase name, [a-z0-9-]: what `seglog crash <name>` takes. */
  readonly name: string;
  /** One line for `seglog crash --list`. */
  readonly description: string;
  /**
   * Test-only planted mistakes this workload can switch on: name → what it plants. Each must make
   * the runner report a violation (test/crash-runner.test.ts proves it).
   */
  readonly plants?: Readonly<Record<string, string>>;
  /** Records one run of the store on `context.fs`. */
  run(context: WorkloadContext): Promise<WorkloadRun>;
}
