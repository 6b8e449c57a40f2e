// What a journaled group keeps of the appends its own log has written but not yet synced: the
// node journal makes them durable, and the group's log is synced only by the journal's checkpoint
// (every 16 MiB of records) or its own sync policy, so whatever it keeps per append waits that
// long, through every young collection of the process (lib/raft/fs-log.ts "#watchLog",
// segments/syncer.ts). Measured on the real file system with the collector run by hand; and a
// journaled group whose own log fails is poisoned by that failure alone, whichever of its appends
// the failure reaches, refuses reads (its log no longer shows what the journal acknowledged), and
// what the journal acknowledged survives a reopen.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';

import { ManualClock } from '../lib/clock.js';
import { FaultyFs } from '../lib/fs/faulty.js';
import { MemoryFs } from '../lib/fs/memory.js';
import type { KvPlugin } from '../lib/raft/kv.js';
import { openRaftNode, type RaftGroup, type RaftNodeOptions } from '../lib/raft/node.js';
import type { Entry } from '../lib/raft/types.js';
import { appendFlushed, code } from './support/raft-calls.js';

v8.setFlagsFromString('--expose-gc');
const collectGarbage = vm.runInNewContext('gc') as () => void;

const DATA = new Uint8Array(256).fill(7);

function entry(index: number, data: Uint8Array = DATA): Entry {
  return { logId: { leaderId: { term: 1, nodeId: 1 }, index }, payload: { type: 'normal', data } };
}

/**
 * Heap bytes in use after two full collections. Not the ArrayBuffer bytes: a small record is a
 * slice of one of Node's 8 KiB allocation slabs and keeps it whole, and the up to 64 KiB of
 * appends a journaled group's log holds back unwritten (its write-behind: bounded, and served
 * from memory) pin a number of slabs that differs from one moment to the next, and between Node
 * versions, by megabytes.
 */
function heldBytes(): number {
  collectGarbage();
  collectGarbage();
  return process.memoryUsage().heapUsed;
}

test('a journaled group keeps a few hundred bytes per written append until its log is synced, not the append', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'seglog-journal-memory-'));
  try {
    // No checkpoint and no sync of the groups' logs by size in this test's range: every append
    // stays unsynced in its group's log until the close.
    const options = { journalMode: 'journal', journalCheckpointBytes: 1 << 30, journalIdleCheckpointMs: 0 } as RaftNodeOptions<KvPlugin>;
    let node = await openRaftNode(dir, options);
    const groups: RaftGroup<KvPlugin>[] = [];
    for (let g = 0; g < 4; g++) groups.push(await node.openGroup(`g${g}`));
    let next = 1;
    const rounds = async (n: number): Promise<void> => {
      for (let k = 0; k < n; k++) {
        const index = next++;
        await Promise.all(groups.map((g) => appendFlushed(g, [entry(index)])));
      }
    };
    // Warm: the code, the pools, the segments' first growth.
    await rounds(200);
    const before = heldBytes();
    const n = 3000;
    await rounds(n);
    const perAppend = (heldBytes() - before) / (n * groups.length);
    // The log used to keep each written append's op, records and the store's handlers until the
    // sync: over 2,000 bytes of heap an append in this loop (Node 20 and 24), and its record's
    // slab. Now its durable promise and that promise's resolvers: about 450.
    t.diagnostic(`heap kept per written, unsynced append: ${perAppend.toFixed(0)} bytes`);
    assert.ok(perAppend < 1000, `a written, unsynced append keeps ${perAppend.toFixed(0)} bytes of heap`);
    await node.close();
    node = await openRaftNode(dir, options);
    for (let g = 0; g < 4; g++) {
      const { log } = await node.openGroup(`g${g}`);
      const state = await log.getLogState();
      assert.equal(state.lastLogId?.index, next - 1, `group ${g} holds every append`);
      const [last] = await log.tryGetLogEntries(next - 1, next);
      assert.deepEqual(last, entry(next - 1));
    }
    await node.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("a journaled group is poisoned by a failed write or sync of its own log, whichever of its appends the failure reaches, and reads nothing from it", async () => {
  for (const [kind, failAfter] of [['writev', 0], ['writev', 3], ['writev', 7], ['datasync', 0], ['datasync', 5]] as const) {
    const fs = new FaultyFs(new MemoryFs({ trace: false }));
    // A journal checkpoint after every record: each one syncs the group's log, so the append
    // the group watches is made durable and the watch moves on to the newest (then to none).
    const options = { fs, clock: new ManualClock(), segmentBytes: 4096, journalMode: 'journal', journalCheckpointBytes: 1, journalIdleCheckpointMs: 0 } as RaftNodeOptions<KvPlugin>;
    let node = await openRaftNode('/node', options);
    let g = await node.openGroup('f');
    const other = await node.openGroup('other');
    for (let i = 0; i < failAfter; i++) await appendFlushed(g, [entry(i)]);
    // A failed write of the group's own segment, or a failed sync of it (the journal's checkpoint
    // after the next record syncs it).
    fs.fail({ kind, path: (p) => p.includes('/groups/') && p.includes('/log/') && p.endsWith('.seg') });
    // Several appends in flight at once: the failed write reaches some, the log's poison the rest.
    const settled = await Promise.allSettled([0, 1, 2].map((k) => appendFlushed(g, [entry(failAfter + k)])));
    for (let i = 0; i < 200 && !g.log.isPoisoned; i++) await new Promise((r) => setTimeout(r, 1));
    assert.ok(g.log.isPoisoned, `the failed ${kind} poisons the group (after ${failAfter} appends)`);
    await assert.rejects(g.log.append([entry(failAfter + 3)], () => {}), code('POISONED'));
    // Its log rolled back to what it last synced, without appends the journal may have
    // acknowledged: no read answers from it (an older log is never served for the real one).
    await assert.rejects(g.log.tryGetLogEntries(0, failAfter + 4), code('POISONED'));
    await assert.rejects(g.log.limitedGetLogEntries(0, failAfter + 4), code('POISONED'));
    await assert.rejects(g.log.getLogState(), code('POISONED'));
    await assert.rejects(g.log.getLogReader(), code('POISONED'));
    fs.clearFaults();
    await appendFlushed(other, [entry(0)]);
    await node.close();
    node = await openRaftNode('/node', options);
    g = await node.openGroup('f');
    // The journal may have acknowledged an append whose own write failed: each one acknowledged
    // survives, with every one before it (a group's appends take effect in call order).
    const lastAcknowledged = settled.map((s) => s.status).lastIndexOf('fulfilled');
    const held = (await g.log.tryGetLogEntries(0, failAfter + 4)).map((e) => e.logId.index);
    assert.deepEqual(held, Array.from({ length: held.length }, (_, i) => i), 'a prefix of the appends, from the first');
    assert.ok(held.length >= failAfter + lastAcknowledged + 1 && held.length <= failAfter + 3, `every acknowledged append survives (${held.length} held after ${failAfter} + ${lastAcknowledged + 1} acknowledged)`);
    await node.close();
  }
});
