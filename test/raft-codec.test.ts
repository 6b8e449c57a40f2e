// Raft codec, orders, validation and snapshot stream format (lib/raft/types.ts, codec.ts,
// snapshot-format.ts): round trips, and damaged bytes that must give CORRUPT, never a wrong value.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { isSeglogError } from '../lib/errors.js';
import {
  decodeEntry,
  decodeEntryLogId,
  decodeLogId,
  decodeOptionalLogId,
  decodeStoredMembership,
  decodeVote,
  encodeEntry,
  encodeLogId,
  encodeOptionalLogId,
  encodeStoredMembership,
  encodeVote,
} from '../lib/raft/codec.js';
import { MAX_SNAPSHOT_FRAME_BYTES, readSnapshotStream, writeSnapshotStream, type SnapshotHeader } from '../lib/raft/snapshot-format.js';
import {
  compareLeaderId,
  compareLogId,
  compareVote,
  validateEntry,
  validateLogId,
  validateMembership,
  validateSnapshotMeta,
  validateStoredMembership,
  validateVote,
  type LogId,
} from '../lib/raft/types.js';
import { entryArb, leaderIdArb, logIdArb, optionalLogIdArb, storedMembershipArb, voteArb } from './support/raft-arbitraries.js';

interface Codec<T> {
  name: string;
  arb: fc.Arbitrary<T>;
  encode(v: T): Uint8Array;
  decode(b: Uint8Array): T;
  validate(v: T): void;
}

const codecs: Codec<any>[] = [
  { name: 'entry', arb: entryArb, encode: encodeEntry, decode: decodeEntry, validate: (v) => validateEntry(v) },
  { name: 'vote', arb: voteArb, encode: encodeVote, decode: decodeVote, validate: (v) => validateVote(v) },
  { name: 'log id', arb: logIdArb, encode: encodeLogId, decode: decodeLogId, validate: (v) => validateLogId(v) },
  { name: 'optional log id', arb: optionalLogIdArb, encode: encodeOptionalLogId, decode: decodeOptionalLogId, validate: () => {} },
  { name: 'stored membership', arb: storedMembershipArb, encode: encodeStoredMembership, decode: decodeStoredMembership, validate: (v) => validateStoredMembership(v) },
];

function isCorrupt(err: unknown): boolean {
  return isSeglogError(err, 'CORRUPT');
}

/** Decodes `bytes`: either CORRUPT, or a valid value that encodes back to exactly `bytes`. */
function decodeOrCorrupt<T>(c: Codec<T>, bytes: Uint8Array): 'corrupt' | 'same' {
  let v: T;
  try {
    v = c.decode(bytes);
  } catch (err) {
    assert.ok(isCorrupt(err), `${c.name}: decode threw ${String(err)}, not CORRUPT`);
    return 'corrupt';
  }
  c.validate(v);
  assert.deepEqual(Buffer.from(c.encode(v)), Buffer.from(bytes), `${c.name}: a decoded value re-encodes to the bytes it came from`);
  return 'same';
}

for (const c of codecs) {
  test(`codec ${c.name}: round trip, deterministic`, () => {
    fc.assert(
      fc.property(c.arb, (v) => {
        c.validate(v);
        const bytes = c.encode(v);
        assert.deepEqual(c.decode(bytes), v);
        assert.deepEqual(c.encode(c.decode(bytes)), bytes);
        // From a Buffer too (what a file read answers), and the answer shares no memory with it.
        const buf = Buffer.from(bytes);
        const again = c.decode(buf);
        assert.deepEqual(again, v);
        buf.fill(0xee);
        assert.deepEqual(again, v);
      }),
      { numRuns: 300 },
    );
  });

  test(`codec ${c.name}: every cut and every extension is CORRUPT`, () => {
    fc.assert(
      fc.property(c.arb, fc.uint8Array({ minLength: 1, maxLength: 4 }), (v, extra) => {
        const bytes = c.encode(v);
        for (let n = 0; n < bytes.length; n++) {
          assert.throws(() => c.decode(bytes.subarray(0, n)), isCorrupt, `${c.name}: cut at ${n} of ${bytes.length}`);
        }
        assert.throws(() => c.decode(new Uint8Array([...bytes, ...extra])), isCorrupt, `${c.name}: extended`);
      }),
      { numRuns: 100 },
    );
  });

  test(`codec ${c.name}: altered bytes decode to CORRUPT or to their own unique value`, () => {
    fc.assert(
      fc.property(c.arb, fc.nat(), fc.integer({ min: 1, max: 255 }), (v, at, xor) => {
        const bytes = c.encode(v);
        const altered = Uint8Array.from(bytes);
        const i = at % altered.length;
        altered[i] = (altered[i] as number) ^ xor;
        decodeOrCorrupt(c, altered);
      }),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        decodeOrCorrupt(c, bytes);
      }),
      { numRuns: 500 },
    );
  });
}

