// Crash workloads of a Raft node's small-group layout: the clean-close mark (lib/raft/node.ts,
// CLEAN) — an open that finds it opens every file without syncing what it reads, so the mark must
// be gone for any session that may have left something unsynced — and the growth of a group
// log's manifest from its first small slots (`manifestGrowthWorkload`, below).
//
// Owns: `cleanCloseWorkload`, `manifestGrowthWorkload` (run by test/crash-raft.test.ts through `runRaftCrashWorkload`, and by
// `seglog crash raft`). The run: a node cleanly closed (the mark left); process 1 opens it (the
// mark consumed), appends two entries (their flush awaited), then appends a third and is killed
// while its sync is held, the entry in the page cache only; process 2 opens the node and notes
// the last entry its recovery reported (mark `seen`), then closes it. Guarantees of its checker,
// in every crash state: the node opens; every entry whose flush was acknowledged is there; and
// once process 2 reported the third entry, no crash loses it — the open that reported it made it
// durable first (with the planted mistake `keepCleanMark`, process 2 trusts a mark that process 1
// should have consumed, does not sync, and a later crash takes the entry away).

import assert from 'node:assert/strict';

import { FaultyFs } from '../../fs/faulty.js';
import { MemoryFs } from '../../fs/memory.js';
import { encodeKvCommand } from '../../raft/kv.js';
import type { Entry, LogId } from '../../raft/types.js';
import type { CrashState } from '../explore.js';
import { maxAck, openCrashNode, type RaftCrashEnv, type RaftCrashWorkload } from './raft.js';

const enc = new TextEncoder();

function lid(index: number): LogId {
  return { leaderId: { term: 1, nodeId: 1 }, index };
}

function entry(index: number): Entry {
  return { logId: lid(index), payload: { type: 'normal', data: encodeKvCommand({ op: 'set', key: `k${index}`, value: enc.encode(`v${index}`.padEnd(120, '.')) }) } };
}

export const cleanCloseWorkload: RaftCrashWorkload = {
  name: 'clean-close',
  async setup(fs, env) {
    const node = await openCrashNode(fs, env);
    try {
      await node.openGroup('g');
    } finally {
      await node.close();
    }
  },
  async run(fs, env) {
    // Process 1: consumes the mark, appends, and dies inside the third append's sync.
    const p1 = new FaultyFs(fs.newProcess());
    const first = await openCrashNode(p1, env);
    const g = await first.openGroup('g');
    for (const i of [0, 1]) {
      await new Promise<void>((resolve, reject) => {
        g.log.append([entry(i)], (err) => (err === null ? resolve() : reject(err))).catch(reject);
      });
      fs.mark(env.tag + 'flushed', i);
    }
    const held = p1.pause('datasync', '*.seg');
    const flushed = new Promise<void>((resolve) => {
      g.log.append([entry(2)], () => resolve()).catch(() => resolve());
    });
    await Promise.race([held.reached, flushed]);
    await p1.sever();
    await flushed;
    // Process 2: its open reports what it found; that answer must stay.
    const second = await openCrashNode(fs.newProcess(), env);
    try {
      const last = second.recovery.get('g')?.lastLogId ?? null;
      assert.ok(last !== null && last.index >= 1, 'process 2 finds at least the two flushed entries');
      fs.mark(env.tag + 'seen', last.index);
    } finally {
      await second.close();
    }
  },
  async check(state: CrashState, env: RaftCrashEnv) {
    const node = await openCrashNode(new MemoryFs({ image: state.image, trace: false }), { dir: env.dir, tag: env.tag });
    try {
      const g = await node.openGroup('g');
      const entries = await g.log.tryGetLogEntries(0, 10);
      const floor = Math.max(maxAck(state, env, 'flushed'), maxAck(state, env, 'seen'));
      assert.ok(entries.length >= floor + 1, `entries through ${floor} were acknowledged or reported by an open; the log holds ${entries.length}`);
      for (const [i, e] of entries.entries()) assert.equal(e.logId.index, i, 'the log holds the entries in order');
    } finally {
      await node.close();
    }
  },
};

/** The group log's segment size of the growth workload: one entry per segment. */
const GROWTH_SEGMENT_BYTES = 256;
/** Entries (so segments) of the growth workload: past the 28 a first 512-byte manifest slot names. */
const GROWTH_ENTRIES = 32;
/** Entries the set-up appends (not recorded): the run starts a few segments short of the growth. */
const GROWTH_SETUP_ENTRIES = 24;

function appendAwaited(g: { log: { append(e: Entry[], cb: (err: Error | null) => void): Promise<void> } }, e: Entry): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    g.log.append([e], (err) => (err === null ? resolve() : reject(err))).catch(reject);
  });
}

function bigEntry(index: number): Entry {
  return { logId: lid(index), payload: { type: 'normal', data: encodeKvCommand({ op: 'set', key: `k${index}`, value: new Uint8Array(150).fill(index) }) } };
}

/**
 * The manifest's growth (segments/manifest.ts, GrowingSlots in cells/cell.ts): a group log of
 * one-entry segments (24 of them set up), appended to, each append awaited, until its manifest
 * outgrows its first slot size and is replaced whole by one of larger slots. Its checker, in every crash state: the
 * node opens, the log holds every acknowledged entry, in order, and nothing that was not appended.
 */
export const manifestGrowthWorkload: RaftCrashWorkload = {
  name: 'manifest-growth',
  async setup(fs, env) {
    const node = await openCrashNode(fs, { ...env, segmentBytes: GROWTH_SEGMENT_BYTES });
    try {
      const g = await node.openGroup('g');
      for (let i = 0; i < GROWTH_SETUP_ENTRIES; i++) await appendAwaited(g, bigEntry(i));
    } finally {
      await node.close();
    }
  },
  async run(fs, env) {
    const node = await openCrashNode(fs, { ...env, segmentBytes: GROWTH_SEGMENT_BYTES });
    try {
      const g = await node.openGroup('g');
      for (let i = GROWTH_SETUP_ENTRIES; i < GROWTH_ENTRIES; i++) {
        await appendAwaited(g, bigEntry(i));
        fs.mark(env.tag + 'flushed', i);
      }
    } finally {
      await node.close();
    }
  },
  async check(state: CrashState, env: RaftCrashEnv) {
    const node = await openCrashNode(new MemoryFs({ image: state.image, trace: false }), { dir: env.dir, tag: env.tag, segmentBytes: GROWTH_SEGMENT_BYTES });
    try {
      const entries = await (await node.openGroup('g')).log.tryGetLogEntries(0, 100);
      const acked = Math.max(GROWTH_SETUP_ENTRIES - 1, maxAck(state, env, 'flushed'));
      assert.ok(entries.length >= acked + 1 && entries.length <= GROWTH_ENTRIES, `entries 0..${acked} were acknowledged; the log holds ${entries.length}`);
      for (const [i, e] of entries.entries()) assert.equal(e.logId.index, i, 'the log holds the entries in order');
    } finally {
      await node.close();
    }
  },
};
