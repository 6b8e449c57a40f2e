// A paired A/B of the segmented log's append path and close, this build against another build of
// seglog: how much the durable floor at the tail (synced index checkpoints, a synced index and
// directory at close) costs. Sections: durable appends of 256 B, 64 KiB (a checkpoint, with its
// sync, every 64 appends) and 1 MiB records one at a time, 16 appenders of 4 KiB records, and
// an open + one append + close of a log (the close writes and syncs the index).
//
// Owns: nothing the product uses. Build the other version (for example `git archive main | tar
// -x -C /tmp/base`, link node_modules, `npx tsc -p .` there), then run `node dist/bench/tail-ab.js
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
  segments: Any;
  memory: Any;
}

async function load(id: string, dist: string): Promise<Build> {
  const at = (p: string): string => pathToFileURL(path.join(dist, p)).href;
  return { id, segments: await import(at('segments/index.js')), memory: await import(at('lib/fs/memory.js')) };
}

function fsOf(b: Build, root: string, memory: boolean): { fs?: Any } {
  return memory ? { fs: new b.memory.MemoryFs({ image: { dirs: [root], files: {} }, trace: false }) } : {};
}

/** One long-lived log per build; `concurrency` appenders of `bytes`-byte records. */
function appendVariant(b: Build, root: string, memory: boolean, bytes: number, concurrency: number): Variant {
  const record = new Uint8Array(bytes).fill(5);
  let log: Any;
  const dir = path.join(root, `append-${bytes}-${concurrency}-${b.id}`);
  return {
    id: b.id,
    label: `${bytes} B × ${concurrency} (${b.id})`,
    async setup() {
      log = await b.segments.openSegmentedLog(dir, fsOf(b, root, memory));
    },
    run: (budget: Budget) => closedLoop({ concurrency, budget, bytesPerOp: bytes, op: async () => void (await log.append([record])) }),
    async teardown() {
      await log.close();
      if (!memory) await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Open a log, append one record, close it: the close writes the active segment's index. */
function openCloseVariant(b: Build, root: string, memory: boolean): Variant {
  const record = new Uint8Array(256).fill(6);
  const dir = path.join(root, `openclose-${b.id}`);
  const extra = fsOf(b, root, memory);
  return {
    id: b.id,
    label: `open+append+close (${b.id})`,
    run: (budget: Budget) =>
      closedLoop({
        concurrency: 1,
        budget,
        bytesPerOp: 0,
        op: async () => {
          const log = await b.segments.openSegmentedLog(dir, extra);
          await log.append([record]);
          await log.close();
        },
      }),
  };
}

async function main(argv: string[]): Promise<void> {
  await pairedBuildsMain(argv, {
    name: 'tail-ab',
    what: 'tail A/B',
    rounds: 10,
    ms: 1000,
    budget: { maxOps: 1_000_000, minOps: 5 },
    load,
    sections: (builds, root, memory) => [
      ['256 B × 1', builds.map((b) => appendVariant(b, root, memory, 256, 1))],
      ['64 KiB × 1', builds.map((b) => appendVariant(b, root, memory, 64 * 1024, 1))],
      ['1 MiB × 1', builds.map((b) => appendVariant(b, root, memory, 1 << 20, 1))],
      ['4 KiB × 16', builds.map((b) => appendVariant(b, root, memory, 4096, 16))],
      ['open+close', builds.map((b) => openCloseVariant(b, root, memory))],
    ],
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main(process.argv.slice(2));
