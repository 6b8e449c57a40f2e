// A Raft node of many groups: what each group costs a node that holds them. The descriptors of a
// node with every group open stay bounded by its open-file cache plus a small constant (the group
// logs and cells hold none between calls); the node's LOCK alone keeps a second process out (the
// group logs take no lock of their own); a group directory holds no lock or temporary file; the
// groups recover concurrently at open, each in its order, with a damaged group failing the open
// and leaving nothing open; an owned cell (no lock, no descriptor kept) keeps a cell's promises.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

import { openOwnedCell } from '../cells/index.js';
import { FdCache } from '../segments/index.js';
import { isSeglogError } from '../lib/errors.js';
import { MemoryFs } from '../lib/fs/memory.js';
import { realFs } from '../lib/fs/real.js';
import { groupDirectory, listPayloadReferences, openRaftNode, type RaftGroup } from '../lib/raft/node.js';
import type { KvPlugin } from '../lib/raft/kv.js';
import { THREE_CELLS, toThreeCellLayout } from './support/three-cell-group.js';

const TERM = { term: 1, nodeId: 1 };

function appendBlank(g: RaftGroup<KvPlugin>, index: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    g.log.append([{ logId: { leaderId: TERM, index }, payload: { type: 'blank' } }], (err) => (err === null ? resolve() : reject(err))).catch(reject);
  });
}

function code(c: string): (err: unknown) => boolean {
  return (err) => {
    assert.ok(isSeglogError(err), `expected SeglogError ${c}, got ${String(err)}`);
    assert.equal(err.code, c, String(err));
    return true;
  };
}

async function descriptors(): Promise<number> {
  return (await readdir('/proc/self/fd')).length;
}

async function withTempDir(f: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'seglog-groups-'));
  try {
    await f(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const GROUPS = 120;
const CACHE = 8;

test('every group of a node open: descriptors stay bounded by the open-file cache plus a constant', async () => {
  await withTempDir(async (dir) => {
    const fdCache = new FdCache({ max: CACHE });
    const options = { fdCache, segmentBytes: 64 * 1024, journalSegmentBytes: 64 * 1024 };
    let node = await openRaftNode(dir, options);
    for (let i = 0; i < GROUPS; i++) {
      const g = await node.openGroup(`g${i}`);
      await appendBlank(g, 1);
      await g.log.saveVote({ leaderId: TERM, committed: true });
      await g.log.saveCommitted({ leaderId: TERM, index: 1 });
    }
    await node.close();
    const before = await descriptors();
    node = await openRaftNode(dir, options);
    for (let i = 0; i < GROUPS; i++) {
      const g = await node.openGroup(`g${i}`);
      const got = await g.log.tryGetLogEntries(1, 2);
      assert.equal(got.length, 1);
      assert.deepEqual(await g.log.readVote(), { leaderId: TERM, committed: true });
    }
    const open = await descriptors();
    // Each group used to hold seven (two LOCK files, two manifests, three cells): 840 here.
    assert.ok(open - before <= CACHE + 16, `${open - before} descriptors for ${GROUPS} open groups (cache of ${CACHE})`);
    await node.close();
    assert.ok((await descriptors()) <= before + 2, 'close releases every descriptor');
  });
});

test('a group directory holds no lock file and no temporary cell file', async () => {
  const fs = new MemoryFs();
  const node = await openRaftNode('/n', { fs, segmentBytes: 4096, journalSegmentBytes: 4096 });
  const g = await node.openGroup('queue/a');
  await appendBlank(g, 1);
  await node.close();
  const dir = groupDirectory('/n', 'queue/a');
  const all: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const n of await fs.readdir(d)) {
      const p = path.join(d, n);
      if ((await fs.stat(p))?.isDirectory === true) await walk(p);
      else all.push(path.relative(dir, p));
    }
  };
  await walk(dir);
  assert.deepEqual(
    all.filter((n) => path.basename(n) === 'LOCK' || n.endsWith('.tmp')),
    [],
    `group files: ${all.join(', ')}`,
  );
  assert.ok((await fs.readdir('/n')).includes('LOCK'), 'the node keeps its one LOCK');
});

