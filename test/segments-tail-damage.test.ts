// Damage at the tail of a segmented log, told from a torn tail. The last segment's valid index
// (written at a clean close, a checkpoint or a seal, each only after a sync) is a durable floor:
// a record below it that fails its checks, or a file cut short under it, is damage to
// acknowledged data — open fails with CORRUPT naming the segment file and the offset, and cuts
// nothing, so that `seglog verify` reports the same error before and after the attempt. Bytes
// past the floor that do not check are a torn tail of unsynced writes, cut as before. A Raft
// group log, which stores its entries in a segmented log, inherits it: its last log id never
// goes back.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openSegmentedLog, type SegmentedLog, type SegmentedLogOptions } from '../segments/index.js';
import { SeglogError } from '../lib/errors.js';
import { MemoryFs, type DiskImage } from '../lib/fs/memory.js';
import { verifyDataDirectory } from '../lib/tools/verify.js';
import { openRaftNode } from '../lib/raft/node.js';
import type { Entry } from '../lib/raft/types.js';
import { exploreCrashStates, type CrashState } from '../lib/crash/index.js';
import { decodeIndex, decodeSegmentHeader } from '../segments/format.js';

const DIR = '/data/log';

function record(i: number, size = 60 + ((i * 37) % 90)): Buffer {
  const b = Buffer.alloc(size);
  for (let k = 0; k < b.length; k++) b[k] = (i * 31 + k * 7) & 0xff;
  return b;
}

function imageFs(image: DiskImage): MemoryFs {
  return new MemoryFs({ image, trace: false });
}

/** A copy of `image` with `file` replaced by `bytes`. */
function withFile(image: DiskImage, file: string, bytes: Uint8Array): DiskImage {
  return { dirs: image.dirs ?? [], files: { ...image.files, [file]: bytes } };
}

function lastSegment(image: DiskImage, dir = DIR): string {
  const segs = Object.keys(image.files).filter((n) => n.startsWith(dir + '/') && n.endsWith('.seg')).sort();
  assert.ok(segs.length > 0, `a segment under ${dir}`);
  return segs.at(-1)!;
}

/** The frame start offsets of a segment file, walked by their length fields up to the first zero-length gap. */
function frameStarts(bytes: Uint8Array, count: number): number[] {
  const starts: number[] = [];
  let at = 40;
  for (let k = 0; k < count; k++) {
    starts.push(at);
    at += 16 + Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).readUInt32LE(at + 4);
  }
  starts.push(at);
  return starts;
}

function flipBit(bytes: Uint8Array, at: number, bit = 3): Uint8Array {
  const b = new Uint8Array(bytes);
  b[at]! ^= 1 << bit;
  return b;
}

async function readAll(log: SegmentedLog): Promise<Uint8Array[]> {
  return log.read(log.firstIndex, log.endIndex - log.firstIndex);
}

/** The error findings of `seglog verify` on `image`. */
async function verifyErrors(image: DiskImage): Promise<{ path: string; offset?: number; message: string }[]> {
  const report = await verifyDataDirectory(DIR, { fs: imageFs(image) });
  return report.findings.filter((f) => f.severity === 'error');
}

/** Opens `image` and expects CORRUPT naming `file` (and `offset`, when given); answers the image after the attempt. */
async function expectCorrupt(image: DiskImage, file: string, offset: number | null, what: string): Promise<DiskImage> {
  const fs = imageFs(image);
  let log: SegmentedLog | null = null;
  try {
    log = await openSegmentedLog(DIR, { fs });
  } catch (err) {
    assert.ok(err instanceof SeglogError, `${what}: a typed error, not ${String(err)}`);
    assert.equal(err.code, 'CORRUPT', `${what}: ${err.message}`);
    assert.equal(err.details['file'], file, `${what}: names the damaged file`);
    if (offset !== null) assert.equal(err.details['offset'], offset, `${what}: names the damaged offset`);
    return fs.currentImage();
  }
  const got = log.endIndex - log.firstIndex;
  await log.close();
  assert.fail(`${what}: open succeeded with ${got} records`);
}

