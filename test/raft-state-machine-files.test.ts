// A group's state machine files (`sm/journal/`, `sm/snapshots/`) are made at its first write, not
// with the group: these tests check that a group that applied nothing holds none, that the first
// apply, snapshot build or snapshot receive makes them whole and marks the GROUP file, that every
// state a making cut short leaves opens to "nothing applied" (or to the made files, marked at
// that open), that a marked group missing them is CORRUPT, that a failed making is refused with
// a typed error and poisons the state machine until a reopen, and that a group of the first
// format (no flags: every file made with the group) still opens and needs them.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { crc32 } from 'node:zlib';

import { ManualClock } from '../lib/clock.js';
import { isSeglogError } from '../lib/errors.js';
import { FaultyFs } from '../lib/fs/faulty.js';
import { MemoryFs } from '../lib/fs/memory.js';
import type { FileSystem } from '../lib/fs/types.js';
import { GROUP_STATE_CELL, encodeGroupFile, readGroupFile } from '../lib/raft/fs-layout.js';
import { toThreeCellLayout } from './support/three-cell-group.js';
import { encodeKvCommand, type KvPlugin } from '../lib/raft/kv.js';
import { groupDirectory, openRaftNode, type RaftNodeOptions } from '../lib/raft/node.js';
import type { Entry, LogId } from '../lib/raft/types.js';
import { verifyDataDirectory } from '../lib/tools/verify.js';
import { appendFlushed, code } from './support/raft-calls.js';

const DIR = '/node';

function lid(index: number, term = 1): LogId {
  return { leaderId: { term, nodeId: 1 }, index };
}

function kv(index: number, term = 1): Entry {
  const data = encodeKvCommand({ op: 'set', key: `k${index}`, value: new TextEncoder().encode(`v${term}.${index}`) });
  return { logId: lid(index, term), payload: { type: 'normal', data } };
}

function open(fs: FileSystem) {
  return openRaftNode(DIR, { fs, clock: new ManualClock(), segmentBytes: 4096, journalSegmentBytes: 4096 } as RaftNodeOptions<KvPlugin>);
}

async function exists(fs: FileSystem, p: string): Promise<boolean> {
  return (await fs.lstat(p)) !== null;
}

async function writeWhole(fs: FileSystem, file: string, bytes: Uint8Array): Promise<void> {
  if (await exists(fs, file)) await fs.unlink(file);
  const h = await fs.open(file, 'create-exclusive');
  await h.write(bytes, 0);
  await h.datasync();
  await h.close();
}

/** The GROUP file of the first format: magic "SGLGROUP", u32 length, the id, CRC-32 (no flags). */
function groupFileV1(id: string): Uint8Array {
  const body = Buffer.from(id, 'utf8');
  const out = Buffer.alloc(8 + 4 + body.length + 4);
  out.write('SGLGROUP', 0, 'latin1');
  out.writeUInt32LE(body.length, 8);
  body.copy(out, 12);
  out.writeUInt32LE(crc32(out.subarray(0, out.length - 4)), out.length - 4);
  return out;
}

test('a group that applied nothing holds no state machine files; the first apply makes them and marks the GROUP file', async () => {
  const fs = new MemoryFs({ trace: false });
  let node = await open(fs);
  let g = await node.openGroup('g');
  const gd = groupDirectory(DIR, 'g');
  await appendFlushed(g, [kv(0), kv(1), kv(2)]);
  await g.log.saveCommitted(lid(1));
  await node.close();
  assert.equal(await exists(fs, path.posix.join(gd, 'sm')), false, 'no sm/ before the first write');
  assert.deepEqual(await readGroupFile(fs, gd), { id: 'g', version: 2, stateMachineMade: false, stateCell: true });

  node = await open(fs);
  g = await node.openGroup('g');
  // Recovery step 4 replays the committed entries into the state machine: its first write.
  assert.equal(node.recovery.get('g')?.replayed, 2);
  assert.deepEqual((await g.stateMachine.appliedState())[0], lid(1));
  assert.equal(await exists(fs, path.posix.join(gd, 'sm', 'journal', 'MANIFEST')), true);
  assert.equal(await exists(fs, path.posix.join(gd, 'sm', 'snapshots')), true);
  assert.equal(await exists(fs, path.posix.join(gd, 'sm.tmp')), false, 'the temporary name was renamed');
  assert.deepEqual(await readGroupFile(fs, gd), { id: 'g', version: 2, stateMachineMade: true, stateCell: true }, 'the mark keeps the layout flag');
  await g.stateMachine.apply([kv(2)]);
  await node.close();

  node = await open(fs);
  g = await node.openGroup('g');
  assert.deepEqual((await g.stateMachine.appliedState())[0], lid(2));
  assert.equal(new TextDecoder().decode(g.stateMachine.plugin.get('k2') ?? new Uint8Array()), 'v1.2');
  await node.close();
});

