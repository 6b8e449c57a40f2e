// The payload reference checkpoint of a Raft group (lib/raft/reference-checkpoint.ts): open reads
// only the records past it; a truncation into its coverage lowers it first, so that a crash never
// leaves it claiming an entry that was cut and replaced; a stale or damaged one is not believed
// (a scan instead), is replaced, and `seglog verify` reports it; `listPayloadReferences` answers
// the same as open, cross-checked against a scan.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';

import { ManualClock } from '../lib/clock.js';
import { FaultyFs } from '../lib/fs/faulty.js';
import { MemoryFs, type DiskImage } from '../lib/fs/memory.js';
import type { FileSystem } from '../lib/fs/types.js';
import { encodeKvCommand } from '../lib/raft/kv.js';
import { groupDirectory, listPayloadReferences, openRaftNode, type RaftNode } from '../lib/raft/node.js';
import { REFS_FILE, decodeReferenceCheckpoint, encodeReferenceCheckpoint } from '../lib/raft/reference-checkpoint.js';
import type { Entry, LogId } from '../lib/raft/types.js';
import type { KvPlugin } from '../lib/raft/kv.js';
import { verifyDataDirectory } from '../lib/tools/verify.js';

const DIR = '/node';
const REFS = path.join(groupDirectory(DIR, 'g'), REFS_FILE);
const enc = new TextEncoder();

function lid(term: number, index: number): LogId {
  return { leaderId: { term, nodeId: 1 }, index };
}

function entry(term: number, index: number, digests: string[], pad = 0): Entry {
  const data = encodeKvCommand({ op: 'set', key: `k${index}`, value: enc.encode(`v${term}.${index}`.padEnd(pad, '.')) });
  return { logId: lid(term, index), payload: digests.length === 0 ? { type: 'normal', data } : { type: 'normal', data, payloads: digests } };
}

/**
 * The node of these tests: every close writes the checkpoint (no scan allowance), so that the
 * checkpoint's own paths are what they check; the allowance has a test of its own (the last).
 */
function open(fs: FileSystem, segmentBytes?: number, scanAllowance = 0): Promise<RaftNode<KvPlugin>> {
  return openRaftNode(DIR, {
    fs,
    clock: new ManualClock(),
    ...(segmentBytes === undefined ? {} : { segmentBytes }),
    referenceScanAllowanceBytes: scanAllowance,
  } as Parameters<typeof openRaftNode<KvPlugin>>[1]);
}

async function append(node: RaftNode<KvPlugin>, entries: Entry[]): Promise<void> {
  const { log } = await node.openGroup('g');
  await new Promise<void>((resolve, reject) => {
    log.append(entries, (err) => (err === null ? resolve() : reject(err))).catch(reject);
  });
}

/** A node with payloads p0..p7 stored; answers the fs and their digests. */
async function withPayloads(): Promise<{ fs: MemoryFs; d: string[] }> {
  const fs = new MemoryFs({ trace: false });
  const node = await open(fs);
  const d: string[] = [];
  for (let i = 0; i < 8; i++) {
    const info = await node.payloads.put(
      (async function* () {
        yield enc.encode(`payload ${i}`);
      })(),
    );
    d.push(info.digest);
  }
  await (await node.openGroup('g')).log.saveVote({ leaderId: { term: 1, nodeId: 1 }, committed: true });
  await node.close();
  return { fs, d };
}

/** Ten entries: 0 names p0, 2 names p1 and p2, 5 names p3, 8 names p4, 9 names p0. */
function firstTen(d: string[]): Entry[] {
  const names: Record<number, string[]> = { 0: [d[0] as string], 2: [d[1] as string, d[2] as string], 5: [d[3] as string], 8: [d[4] as string], 9: [d[0] as string] };
  return Array.from({ length: 10 }, (_, i) => entry(1, i, names[i] ?? []));
}

/** What a node opened on `image` finds: its recovery, the digests it counts named, and the offline listing. */
async function findings(image: DiskImage, d: string[]) {
  const fs = new MemoryFs({ image, trace: false });
  const listed: string[] = [];
  for await (const r of listPayloadReferences(DIR, { fs, crossCheck: true })) listed.push(`${r.logId.index}:${d.indexOf(r.digest)}`);
  const verify = await verifyDataDirectory(DIR, { fs: new MemoryFs({ image, trace: false }) });
  const node = await open(fs);
  try {
    const g = await node.openGroup('g');
    const rec = node.recovery.get('g');
    assert.ok(rec !== undefined);
    const entries = await g.log.tryGetLogEntries(0, 1000);
    const expected = entries.flatMap((e) => (e.payload.type === 'normal' ? (e.payload.payloads ?? []).map((x) => `${e.logId.index}:${d.indexOf(x)}`) : []));
    const named = d.map((x, i) => (node.isNamed(x) ? i : -1)).filter((i) => i >= 0);
    return { rec, listed, expected, named, verify, after: fs.currentImage() };
  } finally {
    await node.close();
  }
}

