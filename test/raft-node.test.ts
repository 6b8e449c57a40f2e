// The file-system Raft node (lib/raft/node.ts) beyond the conformance suite: group ids and
// directories, the node lock, the ordering rule across log and payloads (PAYLOAD_MISSING, the
// payload store's GC kept off named payloads), recovery (CORRUPT for a missing payload, the
// reconciliation of committed entries, an interrupted purge finished), payload references rebuilt
// from the logs, and faults (EIO / ENOSPC on writes and syncs: typed errors, then POISONED).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';

import { ManualClock } from '../lib/clock.js';
import { isSeglogError } from '../lib/errors.js';
import { FaultyFs } from '../lib/fs/faulty.js';
import { MemoryFs } from '../lib/fs/memory.js';
import type { FileSystem } from '../lib/fs/types.js';
import { encodeKvCommand } from '../lib/raft/kv.js';
import { groupDirectory, listPayloadReferences, openRaftNode, rebuildPayloadReferences, type RaftGroup, type RaftNodeOptions } from '../lib/raft/node.js';
import type { Entry, LogId } from '../lib/raft/types.js';
import type { KvPlugin } from '../lib/raft/kv.js';
import { appendFlushed, code } from './support/raft-calls.js';

const DIR = '/node';

function lid(term: number, index: number): LogId {
  return { leaderId: { term, nodeId: 1 }, index };
}

function kv(term: number, index: number, key = `k${index}`, payloads?: string[]): Entry {
  const data = encodeKvCommand({ op: 'set', key, value: new TextEncoder().encode(`v${term}.${index}`) });
  return { logId: lid(term, index), payload: payloads === undefined ? { type: 'normal', data } : { type: 'normal', data, payloads } };
}

function open(fs: FileSystem, graceMs = 0, clock = new ManualClock(), journalMode?: 'journal') {
  return openRaftNode(DIR, {
    fs,
    clock,
    payloads: { graceMs },
    segmentBytes: 4096,
    journalSegmentBytes: 4096,
    ...(journalMode === undefined ? {} : { journalMode }),
  } as RaftNodeOptions<KvPlugin>);
}

async function put(node: { payloads: { put(b: AsyncIterable<Uint8Array>): Promise<{ digest: string }> } }, text: string): Promise<string> {
  return (
    await node.payloads.put(
      (async function* () {
        yield new TextEncoder().encode(text);
      })(),
    )
  ).digest;
}

function blobPath(digest: string): string {
  const hex = digest.slice('sha256:'.length);
  return path.posix.join(DIR, 'payloads', 'blobs', hex.slice(0, 2), hex);
}

async function logIds(g: RaftGroup<KvPlugin>): Promise<number[]> {
  return (await g.log.tryGetLogEntries(0, 1000)).map((e) => e.logId.index);
}

// ---------------------------------------------------------------------------------------------

test('group ids: any text becomes a hashed directory; invalid ids are refused; groups survive a reopen', async () => {
  const fs = new MemoryFs({ trace: false });
  let node = await open(fs);
  const ids = ['g', '../escape', '/', 'a/b/c', 'ünïcödé ✓', 'x'.repeat(512)];
  for (const id of ids) {
    const g = await node.openGroup(id);
    assert.equal(g, await node.openGroup(id), 'the same group object each time');
    await appendFlushed(g, [kv(1, 0, id.slice(0, 10))]);
  }
  for (const bad of ['', 'x'.repeat(513), 'lone \ud800 surrogate', 42 as unknown as string]) {
    await assert.rejects(node.openGroup(bad), code('INVALID'), JSON.stringify(bad).slice(0, 20));
  }
  const dirs = await fs.readdir(path.posix.join(DIR, 'groups'));
  assert.equal(dirs.length, ids.length);
  assert.ok(dirs.every((d) => /^[0-9a-f]{64}$/.test(d)), 'no group id is a path');
  await node.close();

  node = await open(fs);
  assert.deepEqual(node.groupIds().sort(), [...ids].sort());
  for (const id of ids) {
    const g = await node.openGroup(id);
    assert.deepEqual(await logIds(g), [0]);
    assert.equal(node.recovery.get(id)?.lastLogId?.index, 0);
  }
  await node.close();
});