test('applies issued together on a state machine without files take effect in call order; a misordered first apply makes nothing', async () => {
  const fs = new MemoryFs({ trace: false });
  const node = await open(fs);
  const g = await node.openGroup('g');
  const gd = groupDirectory(DIR, 'g');
  await assert.rejects(g.stateMachine.apply([kv(3), kv(2)]), code('INVALID'));
  assert.equal(await exists(fs, path.posix.join(gd, 'sm')), false, 'refused input made no files');
  const answers = await Promise.all([g.stateMachine.apply([kv(0)]), g.stateMachine.apply([kv(1), kv(2)]), g.stateMachine.apply([kv(3)])]);
  assert.deepEqual(
    answers.map((a) => a.length),
    [1, 2, 1],
  );
  assert.deepEqual((await g.stateMachine.appliedState())[0], lid(3));
  await assert.rejects(g.stateMachine.apply([kv(3)]), code('INVALID'), 'an entry is applied once');
  await node.close();
});

test('a snapshot received or built first makes the files too', async () => {
  const fs = new MemoryFs({ trace: false });
  let node = await open(fs);
  const src = await node.openGroup('src');
  await src.stateMachine.apply([kv(0), kv(1), kv(2)]);
  const snap = await (await src.stateMachine.getSnapshotBuilder()).buildSnapshot();
  for await (const chunk of snap.data) void chunk;
  const current = await src.stateMachine.getCurrentSnapshot();
  assert.ok(current !== null);
  const fresh = await node.openGroup('fresh');
  const sink = await fresh.stateMachine.beginReceivingSnapshot();
  assert.equal((await readGroupFile(fs, groupDirectory(DIR, 'fresh'))).stateMachineMade, true, 'receiving made the files');
  for await (const chunk of current.data) await sink.write(chunk);
  await fresh.stateMachine.installSnapshot(current.meta, sink);
  const empty = await node.openGroup('empty');
  await (await empty.stateMachine.getSnapshotBuilder()).buildSnapshot();
  await node.close();
  node = await open(fs);
  assert.deepEqual((await (await node.openGroup('fresh')).stateMachine.appliedState())[0], lid(2));
  assert.ok((await (await node.openGroup('empty')).stateMachine.getCurrentSnapshot()) !== null, 'the snapshot of nothing is current');
  await node.close();
});

test('files made but not yet marked (a crash between) open as made, and are marked then', async () => {
  const fs = new MemoryFs({ trace: false });
  let node = await open(fs);
  const g = await node.openGroup('g');
  await g.stateMachine.apply([kv(0), kv(1)]);
  await node.close();
  const gd = groupDirectory(DIR, 'g');
  await writeWhole(fs, path.posix.join(gd, 'GROUP'), encodeGroupFile('g', GROUP_STATE_CELL));
  node = await open(fs);
  assert.deepEqual(node.recovery.get('g')?.applied, lid(1));
  assert.equal((await readGroupFile(fs, gd)).stateMachineMade, true);
  await node.close();
});

test('files made but not yet marked, one of them lost since: CORRUPT naming it, never a journal made again empty', async () => {
  const fs = new MemoryFs({ trace: false });
  const node = await open(fs);
  await (await node.openGroup('g')).stateMachine.apply([kv(0)]);
  await node.close();
  const gd = groupDirectory(DIR, 'g');
  await writeWhole(fs, path.posix.join(gd, 'GROUP'), encodeGroupFile('g', GROUP_STATE_CELL));
  const manifest = path.posix.join(gd, 'sm', 'journal', 'MANIFEST');
  await fs.unlink(manifest);
  await assert.rejects(open(fs), (err: unknown) => {
    assert.ok(isSeglogError(err, 'CORRUPT'), String(err));
    assert.equal(err.details['path'], manifest);
    return true;
  });
});