test('codec: lengths and counts are checked before they allocate', () => {
  const varint = (n: number): number[] => {
    const out: number[] = [];
    while (n >= 0x80) {
      out.push((n % 0x80) | 0x80);
      n = Math.floor(n / 0x80);
    }
    out.push(n);
    return out;
  };
  const id = [...varint(1), ...varint(0), ...varint(5)];
  const huge = Number.MAX_SAFE_INTEGER;
  // A normal entry claiming 2^53 - 1 digests, or data of 2^53 - 1 bytes; a membership claiming
  // that many voter sets, voters or JSON bytes.
  const cases = [
    [0x02, ...id, ...varint(huge)],
    [0x02, ...id, 0, ...varint(huge), 1, 2, 3],
    [0x03, ...id, ...varint(huge)],
    [0x03, ...id, 1, ...varint(huge), 1],
    [0x03, ...id, 0, ...varint(huge), 0x7b, 0x7d],
  ];
  for (const bytes of cases) assert.throws(() => decodeEntry(new Uint8Array(bytes)), isCorrupt);
  // Varints: not minimal, longer than 8 bytes, beyond 2^53 - 1.
  assert.throws(() => decodeLogId(new Uint8Array([1, 0x81, 0x00, 0, 0])), isCorrupt);
  assert.throws(() => decodeLogId(new Uint8Array([1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0, 0])), isCorrupt);
  assert.throws(() => decodeLogId(new Uint8Array([1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0])), isCorrupt);
  assert.deepEqual(decodeLogId(new Uint8Array([1, ...varint(huge), 0, 0])), { leaderId: { term: huge, nodeId: 0 }, index: 0 });
  // Unknown versions and tags; flags other than 0/1; JSON that is not the encoder's.
  assert.throws(() => decodeVote(new Uint8Array([2, 1, 0, 0])), isCorrupt);
  assert.throws(() => decodeVote(new Uint8Array([1, 1, 0, 2])), isCorrupt);
  assert.throws(() => decodeOptionalLogId(new Uint8Array([1, 2])), isCorrupt);
  assert.throws(() => decodeEntry(new Uint8Array([0x04, ...id])), isCorrupt);
  assert.throws(() => decodeEntryLogId(new Uint8Array([0x00, ...id])), isCorrupt);
  const spaced = Buffer.from('{ }');
  assert.throws(() => decodeEntry(new Uint8Array([0x03, ...id, 0, spaced.length, ...spaced])), isCorrupt);
  const array = Buffer.from('[]');
  assert.throws(() => decodeEntry(new Uint8Array([0x03, ...id, 0, array.length, ...array])), isCorrupt);
  assert.deepEqual(decodeEntry(new Uint8Array([0x03, ...id, 0, 2, 0x7b, 0x7d])).payload, { type: 'membership', membership: { configs: [], nodes: {} } });
});

test('codec: decodeEntryLogId reads only the id', () => {
  fc.assert(
    fc.property(entryArb, (e) => {
      assert.deepEqual(decodeEntryLogId(encodeEntry(e)), e.logId);
    }),
  );
});

