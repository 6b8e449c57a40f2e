// Host store: the public surface of lib/host (re-exported by lib/index.ts).
//
// Owns: nothing of its own; it names what the package exports for the Host Store SPI.

export type {
  ScopeKind,
  ScopeRef,
  VersionedHead,
  ListedHead,
  HeadPage,
  Row,
  AcquireMode,
  FenceGrant,
  ScopeUpdate,
  HostStore,
} from './types.js';
export {
  SCOPE_KINDS,
  MAX_BATCH_BYTES,
  MAX_ROW_BYTES,
  MAX_SCOPE_NAME_BYTES,
  MAX_COMMIT_ID_BYTES,
  FENCE_RENEW_INTERVAL_SECS,
  FENCE_LEASE_SECS,
  FENCE_MIN_LEASE_RENEWALS,
  FENCE_MAX_COMMIT_LATENCY_SECS,
  ScopeVersion,
} from './types.js';
export { HostStoreError, isDamagedAnswer, isHostStoreError, type HostStoreErrorCode } from './errors.js';
export { compareNames, isScopeName, isCommitId, isScopeKind } from './names.js';
export { CommitBatch } from './batch.js';
export { FenceTiming } from './timing.js';
export { MemoryHostRealm, MemoryHostStore, type MemoryHostRealmOptions } from './memory.js';
export type { CommitStall, StallPoint } from './stall.js';
export { openFsHostStore, FsHostStore, type FsHostStoreOptions, type FsHostStoreHooks } from './fs/index.js';
export { openPgHostStore, PgHostStore, type PgHostStoreOptions } from './pg/index.js';