const here = path.dirname(fileURLToPath(import.meta.url));
const nodeModule = path.join(here, '..', 'lib', 'raft', 'node.js');

/** A child process that opens the node in `dir`, opens group g, prints "open", and waits for stdin to close. */
function holdInChild(dir: string): Promise<{ done: Promise<void>; release: () => void }> {
  const script = `
    import { openRaftNode } from ${JSON.stringify(nodeModule)};
    const node = await openRaftNode(${JSON.stringify(dir)});
    await node.openGroup('g0');
    process.stdout.write('open\\n');
    process.stdin.on('end', async () => { await node.close(); process.exit(0); });
    process.stdin.resume();
  `;
  return new Promise((resolve, reject) => {
    const child = execFile(process.execPath, ['--input-type=module', '-e', script], (err) => {
      if (err !== null) reject(err);
    });
    const done = new Promise<void>((r) => child.on('exit', () => r()));
    child.stdout?.on('data', (d: Buffer) => {
      if (d.toString().includes('open')) resolve({ done, release: () => child.stdin?.end() });
    });
  });
}

test('two processes cannot open one node: the node LOCK refuses the second, group logs included', async () => {
  await withTempDir(async (dir) => {
    const node = await openRaftNode(dir);
    await appendBlank(await node.openGroup('g0'), 1);
    await node.close();
    const held = await holdInChild(dir);
    try {
      await assert.rejects(openRaftNode(dir), code('LOCKED'));
      // The offline scan of the logs takes the node's LOCK too (the logs have none of their own).
      await assert.rejects(
        (async () => {
          for await (const r of listPayloadReferences(dir)) void r;
        })(),
        code('LOCKED'),
      );
    } finally {
      held.release();
      await held.done;
    }
    const again = await openRaftNode(dir);
    assert.deepEqual(await (await again.openGroup('g0')).log.tryGetLogEntries(1, 2).then((e) => e.length), 1);
    await again.close();
  });
});

test('groups recover concurrently, each in order: the registry and the report in directory order; a damaged group fails the open and leaves nothing open', async () => {
  await withTempDir(async (dir) => {
    const fdCache = new FdCache({ max: CACHE });
    const options = { fdCache, segmentBytes: 64 * 1024, journalSegmentBytes: 64 * 1024 };
    let node = await openRaftNode(dir, options);
    const ids = Array.from({ length: 40 }, (_, i) => `q${i}`);
    for (const id of ids) {
      const g = await node.openGroup(id);
      await appendBlank(g, 0);
      await appendBlank(g, 1);
      await g.log.saveCommitted({ leaderId: TERM, index: 1 });
    }
    await node.close();
    node = await openRaftNode(dir, options);
    const order = [...ids].sort((a, b) => (path.basename(groupDirectory(dir, a)) < path.basename(groupDirectory(dir, b)) ? -1 : 1));
    assert.deepEqual(node.groupIds(), order);
    assert.deepEqual([...node.recovery.keys()], order);
    for (const id of ids) {
      const r = node.recovery.get(id);
      assert.equal(r?.lastLogId?.index, 1);
      // Reconciliation (step 4) saw the committed id of step 1: both entries replayed.
      assert.equal(r?.applied?.index, 1);
      assert.equal(r?.replayed, 2);
    }
    await node.close();

    // Damage one group's state cell: the open fails CORRUPT, and nothing stays open.
    const victim = groupDirectory(dir, ids[17] as string);
    await writeFile(path.join(victim, 'state.cell'), Buffer.alloc(8192, 0x5a));
    const before = await descriptors();
    await assert.rejects(openRaftNode(dir, options), code('CORRUPT'));
    assert.ok((await descriptors()) <= before + 2, 'a failed open closes every group it opened');
    await assert.rejects(openRaftNode(dir, options), code('CORRUPT'), 'and leaves the node lock free');
  });
});

