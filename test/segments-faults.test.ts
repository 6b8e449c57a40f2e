// Fault tests of the segmented log, through FaultyFs over MemoryFs: EIO, ENOSPC and short writes
// on group writes (on the pool and inline), on the CRC field of a large record, on datasync (on the pool and inline), in a
// roll and in each structural change. Every failure rejects
// with a typed error; no acknowledged record is lost; a failed write leaves no hole and its
// partial frames never resurface; a failed sync poisons the log (POISONED) until reopen.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openSegmentedLog, type SegmentedLog, type SegmentedLogOptions } from '../segments/index.js';
import { isSeglogError } from '../lib/errors.js';
import { MemoryFs, type DiskImage } from '../lib/fs/memory.js';
import { FaultyFs } from '../lib/fs/faulty.js';

const DIR = '/f/log';

function rec(i: number, size = 20): Buffer {
  const b = Buffer.alloc(size, i & 0xff);
  b.writeUInt32LE(i, 0);
  return b;
}

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    assert.ok(isSeglogError(err), `expected a SeglogError, got ${String(err)}`);
    return err.code;
  }
  return 'ok';
}

function setup(options: SegmentedLogOptions = {}): { mem: MemoryFs; faulty: FaultyFs; open: () => Promise<SegmentedLog> } {
  const mem = new MemoryFs({ trace: false });
  const faulty = new FaultyFs(mem);
  return { mem, faulty, open: () => openSegmentedLog(DIR, { segmentBytes: 300, ...options, fs: faulty }) };
}

/** Opens the log in a fresh process on `image` (what a restart after a crash sees). */
async function contentAfterCrash(image: DiskImage, options: SegmentedLogOptions = {}): Promise<{ first: number; records: Buffer[] }> {
  const mem = new MemoryFs({ image, trace: false });
  const log = await openSegmentedLog(DIR, { segmentBytes: 300, ...options, fs: mem });
  const records = (await log.read(log.firstIndex, 10000)).map((b) => Buffer.from(b));
  const first = log.firstIndex;
  await log.close();
  return { first, records };
}

function assertPrefixOf(records: Buffer[], acked: Buffer[], written: Buffer[], what: string): void {
  assert.ok(records.length >= acked.length, `${what}: ${records.length} records, ${acked.length} acknowledged`);
  for (let i = 0; i < records.length; i++) {
    assert.ok(records[i]!.equals(written[i]!), `${what}: record ${i} is not the one written there`);
  }
}

for (const [label, rule, expected] of [
  ['EIO', { error: 'EIO' }, 'IO_ERROR'],
  ['ENOSPC', { error: 'ENOSPC' }, 'NO_SPACE'],
  ['a short write', { shortWrite: 30 }, 'NO_SPACE'],
] as const) {
  test(`${label} on a group write: typed rejection, no hole, the log goes on, partial frames never resurface`, async () => {
    const { mem, faulty, open } = setup();
    const log = await open();
    const acked: Buffer[] = [];
    for (let i = 0; i < 3; i++) {
      await log.append([rec(i)]);
      acked.push(rec(i));
    }
    faulty.fail({ kind: 'writev', path: '*.seg', ...rule });
    const failedStage = log.stage([rec(100), rec(101)]);
    assert.equal(failedStage.first, 3);
    const behind = log.append([rec(102)]); // queued after the failed one: depends on its indices
    assert.equal(await code(failedStage.durable), expected);
    assert.equal(await code(behind), expected);
    assert.equal(log.endIndex, 3, 'the failed records vanished');
    assert.equal((await log.read(0, 100)).length, 3);
    // The log goes on at the same index: no hole.
    assert.equal(await log.append([rec(3)]), 3);
    acked.push(rec(3));
    const got = (await log.read(0, 100)).map((b) => Buffer.from(b));
    assert.deepEqual(got, acked);
    // A restart sees exactly the acknowledged records: the failed group's bytes were cut.
    for (const image of [mem.currentImage(), mem.durableImage()]) {
      const after = await contentAfterCrash(image);
      assert.deepEqual(after.records, acked);
    }
    await log.close();
  });
}