test('a group creation that never reached its rename is removed at open; the node is locked while open', async () => {
  const fs = new MemoryFs({ trace: false });
  const node = await open(fs);
  await node.openGroup('kept');
  await assert.rejects(open(fs), code('LOCKED'));
  await node.close();
  await fs.mkdir(path.posix.join(DIR, 'groups', 'tmp-0123456789abcdef', 'sm', 'snapshots'));
  const again = await open(fs);
  assert.deepEqual(await fs.readdir(path.posix.join(DIR, 'groups')), [path.basename(groupDirectory(DIR, 'kept'))]);
  assert.deepEqual(again.groupIds(), ['kept']);
  await again.close();
});

test('ordering rule: an entry naming a payload that is not durable here is refused with PAYLOAD_MISSING and appends nothing', async () => {
  const fs = new MemoryFs({ trace: false });
  const node = await open(fs);
  const g = await node.openGroup('q');
  await appendFlushed(g, [kv(1, 0)]);
  const absent = 'sha256:' + 'ab'.repeat(32);
  let called = false;
  await assert.rejects(
    g.log.append([kv(1, 1, 'a', [absent])], () => (called = true)),
    (err: unknown) => {
      code('PAYLOAD_MISSING')(err);
      assert.equal((err as { details: Record<string, unknown> }).details['digest'], absent);
      assert.equal((err as { details: Record<string, unknown> }).details['group'], 'q');
      return true;
    },
  );
  // A later append issued behind the refused one sees that nothing was appended (a hole otherwise).
  const behind = g.log.append([kv(1, 2)], () => assert.fail('no callback for a refused append'));
  const refused = g.log.append([kv(1, 1, 'b', [absent])], () => assert.fail('no callback'));
  await assert.rejects(refused, code('PAYLOAD_MISSING'));
  await assert.rejects(behind, code('INVALID'));
  assert.equal(called, false, 'no flush callback for a refused append');
  assert.deepEqual(await logIds(g), [0], 'nothing appended');
  assert.equal(node.isNamed(absent), false, 'a refused append names nothing');

  const digest = await put(node, 'body of entry 1');
  await appendFlushed(g, [kv(1, 1, 'a', [digest]), kv(1, 2)]);
  assert.deepEqual(await logIds(g), [0, 1, 2]);
  assert.equal(node.isNamed(digest), true);
  const [e1] = await g.log.tryGetLogEntries(1, 2);
  assert.deepEqual(e1?.payload.type === 'normal' ? e1.payload.payloads : null, [digest]);
  await node.close();
});

test('payload GC never removes a payload a live log record names; truncate and purge release it once durable', async () => {
  const fs = new MemoryFs({ trace: false });
  let node = await open(fs, 0);
  const g = await node.openGroup('gc');
  const d1 = await put(node, 'one');
  const d2 = await put(node, 'two');
  const d3 = await put(node, 'three');
  const loose = await put(node, 'nobody names me');
  await appendFlushed(g, [kv(1, 0, 'a', [d1]), kv(1, 1), kv(1, 2, 'b', [d2, d3]), kv(1, 3, 'c', [d3])]);
  let report = await node.payloads.collectGarbage();
  assert.equal(report.removed, 1, 'only the unnamed payload (grace 0, no holder) goes');
  assert.equal(await node.payloads.stat(loose), null);
  for (const d of [d1, d2, d3]) assert.notEqual(await node.payloads.stat(d), null);
  await node.close();

  // The names are rebuilt from the logs at open.
  node = await open(fs, 0);
  const again = await node.openGroup('gc');
  assert.equal(node.recovery.get('gc')?.namingRecords, 3);
  assert.equal((await node.payloads.collectGarbage()).removed, 0);
  await again.log.truncate(lid(1, 3)); // d3 still named by entry 2
  assert.equal((await node.payloads.collectGarbage()).removed, 0);
  await again.log.purge(lid(1, 0)); // d1 no longer named
  report = await node.payloads.collectGarbage();
  assert.equal(report.removed, 1);
  assert.equal(await node.payloads.stat(d1), null);
  await again.log.truncate(lid(1, 2));
  assert.equal((await node.payloads.collectGarbage()).removed, 2);
  assert.equal(node.isNamed(d2) || node.isNamed(d3), false);
  await node.close();
});

