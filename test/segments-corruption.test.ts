// Corruption tests of the segmented log: flip bytes of a sealed segment (every byte: header,
// frame headers, payloads, trailing space), of segment indexes and of the manifest, then open and
// read everything. Each outcome must be a typed error or exactly the records written (an index
// is derived data: a damaged one is rebuilt). Wrong bytes are never returned.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openSegmentedLog } from '../segments/index.js';
import { SeglogError } from '../lib/errors.js';
import { MemoryFs, type DiskImage } from '../lib/fs/memory.js';

const DIR = '/c/log';
const OPTIONS = { segmentBytes: 200 };

function record(i: number): Buffer {
  const b = Buffer.alloc((i * 7) % 40);
  for (let k = 0; k < b.length; k++) b[k] = (i * 13 + k) & 0xff;
  return b;
}

interface Fixture {
  image: DiskImage;
  expected: Buffer[];
  sealedSegments: string[];
  sealedIndexes: string[];
  activeIndex: string;
  manifest: string;
}

async function buildFixture(): Promise<Fixture> {
  const mem = new MemoryFs({ trace: false });
  const log = await openSegmentedLog(DIR, { ...OPTIONS, fs: mem });
  const expected: Buffer[] = [];
  for (let i = 0; i < 24; i++) {
    expected.push(record(i));
    await log.append([record(i)]);
  }
  assert.ok(log.stats().segments >= 4, 'the fixture spans several segments');
  await log.close();
  const image = mem.currentImage();
  const names = Object.keys(image.files).sort();
  const segs = names.filter((n) => n.endsWith('.seg'));
  const idxs = names.filter((n) => n.endsWith('.idx'));
  const active = segs.at(-1)!.replace(/\.seg$/, '.idx');
  assert.ok(idxs.includes(active), 'close wrote the active segment index');
  return {
    image,
    expected,
    sealedSegments: segs.slice(0, -1),
    sealedIndexes: idxs.filter((n) => n !== active),
    activeIndex: active,
    manifest: `${DIR}/MANIFEST`,
  };
}

function withFile(image: DiskImage, file: string, bytes: Uint8Array | null): DiskImage {
  const files: Record<string, Uint8Array> = { ...image.files };
  if (bytes === null) delete files[file];
  else files[file] = bytes;
  return { dirs: image.dirs ?? [], files };
}

function flipped(bytes: Uint8Array, pos: number): Uint8Array {
  const copy = bytes.slice();
  copy[pos]! ^= ((pos * 37) % 255) + 1;
  return copy;
}

type Outcome = { kind: 'error'; code: string } | { kind: 'ok'; rebuilds: number };

/** Opens the image and reads every record; checks that what comes back is exactly `expected`. */
async function openAndRead(image: DiskImage, expected: Buffer[], what: string): Promise<Outcome> {
  const mem = new MemoryFs({ image, trace: false });
  let log;
  try {
    log = await openSegmentedLog(DIR, { ...OPTIONS, fs: mem });
  } catch (err) {
    if (err instanceof SeglogError) return { kind: 'error', code: err.code };
    throw err;
  }
  try {
    let got: Uint8Array[];
    try {
      got = await log.read(log.firstIndex, 1000);
    } catch (err) {
      if (err instanceof SeglogError) return { kind: 'error', code: err.code };
      throw err;
    }
    assert.equal(log.firstIndex, 0, `${what}: first index`);
    assert.equal(got.length, expected.length, `${what}: record count`);
    for (let i = 0; i < got.length; i++) assert.ok(Buffer.from(got[i]!).equals(expected[i]!), `${what}: record ${i} has wrong bytes`);
    return { kind: 'ok', rebuilds: log.stats().indexRebuilds };
  } finally {
    await log.close().catch(() => undefined);
  }
}

test('every byte of a sealed segment flipped: CORRUPT or the right records (with and without its index)', async () => {
  const fx = await buildFixture();
  let corrupt = 0;
  let intact = 0;
  for (const seg of fx.sealedSegments.slice(0, 2)) {
    const bytes = fx.image.files[seg]!;
    for (const dropIndex of [false, true]) {
      let image = fx.image;
      if (dropIndex) image = withFile(image, seg.replace(/\.seg$/, '.idx'), null);
      for (let pos = 0; pos < bytes.length; pos++) {
        const outcome = await openAndRead(withFile(image, seg, flipped(bytes, pos)), fx.expected, `${seg} byte ${pos}`);
        if (outcome.kind === 'error') {
          assert.equal(outcome.code, 'CORRUPT', `${seg} byte ${pos}`);
          corrupt++;
        } else intact++;
      }
    }
  }
  console.log(`sealed segment flips: ${corrupt} detected as CORRUPT, ${intact} harmless (space past the last record)`);
  assert.ok(corrupt > 0);
});

test('every byte of a sealed index flipped: rebuilt by a scan, the right records', async () => {
  const fx = await buildFixture();
  let trials = 0;
  for (const idx of fx.sealedIndexes.slice(0, 2)) {
    const bytes = fx.image.files[idx]!;
    for (let pos = 0; pos < bytes.length; pos++) {
      const outcome = await openAndRead(withFile(fx.image, idx, flipped(bytes, pos)), fx.expected, `${idx} byte ${pos}`);
      assert.deepEqual(outcome, { kind: 'ok', rebuilds: 1 }, `${idx} byte ${pos}`);
      trials++;
    }
    // Truncated or emptied indexes too.
    for (const len of [0, 1, 20, bytes.length - 1]) {
      const outcome = await openAndRead(withFile(fx.image, idx, bytes.subarray(0, len)), fx.expected, `${idx} cut to ${len}`);
      assert.deepEqual(outcome, { kind: 'ok', rebuilds: 1 });
      trials++;
    }
  }
  console.log(`sealed index damage: ${trials} cases, each rebuilt`);
});

test("every byte of the active segment's index flipped: ignored, the tail is rescanned", async () => {
  const fx = await buildFixture();
  const bytes = fx.image.files[fx.activeIndex]!;
  for (let pos = 0; pos < bytes.length; pos++) {
    const outcome = await openAndRead(withFile(fx.image, fx.activeIndex, flipped(bytes, pos)), fx.expected, `active index byte ${pos}`);
    assert.equal(outcome.kind, 'ok', `active index byte ${pos}`);
  }
});

test('bytes of the manifest flipped (both slots, seeded sample of the rest): a typed error or the right records', async () => {
  const fx = await buildFixture();
  const bytes = fx.image.files[fx.manifest]!;
  const slot = bytes.length / 2;
  const positions = new Set<number>();
  for (let p = 0; p < 200; p++) {
    positions.add(p);
    positions.add(slot + p);
  }
  let seed = 12345;
  for (let k = 0; k < 200; k++) {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    positions.add(seed % bytes.length);
  }
  const codes = new Map<string, number>();
  for (const pos of [...positions].sort((a, b) => a - b)) {
    const outcome = await openAndRead(withFile(fx.image, fx.manifest, flipped(bytes, pos)), fx.expected, `manifest byte ${pos}`);
    const key = outcome.kind === 'ok' ? 'ok' : outcome.code;
    codes.set(key, (codes.get(key) ?? 0) + 1);
  }
  console.log(`manifest flips: ${[...codes].map(([k, v]) => `${k} ${v}`).join(', ')}`);
  assert.ok((codes.get('CORRUPT') ?? 0) > 0, 'a flip in the live slot falls back to an older manifest, which open detects');
});
