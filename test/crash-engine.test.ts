// Tests of the crash-state engine itself: the families it builds, state ids and replay, the
// linear pass, and proof that it catches each planted class of durability mistake.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryFs, type DiskImage } from '../lib/fs/memory.js';
import { checkAckAfterSync, crashPoints, exploreCrashStates, replayCrashState, type CrashState } from '../lib/crash/index.js';
import { openCell, type CellOptions } from '../cells/index.js';
import type { CellMistakes } from '../cells/cell.js';

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const text = (b: Uint8Array | undefined): string | undefined => (b === undefined ? undefined : new TextDecoder().decode(b));

test('families at one crash point: durable, all, omit-one, torn (with and without the size extended), subsets', async () => {
  const m = new MemoryFs({ image: { files: { '/f': new Uint8Array(0) } } });
  const h = await m.open('/f', 'write');
  await h.write(new Uint8Array(1024).fill(0x61), 0); // two sectors, extends the file
  await h.write(bytes('b'), 2000); // one sector, extends the file
  m.mark('end');
  const seen = new Map<string, CrashState>();
  const result = await exploreCrashStates({
    initial: m.initialImage,
    trace: m.trace,
    check: (s) => {
      if (s.point === m.trace.length) seen.set(s.id, s);
    },
  });
  const describeFile = (s: CrashState): string => {
    const f = s.image.files['/f'];
    assert.ok(f !== undefined);
    let out = '';
    let run = '';
    let count = 0;
    for (const b of f) {
      const c = b === 0 ? '0' : String.fromCharCode(b);
      if (c === run) count++;
      else {
        if (count > 0) out += `${run}${count} `;
        run = c;
        count = 1;
      }
    }
    if (count > 0) out += `${run}${count}`;
    return out.trim();
  };
  const byId = Object.fromEntries([...seen.values()].map((s) => [s.id, `${s.family}: ${describeFile(s)}`]));
  assert.deepEqual(byId, {
    'p4': 'all: a1024 0976 b1',
    'p4-k': 'durable: ',
    'p4-d1': 'omit-one: 02000 b1',
    'p4-d2': 'omit-one: a1024',
    'p4-t1:0x': 'torn: 02000 b1',
    'p4-t1:1': 'torn: a512 01488 b1',
    'p4-t1:1x': 'torn: a512 01488 b1',
    'p4-t2:0x': 'torn: a1024 0977',
  });
  assert.ok(result.exhaustive);
  assert.equal(result.violations.length, 0);
  assert.ok(result.duplicates > 0, 'the crash point after the marker repeats the one before it');
});

test('directory entries: a rename is an unlink plus a link; an unsynced mkdir hides its subtree', async () => {
  const m = new MemoryFs({ image: { files: { '/a': bytes('A'), '/b': bytes('B') } } });
  await m.rename('/a', '/b');
  await m.mkdir('/new/deep');
  const h = await m.open('/new/deep/f', 'create');
  await h.write(bytes('x'), 0);
  await h.datasync();
  await m.syncDir('/new/deep');
  await h.close();
  const finals: string[] = [];
  await exploreCrashStates({
    initial: m.initialImage,
    trace: m.trace,
    check: (s) => {
      if (s.point >= 1) {
        finals.push(
          Object.entries(s.image.files)
            .map(([p, b]) => `${p}=${text(b)}`)
            .join(' ') + ` | ${(s.image.dirs ?? []).join(' ')}`,
        );
      }
    },
  });
  const set = new Set(finals);
  assert.ok(set.has('/a=A /b=B | '), 'nothing kept');
  assert.ok(set.has('/b=A /new/deep/f=x | /new /new/deep'), 'everything kept');
  assert.ok(set.has('/a=A /b=A | '), 'the link kept without the unlink: two names, one file');
  assert.ok(set.has('/b=B | '), 'the unlink kept without the link: the target keeps its old file');
  for (const f of finals) assert.ok(!f.includes('/new/deep/f') || f.includes('/new /new/deep'), f);
  assert.ok(![...set].some((f) => f.includes('/b=') === false), 'the target of a rename never vanishes');
});

