// Kill-harness writer for the file-system Raft store (./kill-harness.ts, test/raft-kill.test.ts),
// the pure functions its checker shares with it, and the bursts (`planBurst`, `runBurst`) that the
// many-group writer (./kill-writer-raft-groups.ts) runs on each of its groups (all exported; the
// writer runs only when this file is the process's main module).
//
// Owns: the writer's protocol. It opens a node (openRaftNode, 16 KiB log and journal segments so
// they roll, node journal checkpoints every 32 KiB, payload grace 0 so collections remove what
// nothing names), opens group `g`, reports
// what it found, then issues bursts of calls back to back without waiting between them — appends
// of one to three entries (KV sets of 0 to 12,000 bytes, blanks, entries naming a payload put
// just before), saveCommitted, saveVote (terms only grow), truncate of an uncommitted suffix,
// purge up to the committed id (or, rarely, past the end, as a snapshot install does), a payload
// collection — and waits for every call of the burst. Ledger lines (./kill-child.ts):
//   {t:'open', state, shows}           what the node showed: a fingerprint of it (`fingerprint`)
//                                      and a summary (`showObserved`)
//   {t:'begin', seq, calls}            before the first call of a burst is issued: every call,
//                                      with what the checker needs to rebuild each entry
//   {t:'ack', seq, c}                  call c of burst seq acknowledged: for an append, its
//                                      onFlushed(null) ran; for the others, the promise resolved
// An error of any call ends the writer (the harness fails the test with its stderr).

import { createHash } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { randomInt } from '../../lib/crash/determinism.js';
import { encodeKvCommand } from '../../lib/raft/kv.js';
import { openRaftNode, type RaftGroup, type RaftNode } from '../../lib/raft/node.js';
import type { Entry, LogId, Vote } from '../../lib/raft/types.js';
import { ledger, runWriter, writerArgs } from './kill-child.js';
import { killRecord } from './kill-records.js';

/**
 * Node options of the writer and of the checker. `journalCheckpointBytes` (test-only): a node
 * journal checkpoint every 32 KiB of records, so that kills land inside checkpoints too.
 */
export const RAFT_KILL_OPTIONS = { segmentBytes: 16 * 1024, journalSegmentBytes: 16 * 1024, payloads: { graceMs: 0 }, journalCheckpointBytes: 32 * 1024 } as const;
export const RAFT_KILL_GROUP = 'g';
const NODE_ID = 1;

/** One call of a burst, as the ledger carries it. An entry spec: its KV value length (-1: blank) and whether it names a payload. */
export type RaftCall =
  | { op: 'append'; first: number; term: number; e: [number, 0 | 1][] }
  | { op: 'vote'; term: number; node: number; committed: boolean }
  | { op: 'committed'; term: number; index: number }
  | { op: 'truncate'; index: number }
  | { op: 'purge'; term: number; index: number }
  | { op: 'gc' };

/** What a node shows of group `g`: entries rendered (see `renderEntry`), in index order. */
export interface RaftObserved {
  purged: LogId | null;
  first: number;
  entries: string[];
  vote: Vote | null;
  committed: LogId | null;
}

export function logId(term: number, index: number): LogId {
  return { leaderId: { term, nodeId: NODE_ID }, index };
}

/** The payload entry `j` of burst `seq` of life `life` names (40 bytes). */
export function namedPayload(life: number, seq: number, j: number): Buffer {
  return killRecord(life, seq, 1000 + j, 40);
}

export function payloadDigest(bytes: Uint8Array): string {
  return 'sha256:' + createHash('sha256').update(bytes).digest('hex');
}

/** Entry `j` (counted over the burst) of burst `seq`, at `index`. */
export function raftEntry(life: number, seq: number, j: number, term: number, index: number, spec: readonly [number, 0 | 1]): Entry {
  const [len, named] = spec;
  const id = logId(term, index);
  if (len < 0) return { logId: id, payload: { type: 'blank' } };
  const data = encodeKvCommand({ op: 'set', key: `k${index % 5}`, value: killRecord(life, seq, j, len) });
  return { logId: id, payload: named === 1 ? { type: 'normal', data, payloads: [payloadDigest(namedPayload(life, seq, j))] } : { type: 'normal', data } };
}

/** A comparable rendering of an entry: its id, kind, a hash of its bytes, the payloads it names. */
export function renderEntry(e: Entry): string {
  const id = `${e.logId.leaderId.term}.${e.logId.leaderId.nodeId}.${e.logId.index}`;
  if (e.payload.type !== 'normal') return `${id}:${e.payload.type}`;
  const h = createHash('sha256').update(e.payload.data).digest('hex').slice(0, 16);
  return `${id}:${e.payload.data.length}:${h}:${(e.payload.payloads ?? []).map((d) => d.slice(7, 19)).join('+')}`;
}

