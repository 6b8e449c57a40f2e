// lib/checksum.ts: the CRC-32 of the stores' larger runs answers exactly what zlib.crc32 answers,
// for every length (either side of the native threshold, the empty input included) and every
// seed, so that nothing on disk depends on which implementation ran.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { crc32 as zlibCrc32 } from 'node:zlib';
import fc from 'fast-check';
import { crc32, NATIVE_FROM_BYTES, nativeCrc32 } from '../lib/checksum.js';

test('crc32 equals zlib.crc32 for every input and seed, either side of the native threshold', () => {
  const lengths = fc.oneof(
    fc.integer({ min: 0, max: 64 }),
    fc.integer({ min: NATIVE_FROM_BYTES - 8, max: NATIVE_FROM_BYTES + 8 }),
    fc.integer({ min: NATIVE_FROM_BYTES, max: 200_000 }),
  );
  fc.assert(
    fc.property(lengths, fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 255 }), fc.integer({ min: 0, max: 7 }), (length, seed, fill, offset) => {
      // A view at an offset into a larger buffer, as the stores pass (a frame inside a batch).
      const backing = new Uint8Array(length + offset);
      for (let i = 0; i < backing.length; i++) backing[i] = (i * 31 + fill) & 0xff;
      const data = backing.subarray(offset);
      assert.equal(crc32(data, seed), zlibCrc32(data, seed));
      assert.equal(crc32(data), zlibCrc32(data));
    }),
    { numRuns: 300 },
  );
});

test('crc32 of a view of shared memory (the payload batches) equals zlib.crc32', () => {
  const shared = new Uint8Array(new SharedArrayBuffer(3 * NATIVE_FROM_BYTES));
  for (let i = 0; i < shared.length; i++) shared[i] = (i * 7) & 0xff;
  for (const [from, to] of [[0, shared.length], [5, 5 + NATIVE_FROM_BYTES], [9, 20]] as const) {
    assert.equal(crc32(shared.subarray(from, to), 12345), zlibCrc32(shared.subarray(from, to), 12345));
  }
});

test('the native CRC-32 serves long inputs where its prebuilt binary exists (linux x64)', { skip: !(process.platform === 'linux' && process.arch === 'x64') }, () => {
  // A broken install would fall back to zlib silently: right answers, a third of the speed.
  assert.equal(nativeCrc32, true);
});