test('a failed group write whose cut also fails poisons the log', async () => {
  const { faulty, open } = setup();
  const log = await open();
  await log.append([rec(0)]);
  faulty.fail({ kind: 'writev', path: '*.seg', shortWrite: 10 });
  faulty.fail({ kind: 'truncate', path: '*.seg' });
  assert.equal(await code(log.append([rec(1)])), 'NO_SPACE');
  await new Promise((r) => setImmediate(r));
  assert.equal(await code(log.append([rec(2)])), 'POISONED');
  await log.close();
  faulty.clearFaults();
  const again = await open();
  assert.deepEqual((await again.read(0, 10)).map((b) => Buffer.from(b)), [rec(0)]);
  await again.close();
});

for (const [label, error, expected] of [
  ['EIO', 'EIO', 'IO_ERROR'],
  ['ENOSPC', 'ENOSPC', 'NO_SPACE'],
] as const) {
  test(`${label} on datasync: every waiter rejects, the log is POISONED until reopen, nothing acknowledged is lost`, async () => {
    const { mem, faulty, open } = setup();
    const log = await open();
    const acked: Buffer[] = [];
    for (let i = 0; i < 5; i++) {
      await log.append([rec(i)]);
      acked.push(rec(i));
    }
    faulty.fail({ kind: 'datasync', path: '*.seg', error });
    const waiters = Array.from({ length: 8 }, (_, k) => log.append([rec(5 + k)]));
    const codes = await Promise.all(waiters.map(code));
    assert.ok(codes.every((c) => c === expected || c === 'POISONED'), codes.join(','));
    assert.ok(codes.includes(expected));
    faulty.clearFaults(); // the disk is fine again: the log must still refuse (fsyncgate)
    assert.equal(await code(log.append([rec(99)])), 'POISONED');
    assert.equal(await code(log.sync()), 'POISONED');
    assert.equal(await code(log.truncateAfter(1)), 'POISONED');
    assert.equal(await code(log.dropBefore(1)), 'POISONED');
    assert.equal(await code(log.reset(1)), 'POISONED');
    assert.throws(() => log.stage([rec(1)]), (e: unknown) => isSeglogError(e, 'POISONED'));
    // Reads still serve what was acknowledged.
    assert.deepEqual((await log.read(0, 100)).map((b) => Buffer.from(b)), acked);
    await log.close();
    // Reopening re-reads the disk: every acknowledged record, then maybe some that were written
    // but never acknowledged (allowed), contiguous.
    const written = [...acked, ...Array.from({ length: 8 }, (_, k) => rec(5 + k))];
    const again = await open();
    const got = (await again.read(0, 100)).map((b) => Buffer.from(b));
    assertPrefixOf(got, acked, written, 'reopen');
    assert.equal(await again.append([rec(1000)]), got.length);
    await again.close();
    const after = await contentAfterCrash(mem.durableImage());
    assertPrefixOf(after.records.slice(0, got.length), acked, written, 'durable image');
  });
}