/** The entries of burst `seq`'s calls, call by call (empty for calls that append nothing). */
export function entriesOfBurst(life: number, seq: number, calls: readonly RaftCall[]): Entry[][] {
  let j = 0;
  return calls.map((c) => (c.op === 'append' ? c.e.map((spec, k) => raftEntry(life, seq, j++, c.term, c.first + k, spec)) : []));
}

/** The index the next append takes. */
export function nextIndex(m: RaftObserved): number {
  return m.first + m.entries.length;
}

/** The state after one call (calls take effect in call order: docs/contracts/raft-store.md). */
export function applyCall(m: RaftObserved, c: RaftCall, entries: readonly Entry[]): RaftObserved {
  switch (c.op) {
    case 'append':
      return { ...m, first: m.entries.length === 0 ? c.first : m.first, entries: [...m.entries, ...entries.map(renderEntry)] };
    case 'vote':
      return { ...m, vote: { leaderId: { term: c.term, nodeId: c.node }, committed: c.committed } };
    case 'committed':
      return { ...m, committed: logId(c.term, c.index) };
    case 'truncate':
      return c.index >= nextIndex(m) ? m : { ...m, entries: m.entries.slice(0, Math.max(0, c.index - m.first)) };
    case 'purge': {
      if (m.purged !== null && c.index <= m.purged.index) return m;
      const kept = m.entries.slice(Math.max(0, c.index + 1 - m.first));
      return { ...m, purged: logId(c.term, c.index), first: c.index + 1, entries: kept };
    }
    case 'gc':
      return m;
  }
}

/** Opens group g of the node and answers what it shows (checking there is no hole). */
export async function observeGroup(g: RaftGroup): Promise<RaftObserved> {
  const st = await g.log.getLogState();
  const all = await g.log.tryGetLogEntries(0, Number.MAX_SAFE_INTEGER);
  const purgedNext = st.lastPurgedLogId === null ? null : st.lastPurgedLogId.index + 1;
  const first = all[0]?.logId.index ?? purgedNext ?? 0;
  all.forEach((e, i) => {
    if (e.logId.index !== first + i) throw new Error(`a hole in the log: entry ${i} has index ${e.logId.index}, expected ${first + i}`);
  });
  if (purgedNext !== null && all.length > 0 && first !== purgedNext) throw new Error(`the log starts at ${first}, not right after the purged id ${purgedNext - 1}`);
  return { purged: st.lastPurgedLogId, first, entries: all.map(renderEntry), vote: await g.log.readVote(), committed: await g.log.readCommitted() };
}

function showLogId(id: LogId | null): string {
  return id === null ? '-' : `${id.leaderId.term}.${id.leaderId.nodeId}.${id.index}`;
}

/** A readable summary of an observation (without the entries' contents). */
export function showObserved(m: RaftObserved): string {
  const vote = m.vote === null ? '-' : `${m.vote.leaderId.term}.${m.vote.leaderId.nodeId}${m.vote.committed ? '!' : '?'}`;
  return `purged ${showLogId(m.purged)}, entries [${m.first}, ${nextIndex(m)}), vote ${vote}, committed ${showLogId(m.committed)}`;
}

/** A canonical rendering of an observation, entries included: equal renderings, equal states. */
export function canonical(m: RaftObserved): string {
  return `${showObserved(m)}|${m.entries.join(',')}`;
}

/** A short fingerprint of an observation, for the writer's open line. */
export function fingerprint(m: RaftObserved): string {
  return createHash('sha256').update(canonical(m)).digest('hex').slice(0, 20);
}

// ---------------------------------------------------------------------------------------------
// The writer

/** A writer's running term: the term it leads in, above every term it found (terms only grow). */
export interface Leading {
  term: number;
}

/** The term to lead in after opening a group that shows `m`. */
export function leadingTerm(m: RaftObserved): Leading {
  return { term: Math.max(m.vote?.leaderId.term ?? 0, ...m.entries.map((e) => Number(e.split('.')[0]))) + 1 };
}

/**
 * Plans burst `seq` of life `life` on a group that shows `m` (the state every earlier call
 * leaves): its calls, and the state they leave. `gc`: whether the burst may collect payloads.
 */
