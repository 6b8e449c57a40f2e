// Tests of the crash-injection runner (`seglog crash`, lib/crash/runner.ts): every registered
// workload passes; each planted class of mistake in the real primitives is reported; a reported
// state replays alone from its reproducer; runs are deterministic; the exhaustive mode; the CLI.
// Prints how many crash states it checked (the CI floor is 5,000 across all workloads).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import {
  parseReproducer,
  replayCrashReproducer,
  runCrashWorkload,
  runCrashWorkloads,
  type CrashRunReport,
} from '../lib/crash/runner.js';
import { loadWorkload, workloadNames } from '../lib/crash/workloads/index.js';
import { formatCrashReport } from '../lib/tools/crash-cli.js';
import { expectCrashCliFailure, expectReplayViolation } from './support/crash-cli.js';

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../bin/seglog.js', import.meta.url));
/** The primitives' workloads: their planted mistakes must each be caught. */
const PRIMITIVES = ['cells', 'segments'];

let statesChecked = 0;

function problems(report: CrashRunReport): string[] {
  return report.workloads.flatMap((w) => w.violations.map((v) => `${v.reproducer}: ${v.message}\n${v.description}`));
}

test('every workload, two seeds: no violation in any crash state (at least 5,000 states)', async (t) => {
  const first = await runCrashWorkloads({ seed: 1 });
  t.diagnostic(formatCrashReport(first));
  assert.deepEqual(problems(first), []);
  const second = await runCrashWorkloads({ seed: 2, maxStates: 1000 });
  t.diagnostic(formatCrashReport(second));
  assert.deepEqual(problems(second), []);
  for (const name of PRIMITIVES) assert.ok(first.workloads.some((w) => w.workload === name && w.states > 0), name);
  for (const w of [...first.workloads, ...second.workloads]) {
    assert.ok(w.linearAcks === null || w.linearAcks > 0, `${w.workload}: the linear pass saw acknowledgements`);
    assert.ok((w.byFamily['torn'] ?? 0) > 0, `${w.workload}: torn writes explored`);
  }
  statesChecked += first.states + second.states;
  t.diagnostic(`crash states checked by the runner: ${first.states + second.states}`);
  assert.ok(first.states + second.states >= 5000, `only ${first.states + second.states} crash states`);
});

for (const name of PRIMITIVES) {
  test(`${name}: each planted mistake is reported as a violation, and its reproducer replays it alone`, async (t) => {
    const workload = await loadWorkload(name);
    const plants = Object.keys(workload.plants ?? {});
    assert.ok(plants.length >= 3, `${name} plants ${plants.join(', ')}`);
    for (const plant of plants) {
      const report = await runCrashWorkload(name, { seed: 1, plant, maxStates: 50_000, maxViolations: 3 });
      statesChecked += report.states;
      const explored = report.violations.filter((v) => v.family !== 'linear' && v.family !== 'run');
      t.diagnostic(
        `${name} + ${plant}: ${report.violations.length} violation(s) (${explored.length} crash states, ${report.violations.length - explored.length} linear) ` +
          `after ${report.states} states; first: ${explored[0]?.reproducer}: ${explored[0]?.message}`,
      );
      assert.ok(explored.length > 0, `${plant}: the runner reported no crash state`);
      const v = explored[0]!;
      const parsed = parseReproducer(v.reproducer);
      assert.deepEqual([parsed.workload, parsed.plant, parsed.seed, parsed.stateId], [name, plant, 1, v.stateId]);
      const replay = await replayCrashReproducer(v.reproducer);
      assert.equal(replay.sameTrace, true, 'the replay recorded the same trace');
      assert.equal(replay.passed, false);
      assert.equal(replay.message, v.message);
      assert.match(replay.explanation, /unsynced at the crash/);
      assert.match(replay.explanation, /acknowledged through step \d+/);
      assert.match(replay.explanation, /VIOLATION/);
    }
  });
}

