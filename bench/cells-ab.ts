// A paired A/B of the operations that write a two-slot cell, this build against another build of
// seglog: a Raft group's `saveVote` and `saveCommitted` (the vote and committed cells), a segment
// roll (every append of a 3,000-byte record to 4 KiB segments rolls, which writes the MANIFEST
// cell), and a host store `acquireFence('takeover')` (the fence/state cell, opened under the fence
// lock on every acquire).
//
// Owns: nothing the product uses. It is how the cost of a change to cells/ is measured: build the
// other version (for example `git worktree add /tmp/base main && cd /tmp/base && npm ci && npm run
// build`), then run `node dist/bench/cells-ab.js --baseline /tmp/base/dist`. Each section runs the
// two builds in rotated order every round (bench/harness: paired rounds, sliced), so the disk's
// drift hits both alike; the ratio is this build over the baseline, per round, then the median.
// First, the cell write itself, the two builds interleaved op by op (`--pairs`, default 3,000).
// `--memory` runs every store on a MemoryFs instead of the disk: what is left is CPU.

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
  clock: Any;
  segments: Any;
  host: Any;
  memory: Any;
  cells: Any;
}

async function load(id: string, dist: string): Promise<Build> {
  const at = (p: string): string => pathToFileURL(path.join(dist, p)).href;
  return {
    id,
    raft: await import(at('lib/raft/node.js')),
    clock: await import(at('lib/clock.js')),
    segments: await import(at('segments/index.js')),
    host: await import(at('lib/host/index.js')),
    memory: await import(at('lib/fs/memory.js')),
    cells: await import(at('cells/index.js')),
  };
}

const lid = (term: number, index: number) => ({ leaderId: { term, nodeId: 1 }, index });

function fsOf(b: Build, memory: boolean): { fs?: Any } {
  return memory ? { fs: new b.memory.MemoryFs({ trace: false }) } : {};
}

function raftVariant(b: Build, root: string, memory: boolean, which: 'saveVote' | 'saveCommitted'): Variant {
  let node: Any;
  let g: Any;
  let term = 1;
  return {
    id: b.id,
    label: `${which} (${b.id})`,
    async setup() {
      node = await b.raft.openRaftNode(path.join(root, `raft-${which}-${b.id}`), { clock: new b.clock.ManualClock(), ...fsOf(b, memory) });
      g = await node.openGroup('g');
      await new Promise<void>((resolve, reject) => {
        g.log.append([{ logId: lid(1, 1), payload: { type: 'blank' } }], (err: Error | null) => (err === null ? resolve() : reject(err))).catch(reject);
      });
      await g.log.saveVote({ leaderId: { term: 1, nodeId: 1 }, committed: false });
      await g.log.saveCommitted(lid(1, 1));
    },
    run: (budget: Budget) =>
      closedLoop({
        concurrency: 1,
        budget,
        bytesPerOp: 0,
        op: async () => {
          if (which === 'saveVote') await g.log.saveVote({ leaderId: { term: ++term, nodeId: 1 }, committed: false });
          else await g.log.saveCommitted(lid(1, 1));
        },
      }),
    async teardown() {
      await node.close();
    },
  };
}

function rollVariant(b: Build, root: string, memory: boolean): Variant {
  const record = new Uint8Array(3000).fill(7);
  let run = 0;
  return {
    id: b.id,
    label: `segment roll (${b.id})`,
    budget: { maxOps: 300 },
    async run(budget: Budget) {
      // A fresh log per run keeps the manifest small.
      const dir = path.join(root, `roll-${b.id}-${run++}`);
      const extra = fsOf(b, memory);
      if (extra.fs !== undefined) await extra.fs.mkdir(dir);
      const log = await b.segments.openSegmentedLog(dir, { segmentBytes: 4096, ...extra });
      try {
        return await closedLoop({ concurrency: 1, budget, bytesPerOp: record.length, op: async () => void (await log.append([record])) });
      } finally {
        await log.close();
        if (!memory) await rm(dir, { recursive: true, force: true });
      }
    },
  };
}

