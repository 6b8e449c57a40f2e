// Unit tests of the segmented log (segments/): every operation and its edges, on the real file
// system in a temporary directory (and a few on MemoryFs).

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { openSegmentedLog, FdCache, type SegmentedLog, type SegmentedLogOptions } from '../segments/index.js';
import { isSeglogError } from '../lib/errors.js';
import { MemoryFs } from '../lib/fs/memory.js';
import { FRAME_HEADER_BYTES, HEADER_BYTES } from '../segments/format.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'seglog-segments-'));
after(() => fs.rmSync(root, { recursive: true, force: true }));
let dirs = 0;
function newDir(): string {
  return path.join(root, `log-${++dirs}`);
}

function rec(i: number, size = 10): Uint8Array {
  const b = Buffer.alloc(size, i & 0xff);
  b.write(`r${i}`.slice(0, size));
  return b;
}
const str = (b: Uint8Array): string => Buffer.from(b).toString();

async function rejectsCode(p: Promise<unknown> | (() => unknown), code: string): Promise<void> {
  await assert.rejects(
    async () => (typeof p === 'function' ? p() : p),
    (err: unknown) => isSeglogError(err) && err.code === code,
  );
}

async function readAll(log: SegmentedLog): Promise<Uint8Array[]> {
  return log.read(log.firstIndex, Number.MAX_SAFE_INTEGER);
}

function segFiles(dir: string): string[] {
  return fs.readdirSync(dir).filter((n) => n.endsWith('.seg')).sort();
}

test('a new log is empty; reads at or past the end give []; below first is INVALID', async () => {
  const log = await openSegmentedLog(newDir());
  assert.equal(log.firstIndex, 0);
  assert.equal(log.endIndex, 0);
  assert.deepEqual(await log.read(0, 10), []);
  assert.deepEqual(await log.read(5, 10), []);
  assert.equal(await log.append([rec(0)]), 0);
  assert.deepEqual(await log.read(0, 0), []);
  await log.dropBefore(1);
  await rejectsCode(log.read(0, 1), 'INVALID');
  await log.close();
});

test('firstIndex of a new log; ignored when the log exists', async () => {
  const dir = newDir();
  let log = await openSegmentedLog(dir, { firstIndex: 100 });
  assert.equal(log.firstIndex, 100);
  assert.equal(log.endIndex, 100);
  assert.equal(await log.append([rec(1), rec(2)]), 100);
  await rejectsCode(log.read(99, 1), 'INVALID');
  await log.close();
  log = await openSegmentedLog(dir, { firstIndex: 7 });
  assert.equal(log.firstIndex, 100);
  assert.equal(log.endIndex, 102);
  assert.deepEqual((await log.read(100, 5)).map(str), [str(rec(1)), str(rec(2))]);
  await log.close();
});

test('records of length 0, an empty append, and a batch', async () => {
  const dir = newDir();
  let log = await openSegmentedLog(dir);
  assert.equal(await log.append([]), 0);
  assert.equal(await log.append([new Uint8Array(0), rec(1), new Uint8Array(0)]), 0);
  assert.equal(log.endIndex, 3);
  const got = await log.read(0, 10);
  assert.deepEqual(got.map((b) => b.length), [0, 10, 0]);
  await log.close();
  log = await openSegmentedLog(dir);
  assert.deepEqual((await log.read(0, 10)).map((b) => b.length), [0, 10, 0]);
  await log.close();
});

test('a record bigger than segmentBytes gets a segment of its own; reads cross segments', async () => {
  const dir = newDir();
  let log = await openSegmentedLog(dir, { segmentBytes: 256 });
  const big = Buffer.alloc(5000, 9);
  await log.append([rec(0), rec(1)]);
  await log.append([big]);
  await log.append([rec(3)]);
  assert.equal(log.stats().segments, 3);
  assert.equal(log.stats().rolls, 2);
  const all = await log.read(0, 10);
  assert.deepEqual(all.map((b) => b.length), [10, 10, 5000, 10]);
  assert.ok(Buffer.from(all[2]!).equals(big));
  await log.close();
  log = await openSegmentedLog(dir, { segmentBytes: 256 });
  assert.equal(log.endIndex, 4);
  const again = await log.read(1, 3);
  assert.deepEqual(again.map((b) => b.length), [10, 5000, 10]);
  assert.equal(log.stats().indexRebuilds, 0);
  await log.close();
});

