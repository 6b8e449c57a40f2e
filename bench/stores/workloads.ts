// The store workloads of `seglog bench stores`, written once against the interfaces of docs/contracts/ and
// run against seglog and its peers side by side (bench/harness/store-workload.ts).
//
// Owns: the host-store commit workload, the Raft append workload, the Raft "node" handle the
// workloads drive, and the generated bodies of the payload benchmarks. Guarantees: every
// implementation gets byte-identical input (the same heads, rows, entries and payload bytes from
// the same generator); an operation is complete only when the store says it is durable (a commit
// resolved; an append resolved AND its onFlushed fired with null; a put resolved); commit ids and
// payload contents never repeat, so no store can answer from a retry or a dedupe.

import { randomBytes } from 'node:crypto';
import { CommitBatch } from '../../lib/host/batch.js';
import type { HostStore, ScopeRef } from '../../lib/host/types.js';
import type { Entry, RaftLogStorage } from '../../lib/raft/types.js';
import type { StoreImplementation, StoreWorkload } from '../harness/store-workload.js';
import type { Budget } from '../harness/timing.js';
import { payload } from '../rawfs.js';

// ---- host store ----

interface HostState {
  token: number;
  scopes: ScopeRef[];
  versions: number[];
}

/** The bytes of one benchmark commit: a head and one row (300 bytes in all by default). */
export interface CommitShape {
  headBytes: number;
  rowBytes: number;
}

export const DEFAULT_COMMIT: CommitShape = { headBytes: 100, rowBytes: 200 };

/**
 * `scopes` writers, each committing to a scope of its own: one batch per commit that moves the
 * scope to its next version with a new head and one appended row. The scopes are created (and the
 * fence acquired) untimed, in `prepare`.
 */
export function hostCommitWorkload(o: { id: string; label: string; scopes: number; shape?: CommitShape; budget?: Partial<Budget> }): StoreWorkload<HostStore> {
  const shape = o.shape ?? DEFAULT_COMMIT;
  const head = payload(shape.headBytes, 11);
  const row = payload(shape.rowBytes, 12);
  const states = new WeakMap<HostStore, HostState>();
  const w: StoreWorkload<HostStore> = {
    id: o.id,
    label: o.label,
    concurrency: o.scopes,
    bytesPerOp: shape.headBytes + shape.rowBytes,
    params: { scopes: o.scopes, headBytes: shape.headBytes, rowBytes: shape.rowBytes },
    async prepare(store) {
      const { token } = await store.acquireFence('exclusive');
      const scopes: ScopeRef[] = Array.from({ length: o.scopes }, (_, i) => ({ kind: 'session', name: `bench-${o.id}-${i}` }));
      // Created in batches of up to 100 scopes (well inside the 8 MiB batch limit).
      for (let at = 0; at < scopes.length; at += 100) {
        const part = scopes.slice(at, at + 100);
        await store.commit(CommitBatch.tryNew(`create-${o.id}-${at}`, token, part.map((scope) => ({ scope, previous: null, next: 1, head }))));
      }
      states.set(store, { token, scopes, versions: scopes.map(() => 1) });
    },
    op(store, worker) {
      const s = states.get(store);
      if (s === undefined) throw new Error('the host workload ran before prepare');
      const v = s.versions[worker] as number;
      const scope = s.scopes[worker] as ScopeRef;
      const batch = CommitBatch.tryNew(`w${worker}-v${v + 1}`, s.token, [{ scope, previous: v, next: v + 1, head, append: [row] }]);
      return store.commit(batch).then(() => {
        s.versions[worker] = v + 1;
      });
    },
  };
  if (o.budget !== undefined) w.budget = o.budget;
  return w;
}

// ---- Raft log ----

/** A node as the Raft workloads see it: groups by id, each a RaftLogStorage. */
export interface RaftNodeHandle {
  openGroup(id: string): Promise<RaftLogStorage>;
  close(): Promise<void>;
}

interface RaftState {
  logs: RaftLogStorage[];
  next: number[];
  first: number[];
}

/** Appends one entry and waits until it is durable: the promise resolved and onFlushed said null. */
export function appendDurably(log: RaftLogStorage, entries: Entry[]): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let flushed = false;
    let returned = false;
    const settle = (): void => {
      if (flushed && returned) resolve();
    };
    log
      .append(entries, (err) => {
        if (err !== null) reject(err);
        flushed = true;
        settle();
      })
      .then(() => {
        returned = true;
        settle();
      }, reject);
  });
}

