// The Raft storage conformance suite against the reference in-memory group (lib/raft/memory.ts).
// It validates the suite itself: every test must pass on a store that follows every rule.

import { raftStorageConformance } from '../lib/conformance/raft.js';
import { kvPlugin } from '../lib/raft/kv.js';
import { MemoryRaftDisk, openMemoryRaftGroup } from '../lib/raft/memory.js';

raftStorageConformance(
  {
    async create() {
      const disk = new MemoryRaftDisk();
      return {
        open: () => openMemoryRaftGroup(disk, { plugin: kvPlugin }),
        cleanup: async () => {},
      };
    },
  },
  { name: 'raft storage conformance: memory group' },
);
