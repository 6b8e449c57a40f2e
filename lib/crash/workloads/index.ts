// The registry of crash workloads: what `seglog crash` (and `runCrashWorkloads`) can run.
//
// Owns: `WORKLOADS`, one line per workload, loaded lazily so that running one workload never loads
// another store. To add a workload for your store: write `lib/crash/workloads/<name>.ts` exporting
// `workload: CrashWorkload` (see ./types.ts and docs/crash-testing.md, "Adding a workload"), and add
// its line below. The order here is the order `seglog crash` runs them in.

import type { CrashWorkload } from './types.js';

export type { CrashWorkload, WorkloadContext, WorkloadRun } from './types.js';

export interface WorkloadEntry {
  readonly name: string;
  readonly load: () => Promise<{ workload: CrashWorkload }>;
}

export const WORKLOADS: readonly WorkloadEntry[] = [
  { name: 'cells', load: () => import('./cells.js') },
  { name: 'segments', load: () => import('./segments.js') },
  { name: 'host', load: () => import('./host.js') },
  { name: 'raft', load: () => import('./raft.js') },
  { name: 'payloads', load: () => import('./payloads.js') },
];

/** The names of every registered workload, in run order. */
export function workloadNames(): string[] {
  return WORKLOADS.map((w) => w.name);
}

/** Loads a workload by name; throws a RangeError naming the known ones when there is none. */
export async function loadWorkload(name: string): Promise<CrashWorkload> {
  const entry = WORKLOADS.find((w) => w.name === name);
  if (entry === undefined) throw new RangeError(`no crash workload '${name}' (known: ${workloadNames().join(', ')})`);
  const { workload } = await entry.load();
  if (workload?.name !== name || typeof workload.run !== 'function') {
    throw new TypeError(`lib/crash/workloads: the module of '${name}' must export \`workload\` named '${name}'`);
  }
  return workload;
}