function verifyErrors(v: Awaited<ReturnType<typeof verifyDataDirectory>>): string[] {
  return v.findings.filter((f) => f.severity === 'error').map((f) => f.message);
}

test('a cold open reads only the records past the checkpoint written at close', async () => {
  const { fs, d } = await withPayloads();
  const node = await open(fs);
  await append(node, firstTen(d));
  await node.close();
  const { rec, listed, expected, named, verify } = await findings(fs.currentImage(), d);
  assert.equal(rec.referenceCheckpoint, 'used');
  assert.equal(rec.recordsScanned, 0);
  assert.equal(rec.namingRecords, 5);
  assert.deepEqual(listed, ['0:0', '2:1', '2:2', '5:3', '8:4', '9:0']);
  assert.deepEqual(listed, expected);
  assert.deepEqual(named, [0, 1, 2, 3, 4]);
  assert.deepEqual(verifyErrors(verify), []);
});

test('a crash after appends past the checkpoint: the records past it are read, and their names found', async () => {
  const { fs, d } = await withPayloads();
  let node = await open(fs);
  await append(node, firstTen(d));
  await node.close();
  node = await open(fs);
  await append(node, [entry(1, 10, [d[5] as string]), entry(1, 11, []), entry(1, 12, [d[6] as string, d[1] as string])]);
  // The process dies here: no close, no checkpoint of the new records.
  const { rec, listed, expected, named, verify } = await findings(fs.currentImage(), d);
  await node.close();
  assert.equal(rec.referenceCheckpoint, 'used');
  assert.equal(rec.recordsScanned, 3, 'only the three records past the checkpoint are read');
  assert.deepEqual(listed, expected);
  assert.deepEqual(named, [0, 1, 2, 3, 4, 5, 6]);
  assert.equal(rec.namingRecords, 7);
  assert.deepEqual(verifyErrors(verify), []);
});

test('a truncation into the checkpoint lowers it first: a crash after the same ids were appended again never shows the cut names', async () => {
  const { fs, d } = await withPayloads();
  let node = await open(fs);
  await append(node, firstTen(d));
  await node.close();
  node = await open(fs);
  const { log } = await node.openGroup('g');
  await log.truncate(lid(1, 4));
  // The same log ids again (the store allows it after a truncation), naming other payloads: the
  // record at the old checkpoint's last index has the id it names, so only the lowering protects.
  await append(node, Array.from({ length: 6 }, (_, k) => entry(1, 4 + k, k === 1 ? [d[7] as string] : [])));
  const crashed = await findings(fs.currentImage(), d);
  await node.close();
  assert.deepEqual(crashed.listed, ['0:0', '2:1', '2:2', '5:7']);
  assert.deepEqual(crashed.listed, crashed.expected);
  assert.deepEqual(crashed.named, [0, 1, 2, 7], 'p3 and p4 were named only by cut records');
  assert.equal(crashed.rec.namingRecords, 3);
  assert.equal(crashed.rec.referenceCheckpoint, 'used');
  assert.deepEqual(verifyErrors(crashed.verify), []);
  const closed = await findings(fs.currentImage(), d);
  assert.deepEqual(closed.listed, ['0:0', '2:1', '2:2', '5:7']);
  assert.equal(closed.rec.recordsScanned, 0);
});

