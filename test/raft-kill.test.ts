// The file-system Raft store against real process kills: writer processes
// (test/support/kill-writer-raft.ts) issue bursts of appends, saveCommitted, saveVote, truncate,
// purge and payload collections on one group of a node in a real temporary directory, and are
// SIGKILLed at random moments (inside their open, i.e. inside recovery from the previous kill, or
// while bursts are in flight). After every kill a checker in this process reopens the node and
// requires, from the ledger of what the writer had acknowledged:
// - the log, purged id, vote and committed id of a prefix of the calls the writer issued (every
//   write of a group takes effect in call order), at least through the last acknowledged call, where
//   an append in flight may show as a prefix of its entries; so: every acknowledged entry that no
//   later acknowledged truncate or purge removed is there with the same bytes, the vote is at least
//   the last acknowledged one, the purged id and the committed id are not behind the acknowledged
//   ones, nothing shows that was never issued;
// - no hole in the log, and the log right after the purged id;
// - the node opens (recovery: committed entries re-applied, named payloads present);
// - a second open shows the same: the next life's writer must report exactly that at its open
//   (and a life killed before its open must leave exactly that), and the last life of each lane
//   is opened once more at the end.
// Writers run from a private copy of dist/ (other engineers rebuild dist/ meanwhile).
// Prints one line: kills, acknowledgements, calls, what the logs hold at the end.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import * as os from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { openRaftNode } from '../lib/raft/node.js';
import { snapshotBuild } from './support/snapshot-build.js';
import { runKillCampaign, type KillTarget, type LedgerEntry } from './support/kill-harness.js';
import { assertCampaign, checkGroup, countedCheck, issuedCalls } from './support/kill-check-raft.js';
import { RAFT_KILL_GROUP, RAFT_KILL_OPTIONS, canonical, fingerprint, observeGroup, showObserved, type RaftObserved } from './support/kill-writer-raft.js';

const KILLS = Number(process.env['SEGLOG_RAFT_KILLS'] ?? 100);
const SEED = Number(process.env['SEGLOG_RAFT_KILL_SEED'] ?? 1);

/** What the last check of each lane's directory found. */
const lastSeen = new Map<string, RaftObserved>();
const stats = { checkMs: 0, lives: 0, acks: 0, calls: 0, appendsInFlight: 0, partialAppends: 0, behindLast: 0, counts: {} as Record<string, number> };

async function observe(dir: string): Promise<RaftObserved> {
  const node = await openRaftNode(dir, RAFT_KILL_OPTIONS);
  try {
    return await observeGroup(await node.openGroup(RAFT_KILL_GROUP));
  } finally {
    await node.close();
  }
}

const target: KillTarget<RaftObserved> = {
  name: 'raft',
  writer: new URL('./support/kill-writer-raft.js', import.meta.url), // replaced by the snapshot's copy
  initialModel: () => ({ purged: null, first: 0, entries: [], vote: null, committed: null }),
  check: countedCheck(stats, checkLife),
};

async function checkLife(dir: string, model: RaftObserved, ledger: readonly LedgerEntry[], life: number): Promise<RaftObserved> {
  const open = ledger.find((e) => e.t === 'open');
  if (open !== undefined) assert.equal(open['state'], fingerprint(model), `the writer found ${String(open['shows'])}, the last check left ${showObserved(model)}`);
  const issued = issuedCalls(ledger, life, RAFT_KILL_GROUP);
  for (const x of issued) stats.counts[x.call.op] = (stats.counts[x.call.op] ?? 0) + 1;
  stats.calls += issued.length;
  const got = await observe(dir);
  const r = checkGroup(RAFT_KILL_GROUP, life, model, issued, got);
  stats.acks += r.acks;
  if (r.appendInFlight) stats.appendsInFlight++;
  if (r.partialAppend) stats.partialAppends++;
  if (r.behindLast) stats.behindLast++;
  // The next open (the next life's writer, whose open line must match, or this test at the end)
  // is the second open, which must show the same.
  lastSeen.set(dir, got);
  return got;
}

test(`raft store: ${KILLS} SIGKILLs of writers with bursts of appends, votes, commits, truncates and purges in flight`, { timeout: 300_000 }, async (t) => {
  const root = await mkdtemp(join(os.tmpdir(), 'seglog-raft-kill-'));
  try {
    const writer = await snapshotBuild(root, 'kill-writer-raft.js', [join('lib', 'raft', 'node.js'), join('test', 'support', 'kill-writer-raft.js')]);
    const result = await runKillCampaign({ ...target, writer: pathToFileURL(writer) }, { kills: KILLS, lanes: 2, seed: SEED, root, maxRunMs: 80 });
    // The second open of the last life of each lane (every earlier life's is the next writer's open).
    for (const [dir, seen] of lastSeen) {
      const again = await observe(dir);
      assert.equal(canonical(again), canonical(seen), `${dir}: a second open shows ${showObserved(again)} after ${showObserved(seen)}`);
    }
    const line =
      `raft kill test (seed ${SEED}): ${result.kills} kills (${result.afterReady} after the writer opened its node, ${result.kills - result.afterReady} before or inside its open), ` +
      `${stats.acks} acknowledged calls of ${stats.calls} issued (${Object.entries(stats.counts).map(([k, v]) => `${v} ${k}`).join(', ')}), ` +
      `${stats.appendsInFlight} kills with an append in flight, ${stats.partialAppends} of them showing part of an append, ${stats.behindLast} showing less than was issued, ` +
      `${(result.elapsedMs / 1000).toFixed(1)} s (checks ${(stats.checkMs / 1000).toFixed(1)} s)`;
    t.diagnostic(line);
    console.log(line);
    assertCampaign(result, KILLS, stats.acks, stats.counts);
    assert.ok(stats.appendsInFlight > 0, 'some kill landed with an append in flight');
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
