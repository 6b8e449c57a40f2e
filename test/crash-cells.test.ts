// Crash tests of the two-slot cell through the recording layer: at every crash point, for every
// subset of the unsynced operations and every torn write, reopening gives a value that was
// written, no older than the last acknowledged one, never a torn one; a second open agrees.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { openCell, cellValueCapacity } from '../cells/index.js';
import { encodeSlot, encodeSlotV1 } from '../cells/format.js';
import { MemoryFs } from '../lib/fs/memory.js';
import { FaultyFs } from '../lib/fs/faulty.js';
import { checkAckAfterSync, exploreCrashStates, type CrashState } from '../lib/crash/index.js';

/** A value that names itself: its index, then filler up to `length` bytes. */
function valueOf(index: number, length: number): Uint8Array {
  const out = new Uint8Array(length);
  const head = new TextEncoder().encode(`#${index};`);
  out.set(head.subarray(0, length));
  for (let i = head.length; i < length; i++) out[i] = (index * 31 + i) % 251;
  return out;
}

function same(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * The checker: the reopened value is one of `values`, at or after the last acknowledged index
 * and any value a restarted process observed; null only before the first acknowledgement.
 */
function cellChecker(values: readonly Uint8Array[], slotBytes: number) {
  return async (state: CrashState): Promise<void> => {
    let floor = -1;
    for (const m of state.acknowledged) {
      if (m.label === 'ack' || m.label === 'observed') floor = Math.max(floor, m.detail as number);
    }
    const read = async (): Promise<Uint8Array | null> => {
      const cell = await openCell('/d/cell', { fs: new MemoryFs({ image: state.image, trace: false }), slotBytes });
      const v = await cell.read();
      await cell.close();
      return v;
    };
    const value = await read();
    if (value === null) {
      if (floor >= 0) throw new Error(`read nothing after value ${floor} was acknowledged`);
      return;
    }
    // Values may repeat (empty ones do): the read is fine if any write at or after the floor wrote it.
    const index = values.findIndex((v, i) => i >= floor && same(v, value));
    if (index < 0) {
      const older = values.findIndex((v) => same(v, value));
      if (older < 0) throw new Error(`read ${value.length} bytes that no write wrote`);
      throw new Error(`read value ${older} after value ${floor} was acknowledged`);
    }
    const again = await read();
    if (again === null || !same(again, value)) throw new Error('a second open read another value');
  };
}

async function runWrites(slotBytes: number, lengths: readonly number[]): Promise<{ m: MemoryFs; values: Uint8Array[] }> {
  const m = new MemoryFs({ image: { dirs: ['/d'], files: {} } });
  const values = lengths.map((n, i) => valueOf(i, n));
  const cell = await openCell('/d/cell', { fs: m, slotBytes });
  for (const [i, v] of values.entries()) {
    await cell.write(v);
    m.mark('ack', i);
  }
  await cell.close();
  return { m, values };
}

test('every crash state of a sequence of cell writes reads an acknowledged-or-later value, never a torn one', async (t) => {
  const slotBytes = 4096;
  const cap = cellValueCapacity(slotBytes);
  const lengths: number[] = [];
  let seed = 12345;
  for (let i = 0; i < 160; i++) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    lengths.push(i % 10 === 0 ? cap : i % 7 === 0 ? 0 : seed % (cap + 1));
  }
  const { m, values } = await runWrites(slotBytes, lengths);
  const result = await exploreCrashStates({ initial: m.initialImage, trace: m.trace, check: cellChecker(values, slotBytes), maxStates: 50_000 });
  const rate = Math.round(result.states / (result.elapsedMs / 1000));
  t.diagnostic(
    `cell, ${values.length} writes: ${result.states} crash states checked (${JSON.stringify(result.byFamily)}), ` +
      `${result.duplicates} duplicates skipped, ${result.elapsedMs.toFixed(0)} ms, ${rate} states/s`,
  );
  assert.deepEqual(result.violations.map((v) => `${v.id}: ${String(v.error)}`), []);
  assert.equal(result.truncated, false);
  assert.ok(result.exhaustive);
  assert.ok(result.byFamily.torn > 0);
  assert.ok(result.states >= 1000, `only ${result.states} states`);
  const linear = checkAckAfterSync(m.trace);
  assert.equal(linear.acks, values.length);
  assert.deepEqual(linear.violations, []);
  assert.deepEqual(linear.renamesBeforeSync, []);
});