/** The open attempt changed none of the log's segment and index files. */
function assertSameFiles(before: DiskImage, after: DiskImage, what: string): void {
  for (const [name, bytes] of Object.entries(before.files)) {
    if (!name.endsWith('.seg') && !name.endsWith('.idx')) continue;
    assert.ok(after.files[name] !== undefined, `${what}: ${name} still there`);
    assert.ok(Buffer.from(after.files[name]!).equals(Buffer.from(bytes)), `${what}: ${name} unchanged`);
  }
}

/** A log of `n` records, closed cleanly, in one segment; its image and the records. */
async function closedLog(n: number, options: SegmentedLogOptions = {}): Promise<{ image: DiskImage; durable: DiskImage; records: Buffer[] }> {
  const fs = new MemoryFs({ trace: false });
  const log = await openSegmentedLog(DIR, { ...options, fs });
  const records: Buffer[] = [];
  for (let i = 0; i < n; i++) {
    records.push(record(i));
    await log.append([record(i)]);
  }
  await log.close();
  return { image: fs.currentImage(), durable: fs.durableImage(), records };
}

test('a flipped bit in the last record of a cleanly closed log: CORRUPT at its offset, verify agrees before and after', async () => {
  const closed = await closedLog(40);
  const seg = lastSegment(closed.image);
  const starts = frameStarts(closed.image.files[seg]!, closed.records.length);
  // As the closed log's files are, and as a power loss right after the close leaves them (the
  // close's index is synced: the floor survives it).
  for (const [where, at, image] of [
    ['payload', starts[39]! + 16 + 20, closed.image],
    ['length field', starts[39]! + 4, closed.image],
    ['CRC field', starts[39]!, closed.image],
    ['payload, power loss after the close', starts[39]! + 16 + 20, closed.durable],
  ] as const) {
    const damaged = withFile(image, seg, flipBit(image.files[seg]!, at));
    const before = await verifyErrors(damaged);
    assert.ok(before.some((f) => f.path === seg), `${where}: verify reports the damage before the open`);
    const after = await expectCorrupt(damaged, seg, starts[39]!, `last record's ${where}`);
    assertSameFiles(damaged, after, where);
    const again = await verifyErrors(after);
    assert.deepEqual(again, before, `${where}: verify reports the same after the open attempt`);
    // A second attempt fails the same way: the first one destroyed nothing.
    await expectCorrupt(after, seg, starts[39]!, `${where}, second open`);
  }
});

test('a last segment cut short under its index: CORRUPT, nothing cut, verify agrees before and after', async () => {
  const { image, records } = await closedLog(40);
  const seg = lastSegment(image);
  const starts = frameStarts(image.files[seg]!, records.length);
  // Seventeen records gone; also a cut inside a frame, and one down to the bare header.
  for (const cut of [starts[23]!, starts[30]! + 9, starts[39]! + 16, 40]) {
    const damaged = withFile(image, seg, image.files[seg]!.subarray(0, cut));
    const before = await verifyErrors(damaged);
    assert.ok(before.some((f) => f.path === seg), `cut at ${cut}: verify reports it before the open`);
    const after = await expectCorrupt(damaged, seg, cut, `cut at ${cut}`);
    assertSameFiles(damaged, after, `cut at ${cut}`);
    assert.deepEqual(await verifyErrors(after), before, `cut at ${cut}: verify reports the same after`);
  }
});

test('tiny records: a segment cut to its header under an index longer than the file could need is CORRUPT', async () => {
  const fs = new MemoryFs({ trace: false });
  const log = await openSegmentedLog(DIR, { fs });
  for (let i = 0; i < 30; i++) await log.append([new Uint8Array(0)]);
  await log.close();
  const image = fs.currentImage();
  const seg = lastSegment(image);
  // 30 empty frames: 480 bytes; cut to 100, the index (36 + 120 bytes) is longer than a 100-byte
  // segment could need, and still tells how far the log reached.
  const damaged = withFile(image, seg, image.files[seg]!.subarray(0, 100));
  const before = await verifyErrors(damaged);
  assert.ok(before.some((f) => f.path === seg), 'verify reports the cut before the open');
  const after = await expectCorrupt(damaged, seg, 100, 'cut to 100 bytes');
  assert.deepEqual(await verifyErrors(after), before, 'and the same after');
});

