// segments/: the segmented log primitive (`openSegmentedLog`). See ./log.ts for its guarantees,
// docs/format.md (segmented log) for its bytes and docs/crash-safety.md (segmented log) for the crash argument.
// Re-exports the public part.

export { openSegmentedLog, DEFAULT_SEGMENT_BYTES, DEFAULT_MAX_RECORD_BYTES } from './log.js';
export type { SegmentedLog, SegmentedLogOptions, SegmentedLogStats, SyncPolicy } from './log.js';
export { FdCache, defaultFdCache } from './fd-cache.js';
export type { FdCacheOptions } from './fd-cache.js';
