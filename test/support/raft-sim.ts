// A deterministic simulation of live Raft groups over the file-system store: several nodes'
// stores (openRaftNode on MemoryFs, one machine each), each node holding a member of every group
// (16 by default, so that the groups' writes go through the node journal), driven the way a
// consensus engine drives each group — elections (votes), leader appends (some naming payloads, copied to followers first),
// replication with conflicting suffixes truncated on followers, commit, apply, snapshot build,
// purge, snapshot install on a lagging follower — with restarts from disk at random points: a
// clean close, a process kill (the page cache survives) or a power loss (only what was synced
// survives), sometimes with appends still in flight: a restart is the node's, every group's member
// on it goes down and comes back together. After every restart it checks, for every group, on what the
// engine then sees (openraft's startup, `getInitialState`): no hole in the log, the vote never
// goes back, the committed id never goes back and names a committed entry, the applied position
// never goes back and the state is the committed history's at that position, no committed entry
// the node acknowledged is lost, and the log agrees with the committed history.
//
// Everything is decided by one seeded generator; `runRaftSimulation({ seed })` reproduces a run.

import assert from 'node:assert/strict';

import { ManualClock } from '../../lib/clock.js';
import { MemoryFs } from '../../lib/fs/memory.js';
import { isSeglogError } from '../../lib/errors.js';
import { encodeKvCommand, type KvPlugin } from '../../lib/raft/kv.js';
import { openRaftNode, type RaftGroup, type RaftNode, type RaftNodeOptions } from '../../lib/raft/node.js';
import { getInitialState, tryGetLogEntry } from '../../lib/raft/storage-helper.js';
import { compareLogId, compareVote, logIdEquals, type Entry, type LogId, type Vote } from '../../lib/raft/types.js';
import { seededRandom } from '../../lib/crash/determinism.js';

export interface SimOptions {
  seed: number;
  /** Actions to run over all the groups (default 300 for each group). */
  steps?: number;
  /** Nodes (default 3): each holds a member of every group. */
  nodes?: number;
  /** Groups (default 16), each a Raft group over all the nodes, run side by side. */
  groups?: number;
}

export interface SimReport {
  seed: number;
  steps: number;
  groups: number;
  elections: number;
  committed: number;
  truncations: number;
  snapshots: number;
  installs: number;
  restarts: { clean: number; kill: number; power: number };
  payloadMissing: number;
  checks: number;
  /** Node journal records the reopens replayed into the groups (the groups' writes went through it). */
  journalReplayed: number;
}

/** mulberry32, the crash runner's. */
const rng = seededRandom;

const NODE_DIR = '/node';
const dec = new TextDecoder();
const enc = new TextEncoder();

function showId(l: LogId | null): string {
  return l === null ? 'null' : `${l.leaderId.term}.${l.leaderId.nodeId}.${l.index}`;
}

/** One node: its machine, its process's file system and its open node (every group's member on it). */
class Host {
  machine: MemoryFs = new MemoryFs({ trace: false });
  fs: MemoryFs = this.machine;
  node: RaftNode<KvPlugin> | null = null;
  /** Bumped at each restart: callbacks of an older incarnation are ignored. */
  incarnation = 0;

  constructor(readonly id: number) {}

  get up(): boolean {
    return this.node !== null;
  }

  async open(): Promise<RaftNode<KvPlugin>> {
    // journalCheckpointBytes (test-only): node journal checkpoints every 8 KiB of records, between the steps.
    this.node = await openRaftNode(NODE_DIR, {
      fs: this.fs,
      clock: new ManualClock(),
      segmentBytes: 4096,
      journalSegmentBytes: 4096,
      payloads: { graceMs: 0 },
      journalCheckpointBytes: 8192,
      // No idle checkpoint: its timer would fire at a moment no seed decides (checkpoints come
      // from the bytes above); the manual clock never moves, so once two groups wrote, every
      // group journals.
      journalIdleCheckpointMs: 0,
    } as RaftNodeOptions<KvPlugin>);
    return this.node;
  }
}

/** A group's member on one node, and what it acknowledged (the ghost state the checks hold it to). */
class SimNode {
  g: RaftGroup<KvPlugin> | null = null;
  ackVote: Vote | null = null;
  ackCommitted: LogId | null = null;
  ackApplied: LogId | null = null;
  /** Highest index flushed in this member's log (a leader counts itself up to it). */
  ackMatch = -1;
  /** The id of every entry this member acknowledged as flushed, by index (checked after restarts). */
  acked = new Map<number, LogId>();

