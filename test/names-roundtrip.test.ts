// Every string the stores persist comes back exactly — above all one that starts with U+FEFF,
// which a default TextDecoder takes for a byte-order mark and drops — or is refused up front with
// INVALID (a lone surrogate, whose UTF-8 would decode to another string). For each kind of name:
// a Raft group id, a KV key, a snapshot id and a plugin name; a host scope name, commit id and
// fence holder id; a payload holder id. Each is written, the store closed and reopened, and read
// back next to its twin without the U+FEFF.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../lib/clock.js';
import { isSeglogError } from '../lib/errors.js';
import { MemoryFs } from '../lib/fs/memory.js';
import type { FileSystem } from '../lib/fs/types.js';
import { CommitBatch, FenceTiming, openFsHostStore } from '../lib/host/index.js';
import { encodeKvCommand, kvPlugin, type KvPlugin } from '../lib/raft/kv.js';
import { openRaftNode } from '../lib/raft/node.js';
import type { StateMachinePluginFactory } from '../lib/raft/plugin.js';
import { emptyStoredMembership, type Entry, type LogId } from '../lib/raft/types.js';
import { writeSnapshotStream } from '../lib/raft/snapshot-format.js';
import { openPayloadStore } from '../lib/payloads/index.js';
import { decodeUtf8Exact, tryDecodeUtf8Exact } from '../lib/text.js';

const te = new TextEncoder();
const BOM = '\uFEFF';
const LONE = 'a\uD800b';

function code(c: string): (err: unknown) => boolean {
  return (err) => {
    assert.ok(isSeglogError(err), `expected SeglogError ${c}, got ${String(err)}`);
    assert.equal(err.code, c, String(err));
    return true;
  };
}

function lid(term: number, index: number): LogId {
  return { leaderId: { term, nodeId: 1 }, index };
}

function set(index: number, key: string, value: string): Entry {
  return { logId: lid(1, index), payload: { type: 'normal', data: encodeKvCommand({ op: 'set', key, value: te.encode(value) }) } };
}

function openNode(fs: FileSystem, plugin?: StateMachinePluginFactory<KvPlugin>) {
  return openRaftNode('/node', { fs, clock: new ManualClock(), payloads: { graceMs: 0 }, segmentBytes: 4096, journalSegmentBytes: 4096, ...(plugin === undefined ? {} : { plugin }) });
}

async function appendFlushed(log: { append(e: Entry[], cb: (err: Error | null) => void): Promise<void> }, entries: Entry[]): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    log.append(entries, (err) => (err === null ? resolve() : reject(err))).catch(reject);
  });
}

test('the exact decoder keeps a leading U+FEFF and refuses bytes that are not UTF-8', () => {
  for (const s of [BOM, `${BOM}a`, `${BOM}${BOM}`, 'a\uFEFF', '', 'plain', '\u{1F600}']) assert.equal(decodeUtf8Exact(te.encode(s)), s);
  assert.equal(tryDecodeUtf8Exact(Uint8Array.of(0xff)), null);
  assert.throws(() => decodeUtf8Exact(Uint8Array.of(0xc3)), TypeError);
});

test('Raft: a group id starting with U+FEFF round-trips; the node opens again and keeps it apart from its twin', async () => {
  const m = new MemoryFs({ trace: false });
  const node = await openNode(m);
  const bom = await node.openGroup(`${BOM}g`);
  await appendFlushed(bom.log, [set(1, 'x', 'in the BOM group')]);
  const plain = await node.openGroup('g');
  await appendFlushed(plain.log, [set(1, 'x', 'in the plain group'), set(2, 'y', 'two')]);
  await node.close();
  const again = await openNode(m);
  assert.deepEqual([...again.recovery.keys()].sort(), ['g', `${BOM}g`].sort());
  const g1 = await again.openGroup(`${BOM}g`);
  const g2 = await again.openGroup('g');
  assert.equal((await g1.log.getLogState()).lastLogId?.index, 1);
  assert.equal((await g2.log.getLogState()).lastLogId?.index, 2);
  await again.close();
  await assert.rejects(openNode(m).then((n) => n.openGroup(LONE)), code('INVALID'));
});

test('Raft: KV keys with and without a leading U+FEFF stay two keys, after replay and after a snapshot', async () => {
  const m = new MemoryFs({ trace: false });
  const node = await openNode(m);
  const g = await node.openGroup('kv');
  const entries = [set(1, `${BOM}k`, 'with'), set(2, 'k', 'without')];
  await appendFlushed(g.log, entries);
  await g.log.saveCommitted(lid(1, 2));
  await g.stateMachine.apply(entries);
  const check = (label: string, p: KvPlugin): void => {
    assert.equal(Buffer.from(p.get(`${BOM}k`) ?? new Uint8Array()).toString(), 'with', label);
    assert.equal(Buffer.from(p.get('k') ?? new Uint8Array()).toString(), 'without', label);
  };
  check('applied', g.stateMachine.plugin);
  await node.close();
  let again = await openNode(m);
  check('replayed from the journal at open', (await again.openGroup('kv')).stateMachine.plugin);
  const built = await (await (await again.openGroup('kv')).stateMachine.getSnapshotBuilder()).buildSnapshot();
  assert.ok(built !== null);
  await again.close();
  again = await openNode(m);
  check('restored from the snapshot', (await again.openGroup('kv')).stateMachine.plugin);
  await again.close();
  assert.throws(() => encodeKvCommand({ op: 'set', key: LONE, value: new Uint8Array() }), code('INVALID'));
});