export function planBurst(random: () => number, life: number, seq: number, m: RaftObserved, lead: Leading, first: boolean, gc: boolean): { calls: RaftCall[]; plan: RaftObserved } {
  const calls: RaftCall[] = [];
  let plan = m;
  let j = 0;
  const add = (c: RaftCall): void => {
    calls.push(c);
    const es = c.op === 'append' ? c.e.map((spec, k) => raftEntry(life, seq, j + k, c.term, c.first + k, spec)) : [];
    j += es.length;
    plan = applyCall(plan, c, es);
  };
  const lastIndex = (s: RaftObserved): number => nextIndex(s) - 1;
  const termAt = (s: RaftObserved, index: number): number => Number(s.entries[index - s.first]?.split('.')[0] ?? lead.term);
  const committedIndex = (): number => plan.committed?.index ?? -1;
  if (first || random() < 0.06) {
    // A new term (this node elected in it), sometimes first voted and then committed.
    if (!first) lead.term++;
    if (random() < 0.3) add({ op: 'vote', term: lead.term, node: NODE_ID, committed: false });
    add({ op: 'vote', term: lead.term, node: NODE_ID, committed: true });
  }
  // Keep the log to a few thousand entries: purge up to the committed id.
  const size = plan.entries.length;
  if (size > 1500 && committedIndex() > (plan.purged?.index ?? -1) && committedIndex() >= plan.first) {
    add({ op: 'purge', term: termAt(plan, committedIndex()), index: committedIndex() });
  }
  const floor = Math.max(committedIndex(), plan.purged?.index ?? -1) + 1;
  if (random() < 0.08 && lastIndex(plan) >= floor) {
    add({ op: 'truncate', index: randomInt(random, floor, lastIndex(plan) + 1) });
  }
  if (random() < 0.02) {
    // As a snapshot install does: purge past the end; the log continues after it.
    add({ op: 'purge', term: lead.term, index: lastIndex(plan) + randomInt(random, 1, 5) });
  } else if (random() < 0.06 && committedIndex() > (plan.purged?.index ?? -1) && committedIndex() >= plan.first) {
    add({ op: 'purge', term: termAt(plan, committedIndex()), index: committedIndex() });
  }
  const appends = randomInt(random, 1, 4);
  for (let a = 0; a < appends; a++) {
    const e: [number, 0 | 1][] = Array.from({ length: randomInt(random, 1, 3) }, () => {
      const x = random();
      if (x < 0.05) return [-1, 0];
      const len = x < 0.1 ? randomInt(random, 6000, 12_000) : randomInt(random, 0, 1500);
      return [len, random() < 0.1 ? 1 : 0];
    });
    add({ op: 'append', first: nextIndex(plan), term: lead.term, e });
    if (random() < 0.25) add({ op: 'committed', term: lead.term, index: randomInt(random, Math.max(plan.first, committedIndex() + 1, nextIndex(plan) - e.length), lastIndex(plan)) });
  }
  if (gc && random() < 0.05) add({ op: 'gc' });
  return { calls, plan };
}

/**
 * Puts the payloads burst `seq`'s entries name (durably, before any append is issued: the
 * ordering rule), then issues every call of the burst at once on group `g` and waits for all;
 * `ack(c)` runs as call c is acknowledged (an append: its onFlushed(null); the others: the
 * promise resolved).
 */
export async function runBurst(node: RaftNode, g: RaftGroup, life: number, seq: number, calls: readonly RaftCall[], term: number, begin: () => void, ack: (c: number) => void): Promise<void> {
  const entries = entriesOfBurst(life, seq, calls);
  let k = 0;
  for (const call of calls) {
    if (call.op !== 'append') continue;
    for (const [x, spec] of call.e.entries()) {
      if (spec[1] === 1) await node.payloads.put((async function* (bytes: Buffer) { yield bytes; })(namedPayload(life, seq, k + x)));
    }
    k += call.e.length;
  }
  begin();
  const done = calls.map((call, c): Promise<void> => {
    switch (call.op) {
      case 'append':
        return new Promise<void>((resolve, reject) => {
          g.log
            .append(entries[c]!, (err) => {
              if (err !== null) return reject(err);
              ack(c);
              resolve();
            })
            .catch(reject);
        });
      case 'vote':
        return g.log.saveVote({ leaderId: { term: call.term, nodeId: call.node }, committed: call.committed }).then(() => ack(c));
      case 'committed':
        return g.log.saveCommitted(logId(call.term, call.index)).then(() => ack(c));
      case 'truncate':
        return g.log.truncate(logId(term, call.index)).then(() => ack(c));
      case 'purge':
        return g.log.purge(logId(call.term, call.index)).then(() => ack(c));
      case 'gc':
        return node.payloads.collectGarbage().then(() => ack(c));
    }
  });
  await Promise.all(done);
}

async function main(): Promise<void> {
  const { dir, life, random } = writerArgs();
  const node = await openRaftNode(dir, RAFT_KILL_OPTIONS);
  const g = await node.openGroup(RAFT_KILL_GROUP);
  let m = await observeGroup(g);
  ledger({ t: 'open', state: fingerprint(m), shows: showObserved(m) });
  const lead = leadingTerm(m);
  for (let seq = 1; ; seq++) {
    const { calls, plan } = planBurst(random, life, seq, m, lead, seq === 1, true);
    await runBurst(node, g, life, seq, calls, lead.term, () => ledger({ t: 'begin', seq, calls }), (c) => ledger({ t: 'ack', seq, c }));
    m = plan;
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) runWriter(main);
