// The key-value plugin (lib/raft/kv.ts): commands, replies against a model, snapshot capture and
// restore; and the plugin run by the reference state machine (lib/raft/memory.ts).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { isSeglogError } from '../lib/errors.js';
import { decodeKvCommand, encodeKvCommand, KvPlugin, kvPlugin, MAX_KV_KEY_BYTES, type KvCommand, type KvReply } from '../lib/raft/kv.js';
import { MemoryRaftDisk, openMemoryRaftGroup } from '../lib/raft/memory.js';
import type { PluginEntry, StateMachinePlugin } from '../lib/raft/plugin.js';
import type { Entry } from '../lib/raft/types.js';

const keyArb = fc.oneof(fc.constantFrom('a', 'b', 'c', ''), fc.string({ unit: 'grapheme', maxLength: 8 }));
const commandArb: fc.Arbitrary<KvCommand> = fc.oneof(
  fc.record({ op: fc.constant('set' as const), key: keyArb, value: fc.uint8Array({ maxLength: 40 }) }, { noNullPrototype: true }),
  fc.record({ op: fc.constant('delete' as const), key: keyArb }, { noNullPrototype: true }),
);

function entry(index: number, data: Uint8Array): PluginEntry {
  return { logId: { leaderId: { term: 1, nodeId: 0 }, index }, data, payloads: [] };
}

async function collect(it: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const c of it) parts.push(Uint8Array.from(c));
  return new Uint8Array(Buffer.concat(parts));
}

async function* cut(bytes: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

const isCorrupt = (err: unknown): boolean => isSeglogError(err, 'CORRUPT');

test('kv: commands round trip; bad keys refused at encode', () => {
  fc.assert(
    fc.property(commandArb, (cmd) => {
      assert.deepEqual(decodeKvCommand(encodeKvCommand(cmd)), cmd);
    }),
  );
  const isInvalid = (err: unknown): boolean => isSeglogError(err, 'INVALID');
  assert.throws(() => encodeKvCommand({ op: 'set', key: 'x'.repeat(MAX_KV_KEY_BYTES + 1), value: new Uint8Array() }), isInvalid);
  assert.throws(() => encodeKvCommand({ op: 'delete', key: '\ud800' }), isInvalid);
  assert.throws(() => encodeKvCommand({ op: 'get', key: 'k' } as unknown as KvCommand), isInvalid);
  encodeKvCommand({ op: 'set', key: 'x'.repeat(MAX_KV_KEY_BYTES), value: new Uint8Array() });
});

test('kv: replies are the previous values (against a Map model); malformed commands change nothing', () => {
  fc.assert(
    fc.property(fc.array(fc.oneof({ weight: 9, arbitrary: commandArb.map((c) => encodeKvCommand(c)) }, { weight: 1, arbitrary: fc.uint8Array({ maxLength: 6 }) }), { maxLength: 60 }), (datas) => {
      const kv = new KvPlugin();
      const model = new Map<string, Uint8Array>();
      datas.forEach((data, i) => {
        let cmd: KvCommand | null = null;
        try {
          cmd = decodeKvCommand(data);
        } catch {
          cmd = null;
        }
        const reply = kv.apply(entry(i, data));
        if (cmd === null) {
          assert.equal(reply.ok, false);
          return;
        }
        assert.deepEqual(reply, { ok: true, previous: model.get(cmd.key) ?? null });
        if (cmd.op === 'set') model.set(cmd.key, cmd.value);
        else model.delete(cmd.key);
      });
      assert.equal(kv.size, model.size);
      for (const [k, v] of model) assert.deepEqual(kv.get(k), v);
      assert.deepEqual(kv.keys(), [...model.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    }),
  );
});

test('kv: values handed out and taken in are copies', () => {
  const kv = new KvPlugin();
  const data = encodeKvCommand({ op: 'set', key: 'k', value: new Uint8Array([1, 2, 3]) });
  kv.apply(entry(1, data));
  data.fill(0);
  const got = kv.get('k');
  assert.deepEqual(got, new Uint8Array([1, 2, 3]));
  got?.fill(9);
  assert.deepEqual(kv.get('k'), new Uint8Array([1, 2, 3]));
  const reply = kv.apply(entry(2, encodeKvCommand({ op: 'delete', key: 'k' }))) as Extract<KvReply, { ok: true }>;
  assert.deepEqual(reply.previous, new Uint8Array([1, 2, 3]));
});

test('kv: capture and restore round trip through any chunking; equal maps give equal bytes', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(commandArb, { maxLength: 40 }), fc.integer({ min: 1, max: 64 }), async (cmds, chunk) => {
      const kv = new KvPlugin();
      cmds.forEach((c, i) => kv.apply(entry(i, encodeKvCommand(c))));
      const bytes = await collect(kv.capture());
      const back = new KvPlugin();
      await back.restore(cut(bytes, chunk));
      assert.deepEqual(back.keys(), kv.keys());
      for (const k of kv.keys()) assert.deepEqual(back.get(k), kv.get(k));
      assert.deepEqual(await collect(back.capture()), bytes);
    }),
    { numRuns: 150 },
  );
});

