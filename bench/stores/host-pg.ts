// `seglog bench stores` and PostgreSQL: the server the run measures against, seglog's PostgreSQL
// host store as an implementation beside the others, and pgbench running the same writes.
//
// Owns: `startBenchPostgres` (a scratch server started as the tests start one, or the user's with
// SEGLOG_PG_URL), `pgImplementation`, `pgbenchVariant` and `pgHostSection`. Guarantees:
// - the server runs with fsync and synchronous_commit on, and so does every pgbench session, so
//   the store and pgbench pay for the same durability on the same server in the same run;
// - pgbench's script does the writes of the store's 300 B commit — the head upsert (a 100 B head)
//   and the row insert (a 200 B row), one transaction each, prepared statements — against tables
//   made by the store's own schema (same columns, keys, indexes), each client on a scope of its own;
// - its figures come from its per-transaction log (every latency, the first start to the last end),
//   never from a constant; when no server can be had, the section and its targets say why.

import { chown, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createHash } from 'node:crypto';
import type { HostStore } from '../../lib/host/types.js';
import type { Variant } from '../harness/runner.js';
import type { StoreImplementation, StoreWorkload } from '../harness/store-workload.js';
import type { Budget, RunSample } from '../harness/timing.js';
import type { SectionPlan } from '../harness/runner.js';
import { payload } from '../rawfs.js';
import { hostCommitWorkload } from './workloads.js';
import { sideBySide } from '../harness/store-workload.js';

/** The environment variable that carries the run's server to the benchmark's child processes. */
export const BENCH_PG_ENV = 'SEGLOG_BENCH_PG_URL';

export interface BenchPostgres {
  url: string;
  /** e.g. "PostgreSQL 15.18 (scratch server: initdb in a temporary directory, Unix socket only)". */
  describe: string;
  /** Runs pgbench against the server; null on a user's server without local binaries. */
  pgbench: ((args: readonly string[], env: Readonly<Record<string, string>>) => Promise<string>) | null;
  /** A directory the pgbench user can read (for its script) and write (for its log). */
  scratchDir: string | null;
  /** uid/gid pgbench runs as (files it reads are handed to it). */
  owner: { uid: number; gid: number } | null;
  stop(): Promise<void>;
}

type Closable = HostStore & { close(): Promise<void> };

/** The schemas this process made on the run's server (dropped at the end on a user's server). */
const madeSchemas = new Set<string>();