test('after a crash with synced appends: damage below the last checkpoint is CORRUPT (power loss and process kill)', async () => {
  const fs = new MemoryFs({ trace: false });
  const log = await openSegmentedLog(DIR, { fs });
  const big = (i: number): Buffer => record(i, 64 * 1024);
  // 64 records of 64 KiB: 4 MiB and 64 records synced, a checkpoint is due after the 64th sync.
  for (let i = 0; i < 64; i++) await log.append([big(i)]);
  await log.sync(); // waits for the checkpoint to finish (with its own sync)
  for (let i = 64; i < 70; i++) await log.append([big(i)]);
  const power = fs.durableImage();
  const kill = fs.currentImage();
  fs.sever();
  for (const [what, image] of [
    ['power loss', power],
    ['process kill', kill],
  ] as const) {
    const seg = lastSegment(image);
    const starts = frameStarts(image.files[seg]!, 70);
    // The record the checkpoint lists last, and one in the middle of what it lists.
    const damaged = withFile(image, seg, flipBit(image.files[seg]!, starts[63]! + 16 + 1000));
    const before = await verifyErrors(damaged);
    assert.ok(before.some((f) => f.path === seg), `${what}: verify reports the damage`);
    const after = await expectCorrupt(damaged, seg, starts[63]!, `${what}, last checkpointed record`);
    assert.deepEqual(await verifyErrors(after), before, `${what}: verify agrees after`);
    const cut = withFile(image, seg, image.files[seg]!.subarray(0, starts[50]!));
    await expectCorrupt(cut, seg, starts[50]!, `${what}, cut below the checkpoint`);
    // Undamaged, the same state opens with every acknowledged record.
    const ok = await openSegmentedLog(DIR, { fs: imageFs(image) });
    assert.equal(ok.endIndex, 70, `${what}: every acknowledged record`);
    await ok.close();
  }
});

test('damage below the floor but not in its last record: open succeeds, the read fails CORRUPT, verify errs before and after', async () => {
  const { image, records } = await closedLog(40);
  const seg = lastSegment(image);
  const starts = frameStarts(image.files[seg]!, records.length);
  const damaged = withFile(image, seg, flipBit(image.files[seg]!, starts[20]! + 16 + 5));
  const before = await verifyErrors(damaged);
  assert.ok(before.some((f) => f.path === seg && f.offset === starts[20]), 'verify names the damaged record');
  const fs = imageFs(damaged);
  const log = await openSegmentedLog(DIR, { fs });
  assert.equal(log.endIndex, 40, 'no record cut');
  await assert.rejects(readAll(log), (err: unknown) => err instanceof SeglogError && err.code === 'CORRUPT' && err.details['offset'] === starts[20]);
  assert.deepEqual([...(await log.read(0, 20))].map((r) => Buffer.from(r)), records.slice(0, 20), 'the records before it are served');
  await log.close();
  assert.deepEqual(await verifyErrors(fs.currentImage()), before, 'verify agrees after the open and close');
});

