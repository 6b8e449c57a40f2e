// Crash tests of the file-system host store through the recording layer (MemoryFs + lib/crash):
// the `host` workload (lib/crash/workloads/host.ts: single- and multi-scope commits over 2–3
// stripes with rolling files, truncateAfter, dropBefore, delete, bursts of concurrent commits,
// checkpoint rounds, a fence acquire and a takeover with the old holder's commit refused, a
// process killed inside a commit) is recorded, its distinct crash states are counted, and a seeded
// sample spread over the whole run is checked: each opens the store on the crash image (a new
// boot) and requires every acknowledged batch, no batch in part, nothing of a refused batch, a
// second open that agrees, a token above every acknowledged one, and a commit that lands. The
// linear pass proves every acknowledgement came after the syncs it depends on. Each planted
// mistake must be caught. Prints how many states were checked.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkAckAfterSync, exploreCrashStates } from '../lib/crash/index.js';
import { seededRandom, withSeededRandomness } from '../lib/crash/determinism.js';
import { workload } from '../lib/crash/workloads/host.js';
import type { WorkloadRun } from '../lib/crash/workloads/types.js';
import { MemoryFs } from '../lib/fs/memory.js';

async function record(seed: number, scale: number, plant: string | null): Promise<{ fs: MemoryFs; run: WorkloadRun | null; error: unknown }> {
  const fs = new MemoryFs({ image: { dirs: ['/data'], files: {} } });
  try {
    const run = await withSeededRandomness(seed, () => workload.run({ fs, seed, random: seededRandom(seed), scale, plant }));
    return { fs, run, error: null };
  } catch (error) {
    return { fs, run: null, error };
  }
}

/** Checks a seeded sample of `max` of the run's distinct crash states, spread over the whole run. */
async function explore(fs: MemoryFs, run: WorkloadRun, seed: number, max: number): Promise<{ candidates: number; states: number; points: number; violations: readonly { id: string; error: unknown }[] }> {
  const base = { initial: fs.initialImage, trace: fs.trace, seed };
  const counted = await exploreCrashStates({ ...base, check: () => undefined, select: () => false, maxStates: Number.POSITIVE_INFINITY });
  const n = counted.candidates;
  const k = Math.min(n, max);
  const rng = seededRandom(seed ^ 0x6f57);
  const chosen = new Set<number>();
  for (let j = n - k; j < n; j++) {
    const t = Math.floor(rng() * (j + 1));
    chosen.add(chosen.has(t) ? j : t);
  }
  const result = await exploreCrashStates({ ...base, select: (o) => chosen.has(o), check: (s) => run.check(s), maxViolations: 3 });
  return { candidates: n, states: result.states, points: result.points, violations: result.violations };
}

for (const seed of [1, 2]) {
  test(`host store crash states (seed ${seed}): every acknowledged batch, no batch in part, nothing fenced`, { timeout: 240_000 }, async () => {
    const { fs, run, error } = await record(seed, 1, null);
    assert.ok(run !== null, `the recorded run failed: ${String(error)}`);
    const linear = checkAckAfterSync(fs.trace, run.ackCheck === false ? {} : run.ackCheck);
    assert.deepEqual(linear.violations.map((v) => v.description), [], 'the linear pass');
    const r = await explore(fs, run, seed, 600);
    console.log(
      `host crash seed ${seed}: ${r.states} states checked of ${r.candidates} distinct (${r.points} crash points, ${fs.trace.length} trace entries); ` +
        `${linear.acks} acknowledgements proved after their syncs; ${run.summary ?? ''}`,
    );
    assert.deepEqual(r.violations.map((v) => `${v.id}: ${String(v.error)}`), []);
    assert.ok(r.states >= 500);
  });
}

test('host store crash states: each planted mistake is caught', { timeout: 240_000 }, async () => {
  for (const plant of Object.keys(workload.plants ?? {})) {
    const { fs, run, error } = await record(1, 0.5, plant);
    if (run === null) {
      // The recorded run itself noticed (a refused batch landed, or loads disagreed): caught.
      assert.match(String(error), /expected FENCED_OUT|landed|loads disagree/, `${plant}: the run failed for another reason`);
      console.log(`host crash plant ${plant}: caught by the recorded run (${String(error).slice(0, 120)})`);
      continue;
    }
    const linear = checkAckAfterSync(fs.trace, run.ackCheck === false ? {} : run.ackCheck);
    const r = await explore(fs, run, 1, 400);
    console.log(`host crash plant ${plant}: ${r.violations.length} violation(s) in ${r.states} states, ${linear.violations.length} from the linear pass`);
    assert.ok(r.violations.length + linear.violations.length > 0, `${plant} was not caught`);
  }
});
