// The live-group simulation (test/support/raft-sim.ts): several nodes' file-system stores driven
// as a consensus engine drives them, with restarts from disk (clean, kill, power loss) at random
// points and the invariants checked after every restart. Each run prints its seed; set
// SEGLOG_SIM_SEED to rerun one (and SEGLOG_SIM_STEPS for a longer run).

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { runRaftSimulation } from './support/raft-sim.js';

const fixed = process.env['SEGLOG_SIM_SEED'];
const steps = Number(process.env['SEGLOG_SIM_STEPS'] ?? 400);
const seeds = fixed !== undefined ? [Number(fixed)] : [1, 2, 3, 4, 5, 6, Date.now() % 100_000];

for (const seed of seeds) {
  test(`raft live-group simulation, seed ${seed}`, async (t) => {
    const r = await runRaftSimulation({ seed, steps });
    const summary = `seed ${seed}: ${r.steps} steps, ${r.elections} elections, ${r.committed} entries committed, ${r.truncations} truncations, ${r.snapshots} snapshots, ${r.installs} installs, restarts ${JSON.stringify(r.restarts)}, ${r.payloadMissing} PAYLOAD_MISSING, ${r.checks} state checks`;
    t.diagnostic(summary);
    console.log(summary);
    assert.ok(r.elections > 0);
  });
}