test('leftovers of a making or a GROUP replacement cut short are not the group and are replaced by the next one', async () => {
  const fs = new MemoryFs({ trace: false });
  let node = await open(fs);
  await node.openGroup('g');
  await node.close();
  const gd = groupDirectory(DIR, 'g');
  await fs.mkdir(path.posix.join(gd, 'sm.tmp', 'journal'));
  await writeWhole(fs, path.posix.join(gd, 'sm.tmp', 'journal', 'MANIFEST'), new Uint8Array(100).fill(7));
  await writeWhole(fs, path.posix.join(gd, 'GROUP.tmp'), new Uint8Array(9).fill(1));
  node = await open(fs);
  const g = await node.openGroup('g');
  assert.equal(node.recovery.get('g')?.applied, null);
  await g.stateMachine.apply([kv(0)]);
  assert.equal(await exists(fs, path.posix.join(gd, 'sm.tmp')), false);
  assert.equal(await exists(fs, path.posix.join(gd, 'GROUP.tmp')), false);
  await node.close();
  node = await open(fs);
  assert.deepEqual(node.recovery.get('g')?.applied, lid(0));
  await node.close();
});

test('faults: a making whose step fails is refused with a typed error, poisons the state machine, and the reopened group holds nothing applied', async () => {
  const cases = [
    { kind: 'mkdir', path: (p: string) => p.includes('/sm.tmp'), error: 'ENOSPC', want: 'NO_SPACE' },
    { kind: 'write', path: (p: string) => p.includes('/sm.tmp/journal/'), error: 'ENOSPC', want: 'NO_SPACE' },
    { kind: 'datasync', path: (p: string) => p.includes('/sm.tmp/journal/') && p.endsWith('.seg'), error: 'EIO', want: 'IO_ERROR' },
    { kind: 'syncDir', path: (p: string) => p.endsWith('/sm.tmp/journal'), error: 'EIO', want: 'IO_ERROR' },
    { kind: 'rename', path: (p: string) => p.endsWith('/sm.tmp'), error: 'EIO', want: 'IO_ERROR' },
    { kind: 'datasync', path: (p: string) => p.endsWith('/GROUP.tmp'), error: 'ENOSPC', want: 'NO_SPACE' },
    { kind: 'rename', path: (p: string) => p.endsWith('/GROUP.tmp'), error: 'EIO', want: 'IO_ERROR' },
  ] as const;
  for (const c of cases) {
    const mem = new MemoryFs({ trace: false });
    const fs = new FaultyFs(mem);
    let node = await open(fs);
    let g = await node.openGroup('g');
    await appendFlushed(g, [kv(0), kv(1)]);
    const rule = fs.fail({ kind: c.kind, path: c.path, error: c.error });
    await assert.rejects(g.stateMachine.apply([kv(0)]), code(c.want), `${c.kind}: refused with ${c.want}`);
    await assert.rejects(g.stateMachine.apply([kv(1)]), code('POISONED'), `${c.kind}: poisoned`);
    rule.remove();
    await node.close();
    node = await open(fs);
    g = await node.openGroup('g');
    assert.equal((await g.stateMachine.appliedState())[0], null, `${c.kind}: nothing was applied`);
    assert.equal((await g.log.getLogState()).lastLogId?.index, 1, `${c.kind}: the log is untouched`);
    await g.stateMachine.apply([kv(0), kv(1)]);
    await node.close();
    node = await open(fs);
    assert.deepEqual(node.recovery.get('g')?.applied, lid(1), `${c.kind}: made again without the fault`);
    await node.close();
  }
});

test('a group marked made whose sm/ is gone is CORRUPT naming it; verify says so, and says nothing of a group that applied nothing', async () => {
  const fs = new MemoryFs({ trace: false });
  const node = await open(fs);
  await (await node.openGroup('made')).stateMachine.apply([kv(0)]);
  await appendFlushed(await node.openGroup('idle'), [kv(0)]);
  await node.close();
  const clean = await verifyDataDirectory(DIR, { fs });
  assert.deepEqual(clean.findings.filter((f) => f.severity === 'error'), [], 'an idle group without state machine files is whole');
  const sm = path.posix.join(groupDirectory(DIR, 'made'), 'sm');
  for (const name of ['journal/MANIFEST', 'journal', 'snapshots']) await removeAll(fs, path.posix.join(sm, name));
  await fs.rmdir(sm);
  await assert.rejects(open(fs), (err: unknown) => {
    assert.ok(isSeglogError(err, 'CORRUPT'), String(err));
    assert.equal(err.details['path'], sm);
    return true;
  });
  const report = await verifyDataDirectory(DIR, { fs });
  assert.ok(
    report.findings.some((f) => f.severity === 'error' && f.path === sm),
    JSON.stringify(report.findings),
  );
});

