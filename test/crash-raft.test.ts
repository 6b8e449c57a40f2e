// Crash tests of the file-system Raft store through the recording layer (MemoryFs + lib/crash):
// append, truncate, purge, saveVote + saveCommitted, installSnapshot (lib/crash/workloads/raft.ts),
// the payload reference checkpoint across truncations and a purge (raft-references.ts), and the
// node's clean-close mark across a kill and a group manifest's growth (raft-clean.ts).
// Every crash state the engine builds must open, and show every acknowledged entry, vote,
// committed id, purge and install, and nothing no prefix of the calls makes. Prints the number of
// states each workload checked. Then the same with every group journaling its writes (a lone
// group writes its own log by default). Then each planted ordering mistake must be caught, both ways.
// The workloads that write a vote, a committed pointer or a purged id run again on groups of the
// earlier three-cell layout (raft-three-cells.ts), and their cell-ordering plants are caught there.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { PLANT_WORKLOAD, THREE_CELL_WORKLOADS, raftCrashWorkloads, raftPlants, runRaftCrashWorkload } from '../lib/crash/workloads/raft.js';
import { onThreeCells } from '../lib/crash/workloads/raft-three-cells.js';
import { referencesWorkload } from '../lib/crash/workloads/raft-references.js';
import { cleanCloseWorkload, manifestGrowthWorkload } from '../lib/crash/workloads/raft-clean.js';

// Each workload as it comes (a lone group writes its own log), with every group journaling its
// writes, and switching between the two at every append (every switch's barrier and flushed
// mark), so that each crash state of those paths is checked.
// The workloads that write the vote, committed pointer or purged id, also on groups of the
// earlier three-cell layout (direct and journaled).
const threeCells = THREE_CELL_WORKLOADS.map((name) => onThreeCells(raftCrashWorkloads.find((w) => w.name === name)!));
for (const w of [...raftCrashWorkloads, referencesWorkload, cleanCloseWorkload, manifestGrowthWorkload, ...threeCells]) {
  for (const mode of threeCells.includes(w) ? ([undefined, 'journal'] as const) : ([undefined, 'journal', 'alternate'] as const)) {
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

// The cell-ordering plants, caught on the three-cell layout too.
for (const plant of ['vote-not-barrier', 'committed-before-log', 'drop-before-purged-id']) {
  test(`crash: planted mistake '${plant}' is caught on groups of the three-cell layout`, async () => {
    const w = threeCells.find((x) => x.name === `${PLANT_WORKLOAD[plant]} (three cells)`);
    assert.ok(w !== undefined);
    const run = await runRaftCrashWorkload(w, { maxStates: 4000, maxViolations: 1 }, raftPlants[plant]);
    assert.ok(run.explore.violations.length > 0, `${plant}: no violation found in ${run.explore.states} states`);
  });
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