test('many rolls; every record reads back after reopen; sealed segments are not rescanned', async () => {
  const dir = newDir();
  let log = await openSegmentedLog(dir, { segmentBytes: 200 });
  for (let i = 0; i < 60; i += 3) await log.append([rec(i), rec(i + 1), rec(i + 2)]);
  assert.ok(log.stats().rolls >= 8, `rolls ${log.stats().rolls}`);
  await log.close();
  log = await openSegmentedLog(dir, { segmentBytes: 200 });
  assert.equal(log.endIndex, 60);
  const all = await readAll(log);
  assert.deepEqual(all.map(str), Array.from({ length: 60 }, (_, i) => str(rec(i))));
  assert.equal(log.stats().indexRebuilds, 0);
  for (let from = 0; from < 60; from += 7) {
    assert.deepEqual((await log.read(from, 5)).map(str), all.slice(from, from + 5).map(str));
  }
  await log.close();
});

test('limit and maxBytes: the first record always, then at most maxBytes of data', async () => {
  const log = await openSegmentedLog(newDir(), { segmentBytes: 300 });
  await log.append([rec(0, 100), rec(1, 100), rec(2, 100), rec(3, 100), rec(4, 100)]);
  assert.equal((await log.read(0, 2)).length, 2);
  assert.equal((await log.read(0, 10, 0)).length, 1);
  assert.equal((await log.read(0, 10, 99)).length, 1);
  assert.equal((await log.read(0, 10, 200)).length, 2);
  assert.equal((await log.read(0, 10, 250)).length, 2);
  assert.equal((await log.read(1, 10, 1000)).length, 4);
  assert.equal((await log.read(0, 3, 1000)).length, 3);
  // Staged (in-memory) records obey the same bounds.
  log.stage([rec(5, 100), rec(6, 100)]);
  assert.equal((await log.read(4, 10, 150)).length, 1);
  assert.equal((await log.read(4, 10, 200)).length, 2);
  await log.sync();
  await log.close();
});

test('dropBefore in the middle of a segment; whole segments are unlinked; survives reopen', async () => {
  const dir = newDir();
  let log = await openSegmentedLog(dir, { segmentBytes: 150 });
  for (let i = 0; i < 30; i++) await log.append([rec(i)]);
  const before = segFiles(dir).length;
  await log.dropBefore(17);
  assert.equal(log.firstIndex, 17);
  assert.equal(log.endIndex, 30);
  assert.ok(segFiles(dir).length < before);
  await rejectsCode(log.read(16, 1), 'INVALID');
  assert.deepEqual((await log.read(17, 2)).map(str), [str(rec(17)), str(rec(18))]);
  await log.dropBefore(10); // below first: no-op
  assert.equal(log.firstIndex, 17);
  await log.close();
  log = await openSegmentedLog(dir, { segmentBytes: 150 });
  assert.equal(log.firstIndex, 17);
  assert.equal(log.endIndex, 30);
  assert.deepEqual((await readAll(log)).map(str), Array.from({ length: 13 }, (_, i) => str(rec(17 + i))));
  await log.close();
});

test('dropBefore past the end removes every record and keeps the end', async () => {
  const dir = newDir();
  let log = await openSegmentedLog(dir, { segmentBytes: 150 });
  for (let i = 0; i < 12; i++) await log.append([rec(i)]);
  await log.dropBefore(1000);
  assert.equal(log.firstIndex, 12);
  assert.equal(log.endIndex, 12);
  assert.deepEqual(await log.read(12, 5), []);
  assert.equal(await log.append([rec(12)]), 12);
  await log.close();
  log = await openSegmentedLog(dir, { segmentBytes: 150 });
  assert.equal(log.firstIndex, 12);
  assert.equal(log.endIndex, 13);
  assert.deepEqual((await log.read(12, 5)).map(str), [str(rec(12))]);
  assert.equal(segFiles(dir).length, 1);
  await log.close();
});

