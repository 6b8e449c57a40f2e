// lib/crash: the crash-state engine (the core of the crash-injection runner).
//
// Owns nothing itself: re-exports the explorer (enumerate the disks a crash may leave after a
// recorded MemoryFs run, and check each), the replay of one state by id, and the linear pass
// (acknowledgements only after the syncs that cover them). See docs/crash-testing.md.

export { exploreCrashStates, replayCrashState, crashPoints } from './explore.js';
export type { CrashFamily, CrashState, CrashUnit, CrashTear, CrashViolation, ExploreOptions, ExploreResult } from './explore.js';
export { checkAckAfterSync } from './linear.js';
export type { AckCheckOptions, AckCheckResult, AckViolation, RenameBeforeSync } from './linear.js';
export { SECTOR_BYTES } from './model.js';