test('recovery: a log record whose payload is missing fails the open with CORRUPT naming group, log id and digest', async () => {
  const fs = new MemoryFs({ trace: false });
  const node = await open(fs);
  const g = await node.openGroup('orders');
  const digest = await put(node, 'the body');
  await appendFlushed(g, [kv(1, 0), kv(2, 1, 'x', [digest])]);
  await node.close();
  await fs.unlink(blobPath(digest)); // damage: the payload vanished
  await assert.rejects(open(fs), (err: unknown) => {
    code('CORRUPT')(err);
    const d = (err as { details: Record<string, unknown> }).details;
    assert.equal(d['group'], 'orders');
    assert.equal(d['digest'], digest);
    assert.equal(d['index'], 1);
    assert.equal(d['term'], 2);
    assert.match((err as Error).message, /orders.*2-1-1.*sha256:/);
    return true;
  });
  // The failed open released its lock: a second open finds the same corruption, not LOCKED.
  await assert.rejects(open(fs), code('CORRUPT'));
});

test('a collection running between an append\'s payload check and its staging never removes that payload', async () => {
  const fs = new FaultyFs(new MemoryFs({ trace: false }));
  const node = await open(fs, 0);
  const g = await node.openGroup('race');
  await g.log.saveVote({ leaderId: { term: 1, nodeId: 1 }, committed: false });
  const digest = await put(node, 'a body');
  // A vote whose sync is held keeps the queue: the append behind it has checked its payload
  // (present) but is not staged yet when the collection runs.
  const pause = fs.pause('datasync', (p) => p.endsWith('/state.cell'));
  const vote = g.log.saveVote({ leaderId: { term: 2, nodeId: 1 }, committed: false });
  await pause.reached;
  const appended = appendFlushed(g, [kv(2, 0, 'k', [digest])]);
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
  assert.equal(node.isNamed(digest), true, 'named from the moment the append was called');
  await node.payloads.collectGarbage();
  pause.release();
  await vote;
  await appended;
  assert.notEqual(await node.payloads.stat(digest), null, 'the payload survives the collection');
  await node.close();
  await (await open(fs, 0)).close(); // and the open finds it
});

test('recovery: committed entries after the applied position are replayed; entries after the committed id are not applied', async () => {
  const fs = new MemoryFs({ trace: false });
  let node = await open(fs);
  let g = await node.openGroup('r');
  await appendFlushed(g, [kv(1, 0, 'a'), kv(1, 1, 'b'), kv(1, 2, 'a'), kv(1, 3, 'c'), kv(1, 4, 'd'), kv(1, 5, 'e')]);
  await g.stateMachine.apply(await g.log.tryGetLogEntries(0, 2));
  await g.log.saveCommitted(lid(1, 3));
  await node.close();

  node = await open(fs);
  g = await node.openGroup('r');
  const rec = node.recovery.get('r');
  assert.equal(rec?.replayed, 2);
  assert.deepEqual(rec?.applied, lid(1, 3));
  assert.equal(rec?.behindLog, false);
  assert.deepEqual((await g.stateMachine.appliedState())[0], lid(1, 3));
  assert.equal(new TextDecoder().decode(g.stateMachine.plugin.get('a') ?? new Uint8Array()), 'v1.2');
  assert.equal(g.stateMachine.plugin.get('d'), null, 'entry 4 is after the committed id: not applied');
  await node.close();

  // Reopened again: nothing more to replay.
  node = await open(fs);
  assert.equal(node.recovery.get('r')?.replayed, 0);
  await node.close();
});

