// Crash tests of the payload store through the recording layer (lib/fs/memory.ts) and the crash
// engine (lib/crash): for every crash point of a recorded run of put, addRef, removeRef and
// collectGarbage, and the subsets of unsynced operations and torn writes at each, reopening
// - succeeds and leaves no temporary file behind;
// - holds every acknowledged payload with its exact bytes, unless a collection had started and
//   the payload was neither referenced nor young;
// - holds the acknowledged holder sets (or the one an operation in flight was making);
// - and a collection run right after recovery removes nothing referenced or young.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openPayloadStore, type FsPayloadStore } from '../lib/payloads/index.js';
import { MemoryFs, type TraceEntry } from '../lib/fs/memory.js';
import { FaultyFs } from '../lib/fs/faulty.js';
import { ManualClock } from '../lib/clock.js';
import { checkAckAfterSync, exploreCrashStates, type CrashState } from '../lib/crash/index.js';
import { bytesOf, collect, digestOf, filesUnder, piecesOf } from './support/payloads.js';

const DIR = '/p';
const GRACE = 10 * 60_000;
const CHUNK = 64;

type Op =
  | { kind: 'put'; name: string; bytes: Uint8Array }
  | { kind: 'add' | 'remove'; name: string; holder: string }
  | { kind: 'advance'; ms: number }
  | { kind: 'gc' };

interface Payload {
  readonly name: string;
  readonly bytes: Uint8Array;
  readonly digest: string;
}

function payload(name: string, seed: number, size: number): Payload {
  const bytes = bytesOf(seed, size);
  return { name, bytes, digest: digestOf(bytes) };
}

const A = payload('A', 1, 200); // 4 chunks
const B = payload('B', 2, 130);
const C = payload('C', 3, 0);
const D = payload('D', 4, 70);
const PAYLOADS = new Map([A, B, C, D].map((p) => [p.name, p]));

/** put, references, a dedupe put, the last holder removed, time passing, a young put, a collection. */
const WORKLOAD: Op[] = [
  { kind: 'put', name: 'A', bytes: A.bytes },
  { kind: 'add', name: 'A', holder: 'q1' },
  { kind: 'put', name: 'B', bytes: B.bytes },
  { kind: 'add', name: 'B', holder: 'q1' },
  { kind: 'add', name: 'B', holder: 'q2' },
  { kind: 'put', name: 'C', bytes: C.bytes },
  { kind: 'remove', name: 'B', holder: 'q1' },
  { kind: 'put', name: 'A', bytes: A.bytes },
  { kind: 'remove', name: 'B', holder: 'q2' },
  { kind: 'advance', ms: GRACE + 60_000 },
  { kind: 'put', name: 'D', bytes: D.bytes },
  { kind: 'gc' },
  { kind: 'add', name: 'A', holder: 'q2' },
  { kind: 'remove', name: 'A', holder: 'q1' },
  { kind: 'add', name: 'D', holder: 'q3' },
];

/** Runs ops, marking 'start' (op index) before and 'ack' (op index) after each. */
async function runOps(store: FsPayloadStore, m: MemoryFs, clock: ManualClock, ops: readonly Op[], first = 0): Promise<void> {
  for (const [k, op] of ops.entries()) {
    const i = first + k;
    m.mark('start', i);
    switch (op.kind) {
      case 'put': {
        const info = await store.put(piecesOf(op.bytes, [50]));
        assert.equal(info.digest, PAYLOADS.get(op.name)?.digest);
        break;
      }
      case 'add':
        await store.addRef(PAYLOADS.get(op.name)?.digest ?? '', op.holder);
        break;
      case 'remove':
        await store.removeRef(PAYLOADS.get(op.name)?.digest ?? '', op.holder);
        break;
      case 'advance':
        clock.advance(op.ms);
        break;
      case 'gc':
        await store.collectGarbage();
        break;
    }
    m.mark('ack', i);
  }
}

