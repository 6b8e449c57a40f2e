// The raw disk benchmarks of `seglog bench fsync`: what the filesystem under a directory costs,
// measured with node:fs directly, in the manner of PostgreSQL's pg_test_fsync.
//
// Owns: the section plans for sync methods by write size (write+fdatasync, write+fsync, O_DSYNC,
// O_SYNC, and overwriting preallocated space), writev batches, directory and rename costs, and
// concurrent syncs through the libuv pool; and `rawAppendVariant`, the raw baseline the engine is
// compared with. Guarantees: every timed operation is exactly what its label says (a write and its
// sync, or one O_DSYNC write); file creation, truncation and zero-filling happen outside the timed
// loop; each run starts a fresh file so a growing file really grows, and a per-run byte cap bounds
// disk use.

import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { SectionPlan, Variant } from './harness/runner.js';
import { formatBytes } from './harness/stats.js';
import { closedLoop, type Budget, type RunSample } from './harness/timing.js';
import * as raw from './rawfs.js';

export interface SuiteConfig {
  quick: boolean;
  /** Scratch directory on the filesystem being measured; removed by the caller. */
  root: string;
  rounds: number;
  warmupRounds: number;
  /** Slices per round (see SectionPlan.slices). */
  slices: number;
  budget: Budget;
  /** Write sizes for the sync-method sections. */
  sizes: number[];
  /** Bytes one run may write to one file (caps operations for large sizes). */
  maxBytesPerRun: number;
}

export type SyncMethod = 'fdatasync' | 'fsync' | 'odsync' | 'osync' | 'none';

const METHOD_LABEL: Record<SyncMethod, string> = {
  fdatasync: 'write + fdatasync',
  fsync: 'write + fsync',
  odsync: 'O_DSYNC write',
  osync: 'O_SYNC write',
  none: 'write, no sync',
};

function openFlags(method: SyncMethod): number {
  const base = raw.O_WRONLY | raw.O_CREAT | raw.O_TRUNC;
  if (method === 'odsync') return base | raw.O_DSYNC;
  if (method === 'osync') return base | raw.O_SYNC;
  return base;
}

function syncAfter(method: SyncMethod): ((fd: number) => Promise<void>) | null {
  if (method === 'fdatasync') return raw.fdatasync;
  if (method === 'fsync') return raw.fsync;
  return null;
}

/** Caps a budget's operations so one run writes at most `maxBytes`. */
export function capOps(budget: Partial<Budget> | undefined, bytesPerOp: number, maxBytes: number, minOps = 8): Partial<Budget> {
  return { ...budget, maxOps: Math.max(minOps, Math.floor(maxBytes / bytesPerOp)) };
}

/**
 * Appends `size`-byte writes to a file that starts empty each run, each followed by `method`'s sync
 * (or opened with O_DSYNC/O_SYNC). `concurrency` > 1 gives each worker a file of its own.
 */
export function rawAppendVariant(o: {
  id: string;
  label?: string;
  dir: string;
  size: number;
  method: SyncMethod;
  concurrency?: number;
  maxBytesPerRun: number;
  group?: string;
  notes?: string[];
}): Variant {
  const concurrency = o.concurrency ?? 1;
  const buf = raw.payload(o.size);
  const sync = syncAfter(o.method);
  const files = Array.from({ length: concurrency }, (_, i) => path.join(o.dir, `${o.id.replace(/[^A-Za-z0-9_-]/g, '_')}-${i}.dat`));
  let fds: number[] = [];
  const closeAll = async (): Promise<void> => {
    for (const fd of fds) await raw.close(fd);
    fds = [];
  };
  const v: Variant = {
    id: o.id,
    label: o.label ?? `${METHOD_LABEL[o.method]}, ${formatBytes(o.size)}`,
    params: { size: o.size, method: o.method, file: 'growing', concurrency },
    budget: capOps(undefined, o.size, o.maxBytesPerRun),
    async setup() {
      await mkdir(o.dir, { recursive: true });
    },
    async run(budget: Budget): Promise<RunSample> {
      await closeAll();
      for (const f of files) fds.push(await raw.open(f, openFlags(o.method)));
      return closedLoop({
        concurrency,
        budget,
        bytesPerOp: o.size,
        op: async (w, seq) => {
          const fd = fds[w] as number;
          await raw.write(fd, buf, seq * o.size);
          if (sync !== null) await sync(fd);
        },
      });
    },
    async teardown() {
      await closeAll();
      for (const f of files) await rm(f, { force: true });
    },
  };
  if (o.group !== undefined) v.group = o.group;
  if (o.notes !== undefined) v.notes = o.notes;
  return v;
}

