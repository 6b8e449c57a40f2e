// The live-group simulation (test/support/raft-sim.ts): several nodes' file-system stores, each
// holding a member of 16 groups, driven as a consensus engine drives each group, with restarts of
// a node (all its groups at once) from disk (clean, kill, power loss) at random points and the
// invariants of every group checked after every restart. Each run prints its seed; set
// SEGLOG_SIM_SEED to rerun one (SEGLOG_SIM_STEPS: steps per group, for a longer run;
// SEGLOG_SIM_GROUPS: another group count).

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { runRaftSimulation } from './support/raft-sim.js';

const fixed = process.env['SEGLOG_SIM_SEED'];
const groups = Number(process.env['SEGLOG_SIM_GROUPS'] ?? 16);
const steps = Number(process.env['SEGLOG_SIM_STEPS'] ?? 400) * groups;
const seeds = fixed !== undefined ? [Number(fixed)] : [1, 2, 3, 4, 5, 6, Date.now() % 100_000];

for (const seed of seeds) {
  test(`raft live-group simulation, seed ${seed}`, async (t) => {
    const r = await runRaftSimulation({ seed, steps, groups });
    const summary = `seed ${seed}: ${r.groups} groups, ${r.steps} steps, ${r.elections} elections, ${r.committed} entries committed, ${r.truncations} truncations, ${r.snapshots} snapshots, ${r.installs} installs, restarts ${JSON.stringify(r.restarts)}, ${r.payloadMissing} PAYLOAD_MISSING, ${r.checks} state checks, ${r.journalReplayed} node journal records replayed`;
    t.diagnostic(summary);
    console.log(summary);
    assert.ok(r.elections >= r.groups, 'every group elected a leader');
    assert.ok(r.committed > 0, 'entries were committed');
    if (r.groups > 1) assert.ok(r.journalReplayed > 0, 'the reopens replayed records of the node journal');
  });
}
