// Unit and corruption tests of the two-slot cell on the real file system.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openCell, cellTempPath } from '../cells/index.js';
import { cellValueCapacity, encodeSlot, encodeSlotV1 } from '../cells/format.js';
import { isSeglogError } from '../lib/errors.js';
import { MemoryFs } from '../lib/fs/memory.js';

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seglog-cells-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const text = (b: Uint8Array | null): string | null => (b === null ? null : new TextDecoder().decode(b));

async function rejectsWith(p: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isSeglogError(err), `expected a SeglogError, got ${String(err)}`);
    assert.equal(err.code, code);
    return true;
  });
}

test('a new cell reads null; a write is read back, also after reopening', async (t) => {
  const file = path.join(tempDir(t), 'vote');
  const cell = await openCell(file);
  assert.equal(await cell.read(), null);
  assert.equal(fs.existsSync(file), false, 'opening creates nothing');
  await cell.write(bytes('first'));
  assert.equal(text(await cell.read()), 'first');
  await cell.write(bytes('second'));
  await cell.write(bytes(''));
  assert.equal(text(await cell.read()), '');
  await cell.write(bytes('third'));
  await cell.close();
  assert.equal(fs.statSync(file).size, 2 * 4096, 'the file never changes size after creation');
  assert.equal(fs.existsSync(cellTempPath(file)), false);

  const again = await openCell(file);
  assert.equal(text(await again.read()), 'third');
  await again.write(bytes('fourth'));
  await again.close();
  const third = await openCell(file);
  assert.equal(text(await third.read()), 'fourth');
  await third.close();
});

test('writes alternate slots with increasing stamps', async (t) => {
  const file = path.join(tempDir(t), 'c');
  const cell = await openCell(file, { slotBytes: 128 });
  for (let i = 1; i <= 5; i++) {
    await cell.write(bytes(`v${i}`));
    const raw = fs.readFileSync(file);
    const slot = (i - 1) % 2;
    // A 128-byte slot is one unit: its stamp is in the last 12 bytes (the file's first write is stamp 2).
    const view = new DataView(raw.buffer, raw.byteOffset + slot * 128);
    assert.equal(view.getBigUint64(128 - 12, true), BigInt(i + 1), `write ${i} lands in slot ${slot}`);
  }
  await cell.close();
});

test('capacity: a value of exactly the capacity fits, one byte more is INVALID', async (t) => {
  const file = path.join(tempDir(t), 'c');
  const cell = await openCell(file, { slotBytes: 100 });
  const cap = cellValueCapacity(100);
  assert.equal(cap, 72);
  await cell.write(new Uint8Array(cap).fill(7));
  await rejectsWith(cell.write(new Uint8Array(cap + 1)), 'INVALID');
  await rejectsWith(cell.write('nope' as unknown as Uint8Array), 'INVALID');
  assert.deepEqual(await cell.read(), new Uint8Array(cap).fill(7), 'a refused write changes nothing');
  await cell.close();
});

test('bad options and a missing directory are refused', async (t) => {
  const dir = tempDir(t);
  await rejectsWith(openCell(path.join(dir, 'c'), { slotBytes: 10 }), 'INVALID');
  await rejectsWith(openCell(path.join(dir, 'c'), { slotBytes: 100.5 }), 'INVALID');
  await rejectsWith(openCell(path.join(dir, 'missing', 'c')), 'NOT_FOUND');
});

test('a file must be opened with the slot size it was created with', async (t) => {
  const file = path.join(tempDir(t), 'c');
  const cell = await openCell(file, { slotBytes: 256 });
  await cell.write(bytes('x'));
  await cell.close();
  await rejectsWith(openCell(file), 'INVALID');
  await rejectsWith(openCell(file, { slotBytes: 128 }), 'INVALID');
});

test('closed: read and write reject with CLOSED; close is idempotent and waits for writes', async (t) => {
  const file = path.join(tempDir(t), 'c');
  const cell = await openCell(file);
  const w = cell.write(bytes('pending'));
  const c1 = cell.close();
  const c2 = cell.close();
  await rejectsWith(cell.read(), 'CLOSED');
  await rejectsWith(cell.write(bytes('late')), 'CLOSED');
  await w;
  await c1;
  await c2;
  const again = await openCell(file);
  assert.equal(text(await again.read()), 'pending', 'a write issued before close completed');
  await again.close();
});

