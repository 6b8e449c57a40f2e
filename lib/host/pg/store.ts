// The PostgreSQL host store: `openPgHostStore(options)` → `PgHostStore`.
//
// Owns: the public class and its options, the realm's creation and version check, the mapping of
// each SPI operation onto the server-side functions of schema.ts, and what the store does when a
// statement fails. Guarantees (the argument per obligation is in docs/host-store-pg.md):
// - Every commit is one transaction. The common one (one scope to its next version, no truncation,
//   drop or delete) is one statement, `commit_one`, in the server's implicit transaction: one
//   round trip. Every other batch, and a commit_one that moved nothing, is BEGIN, `commit_batch`,
//   COMMIT, with the batch's updates sorted by (kind, name bytes): the fixed order in which its
//   scope rows are locked. There COMMIT is sent only once `commit_batch` answered, so a writer that
//   dies (or loses its connection) before it sent COMMIT leaves nothing applied.
// - Serialization failures and deadlocks (SQLSTATE 40001, 40P01: the transaction rolled back) are
//   retried up to RETRIES times with jittered backoff, then answer UNAVAILABLE.
// - A connection lost after COMMIT was sent leaves the outcome unknown. The store settles it
//   itself, within the timing's longest commit, by sending the same batch again on a fresh
//   connection (the commit id makes that safe: a landed batch answers Ok and acts no more, and the
//   scope row locks make the retry wait for a transaction still open); when no answer comes in
//   time it answers INDETERMINATE. A server that cannot be reached, or a failure before COMMIT was
//   sent, answers UNAVAILABLE: nothing was applied. Loads are retried, then answer UNAVAILABLE.
// - Leases run on the server's clock (clock_timestamp()); no client clock is ever written.
// - `close()` ends the store's own pool, never a pool it was given.

import type { Pool, PoolClient, QueryResult } from 'pg';
import { SeglogError, corrupt } from '../../errors.js';
import type { CommitBatch } from '../batch.js';
import { HostStoreError } from '../errors.js';
import { belowFirstRow, checkHolderId, checkTiming } from '../guards.js';
import { HostStoreHandle } from '../handle.js';
import type { FenceTiming } from '../timing.js';
import type { AcquireMode, FenceGrant, HeadPage, ListedHead, Row, ScopeKind, ScopeRef, VersionedHead } from '../types.js';
import { backoff, isConnectionLoss, isRetryable, messageOf, sleep, sqlState } from './failures.js';
import { commitParams, fastParams, lockOrder, refusal, type Sorted } from './params.js';
import { createSchemaSql, KIND_CODE, quoteIdent, SCHEMA_VERSION, SQLSTATE, upgradeSql } from './schema.js';

/** Options of `openPgHostStore`. Give `connectionString` or `pool`, not both. */
export interface PgHostStoreOptions {
  /** e.g. 'postgresql:///seglog?host=/var/run/postgresql' or a postgres:// URL. The store makes its own pool. */
  connectionString?: string;
  /** Or an existing `pg.Pool` (node-postgres 8); the store never ends it. */
  pool?: unknown;
  /** The PostgreSQL schema that holds the realm: one realm per schema (default 'seglog'). */
  schema?: string;
  /** The renew interval and lease this store records and reports. Default `FenceTiming.default()`. */
  timing?: FenceTiming;
  /** Names this handle in HELD answers (at most 1024 bytes of UTF-8). Default: host, pid and a random part. */
  holderId?: string;
  /** Connections of the store's own pool (default 10; commits in flight beyond it wait for one). Ignored with `pool`. */
  maxConnections?: number;
}

/** Serialization failures and deadlocks are retried this many times. */
const RETRIES = 6;
const MAX_HOLDER_ID_BYTES = 1024;
/** The most heads one listHeads answers (a page of heads is held in memory whole). */
const MAX_PAGE = 10_000;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

type PgModule = typeof import('pg');

async function loadPg(): Promise<PgModule> {
  try {
    const mod = (await import('pg')) as PgModule & { default?: PgModule };
    return mod.default ?? mod;
  } catch (err) {
    throw HostStoreError.unavailable('the PostgreSQL host store needs the `pg` package (node-postgres 8): npm install pg', err);
  }
}

