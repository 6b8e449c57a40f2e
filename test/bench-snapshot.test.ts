// Tests of the Raft snapshot memory benchmark (`seglog bench stores`, bench/stores/snapshot-bench.ts)
// that assert no timing and no memory figure: the generated state's arithmetic (sizes, plan,
// batches), the value generator and its check, that the bench plugin's snapshot bytes and chunks
// are exactly the shipped KV plugin's for the same map (so the benchmark streams what a real KV
// state would), that its restore checks every byte, the growth arithmetic, and one small run of
// the child measurement end to end.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { SeglogError } from '../lib/errors.js';
import { KvPlugin, type KvReply } from '../lib/raft/kv.js';
import type { LogId } from '../lib/raft/types.js';
import { runChild } from '../bench/stores/child.js';
import {
  GeneratedKvPlugin,
  isSnapshotValue,
  snapshotAddCommand,
  snapshotKey,
  snapshotKeyIndex,
  snapshotRssGrowth,
  snapshotSetCommand,
  snapshotStateBatches,
  snapshotStatePlan,
  snapshotValue,
  snapshotValueBytes,
  SNAPSHOT_MAX_VALUE_BYTES,
  SNAPSHOT_MIN_VALUE_BYTES,
  type SnapshotRssResult,
} from '../bench/stores/snapshot-bench.js';

const MIB = 1024 * 1024;
const at = (index: number): LogId => ({ leaderId: { term: 1, nodeId: 1 }, index });

async function collect(stream: AsyncIterable<Uint8Array>): Promise<Uint8Array[]> {
  const out: Uint8Array[] = [];
  for await (const c of stream) out.push(c);
  return out;
}

async function* chunked(bytes: Uint8Array, size: number): AsyncIterable<Uint8Array> {
  for (let i = 0; i < bytes.length; i += size) yield bytes.slice(i, i + size);
}

test('value sizes stay in [64 KiB, 1 MiB]; keys map back to their index; anything else is no key', () => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 99_999_999 }), (i) => {
      const n = snapshotValueBytes(i);
      assert.ok(n >= SNAPSHOT_MIN_VALUE_BYTES && n <= SNAPSHOT_MAX_VALUE_BYTES);
      assert.equal(snapshotValueBytes(i), n, 'a size is a function of its index');
      assert.equal(snapshotKeyIndex(snapshotKey(i)), i);
    }),
  );
  for (const k of ['k1', 'k000000001', 'x00000001', 'k0000000a', '']) assert.equal(snapshotKeyIndex(k), -1, k);
});

test('snapshotStatePlan: the fewest keys whose values reach the target, and their exact total', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 64 * MIB }), (target) => {
      const { keys, valueBytes } = snapshotStatePlan(target);
      let sum = 0;
      for (let i = 0; i < keys; i++) sum += snapshotValueBytes(i);
      assert.equal(valueBytes, sum);
      assert.ok(valueBytes >= target, 'reaches the target');
      assert.ok(valueBytes - snapshotValueBytes(keys - 1) < target, 'one key fewer would not');
      assert.ok(valueBytes < target + SNAPSHOT_MAX_VALUE_BYTES);
    }),
    { numRuns: 50 },
  );
  const gib = snapshotStatePlan(1024 * MIB);
  // About 544 KiB per value on average: close to 1,928 keys for 1 GiB.
  assert.ok(gib.keys > 1700 && gib.keys < 2200, `${gib.keys} keys`);
});

test('snapshotStateBatches: every key added exactly once, entries at consecutive indices from 1, batches bounded', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 3000 }), fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 20 }), (keys, perEntry, perBatch) => {
      const plugin = new GeneratedKvPlugin();
      let index = 1;
      for (const batch of snapshotStateBatches(keys, perEntry, perBatch)) {
        assert.ok(batch.length >= 1 && batch.length <= perBatch);
        for (const e of batch) {
          assert.equal(e.logId.index, index++);
          assert.equal(e.payload.type, 'normal');
          if (e.payload.type !== 'normal') continue;
          const before = plugin.size;
          assert.deepEqual(plugin.apply({ logId: e.logId, data: e.payload.data, payloads: [] }), { ok: true, previous: null });
          assert.ok(plugin.size - before <= perEntry && plugin.size > before, 'each entry adds new keys only');
        }
      }
      assert.equal(plugin.size, keys);
      assert.equal(index - 1, Math.ceil(keys / perEntry));
    }),
    { numRuns: 100 },
  );
});

test('a generated value checks as itself and fails with any byte changed or a byte short', () => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 1_000_000 }), fc.nat(), fc.integer({ min: 1, max: 255 }), (i, pos, delta) => {
      const v = snapshotValue(i);
      assert.equal(v.length, snapshotValueBytes(i));
      assert.ok(isSnapshotValue(i, v));
      assert.ok(!isSnapshotValue(i + 1, v), 'another key, another value');
      assert.ok(!isSnapshotValue(i, v.subarray(0, v.length - 1)));
      const p = pos % v.length;
      v[p] = ((v[p] as number) + delta) & 0xff;
      assert.ok(!isSnapshotValue(i, v), `byte ${p} changed`);
    }),
    { numRuns: 60 },
  );
});

