// The Host Store SPI on lmdb-js: a peer for `seglog bench stores`, built as a careful user of
// LMDB would build it.
//
// Owns: `openLmdbHostStore`. Guarantees: one LMDB environment per realm with sync on and
// `overlappingSync: false`, so LMDB syncs inside `mdb_txn_commit` (data pages with fdatasync, the
// meta page through its O_DSYNC descriptor) and a `transaction` promise resolves only once its
// transaction is durable. (lmdb-js's Linux default, `overlappingSync: true`, resolves at commit
// and syncs later; awaiting its `flushed` promise measured the same here, 0.7-0.8k/s one at a
// time and 27-42k/s with 200 writers, so the simpler, plainly durable mode is used.)
// Every `commit` is ONE `transaction`
// callback that reads the fence token and each scope's head, checks them (planCommit) and writes
// every scope's head and rows; lmdb-js runs the callbacks queued in one event turn in one LMDB
// transaction and one sync — its group commit, which is why it is fast with many writers. Keys
// are bytes: kind, UTF-8 name (names hold no NUL), then for rows NUL and the index as 8 bytes
// big-endian, so scopes list in UTF-8 byte order. This is a benchmark peer, not part of seglog.

import { mkdirSync } from 'node:fs';
import type { CommitBatch } from '../../lib/host/batch.js';
import { belowFirstRow } from '../../lib/host/guards.js';
import type { AcquireMode, FenceGrant, HeadPage, ListedHead, Row, ScopeKind, ScopeRef, VersionedHead } from '../../lib/host/types.js';
import { PeerHostBase, type PeerHostOptions } from './host-peer-base.js';
import {
  decodeFence,
  decodeScopeMeta,
  encodeFence,
  encodeScopeMeta,
  planAcquire,
  planCommit,
  planRenew,
  readBootId,
  type FenceRecord,
  type ScopeMeta,
} from './host-plan.js';
import type { LmdbDatabase, LmdbModule, LmdbRoot } from './peers.js';

const KIND_BYTE: Record<ScopeKind, number> = { session: 1, identity: 2, mob: 3, record: 4 };
const FENCE_KEY = Buffer.from('fence');

/** The key of a scope: its kind's byte, then its name in UTF-8. */
export function scopeKeyBytes(kind: ScopeKind, name: string): Buffer {
  const n = Buffer.from(name, 'utf8');
  const k = Buffer.allocUnsafe(1 + n.length);
  k[0] = KIND_BYTE[kind];
  n.copy(k, 1);
  return k;
}

/** The key of a row: the scope's key, NUL, the index as 8 bytes big-endian. */
export function rowKeyBytes(scopeKey: Buffer, index: number): Buffer {
  const k = Buffer.allocUnsafe(scopeKey.length + 9);
  scopeKey.copy(k, 0);
  k[scopeKey.length] = 0;
  k.writeBigUInt64BE(BigInt(index), scopeKey.length + 1);
  return k;
}

export class LmdbHostStore extends PeerHostBase {
  readonly #root: LmdbRoot;
  readonly #scopes: LmdbDatabase;
  readonly #rows: LmdbDatabase;
  readonly #meta: LmdbDatabase;
  readonly #boot: string;

  constructor(root: LmdbRoot, boot: string, options: PeerHostOptions) {
    super('lmdb', options);
    this.#boot = boot;
    this.#root = root;
    this.#scopes = root.openDB({ name: 'scopes', encoding: 'binary', keyEncoding: 'binary' });
    this.#rows = root.openDB({ name: 'rows', encoding: 'binary', keyEncoding: 'binary' });
    this.#meta = root.openDB({ name: 'meta', encoding: 'binary', keyEncoding: 'binary' });
  }

