// A Raft group's small state — its vote, committed pointer and purged id — in its two layouts
// (lib/raft/group-state.ts): one state cell in every group this version makes, three cells in a
// group an earlier version made. The state cell's value decodes only whole; a new group holds it
// and none of the three cells; writes issued together all land, each keeping the others'; a group
// of the earlier layout opens with its values and keeps writing its own three cells (never gains a
// state cell), and `seglog verify` checks both. Their crash states: test/crash-raft.test.ts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';
import fc from 'fast-check';

import { ManualClock } from '../lib/clock.js';
import { isSeglogError } from '../lib/errors.js';
import { MemoryFs } from '../lib/fs/memory.js';
import type { FileSystem } from '../lib/fs/types.js';
import { encodeOptionalLogId, encodeVote } from '../lib/raft/codec.js';
import { readGroupFile } from '../lib/raft/fs-layout.js';
import { decodeGroupState, encodeGroupState, openGroupState } from '../lib/raft/group-state.js';
import { GROUP_CELL_OPTIONS } from '../lib/raft/fs-layout.js';
import { encodeKvCommand } from '../lib/raft/kv.js';
import { groupDirectory, openRaftNode } from '../lib/raft/node.js';
import type { Entry, LogId, Vote } from '../lib/raft/types.js';
import { verifyDataDirectory } from '../lib/tools/verify.js';
import { appendFlushed } from './support/raft-calls.js';
import { THREE_CELLS, toThreeCellLayout } from './support/three-cell-group.js';

const DIR = '/node';

function lid(term: number, index: number): LogId {
  return { leaderId: { term, nodeId: 1 }, index };
}

function kv(term: number, index: number): Entry {
  return { logId: lid(term, index), payload: { type: 'normal', data: encodeKvCommand({ op: 'set', key: `k${index}`, value: new TextEncoder().encode(`v${index}`) }) } };
}

function open(fs: FileSystem) {
  return openRaftNode(DIR, { fs, clock: new ManualClock(), segmentBytes: 4096, journalSegmentBytes: 4096 });
}

/** A node with group 'g', closed, whose state cell is then replaced by a cell holding `file` (its two slots). */
async function withStateCellFile(cellFile: Uint8Array): Promise<{ fs: MemoryFs; file: string }> {
  const fs = new MemoryFs({ trace: false });
  const node = await open(fs);
  await node.openGroup('g');
  await node.close();
  const file = path.posix.join(groupDirectory(DIR, 'g'), 'state.cell');
  const h = await fs.open(file, 'write');
  await h.truncate(0);
  await h.write(cellFile, 0);
  await h.datasync();
  await h.close();
  return { fs, file };
}

async function exists(fs: FileSystem, p: string): Promise<boolean> {
  return (await fs.stat(p)) !== null;
}

test('the state cell value: every one round-trips; a cut, a longer, or an unknown-version value is CORRUPT', () => {
  const field = fc.uint8Array({ maxLength: 40 });
  fc.assert(
    fc.property(field, field, field, (vote, committed, purged) => {
      const bytes = encodeGroupState({ vote, committed, purged });
      assert.deepEqual(decodeGroupState(bytes, 'f'), { vote, committed, purged });
      for (let n = 0; n < bytes.length; n++) assert.throws(() => decodeGroupState(bytes.subarray(0, n), 'f'), (e: unknown) => isSeglogError(e, 'CORRUPT'), `cut to ${n}`);
      assert.throws(() => decodeGroupState(new Uint8Array([...bytes, 0]), 'f'), (e: unknown) => isSeglogError(e, 'CORRUPT'), 'a byte past the last field');
      assert.throws(() => decodeGroupState(new Uint8Array([2, ...bytes.subarray(1)]), 'f'), (e: unknown) => isSeglogError(e, 'CORRUPT'), 'another version');
    }),
  );
  assert.throws(() => encodeGroupState({ vote: new Uint8Array(256), committed: new Uint8Array(0), purged: new Uint8Array(0) }), (e: unknown) => isSeglogError(e, 'INVALID'));
});