test("recovery: a committed id that is not the log's entry at its index is CORRUPT, whether it names the last entry or one before it", async () => {
  // The last entry's id comes from the read that finds the log's end; an earlier one is read for
  // the check. Either way the committed pointer names an entry the log does not hold.
  for (const committed of [lid(2, 5), lid(2, 3)]) {
    const fs = new MemoryFs({ trace: false });
    const node = await open(fs);
    const g = await node.openGroup('c');
    await appendFlushed(g, [kv(1, 0, 'a'), kv(1, 1, 'b'), kv(1, 2, 'a'), kv(1, 3, 'c'), kv(1, 4, 'd'), kv(1, 5, 'e')]);
    await g.stateMachine.apply(await g.log.tryGetLogEntries(0, 1));
    await g.log.saveCommitted(committed);
    await node.close();
    const i = committed.index;
    await assert.rejects(
      open(fs),
      (err: unknown) => isSeglogError(err, 'CORRUPT') && err.message.includes(`the committed id (2-1-${i}) differs from the log's entry at its index (1-1-${i})`),
      `committed ${i}`,
    );
  }
});

test('recovery: a purge whose purged id was durable but whose drop failed is finished at open', async () => {
  const mem = new MemoryFs({ trace: false });
  const fs = new FaultyFs(mem);
  let node = await open(fs);
  const g = await node.openGroup('p');
  await appendFlushed(g, Array.from({ length: 8 }, (_, i) => kv(1, i)));
  // The drop commits the log's manifest: fail that write, after the purged cell is durable.
  fs.fail({ kind: 'write', path: (p) => p.endsWith('/log/MANIFEST') });
  await assert.rejects(g.log.purge(lid(1, 4)), code('IO_ERROR'));
  await assert.rejects(g.log.saveVote({ leaderId: { term: 1, nodeId: 1 }, committed: false }), code('POISONED'));
  await node.close();
  fs.clearFaults();
  node = await open(fs);
  const again = await node.openGroup('p');
  assert.equal(node.recovery.get('p')?.finishedPurge, true);
  assert.deepEqual(await again.log.getLogState(), { lastPurgedLogId: lid(1, 4), lastLogId: lid(1, 7) });
  assert.deepEqual(await logIds(again), [5, 6, 7]);
  await node.close();
});

test('payload references are rebuilt from the logs (for seglog verify)', async () => {
  const fs = new MemoryFs({ trace: false });
  const node = await open(fs);
  const a = await node.openGroup('a');
  const b = await node.openGroup('b');
  const d1 = await put(node, 'p1');
  const d2 = await put(node, 'p2');
  await appendFlushed(a, [kv(1, 0, 'x', [d1]), kv(1, 1), kv(1, 2, 'y', [d1, d2])]);
  await appendFlushed(b, [kv(1, 0, 'z', [d2])]);
  await a.log.purge(lid(1, 0));
  await node.close();
  const refs = [];
  for await (const r of listPayloadReferences(DIR, { fs })) refs.push(`${r.group}@${r.logId.index}:${r.digest.slice(7, 11)}`);
  assert.deepEqual(refs.sort(), [`a@2:${d1.slice(7, 11)}`, `a@2:${d2.slice(7, 11)}`, `b@0:${d2.slice(7, 11)}`].sort());
  const byDigest = await rebuildPayloadReferences(DIR, { fs });
  assert.equal(byDigest.get(d2)?.length, 2);
  assert.equal(byDigest.get(d1)?.length, 1);
});

// ---------------------------------------------------------------------------------------------
// Faults

/** A segment file of the node journal (not a group's applied journal, under sm/journal/). */
const journalSegment = (p: string): boolean => p.startsWith(`${DIR}/journal/`) && p.endsWith('.seg');