test('every state id replays to the same disk', async () => {
  const m = new MemoryFs();
  await m.mkdir('/d');
  const h = await m.open('/d/f', 'create');
  for (let i = 0; i < 4; i++) await h.write(new Uint8Array(700).fill(65 + i), i * 600);
  await h.datasync();
  await m.rename('/d/f', '/d/g');
  await h.truncate(100);
  m.mark('ack');
  const images = new Map<string, DiskImage>();
  const result = await exploreCrashStates({ initial: m.initialImage, trace: m.trace, check: (s) => void images.set(s.id, s.image) });
  assert.equal(images.size, result.states);
  for (const [id, image] of images) {
    const again = replayCrashState({ initial: m.initialImage, trace: m.trace, id });
    assert.equal(again.id, id);
    assert.deepEqual(again.image, image, id);
  }
  assert.throws(() => replayCrashState({ trace: m.trace, id: 'nonsense' }), TypeError);
  assert.throws(() => replayCrashState({ trace: m.trace, id: 'p3-d999' }), RangeError);
});

test('many unsynced writes: seeded random sampling, deterministic, capped', async () => {
  const m = new MemoryFs();
  const h = await m.open('/f', 'create');
  for (let i = 0; i < 14; i++) await h.write(bytes(`w${i}`), i * 4);
  const run = async (seed: number, maxStates?: number): Promise<{ ids: string[]; random: number; truncated: boolean; exhaustive: boolean }> => {
    const ids: string[] = [];
    const r = await exploreCrashStates({
      initial: m.initialImage,
      trace: m.trace,
      seed,
      ...(maxStates === undefined ? {} : { maxStates }),
      check: (s) => void ids.push(s.id),
    });
    return { ids, random: r.byFamily.random, truncated: r.truncated, exhaustive: r.exhaustive };
  };
  const a = await run(7);
  const b = await run(7);
  const c = await run(8);
  assert.deepEqual(a.ids, b.ids, 'one seed, one exploration');
  assert.notDeepEqual(a.ids, c.ids);
  assert.ok(a.random > 0);
  assert.equal(a.exhaustive, false);
  const capped = await run(7, 50);
  assert.equal(capped.ids.length, 50);
  assert.equal(capped.truncated, true);
});

test('crash points: every op, or around syncs and markers', async () => {
  const m = new MemoryFs();
  const h = await m.open('/f', 'create'); // 0 (creates: a point)
  await h.size(); // 1 (no effect: no point)
  await h.write(bytes('x'), 0); // 2
  m.mark('m'); // 3
  await h.datasync(); // 4
  await h.read(new Uint8Array(1), 0); // 5
  assert.deepEqual(crashPoints(m.trace), [0, 1, 3, 4, 5, 6]);
  assert.deepEqual(crashPoints(m.trace, 'syncs'), [0, 4, 5, 6]);
});

// ---------------------------------------------------------------------------------------------
// A tiny store that replaces one value, and the planted mistakes the engine must catch.

type Plant = 'none' | 'ack-before-sync' | 'skip-dir-sync';

const VALUES = ['first value', 'second, longer value '.repeat(40), 'third'];

async function runStore(plant: Plant): Promise<MemoryFs> {
  const m = new MemoryFs();
  await m.mkdir('/d');
  await m.syncDir('/');
  for (const value of VALUES) {
    const h = await m.open('/d/value.tmp', 'create');
    await h.truncate(0);
    await h.write(bytes(value), 0);
    if (plant === 'ack-before-sync') {
      await m.rename('/d/value.tmp', '/d/value');
      await m.syncDir('/d');
      m.mark('ack', value);
      await h.datasync();
      await h.close();
      continue;
    }
    await h.datasync();
    await h.close();
    await m.rename('/d/value.tmp', '/d/value');
    if (plant !== 'skip-dir-sync') await m.syncDir('/d');
    m.mark('ack', value);
  }
  return m;
}

/** The value must be one that was written, and no older than the last acknowledged one. */
function checkValue(got: string | null, state: CrashState, values: readonly string[]): void {
  const acked = state.acknowledged.filter((e) => e.label === 'ack').map((e) => e.detail as string);
  const last = acked[acked.length - 1];
  const from = last === undefined ? 0 : values.indexOf(last);
  const allowed: (string | null)[] = values.slice(from);
  if (last === undefined) allowed.push(null);
  if (!allowed.includes(got)) {
    throw new Error(`read ${got === null ? 'nothing' : JSON.stringify(got.slice(0, 40))} after acknowledging ${JSON.stringify(last?.slice(0, 40))}`);
  }
}

async function checkStore(state: CrashState): Promise<void> {
  const m = new MemoryFs({ image: state.image, trace: false });
  const st = await m.stat('/d/value');
  let got: string | null = null;
  if (st !== null) {
    const h = await m.open('/d/value', 'read');
    const b = new Uint8Array(st.size);
    await h.read(b, 0);
    await h.close();
    got = new TextDecoder().decode(b);
  }
  checkValue(got, state, VALUES);
}

