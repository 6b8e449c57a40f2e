// The payload store: round trips, dedupe, concurrency, limits, references, garbage collection,
// damage detection, open-time checks, faults, and bounded memory.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { readdir } from 'node:fs/promises';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import * as path from 'node:path';
import fc from 'fast-check';
import { openPayloadStore, type FsPayloadStore, type PayloadStoreOptions } from '../lib/payloads/index.js';
import { isSeglogError, type ErrorCode } from '../lib/errors.js';
import { MemoryFs, type DiskImage } from '../lib/fs/memory.js';
import { FaultyFs } from '../lib/fs/faulty.js';
import { ManualClock } from '../lib/clock.js';
import { hashThreadsForTests, setMaxHashThreadsForTests, stopHashThreadForTests } from '../lib/payloads/hash.js';
import { EARLY_SYNC_BYTES } from '../lib/payloads/write.js';
import { BLOB_HEADER_BYTES, CHUNK_CRC_BYTES, chunkCrc } from '../lib/payloads/format.js';
import {
  blobPath,
  bytesOf,
  collect,
  collectUntilError,
  digestOf,
  filesUnder,
  lazyBody,
  lazyDigest,
  piecesOf,
  refsPath,
  withFile,
  withFlippedBit,
  withTempDir,
} from './support/payloads.js';

const execFileAsync = promisify(execFile);
const DIR = '/p';
const MIN = 60_000;

function memStore(options: PayloadStoreOptions & { image?: DiskImage } = {}): Promise<FsPayloadStore> {
  const { image, ...rest } = options;
  return openPayloadStore(DIR, { fs: new MemoryFs({ image: image ?? { dirs: [], files: {} }, trace: false }), ...rest });
}

async function rejectsWith(p: Promise<unknown>, code: ErrorCode, what = ''): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    assert.ok(isSeglogError(err, code), `${what}: expected ${code}, got ${String(err)}`);
    return err;
  }
  assert.fail(`${what}: expected ${code}, it resolved`);
}

async function realFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string, rel: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      if (e.isDirectory()) await walk(path.join(d, e.name), `${rel}${e.name}/`);
      else out.push(`${rel}${e.name}`);
    }
  };
  await walk(dir, '');
  return out.sort();
}

// ---------------------------------------------------------------------------------------------
// Round trips

test('round trips of empty, small, one-chunk and multi-chunk payloads on the real file system', async () => {
  await withTempDir(async (dir) => {
    const store = await openPayloadStore(dir);
    try {
      for (const size of [0, 1, 100, 65535, 65536, 65537, 3 * 65536 + 17, 2_500_000]) {
        const bytes = bytesOf(size, size);
        const info = await store.put(piecesOf(bytes, [1000, 70_000, 1, 65536]));
        assert.deepEqual(info, { digest: digestOf(bytes), size });
        assert.deepEqual(await store.stat(info.digest), info);
        assert.deepEqual(await collect(await store.get(info.digest)), bytes, `size ${size}`);
      }
      // A Node Readable is a body too.
      const bytes = bytesOf(9, 200_000);
      const info = await store.put(Readable.from([Buffer.from(bytes.subarray(0, 5)), Buffer.from(bytes.subarray(5))]));
      assert.equal(info.digest, digestOf(bytes));
      assert.deepEqual(await collect(await store.get(info.digest)), bytes);
    } finally {
      await store.close();
    }
    const files = await realFiles(dir);
    assert.deepEqual(files.filter((f) => f.startsWith('tmp/')), []);
    assert.ok(files.includes('FORMAT') && files.includes('CLOCK') && files.includes('LOCK'));
    // Reopened, everything is still there.
    const again = await openPayloadStore(dir);
    try {
      const bytes = bytesOf(65537, 65537);
      assert.deepEqual(await collect(await again.get(digestOf(bytes))), bytes);
    } finally {
      await again.close();
    }
  });
});

test('any body cut into any pieces, with any chunk size, reads back exactly (property)', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 0, max: 5000 }),
      fc.array(fc.integer({ min: 1, max: 700 }), { minLength: 1, maxLength: 5 }),
      fc.integer({ min: 64, max: 1500 }),
      fc.integer(),
      async (size, pieces, chunkBytes, seed) => {
        const store = await memStore({ chunkBytes });
        const bytes = bytesOf(seed, size);
        const info = await store.put(piecesOf(bytes, pieces));
        assert.equal(info.digest, digestOf(bytes));
        assert.equal(info.size, size);
        assert.deepEqual(await collect(await store.get(info.digest)), bytes);
        await store.close();
      },
    ),
    { numRuns: 60 },
  );
});

// ---------------------------------------------------------------------------------------------
// Dedupe and concurrency

test('identical bytes are stored once; a second put restarts the grace period', async () => {
  const fs = new MemoryFs({ trace: false });
  const clock = new ManualClock(0);
  const store = await openPayloadStore(DIR, { fs, clock, graceMs: 10 * MIN });
  const bytes = bytesOf(1, 1000);
  const a = await store.put(piecesOf(bytes, [7]));
  clock.advance(8 * MIN);
  const b = await store.put(piecesOf(bytes, [1000]));
  assert.deepEqual(a, b);
  const image = fs.currentImage();
  assert.deepEqual(filesUnder(image, `${DIR}/blobs`), [blobPath(DIR, a.digest)]);
  assert.deepEqual(filesUnder(image, `${DIR}/tmp`), []);
  // 11 minutes after the first put, 3 after the second: still inside the second's grace period.
  clock.advance(3 * MIN);
  assert.deepEqual(await store.collectGarbage(), { removed: 0, bytes: 0 });
  clock.advance(7 * MIN);
  assert.deepEqual(await store.collectGarbage(), { removed: 1, bytes: 1000 });
  await store.close();
});