test('a torn unsynced tail past the floor is still cut, and open succeeds with every acknowledged record', async () => {
  const { image, records } = await closedLog(30);
  // Reopen, append five more without syncing, then the process dies: a torn tail past the floor.
  const fs = imageFs(image);
  const log = await openSegmentedLog(DIR, { fs, sync: 'none' });
  for (let i = 30; i < 35; i++) await log.append([record(i)]);
  const current = fs.currentImage();
  fs.sever();
  const seg = lastSegment(current);
  const starts = frameStarts(current.files[seg]!, 35);
  const states: [string, DiskImage, number][] = [
    // the last write landed in part (a prefix of its bytes)
    ['cut inside record 33', withFile(current, seg, current.files[seg]!.subarray(0, starts[33]! + 20)), 33],
    // a sector of record 31 did not land (zeros where its payload was)
    ['a hole in record 31', withFile(current, seg, zeroed(current.files[seg]!, starts[31]! + 16, starts[32]!)), 31],
    // nothing of the unsynced appends landed (power loss)
    ['none landed', fs.durableImage(), 30],
  ];
  for (const [what, state, expected] of states) {
    assert.deepEqual(await verifyErrors(state), [], `${what}: verify finds no error (a torn tail is a warning)`);
    const mem = imageFs(state);
    const reopened = await openSegmentedLog(DIR, { fs: mem });
    assert.equal(reopened.endIndex, expected, `${what}: the valid prefix`);
    const got = (await readAll(reopened)).map((r) => Buffer.from(r));
    assert.deepEqual(got, [...records, ...[30, 31, 32, 33, 34].map((i) => record(i))].slice(0, expected), `${what}: the records`);
    await reopened.close();
    const after = await verifyDataDirectory(DIR, { fs: imageFs(mem.currentImage()) });
    assert.equal(after.errors, 0, `${what}: verify clean of errors after the open`);
  }
});

function zeroed(bytes: Uint8Array, from: number, to: number): Uint8Array {
  const b = new Uint8Array(bytes);
  b.fill(0, from, to);
  return b;
}

test('a log whose last segment has no index (an older log, or a crash before the first checkpoint) opens by a scan', async () => {
  const { image, records } = await closedLog(25);
  const seg = lastSegment(image);
  const files = { ...image.files };
  delete files[seg.replace(/\.seg$/, '.idx')];
  const noIndex: DiskImage = { dirs: image.dirs ?? [], files };
  const log = await openSegmentedLog(DIR, { fs: imageFs(noIndex) });
  assert.equal(log.endIndex, 25);
  assert.deepEqual((await readAll(log)).map((r) => Buffer.from(r)), records);
  await log.close();
  // A damaged index is derived data too: ignored, the segment is scanned.
  const idx = seg.replace(/\.seg$/, '.idx');
  const badIndex = withFile(image, idx, flipBit(image.files[idx]!, 40));
  const log2 = await openSegmentedLog(DIR, { fs: imageFs(badIndex) });
  assert.equal(log2.endIndex, 25);
  await log2.close();
});

test('after truncateAfter and reset the floor follows: reopening never reports damage', async () => {
  const fs = new MemoryFs({ trace: false });
  let log = await openSegmentedLog(DIR, { fs });
  for (let i = 0; i < 40; i++) await log.append([record(i)]);
  await log.close();
  log = await openSegmentedLog(DIR, { fs });
  await log.truncateAfter(22);
  for (let i = 22; i < 26; i++) await log.append([record(100 + i)]);
  await log.close();
  log = await openSegmentedLog(DIR, { fs });
  assert.equal(log.endIndex, 26);
  await log.reset(500);
  await log.append([record(1)]);
  await log.close();
  log = await openSegmentedLog(DIR, { fs });
  assert.equal(log.firstIndex, 500);
  assert.equal(log.endIndex, 501);
  await log.close();
  assert.equal((await verifyDataDirectory(DIR, { fs })).errors, 0);
});