async function removeAll(fs: FileSystem, p: string): Promise<void> {
  const st = await fs.lstat(p);
  if (st === null) return;
  if (st.isDirectory) {
    for (const n of await fs.readdir(p)) await removeAll(fs, path.posix.join(p, n));
    await fs.rmdir(p);
  } else {
    await fs.unlink(p);
  }
}

test('a group of the first format (GROUP without flags) opens as it is, and its state machine files are required', async () => {
  const fs = new MemoryFs({ trace: false });
  let node = await open(fs);
  const g = await node.openGroup('old');
  await appendFlushed(g, [kv(0), kv(1)]);
  await g.stateMachine.apply([kv(0)]);
  await node.close();
  const gd = groupDirectory(DIR, 'old');
  // A group of the first format keeps its vote, committed and purged id in three cells.
  await toThreeCellLayout(gd, fs);
  await writeWhole(fs, path.posix.join(gd, 'GROUP'), groupFileV1('old'));
  assert.deepEqual(await readGroupFile(fs, gd), { id: 'old', version: 1, stateMachineMade: true, stateCell: false });
  node = await open(fs);
  const o = await node.openGroup('old');
  await o.stateMachine.apply([kv(1)]);
  await node.close();
  assert.equal((await readGroupFile(fs, gd)).version, 1, 'a first-format GROUP file is never rewritten');
  await removeAll(fs, path.posix.join(gd, 'sm', 'snapshots'));
  await assert.rejects(open(fs), code('CORRUPT'));
});

test('a GROUP file with a flag this version does not know is CORRUPT, naming it', async () => {
  const fs = new MemoryFs({ trace: false });
  const node = await open(fs);
  await node.openGroup('g');
  await node.close();
  const gd = groupDirectory(DIR, 'g');
  const bytes = Buffer.from(encodeGroupFile('g', 1));
  bytes[8] = 0x81;
  bytes.writeUInt32LE(crc32(bytes.subarray(0, bytes.length - 4)), bytes.length - 4);
  await writeWhole(fs, path.posix.join(gd, 'GROUP'), bytes);
  await assert.rejects(open(fs), (err: unknown) => {
    assert.ok(isSeglogError(err, 'CORRUPT'), String(err));
    assert.match(err.message, /unknown flags/);
    return true;
  });
});

test('a GROUP file too short, or longer than the longest one (a 512-byte id), is CORRUPT naming it; the longest opens', async () => {
  const fs = new MemoryFs({ trace: false });
  const long = 'x'.repeat(512);
  const node = await open(fs);
  await node.openGroup('g');
  await node.openGroup(long);
  await node.close();
  assert.equal((await readGroupFile(fs, groupDirectory(DIR, long))).id, long, 'the longest GROUP file is read whole');
  const gd = groupDirectory(DIR, 'g');
  const file = path.posix.join(gd, 'GROUP');
  const good = encodeGroupFile('g', GROUP_STATE_CELL);
  for (const [what, bytes] of [
    ['cut short', good.subarray(0, 12)],
    ['one byte past the longest', new Uint8Array(8 + 9 + 512 + 1).fill(7)],
    ['much longer', new Uint8Array(64 * 1024).fill(7)],
  ] as const) {
    await writeWhole(fs, file, bytes);
    await assert.rejects(readGroupFile(fs, gd), (err: unknown) => {
      assert.ok(isSeglogError(err, 'CORRUPT'), `${what}: ${String(err)}`);
      assert.match(err.message, /not a group file/, what);
      assert.equal(err.details['path'], file, what);
      return true;
    });
    await assert.rejects(open(fs), (err: unknown) => isSeglogError(err, 'CORRUPT'), `${what}: the node's open`);
  }
});
