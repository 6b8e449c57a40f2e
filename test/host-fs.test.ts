// The file-system host store against the conformance suite, three ways: on the real file system
// with each handle behind its own FaultyFs (a kill severs that handle's I/O; a commit is stalled
// before its commit point), on a shared simulated machine (MemoryFs, one process view per handle;
// stalled after the commit point; one stripe), and with eight stripes and no lock lingering.
// Leases run on a shared ManualClock, so lapsing them is instant.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../lib/clock.js';
import { hostStoreConformance, type HostStoreFactory, type HostStoreStall } from '../lib/conformance/host-store.js';
import { FaultyFs } from '../lib/fs/faulty.js';
import { MemoryFs } from '../lib/fs/memory.js';
import { realFs } from '../lib/fs/real.js';
import type { FileSystem } from '../lib/fs/types.js';
import { FenceTiming, openFsHostStore, type FsHostStore, type FsHostStoreHooks, type FsHostStoreOptions } from '../lib/host/index.js';

interface Controls {
  kill: () => void | Promise<void>;
  hooks: FsHostStoreHooks;
}

/** Arms a one-shot stall on the hooks: the next commit is held at `at` until released. */
function stall(hooks: FsHostStoreHooks, at: 'beforeCommit' | 'afterCommit'): HostStoreStall {
  let reached!: () => void;
  let open!: () => void;
  const reachedP = new Promise<void>((resolve) => (reached = resolve));
  const gate = new Promise<void>((resolve) => (open = resolve));
  let armed = true;
  hooks[at] = async () => {
    if (!armed) return;
    armed = false;
    reached();
    await gate;
  };
  return {
    reached: reachedP,
    release: () => {
      armed = false;
      open();
    },
  };
}

function factory(setup: {
  base: () => Promise<{ dir: string; fsFor: () => { fs: FileSystem; kill: () => void | Promise<void> }; cleanup: () => Promise<void> }>;
  at: 'beforeCommit' | 'afterCommit';
  options?: FsHostStoreOptions;
}): () => Promise<HostStoreFactory<FsHostStore>> {
  return async () => {
    const { dir, fsFor, cleanup } = await setup.base();
    const clock = new ManualClock(10_000_000);
    const timing = FenceTiming.tryNew(1000, 3000);
    const controls = new Map<FsHostStore, Controls>();
    let n = 0;
    return {
      open: async () => {
        const { fs, kill } = fsFor();
        const hooks: FsHostStoreHooks = {};
        const store = await openFsHostStore(dir, { fs, clock, timing, hooks, holderId: `process-${++n}`, bootId: () => 'boot-1', ...setup.options });
        controls.set(store, { kill, hooks });
        return store;
      },
      lapseFenceLeases: () => clock.advance(timing.lease),
      kill: async (h) => {
        await controls.get(h)!.kill();
      },
      stallCommits: (h) => stall(controls.get(h)!.hooks, setup.at),
      close: (h) => h.close(),
      cleanup,
    };
  };
}

const realBase = async (): Promise<{ dir: string; fsFor: () => { fs: FileSystem; kill: () => Promise<void> }; cleanup: () => Promise<void> }> => {
  const dir = await mkdtemp(join(tmpdir(), 'seglog-host-fs-'));
  return {
    dir: join(dir, 'realm'),
    fsFor: () => {
      const fs = new FaultyFs(realFs);
      return { fs, kill: () => fs.sever() };
    },
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
};

const memoryBase = async (): Promise<{ dir: string; fsFor: () => { fs: FileSystem; kill: () => void }; cleanup: () => Promise<void> }> => {
  const machine = new MemoryFs({ trace: false });
  return {
    dir: '/realm',
    fsFor: () => {
      const fs = machine.newProcess();
      return { fs, kill: () => fs.sever() };
    },
    cleanup: async () => undefined,
  };
};

hostStoreConformance(factory({ base: realBase, at: 'beforeCommit' }), { name: 'FsHostStore conformance (real fs, stall before the commit point)' });

hostStoreConformance(factory({ base: memoryBase, at: 'afterCommit', options: { stripes: 1 } }), {
  name: 'FsHostStore conformance (MemoryFs processes, one stripe, stall after the commit point)',
});

hostStoreConformance(factory({ base: memoryBase, at: 'beforeCommit', options: { stripes: 8, lockLingerMs: 0, stripeFileBytes: 32 * 1024 * 1024, preallocBytes: 16 * 1024, checkpointBytes: 64 * 1024 } }), {
  name: 'FsHostStore conformance (MemoryFs, eight stripes, frequent checkpoints, no lingering)',
});