test('kv: a capture is the state at the call, however many applies follow', async () => {
  const kv = new KvPlugin();
  kv.apply(entry(1, encodeKvCommand({ op: 'set', key: 'a', value: new Uint8Array([1]) })));
  kv.apply(entry(2, encodeKvCommand({ op: 'set', key: 'big', value: new Uint8Array(200_000).fill(5) })));
  const view = kv.capture();
  kv.apply(entry(3, encodeKvCommand({ op: 'set', key: 'a', value: new Uint8Array([2]) })));
  kv.apply(entry(4, encodeKvCommand({ op: 'delete', key: 'big' })));
  kv.apply(entry(5, encodeKvCommand({ op: 'set', key: 'c', value: new Uint8Array([3]) })));
  const back = new KvPlugin();
  await back.restore(view);
  assert.deepEqual(back.keys(), ['a', 'big']);
  assert.deepEqual(back.get('a'), new Uint8Array([1]));
  assert.equal(back.get('big')?.length, 200_000);
});

test('kv: restore refuses what a capture cannot have written', async () => {
  const kv = new KvPlugin();
  for (const k of ['a', 'b']) kv.apply(entry(1, encodeKvCommand({ op: 'set', key: k, value: new Uint8Array([7, 7]) })));
  const good = await collect(kv.capture());
  const restore = (bytes: Uint8Array): Promise<void> => new KvPlugin().restore(cut(bytes, 3));
  await restore(good);
  // A cut inside a record is CORRUPT; a cut between records (at 5) is a valid, smaller state: the
  // snapshot stream's framing and checksum, not the KV format, catch a cut there.
  for (let n = 1; n < good.length; n++) {
    if (n !== 5) await assert.rejects(restore(good.subarray(0, n)), isCorrupt, `cut at ${n}`);
  }
  // Out of order, duplicated, not UTF-8, a length beyond its bound.
  await assert.rejects(restore(new Uint8Array([1, 0x62, 0, 1, 0x61, 0])), isCorrupt, 'keys descending');
  await assert.rejects(restore(new Uint8Array([1, 0x61, 0, 1, 0x61, 0])), isCorrupt, 'a key twice');
  await assert.rejects(restore(new Uint8Array([1, 0xff, 0])), isCorrupt, 'not UTF-8');
  await assert.rejects(restore(new Uint8Array([0xff, 0xff, 0xff, 0x7f])), isCorrupt, 'key too long');
  await assert.rejects(restore(new Uint8Array([1, 0x61, 0xff, 0xff, 0xff, 0xff, 0x7f])), isCorrupt, 'value too long');
  // A restore needs a fresh instance.
  await assert.rejects(kv.restore(cut(good, 5)), (err: unknown) => isSeglogError(err, 'INVALID'));
});

// --- the plugin inside the reference state machine ----------------------------------------------

const blankAt = (index: number): Entry => ({ logId: { leaderId: { term: 1, nodeId: 0 }, index }, payload: { type: 'blank' } });
const setAt = (index: number, key: string, value: number): Entry => ({
  logId: { leaderId: { term: 1, nodeId: 0 }, index },
  payload: { type: 'normal', data: encodeKvCommand({ op: 'set', key, value: new Uint8Array([value]) }) },
});

