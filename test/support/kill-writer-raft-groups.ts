// Kill-harness writer for many groups of one Raft node writing at once (test/raft-kill-groups
// .test.ts): the one-group writer's bursts (./kill-writer-raft.ts), run on RAFT_KILL_GROUPS groups
// side by side, so that their appends and truncations go through the node journal (a group
// journals while another group of the node writes) and its checkpoints, and a kill lands with
// records of many groups in one unsynced journal batch.
//
// Owns: the writer's protocol. It opens the node with the one-group writer's options, opens every
// group, reports what each shows, then runs one loop of bursts per group concurrently; each burst
// waits for its own calls only. Burst numbers are per group, offset by the group's number
// (`burstBase`), so that no two groups' entries carry the same bytes (a record replayed into the
// wrong group would show). No burst collects payloads: with the writer's grace of 0 a collection
// would remove a payload another group put for an append it has not issued yet (the store's rule,
// not a fault; the one-group kill test collects). Ledger lines (./kill-child.ts):
//   {t:'open', states: {g: fingerprint}, shows: {g: summary}}
//   {t:'begin', g, seq, calls}    before the first call of a burst of group g is issued
//   {t:'ack', g, seq, c}          call c of that burst acknowledged
// An error of any call ends the writer (the harness fails the test with its stderr).

import { pathToFileURL } from 'node:url';
import { openRaftNode } from '../../lib/raft/node.js';
import { ledger, runWriter, writerArgs } from './kill-child.js';
import { RAFT_KILL_OPTIONS, fingerprint, leadingTerm, observeGroup, planBurst, runBurst, showObserved, type RaftObserved } from './kill-writer-raft.js';

/** Groups of the node (enough that most of them journal while the others write). */
export const RAFT_KILL_GROUPS = 8;

/** The name of group k. */
export function killGroupName(k: number): string {
  return `g${k}`;
}

/** Burst numbers of group k start past this (group k's burst n is `burstBase(k) + n`). */
export function burstBase(k: number): number {
  return k * 1_000_000;
}

async function main(): Promise<void> {
  const { dir, life, random } = writerArgs();
  const node = await openRaftNode(dir, RAFT_KILL_OPTIONS);
  const groups = [];
  const states: Record<string, string> = {};
  const shows: Record<string, string> = {};
  for (let k = 0; k < RAFT_KILL_GROUPS; k++) {
    const g = await node.openGroup(killGroupName(k));
    const m = await observeGroup(g);
    states[killGroupName(k)] = fingerprint(m);
    shows[killGroupName(k)] = showObserved(m);
    groups.push({ k, g, m });
  }
  ledger({ t: 'open', states, shows });
  await Promise.all(
    groups.map(async ({ k, g, m: found }) => {
      const name = killGroupName(k);
      const lead = leadingTerm(found);
      let m: RaftObserved = found;
      for (let n = 1; ; n++) {
        const seq = burstBase(k) + n;
        const { calls, plan } = planBurst(random, life, seq, m, lead, n === 1, false);
        await runBurst(node, g, life, seq, calls, lead.term, () => ledger({ t: 'begin', g: name, seq, calls }), (c) => ledger({ t: 'ack', g: name, seq, c }));
        m = plan;
      }
    }),
  );
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) runWriter(main);