test('concurrent puts of the same bytes and of different bytes all succeed, each stored once', async () => {
  await withTempDir(async (dir) => {
    const store = await openPayloadStore(dir, { chunkBytes: 4096 });
    try {
      const same = bytesOf(42, 300_000);
      const different = [1, 2, 3, 4, 5, 6].map((s) => bytesOf(s, 50_000 + s * 999));
      const results = await Promise.all([
        ...Array.from({ length: 8 }, (_, i) => store.put(piecesOf(same, [1000 + i * 777]))),
        ...different.map((b) => store.put(piecesOf(b, [3000]))),
      ]);
      for (const r of results.slice(0, 8)) assert.deepEqual(r, { digest: digestOf(same), size: same.length });
      different.forEach((b, i) => assert.equal(results[8 + i]?.digest, digestOf(b)));
      const blobs = (await realFiles(dir)).filter((f) => f.startsWith('blobs/'));
      assert.equal(blobs.length, 1 + different.length);
      assert.deepEqual((await realFiles(dir)).filter((f) => f.startsWith('tmp/')), []);
      for (const b of [same, ...different]) assert.deepEqual(await collect(await store.get(digestOf(b))), b);
    } finally {
      await store.close();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Limits and failed bodies

test('maxBytes exceeded: TOO_LARGE, the body is abandoned, nothing stored, no temporary file even after reopen', async () => {
  const fs = new MemoryFs({ trace: false });
  const store = await openPayloadStore(DIR, { fs, chunkBytes: 64 });
  let pulled = 0;
  let finalized = false;
  async function* endless(): AsyncGenerator<Uint8Array> {
    try {
      for (;;) {
        pulled++;
        yield new Uint8Array(100).fill(1);
      }
    } finally {
      finalized = true;
    }
  }
  await rejectsWith(store.put(endless(), { maxBytes: 1000 }), 'TOO_LARGE', 'endless body');
  assert.ok(finalized, 'the body iterator was closed');
  assert.equal(pulled, 11);
  // Exactly maxBytes is fine; one more is not.
  const bytes = bytesOf(3, 1000);
  assert.equal((await store.put(piecesOf(bytes, [333]), { maxBytes: 1000 })).size, 1000);
  await rejectsWith(store.put(piecesOf(bytesOf(4, 1001)), { maxBytes: 1000 }), 'TOO_LARGE');
  // A Readable is destroyed.
  const readable = Readable.from((async function* () {
    for (;;) yield Buffer.alloc(500);
  })());
  await rejectsWith(store.put(readable, { maxBytes: 2000 }), 'TOO_LARGE', 'readable');
  assert.ok(readable.destroyed);
  const image = fs.currentImage();
  assert.deepEqual(filesUnder(image, `${DIR}/blobs`), [blobPath(DIR, digestOf(bytes))]);
  assert.deepEqual(filesUnder(image, `${DIR}/tmp`), []);
  await store.close();
  await rejectsWith(memStore({ image }).then((s) => s.put(piecesOf(bytes), { maxBytes: -1 })), 'INVALID');
});

test('expectedDigest: a mismatch is DIGEST_MISMATCH and stores nothing; a match stores; a malformed one is INVALID', async () => {
  const fs = new MemoryFs({ trace: false });
  const store = await openPayloadStore(DIR, { fs });
  const bytes = bytesOf(5, 5000);
  const wrong = digestOf(bytesOf(6, 5000));
  const err = await rejectsWith(store.put(piecesOf(bytes, [100]), { expectedDigest: wrong }), 'DIGEST_MISMATCH');
  assert.equal((err as { details: { digest: string } }).details.digest, digestOf(bytes));
  assert.deepEqual(filesUnder(fs.currentImage(), `${DIR}/blobs`), []);
  assert.deepEqual(filesUnder(fs.currentImage(), `${DIR}/tmp`), []);
  assert.equal(await store.stat(digestOf(bytes)), null);
  assert.deepEqual(await store.put(piecesOf(bytes), { expectedDigest: digestOf(bytes) }), { digest: digestOf(bytes), size: 5000 });
  for (const bad of ['', 'sha256:', 'sha256:' + 'A'.repeat(64), 'md5:' + 'a'.repeat(64), 'sha256:' + 'a'.repeat(63)]) {
    await rejectsWith(store.put(piecesOf(bytes), { expectedDigest: bad }), 'INVALID', bad);
  }
  await store.close();
});

test('a body that throws mid-stream rejects with its own error and leaves nothing; a non-byte chunk is INVALID', async () => {
  const fs = new MemoryFs({ trace: false });
  const store = await openPayloadStore(DIR, { fs, chunkBytes: 64 });
  const boom = new Error('producer went away');
  async function* failing(): AsyncGenerator<Uint8Array> {
    yield new Uint8Array(5000);
    throw boom;
  }
  await assert.rejects(store.put(failing()), (e) => e === boom);
  async function* strings(): AsyncGenerator<unknown> {
    yield new Uint8Array(10);
    yield 'text';
  }
  await rejectsWith(store.put(strings() as AsyncIterable<Uint8Array>), 'INVALID');
  await rejectsWith(store.put(42 as unknown as AsyncIterable<Uint8Array>), 'INVALID');
  assert.deepEqual(filesUnder(fs.currentImage(), `${DIR}/blobs`), []);
  assert.deepEqual(filesUnder(fs.currentImage(), `${DIR}/tmp`), []);
  await store.close();
});

// ---------------------------------------------------------------------------------------------
// Validation, absence, lifecycle

test('bad digests and holders are INVALID; absent payloads are NOT_FOUND or null; the directory is locked', async () => {
  const fs = new MemoryFs({ trace: false });
  const store = await openPayloadStore(DIR, { fs });
  const absent = digestOf(new Uint8Array([1]));
  for (const bad of ['', 'sha256:xyz', absent.toUpperCase(), absent + '0', 'sha1:' + 'a'.repeat(64), 7 as unknown as string]) {
    await rejectsWith(store.get(bad), 'INVALID', `get ${String(bad)}`);
    await rejectsWith(store.stat(bad), 'INVALID');
    await rejectsWith(store.addRef(bad, 'q'), 'INVALID');
    await rejectsWith(store.removeRef(bad, 'q'), 'INVALID');
    await rejectsWith(store.refs(bad), 'INVALID');
  }
  await rejectsWith(store.get(absent), 'NOT_FOUND');
  assert.equal(await store.stat(absent), null);
  await rejectsWith(store.addRef(absent, 'q'), 'NOT_FOUND');
  await store.removeRef(absent, 'q'); // idempotent: nothing to remove
  assert.deepEqual(await store.refs(absent), []);
  const { digest } = await store.put(piecesOf(bytesOf(1, 10)));
  for (const bad of ['', 'x'.repeat(257), 'é'.repeat(129), '\ud800', 3 as unknown as string]) {
    await rejectsWith(store.addRef(digest, bad), 'INVALID', `holder ${JSON.stringify(bad)}`);
    await rejectsWith(store.removeRef(digest, bad), 'INVALID');
  }
  await store.addRef(digest, 'x'.repeat(256));
  await store.addRef(digest, 'é'.repeat(128));
  await rejectsWith(openPayloadStore(DIR, { fs: fs.newProcess() }), 'LOCKED');
  await rejectsWith(openPayloadStore(DIR, { fs, graceMs: -1 }), 'INVALID');
  await rejectsWith(openPayloadStore(DIR, { fs, chunkBytes: 10 }), 'INVALID');
  await store.close();
  await store.close();
  await rejectsWith(store.put(piecesOf(new Uint8Array(1))), 'CLOSED');
  await rejectsWith(store.get(digest), 'CLOSED');
  const again = await openPayloadStore(DIR, { fs: fs.newProcess() });
  assert.deepEqual(await again.refs(digest), ['x'.repeat(256), 'é'.repeat(128)]);
  await again.close();
});

test('close ends an open get stream with CLOSED and waits for a running put', async () => {
  const fs = new MemoryFs({ trace: false });
  const store = await openPayloadStore(DIR, { fs, chunkBytes: 64 });
  const bytes = bytesOf(2, 3_000_000);
  const { digest } = await store.put(piecesOf(bytes, [100_000]));
  const stream = (await store.get(digest))[Symbol.asyncIterator]();
  assert.equal((await stream.next()).done, false);
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  async function* slow(): AsyncGenerator<Uint8Array> {
    yield new Uint8Array(10);
    await gate;
    yield new Uint8Array(10);
  }
  const running = store.put(slow());
  const closing = store.close();
  await new Promise((r) => setImmediate(r));
  release();
  assert.equal((await running).size, 20);
  await closing;
  await rejectsWith(stream.next(), 'CLOSED');
});

// ---------------------------------------------------------------------------------------------
// References

test('references: a set of holders, idempotent add and remove, durable across reopen (model-based)', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.record({
          op: fc.constantFrom('add', 'remove', 'reopen'),
          payload: fc.integer({ min: 0, max: 2 }),
          holder: fc.constantFrom('queue-a', 'queue-b', 'q/c', 'δ'),
        }),
        { maxLength: 30 },
      ),
      async (ops) => {
        const fs = new MemoryFs({ trace: false });
        let view = fs;
        let store = await openPayloadStore(DIR, { fs: view });
        const digests: string[] = [];
        for (let i = 0; i < 3; i++) digests.push((await store.put(piecesOf(bytesOf(i, 10 + i)))).digest);
        const model = digests.map(() => new Set<string>());
        for (const { op, payload, holder } of ops) {
          const d = digests[payload] as string;
          const set = model[payload] as Set<string>;
          if (op === 'add') {
            await store.addRef(d, holder);
            set.add(holder);
          } else if (op === 'remove') {
            await store.removeRef(d, holder);
            set.delete(holder);
          } else {
            await store.close();
            view = view.newProcess();
            store = await openPayloadStore(DIR, { fs: view });
          }
          for (let k = 0; k < 3; k++) {
            const expected = [...(model[k] as Set<string>)].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
            assert.deepEqual(await store.refs(digests[k] as string), expected);
          }
        }
        // A refcount file exists exactly when the holder set is not empty.
        const image = fs.currentImage();
        for (let k = 0; k < 3; k++) {
          assert.equal(image.files[refsPath(DIR, digests[k] as string)] !== undefined, (model[k] as Set<string>).size > 0);
        }
        assert.deepEqual(filesUnder(image, `${DIR}/tmp`), []);
        await store.close();
      },
    ),
    { numRuns: 40 },
  );
});

test('a repeated addRef or removeRef writes nothing', async () => {
  const m = new MemoryFs();
  const store = await openPayloadStore(DIR, { fs: m });
  const { digest } = await store.put(piecesOf(bytesOf(1, 100)));
  await store.addRef(digest, 'q');
  const writes = (): number => m.trace.filter((e) => e.kind === 'write' || e.kind === 'rename' || e.kind === 'unlink').length;
  const before = writes();
  await store.addRef(digest, 'q');
  await store.removeRef(digest, 'other');
  assert.equal(writes(), before);
  await store.removeRef(digest, 'q');
  const after = writes();
  await store.removeRef(digest, 'q');
  assert.equal(writes(), after);
  await store.close();
});

// ---------------------------------------------------------------------------------------------
// Garbage collection

test('GC keeps everything referenced, named, or inside the grace period, and removes the rest', async () => {
  const fs = new MemoryFs({ trace: false });
  const clock = new ManualClock(1000);
  const named = new Set<string>();
  const store = await openPayloadStore(DIR, { fs, clock, graceMs: 10 * MIN, chunkBytes: 64, isNamed: (d) => named.has(d) });
  const put = async (seed: number, size: number): Promise<string> => (await store.put(piecesOf(bytesOf(seed, size)))).digest;
  const held = await put(1, 500);
  const namedOne = await put(2, 600);
  const garbage = await put(3, 700);
  const alsoHeld = await put(4, 800);
  await store.addRef(held, 'queue-1');
  await store.addRef(alsoHeld, 'queue-1');
  await store.addRef(alsoHeld, 'queue-2');
  named.add(namedOne);
  clock.advance(9 * MIN);
  const young = await put(5, 900);
  assert.deepEqual(await store.collectGarbage(), { removed: 0, bytes: 0 }, 'everything is inside its grace period');
  clock.advance(2 * MIN);
  assert.deepEqual(await store.collectGarbage(), { removed: 1, bytes: 700 });
  assert.equal(await store.stat(garbage), null);
  for (const d of [held, namedOne, alsoHeld, young]) assert.notEqual(await store.stat(d), null);
  clock.advance(9 * MIN);
  await store.removeRef(alsoHeld, 'queue-1');
  named.delete(namedOne);
  assert.deepEqual(await store.collectGarbage(), { removed: 2, bytes: 600 + 900 }); // namedOne, young
  await store.removeRef(alsoHeld, 'queue-2');
  assert.deepEqual(await store.collectGarbage(), { removed: 1, bytes: 800 });
  assert.deepEqual(await store.refs(held), ['queue-1']);
  assert.deepEqual(await collect(await store.get(held)), bytesOf(1, 500));
  // An async hook works too; a throwing hook aborts the collection and removes nothing.
  await store.removeRef(held, 'queue-1');
  const failing = await openPayloadStore('/q', { fs, clock, graceMs: 0, isNamed: async () => Promise.reject(new Error('index unavailable')) });
  await failing.put(piecesOf(bytesOf(9, 9)));
  await assert.rejects(failing.collectGarbage(), /index unavailable/);
  assert.equal(filesUnder(fs.currentImage(), '/q/blobs').length, 1);
  await failing.close();
  assert.deepEqual(await store.collectGarbage(), { removed: 1, bytes: 500 });
  await store.close();
});

test('GC never removes a payload whose presence was confirmed after it was named: the hook and stat are ordered per digest', async () => {
  // The node's protocol: register the digest as named, then check presence with stat. Here the
  // hook is slow (it answered "not named" and is still returning) when the node registers the
  // digest and checks: either the check answers null or the payload survives.
  const fs = new MemoryFs({ trace: false });
  const named = new Set<string>();
  let entered!: (d: string) => void;
  const hookEntered = new Promise<string>((r) => (entered = r));
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const store = await openPayloadStore(DIR, {
    fs,
    graceMs: 0,
    isNamed: async (d) => {
      const answer = named.has(d);
      entered(d);
      await gate;
      return answer;
    },
  });
  const { digest } = await store.put(piecesOf(bytesOf(1, 50)));
  const collecting = store.collectGarbage();
  assert.equal(await hookEntered, digest);
  named.add(digest);
  const checking = store.stat(digest);
  release();
  const [report, seen] = await Promise.all([collecting, checking]);
  if (seen !== null) assert.notEqual(await store.stat(digest), null, 'confirmed present, then removed');
  assert.deepEqual(report, { removed: seen === null ? 1 : 0, bytes: seen === null ? 50 : 0 });
  await store.close();
});

test('the grace period survives a restart: never shortened by a clock that restarted, lengthened at most by what a crash lost', async () => {
  const fs = new MemoryFs({ trace: false });
  const grace = { graceMs: 10 * MIN };
  let clock = new ManualClock(0);
  let store = await openPayloadStore(DIR, { fs, clock, ...grace });
  const x = (await store.put(piecesOf(bytesOf(1, 100)))).digest;
  clock.advance(6 * MIN);
  await store.close(); // checkpoints 6 minutes of store time

  // A reboot: the monotonic clock starts again somewhere else entirely.
  clock = new ManualClock(1e12);
  let view = fs.newProcess();
  store = await openPayloadStore(DIR, { fs: view, clock, ...grace });
  clock.advance(3 * MIN);
  assert.deepEqual(await store.collectGarbage(), { removed: 0, bytes: 0 }, 'x has 9 minutes of uptime');
  clock.advance(0.5 * MIN);
  const y = (await store.put(piecesOf(bytesOf(2, 200)))).digest; // written at store time 9.5 min
  view.sever(); // killed: the half minute since the collection's checkpoint is lost

  clock = new ManualClock(0);
  view = fs.newProcess();
  store = await openPayloadStore(DIR, { fs: view, clock, ...grace });
  clock.advance(0.75 * MIN);
  // x has 10.25 minutes of uptime, but store time says 9.75: kept (lengthened, never shortened).
  assert.deepEqual(await store.collectGarbage(), { removed: 0, bytes: 0 });
  clock.advance(0.25 * MIN);
  assert.deepEqual(await store.collectGarbage(), { removed: 1, bytes: 100 });
  assert.equal(await store.stat(x), null);
  // y was written after the last checkpoint, "in the future" of the resumed store time: young
  // until 10 minutes of store time have passed beyond its written time.
  clock.advance(9.4 * MIN);
  assert.deepEqual(await store.collectGarbage(), { removed: 0, bytes: 0 });
  assert.notEqual(await store.stat(y), null);
  clock.advance(0.2 * MIN);
  assert.deepEqual(await store.collectGarbage(), { removed: 1, bytes: 200 });
  await store.close();
});

// ---------------------------------------------------------------------------------------------
// Damage

/** A store on MemoryFs holding one payload; answers the disk image and the payload. */
async function imageWith(size: number, chunkBytes: number, holders: string[] = []): Promise<{ image: DiskImage; digest: string; bytes: Uint8Array }> {
  const fs = new MemoryFs({ trace: false });
  const store = await openPayloadStore(DIR, { fs, chunkBytes });
  const bytes = bytesOf(size, size);
  const { digest } = await store.put(piecesOf(bytes, [97]));
  for (const h of holders) await store.addRef(digest, h);
  await store.close();
  return { image: fs.currentImage(), digest, bytes };
}

test('a flipped bit anywhere in a blob is detected: the stream ends with CORRUPT before the damaged chunk is yielded', async () => {
  const chunkBytes = 64;
  const size = 64 * 40 + 13; // 41 chunks, all in the reader's first batch
  const { image, digest, bytes } = await imageWith(size, chunkBytes);
  const file = blobPath(DIR, digest);
  const fileBytes = (image.files[file] as Uint8Array).length;
  assert.equal(fileBytes, 80 + size + 4 * 41);
  let checked = 0;
  for (let offset = 0; offset < fileBytes; offset++) {
    const bit = offset % 8;
    const store = await memStore({ image: withFlippedBit(image, file, offset, bit) });
    let got: { bytes: Uint8Array; error: unknown };
    try {
      got = await collectUntilError(await store.get(digest));
    } catch (err) {
      got = { bytes: new Uint8Array(), error: err }; // a damaged header fails get itself
      assert.ok(offset < 80, `offset ${offset}: get failed although the header is intact`);
    }
    assert.ok(isSeglogError(got.error, 'CORRUPT'), `offset ${offset}: ${String(got.error)}`);
    // Whatever was yielded is a prefix of the payload that stops before the damaged chunk.
    assert.deepEqual(got.bytes, bytes.subarray(0, got.bytes.length), `offset ${offset}: served wrong bytes`);
    if (offset >= 80) {
      const damagedChunk = Math.floor((offset - 80) / (chunkBytes + 4));
      assert.ok(got.bytes.length <= damagedChunk * chunkBytes, `offset ${offset}: yielded the damaged chunk`);
    }
    await store.close();
    checked++;
  }
  assert.equal(checked, fileBytes);
});

test('damage in a later batch: the chunks before it are served, the damaged one never', async () => {
  const chunkBytes = 64 * 1024;
  const size = 40 * chunkBytes; // 40 chunks: batches of 16
  const { image, digest, bytes } = await imageWith(size, chunkBytes);
  const file = blobPath(DIR, digest);
  for (const chunk of [0, 15, 16, 31, 32, 39]) {
    const offset = 80 + chunk * (chunkBytes + 4) + 1234;
    const store = await memStore({ image: withFlippedBit(image, file, offset, 5) });
    const got = await collectUntilError(await store.get(digest));
    assert.ok(isSeglogError(got.error, 'CORRUPT'), String(got.error));
    assert.ok(got.bytes.length <= chunk * chunkBytes, `chunk ${chunk}: ${got.bytes.length} bytes served`);
    assert.deepEqual(got.bytes, bytes.subarray(0, got.bytes.length));
    await store.close();
  }
});

test('damage that keeps every CRC (a chunk rewritten with its checksum recomputed): served by a default get, CORRUPT before the last chunk with verifyDigestOnGet, reported by verify({ deep })', async () => {
  const chunkBytes = 64 * 1024;
  for (const size of [3 * chunkBytes + 5, 40 * chunkBytes + 9]) {
    // One batch (hashed on the event loop when asked) and several (on the hashing thread).
    const { image, digest, bytes } = await imageWith(size, chunkBytes);
    const file = blobPath(DIR, digest);
    const original = image.files[file] as Uint8Array;
    const forged = original.slice();
    const chunk = 1;
    const at = BLOB_HEADER_BYTES + chunk * (chunkBytes + CHUNK_CRC_BYTES);
    forged[at + 10] = (forged[at + 10] as number) ^ 0xff;
    const salt = original.subarray(32, 40);
    new DataView(forged.buffer).setUint32(at + chunkBytes, chunkCrc(salt, chunk, forged.subarray(at, at + chunkBytes)), true);
    const damaged = withFile(image, file, forged);
    const altered = bytes.slice();
    altered[chunk * chunkBytes + 10] = (altered[chunk * chunkBytes + 10] as number) ^ 0xff;

    // The CRCs all match: what the default get checks holds, and it serves what the file holds.
    const plain = await memStore({ image: damaged });
    assert.deepEqual(await collect(await plain.get(digest)), altered, `size ${size}: a default get checks the CRCs only`);
    const report = await plain.verify({ deep: true });
    assert.deepEqual(
      report.problems.map((p) => [p.digest, p.code]),
      [[digest, 'CORRUPT']],
      `size ${size}: verify({ deep }) recomputes the digest`,
    );
    assert.deepEqual((await plain.verify()).problems, [], `size ${size}: a shallow verify reads headers only`);
    await plain.close();

    const strict = await memStore({ image: damaged, verifyDigestOnGet: true });
    const got = await collectUntilError(await strict.get(digest));
    assert.ok(isSeglogError(got.error, 'CORRUPT'), `size ${size}: ${String(got.error)}`);
    assert.ok(got.bytes.length < size, `size ${size}: the last chunk is never served before the digest matched`);
    assert.deepEqual(got.bytes, altered.subarray(0, got.bytes.length));
    // Undamaged, the strict get serves every byte.
    await strict.close();
    const intact = await memStore({ image, verifyDigestOnGet: true });
    assert.deepEqual(await collect(await intact.get(digest)), bytes);
    await intact.close();
  }
  await rejectsWith(memStore({ verifyDigestOnGet: 'yes' as unknown as boolean }), 'INVALID', 'verifyDigestOnGet not a boolean');
});

test('a truncated, extended, swapped or misnamed blob is CORRUPT for get and stat; a put of the same bytes heals it', async () => {
  const { image, digest, bytes } = await imageWith(1000, 64);
  const file = blobPath(DIR, digest);
  const original = image.files[file] as Uint8Array;
  const other = await imageWith(1001, 64);
  const variants: Record<string, Uint8Array> = {
    truncated: original.subarray(0, original.length - 1),
    extended: Uint8Array.from([...original, 0]),
    empty: new Uint8Array(),
    'header only': original.subarray(0, 80),
    'another blob': other.image.files[blobPath(DIR, other.digest)] as Uint8Array,
    'chunks swapped': (() => {
      const copy = original.slice();
      copy.set(original.subarray(80, 148), 148);
      copy.set(original.subarray(148, 216), 80);
      return copy;
    })(),
  };
  for (const [name, damaged] of Object.entries(variants)) {
    const store = await memStore({ image: withFile(image, file, damaged) });
    const statFails = name !== 'chunks swapped';
    if (statFails) await rejectsWith(store.stat(digest), 'CORRUPT', `stat ${name}`);
    let error: unknown = null;
    try {
      error = (await collectUntilError(await store.get(digest))).error;
    } catch (err) {
      error = err;
    }
    assert.ok(isSeglogError(error, 'CORRUPT'), `get ${name}: ${String(error)}`);
    assert.deepEqual(await store.put(piecesOf(bytes)), { digest, size: 1000 });
    assert.deepEqual(await collect(await store.get(digest)), bytes, `healed ${name}`);
    await store.close();
  }
});

test('a damaged refcount file is CORRUPT (never an empty set), at every byte, and GC keeps its payload', async () => {
  const { image, digest } = await imageWith(100, 64, ['queue-1', 'queue-2']);
  const file = refsPath(DIR, digest);
  const length = (image.files[file] as Uint8Array).length;
  assert.equal(length, 48 + 2 * (2 + 7) + 4);
  for (let offset = 0; offset < length; offset++) {
    const store = await memStore({ image: withFlippedBit(image, file, offset, (offset * 3) % 8), graceMs: 0 });
    await rejectsWith(store.refs(digest), 'CORRUPT', `offset ${offset}`);
    await rejectsWith(store.addRef(digest, 'queue-3'), 'CORRUPT');
    await rejectsWith(store.removeRef(digest, 'queue-1'), 'CORRUPT');
    assert.deepEqual(await store.collectGarbage(), { removed: 0, bytes: 0 });
    assert.notEqual(await store.stat(digest), null);
    await store.close();
  }
  const truncated = await memStore({ image: withFile(image, file, new Uint8Array(10)) });
  await rejectsWith(truncated.refs(digest), 'CORRUPT', 'truncated');
  await truncated.close();
});

test('GC keeps an unreferenced payload whose header is damaged and reports it as CORRUPT after sweeping the rest', async () => {
  const fs = new MemoryFs({ trace: false });
  const store = await openPayloadStore(DIR, { fs, graceMs: 0 });
  const damaged = (await store.put(piecesOf(bytesOf(1, 100)))).digest;
  const fine = (await store.put(piecesOf(bytesOf(2, 100)))).digest;
  await store.close();
  const image = withFlippedBit(fs.currentImage(), blobPath(DIR, damaged), 20);
  const again = await memStore({ image, graceMs: 0 });
  const err = await rejectsWith(again.collectGarbage(), 'CORRUPT');
  assert.deepEqual((err as { details: { digests: string[]; removed: number } }).details.digests, [damaged]);
  assert.equal(await again.stat(fine), null);
  await rejectsWith(again.stat(damaged), 'CORRUPT');
  await again.close();
});

// ---------------------------------------------------------------------------------------------
// Opening

test('open: creates the layout, rejects a damaged marker, payloads without a marker, a missing clock or directory', async () => {
  const fs = new MemoryFs({ trace: false });
  const store = await openPayloadStore(DIR, { fs });
  assert.equal(store.created, true);
  const { digest } = await store.put(piecesOf(bytesOf(1, 10)));
  await store.close();
  const image = fs.currentImage();
  assert.deepEqual(Object.keys(image.files).sort(), [`${DIR}/CLOCK`, `${DIR}/FORMAT`, `${DIR}/LOCK`, blobPath(DIR, digest)].sort());
  const reopened = await memStore({ image });
  assert.equal(reopened.created, false);
  await reopened.close();
  const without = (name: string): DiskImage => {
    const files = { ...image.files };
    delete files[`${DIR}/${name}`];
    return { dirs: (image.dirs ?? []).filter((d) => d !== `${DIR}/${name}`), files };
  };
  await rejectsWith(memStore({ image: withFlippedBit(image, `${DIR}/FORMAT`, 3) }), 'CORRUPT', 'damaged marker');
  await rejectsWith(memStore({ image: without('FORMAT') }), 'CORRUPT', 'payloads without a marker');
  await rejectsWith(memStore({ image: without('CLOCK') }), 'CORRUPT', 'missing clock');
  await rejectsWith(memStore({ image: { dirs: (image.dirs ?? []).filter((d) => !d.startsWith(`${DIR}/refs`)), files: image.files } }), 'CORRUPT', 'no refs/');
  // A creation that stopped before its marker is finished on the next open.
  const partial = await memStore({ image: { dirs: [`${DIR}/blobs`, `${DIR}/tmp`], files: { [`${DIR}/tmp/put-1`]: new Uint8Array(5) } } });
  assert.equal(partial.created, true);
  await partial.close();
});

test('open removes temporary files of writers that died', async () => {
  const fs = new MemoryFs({ trace: false });
  await (await openPayloadStore(DIR, { fs })).close();
  const image = fs.currentImage();
  const littered: DiskImage = {
    dirs: image.dirs ?? [],
    files: { ...image.files, [`${DIR}/tmp/put-0011`]: new Uint8Array(300), [`${DIR}/tmp/ref-22`]: new Uint8Array(3), [`${DIR}/CLOCK.tmp`]: new Uint8Array(128) },
  };
  const m = new MemoryFs({ image: littered, trace: false });
  const store = await openPayloadStore(DIR, { fs: m });
  await store.close();
  assert.deepEqual(filesUnder(m.currentImage(), `${DIR}/tmp`), []);
  assert.equal(m.currentImage().files[`${DIR}/CLOCK.tmp`], undefined);
  assert.deepEqual(filesUnder(m.durableImage(), `${DIR}/tmp`), []);
});

// ---------------------------------------------------------------------------------------------
// Faults

test('a read that fails in the middle of a get ends the stream with IO_ERROR before any chunk of its batch; the chunks before it are exact; the next get serves everything', async () => {
  const chunkBytes = 64 * 1024;
  const size = 40 * chunkBytes + 11; // three batches of 16, 16 and 9 chunks
  const { image, digest, bytes } = await imageWith(size, chunkBytes);
  for (const verifyDigestOnGet of [false, true]) {
    // The blob's reads: its header at the open, then one per batch (a readv without the hash).
    for (const failing of [2, 3, 4]) {
      const m = new MemoryFs({ image, trace: false });
      const faulty = new FaultyFs(m);
      const store = await openPayloadStore(DIR, { fs: faulty, verifyDigestOnGet });
      const fault = faulty.fail({ kind: 'read', path: /\/blobs\/[0-9a-f]{2}\//, nth: failing, error: 'EIO' });
      const got = await collectUntilError(await store.get(digest));
      const what = `verifyDigestOnGet ${verifyDigestOnGet}, read ${failing} fails`;
      assert.equal(fault.hits, 1, what);
      assert.ok(isSeglogError(got.error, 'IO_ERROR'), `${what}: ${String(got.error)}`);
      // Every batch before the failed one is served whole (they were read and checked), none of it.
      assert.equal(got.bytes.length, (failing - 2) * 16 * chunkBytes, `${what}: bytes served`);
      assert.deepEqual(got.bytes, bytes.subarray(0, got.bytes.length), what);
      assert.deepEqual(await collect(await store.get(digest)), bytes, `${what}: the next get`);
      await store.close();
    }
  }
});

test('ENOSPC in the middle of a put: NO_SPACE, nothing visible, no temporary file (now or after the next open)', async () => {
  for (const mode of ['failed write', 'short write', 'unlink fails too']) {
    const m = new MemoryFs({ trace: false });
    const faulty = new FaultyFs(m);
    const store = await openPayloadStore(DIR, { fs: faulty, chunkBytes: 4096 });
    const kept = (await store.put(piecesOf(bytesOf(1, 5000)))).digest;
    faulty.fail({ kind: 'write', path: /\/tmp\/put-/, nth: 3, error: 'ENOSPC', ...(mode === 'short write' ? { shortWrite: 1000 } : {}) });
    if (mode === 'unlink fails too') faulty.fail({ kind: 'unlink', path: /\/tmp\/put-/, error: 'EIO' });
    const size = 5 * 1024 * 1024;
    const err = await rejectsWith(store.put(lazyBody(7, size, 100_000)), 'NO_SPACE', mode);
    assert.ok(err instanceof Error);
    assert.equal(await store.stat(lazyDigest(7, size)), null);
    const litter = filesUnder(m.currentImage(), `${DIR}/tmp`);
    assert.deepEqual(litter.length, mode === 'unlink fails too' ? 1 : 0, mode);
    // Not poisoned: the next put works.
    faulty.clearFaults();
    const next = await store.put(piecesOf(bytesOf(2, 100)));
    assert.notEqual(await store.stat(next.digest), null);
    await faulty.sever(); // the process dies
    const reopened = await openPayloadStore(DIR, { fs: m.newProcess() });
    assert.deepEqual(filesUnder(m.currentImage(), `${DIR}/tmp`), [], `${mode}: after reopen`);
    assert.equal(await reopened.stat(lazyDigest(7, size)), null);
    assert.notEqual(await reopened.stat(kept), null);
    await reopened.close();
  }
});

test('a failed fdatasync of the temporary file fails the put; a failed directory sync poisons the store', async () => {
  const m = new MemoryFs({ trace: false });
  const faulty = new FaultyFs(m);
  const store = await openPayloadStore(DIR, { fs: faulty });
  faulty.fail({ kind: 'datasync', path: /\/tmp\/put-/, error: 'EIO' });
  await rejectsWith(store.put(piecesOf(bytesOf(1, 100))), 'IO_ERROR');
  assert.deepEqual(filesUnder(m.currentImage(), `${DIR}/blobs`), []);
  const ok = await store.put(piecesOf(bytesOf(2, 100)));
  faulty.fail({ kind: 'syncDir', path: /\/blobs\/[0-9a-f]{2}$/, error: 'EIO', every: true });
  await rejectsWith(store.put(piecesOf(bytesOf(3, 100))), 'IO_ERROR');
  await rejectsWith(store.put(piecesOf(bytesOf(4, 100))), 'POISONED');
  await rejectsWith(store.addRef(ok.digest, 'q'), 'POISONED');
  await rejectsWith(store.collectGarbage(), 'POISONED');
  assert.deepEqual(await collect(await store.get(ok.digest)), bytesOf(2, 100)); // reads keep working
  await store.close();
  faulty.clearFaults();
  const reopened = await openPayloadStore(DIR, { fs: faulty });
  await reopened.addRef(ok.digest, 'q');
  await reopened.close();
});

test('a large put syncs its file while it streams; a failed early fdatasync fails the put, stores nothing, leaves no temporary file', async () => {
  const m = new MemoryFs({ trace: false });
  const faulty = new FaultyFs(m);
  const store = await openPayloadStore(DIR, { fs: faulty });
  const size = 2 * EARLY_SYNC_BYTES + 12345;
  const syncsBefore = faulty.calls.datasync;
  const ok = await store.put(lazyBody(3, size, 1 << 20));
  assert.equal(ok.digest, lazyDigest(3, size));
  // At least one early sync per EARLY_SYNC_BYTES written (one at a time), then the final one.
  assert.ok(faulty.calls.datasync - syncsBefore >= 2, `${faulty.calls.datasync - syncsBefore} fdatasyncs for ${size} bytes`);
  faulty.fail({ kind: 'datasync', path: /\/tmp\/put-/, nth: 1, error: 'EIO' });
  const writesBefore = faulty.calls.write;
  await rejectsWith(store.put(lazyBody(4, size, 1 << 20)), 'IO_ERROR', 'early fdatasync');
  // It failed at the first sync, early: not after every frame was written.
  assert.ok(faulty.calls.write - writesBefore < Math.ceil(size / (1 << 20)), 'the put stopped soon after the failed sync');
  assert.equal(await store.stat(lazyDigest(4, size)), null);
  assert.deepEqual(filesUnder(m.currentImage(), `${DIR}/tmp`), []);
  // Not poisoned: the file was abandoned, nothing else depended on it.
  faulty.clearFaults();
  const next = await store.put(lazyBody(5, size, 1 << 20));
  assert.deepEqual(await collect(await store.get(next.digest)).then((b) => digestOf(b)), lazyDigest(5, size));
  await store.close();
});

test('the hashing thread stopping inside a put or a get: the put fails with IO_ERROR and stores nothing, the get ends with IO_ERROR before its last chunk; the next ones work', async () => {
  const m = new MemoryFs({ trace: false });
  // A get hashes (on the thread, for a payload of several batches) only when asked to.
  const store = await openPayloadStore(DIR, { fs: m, verifyDigestOnGet: true });
  const size = 6 * 1024 * 1024 + 7;
  async function* stoppingBody(seed: number): AsyncGenerator<Uint8Array> {
    let at = 0;
    for await (const piece of lazyBody(seed, size, 1 << 20)) {
      if (at === 3 << 20) await stopHashThreadForTests();
      at += piece.length;
      yield piece;
    }
  }
  await rejectsWith(store.put(stoppingBody(6)), 'IO_ERROR', 'put');
  assert.equal(await store.stat(lazyDigest(6, size)), null);
  assert.deepEqual(filesUnder(m.currentImage(), `${DIR}/tmp`), []);
  assert.deepEqual(filesUnder(m.currentImage(), `${DIR}/blobs`), []);
  const info = await store.put(lazyBody(7, size, 1 << 20)); // a new thread
  assert.equal(info.digest, lazyDigest(7, size));
  const stream = (await store.get(info.digest))[Symbol.asyncIterator]();
  let served = 0;
  let error: unknown = null;
  try {
    for (;;) {
      const r = await stream.next();
      if (r.done === true) break;
      served += r.value.length;
      if (served === 1 << 20) await stopHashThreadForTests();
    }
  } catch (err) {
    error = err;
  }
  assert.ok(isSeglogError(error, 'IO_ERROR'), String(error));
  assert.ok(served < size, 'the last chunk is never served without its digest check');
  assert.equal(digestOf(await collect(await store.get(info.digest))), info.digest);
  await store.close();
});

test('payloads hashed at once use a second hashing thread where it may run, one at a time never does; each keeps its own digest', async () => {
  await stopHashThreadForTests();
  const bound = setMaxHashThreadsForTests(2); // as on a machine of three cores or more
  try {
    const m = new MemoryFs({ trace: false });
    const store = await openPayloadStore(DIR, { fs: m });
    const size = 3 * 1024 * 1024 + 5;
    const alone = await store.put(lazyBody(11, size, 1 << 20));
    assert.equal(alone.digest, lazyDigest(11, size));
    assert.equal(hashThreadsForTests(), 1, 'one payload at a time: one thread');
    // Two bodies that each stop past their first batch (their hash has started) until both are there.
    const meetings = (): ((seed: number) => AsyncGenerator<Uint8Array>) => {
      let arrived = 0;
      let release!: () => void;
      const both = new Promise<void>((resolve) => (release = resolve));
      return async function* meeting(seed: number): AsyncGenerator<Uint8Array> {
        let at = 0;
        for await (const piece of lazyBody(seed, size, 1 << 20)) {
          if (at === 2 << 20) {
            if (++arrived === 2) release();
            await both;
          }
          at += piece.length;
          yield piece;
        }
      };
    };
    const meeting = meetings();
    const [a, b] = await Promise.all([store.put(meeting(12)), store.put(meeting(13))]);
    assert.equal(a.digest, lazyDigest(12, size));
    assert.equal(b.digest, lazyDigest(13, size));
    assert.equal(hashThreadsForTests(), 2, 'two payloads at once: two threads');
    // Gets of both at once, and a put beside them: every one checks its own digest.
    const [ga, gb, c] = await Promise.all([
      store.get(a.digest).then(collect),
      store.get(b.digest).then(collect),
      store.put(lazyBody(14, size, 1 << 20)),
    ]);
    assert.equal(digestOf(ga), a.digest);
    assert.equal(digestOf(gb), b.digest);
    assert.equal(c.digest, lazyDigest(14, size));
    assert.equal(hashThreadsForTests(), 2, 'never more than the bound');
    await store.close();
    // Under a bound of one, payloads at once share the one thread.
    await stopHashThreadForTests();
    setMaxHashThreadsForTests(1);
    const again = await openPayloadStore(DIR, { fs: m });
    const meetingAgain = meetings();
    const [d, e] = await Promise.all([again.put(meetingAgain(15)), again.put(meetingAgain(16))]);
    assert.equal(d.digest, lazyDigest(15, size));
    assert.equal(e.digest, lazyDigest(16, size));
    assert.equal(hashThreadsForTests(), 1);
    await again.close();
  } finally {
    setMaxHashThreadsForTests(bound);
  }
});

test('GC removes the temporary files of dead writers but not those of running puts', async () => {
  const m = new MemoryFs({ trace: false });
  const faulty = new FaultyFs(m);
  const store = await openPayloadStore(DIR, { fs: faulty, graceMs: 0 });
  const pause = faulty.pause('datasync', /\/tmp\/put-/);
  const running = store.put(piecesOf(bytesOf(1, 1000)));
  await pause.reached;
  const dead = await m.open(`${DIR}/tmp/put-dead`, 'create');
  await dead.close();
  assert.deepEqual(await store.collectGarbage(), { removed: 0, bytes: 0 });
  const left = filesUnder(m.currentImage(), `${DIR}/tmp`);
  assert.equal(left.length, 1);
  assert.ok(!left.includes(`${DIR}/tmp/put-dead`));
  pause.release();
  const info = await running;
  assert.deepEqual(await collect(await store.get(info.digest)), bytesOf(1, 1000));
  await store.close();
});

// ---------------------------------------------------------------------------------------------
// Memory

test('a 256 MiB payload goes in and out with resident memory growing by less than 64 MiB', async (t) => {
  // Measured in a fresh process: in this one, memory freed by earlier tests could absorb growth.
  // The payload is four times the bound, so a store that held it (or any fixed share of it) fails.
  // The hashing thread's start (once per process, before the baseline) is bounded on its own.
  await withTempDir(async (dir) => {
    const size = 256 * 1024 * 1024;
    const program = fileURLToPath(new URL('./support/payloads-memory.js', import.meta.url));
    const { stdout } = await execFileAsync(process.execPath, [program, dir, String(size)], { maxBuffer: 1 << 20 });
    const result = JSON.parse(stdout) as { digestOk: boolean; threadGrowth: number; putGrowth: number; growth: number };
    const mib = (n: number): string => (n / 1048576).toFixed(1);
    t.diagnostic(
      `rss growth: the hashing thread's start ${mib(result.threadGrowth)} MiB; over the baseline during put ` +
        `${mib(result.putGrowth)} MiB, put and get ${mib(result.growth)} MiB`,
    );
    assert.ok(result.digestOk, 'the payload read back matches its digest and size');
    assert.ok(result.growth < 64 * 1024 * 1024, `rss grew by ${mib(result.growth)} MiB`);
    assert.ok(result.threadGrowth < 48 * 1024 * 1024, `the hashing thread's start took ${mib(result.threadGrowth)} MiB`);
  });
});

test('verify reports every damaged blob and refcount file, and holders without bytes, without changing anything', async () => {
  const fs = new MemoryFs({ trace: false });
  const store = await openPayloadStore(DIR, { fs, chunkBytes: 64 });
  const good = await store.put(piecesOf(bytesOf(1, 300)));
  const chunkDamaged = await store.put(piecesOf(bytesOf(2, 300)));
  const refsDamaged = await store.put(piecesOf(bytesOf(3, 30)));
  const orphan = await store.put(piecesOf(bytesOf(4, 40)));
  await store.addRef(good.digest, 'q');
  await store.addRef(refsDamaged.digest, 'q');
  await store.addRef(orphan.digest, 'q');
  await store.close();
  let image = withFlippedBit(fs.currentImage(), blobPath(DIR, chunkDamaged.digest), 80 + 68 * 2 + 5);
  image = withFlippedBit(image, refsPath(DIR, refsDamaged.digest), 50);
  const files = { ...image.files };
  delete files[blobPath(DIR, orphan.digest)];
  image = { dirs: image.dirs ?? [], files };
  const again = await memStore({ image });
  const shallow = await again.verify();
  assert.equal(shallow.payloads, 3);
  assert.equal(shallow.refFiles, 3);
  assert.deepEqual(
    shallow.problems.map((p) => [p.digest, p.code]).sort(),
    [
      [refsDamaged.digest, 'CORRUPT'],
      [orphan.digest, 'CORRUPT'],
    ].sort(),
  );
  const deep = await again.verify({ deep: true });
  assert.equal(deep.payloads, 2);
  assert.equal(deep.bytes, 300 + 30);
  assert.deepEqual(deep.problems.map((p) => p.digest).sort(), [chunkDamaged.digest, refsDamaged.digest, orphan.digest].sort());
  await again.close();
});

test('addRef whose refcount marker cannot be made fails and leaves no holder; a retry makes both', async () => {
  const m = new MemoryFs({ trace: false });
  const faulty = new FaultyFs(m);
  const store = await openPayloadStore(DIR, { fs: faulty });
  const info = await store.put(piecesOf(bytesOf(7, 100)));
  faulty.fail({ kind: 'open', path: /\.held$/, error: 'ENOSPC' });
  await rejectsWith(store.addRef(info.digest, 'q'), 'NO_SPACE');
  faulty.clearFaults();
  assert.deepEqual(await store.refs(info.digest), [], 'the failed call added no holder');
  assert.deepEqual(filesUnder(m.currentImage(), `${DIR}/refs`), [], 'neither a refcount file nor a marker is left');
  await store.addRef(info.digest, 'q');
  assert.deepEqual(await store.refs(info.digest), ['q']);
  assert.equal(filesUnder(m.currentImage(), `${DIR}/refs`).filter((f) => f.endsWith('.held')).length, 1, 'the retry made the marker');
  await store.close();
});
