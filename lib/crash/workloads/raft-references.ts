// Crash workload of the Raft store's payload reference checkpoint (lib/raft/reference-checkpoint.ts):
// appends naming payloads (checkpoints written every segment's worth and at close), a reopen,
// truncations that cut covered records and re-append the same log ids naming other payloads, a
// purge, more appends.
//
// Owns: `referencesWorkload` (run by test/crash-raft.test.ts through `runRaftCrashWorkload`).
// Guarantees of its checker, in every crash state: `listPayloadReferences` with its cross-check
// (the checkpoint against a scan) succeeds and answers exactly the digests the live records name;
// the node opens, its recovery took the checkpoint as it found it (`used`, or `absent` before the
// first one: never `damaged` or `stale`), counted exactly the live records that name payloads,
// and its name index holds exactly their digests.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';

import { MemoryFs } from '../../fs/memory.js';
import { encodeKvCommand } from '../../raft/kv.js';
import { listPayloadReferences } from '../../raft/payload-references.js';
import type { Entry, LogId } from '../../raft/types.js';
import type { CrashState } from '../explore.js';
import { openCrashNode, type RaftCrashEnv, type RaftCrashWorkload } from './raft.js';

const enc = new TextEncoder();

/** The payloads the workload stores, and their digests. */
const PAYLOADS = Array.from({ length: 8 }, (_, i) => enc.encode(`payload ${i} of the reference workload`));
const DIGESTS = PAYLOADS.map((p) => 'sha256:' + createHash('sha256').update(p).digest('hex'));

function lid(term: number, index: number): LogId {
  return { leaderId: { term, nodeId: 1 }, index };
}

/** An entry of `size` value bytes naming the payloads `named` (indices into PAYLOADS). */
function entry(term: number, index: number, named: number[], tag: string, size = 200): Entry {
  const data = encodeKvCommand({ op: 'set', key: `k${index % 5}`, value: enc.encode(`${tag}${term}.${index}`.padEnd(size, '.')) });
  const digests = named.map((n) => DIGESTS[n] as string);
  return { logId: lid(term, index), payload: digests.length === 0 ? { type: 'normal', data } : { type: 'normal', data, payloads: digests } };
}

function append(g: { log: { append(e: Entry[], cb: (err: Error | null) => void): Promise<void> } }, entries: Entry[]): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    g.log.append(entries, (err) => (err === null ? resolve() : reject(err))).catch(reject);
  });
}

/** The first phase: ten entries, most naming payloads; checkpoints every ~2 KiB and at close. */
const FIRST: Entry[][] = [
  [entry(1, 0, [0], 'a'), entry(1, 1, [], 'a')],
  [entry(1, 2, [1, 2], 'a'), entry(1, 3, [], 'a', 900)],
  [entry(1, 4, [3], 'a', 700), entry(1, 5, [0], 'a')],
  [entry(1, 6, [4], 'a', 1200)],
  [entry(1, 7, [], 'a'), entry(1, 8, [5], 'a'), entry(1, 9, [1], 'a')],
];

/** The second phase, after a reopen: cuts into the covered records, the same ids again naming others. */
async function secondPhase(fs: MemoryFs, env: RaftCrashEnv): Promise<void> {
  const node = await openCrashNode(fs, env);
  try {
    const g = await node.openGroup('g');
    await g.log.truncate(lid(1, 4));
    fs.mark(env.tag + 'refs', 1);
    await append(g, [entry(1, 4, [6], 'b', 300), entry(1, 5, [], 'b'), entry(1, 6, [7, 2], 'b', 900)]);
    fs.mark(env.tag + 'refs', 2);
    await append(g, [entry(1, 7, [6], 'b', 1500), entry(1, 8, [], 'b', 800), entry(1, 9, [], 'b')]);
    fs.mark(env.tag + 'refs', 3);
    await g.log.purge(lid(1, 1));
    fs.mark(env.tag + 'refs', 4);
    await g.log.truncate(lid(1, 6));
    fs.mark(env.tag + 'refs', 5);
    await append(g, [entry(1, 6, [5], 'c', 400), entry(2, 7, [7], 'c')]);
    fs.mark(env.tag + 'refs', 6);
  } finally {
    await node.close();
  }
}

/** The digests the live log names, by a read of every entry (one per naming record and digest). */
function namedBy(entries: readonly Entry[]): string[] {
  return entries.flatMap((e) => (e.payload.type === 'normal' ? [...(e.payload.payloads ?? [])].map((d) => `${e.logId.index}:${d}`) : []));
}

async function check(state: CrashState, env: RaftCrashEnv): Promise<void> {
  const fs = new MemoryFs({ image: state.image, trace: false });
  // The offline source first (it reads the checkpoint as the crash left it), cross-checked.
  const listed: string[] = [];
  for await (const r of listPayloadReferences(env.dir, { fs, crossCheck: true })) listed.push(`${r.logId.index}:${r.digest}`);
  const node = await openCrashNode(fs, { dir: env.dir, tag: env.tag });
  try {
    const g = await node.openGroup('g');
    const rec = node.recovery.get('g');
    assert.ok(rec !== undefined);
    assert.ok(rec.referenceCheckpoint === 'used' || rec.referenceCheckpoint === 'absent', `the checkpoint a crash leaves is believed (found ${rec.referenceCheckpoint})`);
    const entries = await g.log.tryGetLogEntries(0, Number.MAX_SAFE_INTEGER);
    const expected = namedBy(entries);
    assert.deepEqual(listed, expected, 'listPayloadReferences answers exactly what the live records name');
    const namingRecords = entries.filter((e) => e.payload.type === 'normal' && (e.payload.payloads?.length ?? 0) > 0).length;
    assert.equal(rec.namingRecords, namingRecords, 'open counted exactly the live records naming payloads');
    const live = new Set(expected.map((x) => x.slice(x.indexOf(':') + 1)));
    for (const d of DIGESTS) assert.equal(node.isNamed(d), live.has(d), `${d} is named exactly when a live record names it`);
  } finally {
    await node.close();
  }
}

/** The workload: set-up empty group; two phases (a close and a reopen between them). */
export const referencesWorkload: RaftCrashWorkload = {
  name: 'references',
  async setup(fs, env) {
    const node = await openCrashNode(fs, env);
    try {
      await node.openGroup('g');
      for (const [i, p] of PAYLOADS.entries()) {
        const { digest } = await node.payloads.put(
          (async function* () {
            yield p;
          })(),
        );
        assert.equal(digest, DIGESTS[i]);
      }
    } finally {
      await node.close();
    }
  },
  async run(fs, env) {
    const node = await openCrashNode(fs, env);
    try {
      const g = await node.openGroup('g');
      for (const [k, batch] of FIRST.entries()) {
        await append(g, batch);
        fs.mark(env.tag + 'first', k + 1);
      }
    } finally {
      await node.close();
    }
    await secondPhase(fs, env);
  },
  check,
};