test('a stale checkpoint (from another state of the log) is not believed: a scan, replaced, and verify reports it', async () => {
  const { fs, d } = await withPayloads();
  let node = await open(fs);
  await append(node, firstTen(d).slice(0, 6));
  await node.close();
  const early = fs.currentImage();
  node = await open(fs);
  await append(node, firstTen(d).slice(6));
  await node.close();
  const late = fs.currentImage();
  // The later checkpoint (it covers ten records) beside the earlier log (six), and the earlier one
  // rewritten with the last id of another term beside the later log.
  const lateRefs = late.files[REFS] as Uint8Array;
  const earlyRefs = decodeReferenceCheckpoint(early.files[REFS] as Uint8Array, REFS);
  const otherTerm = encodeReferenceCheckpoint({ ...earlyRefs, last: lid(7, (earlyRefs.last as LogId).index) });
  for (const image of [
    { ...early, files: { ...early.files, [REFS]: lateRefs } },
    { ...late, files: { ...late.files, [REFS]: otherTerm } },
  ]) {
    const { rec, listed, expected, named, verify, after } = await findings(image, d);
    assert.equal(rec.referenceCheckpoint, 'stale');
    assert.deepEqual(listed, expected, 'listPayloadReferences scans around a stale checkpoint');
    assert.equal(rec.recordsScanned, expected.length === 4 ? 6 : 10);
    assert.deepEqual(named, [...new Set(expected.map((x) => Number(x.split(':')[1])))].sort());
    assert.ok(verifyErrors(verify).some((m) => /reference checkpoint disagrees with the log/.test(m)), verifyErrors(verify).join('; '));
    const again = await findings(after, d);
    assert.equal(again.rec.referenceCheckpoint, 'used', 'open replaced the stale checkpoint');
    assert.deepEqual(verifyErrors(again.verify), []);
  }
});

test('a damaged checkpoint is not believed: a scan, replaced, and verify reports it', async () => {
  const { fs, d } = await withPayloads();
  const node = await open(fs);
  await append(node, firstTen(d));
  await node.close();
  const image = fs.currentImage();
  const refs = image.files[REFS] as Uint8Array;
  for (const at of [0, 9, Math.floor(refs.length / 2), refs.length - 1]) {
    const bad = new Uint8Array(refs);
    bad[at] = (bad[at] as number) ^ 0x10;
    const { rec, listed, expected, named, verify, after } = await findings({ ...image, files: { ...image.files, [REFS]: bad } }, d);
    assert.equal(rec.referenceCheckpoint, 'damaged', `byte ${at}`);
    assert.equal(rec.recordsScanned, 10);
    assert.deepEqual(listed, expected);
    assert.deepEqual(named, [0, 1, 2, 3, 4]);
    assert.ok(verifyErrors(verify).some((m) => /reference checkpoint is damaged/.test(m)), verifyErrors(verify).join('; '));
    const again = await findings(after, d);
    assert.equal(again.rec.referenceCheckpoint, 'used');
    assert.deepEqual(verifyErrors(again.verify), []);
  }
  // A checkpoint that passes its checksum but claims what the log does not hold: verify's error.
  const claims = decodeReferenceCheckpoint(refs, REFS);
  const wrong = encodeReferenceCheckpoint({ ...claims, records: claims.records.map((r, i) => (i === 1 ? { ...r, digests: [d[6] as string] } : r)) });
  const verify = await verifyDataDirectory(DIR, { fs: new MemoryFs({ image: { ...image, files: { ...image.files, [REFS]: wrong } }, trace: false }) });
  assert.ok(verifyErrors(verify).some((m) => /disagrees with the log: record 2/.test(m)), verifyErrors(verify).join('; '));
  const fsWrong = new MemoryFs({ image: { ...image, files: { ...image.files, [REFS]: wrong } }, trace: false });
  await assert.rejects(async () => {
    for await (const r of listPayloadReferences(DIR, { fs: fsWrong, crossCheck: true })) void r;
  }, /reference checkpoint disagrees with the log/);
});

test('after a purge the checkpoint claims nothing at or below the purged id', async () => {
  const { fs, d } = await withPayloads();
  let node = await open(fs);
  await append(node, firstTen(d));
  await node.close();
  node = await open(fs);
  await (await node.openGroup('g')).log.purge(lid(1, 5));
  const crashed = await findings(fs.currentImage(), d);
  await node.close();
  assert.deepEqual(crashed.listed, ['8:4', '9:0']);
  assert.deepEqual(crashed.named, [0, 4]);
  assert.equal(crashed.rec.recordsScanned, 0);
  const closed = await findings(fs.currentImage(), d);
  assert.deepEqual(closed.listed, ['8:4', '9:0']);
  assert.equal(decodeReferenceCheckpoint(closed.after.files[REFS] as Uint8Array, REFS).records.length, 2, 'the checkpoint at close holds only the live records');
});