test('an owned cell: values survive a reopen, no file before the first write, damage is CORRUPT, a failed write poisons', async () => {
  const fs = new MemoryFs();
  await fs.mkdir('/c');
  const cell = await openOwnedCell('/c/x.cell', { fs });
  assert.equal(await cell.read(), null);
  assert.deepEqual(await fs.readdir('/c'), [], 'a never-written cell leaves no file');
  await cell.write(new Uint8Array([1, 2, 3]));
  await cell.write(new Uint8Array([4, 5]));
  await cell.close();
  await assert.rejects(cell.write(new Uint8Array([9])), code('CLOSED'));
  const again = await openOwnedCell('/c/x.cell', { fs });
  assert.deepEqual(await again.read(), new Uint8Array([4, 5]));
  await again.close();
  await assert.rejects(openOwnedCell('/nowhere/x.cell', { fs }), code('NOT_FOUND'));

  await withTempDir(async (dir) => {
    const file = path.join(dir, 'y.cell');
    const c = await openOwnedCell(file, { fs: realFs });
    await c.write(new Uint8Array([7]));
    await c.close();
    await writeFile(file, Buffer.alloc(8192, 0x11));
    await assert.rejects(openOwnedCell(file, { fs: realFs }), code('CORRUPT'));
    // A write whose file vanished from under it fails and poisons the cell.
    await rm(file);
    const d = await openOwnedCell(file, { fs: realFs });
    await d.write(new Uint8Array([1]));
    await rm(dir, { recursive: true });
    await assert.rejects(d.write(new Uint8Array([2])));
    await assert.rejects(d.write(new Uint8Array([3])), code('POISONED'));
  });
});

test('a clean close leaves the CLEAN mark; the next open consumes it and syncs nothing it reads; a poisoned session or a lost mark means a syncing open', async () => {
  const { ManualClock } = await import('../lib/clock.js');
  const { FaultyFs } = await import('../lib/fs/faulty.js');
  const fs = new MemoryFs();
  const open = (on: import('../lib/fs/types.js').FileSystem = fs) => openRaftNode('/n', { fs: on, clock: new ManualClock(), segmentBytes: 4096 });
  const syncsSince = (from: number): number => (fs.trace ?? []).slice(from).filter((e) => e.kind === 'datasync' || e.kind === 'sync' || e.kind === 'syncDir').length;
  const first = await open();
  for (const id of ['a', 'b', 'c']) await appendBlank(await first.openGroup(id), 1);
  await first.close();
  assert.notEqual(await fs.stat('/n/CLEAN'), null, 'a clean close leaves the mark');

  let from = fs.trace?.length ?? 0;
  const second = await open();
  assert.equal(syncsSince(from), 0, 'an open after a clean close syncs nothing');
  assert.equal(await fs.stat('/n/CLEAN'), null, 'the open consumed the mark');
  for (const id of ['a', 'b', 'c']) assert.equal((await (await second.openGroup(id)).log.tryGetLogEntries(1, 2)).length, 1);
  await appendBlank(await second.openGroup('a'), 2);
  await second.close();

  // A session whose log write fails (the log poisoned) closes without the mark.
  const faulty = new FaultyFs(fs);
  const third = await open(faulty);
  faulty.fail({ kind: 'datasync', path: '*.seg' });
  await assert.rejects(appendBlank(await third.openGroup('b'), 2));
  await third.close();
  assert.equal(await fs.stat('/n/CLEAN'), null, 'a poisoned session leaves no mark');
  from = fs.trace?.length ?? 0;
  const fourth = await open();
  assert.ok(syncsSince(from) >= 9, `an open with no mark syncs what it reads (${syncsSince(from)} syncs)`);
  await fourth.close();

  // A node whose mark is gone (an older version's close, or a lost creation) opens syncing.
  await fs.unlink('/n/CLEAN');
  from = fs.trace?.length ?? 0;
  await (await open()).close();
  assert.ok(syncsSince(from) >= 9, 'no mark: the open syncs');
});