test('truncateAfter into a sealed segment; new records never meet the old ones', async () => {
  const dir = newDir();
  let log = await openSegmentedLog(dir, { segmentBytes: 150 });
  for (let i = 0; i < 30; i++) await log.append([rec(i)]);
  await log.truncateAfter(7);
  assert.equal(log.endIndex, 7);
  assert.deepEqual(await log.read(7, 5), []);
  for (let i = 7; i < 12; i++) assert.equal(await log.append([rec(1000 + i)]), i);
  const expected = [...Array.from({ length: 7 }, (_, i) => str(rec(i))), ...Array.from({ length: 5 }, (_, i) => str(rec(1007 + i)))];
  assert.deepEqual((await readAll(log)).map(str), expected);
  await log.close();
  log = await openSegmentedLog(dir, { segmentBytes: 150 });
  assert.equal(log.endIndex, 12);
  assert.deepEqual((await readAll(log)).map(str), expected);
  await log.close();
});

test('truncateAfter inside the active segment, at a segment base, at first, at/after end, below first', async () => {
  const dir = newDir();
  let log = await openSegmentedLog(dir, { segmentBytes: 150 });
  for (let i = 0; i < 10; i++) await log.append([rec(i)]);
  await log.truncateAfter(10); // at the end: no-op
  await log.truncateAfter(99); // past it: no-op
  assert.equal(log.endIndex, 10);
  await log.truncateAfter(9); // inside the active segment
  assert.equal(log.endIndex, 9);
  await log.append([rec(500)]);
  await log.dropBefore(3);
  await rejectsCode(log.truncateAfter(2), 'INVALID');
  await log.truncateAfter(3); // at first: empties the log
  assert.equal(log.firstIndex, 3);
  assert.equal(log.endIndex, 3);
  await log.append([rec(3), rec(4)]);
  await log.close();
  log = await openSegmentedLog(dir, { segmentBytes: 150 });
  assert.equal(log.firstIndex, 3);
  assert.deepEqual((await readAll(log)).map(str), [str(rec(3)), str(rec(4))]);
  await log.close();
});

test('reset empties the log durably at any index', async () => {
  const dir = newDir();
  let log = await openSegmentedLog(dir, { segmentBytes: 150 });
  for (let i = 0; i < 20; i++) await log.append([rec(i)]);
  await log.reset(500);
  assert.equal(log.firstIndex, 500);
  assert.equal(log.endIndex, 500);
  assert.equal(log.stats().segments, 1);
  // The live segment, and at most one removed segment's file kept as the spare (deleted at close).
  assert.ok(segFiles(dir).length <= 2, `${segFiles(dir).length} segment files`);
  await rejectsCode(log.read(10, 1), 'INVALID');
  assert.equal(await log.append([rec(500)]), 500);
  await log.reset(3); // backwards too
  assert.equal(log.endIndex, 3);
  await log.append([rec(3)]);
  await log.close();
  assert.equal(segFiles(dir).length, 1, 'no spare is left behind by a close');
  log = await openSegmentedLog(dir, { segmentBytes: 150 });
  assert.equal(log.firstIndex, 3);
  assert.deepEqual((await readAll(log)).map(str), [str(rec(3))]);
  await log.close();
});