function acquireVariant(b: Build, root: string, memory: boolean): Variant {
  let store: Any;
  return {
    id: b.id,
    label: `host acquire (${b.id})`,
    async setup() {
      store = await b.host.openFsHostStore(path.join(root, `realm-${b.id}`), { stripes: 2, preallocBytes: 64 * 1024, stripeFileBytes: 1 << 20, checkpointIn: 'thread', ...fsOf(b, memory) });
    },
    run: (budget: Budget) => closedLoop({ concurrency: 1, budget, bytesPerOp: 0, op: async () => void (await store.acquireFence('takeover')) }),
    async teardown() {
      await store.close();
    },
  };
}

/**
 * The cell write itself (write + fdatasync), the two builds interleaved op by op (A, B, B, A, …):
 * pairs that ran within a millisecond of each other, so the disk's drift cancels out pair by pair.
 */
async function interleavedWrites(builds: Build[], root: string, memory: boolean, pairs: number): Promise<void> {
  for (const slotBytes of [4096, 8192]) {
    const cells = await Promise.all(builds.map((b) => b.cells.openCell(path.join(root, `cell-${b.id}-${slotBytes}`), { slotBytes, ...fsForCell(b, root, memory) })));
    const value = new Uint8Array(slotBytes === 8192 ? 1200 : 40).fill(9);
    for (const c of cells) await c.write(value);
    const times = cells.map(() => [] as number[]);
    for (let i = 0; i < pairs; i++) {
      for (const k of i % 2 === 0 ? [0, 1] : [1, 0]) {
        const t0 = process.hrtime.bigint();
        await cells[k].write(value);
        times[k]!.push(Number(process.hrtime.bigint() - t0) / 1000);
      }
    }
    for (const c of cells) await c.close();
    const sorted = (t: number[]): number[] => t.slice().sort((x, y) => x - y);
    const at = (t: number[], q: number): number => t[Math.floor(q * (t.length - 1))]!;
    const [a, b] = [sorted(times[0]!), sorted(times[1]!)];
    const ratios = sorted(times[1]!.map((t, i) => t / times[0]![i]!));
    console.log(
      `cell write ${String(slotBytes).padStart(4)} B slots: p50 baseline ${at(a, 0.5).toFixed(0)} µs, this ${at(b, 0.5).toFixed(0)} µs; ` +
        `this/baseline per pair: median ${at(ratios, 0.5).toFixed(3)} (quartiles ${at(ratios, 0.25).toFixed(2)}–${at(ratios, 0.75).toFixed(2)}, ${pairs} pairs)`,
    );
  }
}

/** A cell's file system: the disk, or one MemoryFs per build with `root` made. */
function fsForCell(b: Build, root: string, memory: boolean): { fs?: Any } {
  if (!memory) return {};
  const fs = new b.memory.MemoryFs({ image: { dirs: [root], files: {} }, trace: false });
  return { fs };
}

async function main(argv: string[]): Promise<void> {
  await pairedBuildsMain(argv, {
    name: 'cells-ab',
    what: 'cells A/B',
    extraUsage: ' [--pairs N]',
    rounds: 12,
    ms: 1200,
    budget: { maxOps: 100_000, minOps: 20 },
    load,
    before: (builds, root, memory, arg) => interleavedWrites(builds, root, memory, Number(arg('--pairs') ?? 3000)),
    sections: (builds, root, memory) => [
      ['saveVote', builds.map((b) => raftVariant(b, root, memory, 'saveVote'))],
      ['saveCommitted', builds.map((b) => raftVariant(b, root, memory, 'saveCommitted'))],
      ['segment roll', builds.map((b) => rollVariant(b, root, memory))],
      ['host acquire', builds.map((b) => acquireVariant(b, root, memory))],
    ],
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main(process.argv.slice(2));
