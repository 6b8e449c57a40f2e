// The checker side of the Raft kill tests (test/raft-kill.test.ts: one group; test/raft-kill-groups
// .test.ts: many groups of one node writing at once), shared by both.
//
// Owns: `countedCheck` (a target's check that counts the lives and their time), `assertCampaign`
// (what every Raft kill campaign must have done to mean anything), reading one group's calls out of a life's ledger (`issuedCalls`) and judging what a group
// shows after the kill against them (`checkGroup`): the state a prefix of the group's calls leaves,
// at least through its last acknowledged call (a payload collection excepted: its promise is not
// ordered with the group's calls), where an append in flight may show as a prefix of its entries.
// Every write of a group takes effect in call order; nothing orders one group's calls with
// another's, so each group is judged against its own calls only.

import assert from 'node:assert/strict';
import type { Entry } from '../../lib/raft/types.js';
import { compareLogId, compareVote } from '../../lib/raft/types.js';
import type { KillCampaignResult, KillTarget, LedgerEntry } from './kill-harness.js';
import { applyCall, canonical, entriesOfBurst, showObserved, type RaftCall, type RaftObserved } from './kill-writer-raft.js';

/** One call a writer issued, with the entries it carried and whether it was acknowledged. */
export interface Issued {
  seq: number;
  c: number;
  call: RaftCall;
  entries: Entry[];
  acked: boolean;
}

/** The calls of group `group` in a life's ledger (lines without a `g` are the one-group writer's, group `g`). */
export function issuedCalls(ledger: readonly LedgerEntry[], life: number, group: string): Issued[] {
  const issued: Issued[] = [];
  const bySeq = new Map<number, Issued[]>();
  for (const e of ledger) {
    if ((e['g'] ?? 'g') !== group) continue;
    if (e.t === 'begin') {
      const seq = e['seq'] as number;
      const calls = e['calls'] as RaftCall[];
      const entries = entriesOfBurst(life, seq, calls);
      const burst = calls.map((call, c) => ({ seq, c, call, entries: entries[c]!, acked: false }));
      bySeq.set(seq, burst);
      issued.push(...burst);
    } else if (e.t === 'ack') {
      const call = bySeq.get(e['seq'] as number)?.[e['c'] as number];
      assert.ok(call !== undefined, `an ack of ${JSON.stringify(e)} that follows no begin of it`);
      call.acked = true;
    }
  }
  return issued;
}

/** Why `got` is not allowed, in the terms of the contract (for the failure message). */
function diagnose(got: RaftObserved, floor: RaftObserved, issued: readonly Issued[]): string {
  const notes: string[] = [];
  if (floor.vote !== null && (got.vote === null || compareVote(got.vote, floor.vote) < 0)) notes.push(`the vote went back: ${JSON.stringify(got.vote)} < acknowledged ${JSON.stringify(floor.vote)}`);
  if (floor.purged !== null && (got.purged === null || got.purged.index < floor.purged.index)) notes.push(`the purged id went back: ${JSON.stringify(got.purged)} < acknowledged ${JSON.stringify(floor.purged)}`);
  if (floor.committed !== null && compareLogId(got.committed, floor.committed) < 0) notes.push(`the committed id went back: ${JSON.stringify(got.committed)} < acknowledged ${JSON.stringify(floor.committed)}`);
  const missing = floor.entries.filter((e, i) => floor.first + i > (got.purged?.index ?? -1) && !got.entries.includes(e));
  if (missing.length > 0) notes.push(`${missing.length} acknowledged entries missing, the first ${missing[0]}`);
  const known = new Set(issued.flatMap((x) => x.entries.map((e) => e.logId.index)));
  const strange = got.entries.filter((e, i) => !floor.entries.includes(e) && !known.has(got.first + i));
  if (strange.length > 0) notes.push(`${strange.length} entries never issued, the first ${strange[0]}`);
  return notes.length === 0 ? 'a state no prefix of the calls leaves' : notes.join('; ');
}

/** What one group's check found, for the tests' counters. */
export interface GroupCheck {
  /** Some call at or past the acknowledged floor was an append. */
  appendInFlight: boolean;
  /** The group shows part of an append's entries. */
  partialAppend: boolean;
  /** The group shows less than every call issued. */
  behindLast: boolean;
  acks: number;
}

/**
 * Judges what group `group` shows (`got`) after a kill against the model the last check left and
 * the calls of the life; throws naming the life and the group when no allowed state matches.
 */
export function checkGroup(group: string, life: number, model: RaftObserved, issued: readonly Issued[], got: RaftObserved): GroupCheck {
  // The states a prefix of the calls leaves; at least through the last acknowledged call.
  const states: RaftObserved[] = [model];
  for (const x of issued) states.push(applyCall(states[states.length - 1]!, x.call, x.entries));
  let floor = 0;
  issued.forEach((x, k) => {
    // A payload collection is not a write of the group: its promise is not ordered with the
    // group's calls (it may resolve before an earlier append's flush), so its acknowledgement
    // says nothing of them.
    if (x.acked && x.call.op !== 'gc') floor = k + 1;
  });
  const want = canonical(got);
  let at = -1;
  let partial = false;
  for (let k = floor; k < states.length && at < 0; k++) {
    if (canonical(states[k]!) === want) at = k;
    const next = issued[k];
    if (at < 0 && next !== undefined && next.call.op === 'append') {
      // The append in flight: a prefix of its entries may have landed.
      for (let n = 1; n < next.entries.length && at < 0; n++) {
        if (canonical(applyCall(states[k]!, next.call, next.entries.slice(0, n))) === want) {
          at = k;
          partial = true;
        }
      }
    }
  }
  if (at < 0) {
    throw new Error(
      `life ${life}, group ${group}: reopened ${showObserved(got)}: ${diagnose(got, states[floor]!, issued)}\n` +
        `  acknowledged through call ${floor} of ${issued.length}: ${showObserved(states[floor]!)}\n` +
        `  all issued: ${showObserved(states[states.length - 1]!)}`,
    );
  }
  return {
    appendInFlight: issued.some((x, k) => k >= floor && x.call.op === 'append'),
    partialAppend: partial,
    behindLast: at < states.length - 1,
    acks: issued.filter((x) => x.acked).length,
  };
}

/** A kill target's `check` that counts each life checked and the time its check takes into `stats`. */
export function countedCheck<M>(stats: { lives: number; checkMs: number }, check: KillTarget<M>['check']): KillTarget<M>['check'] {
  return async (dir, model, ledger, life) => {
    stats.lives++;
    const started = performance.now();
    try {
      return await check(dir, model, ledger, life);
    } finally {
      stats.checkMs += performance.now() - started;
    }
  };
}

/**
 * What a Raft kill campaign must have done for its checks to mean anything: every kill made, most
 * of them after the writer's open, more acknowledgements than kills, and every kind of write issued.
 */
export function assertCampaign(result: KillCampaignResult, kills: number, acks: number, counts: Readonly<Record<string, number>>): void {
  assert.equal(result.kills, kills);
  assert.ok(result.afterReady >= kills / 2, `only ${result.afterReady} kills after the writer was ready`);
  assert.ok(acks > kills, `only ${acks} acknowledgements`);
  for (const op of ['append', 'vote', 'committed', 'truncate', 'purge']) assert.ok((counts[op] ?? 0) > 0, `the writers issued ${op}`);
}