/** Overwrites already-written, synced (zero-filled) space, cycling through it; fdatasync each. */
export function preallocatedVariant(o: { id: string; dir: string; size: number; maxBytesPerRun: number }): Variant {
  const buf = raw.payload(o.size);
  const file = path.join(o.dir, `${o.id.replace(/[^A-Za-z0-9_-]/g, '_')}.dat`);
  const span = Math.max(16 << 20, 16 * o.size);
  const slots = Math.floor(span / o.size);
  let fd: number | null = null;
  return {
    id: o.id,
    label: `preallocated: overwrite + fdatasync, ${formatBytes(o.size)}`,
    params: { size: o.size, method: 'fdatasync', file: 'preallocated', concurrency: 1 },
    budget: capOps(undefined, o.size, o.maxBytesPerRun),
    notes: [`overwrites a ${formatBytes(span)} zero-filled, fsynced file in a cycle, so no sync changes the file size.`],
    async setup() {
      await mkdir(o.dir, { recursive: true });
      await raw.zeroFill(file, span);
      fd = await raw.open(file, raw.O_WRONLY);
    },
    run(budget: Budget): Promise<RunSample> {
      const handle = fd as number;
      return closedLoop({
        concurrency: 1,
        budget,
        bytesPerOp: o.size,
        op: async (_w, seq) => {
          await raw.write(handle, buf, (seq % slots) * o.size);
          await raw.fdatasync(handle);
        },
      });
    },
    async teardown() {
      if (fd !== null) await raw.close(fd);
      fd = null;
      await rm(file, { force: true });
    },
  };
}

/** One section per write size: the sync methods on a growing file, and overwriting preallocated space. */
export function syncMethodSections(cfg: SuiteConfig): SectionPlan[] {
  return cfg.sizes.map((size) => {
    const dir = path.join(cfg.root, `methods-${size}`);
    const methods: SyncMethod[] = ['fdatasync', 'fsync', 'odsync', 'osync'];
    const variants: Variant[] = methods.map((method) =>
      rawAppendVariant({ id: `${method}-${size}`, dir, size, method, maxBytesPerRun: cfg.maxBytesPerRun }),
    );
    variants.push(preallocatedVariant({ id: `prealloc-fdatasync-${size}`, dir, size, maxBytesPerRun: cfg.maxBytesPerRun }));
    return {
      id: `sync-methods-${size}`,
      title: `Sync methods, ${formatBytes(size)} writes`,
      description:
        `One writer. Each operation is one ${formatBytes(size)} positional write appended to a file that starts empty ` +
        'in every run (so each sync must also persist the new size), made durable by the method named; the last row ' +
        'overwrites preallocated space instead. Ratios are to write + fdatasync on the growing file.',
      variants,
      baseline: `fdatasync-${size}`,
      rounds: cfg.rounds,
      warmupRounds: cfg.warmupRounds,
      slices: cfg.slices,
      budget: cfg.budget,
    };
  });
}

/** writev of K chunks of 512 B then one fdatasync: what batching many small records into one sync buys. */
export function writevSection(cfg: SuiteConfig): SectionPlan {
  const dir = path.join(cfg.root, 'writev');
  const chunk = 512;
  const counts = cfg.quick ? [1, 16, 256] : [1, 16, 64, 256];
  const variants: Variant[] = counts.map((k) => {
    const bufs = Array.from({ length: k }, (_, i) => raw.payload(chunk, i + 1));
    const total = k * chunk;
    const file = path.join(dir, `writev-${k}.dat`);
    let fd: number | null = null;
    return {
      id: `writev-${k}`,
      label: `writev ${k} × 512 B + fdatasync`,
      params: { chunks: k, chunkSize: chunk, method: 'fdatasync', file: 'growing' },
      budget: capOps(undefined, total, cfg.maxBytesPerRun),
      async setup() {
        await mkdir(dir, { recursive: true });
      },
      async run(budget: Budget): Promise<RunSample> {
        if (fd !== null) await raw.close(fd);
        fd = await raw.open(file, raw.O_WRONLY | raw.O_CREAT | raw.O_TRUNC);
        const handle = fd;
        return closedLoop({
          concurrency: 1,
          budget,
          bytesPerOp: total,
          recordsPerOp: k,
          op: async (_w, seq) => {
            await raw.writev(handle, bufs, seq * total, total);
            await raw.fdatasync(handle);
          },
        });
      },
      async teardown() {
        if (fd !== null) await raw.close(fd);
        fd = null;
        await rm(file, { force: true });
      },
    };
  });
  return {
    id: 'writev-batches',
    title: 'writev batches',
    description:
      'One writer appends K chunks of 512 B with one writev, then one fdatasync. An operation is one batch; records/s ' +
      'counts chunks. The ratio (records/s against K = 1) is the most group commit can gain on this disk.',
    variants,
    baseline: 'writev-1',
    rounds: cfg.rounds,
    warmupRounds: cfg.warmupRounds,
    slices: cfg.slices,
    budget: cfg.budget,
  };
}