test('Raft: a snapshot id and a plugin name starting with U+FEFF round-trip', async () => {
  const m = new MemoryFs({ trace: false });
  const named: StateMachinePluginFactory<KvPlugin> = () => {
    const p = kvPlugin();
    Object.defineProperty(p, 'name', { value: `${BOM}${p.name}` });
    return p;
  };
  // A snapshot as a leader sends it: its id is the leader's choice, its plugin name the plugin's.
  const meta = { lastLogId: lid(3, 7), lastMembership: emptyStoredMembership(), snapshotId: `${BOM}leader-7` };
  const node = await openNode(m, named);
  const g = await node.openGroup('g');
  const sink = await g.stateMachine.beginReceivingSnapshot();
  for await (const chunk of writeSnapshotStream({ plugin: named().name, meta }, kvPlugin().capture())) await sink.write(chunk);
  await g.stateMachine.installSnapshot(meta, sink);
  assert.equal((await g.stateMachine.getCurrentSnapshot())?.meta.snapshotId, `${BOM}leader-7`);
  await node.close();
  const again = await openNode(m, named);
  const current = await (await again.openGroup('g')).stateMachine.getCurrentSnapshot();
  assert.equal(current?.meta.snapshotId, `${BOM}leader-7`, 'the id read back at open');
  assert.deepEqual((await (await again.openGroup('g')).stateMachine.appliedState())[0], lid(3, 7));
  await again.close();
  const bad: StateMachinePluginFactory<KvPlugin> = () => {
    const p = kvPlugin();
    Object.defineProperty(p, 'name', { value: LONE });
    return p;
  };
  await assert.rejects(
    openNode(new MemoryFs({ trace: false }), bad).then((n) => n.openGroup('x')),
    code('INVALID'),
    'a plugin name that is not well-formed is refused',
  );
});

const timing = FenceTiming.tryNew(1000, 3000);

function openRealm(fs: FileSystem, holderId: string, clock: ManualClock) {
  return openFsHostStore('/realm', { fs, clock, timing, holderId, bootId: () => 'boot-1', stripes: 2, checkpointIn: 'thread' });
}

test('host: scope names, commit ids and fence holder ids starting with U+FEFF round-trip, in the stripes and in the homes', async () => {
  const m = new MemoryFs({ trace: false });
  const clock = new ManualClock(10_000_000);
  const a = await openRealm(m, `${BOM}holder`, clock);
  const { token } = await a.acquireFence('exclusive');
  const bom = { kind: 'session' as const, name: `${BOM}s` };
  const plain = { kind: 'session' as const, name: 's' };
  const b1 = CommitBatch.tryNew(`${BOM}c1`, token, [{ scope: bom, previous: null, next: 1, head: te.encode('bom head'), append: [te.encode('bom row')] }]);
  await a.commit(b1);
  await a.commit(CommitBatch.tryNew('c1', token, [{ scope: plain, previous: null, next: 1, head: te.encode('plain head'), append: [te.encode('plain row')] }]));
  const check = async (label: string, store: typeof a): Promise<void> => {
    const hb = await store.loadHead(bom);
    const hp = await store.loadHead(plain);
    assert.equal(Buffer.from(hb!.head).toString(), 'bom head', label);
    assert.equal(hb!.commitId, `${BOM}c1`, label);
    assert.equal(Buffer.from(hp!.head).toString(), 'plain head', label);
    assert.equal(hp!.commitId, 'c1', label);
    const page = await store.listHeads('session', null, 10);
    assert.deepEqual(page.heads.map((h) => h.name).sort(), ['s', `${BOM}s`].sort(), label);
    // The same batch again acts once (its commit id is recognized).
    await store.commit(b1);
    assert.equal((await store.loadHead(bom))!.version, 1, label);
  };
  await check('live', a);
  await a.close();
  const b = await openRealm(m, 'other', clock);
  await check('reopened, from the stripes', b);
  assert.ok(await b.checkpoint());
  await b.close();
  const c = await openRealm(m, 'other', clock);
  await check('reopened, from the homes', c);
  await assert.rejects(c.acquireFence('exclusive'), (err: unknown) => {
    assert.ok(isSeglogError(err, 'HELD'), String(err));
    assert.equal((err as { holder?: string }).holder, `${BOM}holder`);
    return true;
  });
  await assert.rejects(c.loadHead({ kind: 'session', name: LONE }), code('INVALID'));
  await c.close();
});

test('payloads: holder ids with and without a leading U+FEFF stay two holders after a reopen', async () => {
  const m = new MemoryFs({ trace: false });
  let store = await openPayloadStore('/p', { fs: m, graceMs: 0 });
  const { digest } = await store.put(
    (async function* () {
      yield te.encode('body');
    })(),
  );
  await store.addRef(digest, `${BOM}h`);
  await store.addRef(digest, 'h');
  assert.deepEqual((await store.refs(digest)).sort(), ['h', `${BOM}h`].sort());
  await store.close();
  store = await openPayloadStore('/p', { fs: m, graceMs: 0 });
  assert.deepEqual((await store.refs(digest)).sort(), ['h', `${BOM}h`].sort());
  await store.removeRef(digest, 'h');
  assert.deepEqual(await store.refs(digest), [`${BOM}h`]);
  await assert.rejects(store.addRef(digest, LONE), code('INVALID'));
  await store.close();
});
