// scanFrames' answer for what follows the valid prefix (`restIsZero`), on which recovery keeps or
// cuts a segment's tail without reading it twice: true for zeros and for a prefix that ends the
// file, false for any other byte the last window held, null when the window did not reach the end.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import fc from 'fast-check';
import { realFs } from '../lib/fs/real.js';
import { HEADER_BYTES, writeFrame } from '../segments/format.js';
import { scanFrames } from '../segments/scan.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'seglog-scan-'));
after(() => fs.rmSync(root, { recursive: true, force: true }));
let n = 0;
const SALT = 0x5eed;
const MAX = 1 << 20;

/** A file of a header's room, `records` frames of `size` bytes from index 0, then `tail`. */
function segmentFile(records: number, size: number, tail: Uint8Array): { file: string; end: number } {
  const frames = new Uint8Array(records * (16 + size));
  let at = 0;
  for (let i = 0; i < records; i++) at += writeFrame(frames, at, i, new Uint8Array(size).fill(i + 1), SALT);
  const file = path.join(root, `s${n++}`);
  fs.writeFileSync(file, Buffer.concat([new Uint8Array(HEADER_BYTES), frames, tail]));
  return { file, end: HEADER_BYTES + frames.length };
}

async function scan(file: string) {
  const h = await realFs.open(file, 'read');
  try {
    return await scanFrames(h, await h.size(), SALT, HEADER_BYTES, 0, MAX, Number.MAX_SAFE_INTEGER, () => undefined);
  } finally {
    await h.close();
  }
}

test('restIsZero: the valid prefix ends the file, zeros follow it, or a byte that is not zero', async () => {
  const exact = segmentFile(3, 10, new Uint8Array(0));
  assert.deepEqual(await scan(exact.file), { count: 3, endOffset: exact.end, stop: 'end', restIsZero: true });
  const zeros = segmentFile(3, 10, new Uint8Array(4000));
  const z = await scan(zeros.file);
  assert.equal(z.count, 3);
  assert.equal(z.endOffset, zeros.end);
  assert.equal(z.restIsZero, true);
  const tail = new Uint8Array(4000);
  tail[3999] = 1;
  const dirty = segmentFile(3, 10, tail);
  const d = await scan(dirty.file);
  assert.equal(d.endOffset, dirty.end);
  assert.equal(d.restIsZero, false, 'the last byte of the file is not zero');
});

test('restIsZero: null when the last window did not reach the end of the file', async () => {
  // A frame whose length field claims more than the file holds stops the scan at its header;
  // past 1 MiB of tail the window (1 MiB from the scan start) cannot hold the rest.
  const big = segmentFile(1, 10, new Uint8Array(MAX + 4096));
  const r = await scan(big.file);
  assert.equal(r.count, 1);
  assert.equal(r.restIsZero, null);
});

test('restIsZero agrees with the bytes of the file whenever it answers, whatever the tail (property)', async () => {
  await fc.assert(
    fc.asyncProperty(fc.integer({ min: 0, max: 5 }), fc.uint8Array({ minLength: 0, maxLength: 300 }), async (records, tail) => {
      const f = segmentFile(records, 7, tail);
      const r = await scan(f.file);
      const bytes = fs.readFileSync(f.file);
      const rest = bytes.subarray(r.endOffset);
      assert.ok(r.endOffset >= f.end, 'every written frame validates');
      // Null only where the scan read nothing past its start (a tail too short for a frame header
      // after no frame at all); otherwise a file under 1 MiB was in the window whole.
      if (r.restIsZero === null) assert.ok(records === 0 && tail.length < 16, `null for ${records} records and a ${tail.length}-byte tail`);
      else assert.equal(r.restIsZero, rest.every((b) => b === 0));
    }),
    { numRuns: 200 },
  );
});