test('operations take effect in call order; read waits for earlier writes', async (t) => {
  const file = path.join(tempDir(t), 'c');
  const cell = await openCell(file);
  const writes = [];
  for (let i = 0; i < 20; i++) writes.push(cell.write(bytes(`n${i}`)));
  const read = cell.read();
  writes.push(cell.write(bytes('after-read')));
  assert.equal(text(await read), 'n19');
  await Promise.all(writes);
  assert.equal(text(await cell.read()), 'after-read');
  await cell.close();
  const again = await openCell(file);
  assert.equal(text(await again.read()), 'after-read');
  await again.close();
});

test('values are copied in and out', async (t) => {
  const file = path.join(tempDir(t), 'c');
  const cell = await openCell(file);
  const value = bytes('abc');
  const w = cell.write(value);
  value[0] = 0x7a;
  await w;
  const out = await cell.read();
  assert.ok(out !== null);
  out[1] = 0x7a;
  assert.equal(text(await cell.read()), 'abc');
  await cell.close();
});

test('a leftover temporary file from a crashed first write is harmless', async (t) => {
  const file = path.join(tempDir(t), 'c');
  fs.writeFileSync(cellTempPath(file), Buffer.alloc(20000, 0xab));
  const cell = await openCell(file);
  assert.equal(await cell.read(), null);
  await cell.write(bytes('v'));
  await cell.close();
  assert.equal(fs.statSync(file).size, 8192);
  const again = await openCell(file);
  assert.equal(text(await again.read()), 'v');
  await again.close();
});

test('two whole slots with one stamp, no whole slot, an empty or short file are CORRUPT; a gap between stamps is not', async (t) => {
  const dir = tempDir(t);
  const S = 128;
  const make = (name: string, a: Uint8Array | null, b: Uint8Array | null, size = 2 * S): string => {
    const buf = Buffer.alloc(size);
    if (a !== null) buf.set(a.subarray(0, Math.min(a.length, size)), 0);
    if (b !== null && size > S) buf.set(b.subarray(0, size - S), S);
    const file = path.join(dir, name);
    fs.writeFileSync(file, buf);
    return file;
  };
  await rejectsWith(openCell(make('same', encodeSlot(S, 0, 4, bytes('a')), encodeSlot(S, 1, 4, bytes('b'))), { slotBytes: S }), 'CORRUPT');
  await rejectsWith(openCell(make('none', null, null), { slotBytes: S }), 'CORRUPT');
  await rejectsWith(openCell(make('empty', null, null, 0), { slotBytes: S }), 'CORRUPT');
  await rejectsWith(openCell(make('short', encodeSlot(S, 0, 2, bytes('a')), null, S), { slotBytes: S }), 'CORRUPT');
  await rejectsWith(openCell(make('filler only', encodeSlot(S, 0, 2, null), encodeSlot(S, 1, 1, bytes('b'))), { slotBytes: S }), 'CORRUPT');
  // A slot written at the other slot's position fails its check (the check is seeded by the offset).
  await rejectsWith(openCell(make('misplaced', encodeSlot(S, 1, 7, bytes('a')), encodeSlot(S, 1, 6, bytes('b'))), { slotBytes: S }), 'CORRUPT');
  const gap = await openCell(make('gap', encodeSlot(S, 0, 4, bytes('a')), encodeSlot(S, 1, 9, bytes('b'))), { slotBytes: S });
  assert.equal(text(await gap.read()), 'b', 'a write after a torn one skips the torn stamps');
  await gap.close();
  const ok = await openCell(make('ok', encodeSlot(S, 0, 7, bytes('a')), encodeSlot(S, 1, 8, bytes('b'))), { slotBytes: S });
  assert.equal(text(await ok.read()), 'b');
  await ok.close();
  const older = await openCell(make('older', encodeSlot(S, 0, 9, bytes('a')), encodeSlot(S, 1, 8, bytes('b'))), { slotBytes: S });
  assert.equal(text(await older.read()), 'a');
  await older.write(bytes('c'));
  await older.close();
  const after = await openCell(path.join(dir, 'older'), { slotBytes: S });
  assert.equal(text(await after.read()), 'c', 'the next write takes a stamp above both');
  await after.close();
});

/**
 * Flips each byte of the file in turn (on a MemoryFs loaded with the damaged bytes) and opens it:
 * the read must give exactly the value `expectAt` names, or a typed error; never another value.
 */