/** int8 columns as safe JavaScript integers (every version, index and token is one). */
function toSafeInt(text: string): number {
  const n = BigInt(text);
  if (n > MAX_SAFE || n < -MAX_SAFE) throw HostStoreError.damaged(corrupt(`the database holds ${text} in an int8 column, beyond the safe integers`, { value: text }));
  return Number(n);
}

/** What one commit attempt came to. */
type CommitStep =
  | { kind: 'done' }
  | { kind: 'refused'; error: HostStoreError }
  /** Rolled back by a serialization failure or a deadlock: try again. */
  | { kind: 'retry'; cause: unknown }
  /** Nothing was applied (the server was not reached, or the transaction failed before COMMIT). */
  | { kind: 'not-applied'; cause: unknown }
  /** COMMIT was sent and its answer lost: the outcome is unknown. */
  | { kind: 'commit-lost'; cause: unknown };

function asUnavailable(batch: CommitBatch, cause: unknown): HostStoreError {
  if (cause instanceof HostStoreError) return cause;
  return HostStoreError.unavailable(`commit ${batch.commitId}: ${messageOf(cause)}`, cause);
}

const openKey: unknown = Object.freeze({});

interface OpenParts {
  pg: PgModule;
  pool: Pool;
  ownsPool: boolean;
}

/** A handle on a realm kept in a PostgreSQL schema (see the module header). Implements HostStore; `close()` is idempotent. */
export class PgHostStore extends HostStoreHandle {
  /** The schema that holds the realm. */
  readonly schema: string;
  readonly #pool: Pool;
  readonly #ownsPool: boolean;
  readonly #sql: ReturnType<typeof statements>;
  readonly #types: { getTypeParser: (oid: number, format?: 'text' | 'binary') => (value: string) => unknown };
  /** Connections checked out by this handle (a kill cuts them). */
  readonly #inUse = new Set<PoolClient>();
  readonly #leaseMs: number;
  readonly #settleMs: number;
  readonly #begin: string;
  readonly #oneName: string;
  /** The store's own pool pipelines (BEGIN and the function in one write); a pool given to it may not. */
  readonly #pipelined: boolean;

  /** @internal Use `openPgHostStore`. (`parts` is opaque, so that the package's types never name the client library's.) */
  constructor(parts: unknown, schema: string, holderId: string, timing: FenceTiming, key: unknown) {
    if (key !== openKey) throw new TypeError('use openPgHostStore() to open a PgHostStore');
    super(holderId, timing);
    const { pg, pool, ownsPool } = parts as OpenParts;
    this.schema = schema;
    this.#pool = pool;
    this.#ownsPool = ownsPool;
    this.#sql = statements(schema);
    this.#leaseMs = timing.lease;
    this.#settleMs = timing.maxCommitLatency;
    this.#pipelined = ownsPool;
    // The store's own pool sets the idle cut-off per session (at connect); a pool given to it, per transaction.
    this.#begin = this.#sql.begin(ownsPool ? null : timing.lease);
    this.#oneName = `${this.#sql.prefix}one`;
    const base = pg.types;
    this.#types = { getTypeParser: (oid, format) => (oid === 20 ? toSafeInt : base.getTypeParser(oid, format ?? 'text')) as (value: string) => unknown };
  }

  // ---- connections ----