/** Holder sets after the first `n` ops. */
function holdersAfter(ops: readonly Op[], n: number): Map<string, Set<string>> {
  const sets = new Map<string, Set<string>>();
  for (const op of ops.slice(0, n)) {
    if (op.kind !== 'add' && op.kind !== 'remove') continue;
    const set = sets.get(op.name) ?? new Set<string>();
    if (op.kind === 'add') set.add(op.holder);
    else set.delete(op.holder);
    sets.set(op.name, set);
  }
  return sets;
}

function sorted(set: Set<string> | undefined): string[] {
  return [...(set ?? [])].sort();
}

/**
 * The checker of one crash state of a run of `ops` (sequential: at most one op in flight).
 * `observed`: payload names a restarted process saw present (markers 'observed').
 */
function checker(ops: readonly Op[]) {
  return async (state: CrashState): Promise<void> => {
    let acked = -1;
    let started = -1;
    const observed = new Set<string>();
    for (const m of state.acknowledged) {
      if (m.label === 'ack') acked = Math.max(acked, m.detail as number);
      if (m.label === 'start') started = Math.max(started, m.detail as number);
      if (m.label === 'observed') observed.add(m.detail as string);
    }
    const done = acked + 1; // ops 0..acked are acknowledged
    const inFlight = started > acked ? ops[started] : undefined;
    const gcStarted = ops.slice(0, started + 1).some((op) => op.kind === 'gc');
    const clock = new ManualClock(0);
    const m = new MemoryFs({ image: state.image, trace: false });
    const store = await openPayloadStore(DIR, { fs: m, clock, graceMs: GRACE, chunkBytes: CHUNK });
    try {
      const image = m.currentImage();
      assert.deepEqual(filesUnder(image, `${DIR}/tmp`), [], 'temporary files left after open');
      assert.equal(image.files[`${DIR}/CLOCK.tmp`], undefined);

      // Holder sets: the acknowledged ones, or those the op in flight was making.
      const now = holdersAfter(ops, done);
      const next = inFlight === undefined ? now : holdersAfter(ops, started + 1);
      const putAcked = new Set(ops.slice(0, done).flatMap((op) => (op.kind === 'put' ? [op.name] : [])));
      const youngAt = ops.findIndex((op) => op.kind === 'advance');
      for (const p of PAYLOADS.values()) {
        const refs = await store.refs(p.digest);
        const ok = JSON.stringify(refs) === JSON.stringify(sorted(now.get(p.name))) || JSON.stringify(refs) === JSON.stringify(sorted(next.get(p.name)));
        assert.ok(ok, `${p.name}: holders ${JSON.stringify(refs)}, expected ${JSON.stringify(sorted(now.get(p.name)))} or ${JSON.stringify(sorted(next.get(p.name)))}`);
        const referenced = (now.get(p.name)?.size ?? 0) > 0 || refs.length > 0;
        const young = ops.findIndex((op, i) => op.kind === 'put' && op.name === p.name && i > youngAt) >= 0;
        const mayBeCollected = gcStarted && !referenced && !young;
        const mustExist = (putAcked.has(p.name) || observed.has(p.name)) && !mayBeCollected;
        const info = await store.stat(p.digest);
        if (mustExist) {
          assert.notEqual(info, null, `${p.name} was acknowledged and is lost`);
        }
        if (info !== null) assert.deepEqual(await collect(await store.get(p.digest)), p.bytes, `${p.name}: wrong bytes`);
        if (refs.length > 0) assert.notEqual(info, null, `${p.name} has holders but no bytes`);
      }
      // A collection right after recovery: store time resumed from the last checkpoint, so
      // nothing referenced, and nothing put within the grace period, may go.
      const before = new Map<string, boolean>();
      for (const p of PAYLOADS.values()) before.set(p.name, (await store.stat(p.digest)) !== null);
      await store.collectGarbage();
      for (const p of PAYLOADS.values()) {
        if (!before.get(p.name)) continue;
        const keep = (await store.refs(p.digest)).length > 0 || (putAcked.has(p.name) && ops.findIndex((op, i) => op.kind === 'put' && op.name === p.name && i > youngAt) >= 0);
        if (keep) assert.notEqual(await store.stat(p.digest), null, `${p.name} removed by a collection right after recovery`);
      }
      // The recovered store takes writes.
      if (before.get('A') === true) {
        await store.addRef(A.digest, 'after-crash');
        assert.ok((await store.refs(A.digest)).includes('after-crash'));
      }
    } finally {
      await store.close();
    }
  };
}

