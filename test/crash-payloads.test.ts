// Crash tests of the payload store through the runner (`seglog crash payloads`,
// lib/crash/workloads/payloads.ts): for each way the workload's second process can die — inside a
// put, a second put of stored bytes, an addRef, a removeRef (of the last holder or not), a
// collection — a run whose process 2 dies there has a seeded sample of its crash states checked
// (every acknowledged put present and byte-exact, no acknowledged holder's payload collected,
// nothing half-written served, no temporary file after open, verify clean, a second open the
// same); each planted mistake is reported by the explorer and by the linear pass, and its
// reproducer fails again alone; the command line lists, runs and replays the workload.
// Prints the states it checked.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { parseReproducer, replayCrashReproducer, runCrashWorkload } from '../lib/crash/runner.js';
import { seededRandom, withSeededRandomness } from '../lib/crash/determinism.js';
import { workload } from '../lib/crash/workloads/payloads.js';
import { MemoryFs } from '../lib/fs/memory.js';
import { expectCrashCliFailure, expectReplayViolation } from './support/crash-cli.js';

const exec = promisify(execFile);
const BIN = fileURLToPath(new URL('../bin/seglog.js', import.meta.url));

/** How process 2 dies, as the run's summary says it: "process 2 died in its <step> at its <call>". */
const DEATHS: readonly { name: string; pattern: RegExp }[] = [
  { name: 'put', pattern: /died in its put D .* at its (write 1|write 2|datasync|link|unlink|syncDir)$/ },
  { name: 'second put', pattern: /died in its put \w+ \(\d+ bytes, stored already\) at its (rename|syncDir)$/ },
  { name: 'addRef', pattern: /died in its addRef .* at its (write|datasync|rename|syncDir)$/ },
  { name: 'removeRef', pattern: /died in its removeRef .* at its (rename|unlink|syncDir)$/ },
  { name: 'collection', pattern: /died in its collectGarbage .* at its (unlink|syncDir)$/ },
];

/** The summary of the workload's recorded run at `seed` (recording only, no state checked). */
async function summaryOf(seed: number): Promise<string> {
  const fs = new MemoryFs({ image: { dirs: ['/data'], files: {} } });
  const run = await withSeededRandomness(seed, () => workload.run({ fs, seed, random: seededRandom(seed), scale: 1, plant: null }));
  return run.summary ?? '';
}

let statesChecked = 0;
/** A clean state of a checked run, to replay. */
let cleanState: { seed: number; fingerprint: string } | null = null;

test('payloads: a run that dies in each kind of operation, a sample of its crash states each: no violation', async (t) => {
  // The first seeds (from 3: seeds 1 and 2 run in test/crash-runner.test.ts) whose process 2 dies in each kind of operation.
  const chosen = new Map<string, number>();
  for (let seed = 3; seed < 200 && chosen.size < DEATHS.length; seed++) {
    const summary = await summaryOf(seed);
    const death = DEATHS.find((d) => d.pattern.test(summary));
    if (death !== undefined && !chosen.has(death.name)) chosen.set(death.name, seed);
  }
  assert.deepEqual([...chosen.keys()].sort(), DEATHS.map((d) => d.name).sort(), 'every kind of death occurs within 200 seeds');
  let states = 0;
  for (const [name, seed] of chosen) {
    const report = await runCrashWorkload('payloads', { seed, maxStates: 250, maxViolations: 3 });
    states += report.states;
    t.diagnostic(
      `${name}, seed ${seed}: ${report.states} of ${report.candidates} states (${report.points} crash points, ${report.traceEntries} trace entries), ` +
        `${report.linearAcks} acknowledgements proved after their syncs, ${Math.round(report.elapsedMs)} ms; ${report.summary}`,
    );
    assert.deepEqual(report.violations.map((v) => `${v.reproducer}: ${v.message}\n${v.description}`), []);
    assert.equal(report.states, 250);
    assert.ok((report.linearAcks ?? 0) > 20);
    for (const family of ['omit-one', 'subset', 'random']) assert.ok((report.byFamily[family] ?? 0) > 0, `${name}: family ${family} explored`);
    assert.match(report.summary, /put again/, 'a second put of stored bytes (the rename over the copy)');
    assert.match(report.summary, /[1-9]\d* payload\(s\) removed by collections/);
    cleanState ??= { seed, fingerprint: report.fingerprint };
  }
  statesChecked += states;
  t.diagnostic(`payloads: ${states} crash states checked over ${chosen.size} runs`);
});

test('payloads: a clean state replays alone as passing, from the same trace', async () => {
  assert.ok(cleanState !== null);
  const replay = await replayCrashReproducer(`payloads@${cleanState.seed}/p200#${cleanState.fingerprint}`);
  assert.equal(replay.sameTrace, true, 'the recorded run is deterministic for its seed');
  assert.equal(replay.passed, true, replay.explanation);
  assert.match(replay.explanation, /acknowledged through step \d+ \(/);
  assert.match(replay.explanation, /the check passed/);
});

test('payloads: each planted mistake is reported by the explorer and the linear pass, and replays alone', async (t) => {
  const plants = Object.keys(workload.plants ?? {});
  assert.deepEqual(plants.sort(), ['put-ack-before-sync', 'put-skip-dir-sync', 'ref-rename-before-sync', 'ref-skip-dir-sync']);
  for (const plant of plants) {
    const report = await runCrashWorkload('payloads', { seed: 1, plant, maxStates: 20_000, maxViolations: 1 });
    statesChecked += report.states;
    const explored = report.violations.filter((v) => v.family !== 'linear' && v.family !== 'run');
    const linear = report.violations.filter((v) => v.family === 'linear');
    t.diagnostic(`${plant}: reported after ${report.states} states: ${explored[0]?.reproducer}: ${explored[0]?.message}; linear pass: ${linear[0]?.message.slice(0, 160)}`);
    assert.ok(explored.length > 0, `${plant}: no crash state was reported`);
    assert.ok(linear.length > 0, `${plant}: the linear pass reported nothing`);
    const v = explored[0]!;
    const parsed = parseReproducer(v.reproducer);
    assert.deepEqual([parsed.workload, parsed.plant, parsed.seed, parsed.stateId], ['payloads', plant, 1, v.stateId]);
    const replay = await replayCrashReproducer(v.reproducer);
    assert.equal(replay.sameTrace, true, 'the replay recorded the same trace');
    assert.equal(replay.passed, false);
    assert.equal(replay.message, v.message);
    assert.match(replay.explanation, /unsynced at the crash/);
    assert.match(replay.explanation, /acknowledged through step \d+/);
  }
});

test('seglog crash lists, runs and replays the payloads workload', async () => {
  const list = await exec(process.execPath, [BIN, 'crash', '--list']);
  assert.match(list.stdout, /^payloads /m);
  for (const plant of Object.keys(workload.plants ?? {})) assert.ok(list.stdout.includes(plant), `--list names ${plant}`);
  const failing = await expectCrashCliFailure(['payloads', '--plant', 'put-skip-dir-sync', '--max-states', '150']);
  assert.match(failing.stdout, /payloads\+put-skip-dir-sync\s+\d+\s+[\d,]+\s+sampled\s+[1-9]/);
  await expectReplayViolation(failing.reproducer);
});

test('crash states checked by this file', (t) => {
  t.diagnostic(`crash-payloads tests checked ${statesChecked} crash states in all`);
  console.log(`crash-payloads: ${statesChecked} crash states checked`);
  assert.ok(statesChecked >= 1500);
});
