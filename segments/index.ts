// segments/: the segmented log primitive (`openSegmentedLog`). See ./log.ts for its guarantees,
// ./README.md for the modules behind it, docs/format.md (segmented log) for its bytes and
// docs/crash-safety.md (segmented log) for the crash argument. Re-exports the public part.

export { openSegmentedLog } from './log.js';
export { DEFAULT_SEGMENT_BYTES, DEFAULT_MAX_RECORD_BYTES } from './options.js';
export type { SegmentedLogOptions } from './options.js';
export type { SyncPolicy } from './sync-policy.js';
export type { SegmentedLog, SegmentedLogStats } from './types.js';
export { FdCache, defaultFdCache } from './fd-cache.js';
export type { FdCacheOptions } from './fd-cache.js';
export { newLogFiles } from './new-log.js';
export type { NewLogFile } from './new-log.js';
