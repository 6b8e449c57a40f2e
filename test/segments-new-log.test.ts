// newLogFiles against the new-log path of openSegmentedLog: a directory written from its bytes
// holds what a fresh owner-locked log commits (the same files and sizes, the same segment header
// but for the id, the same manifest cell state but for the id), opens to the same empty log, and
// takes appends, a truncate, a purge and a reopen like any log.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { newLogFiles, openSegmentedLog, type SegmentedLogOptions } from '../segments/index.js';
import { readCellFile } from '../cells/index.js';
import { realFs } from '../lib/fs/real.js';
import { HEADER_BYTES, MANIFEST_NAME, SEGMENT_SUFFIX, decodeManifest, decodeSegmentHeader, parseSegmentFileName } from '../segments/format.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'seglog-new-log-'));
after(() => fs.rmSync(root, { recursive: true, force: true }));
let n = 0;
const newDir = (): string => {
  const d = path.join(root, `d${n++}`);
  fs.mkdirSync(d);
  return d;
};

const SLOT = 512;

function options(segmentBytes: number, firstIndex: number): SegmentedLogOptions {
  return { segmentBytes, firstIndex, ownerLocked: true, manifestSlotBytes: SLOT } as SegmentedLogOptions;
}

function writeNewLog(dir: string, firstIndex: number, segmentBytes: number): void {
  for (const f of newLogFiles(firstIndex, segmentBytes, SLOT)) fs.writeFileSync(path.join(dir, f.name), f.bytes, { flag: 'wx' });
}

/** The files of a log directory: name → bytes. */
function files(dir: string): Map<string, Buffer> {
  return new Map(fs.readdirSync(dir).sort().map((name) => [name, fs.readFileSync(path.join(dir, name))]));
}

async function manifestOf(dir: string) {
  const cell = await readCellFile(realFs, path.join(dir, MANIFEST_NAME), SLOT);
  assert.ok(cell !== null, 'the manifest cell has a live value');
  return { cell, manifest: decodeManifest(cell.live.value, MANIFEST_NAME) };
}

for (const [segmentBytes, firstIndex] of [
  [64 * 1024 * 1024, 0],
  [64 * 1024 * 1024, 1],
  [1024, 7],
  [64, 3],
] as const) {
  test(`newLogFiles(${firstIndex}, ${segmentBytes}) holds what a fresh owner-locked log commits`, async () => {
    const fresh = newDir();
    const log = await openSegmentedLog(fresh, options(segmentBytes, firstIndex));
    await log.close();
    const written = newDir();
    writeNewLog(written, firstIndex, segmentBytes);

    const a = files(fresh);
    const b = files(written);
    assert.equal(b.size, a.size, `files: ${[...b.keys()].join(', ')} against ${[...a.keys()].join(', ')}`);
    const segOf = (m: Map<string, Buffer>): [string, Buffer] => {
      const segs = [...m].filter(([name]) => name.endsWith(SEGMENT_SUFFIX));
      assert.equal(segs.length, 1);
      return segs[0] as [string, Buffer];
    };
    const [, segA] = segOf(a);
    const [nameB, segB] = segOf(b);
    assert.equal(segB.length, segA.length, 'the first file is sized as the log sizes it');
    const hA = decodeSegmentHeader(segA);
    const hB = decodeSegmentHeader(segB);
    assert.ok(hA !== null && hB !== null);
    assert.equal(hB.base, hA.base);
    assert.equal(hB.base, firstIndex);
    assert.equal(hB.generation, hA.generation);
    assert.equal(parseSegmentFileName(nameB)?.base, firstIndex, nameB);
    assert.deepEqual(segB.subarray(HEADER_BYTES), segA.subarray(HEADER_BYTES), 'zeros past the header in both');
    assert.equal((b.get(MANIFEST_NAME) as Buffer).length, (a.get(MANIFEST_NAME) as Buffer).length);

    const ma = await manifestOf(fresh);
    const mb = await manifestOf(written);
    assert.equal(mb.manifest.firstIndex, ma.manifest.firstIndex);
    assert.equal(mb.manifest.generation, ma.manifest.generation);
    assert.deepEqual(
      mb.manifest.segments.map((s) => s.base),
      ma.manifest.segments.map((s) => s.base),
    );
    assert.equal(mb.cell.live.slot, ma.cell.live.slot);
    assert.equal(mb.cell.live.stamp, ma.cell.live.stamp);
    assert.equal(mb.cell.live.format, ma.cell.live.format);
    assert.equal(mb.cell.nextStamp, ma.cell.nextStamp);
    assert.equal(mb.cell.prepare, ma.cell.prepare);
    assert.deepEqual(mb.cell.standby, ma.cell.standby);

    // It opens as the empty log and works as one, across reopens.
    let opened = await openSegmentedLog(written, options(segmentBytes, firstIndex));
    assert.equal(opened.firstIndex, firstIndex);
    assert.equal(opened.endIndex, firstIndex);
    const records = Array.from({ length: 12 }, (_, i) => new Uint8Array(10 + i).fill(i + 1));
    assert.equal(await opened.append(records.slice(0, 6)), firstIndex);
    await opened.close();
    opened = await openSegmentedLog(written, options(segmentBytes, firstIndex));
    assert.equal(opened.endIndex, firstIndex + 6);
    await opened.append(records.slice(6));
    await opened.truncateAfter(firstIndex + 10);
    await opened.dropBefore(firstIndex + 2);
    await opened.close();
    opened = await openSegmentedLog(written, options(segmentBytes, firstIndex));
    assert.equal(opened.firstIndex, firstIndex + 2);
    assert.equal(opened.endIndex, firstIndex + 10);
    const got = await opened.read(firstIndex + 2, 100);
    assert.deepEqual(got.map((r) => Buffer.from(r)), records.slice(2, 10).map((r) => Buffer.from(r)));
    await opened.close();
  });
}

test('newLogFiles: a first index that is not a safe non-negative integer is a RangeError', () => {
  for (const bad of [-1, 1.5, Number.MAX_SAFE_INTEGER + 1, Number.NaN]) {
    assert.throws(() => newLogFiles(bad, 1024, SLOT), RangeError, String(bad));
  }
});