test('the planted ack-before-sync is also caught by the linear pass (no state needed)', async () => {
  for (const name of PRIMITIVES) {
    const report = await runCrashWorkload(name, { seed: 3, plant: 'ack-before-sync', maxStates: 1, maxViolations: 1 });
    assert.ok(report.violations.some((v) => v.family === 'linear'), name);
    const replay = await replayCrashReproducer(report.violations.find((v) => v.family === 'linear')!.reproducer);
    assert.equal(replay.passed, false);
    assert.match(replay.explanation, /acknowledges before these were durable/);
  }
});

test('a clean state replays as passing; runs are deterministic for a seed and differ across seeds', async () => {
  const a = await runCrashWorkload('segments', { seed: 5, scale: 0.3, maxStates: 150 });
  const b = await runCrashWorkload('segments', { seed: 5, scale: 0.3, maxStates: 150 });
  const c = await runCrashWorkload('segments', { seed: 6, scale: 0.3, maxStates: 150 });
  statesChecked += a.states + b.states + c.states;
  assert.equal(a.fingerprint, b.fingerprint);
  assert.equal(a.candidates, b.candidates);
  assert.equal(a.summary, b.summary);
  assert.notEqual(a.fingerprint, c.fingerprint);
  assert.equal(a.sampled, true);
  assert.equal(a.states, 150);
  const replay = await replayCrashReproducer(`segments@5x0.3/p40#${a.fingerprint}`);
  assert.equal(replay.sameTrace, true);
  assert.equal(replay.passed, true, replay.explanation);
  assert.match(replay.explanation, /the check passed/);
  const stale = await replayCrashReproducer(`segments@5x0.3/p40#000000000000`);
  assert.equal(stale.sameTrace, false);
  await assert.rejects(replayCrashReproducer('segments@5/nonsense'), TypeError);
  await assert.rejects(replayCrashReproducer('nope@1/p3'), RangeError);
  assert.throws(() => parseReproducer('segments/p3'), TypeError);
});

test('exhaustive mode: every subset crossed with every tear, no sampling', async (t) => {
  const report = await runCrashWorkload('cells', { seed: 1, scale: 0.15, exhaustive: true });
  statesChecked += report.states;
  t.diagnostic(`cells exhaustive at scale 0.15: ${report.states} states ${JSON.stringify(report.byFamily)}`);
  assert.deepEqual(report.violations, []);
  assert.equal(report.exhaustive, true);
  assert.equal(report.sampled, false);
  assert.equal(report.states, report.candidates);
  assert.ok((report.byFamily['torn-subset'] ?? 0) > 0);
});

test('seglog crash: table, --json, exit codes, --replay of a violation, --list', async (t) => {
  const json = await run(process.execPath, [BIN, 'crash', 'cells', '--json', '--max-states', '60', '--seed', '4']);
  const report = JSON.parse(json.stdout) as CrashRunReport;
  assert.equal(report.workloads.length, 1);
  assert.equal(report.workloads[0]!.states, 60);
  assert.equal(report.violations, 0);
  statesChecked += report.states;

  const table = await run(process.execPath, [BIN, 'crash', 'cells', '--max-states', '40']);
  assert.match(table.stdout, /workload\s+states\s+of\s+mode\s+violations\s+time/);
  assert.match(table.stdout, /cells\s+40\s+\d+\s+sampled\s+0/);
  assert.match(table.stdout, /no violation/);

  const { reproducer } = await expectCrashCliFailure(['cells', '--plant', 'write-live-slot']);
  t.diagnostic(`reproducer printed: ${reproducer}`);
  await expectReplayViolation(reproducer);

  const list = await run(process.execPath, [BIN, 'crash', '--list']);
  for (const name of workloadNames()) assert.match(list.stdout, new RegExp(`^${name} `, 'm'));
  const usage = await run(process.execPath, [BIN, 'crash', '--seed']).then(
    () => assert.fail('bad usage exited 0'),
    (err: { code: number }) => err,
  );
  assert.equal(usage.code, 2);
});

test('crash states checked by this file', (t) => {
  t.diagnostic(`crash-runner tests checked ${statesChecked} crash states in all`);
  assert.ok(statesChecked >= 5000);
});