test('the correct store (write temp, fdatasync, rename, fsync dir, then ack) has no violation', async (t) => {
  const m = await runStore('none');
  const result = await exploreCrashStates({ initial: m.initialImage, trace: m.trace, check: checkStore });
  t.diagnostic(`tiny store: ${result.states} states in ${result.elapsedMs.toFixed(0)} ms, ${result.violations.length} violations`);
  assert.deepEqual(result.violations, []);
  assert.ok(result.exhaustive);
  assert.ok(result.states > 30);
  const linear = checkAckAfterSync(m.trace);
  assert.equal(linear.acks, 3);
  assert.deepEqual(linear.violations, []);
  assert.deepEqual(linear.renamesBeforeSync, []);
});

for (const plant of ['ack-before-sync', 'skip-dir-sync'] as const) {
  test(`a planted mistake is caught by both the explorer and the linear pass: ${plant}`, async (t) => {
    const m = await runStore(plant);
    const result = await exploreCrashStates({ initial: m.initialImage, trace: m.trace, check: checkStore });
    assert.ok(result.violations.length > 0, 'the explorer reports a violation');
    const first = result.violations[0];
    assert.ok(first !== undefined);
    t.diagnostic(`${plant}: ${result.violations.length} violation(s) in ${result.states} states; first:\n${first.description}\n${String(first.error)}`);
    // The reported state reproduces alone and fails the same way.
    const again = replayCrashState({ initial: m.initialImage, trace: m.trace, id: first.id });
    await assert.rejects(checkStore(again));
    const linear = checkAckAfterSync(m.trace);
    assert.ok(linear.violations.length > 0, 'the linear pass reports it too');
    const kinds = new Set(linear.violations.flatMap((v) => v.unsynced.map((e) => e.kind)));
    assert.ok(kinds.has(plant === 'ack-before-sync' ? 'write' : 'rename'), [...kinds].join());
    if (plant === 'ack-before-sync') assert.ok(linear.renamesBeforeSync.length > 0);
  });
}

// The same proof for the two-slot cell, with its test-only switches.

const CELL_VALUES = ['v0', 'v1:'.padEnd(900, 'a'), 'v2:'.padEnd(1500, 'b'), 'v3:'.padEnd(700, 'c'), 'v4'];

async function runCell(mistakes: CellMistakes): Promise<MemoryFs> {
  const m = new MemoryFs({ image: { dirs: ['/d'], files: {} } });
  const cell = await openCell('/d/cell', { fs: m, mistakes } as CellOptions);
  for (const v of CELL_VALUES) {
    await cell.write(bytes(v));
    m.mark('ack', v);
  }
  await cell.close();
  return m;
}

async function checkCell(state: CrashState): Promise<void> {
  const cell = await openCell('/d/cell', { fs: new MemoryFs({ image: state.image, trace: false }) });
  const value = await cell.read();
  await cell.close();
  checkValue(value === null ? null : new TextDecoder().decode(value), state, CELL_VALUES);
}

test('the cell as written has no violation; each planted cell mistake is caught', async (t) => {
  const ok = await runCell({});
  const clean = await exploreCrashStates({ initial: ok.initialImage, trace: ok.trace, check: checkCell });
  assert.deepEqual(clean.violations, []);
  assert.deepEqual(checkAckAfterSync(ok.trace).violations, []);
  for (const mistakes of [{ writeLiveSlot: true }, { ackBeforeSync: true }, { skipDirSync: true }] as CellMistakes[]) {
    const m = await runCell(mistakes);
    const result = await exploreCrashStates({ initial: m.initialImage, trace: m.trace, check: checkCell });
    const name = Object.keys(mistakes).join();
    assert.ok(result.violations.length > 0, `${name}: no violation found in ${result.states} states`);
    const first = result.violations[0];
    t.diagnostic(`cell ${name}: ${result.violations.length} violation(s), first ${first?.id} (${first?.family}): ${String(first?.error)}`);
    if (mistakes.writeLiveSlot === true) {
      assert.ok(result.violations.every((v) => v.family === 'torn' || v.family === 'random'), 'only a torn write shows it');
      assert.deepEqual(checkAckAfterSync(m.trace).violations, [], 'the linear pass cannot see it: it needs the states');
    } else {
      assert.ok(checkAckAfterSync(m.trace).violations.length > 0);
    }
  }
});
