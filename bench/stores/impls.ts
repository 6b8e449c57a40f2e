// The implementations `seglog bench stores` compares, by name: seglog's stores and the peers.
//
// Owns: `hostImplementations` and `raftImplementations` (what is available in this run, and a
// "not measured" reason for what is not), shared by the suite and its child processes.
// Guarantees: the order is always seglog, pg (seglog's PostgreSQL host store), sqlite, lmdb; a name
// is in `available` only if it can be opened; nothing here ever stands in for a missing store.

import type { HostStore } from '../../lib/host/types.js';
import type { StoreImplementation } from '../harness/store-workload.js';
import { openLmdbHostStore } from './host-lmdb.js';
import { pgImplementation } from './host-pg.js';
import { openSqliteHostStore } from './host-sqlite.js';
import type { Peers } from './peers.js';
import { openLmdbRaftNode, openSqliteRaftNode } from './raft-backends.js';
import type { SeglogStores } from './seglog.js';
import { seglogRaftImplementation, type RaftNodeHandle } from './workloads.js';

export type ImplName = 'seglog' | 'pg' | 'sqlite' | 'lmdb';

export const IMPL_LABEL: Record<ImplName, string> = {
  seglog: 'seglog',
  pg: 'seglog PostgreSQL store (synchronous_commit=on)',
  sqlite: 'better-sqlite3 (WAL, synchronous=FULL)',
  lmdb: 'lmdb-js (sync on)',
};

export interface Available<H> {
  available: StoreImplementation<H & { close(): Promise<void> }>[];
  /** Why an implementation is not measured, by name. */
  missing: Partial<Record<ImplName, string>>;
}

type Closable<H> = H & { close(): Promise<void> };

/** The PostgreSQL server of the run (its connection string), or why there is none; absent: not asked for. */
export type PgServer = { ok: true; url: string } | { ok: false; missing: string };

export function hostImplementations(seglog: SeglogStores, peers: Peers | null, peersMissing: string, pg?: PgServer): Available<HostStore> {
  const available: StoreImplementation<Closable<HostStore>>[] = [];
  const missing: Partial<Record<ImplName, string>> = {};
  if (seglog.host.ok) {
    const open = seglog.host.open;
    available.push({ name: 'seglog', label: IMPL_LABEL.seglog, open: (dir) => open(dir), close: (h) => h.close() });
  } else {
    missing.seglog = seglog.host.missing;
  }
  if (pg !== undefined) {
    if (pg.ok) available.push(pgImplementation(pg.url));
    else missing.pg = pg.missing;
  }
  if (peers !== null) {
    available.push({ name: 'sqlite', label: IMPL_LABEL.sqlite, open: (dir) => openSqliteHostStore(peers.Sqlite, dir), close: (h) => h.close() });
    available.push({ name: 'lmdb', label: IMPL_LABEL.lmdb, open: (dir) => openLmdbHostStore(peers.lmdb, dir), close: (h) => h.close() });
  } else {
    missing.sqlite = missing.lmdb = `NOT MEASURED (peer not installed): ${peersMissing}`;
  }
  return { available, missing };
}

export function raftImplementations(seglog: SeglogStores, peers: Peers | null, peersMissing: string): Available<RaftNodeHandle> {
  const available: StoreImplementation<RaftNodeHandle>[] = [];
  const missing: Partial<Record<ImplName, string>> = {};
  if (seglog.raft.ok) available.push(seglogRaftImplementation(seglog.raft.open));
  else missing.seglog = seglog.raft.missing;
  if (peers !== null) {
    available.push({ name: 'sqlite', label: IMPL_LABEL.sqlite, open: (dir) => openSqliteRaftNode(peers.Sqlite, dir), close: (h) => h.close() });
    available.push({ name: 'lmdb', label: IMPL_LABEL.lmdb, open: (dir) => openLmdbRaftNode(peers.lmdb, dir), close: (h) => h.close() });
  } else {
    missing.sqlite = missing.lmdb = `NOT MEASURED (peer not installed): ${peersMissing}`;
  }
  return { available, missing };
}