/** Directory fsync, file creation and rename costs: the metadata side of durability. */
export function metadataSection(cfg: SuiteConfig): SectionPlan {
  const base = path.join(cfg.root, 'meta');
  const block = raw.payload(4096);
  const fresh = async (sub: string): Promise<string> => {
    const dir = path.join(base, sub);
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
    await raw.syncDir(dir);
    return dir;
  };
  const loop = (budget: Budget, op: (seq: number) => Promise<void>): Promise<RunSample> =>
    closedLoop({ concurrency: 1, budget, bytesPerOp: 0, op: (_w, seq) => op(seq) });
  const variants: Variant[] = [
    {
      id: 'dir-fsync',
      label: 'fsync of a directory, nothing changed',
      params: { op: 'dir-fsync' },
      async run(budget) {
        const dir = await fresh('idle');
        const fd = await raw.open(dir, raw.O_RDONLY | raw.O_DIRECTORY);
        try {
          return await loop(budget, () => raw.fsync(fd));
        } finally {
          await raw.close(fd);
        }
      },
    },
    {
      id: 'create-dirsync',
      label: 'create an empty file + directory fsync',
      params: { op: 'create-dirsync' },
      async run(budget) {
        const dir = await fresh('create');
        return loop(budget, async (seq) => {
          await raw.close(await raw.open(path.join(dir, `f${seq}`), raw.O_WRONLY | raw.O_CREAT | raw.O_EXCL));
          await raw.syncDir(dir);
        });
      },
    },
    {
      id: 'rename',
      label: 'rename, no sync',
      params: { op: 'rename' },
      async run(budget) {
        const dir = await fresh('rename');
        await raw.close(await raw.open(path.join(dir, 'n0'), raw.O_WRONLY | raw.O_CREAT));
        return loop(budget, (seq) => raw.rename(path.join(dir, `n${seq}`), path.join(dir, `n${seq + 1}`)));
      },
    },
    {
      id: 'rename-dirsync',
      label: 'rename + directory fsync',
      params: { op: 'rename-dirsync' },
      async run(budget) {
        const dir = await fresh('rename-sync');
        await raw.close(await raw.open(path.join(dir, 'n0'), raw.O_WRONLY | raw.O_CREAT));
        return loop(budget, async (seq) => {
          await raw.rename(path.join(dir, `n${seq}`), path.join(dir, `n${seq + 1}`));
          await raw.syncDir(dir);
        });
      },
    },
    {
      id: 'replace-4k',
      label: 'replace a file: create temp, write 4 KiB, fdatasync, rename over, directory fsync',
      params: { op: 'replace', size: 4096 },
      async run(budget) {
        const dir = await fresh('replace');
        const target = path.join(dir, 'current');
        return closedLoop({
          concurrency: 1,
          budget,
          bytesPerOp: 4096,
          op: async (_w, seq) => {
            const tmp = path.join(dir, `tmp-${seq}`);
            const fd = await raw.open(tmp, raw.O_WRONLY | raw.O_CREAT | raw.O_EXCL);
            try {
              await raw.write(fd, block, 0);
              await raw.fdatasync(fd);
            } finally {
              await raw.close(fd);
            }
            await raw.rename(tmp, target);
            await raw.syncDir(dir);
          },
        });
      },
    },
  ];
  for (const v of variants) v.teardown = () => rm(base, { recursive: true, force: true });
  return {
    id: 'metadata',
    title: 'Directory fsync, create and rename',
    description:
      'One writer. A directory fsync opens the directory, fsyncs it and closes it (as lib/fs does); each run starts in ' +
      'an empty directory. These are the costs of making a new file, a rename or an unlink durable.',
    variants,
    rounds: cfg.rounds,
    warmupRounds: cfg.warmupRounds,
    slices: cfg.slices,
    budget: cfg.budget,
  };
}

/** N files synced concurrently through the libuv pool: each worker appends 4 KiB + fdatasync to its own file. */
export function concurrencySection(cfg: SuiteConfig, threadpool: number): SectionPlan {
  const dir = path.join(cfg.root, 'concurrent');
  const levels = cfg.quick ? [1, 4, 64] : [1, 4, 16, 64];
  return {
    id: 'concurrent-files',
    title: 'Concurrent syncs of separate files',
    description:
      `N workers, each appending 4 KiB + fdatasync to a file of its own, all at once. Node runs file I/O on the libuv ` +
      `thread pool (${threadpool} threads in this run), so at most that many syncs are in the kernel at a time. Ratios are ` +
      'total syncs/s against one worker.',
    variants: levels.map((n) =>
      rawAppendVariant({
        id: `files-${n}`,
        label: `${n} file${n === 1 ? '' : 's'} at once, 4 KiB + fdatasync`,
        dir,
        size: 4096,
        method: 'fdatasync',
        concurrency: n,
        maxBytesPerRun: cfg.maxBytesPerRun,
      }),
    ),
    baseline: 'files-1',
    rounds: cfg.rounds,
    warmupRounds: cfg.warmupRounds,
    slices: cfg.slices,
    budget: cfg.budget,
  };
}