export function normalEntry(index: number, data: Uint8Array): Entry {
  return { logId: { leaderId: { term: 1, nodeId: 1 }, index }, payload: { type: 'normal', data } };
}

/**
 * Entries of `entryBytes` bytes of data, one entry per append. `groups` groups, each with
 * `perGroup` appenders: with more than one appender per group, each append takes the group's next
 * index at the moment it is called (calls are made in index order), so `perGroup` appends are in
 * flight at once. With `purgeBetweenRuns`, the entries of the previous run are purged (untimed)
 * before each run, bounding the disk a large-entry benchmark uses.
 */
export function raftAppendWorkload(o: {
  id: string;
  label: string;
  groups: number;
  perGroup: number;
  entryBytes: number;
  purgeBetweenRuns?: boolean;
  budget?: Partial<Budget>;
}): StoreWorkload<RaftNodeHandle> {
  const data = payload(o.entryBytes, 21);
  const states = new WeakMap<RaftNodeHandle, RaftState>();
  const w: StoreWorkload<RaftNodeHandle> = {
    id: o.id,
    label: o.label,
    concurrency: o.groups * o.perGroup,
    bytesPerOp: o.entryBytes,
    params: { groups: o.groups, appendersPerGroup: o.perGroup, entryBytes: o.entryBytes },
    async prepare(node) {
      const logs: RaftLogStorage[] = [];
      for (let g = 0; g < o.groups; g++) {
        const log = await node.openGroup(`${o.id}-g${g}`);
        await log.saveVote({ leaderId: { term: 1, nodeId: 1 }, committed: true });
        logs.push(log);
      }
      states.set(node, { logs, next: logs.map(() => 1), first: logs.map(() => 1) });
    },
    async beforeRun(node) {
      const s = states.get(node);
      if (s === undefined || o.purgeBetweenRuns !== true) return;
      for (let g = 0; g < s.logs.length; g++) {
        const last = (s.next[g] as number) - 1;
        if (last >= (s.first[g] as number)) {
          await (s.logs[g] as RaftLogStorage).purge({ leaderId: { term: 1, nodeId: 1 }, index: last });
          s.first[g] = last + 1;
        }
      }
    },
    op(node, worker) {
      const s = states.get(node);
      if (s === undefined) throw new Error('the raft workload ran before prepare');
      const g = worker % o.groups;
      const index = s.next[g] as number;
      s.next[g] = index + 1;
      return appendDurably(s.logs[g] as RaftLogStorage, [normalEntry(index, data)]);
    },
  };
  if (o.budget !== undefined) w.budget = o.budget;
  return w;
}

/** Adapts seglog's node (openGroup answers `{ log, stateMachine }`) to the workloads' handle. */
export function seglogRaftImplementation(open: (dir: string) => Promise<{ openGroup(id: string): Promise<{ log: RaftLogStorage }>; close(): Promise<void> }>): StoreImplementation<RaftNodeHandle> {
  return {
    name: 'seglog',
    label: 'seglog',
    async open(dir) {
      const node = await open(dir);
      return { openGroup: async (id) => (await node.openGroup(id)).log, close: () => node.close() };
    },
    close: (h) => h.close(),
  };
}

// ---- payload bodies ----

/**
 * A generated payload body of `bytes` bytes in chunks of `chunkBytes`: a fixed pattern whose first
 * 16 bytes are a random nonce and `seq`, so no two bodies share a digest. The pattern chunk is
 * made once and yielded again and again (no allocation per chunk), as a producer streaming from
 * a network buffer pool would.
 */
export function generatedBody(bytes: number, seq: number, pattern: Buffer): AsyncIterable<Uint8Array> {
  const chunkBytes = pattern.length;
  const nonce = randomBytes(8);
  return {
    async *[Symbol.asyncIterator]() {
      for (let at = 0; at < bytes; at += chunkBytes) {
        const n = Math.min(chunkBytes, bytes - at);
        if (at === 0) {
          const first = Buffer.from(pattern.subarray(0, n));
          nonce.copy(first, 0, 0, Math.min(8, n));
          if (n >= 16) first.writeDoubleLE(seq, 8);
          yield first;
        } else {
          yield n === chunkBytes ? pattern : pattern.subarray(0, n);
        }
      }
    },
  };
}