for (const mode of ['direct', 'journal'] as const) {
/** Where a group's appends become durable: its own log's segments (a lone group), or the node journal's. */
const durableSegment = mode === 'journal' ? journalSegment : (p: string): boolean => p.includes('/groups/') && p.includes('/log/') && p.endsWith('.seg');
const openMode = (fs: FileSystem) => open(fs, 0, new ManualClock(), mode === 'journal' ? 'journal' : undefined);

test(`faults (${mode}): EIO on the write that makes appends durable → onFlushed(IO_ERROR), then POISONED; a reopen recovers the acknowledged entries`, async () => {
  const fs = new FaultyFs(new MemoryFs({ trace: false }));
  let node = await openMode(fs);
  let g = await node.openGroup('f');
  await appendFlushed(g, [kv(1, 0), kv(1, 1)]);
  fs.fail({ kind: 'writev', path: durableSegment });
  await assert.rejects(appendFlushed(g, [kv(1, 2)]), code('IO_ERROR'));
  await assert.rejects(g.log.append([kv(1, 2)], () => {}), code('POISONED'));
  await assert.rejects(g.log.saveVote({ leaderId: { term: 2, nodeId: 1 }, committed: false }), code('POISONED'));
  await assert.rejects(g.log.truncate(lid(1, 1)), code('POISONED'));
  await node.close();
  node = await openMode(fs);
  g = await node.openGroup('f');
  assert.deepEqual(await logIds(g), [0, 1]);
  await appendFlushed(g, [kv(1, 2)]);
  await node.close();
});

test(`faults (${mode}): ENOSPC on the fdatasync that makes appends durable → onFlushed(NO_SPACE) for every append it covered, then POISONED`, async () => {
  const fs = new FaultyFs(new MemoryFs({ trace: false }));
  let node = await openMode(fs);
  let g = await node.openGroup('f');
  await appendFlushed(g, [kv(1, 0)]);
  fs.fail({ kind: 'datasync', path: durableSegment, error: 'ENOSPC' });
  const results = await Promise.allSettled([appendFlushed(g, [kv(1, 1)]), appendFlushed(g, [kv(1, 2)]), appendFlushed(g, [kv(1, 3)])]);
  for (const r of results) {
    assert.equal(r.status, 'rejected');
    assert.ok(isSeglogError(r.reason) && (r.reason.code === 'NO_SPACE' || r.reason.code === 'POISONED'), String(r.status === 'rejected' ? r.reason : ''));
  }
  assert.ok(results.some((r) => r.status === 'rejected' && isSeglogError(r.reason, 'NO_SPACE')));
  await assert.rejects(g.log.append([kv(1, 4)], () => {}), code('POISONED'));
  await assert.rejects(g.log.saveCommitted(lid(1, 0)), code('POISONED'));
  await node.close();
  fs.clearFaults();
  node = await openMode(fs);
  g = await node.openGroup('f');
  const ids = await logIds(g);
  assert.deepEqual(ids.slice(0, 1), [0], 'the acknowledged entry survives');
  await node.close();
});
}

