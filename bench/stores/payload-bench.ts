// The payload benchmarks: put and get against raw write+fsync and raw read of the same bytes, at
// the same concurrency, in the same interleaved rounds.
//
// Owns: the four variants, each with `concurrency` workers issuing back to back. Guarantees:
// every operation moves one payload of `bytes` bytes, generated in 1 MiB chunks by the same
// generator (workloads.ts: a fixed pattern with a unique nonce and sequence number up front, so no
// put can dedupe); raw write+fsync writes those bytes to a new file in 1 MiB writes and fsyncs it
// (the floor of a durable put, which also hashes, frames, renames and syncs a directory); raw
// read reads a file of the same size in 1 MiB reads, each into a new buffer, from the page cache,
// as `get` does for a payload it just stored (and hands out its chunks, which the consumer owns).
// With N workers, raw writes N files at once and reads N files (one per worker), and seglog puts
// N payloads at once and gets N payloads (one per worker). Each put run starts with an empty
// store (opened untimed), so disk use stays bounded by the run's byte cap.

import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Variant } from '../harness/runner.js';
import { closedLoop, type Budget, type RunSample } from '../harness/timing.js';
import * as raw from '../rawfs.js';
import type { SeglogPayloadStore } from './seglog.js';
import { generatedBody } from './workloads.js';

const CHUNK = 1024 * 1024;

export interface PayloadVariantOptions {
  id: string;
  dir: string;
  bytes: number;
  /** Workers issuing operations at once (default 1). */
  concurrency?: number;
  /** Overrides of the section's budget. */
  budget?: Partial<Budget>;
}

/** Caps a run at `maxBytesPerRun`, at least two operations per worker, in whole rounds of workers. */
export function payloadBudget(bytes: number, concurrency: number, maxBytesPerRun: number): Partial<Budget> {
  const perWorker = Math.max(2, Math.floor(maxBytesPerRun / bytes / concurrency));
  return { maxOps: perWorker * concurrency };
}

function atOnce(concurrency: number): string {
  return concurrency === 1 ? 'one at a time' : `${concurrency} at once`;
}

/** Raw: write `bytes` to a new file in 1 MiB writes, fsync, close. */
export function rawWriteFsyncVariant(o: PayloadVariantOptions): Variant {
  const pattern = raw.payload(CHUNK, 31);
  const concurrency = o.concurrency ?? 1;
  return {
    id: o.id,
    label: `raw write + fsync of a new file, ${atOnce(concurrency)}`,
    params: { bytes: o.bytes, concurrency },
    ...(o.budget !== undefined ? { budget: o.budget } : {}),
    async run(budget: Budget): Promise<RunSample> {
      await rm(o.dir, { recursive: true, force: true });
      await mkdir(o.dir, { recursive: true });
      return closedLoop({
        concurrency,
        budget,
        bytesPerOp: o.bytes,
        op: async (w, seq) => {
          const fd = await raw.open(path.join(o.dir, `f${w}-${seq}`), raw.O_WRONLY | raw.O_CREAT | raw.O_TRUNC);
          try {
            let at = 0;
            for await (const chunk of generatedBody(o.bytes, seq, pattern)) {
              await raw.write(fd, chunk, at);
              at += chunk.length;
            }
            await raw.fsync(fd);
          } finally {
            await raw.close(fd);
          }
        },
      });
    },
    async teardown() {
      await rm(o.dir, { recursive: true, force: true });
    },
  };
}

