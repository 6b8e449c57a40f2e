// lib/crash: the crash-injection runner and its engine.
//
// Owns nothing itself: re-exports the explorer (enumerate the disks a crash may leave after a
// recorded MemoryFs run, and check each), the replay of one state by id, the linear pass
// (acknowledgements only after the syncs that cover them), and the runner (`seglog crash`: named
// workloads, sampling, reports, reproducers). See docs/crash-testing.md.

export { exploreCrashStates, replayCrashState, crashPoints } from './explore.js';
export type { CrashFamily, CrashState, CrashUnit, CrashTear, CrashViolation, ExploreOptions, ExploreResult } from './explore.js';
export { checkAckAfterSync } from './linear.js';
export type { AckCheckOptions, AckCheckResult, AckViolation, RenameBeforeSync } from './linear.js';
export { SECTOR_BYTES } from './model.js';
export {
  runCrashWorkloads,
  runCrashWorkload,
  replayCrashReproducer,
  formatReproducer,
  parseReproducer,
  traceFingerprint,
  WORKLOAD_INITIAL_IMAGE,
} from './runner.js';
export type { CrashRunOptions, CrashProgress, CrashRunReport, WorkloadReport, CrashViolationReport, Reproducer, ReplayReport } from './runner.js';
export { WORKLOADS, workloadNames, loadWorkload } from './workloads/index.js';
export type { CrashWorkload, WorkloadContext, WorkloadRun, WorkloadEntry } from './workloads/index.js';
export { StepHistory } from './workloads/history.js';
export { withSeededRandomness, seededRandom } from './determinism.js';
