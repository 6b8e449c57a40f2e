// `seglog bench aa`: a check of the method itself, and the measurement behind the choice not to
// drive the disk benchmarks with tinybench.
//
// Owns: an A/A comparison (two identical variants, 4 KiB write + fdatasync to a growing file, whose
// true ratio is 1) measured three ways on the same disk in one process — this harness's rotated,
// paired rounds; tinybench's sequential tasks (A's whole run, then A''s), repeated; and the ratio of
// medians of the harness's own runs (unpaired) — plus each tool's fixed cost per operation on an
// empty async function. Guarantees: it only reports; nothing in the product depends on it.

import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { Bench } from 'tinybench';
import { rawAppendVariant } from './raw.js';
import * as raw from './rawfs.js';
import { runSection } from './harness/runner.js';
import { ratio, summarize, type Stat } from './harness/stats.js';
import { closedLoop } from './harness/timing.js';

export interface AaResult {
  /** B/A records/s, paired by round (this harness). */
  harnessPaired: Stat;
  /** median(B)/median(A) of the same runs, unpaired. */
  harnessUnpaired: number;
  /** B/A mean throughput per tinybench repetition (A's task ran, then B's). */
  tinybench: Stat;
  /** Fixed cost per operation of an empty async op, ns: this harness's closedLoop and tinybench. */
  overheadNs: { harness: number; tinybench: number };
}

export async function runAaCheck(dir: string, rounds: number, taskMs: number, slices = 1): Promise<AaResult> {
  await mkdir(dir, { recursive: true });
  try {
    const size = 4096;
    const mk = (id: string) => rawAppendVariant({ id, dir, size, method: 'fdatasync', maxBytesPerRun: 256 << 20 });
    const section = await runSection({
      id: 'aa',
      title: 'A/A',
      description: '',
      variants: [mk('A'), mk('B')],
      baseline: 'A',
      rounds,
      warmupRounds: 1,
      slices,
      budget: { durationMs: taskMs, maxOps: 1_000_000, minOps: 10 },
    });
    const [a, b] = section.variants;
    if (a === undefined || b === undefined || b.ratio === null) throw new Error('A/A section lost a variant');

    // tinybench: each repetition runs task A for taskMs, then task B for taskMs.
    const buf = raw.payload(size);
    const tinyRatios: number[] = [];
    for (let rep = 0; rep < rounds; rep++) {
      const fds: Record<string, { fd: number; at: number }> = {};
      for (const name of ['A', 'B']) {
        fds[name] = { fd: await raw.open(path.join(dir, `tiny-${name}.dat`), raw.O_WRONLY | raw.O_CREAT | raw.O_TRUNC), at: 0 };
      }
      const bench = new Bench({ time: taskMs, warmupTime: Math.round(taskMs / 4), iterations: 10 });
      for (const name of ['A', 'B']) {
        const f = fds[name] as { fd: number; at: number };
        bench.add(
          name,
          async () => {
            await raw.write(f.fd, buf, f.at);
            f.at += size;
            await raw.fdatasync(f.fd);
          },
          { async: true },
        );
      }
      await bench.run();
      const hz = (name: string): number => {
        const r = bench.getTask(name)?.result;
        if (r === undefined || r.state !== 'completed') throw new Error(`tinybench task ${name} did not complete`);
        return r.throughput.mean;
      };
      tinyRatios.push(ratio(hz('B'), hz('A')));
      for (const f of Object.values(fds)) await raw.close(f.fd);
    }

    // Fixed cost per op: an empty async function, many times.
    const n = 200_000;
    const loop = await closedLoop({ concurrency: 1, budget: { durationMs: 60_000, maxOps: n, minOps: n }, bytesPerOp: 0, op: async () => {} });
    const noop = new Bench({ time: 0, iterations: n, warmupTime: 0, warmupIterations: 1000 });
    noop.add('noop', async () => {}, { async: true });
    const t0 = process.hrtime.bigint();
    await noop.run();
    const tinyNs = Number(process.hrtime.bigint() - t0) / n;

    return {
      harnessPaired: b.ratio.recordsPerSec,
      harnessUnpaired: ratio(b.summary.recordsPerSec.median, a.summary.recordsPerSec.median),
      tinybench: summarize(tinyRatios),
      overheadNs: { harness: loop.elapsedNs / loop.ops, tinybench: tinyNs },
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
