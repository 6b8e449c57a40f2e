// The fs host store's checkpointer on a worker thread (for stores on the real file system).
//
// Owns: the worker side. The store (store.ts) starts this worker once it first needs a checkpoint
// round, with the realm's directory and the handle's settings; the worker opens its own handle on
// the realm — exactly as another process would: its own view, its own files and locks — and runs a
// round (checkpoint.ts) each time it is asked, answering whether it ran. So a round's work (reading
// the stripes, building the homes) runs on another core than the commits. Guarantees: the same as an
// in-thread round (checkpoint.ts); a round that fails changes nothing a load relies on and answers
// `{ ran: false, error }`.

import { parentPort, workerData } from 'node:worker_threads';
import { monotonicClock } from '../../clock.js';
import { realFs } from '../../fs/real.js';
import { FenceTiming } from '../timing.js';
import { checkpointRound } from './checkpoint.js';
import { RealmHandle, type RealmSettings } from './realm.js';

/** What the store passes to the worker (structured-clonable). */
export interface CheckpointWorkerData {
  dir: string;
  boot: Uint8Array;
  holderId: string;
  stripeFileBytes: number;
  preallocBytes: number;
  checkpointBytes: number;
  lockWaitMs: number;
}

/** A request to the worker, and its answer. */
export type CheckpointRequest = { type: 'round'; id: number } | { type: 'close' };
export type CheckpointAnswer = { type: 'done'; id: number; ran: boolean; error?: string };

async function main(): Promise<void> {
  const port = parentPort;
  if (port === null) throw new Error('checkpoint-worker runs only as a worker thread');
  const d = workerData as CheckpointWorkerData;
  const settings: RealmSettings = {
    fs: realFs,
    clock: monotonicClock,
    timing: FenceTiming.default(),
    holderId: `${d.holderId}/checkpointer`,
    boot: d.boot,
    stripes: undefined,
    stripeFileBytes: d.stripeFileBytes,
    preallocBytes: d.preallocBytes,
    checkpointBytes: d.checkpointBytes,
    lockLingerMs: 0,
    lockWaitMs: d.lockWaitMs,
    // The checkpointer never writes a group.
    inlineSyncBelowMs: 0,
    mistakes: {},
    // The round has a thread of its own: a few more homes at once.
    checkpointConcurrency: 6,
  };
  let handle: RealmHandle | null = null;
  let queue = Promise.resolve();
  port.on('message', (m: CheckpointRequest) => {
    queue = queue.then(async () => {
      if (m.type === 'close') {
        await handle?.closeFiles();
        handle = null;
        port.close();
        return;
      }
      try {
        handle ??= await RealmHandle.open(d.dir, settings);
        const ran = await checkpointRound(handle);
        port.postMessage({ type: 'done', id: m.id, ran } satisfies CheckpointAnswer);
      } catch (err) {
        // The next round starts from a fresh handle.
        await handle?.closeFiles().catch(() => undefined);
        handle = null;
        port.postMessage({ type: 'done', id: m.id, ran: false, error: err instanceof Error ? err.message : String(err) } satisfies CheckpointAnswer);
      }
    });
  });
}

void main();