test('recycling: a dropped segment\'s file becomes the next segment; its old frames never read as records', async () => {
  const dir = newDir();
  const segmentBytes = 4096;
  const big = (i: number): Buffer => Buffer.alloc(700, 0x41 + (i % 26));
  let log = await openSegmentedLog(dir, { segmentBytes });
  const expected = new Map<number, Uint8Array>();
  const add = async (r: Uint8Array): Promise<void> => {
    expected.set(await log.append([r]), r);
  };
  for (let i = 0; i < 12; i++) await add(big(i));
  assert.ok(log.stats().rolls >= 2);
  // Drop every sealed segment: the first one's file is kept as the spare, the others are deleted.
  await log.dropBefore(log.endIndex);
  const first = log.firstIndex;
  assert.equal(log.stats().segments, 1);
  assert.equal(segFiles(dir).length, 2, 'the live segment and the spare');
  const spareName = segFiles(dir).find((n) => !n.startsWith(String(first).padStart(20, '0')))!;
  const spareBytes = fs.readFileSync(path.join(dir, spareName));
  // Fill the live segment: the roll makes the next segment out of the spare.
  const rolls = log.stats().rolls;
  for (let i = 0; log.stats().rolls === rolls; i++) await add(big(100 + i));
  assert.equal(log.stats().recycled, 1);
  assert.ok(!segFiles(dir).includes(spareName), 'the spare was renamed');
  for (let i = 0; i < 12; i++) await add(rec(200 + i));
  const want = (): string[] => [...expected.entries()].filter(([k]) => k >= first).sort((a, b) => a[0] - b[0]).map(([, r]) => str(r));
  assert.deepEqual((await readAll(log)).map(str), want());
  // The new segment's file still holds old bytes past its last frame (it was not zero-filled).
  const active = path.join(dir, segFiles(dir).at(-1)!);
  const activeBytes = fs.readFileSync(active);
  assert.equal(activeBytes.length, spareBytes.length);
  assert.ok(activeBytes.subarray(activeBytes.length - 100).equals(spareBytes.subarray(spareBytes.length - 100)));
  // A truncation into it cuts the old bytes (the truncated frame stays), and reads are exact.
  const cutAt = log.endIndex - 1;
  await log.truncateAfter(cutAt);
  expected.delete(cutAt);
  assert.ok(fs.statSync(active).size < spareBytes.length, 'the old bytes were cut');
  assert.deepEqual((await readAll(log)).map(str), want());
  await add(rec(999));
  const live = log.stats().segments;
  await log.close();
  assert.equal(segFiles(dir).length, live, 'after a close, no spare is left');
  log = await openSegmentedLog(dir, { segmentBytes });
  assert.deepEqual((await readAll(log)).map(str), want());
  await log.close();
});

test('recycling off (internal tuning): dropped segments are deleted at once', async () => {
  const dir = newDir();
  const log = await openSegmentedLog(dir, { segmentBytes: 150, tuning: { recycle: false } } as Parameters<typeof openSegmentedLog>[1]);
  for (let i = 0; i < 30; i++) await log.append([rec(i)]);
  await log.dropBefore(log.endIndex);
  assert.equal(segFiles(dir).length, 1);
  for (let i = 0; i < 30; i++) await log.append([rec(i)]);
  assert.equal(log.stats().recycled, 0);
  await log.close();
});

test('stage: indices at once, readable before durable; operations take effect in call order', async () => {
  const log = await openSegmentedLog(newDir(), { segmentBytes: 150 });
  const a = log.stage([rec(0), rec(1), rec(2)]);
  assert.equal(a.first, 0);
  assert.equal(log.endIndex, 3);
  const read1 = log.read(0, 10);
  const t = log.truncateAfter(1);
  assert.equal(log.endIndex, 1);
  const b = log.stage([rec(101), rec(102)]);
  assert.equal(b.first, 1);
  const read2 = log.read(0, 10);
  const d = log.dropBefore(1);
  assert.equal(log.firstIndex, 1);
  const read3 = log.read(1, 10);
  assert.deepEqual((await read1).map(str), [0, 1, 2].map((i) => str(rec(i))));
  assert.deepEqual((await read2).map(str), [str(rec(0)), str(rec(101)), str(rec(102))]);
  assert.deepEqual((await read3).map(str), [str(rec(101)), str(rec(102))]);
  await Promise.all([a.durable, t, b.durable, d]);
  assert.deepEqual((await readAll(log)).map(str), [str(rec(101)), str(rec(102))]);
  await log.close();
});

