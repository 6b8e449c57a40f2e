// A paired A/B of the Raft node's append path, this build against another build of seglog: durable
// appends (the promise resolved and onFlushed(null)) of 256 B entries by one appender, by 64
// appenders on one group, by one appender in each of 64 groups, and of 1 MiB entries by one
// appender (the entries of the previous run purged first, untimed, so the disk use stays bounded).
//
// Owns: nothing the product uses. Build the other version (for example `git archive <commit> | tar
// -x -C /tmp/base`, link node_modules, `npx tsc -p .` there), then run `node dist/bench/raft-ab.js
// --baseline /tmp/base/dist`. Each section runs the two builds in rotated order every round
// (bench/harness: paired rounds, sliced), so the disk's drift hits both alike; the ratio is this
// build over the baseline, per round, then the median. `--memory` runs on a MemoryFs (CPU only).

import { rm } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Variant } from './harness/runner.js';
import { pairedBuildsMain } from './paired-builds.js';
import { closedLoop, type Budget } from './harness/timing.js';

/** The two builds' modules are loaded at run time, each from its own dist: untyped here. */
type Any = any;

interface Build {
  id: string;
  raft: Any;
  memory: Any;
}

async function load(id: string, dist: string): Promise<Build> {
  const at = (p: string): string => pathToFileURL(path.join(dist, p)).href;
  return { id, raft: await import(at('lib/raft/node.js')), memory: await import(at('lib/fs/memory.js')) };
}

const TERM = { term: 1, nodeId: 1 };

/** One node per build and section; `groups` groups with `perGroup` appenders each, entries of `bytes` bytes. */
function appendVariant(b: Build, root: string, memory: boolean, name: string, groups: number, perGroup: number, bytes: number, purge: boolean): Variant {
  const data = new Uint8Array(bytes).fill(7);
  const dir = path.join(root, `${name}-${b.id}`);
  let node: Any;
  let logs: Any[] = [];
  let next: number[] = [];
  let first: number[] = [];
  return {
    id: b.id,
    label: `${name} (${b.id})`,
    async setup() {
      const fs = memory ? { fs: new b.memory.MemoryFs({ image: { dirs: [root], files: {} }, trace: false }) } : {};
      node = await b.raft.openRaftNode(dir, fs);
      logs = [];
      for (let g = 0; g < groups; g++) {
        const { log } = await node.openGroup(`g${g}`);
        await log.saveVote({ leaderId: TERM, committed: true });
        logs.push(log);
      }
      next = logs.map(() => 1);
      first = logs.map(() => 1);
    },
    async run(budget: Budget) {
      if (purge) {
        for (let g = 0; g < groups; g++) {
          const last = (next[g] as number) - 1;
          if (last >= (first[g] as number)) {
            await logs[g].purge({ leaderId: TERM, index: last });
            first[g] = last + 1;
          }
        }
      }
      return closedLoop({
        concurrency: groups * perGroup,
        budget,
        bytesPerOp: bytes,
        op: (worker: number) => {
          const g = worker % groups;
          const index = next[g] as number;
          next[g] = index + 1;
          return new Promise<void>((resolve, reject) => {
            const entry = { logId: { leaderId: TERM, index }, payload: { type: 'normal', data } };
            logs[g].append([entry], (err: Error | null) => (err === null ? resolve() : reject(err))).catch(reject);
          });
        },
      });
    },
    async teardown() {
      await node?.close();
      if (!memory) await rm(dir, { recursive: true, force: true });
    },
  };
}

async function main(argv: string[]): Promise<void> {
  await pairedBuildsMain(argv, {
    name: 'raft-ab',
    what: 'Raft append A/B',
    rounds: 10,
    ms: 1000,
    budget: { maxOps: 1_000_000, minOps: 5 },
    load,
    sections: (builds, root, memory) => [
      ['256 B, one appender', builds.map((b) => appendVariant(b, root, memory, 'one', 1, 1, 256, false))],
      ['256 B, 64 in flight on one group', builds.map((b) => appendVariant(b, root, memory, 'flight', 1, 64, 256, false))],
      ['256 B, 64 groups', builds.map((b) => appendVariant(b, root, memory, 'groups64', 64, 1, 256, false))],
      ['256 B, 256 groups', builds.map((b) => appendVariant(b, root, memory, 'groups256', 256, 1, 256, false))],
      ['1 MiB, one appender', builds.map((b) => ({ ...appendVariant(b, root, memory, 'mib', 1, 1, 1 << 20, true), budget: { maxOps: 400 } }))],
    ],
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main(process.argv.slice(2));
