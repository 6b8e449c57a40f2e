// Crash tests of the file-system Raft store through the recording layer (MemoryFs + lib/crash):
// append, truncate, purge, saveVote + saveCommitted, installSnapshot (lib/crash/workloads/raft.ts),
// the payload reference checkpoint across truncations and a purge (raft-references.ts), and the
// node's clean-close mark across a kill and a group manifest's growth (raft-clean.ts).
// Every crash state the engine builds must open, and show every acknowledged entry, vote,
// committed id, purge and install, and nothing no prefix of the calls makes. Prints the number of
// states each workload checked. Then the same with every group journaling its writes (a lone
// group writes its own log by default). Then each planted ordering mistake must be caught, both ways.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { PLANT_WORKLOAD, raftCrashWorkloads, raftPlants, runRaftCrashWorkload } from '../lib/crash/workloads/raft.js';
import { referencesWorkload } from '../lib/crash/workloads/raft-references.js';
import { cleanCloseWorkload, manifestGrowthWorkload } from '../lib/crash/workloads/raft-clean.js';

// Each workload as it comes (a lone group writes its own log), with every group journaling its
// writes, and switching between the two at every append (every switch's barrier and flushed
// mark), so that each crash state of those paths is checked.
for (const w of [...raftCrashWorkloads, referencesWorkload, cleanCloseWorkload, manifestGrowthWorkload]) {
  for (const mode of [undefined, 'journal', 'alternate'] as const) {
    const name = `${w.name}${mode === undefined ? '' : `, ${mode}`}`;
    test(`crash: raft ${name}`, async (t) => {
      const run = await runRaftCrashWorkload(w, { maxStates: 4000, maxViolations: 3 }, undefined, mode);
      const r = run.explore;
      const line = `${name}: ${r.states} crash states checked at ${r.points} points (trace ${run.traceLength} entries; ${r.duplicates} duplicates skipped; ${r.exhaustive ? 'exhaustive' : 'sampled'}${r.truncated ? ', truncated' : ''}) in ${Math.round(r.elapsedMs)} ms`;
      t.diagnostic(line);
      console.log(`crash raft ${line}`);
      assert.deepEqual(
        r.violations.map((v) => `${v.id} [${v.family}]: ${v.error instanceof Error ? v.error.message : String(v.error)}`),
        [],
        'no crash state breaks the contract',
      );
      assert.ok(r.states > 0);
      if (run.linear !== null) {
        assert.deepEqual(run.linear.violations.map((v) => v.description), [], 'every acknowledgement after the syncs it depends on');
        assert.deepEqual(run.linear.renamesBeforeSync.map((v) => v.description), [], 'no rename before its file is synced');
      }
    });
  }
}

for (const [plant, mistakes] of Object.entries(raftPlants)) {
  for (const mode of [undefined, 'journal'] as const) {
    test(`crash: planted mistake '${plant}' is caught${mode === undefined ? '' : ', journaled'}`, async () => {
      const w = [...raftCrashWorkloads, referencesWorkload, cleanCloseWorkload, manifestGrowthWorkload].find((x) => x.name === PLANT_WORKLOAD[plant]);
      assert.ok(w !== undefined);
      const run = await runRaftCrashWorkload(w, { maxStates: 4000, maxViolations: 1 }, mistakes, mode);
      assert.ok(run.explore.violations.length > 0, `${plant}: no violation found in ${run.explore.states} states`);
    });
  }
}