  #fence(): FenceRecord | null {
    const b = this.#meta.get(FENCE_KEY);
    return b === undefined ? null : decodeFence(b);
  }

  #scope(scope: ScopeRef): ScopeMeta | null {
    const b = this.#scopes.get(scopeKeyBytes(scope.kind, scope.name));
    return b === undefined ? null : decodeScopeMeta(b);
  }

  /**
   * lmdb-js keeps a read snapshot until the next event turn or its own next commit: another
   * handle's (another process's) commit that resolved a moment ago may not be in it. Every load
   * starts a fresh snapshot, so a load after a commit answered, by any handle, shows it.
   */
  #fresh(): void {
    this.#root.resetReadTxn();
  }

  /** Runs `fn` in a write transaction; resolves once that transaction is durable. */
  async #write<R>(fn: () => R): Promise<R> {
    let failure: unknown = null;
    const p = this.#root.transaction(() => {
      try {
        return fn();
      } catch (err) {
        // Every check runs before the first write, so nothing of this callback was written.
        failure = err;
        return undefined;
      }
    });
    const result = await p;
    if (p.flushed !== undefined) await p.flushed;
    if (failure !== null) throw failure;
    return result as R;
  }

  protected doAcquire(mode: AcquireMode): Promise<FenceGrant> {
    return this.#write(() => {
      const { record, grant } = planAcquire(mode, this.#fence(), this.holderId, this.clock.now(), this.#boot, this.timing.lease);
      this.#meta.putSync(FENCE_KEY, encodeFence(record));
      return grant;
    });
  }

  protected doRenew(token: number): Promise<void> {
    return this.#write(() => {
      const record = planRenew(token, this.#fence(), this.clock.now(), this.#boot, this.timing.lease);
      this.#meta.putSync(FENCE_KEY, encodeFence(record));
    });
  }

  protected async doLoadHead(scope: ScopeRef): Promise<VersionedHead | null> {
    this.#fresh();
    const m = this.#scope(scope);
    return m === null || m.deleted ? null : { version: m.version, commitId: m.commitId, head: m.head };
  }

  protected async doListHeads(kind: ScopeKind, after: string | null, limit: number): Promise<HeadPage> {
    this.#fresh();
    const kindStart = Buffer.from([KIND_BYTE[kind]]);
    // Names hold no NUL, so after + NUL is the least key above `after`.
    const start = after === null ? kindStart : Buffer.concat([scopeKeyBytes(kind, after), Buffer.from([0])]);
    const end = Buffer.from([KIND_BYTE[kind] + 1]);
    const heads: ListedHead[] = [];
    let more = false;
    for (const { key, value } of this.#scopes.getRange({ start, end })) {
      const m = decodeScopeMeta(value);
      if (m.deleted) continue;
      if (heads.length === limit) {
        more = true;
        break;
      }
      heads.push({ name: key.toString('utf8', 1), head: { version: m.version, commitId: m.commitId, head: m.head } });
    }
    return { heads, next: more ? (heads[heads.length - 1]?.name ?? null) : null };
  }

  protected async doReadRows(scope: ScopeRef, from: number, limit: number): Promise<Row[]> {
    this.#fresh();
    const m = this.#scope(scope);
    if (m === null || m.deleted) return [];
    if (from < m.first) throw belowFirstRow(from, m.first);
    if (limit === 0 || from >= m.end) return [];
    const key = scopeKeyBytes(scope.kind, scope.name);
    const rows: Row[] = [];
    for (const { key: k, value } of this.#rows.getRange({ start: rowKeyBytes(key, from), end: rowKeyBytes(key, m.end), limit })) {
      rows.push({ index: Number(k.readBigUInt64BE(k.length - 8)), data: new Uint8Array(value) });
    }
    return rows;
  }

  protected doCommit(batch: CommitBatch): Promise<void> {
    return this.#write(() => {
      const plan = planCommit(batch, this.#fence()?.token ?? 0, (scope) => this.#scope(scope));
      if (plan.landed) return;
      for (const step of plan.steps) {
        const key = scopeKeyBytes(step.scope.kind, step.scope.name);
        for (const r of step.remove) {
          const doomed = [...this.#rows.getKeys({ start: rowKeyBytes(key, r.from), end: rowKeyBytes(key, r.to) })];
          for (const k of doomed) this.#rows.removeSync(k);
        }
        step.insert.rows.forEach((row, i) => this.#rows.putSync(rowKeyBytes(key, step.insert.start + i), row));
        this.#scopes.putSync(key, encodeScopeMeta(step.after));
      }
    });
  }

  protected async doClose(): Promise<void> {
    await this.#root.close();
  }
}

/** Opens (creating) the realm in `dir`: one LMDB environment, sync on, commits awaited until flushed. */
export async function openLmdbHostStore(lmdb: LmdbModule, dir: string, options: PeerHostOptions = {}): Promise<LmdbHostStore> {
  mkdirSync(dir, { recursive: true });
  const root = lmdb.open({ path: dir, maxDbs: 8, overlappingSync: false, cache: false, compression: false });
  return new LmdbHostStore(root, await readBootId(), options);
}
