// The payload benchmarks: put and get against raw write+fsync and raw read of the same
// bytes, in the same interleaved rounds.
//
// Owns: the four variants. Guarantees: every operation moves one payload of `bytes` bytes,
// generated in 1 MiB chunks by the same generator (workloads.ts: a fixed pattern with a unique
// nonce and sequence number up front, so no put can dedupe); raw write+fsync writes those bytes
// to a new file and fsyncs it (the floor of a durable put, which also hashes, frames, renames and
// syncs a directory); raw read reads a file of the same size from the page cache, as `get` does
// for a payload it just stored. Each put run starts with an empty store (opened untimed), so disk
// use stays bounded by the run's byte cap.

import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Variant } from '../harness/runner.js';
import { closedLoop, type Budget, type RunSample } from '../harness/timing.js';
import * as raw from '../rawfs.js';
import type { SeglogPayloadStore } from './seglog.js';
import { generatedBody } from './workloads.js';

const CHUNK = 1024 * 1024;

function capped(bytes: number, maxBytesPerRun: number): Partial<Budget> {
  return { maxOps: Math.max(2, Math.floor(maxBytesPerRun / bytes)) };
}

/** Raw: write `bytes` to a new file in 1 MiB writes, fsync, close. */
export function rawWriteFsyncVariant(o: { id: string; dir: string; bytes: number; maxBytesPerRun: number }): Variant {
  const pattern = raw.payload(CHUNK, 31);
  return {
    id: o.id,
    label: 'raw write + fsync of a new file',
    params: { bytes: o.bytes },
    budget: capped(o.bytes, o.maxBytesPerRun),
    async run(budget: Budget): Promise<RunSample> {
      await rm(o.dir, { recursive: true, force: true });
      await mkdir(o.dir, { recursive: true });
      return closedLoop({
        concurrency: 1,
        budget,
        bytesPerOp: o.bytes,
        op: async (_w, seq) => {
          const fd = await raw.open(path.join(o.dir, `f${seq}`), raw.O_WRONLY | raw.O_CREAT | raw.O_TRUNC);
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
export function putVariant(o: { id: string; dir: string; bytes: number; maxBytesPerRun: number; open: (dir: string) => Promise<SeglogPayloadStore> }): Variant {
  const pattern = raw.payload(CHUNK, 31);
  let store: SeglogPayloadStore | null = null;
  const closeStore = async (): Promise<void> => {
    if (store !== null) await store.close();
    store = null;
  };
  return {
    id: o.id,
    label: 'seglog payload store: put',
    params: { bytes: o.bytes, implementation: 'seglog' },
    budget: capped(o.bytes, o.maxBytesPerRun),
    async run(budget: Budget): Promise<RunSample> {
      await closeStore();
      await rm(o.dir, { recursive: true, force: true });
      await mkdir(o.dir, { recursive: true });
      const s = await o.open(o.dir);
      store = s;
      return closedLoop({
        concurrency: 1,
        budget,
        bytesPerOp: o.bytes,
        op: async (_w, seq) => {
          const info = await s.put(generatedBody(o.bytes, seq, pattern));
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

/** Raw: read a file of `bytes` bytes (written and synced at setup) in 1 MiB reads into a new buffer each. */
export function rawReadVariant(o: { id: string; dir: string; bytes: number }): Variant {
  const file = path.join(o.dir, 'read.dat');
  const pattern = raw.payload(CHUNK, 31);
  return {
    id: o.id,
    label: 'raw read of a file of the same size',
    params: { bytes: o.bytes },
    async setup() {
      await mkdir(o.dir, { recursive: true });
      const fd = await raw.open(file, raw.O_WRONLY | raw.O_CREAT | raw.O_TRUNC);
      let at = 0;
      for await (const chunk of generatedBody(o.bytes, 0, pattern)) {
        await raw.write(fd, chunk, at);
        at += chunk.length;
      }
      await raw.fsync(fd);
      await raw.close(fd);
    },
    run(budget: Budget): Promise<RunSample> {
      return closedLoop({
        concurrency: 1,
        budget,
        bytesPerOp: o.bytes,
        op: async () => {
          const fd = await raw.open(file, raw.O_RDONLY);
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

/** seglog: `get` of a payload stored at setup, streamed to the end (each chunk verified by the store). */
export function getVariant(o: { id: string; dir: string; bytes: number; open: (dir: string) => Promise<SeglogPayloadStore> }): Variant {
  const pattern = raw.payload(CHUNK, 31);
  let store: SeglogPayloadStore | null = null;
  let digest = '';
  return {
    id: o.id,
    label: 'seglog payload store: get',
    params: { bytes: o.bytes, implementation: 'seglog' },
    async setup() {
      await mkdir(o.dir, { recursive: true });
      store = await o.open(o.dir);
      digest = (await store.put(generatedBody(o.bytes, 0, pattern))).digest;
    },
    run(budget: Budget): Promise<RunSample> {
      const s = store;
      if (s === null) throw new Error('get ran before setup');
      return closedLoop({
        concurrency: 1,
        budget,
        bytesPerOp: o.bytes,
        op: async () => {
          let n = 0;
          for await (const chunk of await s.get(digest)) n += chunk.length;
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