test('concurrent appenders get contiguous distinct indices', async () => {
  const dir = newDir();
  const log = await openSegmentedLog(dir, { segmentBytes: 1024 });
  const firsts = await Promise.all(Array.from({ length: 200 }, (_, i) => log.append([rec(i), rec(i + 10000)])));
  assert.deepEqual([...firsts].sort((x, y) => x - y), Array.from({ length: 200 }, (_, i) => 2 * i));
  const all = await readAll(log);
  for (let i = 0; i < 200; i++) {
    assert.equal(str(all[firsts[i]!]!), str(rec(i)));
    assert.equal(str(all[firsts[i]! + 1]!), str(rec(i + 10000)));
  }
  assert.ok(log.stats().groupWrites < 200, `group commit: ${log.stats().groupWrites} writes for 200 appends`);
  await log.close();
});

test('a directory lock: a second open is LOCKED until the first closes', async () => {
  const dir = newDir();
  const log = await openSegmentedLog(dir);
  await rejectsCode(openSegmentedLog(dir), 'LOCKED');
  await log.close();
  const again = await openSegmentedLog(dir);
  await again.close();
});

test('close is idempotent; calls after close are CLOSED', async () => {
  const log = await openSegmentedLog(newDir());
  const pending = log.append([rec(1)]);
  const c1 = log.close();
  const c2 = log.close();
  await Promise.all([c1, c2, pending]);
  await rejectsCode(log.append([rec(2)]), 'CLOSED');
  await rejectsCode(log.read(0, 1), 'CLOSED');
  await rejectsCode(log.truncateAfter(0), 'CLOSED');
  await rejectsCode(log.dropBefore(1), 'CLOSED');
  await rejectsCode(log.reset(1), 'CLOSED');
  await rejectsCode(log.sync(), 'CLOSED');
  assert.throws(() => log.stage([rec(3)]), (e: unknown) => isSeglogError(e, 'CLOSED'));
});

test('bad arguments: INVALID and TOO_LARGE, nothing changed', async () => {
  const log = await openSegmentedLog(newDir(), { maxRecordBytes: 100 });
  await rejectsCode(log.append([Buffer.alloc(101)]), 'TOO_LARGE');
  await rejectsCode(log.append(['x' as unknown as Uint8Array]), 'INVALID');
  await rejectsCode(log.read(-1, 1), 'INVALID');
  await rejectsCode(log.read(0, 1.5), 'INVALID');
  await rejectsCode(log.read(0, 1, -1), 'INVALID');
  await rejectsCode(log.truncateAfter(-1), 'INVALID');
  await rejectsCode(log.dropBefore(Number.NaN), 'INVALID');
  await rejectsCode(log.reset(2 ** 53), 'INVALID');
  assert.equal(log.endIndex, 0);
  await log.close();
  await rejectsCode(openSegmentedLog(newDir(), { segmentBytes: 1 }), 'INVALID');
  await rejectsCode(openSegmentedLog(newDir(), { sync: { everyBytes: 0 } }), 'INVALID');
  await rejectsCode(openSegmentedLog(newDir(), { sync: 'sometimes' as unknown as 'none' }), 'INVALID');
  await rejectsCode(openSegmentedLog(newDir(), { firstIndex: -3 }), 'INVALID');
});

for (const sync of ['none', { everyBytes: 100 }, { everyMs: 5 }] as SegmentedLogOptions['sync'][]) {
  test(`sync policy ${JSON.stringify(sync)}: appends resolve, durable settles, sync() and close make it durable`, async () => {
    const dir = newDir();
    let log = await openSegmentedLog(dir, { sync, segmentBytes: 200 });
    const staged = log.stage([rec(0)]);
    for (let i = 1; i < 30; i++) assert.equal(await log.append([rec(i)]), i);
    await log.sync();
    await staged.durable;
    for (let i = 30; i < 40; i++) await log.append([rec(i)]);
    await log.close();
    log = await openSegmentedLog(dir, { sync, segmentBytes: 200 });
    assert.deepEqual((await readAll(log)).map(str), Array.from({ length: 40 }, (_, i) => str(rec(i))));
    await log.close();
  });
}