test('a log truncated whole and begun again at a lower index: the records below the old start are read', async () => {
  const { fs, d } = await withPayloads();
  let node = await open(fs);
  // A log that never held nor purged an entry takes its first one at any index.
  await append(node, [entry(1, 5, [d[0] as string]), entry(1, 6, []), entry(1, 7, [d[1] as string])]);
  await node.close();
  node = await open(fs);
  await (await node.openGroup('g')).log.truncate(lid(1, 5));
  await append(node, [entry(2, 2, [d[2] as string]), entry(2, 3, []), entry(2, 4, [d[3] as string]), entry(2, 5, [d[4] as string])]);
  const crashed = await findings(fs.currentImage(), d);
  await node.close();
  assert.deepEqual(crashed.listed, ['2:2', '4:3', '5:4']);
  assert.deepEqual(crashed.listed, crashed.expected);
  assert.deepEqual(crashed.named, [2, 3, 4]);
  assert.deepEqual(verifyErrors(crashed.verify), []);
  const closed = await findings(fs.currentImage(), d);
  assert.deepEqual(closed.listed, ['2:2', '4:3', '5:4']);
  assert.equal(closed.rec.recordsScanned, 0);
});

test('while appending, a checkpoint is written every segment\'s worth: a crash reads at most about that much', async () => {
  const { fs, d } = await withPayloads();
  const node = await open(fs, 4096);
  for (let i = 0; i < 60; i++) await append(node, [entry(1, i, i % 3 === 0 ? [d[i % 8] as string] : [], 300)]);
  const crashed = await findings(fs.currentImage(), d);
  await node.close();
  assert.equal(crashed.rec.referenceCheckpoint, 'used');
  // 4 KiB of records is about thirteen of these.
  assert.ok(crashed.rec.recordsScanned <= 14, `read ${crashed.rec.recordsScanned} of 60 records`);
  assert.deepEqual(crashed.listed, crashed.expected);
  assert.equal(crashed.rec.namingRecords, 20);
  assert.deepEqual(verifyErrors(crashed.verify), []);
});

test('a failed checkpoint write fails what waits on it and poisons the group; the checkpoint on disk stays true', async () => {
  const { fs: mem, d } = await withPayloads();
  let node = await open(mem);
  await append(node, firstTen(d));
  await node.close();
  const fs = new FaultyFs(mem);
  node = await open(fs);
  const { log } = await node.openGroup('g');
  fs.fail({ kind: 'datasync', path: (p) => p.endsWith('/refs.ckpt.tmp') });
  await assert.rejects(log.truncate(lid(1, 4)), (err: Error & { code?: string }) => err.code === 'IO_ERROR');
  await assert.rejects(log.truncate(lid(1, 6)), (err: Error & { code?: string }) => err.code === 'POISONED');
  await node.close().catch(() => undefined);
  const after = await findings(mem.currentImage(), d);
  assert.equal(after.rec.referenceCheckpoint, 'used');
  assert.deepEqual(after.listed, ['0:0', '2:1', '2:2', '5:3', '8:4', '9:0'], 'nothing was truncated');
});

test('a small group writes no checkpoint at close: its next open scans its few records; past the allowance, the close writes one', async () => {
  const { fs, d } = await withPayloads();
  const gd = groupDirectory(DIR, 'g');
  let node = await open(fs, undefined, 64 * 1024);
  await append(node, firstTen(d));
  await node.close();
  assert.equal(await fs.lstat(path.posix.join(gd, 'refs.ckpt')), null, 'ten small records: no checkpoint file');
  node = await open(fs, undefined, 64 * 1024);
  let rec = node.recovery.get('g');
  assert.equal(rec?.referenceCheckpoint, 'absent');
  assert.equal(rec?.recordsScanned, 10);
  assert.equal(rec?.namingRecords, 5, 'every naming record found by the scan');
  assert.deepEqual(
    d.map((x) => node.isNamed(x)),
    [true, true, true, true, true, false, false, false],
  );
  // 70 KiB more of records: past the allowance, so the close writes the checkpoint.
  await append(
    node,
    Array.from({ length: 10 }, (_, i) => entry(1, 10 + i, [], 7 * 1024)),
  );
  await node.close();
  assert.ok((await fs.lstat(path.posix.join(gd, 'refs.ckpt'))) !== null, 'past the allowance: a checkpoint file');
  node = await open(fs, undefined, 64 * 1024);
  rec = node.recovery.get('g');
  assert.equal(rec?.referenceCheckpoint, 'used');
  assert.equal(rec?.recordsScanned, 0);
  assert.equal(rec?.namingRecords, 5);
  await node.close();
});
