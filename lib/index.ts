// seglog: the public entry point. Each section re-exports one module; docs/contracts/ and docs/usage.md describe the shapes.

// --- errors, clocks, the file-system layer (owner: core) ---
export * from './errors.js';
export type { Clock } from './clock.js';
export { monotonicClock, ManualClock } from './clock.js';
export type { FileSystem, FileHandle, FileStat, OpenMode, SyncWhere } from './fs/types.js';
export { realFs } from './fs/real.js';

// --- recording / fault-injecting file systems (owner: fs-sim) ---
export { MemoryFs } from './fs/memory.js';
export type { MemoryFsOptions, DiskImage, TraceEntry, EntryChange, FsCallKind } from './fs/memory.js';
export { FaultyFs } from './fs/faulty.js';
export type { FaultRule, Fault, FaultCall, Pause, PathPattern } from './fs/faulty.js';
export { exploreCrashStates, replayCrashState, crashPoints, checkAckAfterSync } from './crash/index.js';
export type {
  CrashFamily,
  CrashState,
  CrashUnit,
  CrashTear,
  CrashViolation,
  ExploreOptions,
  ExploreResult,
  AckCheckOptions,
  AckCheckResult,
  AckViolation,
  RenameBeforeSync,
} from './crash/index.js';

// --- segments (owner: segments) ---
export { openSegmentedLog, FdCache, defaultFdCache, DEFAULT_SEGMENT_BYTES, DEFAULT_MAX_RECORD_BYTES } from '../segments/index.js';
export type { SegmentedLog, SegmentedLogOptions, SegmentedLogStats, SyncPolicy, FdCacheOptions } from '../segments/index.js';

// --- cells (owner: fs-sim) ---
export { openCell, cellTempPath, cellValueCapacity, CELL_DEFAULT_SLOT_BYTES } from '../cells/index.js';
export type { Cell, CellOptions } from '../cells/index.js';

// --- host store (owner: host) ---
export * from './host/index.js';

// --- raft store (owner: raft) ---
export * from './raft/index.js';

// --- payloads (owner: payloads) ---
export { openPayloadStore, FsPayloadStore, DEFAULT_GRACE_MS, isPayloadDigest, MAX_HOLDER_BYTES, MAX_HOLDERS, PAYLOAD_DEFAULT_CHUNK_BYTES } from './payloads/index.js';
export type { PayloadStore, PayloadStoreOptions, PayloadInfo, PayloadBody, ReadableStreamLike, PutOptions, GarbageReport, PayloadVerifyReport } from './payloads/index.js';

// --- tools: the crash-injection runner, verify, inspect (owner: tools) ---
export { runCrashWorkloads, runCrashWorkload, replayCrashReproducer, formatReproducer, parseReproducer, WORKLOADS, workloadNames, loadWorkload, StepHistory } from './crash/index.js';
export type { CrashRunOptions, CrashProgress, CrashRunReport, WorkloadReport, CrashViolationReport, Reproducer, ReplayReport, CrashWorkload, WorkloadContext, WorkloadRun } from './crash/index.js';
export { verifyDataDirectory, formatVerifyReport, verifyExitCode, STORE_CHECKERS } from './tools/verify.js';
export type { VerifyOptions, VerifyReport, Finding, UncheckedRange, StoreChecker } from './tools/verify.js';
export { inspectDataDirectory, formatInspectReport } from './tools/inspect.js';
