// The Raft node the damage tests take files away from: one group with a vote, 20 entries
// committed and applied, a snapshot and a purge through 9 (so every kind of group file exists).

import { encodeKvCommand } from '../../lib/raft/kv.js';
import { openRaftNode } from '../../lib/raft/node.js';
import type { Entry, LogId } from '../../lib/raft/types.js';

/** Small segments, so that the purge drops whole segments. */
export const OPTS = { segmentBytes: 4096, journalSegmentBytes: 4096 };

function lid(term: number, index: number): LogId {
  return { leaderId: { term, nodeId: 1 }, index };
}

function kv(index: number): Entry {
  return { logId: lid(1, index), payload: { type: 'normal', data: encodeKvCommand({ op: 'set', key: `k${index}`, value: new TextEncoder().encode(`v${index}`) }) } };
}

/** A node with group 'g': a vote, 20 entries committed and applied, a snapshot, a purge through 9. */
export async function buildNode(dir: string): Promise<void> {
  const node = await openRaftNode(dir, OPTS);
  const g = await node.openGroup('g');
  await g.log.saveVote({ leaderId: { term: 1, nodeId: 1 }, committed: true });
  const entries = Array.from({ length: 20 }, (_, i) => kv(i));
  await new Promise<void>((resolve, reject) => {
    g.log.append(entries, (err) => (err === null ? resolve() : reject(err))).catch(reject);
  });
  await g.log.saveCommitted(lid(1, 19));
  await g.stateMachine.apply(entries);
  await (await g.stateMachine.getSnapshotBuilder()).buildSnapshot();
  await g.log.purge(lid(1, 9));
  await node.close();
}