/** seglog: `put` of a generated body; resolves once durable (docs/contracts/raft-store.md). */
export function putVariant(o: PayloadVariantOptions & { open: (dir: string) => Promise<SeglogPayloadStore> }): Variant {
  const pattern = raw.payload(CHUNK, 31);
  const concurrency = o.concurrency ?? 1;
  let store: SeglogPayloadStore | null = null;
  const closeStore = async (): Promise<void> => {
    if (store !== null) await store.close();
    store = null;
  };
  return {
    id: o.id,
    label: `seglog payload store: put, ${atOnce(concurrency)}`,
    params: { bytes: o.bytes, concurrency, implementation: 'seglog' },
    ...(o.budget !== undefined ? { budget: o.budget } : {}),
    async run(budget: Budget): Promise<RunSample> {
      await closeStore();
      await rm(o.dir, { recursive: true, force: true });
      await mkdir(o.dir, { recursive: true });
      const s = await o.open(o.dir);
      store = s;
      return closedLoop({
        concurrency,
        budget,
        bytesPerOp: o.bytes,
        op: async (w, seq) => {
          const info = await s.put(generatedBody(o.bytes, seq * concurrency + w, pattern));
          if (info.size !== o.bytes) throw new Error(`put stored ${info.size} of ${o.bytes} bytes`);
        },
      });
    },
    async teardown() {
      await closeStore();
      await rm(o.dir, { recursive: true, force: true });
    },
  };
}

/** Raw: read a file of `bytes` bytes (one per worker, written and synced at setup) in 1 MiB reads into a new buffer each. */
export function rawReadVariant(o: PayloadVariantOptions): Variant {
  const pattern = raw.payload(CHUNK, 31);
  const concurrency = o.concurrency ?? 1;
  const file = (w: number): string => path.join(o.dir, `read-${w}.dat`);
  return {
    id: o.id,
    label: `raw read of a file of the same size, ${atOnce(concurrency)}`,
    params: { bytes: o.bytes, concurrency },
    ...(o.budget !== undefined ? { budget: o.budget } : {}),
    async setup() {
      await mkdir(o.dir, { recursive: true });
      for (let w = 0; w < concurrency; w++) {
        const fd = await raw.open(file(w), raw.O_WRONLY | raw.O_CREAT | raw.O_TRUNC);
        let at = 0;
        for await (const chunk of generatedBody(o.bytes, w, pattern)) {
          await raw.write(fd, chunk, at);
          at += chunk.length;
        }
        await raw.fsync(fd);
        await raw.close(fd);
      }
    },
    run(budget: Budget): Promise<RunSample> {
      return closedLoop({
        concurrency,
        budget,
        bytesPerOp: o.bytes,
        op: async (w) => {
          const fd = await raw.open(file(w), raw.O_RDONLY);
          try {
            for (let at = 0; at < o.bytes; at += CHUNK) {
              const n = Math.min(CHUNK, o.bytes - at);
              const got = await raw.read(fd, Buffer.allocUnsafe(n), at);
              if (got !== n) throw new Error(`short read: ${got} of ${n}`);
            }
          } finally {
            await raw.close(fd);
          }
        },
      });
    },
    async teardown() {
      await rm(o.dir, { recursive: true, force: true });
    },
  };
}

/** seglog: `get` of a payload stored at setup (one per worker), streamed to the end (each chunk verified by the store). */
export function getVariant(o: PayloadVariantOptions & { open: (dir: string) => Promise<SeglogPayloadStore> }): Variant {
  const pattern = raw.payload(CHUNK, 31);
  const concurrency = o.concurrency ?? 1;
  let store: SeglogPayloadStore | null = null;
  const digests: string[] = [];
  return {
    id: o.id,
    label: `seglog payload store: get, ${atOnce(concurrency)}`,
    params: { bytes: o.bytes, concurrency, implementation: 'seglog' },
    ...(o.budget !== undefined ? { budget: o.budget } : {}),
    async setup() {
      await mkdir(o.dir, { recursive: true });
      store = await o.open(o.dir);
      for (let w = 0; w < concurrency; w++) digests.push((await store.put(generatedBody(o.bytes, w, pattern))).digest);
    },
    run(budget: Budget): Promise<RunSample> {
      const s = store;
      if (s === null) throw new Error('get ran before setup');
      return closedLoop({
        concurrency,
        budget,
        bytesPerOp: o.bytes,
        op: async (w) => {
          let n = 0;
          for await (const chunk of await s.get(digests[w] as string)) n += chunk.length;
          if (n !== o.bytes) throw new Error(`get answered ${n} of ${o.bytes} bytes`);
        },
      });
    },
    async teardown() {
      if (store !== null) await store.close();
      store = null;
      await rm(o.dir, { recursive: true, force: true });
    },
  };
}
