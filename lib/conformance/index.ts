// seglog/conformance: the conformance suites a store implementation runs under node:test.
//
// Owns: nothing of its own; one re-export per suite (host: the Host Store SPI chapter; raft: the
// Raft store). Importing this entry point imports node:test.

export { hostStoreConformance, type HostStoreFactory, type HostStoreStall, type HostStoreConformanceOptions } from './host-store.js';
export {
  raftStorageConformance,
  raftConformanceTests,
  runRaftConformanceTest,
  type RaftStorageBuilder,
  type RaftStoreFixture,
  type RaftStoreUnderTest,
  type RaftStorageConformanceOptions,
} from './raft.js';