/** The linear pass, ignoring the store's own temporary directory (garbage by design). */
function linear(trace: readonly TraceEntry[]): ReturnType<typeof checkAckAfterSync> {
  return checkAckAfterSync(trace, {
    isAck: (mark) => mark.label === 'ack',
    dependsOn: (_mark, op) => !(op.path.startsWith(`${DIR}/tmp/`) && op.kind !== 'write' && op.kind !== 'writev'),
  });
}

test('crash states of put, addRef, removeRef and collectGarbage: nothing acknowledged is lost, no temporary file survives open', async (t) => {
  const m = new MemoryFs();
  const clock = new ManualClock(0);
  const store = await openPayloadStore(DIR, { fs: m, clock, graceMs: GRACE, chunkBytes: CHUNK });
  m.mark('opened');
  await runOps(store, m, clock, WORKLOAD);
  await store.close();
  const result = await exploreCrashStates({
    initial: m.initialImage,
    trace: m.trace,
    check: checker(WORKLOAD),
    maxStates: 12_000,
    samplesPerPoint: 6,
    exhaustiveLimit: 6,
  });
  t.diagnostic(
    `payload store, ${WORKLOAD.length} operations, ${m.trace.length} trace entries: ${result.states} crash states checked ` +
      `(${JSON.stringify(result.byFamily)}), ${result.points} crash points, ${result.duplicates} duplicates, ${result.elapsedMs.toFixed(0)} ms`,
  );
  assert.deepEqual(result.violations.map((v) => `${v.id}: ${String(v.error)}\n${v.description}`), []);
  assert.ok(result.byFamily.torn > 0 && result.byFamily['omit-one'] > 0);
  const pass = linear(m.trace);
  assert.equal(pass.acks, WORKLOAD.length);
  assert.deepEqual(pass.violations.map((v) => v.description), []);
  assert.deepEqual(pass.renamesBeforeSync.map((v) => v.description), []);
});

test('crash states of concurrent puts of the same and of different bytes', async (t) => {
  const m = new MemoryFs();
  const store = await openPayloadStore(DIR, { fs: m, graceMs: GRACE, chunkBytes: CHUNK });
  const bodies = [A, A, B, C, A];
  await Promise.all(
    bodies.map(async (p, i) => {
      const info = await store.put(piecesOf(p.bytes, [30 + i]));
      assert.equal(info.digest, p.digest);
      m.mark('put-ack', p.name);
    }),
  );
  await store.close();
  const result = await exploreCrashStates({
    initial: m.initialImage,
    trace: m.trace,
    maxStates: 6000,
    samplesPerPoint: 6,
    exhaustiveLimit: 6,
    check: async (state) => {
      const acked = new Set(state.acknowledged.filter((e) => e.label === 'put-ack').map((e) => e.detail as string));
      const fs = new MemoryFs({ image: state.image, trace: false });
      const s = await openPayloadStore(DIR, { fs, chunkBytes: CHUNK });
      try {
        assert.deepEqual(filesUnder(fs.currentImage(), `${DIR}/tmp`), []);
        for (const p of [A, B, C]) {
          const info = await s.stat(p.digest);
          if (acked.has(p.name)) assert.notEqual(info, null, `${p.name} acknowledged and lost`);
          if (info !== null) assert.deepEqual(await collect(await s.get(p.digest)), p.bytes);
        }
      } finally {
        await s.close();
      }
    },
  });
  t.diagnostic(`concurrent puts: ${result.states} crash states checked (${JSON.stringify(result.byFamily)})`);
  assert.deepEqual(result.violations.map((v) => `${v.id}: ${String(v.error)}\n${v.description}`), []);
});