for (const [label, rule, expected] of [
  ['EIO', { error: 'EIO' }, 'IO_ERROR'],
  ['a short write', { shortWrite: 100_000 }, 'NO_SPACE'],
] as const) {
  test(`${label} on the inline write of a lone group of large records: typed, no hole, the log goes on, nothing resurfaces`, async () => {
    const big = (i: number): Buffer => rec(i, 300 * 1024);
    const { mem, faulty, open } = setup({ segmentBytes: 8 * 1024 * 1024, inlineSyncBelowMs: 1e9 });
    const log = await open();
    const acked: Buffer[] = [big(0), rec(1), big(2)];
    for (const r of acked) await log.append([r]);
    // The log's policy of writes (internal): the next lone group is written on this thread.
    const writes = (log as unknown as { writes: { where(lone: boolean, writer: object): string } }).writes;
    assert.equal(writes.where(true, log), 'inline');
    faulty.fail({ kind: 'writev', path: '*.seg', ...rule });
    assert.equal(await code(log.append([big(3), big(4)])), expected);
    assert.equal(log.endIndex, 3, 'the failed records vanished');
    faulty.clearFaults();
    assert.equal(await log.append([big(5)]), 3);
    acked.push(big(5));
    assert.deepEqual((await log.read(0, 100, 1 << 30)).map((b) => Buffer.from(b)), acked);
    await log.close();
    for (const image of [mem.currentImage(), mem.durableImage()]) {
      const after = await contentAfterCrash(image, { segmentBytes: 8 * 1024 * 1024 });
      assert.deepEqual(after.records, acked);
    }
  });
}

test('EIO on the inline datasync of a lone appender: it rejects, the log is POISONED, nothing acknowledged is lost', async () => {
  const { mem, faulty, open } = setup({ inlineSyncBelowMs: 1e9 });
  const log = await open();
  const acked: Buffer[] = [];
  for (let i = 0; i < 5; i++) {
    await log.append([rec(i)]);
    acked.push(rec(i));
  }
  // The log's policy (internal): the next lone append's sync waits inline.
  const policy = (log as unknown as { syncs: { where(lone: boolean, writer: object): string } }).syncs;
  assert.equal(policy.where(true, log), 'inline');
  faulty.fail({ kind: 'datasync', path: '*.seg', error: 'EIO' });
  assert.equal(await code(log.append([rec(5)])), 'IO_ERROR');
  assert.equal(await code(log.append([rec(6)])), 'POISONED');
  assert.deepEqual((await log.read(0, 100)).map((b) => Buffer.from(b)), acked);
  await log.close();
  faulty.clearFaults();
  const after = await contentAfterCrash(mem.durableImage());
  assertPrefixOf(after.records, acked, [...acked, rec(5)], 'durable image');
});

for (const [label, error, expected] of [
  ['EIO', 'EIO', 'IO_ERROR'],
  ['ENOSPC', 'ENOSPC', 'NO_SPACE'],
] as const) {
  test(`${label} on the CRC field of a large record (written after its payload): typed, no hole, the frame never resurfaces`, async () => {
    const big = (i: number): Buffer => rec(i, 256 * 1024 + 10);
    // inlineSyncBelowMs 0: every group write on the pool, so every large record's CRC field is late.
    const { mem, faulty, open } = setup({ segmentBytes: 4 * 1024 * 1024, inlineSyncBelowMs: 0 });
    const log = await open();
    const acked: Buffer[] = [rec(0), big(1)];
    for (const r of acked) await log.append([r]);
    faulty.fail({ kind: 'write', path: '*.seg', error, when: (call) => call.length === 4 });
    assert.equal(await code(log.append([big(2)])), expected);
    assert.equal(log.endIndex, 2, 'the failed record vanished');
    faulty.clearFaults();
    // The log goes on at the same index; the failed frame (CRC field zero) was cut, not adopted.
    assert.equal(await log.append([big(3)]), 2);
    acked.push(big(3));
    assert.deepEqual((await log.read(0, 100)).map((b) => Buffer.from(b)), acked);
    await log.close();
    for (const image of [mem.currentImage(), mem.durableImage()]) {
      const after = await contentAfterCrash(image, { segmentBytes: 4 * 1024 * 1024 });
      assert.deepEqual(after.records, acked);
    }
  });
}