/** The server for this run: SEGLOG_PG_URL, else a scratch server; or why there is none. */
export async function startBenchPostgres(): Promise<{ ok: true; pg: BenchPostgres } | { ok: false; missing: string }> {
  const user = process.env['SEGLOG_PG_URL'];
  if (user !== undefined && user !== '') {
    process.env[BENCH_PG_ENV] = user;
    const stop = async (): Promise<void> => {
      const { default: pg } = await import('pg');
      const pool = new pg.Pool({ connectionString: user, max: 1 });
      try {
        for (const schema of madeSchemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      } finally {
        await pool.end();
      }
    };
    return { ok: true, pg: { url: user, describe: 'the server SEGLOG_PG_URL names (pgbench is not run against it)', pgbench: null, scratchDir: null, owner: null, stop } };
  }
  try {
    const { startScratchPostgres } = await import('../../lib/host/pg/scratch-server.js');
    // 200 store connections, pgbench's 200 clients and the realm builders at once.
    const server = await startScratchPostgres({ maxConnections: 450 });
    process.env[BENCH_PG_ENV] = server.url;
    const ids = await readFile('/etc/passwd', 'utf8').then((t) => {
      const f = t.split('\n').map((l) => l.split(':')).find((x) => x[0] === server.user);
      return f === undefined ? null : { uid: Number(f[2]), gid: Number(f[3]) };
    });
    return {
      ok: true,
      pg: {
        url: server.url,
        describe: `${server.version.replace(/^postgres \(PostgreSQL\) /, 'PostgreSQL ')} (a scratch server: initdb in a temporary directory, Unix socket only, fsync and synchronous_commit on)`,
        pgbench: (args, env) => server.run('pgbench', ['-h', server.socketDir, '-p', String(server.port), '-U', server.user, ...args, 'postgres'], { env }),
        scratchDir: server.dir,
        owner: (process.getuid?.() ?? 0) === 0 ? ids : null,
        stop: () => server.stop(),
      },
    };
  } catch (err) {
    return { ok: false, missing: `NOT MEASURED (no PostgreSQL server): ${err instanceof Error ? err.message.split('\n')[0] : String(err)}` };
  }
}

/** A schema name for a realm directory: one realm per directory, as for the file stores. */
export function schemaFor(dir: string): string {
  return `bench_${createHash('sha256').update(path.resolve(dir)).digest('hex').slice(0, 16)}`;
}

/** seglog's PostgreSQL store as a benchmark implementation over the run's server. */
export function pgImplementation(url: string): StoreImplementation<Closable> {
  return {
    name: 'pg',
    label: 'seglog PostgreSQL store (synchronous_commit=on)',
    open: async (dir) => {
      const { openPgHostStore } = await import('../../lib/host/pg/store.js');
      madeSchemas.add(schemaFor(dir));
      return openPgHostStore({ connectionString: url, schema: schemaFor(dir), maxConnections: 210 });
    },
    close: (h) => h.close(),
  };
}

/** The pgbench script of one 300 B commit: the head upsert and the row insert, one transaction. */
function pgbenchScript(schema: string, headBytes: number, rowBytes: number): string {
  const s = `"${schema}"`;
  const head = Buffer.from(payload(headBytes, 11)).toString('hex');
  const row = Buffer.from(payload(rowBytes, 12)).toString('hex');
  const name = `convert_to('pgbench-' || :client_id, 'UTF8')`;
  return [
    'BEGIN;',
    `INSERT INTO ${s}.scopes (kind, name, version, commit_id, head, first, "end", deleted) VALUES (1, ${name}, 1, 'pgbench-' || :client_id, '\\x${head}'::bytea, 0, 1, false) ` +
      `ON CONFLICT (kind, name) DO UPDATE SET version = ${s}.scopes.version + 1, commit_id = excluded.commit_id, head = excluded.head, "end" = ${s}.scopes."end" + 1 RETURNING "end" AS e \\gset`,
    `INSERT INTO ${s}.rows (kind, name, idx, data) VALUES (1, ${name}, :e - 1, '\\x${row}'::bytea);`,
    'END;',
    '',
  ].join('\n');
}

/**
 * Reads pgbench's per-transaction logs and keeps the steady part of the run: the transactions that
 * began after every client had finished its first one (all connected and running) and ended before
 * the first client stopped; the time is that window's. Connection set-up and the ramp are left out.
 */
async function readPgbenchLogs(dir: string, prefix: string): Promise<RunSample> {
  const txns: { client: number; start: number; end: number; latencyUs: number }[] = [];
  for (const file of (await readdir(dir)).filter((f) => f.startsWith(prefix))) {
    for (const line of (await readFile(path.join(dir, file), 'utf8')).split('\n')) {
      // client_id transaction_no time_us script_no time_epoch time_us_part
      const f = line.trim().split(/\s+/);
      if (f.length < 6) continue;
      const latencyUs = Number(f[2]);
      const end = Number(f[4]) * 1e6 + Number(f[5]);
      txns.push({ client: Number(f[0]), start: end - latencyUs, end, latencyUs });
    }
    await rm(path.join(dir, file), { force: true });
  }
  const firstEnd = new Map<number, number>();
  const lastEnd = new Map<number, number>();
  for (const t of txns) {
    firstEnd.set(t.client, Math.min(firstEnd.get(t.client) ?? Infinity, t.end));
    lastEnd.set(t.client, Math.max(lastEnd.get(t.client) ?? -Infinity, t.end));
  }
  const from = Math.max(...firstEnd.values());
  const to = Math.min(...lastEnd.values());
  const steady = txns.filter((t) => t.start >= from && t.end <= to);
  if (steady.length === 0) throw new Error(`pgbench ran no transaction while all its clients were running (${prefix} in ${dir}: ${txns.length} in all)`);
  return { ops: steady.length, records: steady.length, bytes: 0, elapsedNs: (to - from) * 1000, latenciesNs: Float64Array.from(steady, (t) => t.latencyUs * 1000) };
}

/** pgbench at `clients` clients, running the script of one 300 B commit for each run's duration (whole seconds, at least 1). */
export function pgbenchVariant(o: { id: string; label: string; clients: number; pg: BenchPostgres; schema: string; headBytes: number; rowBytes: number; durationMs: number }): Variant {
  const dir = o.pg.scratchDir;
  let script = '';
  let run = 0;
  // pgbench's duration also covers its clients' connections and ramp (a second or two for 200 on
  // a busy 2-core machine), which the steady window leaves out: it gets that much more.
  const connectMs = o.clients > 1 ? 2000 : 0;
  return {
    id: o.id,
    budget: { durationMs: o.durationMs + connectMs },
    label: o.label,
    group: 'pgbench',
    params: { clients: o.clients, implementation: 'pgbench', headBytes: o.headBytes, rowBytes: o.rowBytes },
    async setup() {
      if (o.pg.pgbench === null || dir === null) throw new Error('pgbench needs a scratch server of the run');
      // The store's own tables: open the realm once (its schema is created on first use).
      const { openPgHostStore } = await import('../../lib/host/pg/store.js');
      madeSchemas.add(o.schema);
      await (await openPgHostStore({ connectionString: o.pg.url, schema: o.schema })).close();
      script = path.join(dir, `${o.id.replace(/[^a-z0-9]+/gi, '-')}.sql`);
      await writeFile(script, pgbenchScript(o.schema, o.headBytes, o.rowBytes));
      if (o.pg.owner !== null) await chown(script, o.pg.owner.uid, o.pg.owner.gid);
    },
    async run(budget: Budget): Promise<RunSample> {
      const prefix = `pgbench-${o.id.replace(/[^a-z0-9]+/gi, '-')}-${++run}`;
      const seconds = Math.max(1 + connectMs / 1000, Math.round(budget.durationMs / 1000));
      const out = await o.pg.pgbench!(
        ['-n', '-M', 'prepared', '-c', String(o.clients), '-j', String(Math.min(2, o.clients)), '-T', String(seconds), '-f', script, '-l', `--log-prefix=${path.join(dir!, prefix)}`],
        { PGOPTIONS: '-c synchronous_commit=on' },
      );
      const sample = await readPgbenchLogs(dir!, prefix).catch((err: unknown) => {
        throw new Error(`${(err as Error).message}; pgbench said:\n${out}`);
      });
      return { ...sample, bytes: sample.ops * (o.headBytes + o.rowBytes) };
    },
  };
}

/**
 * `workload` with one untimed commit per writer before every measured run, all at once: the pool
 * then holds a connection per writer when the clock starts (its idle ones close after 10 s, and
 * the other variants of a round can take that long), as pgbench's steady window starts with every
 * client connected. Without it a run could pay for connecting 200 server processes in its time.
 */
function connectedFirst<H>(workload: StoreWorkload<H>): StoreWorkload<H> {
  return {
    ...workload,
    async beforeRun(handle) {
      await workload.beforeRun?.(handle);
      await Promise.all(Array.from({ length: workload.concurrency }, (_, w) => workload.op(handle, w, 0)));
    },
  };
}

/**
 * The store beside pgbench on the same server, 1 and 200 at once, interleaved by round: the
 * store's 300 B commit (host-commits' workload) against pgbench's script of the same writes.
 */
export function pgHostSection(cfg: { root: string; rounds: number; warmupRounds: number; quick: boolean }, pg: BenchPostgres): SectionPlan {
  // The store's realms are schemas; the directories sideBySide makes under the run's root only name them.
  const dir = cfg.root;
  const impl = pgImplementation(pg.url);
  // Whole seconds (pgbench's unit); more rounds than the other sections, since a round's four runs
  // take seconds each and the disk drifts within that.
  const durationMs = 1000;
  const rounds = cfg.quick ? cfg.rounds : Math.max(cfg.rounds, 15);
  const one = connectedFirst(hostCommitWorkload({ id: 'pg-1', label: 'one writer, one scope', scopes: 1 }));
  const many = connectedFirst(hostCommitWorkload({ id: 'pg-200', label: '200 scopes at once', scopes: 200 }));
  const schema = 'bench_pgbench';
  const common = { pg, schema, headBytes: 100, rowBytes: 200, durationMs };
  const withPgbench = pg.pgbench !== null;
  const variants = withPgbench
    ? [
        pgbenchVariant({ id: 'pgbench-1', label: 'pgbench, 1 client, the same writes', clients: 1, ...common }),
        ...sideBySide(one, [impl], dir),
        pgbenchVariant({ id: 'pgbench-200', label: 'pgbench, 200 clients, the same writes', clients: 200, ...common }),
        ...sideBySide(many, [impl], dir),
      ]
    : [...sideBySide(one, [impl], dir), ...sideBySide(many, [impl], dir)];
  return {
    id: 'host-pg',
    title: 'The PostgreSQL host store beside pgbench, 300 B commits',
    description:
      'The store\'s commit of host-commits (a CommitBatch moving one scope to its next version with a 100 B head and ' +
      'one 200 B row, resolved when durable) beside pgbench running a script of the same writes — the head upsert and ' +
      'the row insert, one transaction each, prepared statements, on tables made by the store\'s own schema — on the same ' +
      'server in the same rounds, with synchronous_commit on for both. "1": one writer (one pgbench client); "200": 200 ' +
      'writers on scopes of their own (200 pgbench clients, 2 threads). The store also checks the fence token and the ' +
      'scope\'s version in the transaction. Ratios are to pgbench with one client.',
    variants,
    baseline: withPgbench ? 'pgbench-1' : 'pg-1/pg',
    rounds,
    warmupRounds: cfg.warmupRounds,
    slices: 1,
    budget: { durationMs, maxOps: 10_000_000, minOps: 5 },
    notes: [`Server: ${pg.describe}.`, ...(withPgbench ? [] : ['pgbench NOT MEASURED: it runs only against a scratch server of the run.'])],
  };
}