test('open removes garbage files and keeps files it does not own', async () => {
  const dir = newDir();
  let log = await openSegmentedLog(dir, { segmentBytes: 150 });
  for (let i = 0; i < 20; i++) await log.append([rec(i)]);
  await log.close();
  const stray = '00000000000000000099-0123456789abcdef';
  fs.writeFileSync(path.join(dir, stray + '.seg'), 'x');
  fs.writeFileSync(path.join(dir, stray + '.idx'), 'x');
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'mine');
  log = await openSegmentedLog(dir, { segmentBytes: 150 });
  assert.ok(!fs.existsSync(path.join(dir, stray + '.seg')));
  assert.ok(!fs.existsSync(path.join(dir, stray + '.idx')));
  assert.ok(fs.existsSync(path.join(dir, 'notes.txt')));
  assert.equal((await readAll(log)).length, 20);
  await log.close();
});

test('a named segment that is missing fails the open with CORRUPT', async () => {
  const dir = newDir();
  const log = await openSegmentedLog(dir, { segmentBytes: 150 });
  for (let i = 0; i < 20; i++) await log.append([rec(i)]);
  await log.close();
  const victim = segFiles(dir)[1]!;
  fs.unlinkSync(path.join(dir, victim));
  await assert.rejects(openSegmentedLog(dir, { segmentBytes: 150 }), (e: unknown) => isSeglogError(e, 'CORRUPT') && String(e.details['file']).endsWith(victim));
});

test('a sealed segment whose header disagrees with the manifest fails its read with CORRUPT', async () => {
  const dir = newDir();
  let log = await openSegmentedLog(dir, { segmentBytes: 150 });
  for (let i = 0; i < 20; i++) await log.append([rec(i)]);
  await log.close();
  const [a, b] = segFiles(dir);
  // Put segment b's bytes under a's name: the header names another base and id.
  fs.copyFileSync(path.join(dir, b!), path.join(dir, a!));
  log = await openSegmentedLog(dir, { segmentBytes: 150 });
  await rejectsCode(log.read(0, 1), 'CORRUPT');
  await log.close();
});

test('segment files without a manifest: CORRUPT when they hold data', async () => {
  const dir = newDir();
  const log = await openSegmentedLog(dir);
  await log.append([rec(1)]);
  await log.close();
  fs.unlinkSync(path.join(dir, 'MANIFEST'));
  await rejectsCode(openSegmentedLog(dir), 'CORRUPT');
});

test('a missing or damaged sealed index is rebuilt by a scan (and counted)', async () => {
  const dir = newDir();
  let log = await openSegmentedLog(dir, { segmentBytes: 150 });
  for (let i = 0; i < 20; i++) await log.append([rec(i)]);
  await log.close();
  const idx = fs.readdirSync(dir).filter((n) => n.endsWith('.idx')).sort();
  fs.unlinkSync(path.join(dir, idx[0]!));
  const damaged = path.join(dir, idx[1]!);
  const bytes = fs.readFileSync(damaged);
  bytes[bytes.length - 1]! ^= 0x40;
  fs.writeFileSync(damaged, bytes);
  log = await openSegmentedLog(dir, { segmentBytes: 150 });
  assert.deepEqual((await readAll(log)).map(str), Array.from({ length: 20 }, (_, i) => str(rec(i))));
  assert.equal(log.stats().indexRebuilds, 2);
  await log.close();
  log = await openSegmentedLog(dir, { segmentBytes: 150 });
  await readAll(log);
  assert.equal(log.stats().indexRebuilds, 0, 'the rebuilt index was written back');
  await log.close();
});

