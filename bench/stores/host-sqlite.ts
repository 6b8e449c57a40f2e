// The Host Store SPI on better-sqlite3: a peer for `seglog bench stores`, built as a careful user
// of SQLite would build it (docs/contracts/host-store.md, "Two shapes of backend": a transactional database").
//
// Owns: `openSqliteHostStore`. Guarantees: one database file per realm in WAL mode with
// `synchronous=FULL` (a commit is durable when its transaction returns: SQLite fsyncs the WAL at
// every commit); every `commit` is ONE `BEGIN IMMEDIATE` transaction that reads the fence token
// and each scope's head, checks them (lib: planCommit — retry, FENCED_OUT, CONFLICT, INVALID),
// and writes the heads and rows of every scope of the batch, so a batch lands in every scope or
// in none. Scope names are TEXT with SQLite's binary collation, which orders UTF-8 by its bytes as
// the SPI asks. better-sqlite3 is synchronous: a commit holds the event loop while SQLite syncs.
// This is a benchmark peer, not part of seglog.

import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { CommitBatch } from '../../lib/host/batch.js';
import { belowFirstRow } from '../../lib/host/guards.js';
import type { AcquireMode, FenceGrant, HeadPage, Row, ScopeKind, ScopeRef, VersionedHead } from '../../lib/host/types.js';
import { PeerHostBase, type PeerHostOptions } from './host-peer-base.js';
import { planAcquire, planCommit, planRenew, readBootId, type FenceRecord, type ScopeMeta } from './host-plan.js';
import type { SqliteConstructor, SqliteDatabase, SqliteStatement } from './peers.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS fence (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  token INTEGER NOT NULL, holder TEXT NOT NULL, lease_until REAL NOT NULL, boot TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS scopes (
  kind TEXT NOT NULL, name TEXT NOT NULL,
  version INTEGER NOT NULL, commit_id TEXT NOT NULL, head BLOB NOT NULL,
  first INTEGER NOT NULL, "end" INTEGER NOT NULL, deleted INTEGER NOT NULL,
  PRIMARY KEY (kind, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rows (
  kind TEXT NOT NULL, name TEXT NOT NULL, idx INTEGER NOT NULL, data BLOB NOT NULL,
  PRIMARY KEY (kind, name, idx)
);
`;

interface ScopeRow {
  version: number;
  commit_id: string;
  head: Buffer;
  first: number;
  end: number;
  deleted: number;
}

export class SqliteHostStore extends PeerHostBase {
  readonly #db: SqliteDatabase;
  readonly #boot: string;
  readonly #s: Record<
    'fence' | 'setFence' | 'scope' | 'upsertScope' | 'removeRows' | 'insertRow' | 'list' | 'listFirst' | 'rows',
    SqliteStatement
  >;

  constructor(db: SqliteDatabase, boot: string, options: PeerHostOptions) {
    super('sqlite', options);
    this.#boot = boot;
    this.#db = db;
    this.#s = {
      fence: db.prepare('SELECT token, holder, lease_until AS leaseUntil, boot FROM fence WHERE id = 1'),
      setFence: db.prepare(
        'INSERT INTO fence (id, token, holder, lease_until, boot) VALUES (1, ?, ?, ?, ?) ' +
          'ON CONFLICT (id) DO UPDATE SET token = excluded.token, holder = excluded.holder, lease_until = excluded.lease_until, boot = excluded.boot',
      ),
      scope: db.prepare('SELECT version, commit_id, head, first, "end", deleted FROM scopes WHERE kind = ? AND name = ?'),
      upsertScope: db.prepare(
        'INSERT INTO scopes (kind, name, version, commit_id, head, first, "end", deleted) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ' +
          'ON CONFLICT (kind, name) DO UPDATE SET version = excluded.version, commit_id = excluded.commit_id, head = excluded.head, ' +
          'first = excluded.first, "end" = excluded."end", deleted = excluded.deleted',
      ),
      removeRows: db.prepare('DELETE FROM rows WHERE kind = ? AND name = ? AND idx >= ? AND idx < ?'),
      insertRow: db.prepare('INSERT INTO rows (kind, name, idx, data) VALUES (?, ?, ?, ?)'),
      list: db.prepare('SELECT name, version, commit_id, head FROM scopes WHERE kind = ? AND deleted = 0 AND name > ? ORDER BY name LIMIT ?'),
      listFirst: db.prepare('SELECT name, version, commit_id, head FROM scopes WHERE kind = ? AND deleted = 0 ORDER BY name LIMIT ?'),
      rows: db.prepare('SELECT idx, data FROM rows WHERE kind = ? AND name = ? AND idx >= ? ORDER BY idx LIMIT ?'),
    };
  }

  #fence(): FenceRecord | null {
    return (this.#s.fence.get() as FenceRecord | undefined) ?? null;
  }

  #meta(scope: ScopeRef): ScopeMeta | null {
    const r = this.#s.scope.get(scope.kind, scope.name) as ScopeRow | undefined;
    if (r === undefined) return null;
    return { version: r.version, commitId: r.commit_id, head: r.head, first: r.first, end: r.end, deleted: r.deleted === 1 };
  }

  protected async doAcquire(mode: AcquireMode): Promise<FenceGrant> {
    const tx = this.#db.transaction(() => {
      const { record, grant } = planAcquire(mode, this.#fence(), this.holderId, this.clock.now(), this.#boot, this.timing.lease);
      this.#s.setFence.run(record.token, record.holder, record.leaseUntil, record.boot);
      return grant;
    });
    return tx.immediate();
  }

  protected async doRenew(token: number): Promise<void> {
    const tx = this.#db.transaction(() => {
      const record = planRenew(token, this.#fence(), this.clock.now(), this.#boot, this.timing.lease);
      this.#s.setFence.run(record.token, record.holder, record.leaseUntil, record.boot);
    });
    tx.immediate();
  }

  protected async doLoadHead(scope: ScopeRef): Promise<VersionedHead | null> {
    const m = this.#meta(scope);
    return m === null || m.deleted ? null : { version: m.version, commitId: m.commitId, head: new Uint8Array(m.head) };
  }

  protected async doListHeads(kind: ScopeKind, after: string | null, limit: number): Promise<HeadPage> {
    // One more than asked: whether it exists decides `next`.
    const rows = (after === null ? this.#s.listFirst.all(kind, limit + 1) : this.#s.list.all(kind, after, limit + 1)) as (ScopeRow & { name: string })[];
    const heads = rows.slice(0, limit).map((r) => ({ name: r.name, head: { version: r.version, commitId: r.commit_id, head: new Uint8Array(r.head) } }));
    return { heads, next: rows.length > limit ? (heads[heads.length - 1]?.name ?? null) : null };
  }

  protected async doReadRows(scope: ScopeRef, from: number, limit: number): Promise<Row[]> {
    const m = this.#meta(scope);
    if (m === null || m.deleted) return [];
    if (from < m.first) throw belowFirstRow(from, m.first);
    if (limit === 0) return [];
    const rows = this.#s.rows.all(scope.kind, scope.name, from, limit) as { idx: number; data: Buffer }[];
    return rows.map((r) => ({ index: r.idx, data: new Uint8Array(r.data) }));
  }

  protected async doCommit(batch: CommitBatch): Promise<void> {
    const tx = this.#db.transaction(() => {
      const plan = planCommit(batch, this.#fence()?.token ?? 0, (scope) => this.#meta(scope));
      if (plan.landed) return;
      for (const step of plan.steps) {
        const { kind, name } = step.scope;
        for (const r of step.remove) this.#s.removeRows.run(kind, name, r.from, r.to);
        step.insert.rows.forEach((row, i) => this.#s.insertRow.run(kind, name, step.insert.start + i, row));
        const a = step.after;
        this.#s.upsertScope.run(kind, name, a.version, a.commitId, a.head, a.first, a.end, a.deleted ? 1 : 0);
      }
    });
    tx.immediate();
  }

  protected async doClose(): Promise<void> {
    if (this.#db.open) this.#db.close();
  }
}

/** Opens (creating) the realm in `dir`: one SQLite database, WAL, synchronous=FULL. */
export async function openSqliteHostStore(Sqlite: SqliteConstructor, dir: string, options: PeerHostOptions = {}): Promise<SqliteHostStore> {
  mkdirSync(dir, { recursive: true });
  // A busy timeout lets a second handle (another "process") wait for the write lock.
  const db = new Sqlite(path.join(dir, 'realm.sqlite'), { timeout: 10_000 });
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(SCHEMA);
  return new SqliteHostStore(db, await readBootId(), options);
}