test("faults: EIO on a journaled group's own segment write poisons the group; what the journal acknowledged survives a reopen", async () => {
  const fs = new FaultyFs(new MemoryFs({ trace: false }));
  // A checkpoint after every record: the group's held appends are written (and fail) at once.
  let node = await openRaftNode(DIR, { fs, clock: new ManualClock(), segmentBytes: 4096, journalMode: 'journal', journalCheckpointBytes: 1 } as RaftNodeOptions<KvPlugin>);
  let g = await node.openGroup('f');
  const other = await node.openGroup('other');
  await appendFlushed(g, [kv(1, 0), kv(1, 1)]);
  fs.fail({ kind: 'writev', path: (p) => p.includes('/groups/') && p.includes('/log/') && p.endsWith('.seg') && !p.includes('/sm/') });
  // The journal holds the entry durably: the flush callback may say so, while the group's own
  // write fails and the group refuses every later write until a reopen.
  const [third] = await Promise.allSettled([appendFlushed(g, [kv(1, 2)])]);
  // The checkpoint that writes the group's log runs off the append path: wait for its failure.
  for (let i = 0; i < 200 && !g.log.isPoisoned; i++) await new Promise((r) => setTimeout(r, 1));
  assert.ok(g.log.isPoisoned, 'the failed write of the group log poisons the group');
  await assert.rejects(g.log.append([kv(1, 3)], () => {}), code('POISONED'));
  await assert.rejects(g.log.saveVote({ leaderId: { term: 2, nodeId: 1 }, committed: false }), code('POISONED'));
  fs.clearFaults();
  // Another group of the node is not affected.
  await appendFlushed(other, [kv(1, 0)]);
  await node.close();
  node = await open(fs);
  g = await node.openGroup('f');
  const ids = await logIds(g);
  assert.deepEqual(ids.slice(0, 2), [0, 1], 'the acknowledged entries survive');
  if (third?.status === 'fulfilled') assert.deepEqual(ids, [0, 1, 2], 'an append the journal acknowledged survives');
  assert.ok(ids.length <= 3);
  assert.deepEqual(await logIds(await node.openGroup('other')), [0]);
  await node.close();
});

test('faults: EIO on the state cell under a vote → saveVote rejects, then POISONED; the old vote survives a reopen', async () => {
  const fs = new FaultyFs(new MemoryFs({ trace: false }));
  let node = await open(fs);
  let g = await node.openGroup('v');
  await g.log.saveVote({ leaderId: { term: 1, nodeId: 1 }, committed: true });
  fs.fail({ kind: 'datasync', path: (p) => p.endsWith('/state.cell') });
  await assert.rejects(g.log.saveVote({ leaderId: { term: 2, nodeId: 2 }, committed: false }), code('IO_ERROR'));
  await assert.rejects(g.log.saveVote({ leaderId: { term: 3, nodeId: 2 }, committed: false }), code('POISONED'));
  await assert.rejects(g.log.append([kv(1, 0)], () => {}), code('POISONED'));
  await node.close();
  fs.clearFaults();
  node = await open(fs);
  g = await node.openGroup('v');
  const vote = await g.log.readVote();
  assert.ok(vote !== null && (vote.leaderId.term === 1 || vote.leaderId.term === 2), 'the old vote, or the one whose sync failed');
  await node.close();
});

test('faults: ENOSPC on the state cell under a committed pointer and on the journal; a failed snapshot build leaves nothing behind', async () => {
  const mem = new MemoryFs({ trace: false });
  const fs = new FaultyFs(mem);
  let node = await open(fs);
  let g = await node.openGroup('c');
  await appendFlushed(g, [kv(1, 0), kv(1, 1)]);
  await g.stateMachine.apply([kv(1, 0)]);

  // A snapshot build that runs out of space: rejected, nothing changed, no temporary file left.
  const rule = fs.fail({ kind: 'write', path: (p) => p.endsWith('.part'), error: 'ENOSPC' });
  await assert.rejects((await g.stateMachine.getSnapshotBuilder()).buildSnapshot(), code('NO_SPACE'));
  rule.remove();
  const snaps = await mem.readdir(path.posix.join(groupDirectory(DIR, 'c'), 'sm', 'snapshots'));
  assert.deepEqual(snaps, [], 'no temporary file left');
  assert.equal(await g.stateMachine.getCurrentSnapshot(), null);
  await g.stateMachine.apply([kv(1, 1)]); // not poisoned

  await g.log.saveCommitted(lid(1, 0));
  fs.fail({ kind: 'datasync', path: (p) => p.endsWith('/state.cell'), error: 'ENOSPC' });
  await assert.rejects(g.log.saveCommitted(lid(1, 1)), code('NO_SPACE'));
  await assert.rejects(g.log.saveCommitted(lid(1, 1)), code('POISONED'));
  fs.fail({ kind: 'datasync', path: (p) => p.includes('/sm/journal/') && p.endsWith('.seg'), error: 'EIO' });
  await assert.rejects(g.stateMachine.apply([kv(1, 2)]), code('IO_ERROR'));
  await assert.rejects(g.stateMachine.apply([kv(1, 3)]), code('POISONED'));
  await node.close();
  fs.clearFaults();
  node = await open(fs);
  g = await node.openGroup('c');
  const [applied] = await g.stateMachine.appliedState();
  assert.ok(applied !== null && applied.index >= 1, 'every acknowledged apply survives');
  await node.close();
});