test('a torn tail of the last segment is cut at open; appends continue after the valid prefix', async () => {
  const dir = newDir();
  let log = await openSegmentedLog(dir);
  for (let i = 0; i < 5; i++) await log.append([rec(i)]);
  await log.close();
  const seg = path.join(dir, segFiles(dir).at(-1)!);
  fs.unlinkSync(seg.replace(/\.seg$/, '.idx'));
  // A frame header claiming the next index with garbage after it, past the valid prefix.
  const valid = HEADER_BYTES + 5 * (FRAME_HEADER_BYTES + 10);
  const fd = fs.openSync(seg, 'r+');
  fs.writeSync(fd, Buffer.from([1, 2, 3, 4, 10, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9]), 0, 19, valid);
  fs.closeSync(fd);
  log = await openSegmentedLog(dir);
  assert.equal(log.endIndex, 5);
  assert.equal(fs.statSync(seg).size, valid, 'the torn tail was cut');
  await log.append([rec(5)]);
  await log.close();
  log = await openSegmentedLog(dir);
  assert.deepEqual((await readAll(log)).map(str), Array.from({ length: 6 }, (_, i) => str(rec(i))));
  await log.close();
});

test('an FdCache shared by many logs keeps its idle handles under its cap', async () => {
  const cache = new FdCache({ max: 4 });
  const logs: SegmentedLog[] = [];
  for (let k = 0; k < 12; k++) logs.push(await openSegmentedLog(newDir(), { fdCache: cache, segmentBytes: 150 }));
  for (let round = 0; round < 3; round++) {
    await Promise.all(logs.map((log, k) => log.append([rec(k * 100 + round)])));
  }
  for (let k = 0; k < 12; k++) await logs[k]!.append([rec(k), rec(k), rec(k), rec(k), rec(k), rec(k)]);
  assert.ok(cache.size <= 4, `cache holds ${cache.size}`);
  for (let k = 0; k < 12; k++) {
    const got = await logs[k]!.read(0, 100);
    assert.equal(got.length, 9);
    assert.equal(str(got[1]!), str(rec(k * 100 + 1)));
  }
  assert.ok(cache.size <= 4, `cache holds ${cache.size}`);
  for (const log of logs) await log.close();
  assert.equal(cache.size, 0);
});

test('a read in flight keeps a dropped segment until it finishes', async () => {
  const dir = newDir();
  const log = await openSegmentedLog(dir, { segmentBytes: 150 });
  for (let i = 0; i < 30; i++) await log.append([rec(i)]);
  const reading = log.read(0, 30);
  const dropping = log.dropBefore(25);
  const got = await reading;
  await dropping;
  assert.deepEqual(got.map(str), Array.from({ length: 30 }, (_, i) => str(rec(i))));
  await log.close();
});

test('works on MemoryFs too (the layer the crash tests record)', async () => {
  const mem = new MemoryFs();
  let log = await openSegmentedLog('/logs/a', { fs: mem, segmentBytes: 150 });
  for (let i = 0; i < 25; i++) await log.append([rec(i)]);
  await log.truncateAfter(20);
  await log.dropBefore(4);
  await log.close();
  log = await openSegmentedLog('/logs/a', { fs: mem, segmentBytes: 150 });
  assert.deepEqual((await readAll(log)).map(str), Array.from({ length: 16 }, (_, i) => str(rec(4 + i))));
  await log.close();
});

test('after a kill, open trusts the checkpointed index of the last segment and scans only past it', async () => {
  const mem = new MemoryFs({ trace: false });
  const log = await openSegmentedLog('/k/log', { fs: mem });
  const batch = Array.from({ length: 64 }, (_, i) => rec(i, 1000));
  for (let k = 0; k < 100; k++) await log.append(batch); // about 6.5 MB, one segment, synced each time
  // No close: the process dies here (the page cache survives).
  const image = mem.currentImage();
  const reopened = await openSegmentedLog('/k/log', { fs: new MemoryFs({ image, trace: false }) });
  assert.equal(reopened.endIndex, 6400);
  const scanned = reopened.stats().recoveryScanBytes;
  assert.ok(scanned > 0 && scanned < 5_000_000, `scanned ${scanned} bytes`);
  const got = await reopened.read(6000, 400);
  assert.equal(got.length, 400);
  assert.equal(str(got[399]!), str(rec(63, 1000)));
  await reopened.close();
  await log.close();
});