test('orders: leader ids by term then node; log ids by leader then index, null lowest; votes', () => {
  const l = (term: number, index: number, nodeId = 0): LogId => ({ leaderId: { term, nodeId }, index });
  assert.equal(compareLogId(null, null), 0);
  assert.equal(compareLogId(null, l(0, 0)), -1);
  assert.equal(compareLogId(l(0, 0), null), 1);
  assert.equal(compareLogId(l(1, 9), l(2, 1)), -1, 'leader first');
  assert.equal(compareLogId(l(2, 1, 1), l(2, 1, 0)), 1, 'node id breaks a term tie');
  assert.equal(compareLogId(l(2, 1), l(2, 3)), -1, 'then index');
  assert.equal(compareVote({ leaderId: { term: 1, nodeId: 2 }, committed: true }, { leaderId: { term: 1, nodeId: 2 }, committed: false }), 1);
  assert.equal(compareVote({ leaderId: { term: 1, nodeId: 2 }, committed: true }, { leaderId: { term: 2, nodeId: 0 }, committed: false }), -1);
  fc.assert(
    fc.property(leaderIdArb, leaderIdArb, leaderIdArb, (a, b, c) => {
      assert.equal(compareLeaderId(a, b), -compareLeaderId(b, a) || 0);
      if (compareLeaderId(a, b) <= 0 && compareLeaderId(b, c) <= 0) assert.ok(compareLeaderId(a, c) <= 0);
      assert.equal(compareLeaderId(a, b) === 0, a.term === b.term && a.nodeId === b.nodeId);
    }),
  );
  fc.assert(
    fc.property(optionalLogIdArb, optionalLogIdArb, (a, b) => {
      assert.equal(compareLogId(a, b), -compareLogId(b, a) || 0);
    }),
  );
});

test('validation: numbers must be safe non-negative integers; everything else INVALID', () => {
  const isInvalid = (err: unknown): boolean => isSeglogError(err, 'INVALID');
  const bad: unknown[] = [-1, 0.5, Number.NaN, Infinity, -Infinity, 2 ** 53, -0.1, '1', 1n, null, undefined, {}];
  for (const n of bad) {
    assert.throws(() => validateLogId({ leaderId: { term: 1, nodeId: 1 }, index: n }), isInvalid, String(n));
    assert.throws(() => validateLogId({ leaderId: { term: n, nodeId: 1 }, index: 1 }), isInvalid, String(n));
    assert.throws(() => validateVote({ leaderId: { term: 1, nodeId: n }, committed: false }), isInvalid, String(n));
    assert.throws(() => validateMembership({ configs: [[n]], nodes: {} }), isInvalid, String(n));
  }
  validateLogId({ leaderId: { term: 0, nodeId: 0 }, index: Number.MAX_SAFE_INTEGER });
  assert.throws(() => validateVote({ leaderId: { term: 1, nodeId: 1 }, committed: 1 }), isInvalid);
  assert.throws(() => validateLogId(null), isInvalid);
  assert.throws(() => validateStoredMembership({ membership: { configs: [], nodes: {} } }), isInvalid, 'logId missing (null is required)');
  // Membership node data must be JSON.
  for (const nodes of [{ a: undefined }, { a: () => 1 }, { a: Number.NaN }, { a: -0 }, { a: new Date(0) }, { a: '\ud800' }, { '\udc00': 1 }, [], null]) {
    assert.throws(() => validateMembership({ configs: [], nodes }), isInvalid, JSON.stringify(nodes));
  }
  let deep: unknown = 1;
  for (let i = 0; i < 70; i++) deep = [deep];
  assert.throws(() => validateMembership({ configs: [], nodes: { deep } }), isInvalid, 'too deep');
  // Entries.
  const id = { leaderId: { term: 1, nodeId: 1 }, index: 1 };
  for (const payload of [
    { type: 'normal', data: 'x' },
    { type: 'normal', data: new Uint8Array(1), payloads: ['sha256:' + 'A'.repeat(64)] },
    { type: 'normal', data: new Uint8Array(1), payloads: ['sha256:' + 'a'.repeat(63)] },
    { type: 'normal', data: new Uint8Array(1), payloads: 'sha256:' },
    { type: 'other' },
    null,
  ]) {
    assert.throws(() => validateEntry({ logId: id, payload }), isInvalid, JSON.stringify(payload));
  }
  validateEntry({ logId: id, payload: { type: 'normal', data: Buffer.from('x'), payloads: ['sha256:' + 'ab'.repeat(32)] } });
  // Snapshot ids.
  const meta = { lastLogId: null, lastMembership: { logId: null, membership: { configs: [], nodes: {} } }, snapshotId: 'x' };
  validateSnapshotMeta(meta);
  assert.throws(() => validateSnapshotMeta({ ...meta, snapshotId: 'x'.repeat(1025) }), isInvalid);
  assert.throws(() => validateSnapshotMeta({ ...meta, snapshotId: 7 }), isInvalid);
});