  ackEntries(entries: readonly Entry[]): void {
    for (const e of entries) this.acked.set(e.logId.index, e.logId);
  }

  forgetFrom(index: number): void {
    for (const i of [...this.acked.keys()]) if (i >= index) this.acked.delete(i);
  }
  inFlight = 0;
  /** Set while the node is down: what it had acknowledged, and how it went down. */
  crashed: { acked: Map<number, LogId>; mode: string } | null = null;

  constructor(
    readonly host: Host,
    readonly groupId: string,
  ) {}

  get id(): number {
    return this.host.id;
  }

  get node(): RaftNode<KvPlugin> | null {
    return this.host.node;
  }

  get incarnation(): number {
    return this.host.incarnation;
  }

  get up(): boolean {
    return this.g !== null;
  }

  get group(): RaftGroup<KvPlugin> {
    assert.ok(this.g !== null, `node ${this.id} is up (group ${this.groupId})`);
    return this.g;
  }
}

/** Runs one simulation; throws (an AssertionError naming the seed) on the first broken invariant. */
export async function runRaftSimulation(options: SimOptions): Promise<SimReport> {
  const random = rng(options.seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)] as T;
  const chance = (p: number): boolean => random() < p;
  const n = options.nodes ?? 3;
  const majority = Math.floor(n / 2) + 1;
  const groupCount = options.groups ?? 16;
  const hosts = Array.from({ length: n }, (_, i) => new Host(i + 1));
  const report: SimReport = {
    seed: options.seed,
    steps: options.steps ?? 300 * (options.groups ?? 16),
    groups: groupCount,
    elections: 0,
    committed: 0,
    truncations: 0,
    snapshots: 0,
    installs: 0,
    restarts: { clean: 0, kill: 0, power: 0 },
    payloadMissing: 0,
    checks: 0,
    journalReplayed: 0,
  };

  const fail = (msg: string): never => assert.fail(`seed ${options.seed}: ${msg}`);

  /** One group over every node: its members, its engine's state and steps, its checks. */
  async function groupWorld(name: string) {
    const nodes = hosts.map((h) => new SimNode(h, name));
    for (const x of nodes) x.g = await (x.host.node as RaftNode<KvPlugin>).openGroup(name);
    const groupFail = (msg: string): never => fail(`group ${name}: ${msg}`);

    // The committed history: index → entry (and the KV state after it), as the cluster decided it.
    const history: Entry[] = [];
    const kvAfter: Map<string, string>[] = [];
    const commitEntry = (e: Entry): void => {
      const i = e.logId.index;
      const known = history[i];
      if (known !== undefined) {
        assert.ok(logIdEquals(known.logId, e.logId), `seed ${options.seed}, group ${name}: index ${i} committed twice, as ${showId(known.logId)} and ${showId(e.logId)}`);
        return;
      }
      assert.equal(i, history.length, `seed ${options.seed}, group ${name}: committed index ${i} leaves a hole after ${history.length - 1}`);
      history.push(e);
      const kv = new Map(kvAfter[i - 1] ?? []);
      if (e.payload.type === 'normal') {
        const d = e.payload.data;
        const klen = d[1] as number;
        kv.set(dec.decode(d.subarray(2, 2 + klen)), dec.decode(d.subarray(2 + klen)));
      }
      kvAfter.push(kv);
      report.committed++;
    };

    // Leader state (volatile, the leader's engine's).
    let leader: SimNode | null = null;
    let term = 0;
    let nextIndex = new Map<SimNode, number>();
    let matchIndex = new Map<SimNode, number>();
    let leaderCommit = -1;
    let serial = 0;

    // --- the engine's steps ----------------------------------------------------------------------

    const lastLogId = async (node: SimNode): Promise<LogId | null> => (await node.group.log.getLogState()).lastLogId;

    async function elect(): Promise<void> {
      const up = nodes.filter((x) => x.up);
      if (up.length < majority) return;
      const candidate = pick(up);
      const votes = await Promise.all(nodes.map(async (x) => (x.up ? await x.group.log.readVote() : null)));
      term = Math.max(term, ...votes.map((v) => v?.leaderId.term ?? 0)) + 1;
      const cLast = await lastLogId(candidate);
      const granted: SimNode[] = [];
      for (const x of up) {
        if (x === candidate) continue;
        const xv = await x.group.log.readVote();
        if (xv !== null && xv.leaderId.term >= term) continue;
        if (compareLogId(await lastLogId(x), cLast) > 0) continue; // the candidate's log is behind
        granted.push(x);
      }
      if (granted.length + 1 < majority) return;
      const own: Vote = { leaderId: { term, nodeId: candidate.id }, committed: false };
      await candidate.group.log.saveVote(own);
      candidate.ackVote = own;
      for (const x of granted.slice(0, majority - 1)) {
        const v: Vote = { leaderId: { term, nodeId: candidate.id }, committed: false };
        await x.group.log.saveVote(v);
        x.ackVote = v;
      }
      const won: Vote = { leaderId: { term, nodeId: candidate.id }, committed: true };
      await candidate.group.log.saveVote(won);
      candidate.ackVote = won;
      leader = candidate;
      report.elections++;
      const last = await lastLogId(candidate);
      nextIndex = new Map(nodes.map((x) => [x, (last?.index ?? -1) + 1]));
      matchIndex = new Map(nodes.map((x) => [x, -1]));
      leaderCommit = (await candidate.group.log.readCommitted())?.index ?? -1;
      // A new leader appends a blank entry of its term.
      await leaderAppend([{ logId: { leaderId: { term, nodeId: candidate.id }, index: (last?.index ?? -1) + 1 }, payload: { type: 'blank' } }], true);
    }

    /** The leader appends entries; its own match counts once they are flushed. */
    async function leaderAppend(entries: Entry[], wait: boolean): Promise<void> {
      const l = leader;
      if (l === null) return;
      const inc = l.incarnation;
      const last = (entries[entries.length - 1] as Entry).logId.index;
      const flushed = new Promise<void>((resolve) => {
        l.inFlight++;
        l.group.log
          .append(entries, (err) => {
            l.inFlight--;
            if (err === null && l.incarnation === inc) {
              l.ackMatch = Math.max(l.ackMatch, last);
              l.ackEntries(entries);
              if (leader === l) matchIndex.set(l, Math.max(matchIndex.get(l) ?? -1, last));
            }
            resolve();
          })
          .catch((err: unknown) => {
            l.inFlight--;
            if (l.incarnation === inc && !isSeglogError(err)) throw err;
            resolve();
          });
      });
      if (wait) await flushed;
    }

    async function clientWrite(): Promise<void> {
      const l = leader;
      if (l === null) return;
      const last = await lastLogId(l);
      const count = 1 + Math.floor(random() * 3);
      const entries: Entry[] = [];
      for (let k = 0; k < count; k++) {
        const index = (last?.index ?? -1) + 1 + k;
        const data = encodeKvCommand({ op: 'set', key: `k${Math.floor(random() * 6)}`, value: enc.encode(`v${++serial}@${term}`) });
        let payloads: string[] | undefined;
        if (chance(0.25)) {
          // The ordering rule (docs/contracts/raft-store.md, section 5): the body is durable on the leader before the record naming it is proposed.
          const info = await (l.node as RaftNode<KvPlugin>).payloads.put(
            (async function* () {
              yield enc.encode(`payload ${serial} of term ${term}`);
            })(),
          );
          payloads = [info.digest];
        }
        entries.push({ logId: { leaderId: { term, nodeId: l.id }, index }, payload: payloads === undefined ? { type: 'normal', data } : { type: 'normal', data, payloads } });
      }
      await leaderAppend(entries, chance(0.6));
    }

    /** The follower's vote follows the leader it accepts entries from (durable before it acts). */
    async function followLeader(f: SimNode, l: SimNode): Promise<boolean> {
      const want: Vote = { leaderId: { term, nodeId: l.id }, committed: true };
      const have = await f.group.log.readVote();
      if (have !== null && compareVote(have, want) > 0) return false; // it voted in a later term
      if (have === null || compareVote(have, want) < 0) {
        await f.group.log.saveVote(want);
        f.ackVote = want;
      }
      return true;
    }

    async function copyPayloads(l: SimNode, f: SimNode, entries: Entry[]): Promise<void> {
      for (const e of entries) {
        if (e.payload.type !== 'normal') continue;
        for (const digest of e.payload.payloads ?? []) {
          if ((await (f.node as RaftNode<KvPlugin>).payloads.stat(digest)) !== null) continue;
          const body = await (l.node as RaftNode<KvPlugin>).payloads.get(digest);
          await (f.node as RaftNode<KvPlugin>).payloads.put(body, { expectedDigest: digest });
        }
      }
    }

    async function replicate(f: SimNode): Promise<void> {
      const l = leader;
      if (l === null || f === l || !f.up) return;
      const lst = await l.group.log.getLogState();
      const next = nextIndex.get(f) ?? 0;
      if (lst.lastPurgedLogId !== null && next <= lst.lastPurgedLogId.index) return installSnapshot(l, f);
      if (!(await followLeader(f, l))) return;
      const prevIndex = next - 1;
      let prevId: LogId | null = null;
      if (prevIndex >= 0) {
        prevId = prevIndex === lst.lastPurgedLogId?.index ? lst.lastPurgedLogId : ((await tryGetLogEntry(l.group.log, prevIndex))?.logId ?? null);
        if (prevId === null) {
          nextIndex.set(f, Math.max(0, prevIndex));
          return;
        }
      }
      const fst = await f.group.log.getLogState();
      const fPurged = fst.lastPurgedLogId;
      let ok = prevIndex < 0;
      if (!ok && fPurged !== null && prevIndex <= fPurged.index) ok = true; // covered by its snapshot: committed
      if (!ok) ok = logIdEquals((await tryGetLogEntry(f.group.log, prevIndex))?.logId ?? null, prevId);
      if (!ok) {
        // Back off: to the follower's end, or one step.
        nextIndex.set(f, Math.max((fPurged?.index ?? -1) + 1, Math.min(prevIndex, (fst.lastLogId?.index ?? -1) + 1)));
        return;
      }
      const entries = await l.group.log.tryGetLogEntries(next, next + 1 + Math.floor(random() * 5));
      let k = 0;
      for (; k < entries.length; k++) {
        const e = entries[k] as Entry;
        if (fPurged !== null && e.logId.index <= fPurged.index) continue;
        const have = await tryGetLogEntry(f.group.log, e.logId.index);
        if (have === null) break;
        if (!logIdEquals(have.logId, e.logId)) {
          // A conflicting suffix: never committed (Raft's log matching); cut it.
          await f.group.log.truncate(have.logId);
          f.ackMatch = Math.min(f.ackMatch, e.logId.index - 1);
          f.forgetFrom(e.logId.index);
          report.truncations++;
          break;
        }
      }
      const toAppend = entries.slice(k);
      const matched = entries.length === 0 ? prevIndex : (entries[entries.length - 1] as Entry).logId.index;
      const inc = f.incarnation;
      const acknowledge = (): void => {
        if (f.incarnation !== inc) return;
        f.ackMatch = Math.max(f.ackMatch, matched);
        f.ackEntries(entries.filter((e) => fPurged === null || e.logId.index > fPurged.index));
        if (leader === l) matchIndex.set(f, Math.max(matchIndex.get(f) ?? -1, matched));
      };
      const named = toAppend.flatMap((e) => (e.payload.type === 'normal' ? (e.payload.payloads ?? []) : []));
      let absent = false;
      for (const digest of named) if ((await (f.node as RaftNode<KvPlugin>).payloads.stat(digest)) === null) absent = true;
      if (absent && chance(0.3)) {
        // The follower tries before the bodies arrived: the ordering rule refuses it, appending nothing.
        const before = await f.group.log.getLogState();
        await assert.rejects(
          f.group.log.append(toAppend, () => groupFail('a refused append called back')),
          (err: unknown) => isSeglogError(err, 'PAYLOAD_MISSING'),
          `seed ${options.seed}: an append naming an absent payload must be refused with PAYLOAD_MISSING`,
        );
        assert.deepEqual(await f.group.log.getLogState(), before, `seed ${options.seed}: a refused append appends nothing`);
        report.payloadMissing++;
      }
      await copyPayloads(l, f, toAppend);
      const wait = chance(0.7);
      const flushed = new Promise<void>((resolve) => {
        f.inFlight++;
        f.group.log
          .append(toAppend, (err) => {
            f.inFlight--;
            if (err === null) acknowledge();
            resolve();
          })
          .catch((err: unknown) => {
            f.inFlight--;
            if (f.incarnation === inc && !isSeglogError(err)) throw err;
            resolve();
          });
      });
      nextIndex.set(f, matched + 1);
      if (wait) await flushed;
      // The leader's commit, as far as this message matched.
      const fc = Math.min(leaderCommit, matched);
      const fCommitted = await f.group.log.readCommitted();
      if (fc >= 0 && fc > (fCommitted?.index ?? -1) && (fPurged === null || fc > fPurged.index || true)) {
        const id = (await tryGetLogEntry(f.group.log, fc))?.logId ?? (fPurged !== null && fPurged.index === fc ? fPurged : null);
        if (id !== null) {
          await f.group.log.saveCommitted(id);
          f.ackCommitted = id;
        }
      }
    }

    async function installSnapshot(l: SimNode, f: SimNode): Promise<void> {
      let snap = await l.group.stateMachine.getCurrentSnapshot();
      if (snap === null) return;
      const last = snap.meta.lastLogId;
      if (last === null) return;
      const [applied] = await f.group.stateMachine.appliedState();
      if (applied !== null && applied.index > last.index) {
        for await (const c of snap.data) void c;
        nextIndex.set(f, applied.index + 1);
        return;
      }
      if (!(await followLeader(f, l))) {
        for await (const c of snap.data) void c;
        return;
      }
      const sink = await f.group.stateMachine.beginReceivingSnapshot();
      for await (const chunk of snap.data) await sink.write(chunk);
      await f.group.stateMachine.installSnapshot(snap.meta, sink);
      snap = null;
      f.ackApplied = last;
      report.installs++;
      // The log: keep what follows the snapshot if it agrees, else drop it all.
      const at = await tryGetLogEntry(f.group.log, last.index);
      if (at === null || !logIdEquals(at.logId, last)) {
        const st = await f.group.log.getLogState();
        const from = (st.lastPurgedLogId?.index ?? -1) + 1;
        if (st.lastLogId !== null && st.lastLogId.index >= from) {
          const first = (await f.group.log.tryGetLogEntries(from, from + 1))[0];
          if (first !== undefined) await f.group.log.truncate(first.logId);
        }
        f.ackMatch = Math.min(f.ackMatch, last.index);
        f.forgetFrom(0);
      }
      await f.group.log.purge(last);
      const fc = await f.group.log.readCommitted();
      if (compareLogId(fc, last) < 0) {
        await f.group.log.saveCommitted(last);
        f.ackCommitted = last;
      }
      f.ackMatch = Math.max(f.ackMatch, last.index);
      nextIndex.set(f, last.index + 1);
      if (leader === l) matchIndex.set(f, Math.max(matchIndex.get(f) ?? -1, last.index));
    }

    async function advanceCommit(): Promise<void> {
      const l = leader;
      if (l === null) return;
      const matches = nodes.map((x) => (x === l ? l.ackMatch : (matchIndex.get(x) ?? -1))).sort((a, b) => b - a);
      const candidate = matches[majority - 1] as number;
      if (candidate <= leaderCommit) return;
      const e = await tryGetLogEntry(l.group.log, candidate);
      if (e === null || e.logId.leaderId.term !== term) return; // only an entry of its own term commits
      const from = Math.max(leaderCommit + 1, history.length - 0);
      for (let i = Math.min(from, history.length); i <= candidate; i++) {
        const x = await tryGetLogEntry(l.group.log, i);
        if (x === null) {
          if (i < history.length) continue; // purged on the leader: committed before
          groupFail(`leader ${l.id} lacks entry ${i} it is committing`);
        }
        commitEntry(x as Entry);
      }
      leaderCommit = candidate;
      await l.group.log.saveCommitted(e.logId);
      l.ackCommitted = e.logId;
    }

    async function apply(x: SimNode): Promise<void> {
      const committed = await x.group.log.readCommitted();
      const [applied] = await x.group.stateMachine.appliedState();
      if (committed === null || (applied !== null && applied.index >= committed.index)) return;
      const from = (applied?.index ?? -1) + 1;
      const entries = await x.group.log.tryGetLogEntries(from, committed.index + 1);
      if (entries[0]?.logId.index !== from) return; // behind the log: waits for a snapshot
      await x.group.stateMachine.apply(entries);
      x.ackApplied = (entries[entries.length - 1] as Entry).logId;
      await checkState(x, 'after apply');
    }

    async function snapshot(x: SimNode): Promise<void> {
      const built = await (await x.group.stateMachine.getSnapshotBuilder()).buildSnapshot();
      for await (const c of built.data) void c;
      report.snapshots++;
      const last = built.meta.lastLogId;
      if (last !== null && chance(0.8)) await x.group.log.purge(last);
    }

    async function checkState(x: SimNode, when: string): Promise<void> {
      const [applied] = await x.group.stateMachine.appliedState();
      if (compareLogId(applied, x.ackApplied) < 0) groupFail(`node ${x.id} ${when}: applied ${showId(applied)} behind the acknowledged ${showId(x.ackApplied)}`);
      if (applied !== null) {
        const want = history[applied.index];
        if (want === undefined || !logIdEquals(want.logId, applied)) groupFail(`node ${x.id} ${when}: applied ${showId(applied)} is not a committed entry`);
        const kv = kvAfter[applied.index] as Map<string, string>;
        const plugin = x.group.stateMachine.plugin;
        const have = new Map(plugin.keys().map((k) => [k, dec.decode(plugin.get(k) ?? new Uint8Array())]));
        assert.deepEqual(have, kv, `seed ${options.seed}, group ${name}: node ${x.id} ${when}: the state is the committed history's at ${applied.index}`);
      }
      const snap = x.group.stateMachine.currentSnapshotMeta();
      if (snap !== null && compareLogId(snap.lastLogId, applied) > 0) groupFail(`node ${x.id} ${when}: snapshot ${showId(snap.lastLogId)} ahead of applied ${showId(applied)}`);
      report.checks++;
    }

    async function checkAfterRestart(x: SimNode, acked: Map<number, LogId>, mode: string): Promise<void> {
      const when = `after a ${mode} restart`;
      const log = x.group.log;
      const st = await log.getLogState();
      const entries = await log.tryGetLogEntries(0, Number.MAX_SAFE_INTEGER);
      // No hole.
      entries.forEach((e, i) => {
        if (e.logId.index !== (entries[0] as Entry).logId.index + i) groupFail(`node ${x.id} ${when}: a hole in the log at ${e.logId.index}`);
      });
      const purgedIndex = st.lastPurgedLogId?.index ?? -1;
      if (st.lastPurgedLogId !== null && entries.length > 0 && entries[0]?.logId.index !== purgedIndex + 1) groupFail(`node ${x.id} ${when}: the log does not continue after the purged id`);
      if (!logIdEquals(st.lastLogId, entries[entries.length - 1]?.logId ?? st.lastPurgedLogId)) groupFail(`node ${x.id} ${when}: getLogState disagrees with the entries`);
      // The vote never goes back.
      const vote = await log.readVote();
      if (x.ackVote !== null && (vote === null || compareVote(vote, x.ackVote) < 0)) {
        groupFail(`node ${x.id} ${when}: vote ${JSON.stringify(vote)} went back from ${JSON.stringify(x.ackVote)}`);
      }
      // The committed id never goes back, and names a committed entry.
      const committed = await log.readCommitted();
      if (compareLogId(committed, x.ackCommitted) < 0) groupFail(`node ${x.id} ${when}: committed ${showId(committed)} went back from ${showId(x.ackCommitted)}`);
      if (committed !== null && !logIdEquals(history[committed.index]?.logId ?? null, committed)) groupFail(`node ${x.id} ${when}: committed ${showId(committed)} is not a committed entry`);
      // No committed entry this node acknowledged is lost; the log agrees with the committed history.
      for (const [i, id] of acked) {
        const committedAt = history[i];
        if (committedAt === undefined || !logIdEquals(committedAt.logId, id)) continue; // acknowledged, never committed
        if (i <= purgedIndex) continue; // covered by a snapshot
        const e = entries[i - ((entries[0]?.logId.index ?? 0) as number)];
        if (e === undefined || e.logId.index !== i || !logIdEquals(e.logId, id)) groupFail(`node ${x.id} ${when}: committed entry ${showId(id)} it acknowledged is lost`);
      }
      for (const e of entries) {
        if (e.logId.index <= (committed?.index ?? -1) && !logIdEquals(e.logId, (history[e.logId.index] as Entry).logId)) {
          groupFail(`node ${x.id} ${when}: entry ${showId(e.logId)} disagrees with the committed history`);
        }
      }
      // The applied position and the state.
      await checkState(x, when);
    }

    /** Member `x` goes down with its node (called before the node's process ends). */
    function down(x: SimNode, mode: string): void {
      if (leader === x) leader = null;
      x.crashed = { acked: new Map(x.acked), mode };
    }

    /** The member on a node that came back: opened, started as an engine starts, checked. */
    async function up(x: SimNode): Promise<void> {
      const crashed = x.crashed;
      assert.ok(crashed !== null);
      x.crashed = null;
      x.g = await (x.host.node as RaftNode<KvPlugin>).openGroup(name);
      report.journalReplayed += x.host.node?.recovery.get(name)?.journalOps ?? 0;
      await getInitialState(x.group.log, x.group.stateMachine); // what an engine does at startup
      await checkAfterRestart(x, crashed.acked, crashed.mode);
      // Everything visible after an open is durable.
      const entries = await x.group.log.tryGetLogEntries(0, Number.MAX_SAFE_INTEGER);
      x.acked = new Map(entries.map((e) => [e.logId.index, e.logId]));
      x.ackMatch = (await lastLogId(x))?.index ?? -1;
    }

    return {
      nodes,
      leader: (): SimNode | null => leader,
      member: (h: Host): SimNode => nodes[hosts.indexOf(h)] as SimNode,
      elect,
      clientWrite,
      replicate,
      advanceCommit,
      apply,
      snapshot,
      down,
      up,
    };
  }

  for (const host of hosts) await host.open();
  const worlds: Awaited<ReturnType<typeof groupWorld>>[] = [];
  for (let k = 0; k < groupCount; k++) worlds.push(await groupWorld(`g${k}`));

  // --- restarts: a node's, every group's member on it with it ------------------------------------

  /** Crashes a node (a clean close, a kill or a power loss); it stays down a while, or comes back at once. */
  async function restart(h: Host): Promise<void> {
    if (!h.up) return recover(h);
    const mode = pick(['clean', 'kill', 'power'] as const);
    report.restarts[mode]++;
    for (const w of worlds) w.down(w.member(h), mode);
    h.incarnation++;
    if (mode === 'clean') {
      await (h.node as RaftNode<KvPlugin>).close();
      h.fs = h.machine.newProcess();
    } else {
      h.fs.sever(); // the process dies: nothing it issues later reaches the disk
      // Let the dead process's pending calls fail out.
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
      if (mode === 'kill') {
        h.fs = h.machine.newProcess(); // the page cache survives a kill
      } else {
        h.machine = new MemoryFs({ image: h.machine.durableImage(), trace: false }); // only what was synced survives
        h.fs = h.machine;
      }
    }
    h.node = null;
    for (const w of worlds) {
      const x = w.member(h);
      x.g = null;
      x.inFlight = 0;
    }
    // Down for a while (so that it lags behind the others' purges), unless too few would be up.
    if (chance(0.5) && hosts.filter((y) => y.up).length > majority) return;
    await recover(h);
  }

  async function recover(h: Host): Promise<void> {
    await h.open();
    for (const w of worlds) await w.up(w.member(h));
  }

  // --- the run ------------------------------------------------------------------------------------

  // A node's restart (or recovery) hits every group at once; it comes at the rate a group of a
  // one-group run sees it among its own steps (7% and 4% of them), and a group's step is chosen
  // as in such a run among the others.
  const restartShare = 0.07 / worlds.length;
  const recoverShare = 0.04 / worlds.length;
  for (let s = 0; s < report.steps; s++) {
    const w = pick(worlds);
    const up = w.nodes.filter((x) => x.up);
    const event = random();
    const r = 0.04 + random() * 0.89;
    try {
      const l = w.leader();
      const down = hosts.filter((h) => !h.up);
      if (event < restartShare) {
        await restart(pick(hosts));
      } else if (event < restartShare + recoverShare && down.length > 0) {
        await recover(pick(down));
      } else if (l === null || !l.up || r < 0.055) {
        await w.elect();
      } else if (r < 0.3) {
        await w.clientWrite();
      } else if (r < 0.62) {
        await w.replicate(pick(w.nodes.filter((x) => x !== l)));
      } else if (r < 0.76) {
        await w.advanceCommit();
      } else if (r < 0.86) {
        await w.apply(pick(up));
      } else {
        await w.snapshot(pick(up));
      }
    } catch (err) {
      if (err instanceof assert.AssertionError) throw err;
      throw new Error(`seed ${options.seed}, step ${s}: ${err instanceof Error ? err.stack : String(err)}`);
    }
  }
  for (const h of hosts) if (!h.up) await recover(h);
  for (const h of hosts) await h.node?.close();
  return report;
}