test("the state cell's three writers: writes issued together, none awaited, each keep the values issued before them", async () => {
  const { encodeNewCellFile } = await import('../cells/format.js');
  const fs = new MemoryFs({ trace: false });
  await fs.mkdir('/g');
  const none = encodeOptionalLogId(null);
  const h = await fs.open('/g/state.cell', 'create-exclusive');
  await h.write(encodeNewCellFile(256, encodeGroupState({ vote: new Uint8Array(0), committed: none, purged: none })), 0);
  await h.close();
  const options = { fs, ...GROUP_CELL_OPTIONS };
  const s = await openGroupState('/g', 'g', true, options);
  const vote = encodeVote({ leaderId: { term: 4, nodeId: 2 }, committed: true });
  const committed = encodeOptionalLogId(lid(4, 9));
  const purged = encodeOptionalLogId(lid(3, 2));
  await Promise.all([s.vote.write(vote), s.committed.write(committed), s.purged.write(purged)]);
  assert.deepEqual(await s.committed.read(), committed);
  await s.vote.close();
  await assert.rejects(s.purged.write(purged), (e: unknown) => isSeglogError(e, 'CLOSED'), 'closing one closes the file');
  const again = await openGroupState('/g', 'g', true, options);
  assert.deepEqual(again.values, { vote, committed, purged });
  await again.vote.close();
});

test('a new group holds one state cell and none of the three cells; writes issued together all land, in call order', async () => {
  const fs = new MemoryFs({ trace: false });
  let node = await open(fs);
  const g = await node.openGroup('g');
  const gd = groupDirectory(DIR, 'g');
  assert.equal((await readGroupFile(fs, gd)).stateCell, true);
  assert.equal(await exists(fs, path.posix.join(gd, 'state.cell')), true);
  for (const c of THREE_CELLS) assert.equal(await exists(fs, path.posix.join(gd, c)), false, c);
  await appendFlushed(g, [kv(1, 0), kv(1, 1), kv(1, 2), kv(2, 3)]);
  // A snapshot holds what the purge below drops (verify requires one).
  await g.stateMachine.apply([kv(1, 0), kv(1, 1)]);
  await (await g.stateMachine.getSnapshotBuilder()).buildSnapshot();
  // Issued without waiting between them: each write keeps what the ones before it wrote.
  const v1: Vote = { leaderId: { term: 2, nodeId: 1 }, committed: true };
  const writes = [g.log.saveVote({ leaderId: { term: 1, nodeId: 1 }, committed: false }), g.log.saveCommitted(lid(1, 2)), g.log.purge(lid(1, 1)), g.log.saveVote(v1), g.log.saveCommitted(lid(2, 3))];
  await Promise.all(writes);
  assert.deepEqual(await g.log.readVote(), v1);
  await node.close();
  node = await open(fs);
  const r = node.recovery.get('g');
  assert.deepEqual(r?.vote, v1);
  assert.deepEqual(r?.committed, lid(2, 3));
  assert.deepEqual(r?.lastPurgedLogId, lid(1, 1));
  await node.close();
  const report = await verifyDataDirectory(DIR, { fs });
  assert.deepEqual(report.findings.filter((f) => f.severity === 'error'), []);
  const described = report.described.find((o) => o.kind === 'raft-group') as { vote?: unknown; committed?: unknown; purged?: unknown } | undefined;
  assert.ok(described !== undefined, 'verify describes the group');
  assert.deepEqual(described.vote, v1, 'verify reads the values from the state cell');
  assert.deepEqual(described.committed, lid(2, 3));
  assert.deepEqual(described.purged, lid(1, 1));
});

