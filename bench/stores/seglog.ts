// seglog's three stores as `seglog bench stores` drives them, loaded at run time.
//
// Owns: `loadSeglogStores`, which finds `openFsHostStore`, `openRaftNode` and `openPayloadStore`
// in the compiled package (dist/lib/index.js) and answers, for each, either the function or why it
// is not there. Guarantees: the stores are driven only through the shapes of docs/contracts/; a store that
// is not built yet is reported as "NOT MEASURED (store not built)", never replaced by a stand-in
// (the in-memory reference stores are used by the tests of the harness only).

import type { HostStore } from '../../lib/host/types.js';
import type { RaftLogStorage } from '../../lib/raft/types.js';

export interface SeglogHostStore extends HostStore {
  close(): Promise<void>;
}

export interface SeglogRaftNode {
  openGroup(id: string): Promise<{ log: RaftLogStorage; stateMachine: unknown }>;
  close(): Promise<void>;
}

/** The payload store as the benchmark uses it (docs/contracts/raft-store.md, "The TypeScript shapes"). */
export interface SeglogPayloadStore {
  put(body: AsyncIterable<Uint8Array>, options?: { maxBytes?: number; expectedDigest?: string }): Promise<{ digest: string; size: number }>;
  get(digest: string): Promise<AsyncIterable<Uint8Array>>;
  close(): Promise<void>;
}

/** A store, or why it is not measured: `missing` starts with NOT_BUILT or LOAD_FAILED. */
export type Loaded<F> = { ok: true; open: F } | { ok: false; missing: string };

export interface SeglogStores {
  host: Loaded<(dir: string) => Promise<SeglogHostStore>>;
  raft: Loaded<(dir: string) => Promise<SeglogRaftNode>>;
  payloads: Loaded<(dir: string) => Promise<SeglogPayloadStore>>;
}

/** The words every report uses for a store that does not exist yet. */
export const NOT_BUILT = 'NOT MEASURED (store not built)';
/** The words for a store whose module exists but failed to load (e.g. a missing dependency). */
export const LOAD_FAILED = 'NOT MEASURED (the package failed to load)';

async function importModule(rel: string): Promise<Record<string, unknown> | string> {
  const url = new URL(rel, import.meta.url);
  try {
    return (await import(url.href)) as Record<string, unknown>;
  } catch (err) {
    return `cannot load ${url.pathname}: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`;
  }
}

const MODULES = {
  host: { name: 'openFsHostStore', module: '../../lib/host/index.js' },
  raft: { name: 'openRaftNode', module: '../../lib/raft/index.js' },
  payloads: { name: 'openPayloadStore', module: '../../lib/payloads/index.js' },
} as const;

type Which = keyof typeof MODULES;

/** `openRaftNode` with a plugin of the caller's (the snapshot benchmark's), or why it is not there. */
export async function loadRaftNodeOpener(): Promise<Loaded<(dir: string, options: { plugin: () => unknown }) => Promise<SeglogRaftNode>>> {
  const { name, module } = MODULES.raft;
  const mod = await importModule(module);
  if (typeof mod === 'string') return { ok: false, missing: `${LOAD_FAILED}: ${mod}` };
  const fn = mod[name];
  if (typeof fn !== 'function') return { ok: false, missing: `${NOT_BUILT}: the package exports no ${name}` };
  return { ok: true, open: (dir, options) => (fn as (d: string, o: unknown) => Promise<SeglogRaftNode>)(dir, options) };
}

/**
 * Finds the stores: first in the package's public entry point, then (if that one fails to load,
 * e.g. while another module is being rewritten) in each store's own module. With `only`, just
 * that store, from its own module (what a child process that measures one store needs: it then
 * does not pay for loading the whole package); the others answer "not loaded".
 */
export async function loadSeglogStores(only?: Which): Promise<SeglogStores> {
  const index = only === undefined ? await importModule('../../lib/index.js') : 'the package entry point was not loaded';
  const from = async (which: Which): Promise<{ fn: unknown; mod: Record<string, unknown> | null; why: string }> => {
    const { name, module } = MODULES[which];
    if (only !== undefined && only !== which) return { fn: undefined, mod: null, why: `NOT MEASURED (not loaded in this process)` };
    if (typeof index !== 'string' && typeof index[name] === 'function') return { fn: index[name], mod: index, why: '' };
    const mod = await importModule(module);
    if (typeof mod === 'string') return { fn: undefined, mod: null, why: `${LOAD_FAILED}: ${only === undefined ? `${index}; ${mod}` : mod}` };
    return { fn: mod[name], mod, why: `${NOT_BUILT}: the package exports no ${name}` };
  };
  const host = await from('host');
  const raft = await from('raft');
  const payloads = await from('payloads');
  const kvPlugin = raft.mod?.['kvPlugin'];
  return {
    host: typeof host.fn === 'function' ? { ok: true, open: (dir) => (host.fn as (d: string) => Promise<SeglogHostStore>)(dir) } : { ok: false, missing: host.why },
    raft:
      typeof raft.fn === 'function'
        ? {
            ok: true,
            // The state machine's plugin: the key-value example the package ships (docs/raft-store.md).
            open: (dir) => (raft.fn as (d: string, o: unknown) => Promise<SeglogRaftNode>)(dir, kvPlugin === undefined ? {} : { plugin: kvPlugin }),
          }
        : { ok: false, missing: raft.why },
    payloads:
      typeof payloads.fn === 'function'
        ? { ok: true, open: (dir) => (payloads.fn as (d: string) => Promise<SeglogPayloadStore>)(dir) }
        : { ok: false, missing: payloads.why },
  };
}