async function flipEveryByte(original: Uint8Array, slotBytes: number, expectAt: (offset: number) => string | 'error'): Promise<number> {
  let checked = 0;
  for (let offset = 0; offset < original.length; offset++) {
    const damaged = Uint8Array.from(original);
    damaged[offset] = (damaged[offset] ?? 0) ^ (offset % 2 === 0 ? 0xff : 0x01);
    const fsys = new MemoryFs({ image: { files: { '/cell': damaged } }, trace: false });
    let got: string | null | 'error';
    try {
      const cell = await openCell('/cell', { slotBytes, fs: fsys });
      got = text(await cell.read());
      await cell.close();
    } catch (err) {
      assert.ok(isSeglogError(err, 'CORRUPT') || isSeglogError(err, 'INVALID'), `untyped error at ${offset}: ${String(err)}`);
      got = 'error';
    }
    assert.equal(got, expectAt(offset), `flipping byte ${offset}`);
    checked++;
  }
  return checked;
}

async function cellFile(slotBytes: number, values: string[]): Promise<Uint8Array> {
  const fsys = new MemoryFs({ trace: false });
  const cell = await openCell('/cell', { slotBytes, fs: fsys });
  for (const v of values) await cell.write(bytes(v));
  await cell.close();
  const file = fsys.currentImage().files['/cell'];
  assert.ok(file !== undefined);
  return file;
}

test('corruption: a flipped byte in the live slot is CORRUPT; in the older slot, the live value or CORRUPT — never the older value', async () => {
  let checked = 0;
  for (const slotBytes of [128, 4096]) {
    const file = await cellFile(slotBytes, ['older value', 'newest value!']);
    // Slot 0: the first value (stamp 2), slot 1: the newest (stamp 3, live). Every byte of both
    // lies under a sector's checksum. Damage in the older slot leaves the newest value when the
    // sectors that still check say they are older (a slot of several sectors); in a one-sector
    // slot nothing says so, and the open refuses.
    checked += await flipEveryByte(file, slotBytes, (offset) => (offset >= slotBytes ? 'error' : slotBytes > 512 ? 'newest value!' : 'error'));
  }
  assert.equal(checked, 2 * (128 + 4096));
});

test('corruption: with one written value, a flipped byte in it is CORRUPT, never null', async () => {
  for (const slotBytes of [256, 1024]) {
    const file = await cellFile(slotBytes, ['only value']);
    // Slot 0 holds the value; slot 1 the filler written with the file (stamped below it).
    await flipEveryByte(file, slotBytes, (offset) => (offset < slotBytes || slotBytes <= 256 ? 'error' : 'only value'));
  }
});

test('a file of the first format opens with its value and is converted by the first write', async (t) => {
  const dir = tempDir(t);
  const S = 1024;
  const cases: [string, Uint8Array, Uint8Array, string][] = [
    ['both valid', encodeSlotV1(S, 7, bytes('seven')), encodeSlotV1(S, 8, bytes('eight')), 'eight'],
    ['one written', encodeSlotV1(S, 1, bytes('one')), new Uint8Array(S), 'one'],
    ['newer torn', encodeSlotV1(S, 4, bytes('four')), encodeSlotV1(S, 5, bytes('five')).map((b, i) => (i === 30 ? b ^ 1 : b)), 'four'],
  ];
  for (const [name, a, b, want] of cases) {
    const file = path.join(dir, name);
    fs.writeFileSync(file, Buffer.concat([a, b]));
    const cell = await openCell(file, { slotBytes: S });
    assert.equal(text(await cell.read()), want, name);
    await cell.write(bytes(`${want}+1`));
    await cell.close();
    const raw = fs.readFileSync(file);
    for (const k of [0, 1]) assert.notEqual(raw.readUInt32LE(k * S), 0x31434753, `${name}: slot ${k} is of the current format`);
    const again = await openCell(file, { slotBytes: S });
    assert.equal(text(await again.read()), `${want}+1`, name);
    await again.close();
    // Converted: a flipped byte in the live slot is now CORRUPT.
    const live = raw.indexOf(Buffer.from(`${want}+1`));
    const flipped = Buffer.from(raw);
    flipped[live] = flipped[live]! ^ 1;
    fs.writeFileSync(file, flipped);
    await rejectsWith(openCell(file, { slotBytes: S }), 'CORRUPT');
  }
});