test('faults: a group creation whose write, file sync or directory sync fails is refused, leaves nothing, and can be made again', async () => {
  const mem = new MemoryFs({ trace: false });
  const fs = new FaultyFs(mem);
  const node = await open(fs);
  const cases = [
    { kind: 'write', path: (p: string) => p.includes('/tmp-') && p.endsWith('/state.cell'), error: 'ENOSPC', want: 'NO_SPACE' },
    { kind: 'datasync', path: (p: string) => p.includes('/tmp-') && p.includes('/log/') && p.endsWith('.seg'), error: 'EIO', want: 'IO_ERROR' },
    { kind: 'syncDir', path: (p: string) => p.includes('/tmp-') && p.endsWith('/log'), error: 'ENOSPC', want: 'NO_SPACE' },
    { kind: 'rename', path: (p: string) => p.includes('/tmp-'), error: 'EIO', want: 'IO_ERROR' },
  ] as const;
  for (const [k, c] of cases.entries()) {
    const id = `new-${k}`;
    const rule = fs.fail({ kind: c.kind, path: c.path, error: c.error });
    await assert.rejects(node.openGroup(id), code(c.want), `${c.kind}: refused with ${c.want}`);
    rule.remove();
    assert.ok(!node.groupIds().includes(id), `${c.kind}: the group is not there`);
    const left = (await mem.readdir(path.posix.join(DIR, 'groups'))).filter((n) => n.startsWith('tmp-'));
    assert.deepEqual(left, [], `${c.kind}: no temporary directory left`);
    // Made again without the fault: a whole, empty group that takes an entry.
    const g = await node.openGroup(id);
    await appendFlushed(g, [kv(1, 0)]);
    assert.deepEqual((await g.log.getLogState()).lastLogId, lid(1, 0));
  }
  await node.close();
  const again = await open(fs);
  for (const [k] of cases.entries()) assert.deepEqual((await (await again.openGroup(`new-${k}`)).log.getLogState()).lastLogId, lid(1, 0));
  await again.close();
});

test('write calls queued behind a barrier take effect in call order', async () => {
  const fs = new MemoryFs({ trace: false });
  let node = await open(fs);
  const g = await node.openGroup('o');
  const flushed: number[] = [];
  const cb = (i: number) => (err: Error | null) => {
    assert.equal(err, null);
    flushed.push(i);
  };
  const calls = [
    g.log.append([kv(1, 0), kv(1, 1), kv(1, 2)], cb(0)),
    g.log.saveVote({ leaderId: { term: 1, nodeId: 1 }, committed: false }),
    g.log.append([kv(1, 3)], cb(1)),
    g.log.purge(lid(1, 1)),
    g.log.append([kv(1, 4)], cb(2)),
    g.log.truncate(lid(1, 4)),
    g.log.append([kv(2, 4)], cb(3)),
    g.log.saveCommitted(lid(2, 4)),
    g.log.append([], cb(4)),
    g.log.saveVote({ leaderId: { term: 2, nodeId: 1 }, committed: true }),
  ];
  await Promise.all(calls);
  await node.close();
  assert.deepEqual(flushed, [0, 1, 2, 3, 4], 'callbacks in call order');
  node = await open(fs);
  const again = await node.openGroup('o');
  assert.deepEqual((await again.log.tryGetLogEntries(0, 10)).map((e) => `${e.logId.leaderId.term}.${e.logId.index}`), ['1.2', '1.3', '2.4']);
  assert.deepEqual(await again.log.readCommitted(), lid(2, 4));
  assert.equal((await again.log.readVote())?.leaderId.term, 2);
  await node.close();
});