  /** A connection of the pool; UNAVAILABLE when the server cannot be reached (nothing was sent). */
  async #connect(): Promise<PoolClient> {
    this.usable();
    let client: PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (err) {
      throw HostStoreError.unavailable(`cannot reach the PostgreSQL server: ${messageOf(err)}`, err);
    }
    guardClient(client);
    if (this.killed) {
      client.release(true);
      throw HostStoreError.unavailable('the process behind this handle was killed');
    }
    this.#inUse.add(client);
    return client;
  }

  #release(client: PoolClient, err?: unknown): void {
    this.#inUse.delete(client);
    // A connection that failed is destroyed, never handed out again.
    client.release(err !== undefined && isConnectionLoss(err) ? (err instanceof Error ? err : true) : undefined);
  }

  /** One prepared statement; its messages (Bind, Describe, Execute, Sync) leave in one write. */
  async #query(client: PoolClient, name: string, text: string, values: unknown[]): Promise<QueryResult> {
    return corked(client, () => client.query({ name, text, values, types: this.#types }));
  }

  /**
   * Runs one statement in a transaction of its own; a serialization failure or deadlock is retried,
   * and so is a lost connection when `lossIsSafe` (a read); otherwise, UNAVAILABLE.
   */
  async #statement(what: string, name: string, text: string, values: unknown[], lossIsSafe: boolean): Promise<QueryResult> {
    for (let attempt = 0; ; attempt++) {
      const client = await this.#connect();
      try {
        const result = await this.#query(client, name, text, values);
        this.#release(client);
        return result;
      } catch (err) {
        this.#release(client, err);
        if (err instanceof HostStoreError) throw err;
        if (attempt < RETRIES && !this.killed && (isRetryable(sqlState(err)) || (lossIsSafe && isConnectionLoss(err)))) {
          await sleep(backoff(attempt, 5, 500));
          continue;
        }
        throw HostStoreError.unavailable(`${what}: ${messageOf(err)}`, err);
      }
    }
  }

  /** A load: it changes nothing, so a lost connection is retried too. */
  #read(what: string, name: string, text: string, values: unknown[]): Promise<QueryResult> {
    return this.#statement(what, name, text, values, true);
  }

  /**
   * An acquire or a renew: one transaction each. When the connection is lost mid-way the outcome
   * is unknown and the call answers UNAVAILABLE: an acquire that landed anyway burned a token and
   * recorded this holder's lease (tokens only grow; Core's next exclusive acquire then answers HELD
   * with its own token, which Core takes over), and a renew that landed anyway only recorded a lease.
   */
  #fenceCall(what: string, name: string, text: string, values: unknown[]): Promise<QueryResult> {
    return this.#statement(what, name, text, values, false);
  }

  // ---- fence ----

  protected async doAcquire(mode: AcquireMode): Promise<FenceGrant> {
    const r = await this.#fenceCall('acquire the fence', `${this.#sql.prefix}acquire`, this.#sql.acquire, [mode === 'exclusive', this.holderId, this.#leaseMs]);
    const row = r.rows[0] as { token: number | null; superseded_ms: number | null; held_holder: string | null; held_ms: number | null; held_token: number | null };
    if (row.token === null) throw HostStoreError.held(row.held_holder ?? '', Math.max(1, Math.ceil(row.held_ms ?? 0)), row.held_token ?? 0);
    return { token: row.token, supersededLease: Math.ceil(row.superseded_ms ?? 0) };
  }

  protected async doRenew(token: number): Promise<void> {
    const r = await this.#fenceCall('renew the fence', `${this.#sql.prefix}renew`, this.#sql.renew, [token, this.#leaseMs]);
    const answer = (r.rows[0] as { answer: number }).answer;
    if (answer === 0) return;
    if (answer > 0) throw HostStoreError.fencedOut(answer);
    throw HostStoreError.invalid(`fence token ${token} was never issued`);
  }

  // ---- loads ----

  protected async doLoadHead(scope: ScopeRef): Promise<VersionedHead | null> {
    const r = await this.#read('load a head', `${this.#sql.prefix}head`, this.#sql.head, [KIND_CODE[scope.kind], Buffer.from(scope.name, 'utf8')]);
    const row = r.rows[0] as { version: number; commit_id: string; head: Buffer } | undefined;
    return row === undefined ? null : { version: row.version, commitId: row.commit_id, head: new Uint8Array(row.head) };
  }

  protected async doListHeads(kind: ScopeKind, after: string | null, limit: number): Promise<HeadPage> {
    // One more than asked: whether it exists decides `next`.
    // A page holds at most MAX_PAGE heads; a larger limit answers that many, and `next`.
    const page = Math.min(limit, MAX_PAGE);
    const r = await this.#read('list heads', `${this.#sql.prefix}list`, this.#sql.list, [KIND_CODE[kind], after === null ? null : Buffer.from(after, 'utf8'), page + 1]);
    const rows = r.rows as { name: Buffer; version: number; commit_id: string; head: Buffer }[];
    const heads: ListedHead[] = rows.slice(0, page).map((x) => ({
      name: decodeName(x.name),
      head: { version: x.version, commitId: x.commit_id, head: new Uint8Array(x.head) },
    }));
    return { heads, next: rows.length > page ? heads[heads.length - 1]!.name : null };
  }

  protected async doReadRows(scope: ScopeRef, from: number, limit: number): Promise<Row[]> {
    const r = await this.#read('read rows', `${this.#sql.prefix}rows`, this.#sql.rows, [KIND_CODE[scope.kind], Buffer.from(scope.name, 'utf8'), from, limit]);
    const rows = r.rows as { first: number; idx: number | null; data: Buffer | null }[];
    if (rows.length === 0) return [];
    const first = rows[0]!.first;
    if (from < first) throw belowFirstRow(from, first);
    const out: Row[] = [];
    for (const x of rows) if (x.idx !== null) out.push({ index: x.idx, data: new Uint8Array(x.data!) });
    return out;
  }

  // ---- commit ----

  protected async doCommit(batch: CommitBatch): Promise<void> {
    const fast = fastParams(batch);
    // commit_batch's arguments, made only when it is needed (not the common case, or its miss).
    let general: { sorted: Sorted; values: unknown[] } | null = null;
    const plan = (): { sorted: Sorted; values: unknown[] } => {
      if (general === null) {
        const sorted = lockOrder(batch.updates);
        general = { sorted, values: commitParams(batch, sorted) };
      }
      return general;
    };
    const deadline = performance.now() + this.#settleMs;
    // Once a COMMIT was sent and its answer lost, the outcome is unknown until an attempt answers.
    let unknown: unknown = null;
    for (let attempt = 0; ; attempt++) {
      const step = await this.#commitOnce(batch, fast, plan);
      if (step.kind === 'done') return;
      if (step.kind === 'refused') throw step.error;
      if (step.kind === 'commit-lost') unknown = step.cause;
      if (this.killed || this.closed) throw unknown !== null ? this.#unknown(unknown) : asUnavailable(batch, step.cause);
      if (step.kind === 'retry' && attempt < RETRIES) {
        await sleep(backoff(attempt, 5, 500));
        continue;
      }
      if (unknown === null) throw asUnavailable(batch, step.cause);
      // Settle the unknown by sending the same batch again (it acts once) until the deadline.
      if (performance.now() > deadline) throw this.#unknown(unknown);
      await sleep(backoff(attempt, 20, 500));
    }
  }

  /**
   * One attempt on one connection. The common case (`fast`) is one statement, `commit_one`, in the
   * server's implicit transaction: one round trip, and once it is sent a lost connection leaves the
   * outcome unknown. When it moved nothing, or for any other batch: BEGIN, commit_batch, COMMIT,
   * where only a COMMIT sent can make the batch land; a failure before it leaves nothing applied
   * (the server rolls back the open transaction, at the latest when it sees the connection end).
   */
  async #commitOnce(batch: CommitBatch, fast: unknown[] | null, plan: () => { sorted: Sorted; values: unknown[] }): Promise<CommitStep> {
    let client: PoolClient;
    try {
      client = await this.#connect();
    } catch (err) {
      return { kind: 'not-applied', cause: err };
    }
    let phase: 'open' | 'one' | 'apply' | 'commit' = 'open';
    try {
      if (fast !== null) {
        phase = 'one';
        const moved = await this.#query(client, this.#oneName, this.#sql.one, fast).then(
          () => true,
          (err: unknown) => {
            if (sqlState(err) === SQLSTATE.missed) return false;
            throw err;
          },
        );
        if (moved) {
          this.#release(client);
          return { kind: 'done' };
        }
        // It moved nothing and wrote nothing (its transaction rolled back): commit_batch decides what to answer.
        phase = 'open';
      }
      const { values } = plan();
      phase = 'apply';
      const applied = await this.#open(client, { name: `${this.#sql.prefix}commit`, text: this.#sql.commit, values });
      if (applied === 'lost') {
        this.#release(client, new Error('BEGIN failed'));
        return { kind: 'commit-lost', cause: new Error('BEGIN failed with the commit statement sent') };
      }
      phase = 'commit';
      await client.query('COMMIT');
      this.#release(client);
      return { kind: 'done' };
    } catch (err) {
      const state = sqlState(err);
      if (phase !== 'open' && !isConnectionLoss(err)) {
        // The statement failed; its transaction is aborted (or, after commit_one or a failed COMMIT, over).
        if (phase === 'apply') await client.query('ROLLBACK').catch(() => undefined);
        this.#release(client, err);
        if (phase !== 'one' && state !== undefined && state.startsWith('SL')) {
          const refused = refusal(err as { code: string; message: string; detail?: string }, batch, plan().sorted);
          return refused === null ? { kind: 'done' } : { kind: 'refused', error: refused };
        }
        return { kind: isRetryable(state) ? 'retry' : 'not-applied', cause: err };
      }
      this.#release(client, err);
      if (!isConnectionLoss(err)) return { kind: 'not-applied', cause: err };
      return phase === 'commit' || phase === 'one' ? { kind: 'commit-lost', cause: err } : { kind: 'not-applied', cause: err };
    }
  }

  /**
   * Opens the commit's transaction (BEGIN, the fence table's ROW EXCLUSIVE lock) and runs `statement`
   * in it. On a pipelining pool both go out in one write: one round trip to the statement's
   * answer. 'lost' when BEGIN itself failed on a pipelining pool: the statement may then have run
   * and committed on its own, so the outcome is unknown. A failure of the statement is thrown
   * (the transaction is open, and aborted).
   */
  async #open(client: PoolClient, statement: { name: string; text: string; values: unknown[] }): Promise<QueryResult | 'lost'> {
    const query = { ...statement, types: this.#types };
    if (!this.#pipelined) {
      await client.query(this.#begin);
      return client.query(query);
    }
    const [begun, applied] = await Promise.allSettled(corked(client, () => [client.query(this.#begin), client.query(query)]));
    if (begun.status === 'rejected') return 'lost';
    if (applied.status === 'rejected') throw applied.reason;
    return applied.value;
  }

  #unknown(err: unknown): HostStoreError {
    return HostStoreError.indeterminate(`the connection was lost with the commit sent, and no answer came within ${this.#settleMs} ms: ${messageOf(err)}`, err);
  }

  // ---- life ----

  protected async doClose(): Promise<void> {
    if (this.#ownsPool) await this.#pool.end();
  }

  /** A kill cuts every connection this handle holds, as a dead process's are cut; a statement in flight lands wholly or never. */
  protected override async doKill(): Promise<void> {
    for (const client of this.#inUse) {
      (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    }
    if (this.#ownsPool) await this.#pool.end().catch(() => undefined);
  }
}

/**
 * Runs `send` (queries on a pipelining connection, which go out as they are made) with the
 * connection's socket corked, so that they leave in one write: one system call for a commit.
 */
function corked<T>(client: PoolClient, send: () => T): T {
  const stream = (client as unknown as { connection?: { stream?: { cork?: () => void; uncork?: () => void } } }).connection?.stream;
  stream?.cork?.();
  try {
    return send();
  } finally {
    stream?.uncork?.();
  }
}

const guarded = new WeakSet<PoolClient>();

/**
 * A connection checked out of a pool emits 'error' when its socket fails (a server restart), besides
 * failing the statement in flight; without a listener that event would end the process. The
 * statement's own failure is what the store answers from.
 */
function guardClient(client: PoolClient): void {
  if (guarded.has(client)) return;
  guarded.add(client);
  client.on('error', () => undefined);
}

function decodeName(bytes: Buffer): string {
  try {
    return decoder.decode(bytes);
  } catch (err) {
    throw HostStoreError.damaged(new SeglogError('CORRUPT', `a scope name in the database is not UTF-8 (${bytes.toString('hex')})`, { cause: err, details: { table: 'scopes', column: 'name', value: bytes.toString('hex') } }));
  }
}

/** The statements of one realm. */
function statements(schema: string) {
  const s = quoteIdent(schema);
  const params = Array.from({ length: 17 }, (_, i) => `$${i + 1}`).join(', ');
  return {
    prefix: `seglog:${schema}:`,
    // A commit's transaction and its fence lock; a client that stops inside it is cut off by the server.
    begin: (idleMs: number | null) =>
      `BEGIN; ${idleMs === null ? '' : `SET LOCAL idle_in_transaction_session_timeout = ${Math.ceil(idleMs)}; `}LOCK TABLE ${s}.fence IN ROW EXCLUSIVE MODE`,
    // The common commit in one statement (see fastParams and schema.ts's commit_one).
    one: `CALL ${s}.commit_one($1, $2, $3, $4, $5, $6, $7, $8)`,
    commit: `SELECT ${s}.commit_batch(${params})`,
    acquire: `SELECT * FROM ${s}.acquire_fence($1, $2, $3)`,
    renew: `SELECT ${s}.renew_fence($1, $2) AS answer`,
    head: `SELECT * FROM ${s}.load_head($1, $2)`,
    list: `SELECT * FROM ${s}.list_heads($1, $2, $3)`,
    rows: `SELECT * FROM ${s}.read_rows($1, $2, $3, $4)`,
  };
}

/** A schema name: 1..63 bytes (PostgreSQL's identifier limit), no NUL. */
function checkSchemaName(schema: unknown): string {
  const name = schema ?? 'seglog';
  if (typeof name !== 'string' || name.length === 0 || Buffer.byteLength(name) > 63 || name.includes('\u0000')) {
    throw HostStoreError.invalid('schema must be a name of 1..63 bytes without NUL');
  }
  return name;
}

/** The tables of a realm (schema.ts creates them in one transaction). */
const REALM_TABLES = ['seglog_meta', 'fence', 'lease', 'scopes', 'rows'];

/**
 * Creates the realm's tables on first use; brings a version-1 realm to this version (it adds
 * `commit_one`, the tables stay as they are); refuses a realm whose schema version is newer.
 */
async function ensureSchema(pool: Pool, schema: string): Promise<void> {
  const s = quoteIdent(schema);
  const client = await pool.connect().catch((err: unknown) => {
    throw HostStoreError.unavailable(`cannot reach the PostgreSQL server: ${messageOf(err)}`, err);
  });
  guardClient(client);
  let failed: unknown;
  try {
    const read = async (): Promise<number | null> => {
      // The catalog read through a snapshot (not the cache), so a schema just made by another open shows.
      const found = await client.query(
        "SELECT c.relname AS name FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r' AND c.relname = ANY($2::text[])",
        [schema, REALM_TABLES],
      );
      const tables = new Set((found.rows as { name: string }[]).map((r) => r.name));
      if (!tables.has('seglog_meta')) {
        // The realm's tables are made in one transaction, seglog_meta among them: one without it lost it.
        if (tables.size > 0) throw HostStoreError.damaged(corrupt(`schema ${schema} holds realm tables (${[...tables].sort().join(', ')}) but no seglog_meta`, { schema, table: 'seglog_meta' }));
        return null;
      }
      const r = await client.query(`SELECT value::text AS v FROM ${s}.seglog_meta WHERE key = 'schema_version'`);
      const row = r.rows[0] as { v: string } | undefined;
      if (row === undefined) throw HostStoreError.damaged(corrupt(`schema ${schema} has no seglog_meta version row`, { schema, table: 'seglog_meta' }));
      return Number(row.v);
    };
    let version = await read();
    if (version === null || version === 1) {
      // Two first opens (or upgrades) at once: the transaction-scoped advisory lock lets one
      // create the realm or bring a version-1 realm to this version, the other then reads.
      await client.query('BEGIN');
      try {
        await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`seglog schema ${schema}`]);
        version = await read();
        if (version === null) await client.query(createSchemaSql(schema));
        else if (version === 1) await client.query(upgradeSql(schema, version));
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
      version = await read();
    }
    if (version === null) throw HostStoreError.unavailable(`schema ${schema} has no realm after its creation`);
    // Version 1 was brought to this version above: a lower one is no version any seglog wrote.
    if (!Number.isSafeInteger(version) || version < SCHEMA_VERSION) {
      throw HostStoreError.damaged(corrupt(`schema ${schema} records schema version ${version}, which no seglog wrote`, { schema, table: 'seglog_meta', version }));
    }
    if (version > SCHEMA_VERSION) {
      throw new SeglogError('VERSION_TOO_NEW', `the realm in schema ${schema} has schema version ${version}; this seglog reads up to ${SCHEMA_VERSION}`, {
        details: { schema, version, supported: SCHEMA_VERSION },
      });
    }
  } catch (err) {
    failed = err;
    if (err instanceof SeglogError) throw err;
    throw HostStoreError.unavailable(`create or check the realm in schema ${schema}: ${messageOf(err)}`, err);
  } finally {
    client.release(failed !== undefined && isConnectionLoss(failed) ? true : undefined);
  }
}

function looksLikePool(pool: unknown): pool is Pool {
  return typeof pool === 'object' && pool !== null && typeof (pool as Pool).connect === 'function' && typeof (pool as Pool).query === 'function';
}

/**
 * Opens the realm held in `options.schema` (default 'seglog') of a PostgreSQL database, creating
 * its tables on first use. Throws INVALID for bad options, UNAVAILABLE when the server cannot be
 * reached, VERSION_TOO_NEW when the realm was made by a newer seglog.
 */
export async function openPgHostStore(options: PgHostStoreOptions): Promise<PgHostStore> {
  if (typeof options !== 'object' || options === null) throw HostStoreError.invalid('openPgHostStore needs options with a connectionString or a pool');
  const { connectionString, pool: given } = options;
  if ((connectionString === undefined) === (given === undefined)) throw HostStoreError.invalid('give exactly one of connectionString and pool');
  if (connectionString !== undefined && (typeof connectionString !== 'string' || connectionString.length === 0)) throw HostStoreError.invalid('connectionString must be a non-empty string');
  if (given !== undefined && !looksLikePool(given)) throw HostStoreError.invalid('pool must be a pg.Pool (node-postgres 8)');
  const schema = checkSchemaName(options.schema);
  const timing = checkTiming(options.timing);
  const holderId = checkHolderId(options.holderId, MAX_HOLDER_ID_BYTES);
  const max = options.maxConnections ?? 10;
  if (!Number.isSafeInteger(max) || max < 1) throw HostStoreError.invalid('maxConnections must be an integer of at least 1');
  const pg = await loadPg();
  // The holder id names the connections in pg_stat_activity (PostgreSQL keeps 63 bytes of it).
  const pool =
    given !== undefined
      ? (given as Pool)
      : new pg.Pool({
          connectionString,
          max,
          application_name: `seglog ${holderId}`.slice(0, 63),
          // Queries go out without waiting for the one before (see #commitOnce).
          pipeline: true,
          // A client that stops inside a commit's transaction is cut off by the server (see the commit).
          options: `-c idle_in_transaction_session_timeout=${Math.ceil(timing.lease)}`,
        } as ConstructorParameters<typeof pg.Pool>[0]);
  // An idle connection the server dropped (a restart) is taken out of the pool; without a
  // listener the pool's 'error' event would end the process.
  if (given === undefined) pool.on('error', () => undefined);
  try {
    await ensureSchema(pool, schema);
  } catch (err) {
    if (given === undefined) await pool.end().catch(() => undefined);
    throw err;
  }
  const parts: OpenParts = { pg, pool, ownsPool: given === undefined };
  return new PgHostStore(parts, schema, holderId, timing, openKey);
}
