// The Raft storage conformance suite (lib/conformance/raft.ts) against the file-system store:
// each test gets a fresh node directory under the OS temp directory (real file system), opens
// group 'g' of it, and reopens the node at every checkpoint in the reopen pass. A second run on
// MemoryFs covers the same tests without real fsyncs (cheap), so both layers are exercised.

import * as os from 'node:os';
import * as path from 'node:path';
import { mkdtemp, rm } from 'node:fs/promises';

import { raftStorageConformance, type RaftStorageBuilder } from '../lib/conformance/raft.js';
import { MemoryFs } from '../lib/fs/memory.js';
import type { FileSystem } from '../lib/fs/types.js';
import { openRaftNode } from '../lib/raft/node.js';

function builder(makeFs: () => Promise<{ fs?: FileSystem; dir: string; cleanup: () => Promise<void> }>): RaftStorageBuilder {
  return {
    async create() {
      const { fs, dir, cleanup } = await makeFs();
      return {
        async open() {
          const node = await openRaftNode(dir, { fs });
          try {
            const g = await node.openGroup('g');
            return { log: g.log, stateMachine: g.stateMachine, close: () => node.close() };
          } catch (err) {
            await node.close();
            throw err;
          }
        },
        cleanup,
      };
    },
  };
}

raftStorageConformance(
  builder(async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'seglog-raft-fs-'));
    return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
  }),
  { name: 'raft storage conformance: fs store (real file system)' },
);

raftStorageConformance(
  builder(async () => ({ fs: new MemoryFs({ trace: false }), dir: '/node', cleanup: async () => {} })),
  { name: 'raft storage conformance: fs store (MemoryFs)' },
);