test('a datasync failure with sync policy none: sync() rejects, then POISONED', async () => {
  const { faulty, open } = setup({ sync: 'none' });
  const log = await open();
  await log.append([rec(0)]);
  await log.sync();
  await log.append([rec(1)]);
  faulty.fail({ kind: 'datasync', path: '*.seg' });
  assert.equal(await code(log.sync()), 'IO_ERROR');
  assert.equal(await code(log.append([rec(2)])), 'POISONED');
  assert.equal(log.endIndex, 1, 'the unsynced record vanished from the view');
  await log.close();
});

for (const [label, kind, path] of [
  ['creating the new segment', 'open', '*.seg'],
  ['writing the new segment header', 'writev', '*.seg'],
  ['syncing the directory', 'syncDir', '*'],
  ['sealing the old segment (its index)', 'datasync', '*.idx'],
  ['committing the manifest', 'datasync', '*MANIFEST'],
] as const) {
  test(`a failure while ${label} during a roll: typed, POISONED, every acknowledged record kept`, async () => {
    const { mem, faulty, open } = setup({ segmentBytes: 120 });
    const log = await open();
    const acked: Buffer[] = [];
    // Fill the first segment (a roll comes with the next append).
    for (let i = 0; i < 2; i++) {
      await log.append([rec(i)]);
      acked.push(rec(i));
    }
    assert.equal(log.stats().rolls, 0);
    faulty.fail({ kind, path, error: 'EIO', when: (c) => kind !== 'writev' || c.position === 0 });
    const c = await code(log.append([rec(2)]));
    assert.ok(c === 'IO_ERROR' || c === 'POISONED', c);
    assert.equal(await code(log.append([rec(4)])), 'POISONED');
    await log.close();
    faulty.clearFaults();
    const written = [...acked, rec(2)];
    for (const image of [mem.currentImage(), mem.durableImage()]) {
      const after = await contentAfterCrash(image, { segmentBytes: 120 });
      assertPrefixOf(after.records, acked, written, label);
    }
    const again = await open();
    assertPrefixOf((await again.read(0, 100)).map((b) => Buffer.from(b)), acked, written, 'reopen');
    await again.close();
  });
}

/** A log whose sealed segments were dropped, so that it holds a spare for its next roll. */
async function logWithSpare(open: () => Promise<SegmentedLog>, acked: Buffer[]): Promise<SegmentedLog> {
  const log = await open();
  for (let i = 0; i < 6; i++) {
    await log.append([rec(i)]);
    acked.push(rec(i));
  }
  assert.ok(log.stats().rolls >= 2, 'sealed segments to drop');
  await log.dropBefore(log.endIndex - 1);
  acked.splice(0, acked.length - 1);
  return log;
}

test('recycling: a spare that cannot be linked is dropped and the roll creates a fresh file', async () => {
  const { faulty, open } = setup({ segmentBytes: 120 });
  const acked: Buffer[] = [];
  const log = await logWithSpare(open, acked);
  faulty.fail({ kind: 'link', path: '*.seg', error: 'EIO' });
  for (let i = 10; i < 14; i++) {
    await log.append([rec(i)]);
    acked.push(rec(i));
  }
  assert.equal(log.stats().recycled, 0);
  assert.deepEqual((await log.read(log.firstIndex, 100)).map((b) => Buffer.from(b)), acked);
  await log.close();
  faulty.clearFaults();
});

