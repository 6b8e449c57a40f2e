// The node journal (lib/raft/node-journal.ts, journal-format.ts, journal-replay.ts): its record
// format and checks, the replay plan against a model of the log (property test), many groups
// appending at once through one journal with power losses in between (every acknowledged entry
// of every group survives, as appended), and a node
// directory without its journal (an earlier version's after a clean close opens; otherwise
// CORRUPT).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';

import { MemoryFs } from '../lib/fs/memory.js';
import { ManualClock } from '../lib/clock.js';
import { isSeglogError } from '../lib/errors.js';
import { openRaftNode, type RaftGroup, type RaftNodeOptions } from '../lib/raft/node.js';
import type { KvPlugin } from '../lib/raft/kv.js';
import type { Entry } from '../lib/raft/types.js';
import { JOURNAL_HEADER_BYTES, decodeJournalEntries, decodeJournalHeader, encodeJournalAppend, encodeJournalTruncate } from '../lib/raft/journal-format.js';
import { planJournalState } from '../lib/raft/journal-replay.js';
import type { JournalOp } from '../lib/raft/node-journal.js';

const DIR = '/node';
const KEY = new Uint8Array(32).map((_, i) => i * 7);

function entry(term: number, index: number, data = `v${index}`): Entry {
  return { logId: { leaderId: { term, nodeId: 1 }, index }, payload: { type: 'normal', data: new TextEncoder().encode(data) } };
}

function appendFlushed(g: RaftGroup<KvPlugin>, entries: Entry[]): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    g.log.append(entries, (err) => (err === null ? resolve() : reject(err))).catch(reject);
  });
}

const open = (fs: MemoryFs, extra: object = {}) =>
  openRaftNode(DIR, { fs, clock: new ManualClock(), segmentBytes: 4096, journalSegmentBytes: 4096, ...extra } as RaftNodeOptions<KvPlugin>);

// ---------------------------------------------------------------------------------------------
// Records

test('journal records: an append and a truncation decode to what was encoded; every malformed one is CORRUPT', () => {
  const entries = [new Uint8Array([1, 2, 3]), new Uint8Array(0), new Uint8Array(300).fill(9)];
  const rec = encodeJournalAppend(KEY, 2 ** 40 + 5, entries);
  assert.deepEqual(decodeJournalHeader(rec, 0), { kind: 1, key: Buffer.from(KEY).toString('hex'), index: 2 ** 40 + 5, count: 3 });
  assert.deepEqual(
    decodeJournalEntries(rec, 0).map((e) => Buffer.from(e).toString('hex')),
    entries.map((e) => Buffer.from(e).toString('hex')),
  );
  const t = encodeJournalTruncate(KEY, 17);
  assert.equal(t.length, JOURNAL_HEADER_BYTES);
  assert.deepEqual(decodeJournalHeader(t, 3), { kind: 2, key: Buffer.from(KEY).toString('hex'), index: 17, count: 0 });
  const corrupt = (bytes: Uint8Array, entriesToo = false): void => {
    assert.throws(
      () => (entriesToo ? decodeJournalEntries(bytes, 9) : decodeJournalHeader(bytes, 9)),
      (err: unknown) => isSeglogError(err, 'CORRUPT') && /record 9/.test(err.message),
    );
  };
  corrupt(rec.subarray(0, 20));
  const kind = Buffer.from(rec);
  kind[0] = 3;
  corrupt(kind);
  const reserved = Buffer.from(rec);
  reserved[2] = 1;
  corrupt(reserved);
  const big = Buffer.from(t);
  big.writeUInt32LE(2 ** 21, 40);
  corrupt(big);
  const counted = Buffer.from(t);
  counted.writeUInt32LE(1, 44);
  corrupt(counted);
  const none = Buffer.from(rec);
  none.writeUInt32LE(0, 44);
  corrupt(none);
  corrupt(rec.subarray(0, rec.length - 1), true);
  corrupt(Buffer.concat([rec, Buffer.from([0])]), true);
  const long = Buffer.from(rec);
  long.writeUInt32LE(1 << 20, JOURNAL_HEADER_BYTES);
  corrupt(long, true);
  corrupt(t, true);
});

// ---------------------------------------------------------------------------------------------
// The replay plan against a model