test('the bench plugin writes exactly the KV plugin\'s snapshot bytes and chunks for the same map, built either way', async () => {
  const indices = [0, 1, 2, 5, 9, 12];
  const kv = new KvPlugin();
  const bySet = new GeneratedKvPlugin();
  const byAdd = new GeneratedKvPlugin();
  indices.forEach((i, n) => {
    const data = snapshotSetCommand(i);
    assert.deepEqual(kv.apply({ logId: at(n + 1), data, payloads: [] }), { ok: true, previous: null });
    assert.deepEqual(bySet.apply({ logId: at(n + 1), data, payloads: [] }), { ok: true, previous: null });
  });
  // The compact command for 0..2, 5, 9, 12 (keys 3, 4, 6.. are not in the map).
  byAdd.apply({ logId: at(1), data: snapshotAddCommand(0, 3), payloads: [] });
  for (const [n, i] of [5, 9, 12].entries()) byAdd.apply({ logId: at(n + 2), data: snapshotAddCommand(i, 1), payloads: [] });
  const want = await collect(kv.capture());
  for (const plugin of [bySet, byAdd]) {
    const got = await collect(plugin.capture());
    assert.equal(got.length, want.length, 'as many chunks');
    got.forEach((c, k) => assert.ok(Buffer.from(c).equals(Buffer.from(want[k] as Uint8Array)), `chunk ${k} identical`));
  }
  // And back: each restores the other's stream, however it is cut.
  const whole = Buffer.concat(want);
  const restored = new GeneratedKvPlugin();
  await restored.restore(chunked(whole, 100_003));
  assert.equal(restored.size, indices.length);
  assert.equal(restored.restoredValueBytes, indices.reduce((t, i) => t + snapshotValueBytes(i), 0));
  const kvBack = new KvPlugin();
  await kvBack.restore(bySet.capture());
  assert.deepEqual(kvBack.keys(), indices.map(snapshotKey));
  for (const i of indices) assert.ok(isSnapshotValue(i, kvBack.get(snapshotKey(i)) as Uint8Array));
});

test('the bench plugin refuses what the generator did not make, and its restore checks every byte', async () => {
  const p = new GeneratedKvPlugin();
  const bad = snapshotSetCommand(3);
  bad[bad.length - 1] = ((bad[bad.length - 1] as number) + 1) & 0xff;
  assert.equal((p.apply({ logId: at(1), data: bad, payloads: [] }) as KvReply).ok, false);
  assert.equal((p.apply({ logId: at(2), data: new Uint8Array([0x01, 0x01, 0x61, 0x00]), payloads: [] }) as KvReply).ok, false, 'key "a" is no generated key');
  assert.equal((p.apply({ logId: at(3), data: new Uint8Array([0x7f]), payloads: [] }) as KvReply).ok, false);
  assert.equal(p.size, 0, 'nothing changed');
  p.apply({ logId: at(4), data: snapshotAddCommand(0, 2), payloads: [] });
  const whole = Buffer.concat(await collect(p.capture()));
  for (const pos of [0, 5, 20, whole.length - 1]) {
    const damaged = Buffer.from(whole);
    damaged[pos] = ((damaged[pos] as number) ^ 0x40) & 0xff;
    await assert.rejects(new GeneratedKvPlugin().restore(chunked(damaged, 65_536)), (err: unknown) => err instanceof SeglogError && err.code === 'CORRUPT', `byte ${pos}`);
  }
  await assert.rejects(new GeneratedKvPlugin().restore(chunked(whole.subarray(0, whole.length - 1), 65_536)), (err: unknown) => err instanceof SeglogError);
});

test('snapshotRssGrowth: the highest of the three phase peaks over the baseline', () => {
  const base = { baseRssBytes: 100, peakBuildRssBytes: 130, peakInstallRssBytes: 150, peakReadRssBytes: 120 };
  assert.equal(snapshotRssGrowth(base), 50);
  assert.equal(snapshotRssGrowth({ ...base, peakReadRssBytes: 190 }), 90);
  assert.equal(snapshotRssGrowth({ ...base, peakBuildRssBytes: 400 }), 300);
  assert.equal(snapshotRssGrowth({ baseRssBytes: 100, peakBuildRssBytes: 90, peakInstallRssBytes: 95, peakReadRssBytes: 80 }), -5, 'memory given back reads as a negative growth, not zero');
});

test('the child measurement runs end to end on a small state (a fresh process; no figure asserted)', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'seglog-bench-snapshot-'));
  try {
    const [r, ...more] = await runChild<SnapshotRssResult>({ task: 'snapshot-rss', dir: path.join(dir, 'run'), bytes: 3 * MIB, repeat: 1 });
    assert.equal(more.length, 0);
    assert.ok(r !== undefined);
    const plan = snapshotStatePlan(3 * MIB);
    assert.equal(r.keys, plan.keys);
    assert.equal(r.stateBytes, plan.valueBytes);
    assert.ok(r.snapshotBytes > r.stateBytes, 'the stream carries the values and their framing');
    for (const x of [r.baseRssBytes, r.peakBuildRssBytes, r.peakInstallRssBytes, r.peakReadRssBytes, r.buildMs, r.installMs, r.readMs]) assert.ok(Number.isFinite(x) && x >= 0);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
