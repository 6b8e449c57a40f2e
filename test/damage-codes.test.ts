// Codes: damage is CORRUPT wherever it is detected. A Raft snapshot whose header was damaged
// (its plugin name, its metadata) is CORRUPT, not INVALID: the checksum decides before a name or a
// meta that differs is reported as another plugin's (or another install's) snapshot. An intact
// snapshot of another plugin, or with other metadata, stays INVALID.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';

import { isSeglogError, type ErrorCode } from '../lib/errors.js';
import { kvPlugin, encodeKvCommand } from '../lib/raft/kv.js';
import { groupDirectory, openRaftNode } from '../lib/raft/node.js';
import { restoreSnapshot, writeSnapshotStream, type SnapshotHeader } from '../lib/raft/snapshot-format.js';
import type { Entry, LogId, SnapshotMeta } from '../lib/raft/types.js';

const enc = new TextEncoder();

function lid(term: number, index: number): LogId {
  return { leaderId: { term, nodeId: 1 }, index };
}

const META: SnapshotMeta = { lastLogId: lid(2, 8), lastMembership: { logId: null, membership: { configs: [[1]], nodes: {} } }, snapshotId: 'snap-1' };

async function streamBytes(header: SnapshotHeader, body: Uint8Array[]): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  async function* src(): AsyncGenerator<Uint8Array> {
    yield* body;
  }
  for await (const c of writeSnapshotStream(header, src())) parts.push(c);
  return Buffer.concat(parts);
}

async function* once(b: Uint8Array): AsyncGenerator<Uint8Array> {
  yield b;
}

function code(c: ErrorCode): (err: unknown) => boolean {
  return (err) => {
    assert.ok(isSeglogError(err, c), `expected ${c}, got ${String(err)}`);
    return true;
  };
}

/** A KV snapshot's bytes (the plugin's own state stream), through a real KV plugin. */
async function kvSnapshot(meta: SnapshotMeta): Promise<Uint8Array> {
  const plugin = kvPlugin();
  plugin.apply({ logId: lid(1, 0), data: encodeKvCommand({ op: 'set', key: 'k', value: enc.encode('v') }), payloads: [] });
  const body: Uint8Array[] = [];
  for await (const c of plugin.capture()) body.push(c);
  return streamBytes({ plugin: plugin.name, meta }, body);
}

/** Offset of the plugin name's first byte: magic (8), header length (4), name length varint (1). */
const NAME_AT = 13;

test('snapshot: a flipped byte in the plugin name is CORRUPT, not INVALID', async () => {
  const bytes = await kvSnapshot(META);
  const bad = Uint8Array.from(bytes);
  bad[NAME_AT] = (bad[NAME_AT] as number) ^ 0x01;
  await assert.rejects(restoreSnapshot(kvPlugin, once(bad), null), code('CORRUPT'));
  await assert.rejects(restoreSnapshot(kvPlugin, once(bad), META), code('CORRUPT'));
});

test('snapshot: a flipped byte in the metadata is CORRUPT at an install that expects other meta', async () => {
  const bytes = await kvSnapshot(META);
  // The last byte of the header is inside the snapshot id.
  const headerLength = new DataView(bytes.buffer, bytes.byteOffset + 8, 4).getUint32(0, true);
  const at = 12 + headerLength - 1;
  const bad = Uint8Array.from(bytes);
  bad[at] = (bad[at] as number) ^ 0x01;
  await assert.rejects(restoreSnapshot(kvPlugin, once(bad), META), code('CORRUPT'));
});

test('snapshot: an intact stream of another plugin, or with other meta, is INVALID', async () => {
  const other = await streamBytes({ plugin: 'not-kv', meta: META }, [enc.encode('state')]);
  await assert.rejects(restoreSnapshot(kvPlugin, once(other), null), code('INVALID'));
  const bytes = await kvSnapshot(META);
  await assert.rejects(restoreSnapshot(kvPlugin, once(bytes), { ...META, snapshotId: 'another' }), code('INVALID'));
  const restored = await restoreSnapshot(kvPlugin, once(bytes), META);
  assert.deepEqual(restored.meta, META);
});

test('snapshot: a node whose snapshot file has a flipped plugin-name byte fails to open with CORRUPT', async () => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-damage-codes-'));
  try {
    const dir = path.join(root, 'node');
    const node = await openRaftNode(dir, { segmentBytes: 4096, journalSegmentBytes: 4096 });
    const g = await node.openGroup('g');
    const entries: Entry[] = [0, 1, 2].map((i) => ({ logId: lid(1, i), payload: { type: 'normal', data: encodeKvCommand({ op: 'set', key: `k${i}`, value: enc.encode('v') }) } }));
    await new Promise<void>((resolve, reject) => {
      g.log.append(entries, (err) => (err === null ? resolve() : reject(err))).catch(reject);
    });
    await g.log.saveCommitted(lid(1, 2));
    await g.stateMachine.apply(entries);
    await (await g.stateMachine.getSnapshotBuilder()).buildSnapshot();
    await node.close();
    const snapDir = path.join(groupDirectory(dir, 'g'), 'sm', 'snapshots');
    const [snap] = await fsp.readdir(snapDir);
    const file = path.join(snapDir, snap as string);
    const bytes = await fsp.readFile(file);
    bytes[NAME_AT] = (bytes[NAME_AT] as number) ^ 0x20;
    await fsp.writeFile(file, bytes);
    await assert.rejects(openRaftNode(dir, { segmentBytes: 4096, journalSegmentBytes: 4096 }), (err: unknown) => {
      assert.ok(isSeglogError(err, 'CORRUPT'), String(err));
      assert.equal(err.details['file'], file);
      return true;
    });
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});