test('every byte of a cleanly closed last segment flipped, every length cut: CORRUPT or every record, never fewer', async () => {
  const { image, records } = await closedLog(12);
  const seg = lastSegment(image);
  const bytes = image.files[seg]!;
  const end = frameStarts(bytes, records.length)[records.length]!;
  const outcomes = { corruptAtOpen: 0, corruptAtRead: 0, intact: 0 };
  const judge = async (state: DiskImage, what: string): Promise<void> => {
    let log: SegmentedLog;
    try {
      log = await openSegmentedLog(DIR, { fs: imageFs(state) });
    } catch (err) {
      assert.ok(err instanceof SeglogError && err.code === 'CORRUPT', `${what}: ${String(err)}`);
      outcomes.corruptAtOpen++;
      return;
    }
    try {
      assert.equal(log.endIndex, records.length, `${what}: never fewer records than acknowledged`);
      let got: Uint8Array[];
      try {
        got = await readAll(log);
      } catch (err) {
        assert.ok(err instanceof SeglogError && err.code === 'CORRUPT', `${what}: ${String(err)}`);
        outcomes.corruptAtRead++;
        return;
      }
      assert.deepEqual(got.map((r) => Buffer.from(r)), records, `${what}: exactly the records written`);
      outcomes.intact++;
    } finally {
      await log.close();
    }
  };
  // Every byte of the header and the frames, and the first 256 of the zero-filled space after them.
  const upTo = Math.min(bytes.length, end + 256);
  for (let at = 0; at < upTo; at++) await judge(withFile(image, seg, flipBit(bytes, at, at % 8)), `bit ${at % 8} of byte ${at}`);
  for (let cut = 0; cut < upTo; cut++) await judge(withFile(image, seg, bytes.subarray(0, cut)), `cut to ${cut}`);
  // Every flip and every cut below the end of the last frame is damage, detected; past it only
  // zeros lie (a flip there is a torn tail, cut; a cut there removes nothing).
  assert.equal(outcomes.corruptAtOpen + outcomes.corruptAtRead, 2 * end, `every flip and cut below the end is detected (${JSON.stringify(outcomes)})`);
  assert.equal(outcomes.intact, 2 * (upTo - end));
});

// ---------------------------------------------------------------------------------------------
// Every crash state around checkpoints and the close: no false CORRUPT, and the floor holds

test('crash states around index checkpoints and the close: each opens with every acknowledged record; damage under its floor is CORRUPT', async (t) => {
  // 64 KiB records in one segment: a checkpoint (index written and synced, the directory synced
  // with the first) after the 64th and the 128th synced append, then a clean close.
  const m = new MemoryFs({ image: { dirs: ['/data'], files: {} } });
  const segmentBytes = 32 << 20;
  const log = await openSegmentedLog(DIR, { fs: m, segmentBytes });
  const big = (i: number): Buffer => record(i, 64 * 1024);
  const n = 136;
  m.mark('ack', 0);
  for (let i = 0; i < n; i++) {
    await log.append([big(i)]);
    m.mark('ack', i + 1);
    if (i === 63 || i === 127) await log.sync(); // lets the checkpoint finish before the next append
  }
  await log.close();
  m.mark('closed', n);
  let damaged = 0;
  let floors = 0;
  const result = await exploreCrashStates({
    initial: m.initialImage,
    trace: m.trace,
    points: 'syncs',
    maxStates: 1500,
    maxViolations: 3,
    check: async (state: CrashState) => {
      let acked = 0;
      for (const e of state.acknowledged) if (e.label === 'ack' || e.label === 'closed') acked = Math.max(acked, e.detail as number);
      const fs = imageFs(state.image);
      const reopened = await openSegmentedLog(DIR, { fs, segmentBytes });
      const end = reopened.endIndex;
      assert.ok(end >= acked && end <= n, `reopened with ${end} records, ${acked} acknowledged`);
      if (end > 0) {
        const last = await reopened.read(end - 1, 1);
        assert.ok(Buffer.from(last[0]!).equals(big(end - 1)), 'the last record is the one written');
      }
      await reopened.close();
      // Every eighth state: a flipped bit in the record the floor lists last must be CORRUPT.
      if (state.point % 8 !== 0 || end === 0) return;
      const seg = lastSegment(state.image);
      const idxBytes = state.image.files[seg.replace(/\.seg$/, '.idx')];
      const header = decodeSegmentHeader(state.image.files[seg]!);
      // A torn index fails its CRC: no floor in that state (the scan starts at the header).
      const idx = idxBytes === undefined || header === null ? null : decodeIndex(idxBytes, header.base, header.id);
      if (idx === null || idx.count === 0) return;
      assert.ok(idx.count <= end, `${state.id}: the floor (${idx.count}) is never above what opens (${end})`);
      floors++;
      const count = idx.count;
      const at = idx.offsets[count - 1]!;
      const bad = withFile(state.image, seg, flipBit(state.image.files[seg]!, at + 16 + 77));
      const probe = await openSegmentedLog(DIR, { fs: imageFs(bad), segmentBytes }).then(
        async (l) => {
          const got = l.endIndex;
          await l.close();
          return got;
        },
        (err: unknown) => err,
      );
      if (probe instanceof SeglogError && probe.code === 'CORRUPT' && probe.details['offset'] === at) damaged++;
      else assert.fail(`${state.id}: damage of record ${count - 1} under a floor of ${count}: ${String(probe)}`);
    },
  });
  t.diagnostic(`checkpoints: ${result.states} crash states checked (${JSON.stringify(result.byFamily)}), ${result.points} points, ${floors} floors damaged → ${damaged} CORRUPT, ${result.elapsedMs.toFixed(0)} ms${result.truncated ? ' (capped)' : ''}`);
  assert.deepEqual(result.violations.map((v) => `${v.id}: ${String(v.error)}\n${v.description}`), []);
  assert.ok(floors > 0 && damaged === floors, 'damage under a floor was tried and found');
  const indexCalls = m.trace.filter((e) => e.path.endsWith('.idx') && (e.kind === 'write' || e.kind === 'datasync')).length;
  assert.ok(indexCalls >= 6, `two checkpoints and the close wrote and synced the index (${indexCalls} calls)`);
});