test('the replay plan: the runs of planJournalState are exactly what the ops leave from `start` on (property)', () => {
  fc.assert(
    fc.property(
      fc.nat(50),
      fc.array(
        fc.oneof(
          fc.record({ kind: fc.constant('append' as const), count: fc.integer({ min: 1, max: 4 }), fresh: fc.option(fc.nat(60), { freq: 6 }) }),
          fc.record({ kind: fc.constant('truncate' as const), back: fc.nat(6) }),
        ),
        { minLength: 1, maxLength: 30 },
      ),
      (initialEnd, model) => {
        // The model: a log that starts holding [0, initialEnd) of unknown entries ('?').
        let log: (string | null)[] = Array.from({ length: initialEnd }, () => '?');
        let first = 0;
        const ops: JournalOp[] = [];
        model.forEach((m, at) => {
          if (m.kind === 'append') {
            let start = log.length;
            // A log that holds nothing may take its first entry at any index (a reset).
            if (m.fresh !== null && log.length === first) {
              start = m.fresh;
              log = Array.from({ length: start }, () => null);
              first = start;
            }
            for (let i = 0; i < m.count; i++) log[start + i] = `${at}:${i}`;
            ops.push({ kind: 'append', at, first: start, count: m.count });
          } else {
            const index = Math.max(first, log.length - m.back);
            if (index >= log.length) return; // a truncation past the end journals nothing
            log.length = index;
            ops.push({ kind: 'truncate', at, index });
          }
        });
        if (ops.length === 0) return;
        const plan = planJournalState(ops);
        assert.equal(plan.end, Math.max(log.length, plan.start), 'the log ends where the ops leave it');
        const fromRuns: string[] = [];
        for (const r of plan.runs) {
          assert.equal(r.first, plan.start + fromRuns.length, 'runs are contiguous from start');
          for (let i = 0; i < r.count; i++) fromRuns.push(`${r.at}:${r.first - (ops.find((o) => o.at === r.at) as { first: number }).first + i}`);
        }
        assert.deepEqual(fromRuns, log.slice(plan.start).map((x) => x ?? 'hole'), 'from start on, the runs are the log');
        assert.ok(log.slice(0, plan.start).every((x) => x === '?' || x === null), 'below start, only what the ops did not write');
      },
    ),
    { numRuns: 500 },
  );
});

// ---------------------------------------------------------------------------------------------
// Many groups

for (const mode of ['journal', 'auto'] as const) {
test(`20 groups appending at once (${mode}), checkpoints between: after a power loss each shows at least what was acknowledged before it, as appended`, async () => {
  const fs = new MemoryFs({ trace: false });
  const node = await open(fs, { journalCheckpointBytes: 1024, journalMode: mode });
  const groups = await Promise.all(Array.from({ length: 20 }, (_, g) => node.openGroup(`g${g}`)));
  const images: { image: ReturnType<MemoryFs['durableImage']>; acked: number[] }[] = [];
  const acked = groups.map(() => 0);
  await Promise.all(
    groups.map(async (group, g) => {
      for (let k = 0; k < 10; k++) {
        await appendFlushed(group, [entry(1, k, `g${g}e${k}`)]);
        acked[g] = k + 1;
        if ((g + k) % 7 === 0) images.push({ image: fs.durableImage(), acked: [...acked] });
      }
    }),
  );
  await node.close();
  assert.ok(images.length > 10);
  for (const { image, acked: then } of images) {
    const after = await open(new MemoryFs({ image, trace: false }));
    for (const [g, n] of then.entries()) {
      const have = await (await after.openGroup(`g${g}`)).log.tryGetLogEntries(0, 100);
      assert.ok(have.length >= n, `g${g}: ${have.length} entries after the loss, ${n} acknowledged before it`);
      have.forEach((e, k) => assert.deepEqual(e, entry(1, k, `g${g}e${k}`), `g${g} entry ${k}`));
    }
    await after.close();
  }
});
}

// ---------------------------------------------------------------------------------------------
// A node without its journal

test("a node without its journal: an earlier version's, closed cleanly, opens (the journal is made); otherwise CORRUPT naming it", async () => {
  const fs = new MemoryFs({ trace: false });
  let node = await open(fs);
  await appendFlushed(await node.openGroup('a'), [entry(1, 0), entry(1, 1)]);
  await node.close();
  const { removeTree } = await import('../lib/raft/fs-layout.js');
  await removeTree(fs, `${DIR}/journal`);
  // After a clean close (CLEAN present): every group's files are durable; the journal is made.
  node = await open(fs);
  assert.deepEqual((await (await node.openGroup('a')).log.tryGetLogEntries(0, 10)).map((e) => e.logId.index), [0, 1]);
  assert.ok((await fs.stat(`${DIR}/journal/MANIFEST`)) !== null);
  await appendFlushed(await node.openGroup('a'), [entry(1, 2)]);
  // A crashed session (no CLEAN) whose journal is gone: its latest writes may exist nowhere else.
  const image = fs.currentImage();
  await node.close();
  const crashed = new MemoryFs({ image, trace: false });
  await removeTree(crashed, `${DIR}/journal`);
  await assert.rejects(open(crashed), (err: unknown) => isSeglogError(err, 'CORRUPT') && /journal/.test(err.message));
  // A new node's journal is made before any group.
  const fresh = new MemoryFs({ trace: false });
  await (await open(fresh)).close();
  assert.ok((await fresh.stat(`${DIR}/journal/MANIFEST`)) !== null);
});

test('a journal record naming a group that has no directory is CORRUPT', async () => {
  const fs = new MemoryFs({ trace: false });
  const node = await open(fs, { journalMode: 'journal' });
  await appendFlushed(await node.openGroup('a'), [entry(1, 0)]);
  await appendFlushed(await node.openGroup('b'), [entry(1, 0)]);
  const image = fs.currentImage();
  await node.close();
  const crashed = new MemoryFs({ image, trace: false });
  const { groupDirName, removeTree } = await import('../lib/raft/fs-layout.js');
  await removeTree(crashed, `${DIR}/groups/${groupDirName('b')}`);
  await assert.rejects(open(crashed), (err: unknown) => isSeglogError(err, 'CORRUPT') && err.message.includes(groupDirName('b')));
});