// --- snapshot stream format ---------------------------------------------------------------------

async function* chunksOf(bytes: Uint8Array, cuts: number[]): AsyncGenerator<Uint8Array> {
  let at = 0;
  for (const c of cuts) {
    if (at >= bytes.length) break;
    yield bytes.subarray(at, at + c);
    at += c;
  }
  if (at < bytes.length) yield bytes.subarray(at);
}

async function collect(it: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of it) parts.push(Uint8Array.from(c));
  return new Uint8Array(Buffer.concat(parts));
}

const headerArb: fc.Arbitrary<SnapshotHeader> = fc.record(
  {
    plugin: fc.string({ unit: 'grapheme', maxLength: 20 }),
    meta: fc.record({ lastLogId: optionalLogIdArb, lastMembership: storedMembershipArb, snapshotId: fc.string({ maxLength: 30 }) }, { noNullPrototype: true }),
  },
  { noNullPrototype: true },
);

test('snapshot stream: round trip through any chunking', async () => {
  await fc.assert(
    fc.asyncProperty(
      headerArb,
      fc.array(fc.uint8Array({ maxLength: 200 }), { maxLength: 6 }),
      fc.array(fc.integer({ min: 1, max: 50 }), { maxLength: 40 }),
      async (header, body, cuts) => {
        const bytes = await collect(writeSnapshotStream(header, chunksOf(new Uint8Array(Buffer.concat(body)), [])));
        const r = await readSnapshotStream(chunksOf(bytes, cuts));
        assert.deepEqual(r.header, header);
        assert.deepEqual(Buffer.from(await collect(r.body)), Buffer.concat(body));
        assert.deepEqual(await r.finish(), { leftover: 0 });
      },
    ),
    { numRuns: 150 },
  );
});

test('snapshot stream: any altered, cut or extended byte is CORRUPT', async () => {
  const header: SnapshotHeader = {
    plugin: 'test/1',
    meta: { lastLogId: { leaderId: { term: 3, nodeId: 1 }, index: 9 }, lastMembership: { logId: null, membership: { configs: [[1, 2]], nodes: { '1': 'a' } } }, snapshotId: 's' },
  };
  const body = Uint8Array.from({ length: 300 }, (_, i) => i % 251);
  const good = await collect(writeSnapshotStream(header, chunksOf(body, [100, 100])));
  const drain = async (bytes: Uint8Array): Promise<void> => {
    const r = await readSnapshotStream(chunksOf(bytes, [17]));
    await collect(r.body);
    await r.finish();
  };
  await drain(good);
  for (let i = 0; i < good.length; i++) {
    const altered = Uint8Array.from(good);
    altered[i] = (altered[i] as number) ^ 0x41;
    await assert.rejects(drain(altered), isCorrupt, `byte ${i} altered`);
  }
  for (let n = 0; n < good.length; n++) await assert.rejects(drain(good.subarray(0, n)), isCorrupt, `cut at ${n}`);
  await assert.rejects(drain(new Uint8Array([...good, 0])), isCorrupt, 'extended');
  // finish() drains what the consumer left and reports it.
  const r = await readSnapshotStream(chunksOf(good, []));
  assert.deepEqual(await r.finish(), { leftover: body.length });
});

test('snapshot stream: a frame length beyond the bound is refused before it is read', async () => {
  const header: SnapshotHeader = { plugin: 'p', meta: { lastLogId: null, lastMembership: { logId: null, membership: { configs: [], nodes: {} } }, snapshotId: '' } };
  const good = await collect(writeSnapshotStream(header, chunksOf(new Uint8Array(0), [])));
  // Replace the end marker (the 4 bytes before the trailer) with a huge frame length.
  const bad = Uint8Array.from(good);
  new DataView(bad.buffer).setUint32(bad.length - 8, MAX_SNAPSHOT_FRAME_BYTES + 1, true);
  const r = await readSnapshotStream(chunksOf(bad, []));
  await assert.rejects(collect(r.body), (err: unknown) => isCorrupt(err) && /exceeds/.test((err as Error).message));
  // A huge header length likewise.
  const badHeader = Uint8Array.from(good);
  new DataView(badHeader.buffer).setUint32(8, 0xffffffff, true);
  await assert.rejects(readSnapshotStream(chunksOf(badHeader, [])), isCorrupt);
});