// ---------------------------------------------------------------------------------------------
// The Raft group log

function blank(term: number, index: number): Entry {
  return { logId: { leaderId: { term, nodeId: 1 }, index }, payload: { type: 'blank' } };
}
function normal(term: number, index: number): Entry {
  return { logId: { leaderId: { term, nodeId: 1 }, index }, payload: { type: 'normal', data: record(index) } };
}

test('a flipped bit in the last entry of a cleanly closed Raft group log: the group fails to open with CORRUPT', async () => {
  const fs = new MemoryFs({ trace: false });
  const node = await openRaftNode('/data/node', { fs });
  const g = await node.openGroup('g');
  const entries = [blank(1, 0), ...Array.from({ length: 9 }, (_, k) => normal(1, k + 1)), blank(2, 10), ...Array.from({ length: 5 }, (_, k) => normal(2, k + 11))];
  await new Promise<void>((resolve, reject) => {
    void g.log.append(entries, (err) => (err === null ? resolve() : reject(err))).catch(reject);
  });
  assert.equal((await g.log.getLogState()).lastLogId?.index, 15);
  await node.close();
  const image = fs.currentImage();
  const segs = Object.keys(image.files).filter((n) => n.startsWith('/data/node/') && n.includes('/log/') && n.endsWith('.seg')).sort();
  assert.ok(segs.length > 0, 'the group log has a segment');
  const seg = segs.at(-1)!;
  const starts = frameStarts(image.files[seg]!, 16);
  const damaged = withFile(image, seg, flipBit(image.files[seg]!, starts[15]! + 16 + 2));
  const report = await verifyDataDirectory('/data/node', { fs: imageFs(damaged) });
  assert.ok(report.findings.some((f) => f.severity === 'error' && f.path === seg), 'verify reports the damaged entry');
  let state: unknown = null;
  const reopened = imageFs(damaged);
  try {
    const n2 = await openRaftNode('/data/node', { fs: reopened });
    try {
      const g2 = await n2.openGroup('g');
      state = await g2.log.getLogState();
    } finally {
      await n2.close();
    }
  } catch (err) {
    assert.ok(err instanceof SeglogError, `a typed error, not ${String(err)}`);
    assert.equal(err.code, 'CORRUPT', err.message);
  }
  assert.equal(state, null, `the group must not open (it answered ${JSON.stringify(state)})`);
  const after = await verifyDataDirectory('/data/node', { fs: imageFs(reopened.currentImage()) });
  assert.deepEqual(
    after.findings.filter((f) => f.severity === 'error'),
    report.findings.filter((f) => f.severity === 'error'),
    'verify reports the same after the open attempt',
  );
});