test('a group of the earlier layout (three cells) opens with its values, keeps writing its own cells, never gains a state cell, and verifies', async () => {
  const fs = new MemoryFs({ trace: false });
  let node = await open(fs);
  let g = await node.openGroup('old');
  await appendFlushed(g, [kv(1, 0), kv(1, 1), kv(1, 2)]);
  await g.stateMachine.apply([kv(1, 0)]);
  await (await g.stateMachine.getSnapshotBuilder()).buildSnapshot();
  await g.log.saveVote({ leaderId: { term: 1, nodeId: 1 }, committed: true });
  await g.log.saveCommitted(lid(1, 1));
  await node.close();
  const gd = groupDirectory(DIR, 'old');
  await toThreeCellLayout(gd, fs);
  assert.equal(await exists(fs, path.posix.join(gd, 'state.cell')), false);

  node = await open(fs);
  assert.deepEqual(node.recovery.get('old')?.vote, { leaderId: { term: 1, nodeId: 1 }, committed: true });
  assert.deepEqual(node.recovery.get('old')?.committed, lid(1, 1));
  g = await node.openGroup('old');
  const cellBytes = async (name: string): Promise<Uint8Array> => fs.currentImage().files[path.posix.join(gd, name)] ?? new Uint8Array(0);
  const before = await Promise.all(THREE_CELLS.map(cellBytes));
  await g.log.saveVote({ leaderId: { term: 3, nodeId: 2 }, committed: false });
  await g.log.saveCommitted(lid(1, 2));
  await g.log.purge(lid(1, 0));
  const after = await Promise.all(THREE_CELLS.map(cellBytes));
  for (let k = 0; k < THREE_CELLS.length; k++) assert.notDeepEqual(after[k], before[k], `${THREE_CELLS[k]} was written`);
  // A new group beside it has a state cell all the same.
  await node.openGroup('new');
  await node.close();
  assert.equal(await exists(fs, path.posix.join(gd, 'state.cell')), false, 'no state cell made in a group of the earlier layout');
  assert.equal((await readGroupFile(fs, gd)).stateCell, false);
  assert.equal((await readGroupFile(fs, groupDirectory(DIR, 'new'))).stateCell, true);

  node = await open(fs);
  const r = node.recovery.get('old');
  assert.deepEqual(r?.vote, { leaderId: { term: 3, nodeId: 2 }, committed: false });
  assert.deepEqual(r?.committed, lid(1, 2));
  assert.deepEqual(r?.lastPurgedLogId, lid(1, 0));
  await node.close();
  assert.deepEqual((await verifyDataDirectory(DIR, { fs })).findings.filter((f) => f.severity === 'error'), []);
});

test('a state cell whose value does not decode is CORRUPT at open naming it, and an error to verify', async () => {
  const { encodeNewCellFile } = await import('../cells/format.js');
  // A well-formed cell (its checksums hold) whose value is not a group state: a vote and a log id only.
  const value = new Uint8Array([1, ...[encodeVote({ leaderId: { term: 1, nodeId: 1 }, committed: false })].flatMap((b) => [b.length, ...b]), ...[encodeOptionalLogId(null)].flatMap((b) => [b.length, ...b])]);
  const { fs, file } = await withStateCellFile(encodeNewCellFile(256, value));
  await assert.rejects(open(fs), (err: unknown) => {
    assert.ok(isSeglogError(err, 'CORRUPT'), String(err));
    assert.equal(err.details['path'], file);
    return true;
  });
  const report = await verifyDataDirectory(DIR, { fs });
  assert.ok(report.findings.some((f) => f.severity === 'error' && f.path === file), JSON.stringify(report.findings));
});

test("a state cell that holds no value (both slots fillers) is CORRUPT at open naming it, and an error to verify (the cell check's own)", async () => {
  const { encodeSlot } = await import('../cells/format.js');
  const { fs, file } = await withStateCellFile(new Uint8Array([...encodeSlot(256, 0, 5, null), ...encodeSlot(256, 1, 6, null)]));
  await assert.rejects(open(fs), (err: unknown) => {
    assert.ok(isSeglogError(err, 'CORRUPT'), String(err));
    assert.equal(err.details['path'], file);
    assert.match(err.message, /holds no value/);
    return true;
  });
  const report = await verifyDataDirectory(DIR, { fs });
  assert.ok(report.findings.some((f) => f.severity === 'error' && f.path === file && /holds no value/.test(f.message)), JSON.stringify(report.findings));
});

test('a state cell whose vote, committed or purged document does not decode is CORRUPT at open naming the cell and the value', async () => {
  const { encodeNewCellFile } = await import('../cells/format.js');
  const none = encodeOptionalLogId(null);
  const garbage = new Uint8Array([0x09, 0xff]);
  for (const [what, state] of [
    ['vote', { vote: garbage, committed: none, purged: none }],
    ['committed id', { vote: new Uint8Array(0), committed: garbage, purged: none }],
    ['purged id', { vote: new Uint8Array(0), committed: none, purged: garbage }],
  ] as const) {
    const { fs, file } = await withStateCellFile(encodeNewCellFile(256, encodeGroupState(state)));
    await assert.rejects(open(fs), (err: unknown) => {
      assert.ok(isSeglogError(err, 'CORRUPT'), String(err));
      assert.equal(err.details['path'], file, what);
      assert.match(err.message, new RegExp(`the ${what} in `), what);
      return true;
    });
  }
});
