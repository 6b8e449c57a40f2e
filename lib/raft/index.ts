// Raft store: the public surface of lib/raft (re-exported by lib/index.ts).
//
// Owns: nothing of its own; it names what the package exports for the Raft store (docs/contracts/raft-store.md):
// the types, the KV plugin, the in-memory reference group, the file-system node (openRaftNode).
// The codec, the snapshot stream format and the chunk queue stay internal.

export type {
  LeaderId,
  LogId,
  Vote,
  Membership,
  StoredMembership,
  EntryPayload,
  Entry,
  LogState,
  SnapshotMeta,
  Snapshot,
  RaftLogReader,
  RaftLogStorage,
  RaftSnapshotBuilder,
  SnapshotSink,
  RaftStateMachine,
} from './types.js';
export {
  compareLeaderId,
  compareLogId,
  compareVote,
  logIdEquals,
  nextIndex,
  logId,
  emptyMembership,
  emptyStoredMembership,
  isDigest,
  validateNumber,
  validateLeaderId,
  validateLogId,
  validateOptionalLogId,
  validateVote,
  validateMembership,
  validateStoredMembership,
  validateEntry,
  validateSnapshotMeta,
  MAX_SNAPSHOT_ID_BYTES,
  MAX_MEMBERSHIP_CONFIGS,
  MAX_NODE_DATA_DEPTH,
} from './types.js';
export type { PluginEntry, StateMachinePlugin, StateMachinePluginFactory, PluginReply } from './plugin.js';
export {
  KvPlugin,
  kvPlugin,
  encodeKvCommand,
  decodeKvCommand,
  KV_PLUGIN_NAME,
  MAX_KV_KEY_BYTES,
  MAX_KV_VALUE_BYTES,
  type KvCommand,
  type KvReply,
} from './kv.js';
export {
  MemoryRaftDisk,
  openMemoryRaftGroup,
  MemoryRaftLogStorage,
  PluginStateMachine,
  DEFAULT_MAX_READ_ENTRIES,
  DEFAULT_MAX_READ_BYTES,
  type MemoryRaftGroup,
  type MemoryRaftGroupOptions,
} from './memory.js';
export {
  getInitialState,
  getMembership,
  lastMembershipInLog,
  loadKeyLogIds,
  reapplyCommitted,
  getLogEntries,
  getLogId,
  tryGetLogEntry,
  defaultVote,
  defaultSnapshotMeta,
  type InitialState,
  type MembershipState,
} from './storage-helper.js';
export {
  openRaftNode,
  listPayloadReferences,
  rebuildPayloadReferences,
  groupDirectory,
  RAFT_DEFAULT_SEGMENT_BYTES,
  RAFT_DEFAULT_JOURNAL_SEGMENT_BYTES,
  RAFT_DEFAULT_MAX_ENTRY_BYTES,
  type RaftNode,
  type RaftNodeOptions,
  type RaftGroup,
  type GroupRecovery,
  type PayloadReference,
} from './node.js';
export { FsRaftLogStorage, FS_DEFAULT_MAX_READ_ENTRIES, FS_DEFAULT_MAX_READ_BYTES } from './fs-log.js';
export { FsStateMachine } from './fs-state-machine.js';
export { MAX_GROUP_ID_BYTES } from './fs-layout.js';