test('random slot sizes and value lengths: no crash state breaks the cell', async (t) => {
  let total = 0;
  await fc.assert(
    fc.asyncProperty(
      // Every kind of slot size: one unit (64 … 256 bytes, both slots in one sector) or 1 … 6 sectors.
      fc
        .oneof(fc.integer({ min: 64, max: 256 }), fc.integer({ min: 1, max: 6 }).map((k) => k * 512))
        .chain((slotBytes) => fc.tuple(fc.constant(slotBytes), fc.array(fc.nat(cellValueCapacity(slotBytes)), { minLength: 1, maxLength: 6 }))),
      async ([slotBytes, lengths]) => {
        const { m, values } = await runWrites(slotBytes, lengths);
        const result = await exploreCrashStates({ initial: m.initialImage, trace: m.trace, check: cellChecker(values, slotBytes) });
        total += result.states;
        assert.deepEqual(result.violations.map((v) => `${v.id}: ${String(v.error)}\n${v.description}`), []);
      },
    ),
    { numRuns: 40 },
  );
  t.diagnostic(`random cells: ${total} crash states checked`);
});

test('a process killed mid-write, restarted, observing the value and writing on: no crash state undoes what it saw', async (t) => {
  let total = 0;
  for (const killAt of ['write', 'datasync', 'rename', 'syncDir'] as const) {
    const m = new MemoryFs({ image: { dirs: ['/d'], files: {} } });
    const values = [0, 1, 2, 3, 4, 5].map((i) => valueOf(i, 300 + i * 500));
    const faulty = new FaultyFs(m);
    const cell = await openCell('/d/cell', { fs: faulty });
    const first = killAt === 'rename' || killAt === 'syncDir' ? 0 : 2;
    for (let i = 0; i < first; i++) {
      await cell.write(values[i] ?? new Uint8Array());
      m.mark('ack', i);
    }
    const pause = faulty.pause(killAt);
    const dying = cell.write(values[first] ?? new Uint8Array()).catch(() => undefined);
    await pause.reached;
    await faulty.sever();
    await dying;
    // The next process: opens (which makes what it reads durable), reports what it saw, writes on.
    const restarted = await openCell('/d/cell', { fs: m.newProcess() });
    const seen = await restarted.read();
    const seenIndex = seen === null ? -1 : values.findIndex((v) => same(v, seen));
    assert.ok(seen === null || seenIndex >= 0);
    if (seenIndex >= 0) m.mark('observed', seenIndex);
    for (let i = first + 1; i < values.length; i++) {
      await restarted.write(values[i] ?? new Uint8Array());
      m.mark('ack', i);
    }
    await restarted.close();
    const result = await exploreCrashStates({ initial: m.initialImage, trace: m.trace, check: cellChecker(values, 4096) });
    total += result.states;
    assert.deepEqual(result.violations.map((v) => `${killAt} ${v.id}: ${String(v.error)}\n${v.description}`), []);
    assert.deepEqual(checkAckAfterSync(m.trace).violations, [], killAt);
  }
  t.diagnostic(`kill and restart: ${total} crash states checked`);
});

test('a cell of the first format, converted by its first write, and one whose older slot is damaged: every crash state reads an acknowledged-or-later value', async (t) => {
  let total = 0;
  const S = 2048;
  const starts: [string, Uint8Array][] = [
    ['first format, both slots', new Uint8Array([...encodeSlotV1(S, 5, valueOf(0, 300)), ...encodeSlotV1(S, 4, valueOf(99, 1500))])],
    ['first format, one slot written', new Uint8Array([...encodeSlotV1(S, 1, valueOf(0, 300)), ...new Uint8Array(S)])],
    // A whole slot of this format next to a first-format one: a conversion that stopped halfway.
    ['converted halfway', new Uint8Array([...encodeSlotV1(S, 1, valueOf(0, 300)), ...encodeSlot(S, 1, 3, valueOf(0, 300))])],
    // The older slot damaged in its third sector: the first write fills it before writing there.
    ['older slot damaged', new Uint8Array([...encodeSlot(S, 0, 9, valueOf(0, 300)), ...encodeSlot(S, 1, 8, valueOf(99, 1500)).map((b, i) => (i === 1100 ? b ^ 4 : b))])],
  ];
  for (const [name, file] of starts) {
    const m = new MemoryFs({ image: { dirs: ['/d'], files: { '/d/cell': file } } });
    const values = [0, 1, 2, 3].map((i) => valueOf(i, 300 + i * 450));
    const cell = await openCell('/d/cell', { fs: m, slotBytes: S });
    assert.ok(same((await cell.read())!, values[0]!), name);
    m.mark('ack', 0);
    for (let i = 1; i < values.length; i++) {
      await cell.write(values[i]!);
      m.mark('ack', i);
    }
    await cell.close();
    const result = await exploreCrashStates({ initial: m.initialImage, trace: m.trace, check: cellChecker(values, S), tornSubsets: true });
    total += result.states;
    assert.deepEqual(result.violations.map((v) => `${name} ${v.id}: ${String(v.error)}\n${v.description}`), []);
    assert.deepEqual(checkAckAfterSync(m.trace).violations, [], name);
  }
  t.diagnostic(`conversion and filling: ${total} crash states checked`);
});