test('memory group: the state survives reopen through snapshot plus journal; plugin reads', async () => {
  const disk = new MemoryRaftDisk();
  let g = await openMemoryRaftGroup(disk, { plugin: kvPlugin });
  assert.deepEqual(await g.stateMachine.apply([setAt(1, 'a', 1), blankAt(2), setAt(3, 'b', 2)]), [{ ok: true, previous: null }, null, { ok: true, previous: null }]);
  await (await g.stateMachine.getSnapshotBuilder()).buildSnapshot();
  await g.stateMachine.apply([setAt(4, 'a', 3)]);
  await g.close();
  await g.close(); // idempotent
  g = await openMemoryRaftGroup(disk, { plugin: kvPlugin });
  assert.deepEqual(g.stateMachine.plugin.get('a'), new Uint8Array([3]));
  assert.deepEqual(g.stateMachine.plugin.get('b'), new Uint8Array([2]));
  assert.deepEqual((await g.stateMachine.appliedState())[0], { leaderId: { term: 1, nodeId: 0 }, index: 4 });
  await g.close();
});

test('memory group: one open handle per disk; a closed handle refuses everything', async () => {
  const disk = new MemoryRaftDisk();
  const g = await openMemoryRaftGroup(disk, { plugin: kvPlugin });
  await assert.rejects(openMemoryRaftGroup(disk, { plugin: kvPlugin }), (err: unknown) => isSeglogError(err, 'LOCKED'));
  const reader = await g.log.getLogReader();
  const sink = await g.stateMachine.beginReceivingSnapshot();
  await g.close();
  const isClosed = (err: unknown): boolean => isSeglogError(err, 'CLOSED');
  await assert.rejects(g.log.append([blankAt(1)], () => assert.fail('no callback')), isClosed);
  await assert.rejects(g.log.getLogState(), isClosed);
  await assert.rejects(g.log.saveVote({ leaderId: { term: 1, nodeId: 1 }, committed: false }), isClosed);
  await assert.rejects(reader.tryGetLogEntries(0, 1), isClosed);
  await assert.rejects(g.stateMachine.apply([blankAt(1)]), isClosed);
  await assert.rejects(sink.write(new Uint8Array(1)), isClosed);
  const again = await openMemoryRaftGroup(disk, { plugin: kvPlugin });
  await again.close();
});

test('memory group: a plugin that throws poisons the state machine; a foreign snapshot is refused', async () => {
  class Thrower implements StateMachinePlugin<number> {
    readonly name = 'thrower/1';
    apply(e: PluginEntry): number {
      if (e.data[0] === 0xff) throw new Error('boom');
      return e.data.length;
    }
    capture(): AsyncIterable<Uint8Array> {
      return (async function* () {})();
    }
    async restore(chunks: AsyncIterable<Uint8Array>): Promise<void> {
      for await (const _ of chunks) throw new Error('no state expected');
    }
  }
  const kvDisk = new MemoryRaftDisk();
  const kvGroup = await openMemoryRaftGroup(kvDisk, { plugin: kvPlugin });
  await kvGroup.stateMachine.apply([setAt(1, 'a', 1)]);
  const kvSnap = await (await kvGroup.stateMachine.getSnapshotBuilder()).buildSnapshot();

  const disk = new MemoryRaftDisk();
  const g = await openMemoryRaftGroup(disk, { plugin: () => new Thrower() });
  const sink = await g.stateMachine.beginReceivingSnapshot();
  for await (const c of kvSnap.data) await sink.write(c);
  await assert.rejects(g.stateMachine.installSnapshot(kvSnap.meta, sink), (err: unknown) => isSeglogError(err, 'INVALID'), 'another plugin');
  const normal = (index: number, byte: number): Entry => ({ logId: { leaderId: { term: 1, nodeId: 0 }, index }, payload: { type: 'normal', data: new Uint8Array([byte]) } });
  assert.deepEqual(await g.stateMachine.apply([normal(1, 1)]), [1]);
  await assert.rejects(g.stateMachine.apply([normal(2, 0xff)]), (err: unknown) => isSeglogError(err, 'POISONED'));
  await assert.rejects(g.stateMachine.appliedState(), (err: unknown) => isSeglogError(err, 'POISONED'));
  await g.close();
  // The entry that threw was never journaled: a reopen rebuilds the state before it.
  const again = await openMemoryRaftGroup(disk, { plugin: () => new Thrower() });
  assert.deepEqual((await again.stateMachine.appliedState())[0], { leaderId: { term: 1, nodeId: 0 }, index: 1 });
  await again.close();
  await kvGroup.close();
});