test('a process killed inside put, addRef, removeRef or a collection, restarted, acting on what it sees: no crash undoes it', async (t) => {
  let total = 0;
  /** A path predicate true from its nth match on (pause patterns are asked once per call here). */
  const nth = (re: RegExp, n: number): ((p: string) => boolean) => {
    let seen = 0;
    return (p) => re.test(p) && ++seen >= n;
  };
  const FANOUT = (kind: string): RegExp => new RegExp(`^${DIR}/${kind}/[0-9a-f]{2}$`);
  const cases: { kill: 'datasync' | 'link' | 'rename' | 'syncDir' | 'unlink'; path: (p: string) => boolean; at: number; why: string }[] = [
    { kill: 'datasync', path: nth(/\/tmp\/put-/, 1), at: 0, why: 'put A: before the temporary file is synced' },
    { kill: 'link', path: nth(/\/tmp\/put-/, 1), at: 0, why: 'put A: before the link' },
    { kill: 'unlink', path: nth(/\/tmp\/put-/, 1), at: 0, why: 'put A: linked, its directory not synced' },
    // refs/<hh> is new here: made and its parent synced (nothing in it to trust), so the first sync of it follows the rename.
    { kill: 'syncDir', path: nth(FANOUT('refs'), 1), at: 1, why: 'addRef A q1: renamed, directory not synced' },
    { kill: 'rename', path: nth(/\/tmp\/ref-/, 1), at: 6, why: 'removeRef B q1: before the rename' },
    { kill: 'syncDir', path: nth(FANOUT('refs'), 1), at: 6, why: 'removeRef B q1: renamed, directory not synced' },
    { kill: 'unlink', path: nth(/\/refs\//, 1), at: 8, why: 'removeRef B q2: before the unlink of the last holder' },
    { kill: 'syncDir', path: nth(FANOUT('refs'), 1), at: 8, why: 'removeRef B q2: unlinked, directory not synced' },
    { kill: 'unlink', path: nth(/\/blobs\//, 1), at: 11, why: 'collection: before the first unlink' },
    { kill: 'syncDir', path: nth(FANOUT('blobs'), 1), at: 11, why: 'collection: unlinked, directory not synced' },
  ];
  for (const { kill, path, at, why } of cases) {
    const m = new MemoryFs();
    const faulty = new FaultyFs(m);
    const clock = new ManualClock(0);
    const store = await openPayloadStore(DIR, { fs: faulty, clock, graceMs: GRACE, chunkBytes: CHUNK });
    await runOps(store, m, clock, WORKLOAD.slice(0, at));
    const pause = faulty.pause(kill, path);
    m.mark('start', at);
    const dying = runOps(store, m, clock, WORKLOAD.slice(at, at + 1), at).catch(() => undefined);
    await pause.reached;
    await faulty.sever();
    await dying;
    // The next process: opens, reports what it sees, and goes on with the rest of the workload.
    const view = m.newProcess();
    const restarted = await openPayloadStore(DIR, { fs: view, clock, graceMs: GRACE, chunkBytes: CHUNK });
    for (const p of PAYLOADS.values()) if ((await restarted.stat(p.digest)) !== null) m.mark('observed', p.name);
    // Redo the interrupted op (a client retries what was not acknowledged), then one more.
    await runOps(restarted, m, clock, WORKLOAD.slice(at, at + 2), at);
    await restarted.close();
    const result = await exploreCrashStates({
      initial: m.initialImage,
      trace: m.trace,
      check: checker(WORKLOAD),
      maxStates: 3000,
      samplesPerPoint: 3,
      exhaustiveLimit: 4,
      points: 'syncs',
    });
    total += result.states;
    assert.equal(result.truncated, false, why);
    assert.deepEqual(result.violations.map((v) => `${why} ${v.id}: ${String(v.error)}\n${v.description}`), []);
  }
  t.diagnostic(`kill and restart: ${total} crash states checked over ${cases.length} runs`);
});
