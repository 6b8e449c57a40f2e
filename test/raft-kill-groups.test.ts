// The file-system Raft store against real process kills, with many groups of one node writing at
// once: writer processes (test/support/kill-writer-raft-groups.ts) run the one-group kill test's
// bursts (appends, some naming payloads, saveCommitted, saveVote, truncate, purge) on eight groups
// side by side, so that their writes go through the node journal — group-committed, checkpointed
// into each group's own files, replayed at the next open — and are SIGKILLed at random moments
// (inside their open, i.e. inside the journal's replay after the previous kill, or with bursts of
// many groups in flight). After every kill a checker in this process reopens the node and
// requires of every group, from the ledger of what the writer had acknowledged for that group
// (test/support/kill-check-raft.ts): the state a prefix of that group's calls leaves, at least
// through its last acknowledged call, an append in flight possibly as a prefix of its entries; no
// hole; and a second open that shows the same (the next life's writer reports what it found).
// Every group's entries carry bytes of their own, so a record replayed into the wrong group fails.
// Prints one line: kills, acknowledgements, calls, what the groups hold at the end.

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
import { RAFT_KILL_OPTIONS, canonical, fingerprint, observeGroup, showObserved, type RaftObserved } from './support/kill-writer-raft.js';
import { RAFT_KILL_GROUPS, killGroupName } from './support/kill-writer-raft-groups.js';

const KILLS = Number(process.env['SEGLOG_RAFT_GROUP_KILLS'] ?? 60);
const SEED = Number(process.env['SEGLOG_RAFT_KILL_SEED'] ?? 1);

/** What a node shows: each group's observation, by name. */
type NodeObserved = Record<string, RaftObserved>;

const NAMES = Array.from({ length: RAFT_KILL_GROUPS }, (_, k) => killGroupName(k));

async function observe(dir: string): Promise<NodeObserved> {
  const node = await openRaftNode(dir, RAFT_KILL_OPTIONS);
  try {
    const out: NodeObserved = {};
    for (const name of NAMES) {
      out[name] = await observeGroup(await node.openGroup(name));
      // What this open replayed from the node journal into the group (the journal is exercised).
      stats.journalOps += node.recovery.get(name)?.journalOps ?? 0;
    }
    return out;
  } finally {
    await node.close();
  }
}

const lastSeen = new Map<string, NodeObserved>();
const stats = { journalOps: 0, lives: 0, acks: 0, calls: 0, appendsInFlight: 0, groupsInFlight: 0, partialAppends: 0, behindLast: 0, counts: {} as Record<string, number>, checkMs: 0 };

async function checkLife(dir: string, model: NodeObserved, ledger: readonly LedgerEntry[], life: number): Promise<NodeObserved> {
  const open = ledger.find((e) => e.t === 'open');
  if (open !== undefined) {
    const states = open['states'] as Record<string, string>;
    const shows = open['shows'] as Record<string, string>;
    for (const name of NAMES) {
      const m = model[name]!;
      assert.equal(states[name], fingerprint(m), `group ${name}: the writer found ${shows[name]}, the last check left ${showObserved(m)}`);
    }
  }
  const got = await observe(dir);
  let inFlight = 0;
  for (const name of NAMES) {
    const issued = issuedCalls(ledger, life, name);
    for (const x of issued) stats.counts[x.call.op] = (stats.counts[x.call.op] ?? 0) + 1;
    stats.calls += issued.length;
    const r = checkGroup(name, life, model[name]!, issued, got[name]!);
    stats.acks += r.acks;
    if (r.appendInFlight) inFlight++;
    if (r.partialAppend) stats.partialAppends++;
    if (r.behindLast) stats.behindLast++;
  }
  if (inFlight > 0) stats.appendsInFlight++;
  stats.groupsInFlight = Math.max(stats.groupsInFlight, inFlight);
  lastSeen.set(dir, got);
  return got;
}

const target: KillTarget<NodeObserved> = {
  name: 'raft-groups',
  writer: new URL('./support/kill-writer-raft-groups.js', import.meta.url), // replaced by the snapshot's copy
  initialModel: () => Object.fromEntries(NAMES.map((name) => [name, { purged: null, first: 0, entries: [], vote: null, committed: null }])),
  check: countedCheck(stats, checkLife),
};

test(`raft store: ${KILLS} SIGKILLs of writers of ${RAFT_KILL_GROUPS} groups of one node appending at once (the node journal)`, { timeout: 300_000 }, async (t) => {
  const root = await mkdtemp(join(os.tmpdir(), 'seglog-raft-kill-groups-'));
  try {
    const writer = await snapshotBuild(root, 'kill-writer-raft-groups.js', [join('lib', 'raft', 'node.js'), join('test', 'support', 'kill-writer-raft-groups.js')]);
    const result = await runKillCampaign({ ...target, writer: pathToFileURL(writer) }, { kills: KILLS, lanes: 2, seed: SEED, root, maxRunMs: 120, workLines: 40 });
    for (const [dir, seen] of lastSeen) {
      const again = await observe(dir);
      for (const name of NAMES) {
        assert.equal(canonical(again[name]!), canonical(seen[name]!), `${dir}, group ${name}: a second open shows ${showObserved(again[name]!)} after ${showObserved(seen[name]!)}`);
      }
    }
    const line =
      `raft kill test, ${RAFT_KILL_GROUPS} groups (seed ${SEED}): ${result.kills} kills (${result.afterReady} after the writer opened its node), ` +
      `${stats.acks} acknowledged calls of ${stats.calls} issued (${Object.entries(stats.counts).map(([k, v]) => `${v} ${k}`).join(', ')}), ` +
      `${stats.appendsInFlight} kills with an append in flight (up to ${stats.groupsInFlight} groups at once), ${stats.partialAppends} groups showing part of an append, ` +
      `${stats.behindLast} showing less than was issued, ${stats.journalOps} journal records replayed by the checks' opens, ${(result.elapsedMs / 1000).toFixed(1)} s (checks ${(stats.checkMs / 1000).toFixed(1)} s)`;
    t.diagnostic(line);
    console.log(line);
    assertCampaign(result, KILLS, stats.acks, stats.counts);
    assert.ok(stats.journalOps > 0, 'the checks\' opens replayed records of the node journal');
    assert.ok(stats.groupsInFlight >= 2, `some kill landed with appends of several groups in flight (at most ${stats.groupsInFlight})`);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
