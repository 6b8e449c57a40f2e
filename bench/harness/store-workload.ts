// Store workloads run side by side against several implementations.
//
// Owns: `StoreImplementation`, `StoreWorkload` and `sideBySide`. Guarantees: a workload is written
// once against a common interface `H` (e.g. `HostStore`, `RaftLogStorage`) and becomes one variant
// per implementation, all in one section, so the runner interleaves them round by round and the
// report shows them as ratios to one baseline measured in the same rounds. Each implementation gets
// a fresh directory of its own; the workload never learns which implementation it drives.
//
// `seglog bench stores` (seglog beside better-sqlite3 and lmdb, bench/stores/) builds on this.

import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import type { ParamValue } from './report.js';
import type { Variant } from './runner.js';
import { closedLoop, type Budget, type RunSample } from './timing.js';

export interface StoreImplementation<H> {
  /** Short stable name, used in variant ids: "seglog", "sqlite", "lmdb". */
  name: string;
  label: string;
  open(dir: string): Promise<H>;
  close(handle: H): Promise<void>;
}

export interface StoreWorkload<H> {
  id: string;
  label: string;
  concurrency: number;
  bytesPerOp: number;
  recordsPerOp?: number;
  params?: Record<string, ParamValue>;
  /** Overrides of the section's budget (e.g. a cap on operations for large records). */
  budget?: Partial<Budget>;
  /** Untimed, once per implementation after open (e.g. create the scopes). */
  prepare?(handle: H): Promise<void>;
  /** Untimed, before every measured run (e.g. purge what the last run wrote, to bound disk use). */
  beforeRun?(handle: H): Promise<void>;
  /** One operation by `worker` (0..concurrency-1), its `seq`-th. */
  op(handle: H, worker: number, seq: number): Promise<unknown>;
}

/**
 * One variant per implementation for `workload`. Directories are made under `parentDir` at setup
 * and removed at teardown. Variant ids are `${workload.id}/${impl.name}`.
 */
export function sideBySide<H>(workload: StoreWorkload<H>, implementations: readonly StoreImplementation<H>[], parentDir: string): Variant[] {
  return implementations.map((impl) => {
    let dir: string | null = null;
    let handle: H | null = null;
    const variant: Variant = {
      id: `${workload.id}/${impl.name}`,
      label: `${workload.label} — ${impl.label}`,
      group: impl.label,
      params: { ...workload.params, implementation: impl.name, concurrency: workload.concurrency },
      ...(workload.budget === undefined ? {} : { budget: workload.budget }),
      async setup() {
        dir = await mkdtemp(path.join(parentDir, `${impl.name}-`));
        handle = await impl.open(dir);
        await workload.prepare?.(handle);
      },
      async run(budget: Budget): Promise<RunSample> {
        const h = handle;
        if (h === null) throw new Error(`${variant.id} ran before setup`);
        await workload.beforeRun?.(h);
        const options = {
          concurrency: workload.concurrency,
          budget,
          bytesPerOp: workload.bytesPerOp,
          op: (w: number, seq: number) => workload.op(h, w, seq),
        };
        return closedLoop(workload.recordsPerOp === undefined ? options : { ...options, recordsPerOp: workload.recordsPerOp });
      },
      async teardown() {
        if (handle !== null) await impl.close(handle);
        handle = null;
        if (dir !== null) await rm(dir, { recursive: true, force: true });
        dir = null;
      },
    };
    return variant;
  });
}
