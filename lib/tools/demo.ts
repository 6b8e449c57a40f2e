// `seglog demo`: the main job on an embedded data directory, for a fresh machine.
//
// Owns: a short, real workload over the primitives and stores that exist, on a directory that
// persists between runs (default ./seglog-data), so that a second run shows the first run's data
// survived. It prints what it did and what it found; it never deletes the directory.

import * as path from 'node:path';
import { openSegmentedLog } from '../../segments/index.js';
import { openCell } from '../../cells/index.js';
import { openRaftNode } from '../raft/node.js';
import { openFsHostStore } from '../host/index.js';
import { CommitBatch } from '../host/batch.js';
import { encodeKvCommand } from '../raft/kv.js';
import type { Entry } from '../raft/types.js';
import { realFs } from '../fs/real.js';
import { formatFlags, parseOrExplain, type FlagTable } from './cli.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

const FLAGS = {
  dir: { type: 'string', value: 'D', help: 'the data directory (default ./seglog-data; created if missing, never deleted)' },
  records: { type: 'integer', min: 1, help: 'records each run appends to the log (default 1000)' },
} as const satisfies FlagTable;

const USAGE = `usage: seglog demo [--dir D] [--records N]

The main job on an embedded data directory: a cell, a segmented log (N durable appends, 32 at a
time), a host store scope committed under a fence token, and a Raft group with a payload. Run it
twice: the second run finds the first run's data.

options:
${formatFlags(FLAGS)}`;

export async function runDemo(argv: string[]): Promise<number> {
  const line = parseOrExplain('seglog demo', USAGE, argv, FLAGS, { name: 'no positional argument', min: 0, max: 0 });
  if (typeof line === 'number') return line;
  const dir = path.resolve(line.values.dir ?? 'seglog-data');
  const records = line.values.records ?? 1000;
  await realFs.mkdir(dir);
  console.log(`seglog demo on ${dir}`);

  // A cell: how many times this directory has been opened by the demo.
  const runs = await openCell(path.join(dir, 'runs.cell'));
  const previous = await runs.read();
  const run = previous === null ? 1 : Number(decoder.decode(previous)) + 1;
  await runs.write(encoder.encode(String(run)));
  await runs.close();
  console.log(`  cell runs.cell: this is run ${run} (durable before this line was printed)`);

  // A segmented log: every run appends `records` durable records, 32 appenders at a time.
  const log = await openSegmentedLog(path.join(dir, 'events'));
  const before = log.endIndex;
  const started = performance.now();
  const appenders = 32;
  let next = 0;
  await Promise.all(
    Array.from({ length: appenders }, async () => {
      while (next < records) {
        const n = next++;
        await log.append([encoder.encode(`run ${run} record ${n} at ${new Date().toISOString()}`)]);
      }
    }),
  );
  const elapsed = performance.now() - started;
  const [first] = await log.read(log.firstIndex, 1);
  const [last] = await log.read(log.endIndex - 1, 1);
  console.log(
    `  log events/: appended ${records} durable records in ${elapsed.toFixed(0)} ms ` +
      `(${((records / elapsed) * 1000).toFixed(0)}/s); indices ${before}..${log.endIndex - 1}, ` +
      `${log.endIndex - log.firstIndex} records in all`,
  );
  console.log(`    first: ${first === undefined ? '-' : decoder.decode(first)}`);
  console.log(`    last:  ${last === undefined ? '-' : decoder.decode(last)}`);
  await log.close();

  // The host store: a session scope whose head counts the runs and whose rows log them, committed
  // under a fence token (a takeover: the previous run's lease may still be live).
  const host = await openFsHostStore(path.join(dir, 'host'), { holderId: `demo-run-${run}` });
  const grant = await host.acquireFence('takeover');
  const scope = { kind: 'session' as const, name: 'demo' };
  const current = await host.loadHead(scope);
  const batch = CommitBatch.tryNew(`demo-run-${run}`, grant.token, [
    {
      scope,
      previous: current === null ? null : current.version,
      next: current === null ? 1 : current.version + 1,
      head: encoder.encode(`runs: ${run}`),
      append: [encoder.encode(`run ${run} at ${new Date().toISOString()}`)],
    },
  ]);
  await host.commit(batch);
  const head = await host.loadHead(scope);
  const rows = await host.readRows(scope, 0, 1000);
  console.log(
    `  host/ scope session/demo: fence token ${grant.token}; version ${head?.version ?? '-'}, ` +
      `head "${head === null ? '' : decoder.decode(head.head)}", ${rows.length} rows, the last "${decoder.decode(rows[rows.length - 1]?.data ?? new Uint8Array())}"`,
  );
  await host.close();

  // A Raft node: one group; each run votes, stores a payload, appends key-value entries (one of
  // them naming the payload), commits and applies them. Reopening recovers all of it.
  const node = await openRaftNode(path.join(dir, 'raft'));
  const group = await node.openGroup('demo');
  const state = await group.log.getLogState();
  const leaderId = { term: run, nodeId: 1 };
  await group.log.saveVote({ leaderId, committed: true });
  const body = encoder.encode(`payload of run ${run}\n`.repeat(1000));
  const info = await node.payloads.put(
    (async function* () {
      yield body;
    })(),
  );
  const firstIndex = (state.lastLogId?.index ?? 0) + 1;
  const entries: Entry[] = Array.from({ length: 10 }, (_, i) => ({
    logId: { leaderId, index: firstIndex + i },
    payload: {
      type: 'normal' as const,
      data: encodeKvCommand({ op: 'set', key: `run-${run}/key-${i}`, value: encoder.encode(`value ${i}`) }),
      ...(i === 0 ? { payloads: [info.digest] } : {}),
    },
  }));
  const flushed = new Promise<void>((resolve, reject) => {
    void group.log.append(entries, (err) => (err === null ? resolve() : reject(err))).catch(reject);
  });
  await flushed;
  const lastEntry = entries[entries.length - 1]!.logId;
  await group.log.saveCommitted(lastEntry);
  const replies = await group.stateMachine.apply(entries);
  const [applied] = await group.stateMachine.appliedState();
  const after = await group.log.getLogState();
  console.log(
    `  raft/ group demo: vote term ${run}; appended and applied ${entries.length} entries ` +
      `(${replies.length} replies); log ${after.lastPurgedLogId?.index ?? '-'}..${after.lastLogId?.index ?? '-'}, ` +
      `applied ${applied?.index ?? '-'}`,
  );
  console.log(`    payload ${info.digest} (${info.size} bytes) named by entry ${firstIndex}, durable before the append`);
  await node.close();

  console.log('done; run it again to see the data persist.');
  return 0;
}