for (const [label, kind, path] of [
  ['writing its new header', 'write', '*.seg'],
  ['syncing its new header', 'datasync', '*.seg'],
  ['syncing the directory', 'syncDir', '*'],
] as const) {
  test(`recycling: a failure while ${label} during a roll: typed, POISONED, every acknowledged record kept`, async () => {
    const { mem, faulty, open } = setup({ segmentBytes: 120 });
    const acked: Buffer[] = [];
    const log = await logWithSpare(open, acked);
    const first = log.firstIndex;
    // The next appends fill the active segment; the roll after them makes its segment of the spare.
    let c = 'ok';
    const written = [...acked];
    // Armed once the spare is linked to its new name: the first such call after it is the reuse's.
    let linkedTo: string | null = null;
    faulty.fail({ kind: 'link', when: (call) => ((linkedTo = call.to ?? null), false) });
    faulty.fail({ kind, path, error: 'EIO', when: (call) => linkedTo !== null && (kind === 'syncDir' || call.path === linkedTo), times: 1 });
    for (let i = 20; i < 26 && c === 'ok'; i++) {
      written.push(rec(i));
      c = await code(log.append([rec(i)]));
      if (c === 'ok') acked.push(rec(i));
    }
    assert.ok(linkedTo !== null, 'the roll reused the spare');
    assert.ok(c === 'IO_ERROR' || c === 'POISONED', c);
    assert.equal(await code(log.append([rec(99)])), 'POISONED');
    assert.equal(log.stats().recycled, 0, 'the reuse failed');
    await log.close();
    faulty.clearFaults();
    for (const image of [mem.currentImage(), mem.durableImage()]) {
      const after = await contentAfterCrash(image, { segmentBytes: 120 });
      assert.equal(after.first, first);
      assertPrefixOf(after.records, acked, written, label);
    }
  });
}

for (const op of ['truncateAfter', 'dropBefore', 'reset'] as const) {
  test(`a failed manifest commit in ${op}: typed, POISONED, and the log reopens old or new, never between`, async () => {
    const { mem, faulty, open } = setup({ segmentBytes: 120 });
    const log = await open();
    const all: Buffer[] = [];
    for (let i = 0; i < 12; i++) {
      await log.append([rec(i)]);
      all.push(rec(i));
    }
    faulty.fail({ kind: 'datasync', path: '*MANIFEST', error: 'EIO' });
    const call = op === 'truncateAfter' ? log.truncateAfter(5) : op === 'dropBefore' ? log.dropBefore(7) : log.reset(40);
    assert.equal(await code(call), 'IO_ERROR');
    assert.equal(await code(log.append([rec(50)])), 'POISONED');
    await log.close();
    faulty.clearFaults();
    const before = { first: 0, records: all };
    const afterOp =
      op === 'truncateAfter'
        ? { first: 0, records: all.slice(0, 5) }
        : op === 'dropBefore'
          ? { first: 7, records: all.slice(7) }
          : { first: 40, records: [] as Buffer[] };
    for (const image of [mem.currentImage(), mem.durableImage()]) {
      const got = await contentAfterCrash(image, { segmentBytes: 120 });
      const isOld = got.first === before.first && got.records.length === before.records.length && got.records.every((r, i) => r.equals(before.records[i]!));
      const isNew = got.first === afterOp.first && got.records.length === afterOp.records.length && got.records.every((r, i) => r.equals(afterOp.records[i]!));
      assert.ok(isOld || isNew, `${op}: reopened with first ${got.first} and ${got.records.length} records`);
    }
  });
}

test('a failed write of a staged batch: its records vanish from reads and its durable rejects', async () => {
  const { faulty, open } = setup();
  const log = await open();
  await log.append([rec(0)]);
  faulty.fail({ kind: 'writev', path: '*.seg', error: 'EIO' });
  const s = log.stage([rec(1), rec(2)]);
  assert.equal((await log.read(0, 10)).length, 3, 'readable at once');
  assert.equal(await code(s.durable), 'IO_ERROR');
  assert.equal((await log.read(0, 10)).length, 1, 'gone after the failure');
  assert.equal(log.endIndex, 1);
  await log.close();
});

test('a failed read is typed (IO_ERROR) and changes nothing', async () => {
  const { faulty, open } = setup();
  const log = await open();
  await log.append([rec(0), rec(1)]);
  faulty.fail({ kind: 'read', path: '*.seg', error: 'EIO' });
  assert.equal(await code(log.read(0, 2)), 'IO_ERROR');
  assert.equal((await log.read(0, 2)).length, 2);
  await log.close();
});