test('a group is small (one one-sector state cell, 1 KiB manifests); a manifest grows as its log gains segments; a group of the earlier layout (three cells of 4 KiB slots, 8 KiB manifest slots) opens and works', async () => {
  const { ManualClock } = await import('../lib/clock.js');
  const { encodeNewCellFile, peekGrowingCell } = await import('../cells/index.js');
  const { peekManifest } = await import('../segments/manifest.js');
  const fs = new MemoryFs({ trace: false });
  const open = () => openRaftNode('/n', { fs, clock: new ManualClock(), segmentBytes: 256 });
  const node = await open();
  const g = await node.openGroup('g');
  const dir = groupDirectory('/n', 'g');
  const size = async (rel: string): Promise<number> => (await fs.stat(path.join(dir, rel)))?.size ?? -1;
  assert.equal(await size('state.cell'), 512, 'the state cell: two 256-byte slots');
  for (const cell of THREE_CELLS) assert.equal(await size(cell), -1, `no ${cell}: the state cell holds its value`);
  assert.equal(await size('log/MANIFEST'), 1024);
  assert.equal(await size('sm'), -1, 'the state machine files wait for its first write');
  await g.stateMachine.apply([{ logId: { leaderId: TERM, index: 0 }, payload: { type: 'blank' } }]);
  assert.equal(await size('sm/journal/MANIFEST'), 1024);
  // One or two entries per 256-byte segment (two when the group's writer, which the node journal's
  // sync does not wait for, takes two appends at once): 40 segments or more outgrow the first
  // 512-byte slots (28 segments).
  const appendBig = (x: RaftGroup<KvPlugin>, index: number): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      x.log.append([{ logId: { leaderId: TERM, index }, payload: { type: 'normal', data: new Uint8Array(180).fill(index) } }], (err) => (err === null ? resolve() : reject(err))).catch(reject);
    });
  for (let i = 1; i <= 80; i++) await appendBig(g, i);
  assert.ok((await size('log/MANIFEST')) >= 2048, `the manifest grew (${await size('log/MANIFEST')} bytes)`);
  await g.log.saveVote({ leaderId: TERM, committed: true });
  await node.close();
  const reopened = await open();
  const h = await reopened.openGroup('g');
  assert.equal((await h.log.tryGetLogEntries(1, 100)).length, 80, 'every entry is there after the growth and a reopen');
  await reopened.close();

  // The earlier layout: the same values in three cells of 4096-byte slots and 8192-byte manifest slots.
  await toThreeCellLayout(dir, fs);
  const rewrite = async (rel: string, slotBytes: number, value: Uint8Array | null): Promise<void> => {
    assert.ok(value !== null, rel);
    const file = path.join(dir, rel);
    await fs.unlink(file);
    const fh = await fs.open(file, 'create-exclusive');
    await fh.write(encodeNewCellFile(slotBytes, value), 0);
    await fh.datasync();
    await fh.close();
  };
  for (const cell of THREE_CELLS) await rewrite(cell, 4096, await peekGrowingCell(fs, path.join(dir, cell), 256, 4096));
  for (const m of ['log/MANIFEST', 'sm/journal/MANIFEST']) await rewrite(m, 8192, await peekManifest(path.join(dir, m), fs));
  const old = await open();
  const o = await old.openGroup('g');
  assert.equal((await o.log.tryGetLogEntries(1, 100)).length, 80);
  assert.deepEqual((await o.log.readVote())?.leaderId, TERM);
  await o.log.saveVote({ leaderId: { term: 2, nodeId: 1 }, committed: false });
  await appendBig(o, 81);
  await old.close();
  assert.equal(await size('vote.cell'), 8192, 'an earlier cell keeps its slot size');
  assert.equal(await size('state.cell'), -1, 'a group of the earlier layout keeps it: no state cell is made');
  const last = await open();
  assert.equal((await last.openGroup('g').then((x) => x.log.readVote()))?.leaderId.term, 2);
  await last.close();
});