test('large records recycle their buffers without any read seeing another entry\'s bytes', async () => {
  const fs = new MemoryFs({ trace: false });
  const node = await openRaftNode(DIR, { fs, segmentBytes: 1024 * 1024 });
  const g = await node.openGroup('big');
  const size = 100 * 1024;
  const body = (i: number): Uint8Array => new Uint8Array(size).fill(i & 0xff);
  const check = async (from: number, to: number): Promise<void> => {
    for (const e of await g.log.tryGetLogEntries(from, to)) {
      assert.ok(e.payload.type === 'normal');
      const d = e.payload.data;
      assert.equal(d.length, size);
      assert.ok(d[0] === (e.logId.index & 0xff) && d[size - 1] === (e.logId.index & 0xff), `entry ${e.logId.index} holds its own bytes`);
    }
  };
  const reads: Promise<void>[] = [];
  const flushes: Promise<void>[] = [];
  for (let i = 0; i < 120; i++) {
    flushes.push(appendFlushed(g, [{ logId: lid(1, i), payload: { type: 'normal', data: body(i) } }]));
    if (i % 3 === 0) reads.push(check(Math.max(0, i - 8), i + 1));
    if (i % 10 === 9) await Promise.all(flushes.splice(0));
  }
  await Promise.all([...flushes, ...reads]);
  await check(0, 120);
  await node.close();
});

test('a read that captured a staged large record before it was written never sees a recycled buffer', async () => {
  const fs = new FaultyFs(new MemoryFs({ trace: false }));
  const node = await openRaftNode(DIR, { fs, segmentBytes: 4 * 1024 * 1024 });
  const g = await node.openGroup('race');
  const size = 200 * 1024;
  const big = (i: number): Entry => ({ logId: lid(1, i), payload: { type: 'normal', data: new Uint8Array(size).fill(i) } });
  await appendFlushed(g, [big(0), big(1), big(2)]);
  // The read of entries 1..3 reaches the disk for 1..2 (held) after capturing entry 3 staged.
  const pause = fs.pause('read', (p) => p.endsWith('.seg'));
  const flushed3 = appendFlushed(g, [big(3)]);
  const read = g.log.tryGetLogEntries(1, 4);
  await pause.reached;
  await flushed3; // entry 3 is durable: its buffer goes back to the pool
  await appendFlushed(g, [big(4)]); // a new large record: must not reuse entry 3's buffer yet
  pause.release();
  const got = await read;
  assert.deepEqual(got.map((e) => e.logId.index), [1, 2, 3]);
  for (const e of got) assert.ok(e.payload.type === 'normal' && e.payload.data.every((b) => b === e.logId.index), `entry ${e.logId.index} holds its own bytes`);
  await node.close();
});

test('an entry larger than maxEntryBytes is refused with TOO_LARGE by append and by apply, and nothing changes', async () => {
  const fs = new MemoryFs({ trace: false });
  const node = await openRaftNode(DIR, { fs, maxEntryBytes: 4096 });
  const g = await node.openGroup('t');
  const big: Entry = { logId: lid(1, 0), payload: { type: 'normal', data: new Uint8Array(5000) } };
  await assert.rejects(g.log.append([big], () => assert.fail('no callback')), code('TOO_LARGE'));
  await assert.rejects(g.stateMachine.apply([big]), code('TOO_LARGE'));
  await appendFlushed(g, [kv(1, 0)]);
  await g.stateMachine.apply([kv(1, 0)]);
  assert.deepEqual((await g.stateMachine.appliedState())[0], lid(1, 0));
  await node.close();
});
