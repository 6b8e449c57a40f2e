// The measurement behind the PostgreSQL host store's choice of client library: node-postgres
// (`pg`, a dependency of the store) against porsager's `postgres` (installed in bench/peers by
// `npm run bench:peers`), on a scratch server, interleaved round by round.
//
// Owns: `node dist/bench/pg-clients.js [--rounds N]`, which prints one Markdown table. What it
// measures, each client doing the same statements on the same server in the same rounds:
// - `commit x1` / `commit x200`: the store's commit shape — one call of a server-side function
//   with a dozen int arrays and one bytea (a 300 B commit), in its own transaction, synchronous
//   commit on — by one caller, and by 200 callers at once (a pool of 200 connections);
// - `8 MiB in` / `8 MiB out`: an 8 MiB bytea sent as a parameter (and its length read back), and
//   an 8 MiB bytea read back as a column (the batch and row limits of the store).
// Figures are medians over the rounds, with the per-round ratio of `postgres` to `pg`.

import { createRequire } from 'node:module';
import pg from 'pg';
import { startScratchPostgres } from '../lib/host/pg/scratch-server.js';
import { peersDir } from './stores/peers.js';

interface Client {
  name: string;
  /** Runs one commit-shaped call in a transaction. */
  commit(i: number): Promise<void>;
  sendBig(buf: Buffer): Promise<number>;
  readBig(): Promise<number>;
  end(): Promise<void>;
}

type PostgresSql = {
  (strings: TemplateStringsArray, ...values: unknown[]): Promise<Record<string, unknown>[]>;
  unsafe(query: string, params?: unknown[], options?: { prepare?: boolean }): Promise<Record<string, unknown>[]>;
  begin<T>(fn: (sql: PostgresSql) => Promise<T>): Promise<T>;
  end(): Promise<void>;
};

const FN = `CREATE FUNCTION bench_commit(p_id text, p_token bigint, p_a smallint[], p_b bigint[], p_c int[], p_d int[], p_blob bytea) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO bench_rows (id, a, b, c, d, blob) VALUES (p_id, p_a, p_b, p_c, p_d, p_blob);
  RETURN 0;
END $$`;

function args(i: number): unknown[] {
  return [`c-${i}-${Math.random()}`, 7, [1], [i], [1, 2, 3], [100, 200], Buffer.alloc(300, i & 255)];
}

async function pgClient(url: string, max: number): Promise<Client> {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => undefined);
  return {
    name: 'pg',
    async commit(i) {
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        await c.query({ name: 'commit', text: 'SELECT bench_commit($1, $2, $3, $4, $5, $6, $7)', values: args(i) });
        await c.query('COMMIT');
      } finally {
        c.release();
      }
    },
    async sendBig(buf) {
      const r = await pool.query({ name: 'send', text: 'SELECT length($1::bytea) AS n', values: [buf] });
      return Number((r.rows[0] as { n: number }).n);
    },
    async readBig() {
      const r = await pool.query({ name: 'read', text: 'SELECT blob FROM bench_big' });
      return (r.rows[0] as { blob: Buffer }).blob.length;
    },
    end: () => pool.end(),
  };
}

async function postgresClient(server: { socketDir: string; port: number; user: string }, max: number): Promise<Client | null> {
  let postgres: (url: string, options: Record<string, unknown>) => PostgresSql;
  try {
    postgres = createRequire(`${peersDir()}/package.json`)('postgres') as typeof postgres;
  } catch {
    return null;
  }
  const sql = postgres('', {
    host: server.socketDir,
    port: server.port,
    username: server.user,
    database: 'postgres',
    max,
    onnotice: () => undefined,
  });
  return {
    name: 'postgres',
    async commit(i) {
      await sql.begin((tx) => tx.unsafe('SELECT bench_commit($1, $2, $3, $4, $5, $6, $7)', args(i), { prepare: true }));
    },
    async sendBig(buf) {
      const r = await sql.unsafe('SELECT length($1::bytea) AS n', [buf], { prepare: true });
      return Number(r[0]!['n']);
    },
    async readBig() {
      const r = await sql.unsafe('SELECT blob FROM bench_big', [], { prepare: true });
      return (r[0]!['blob'] as Buffer).length;
    },
    end: () => sql.end(),
  };
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** Calls per second: `workers` callers, each calling in a loop, for `ms`. */
async function rate(client: Client, workers: number, ms: number): Promise<number> {
  let n = 0;
  const end = performance.now() + ms;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (performance.now() < end) await client.commit(n++);
    }),
  );
  return n / ((performance.now() - t0) / 1000);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  const roundsArg = process.argv.indexOf('--rounds');
  const rounds = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : 5;
  const server = await startScratchPostgres({ maxConnections: 450 });
  try {
    const admin = new pg.Pool({ connectionString: server.url, max: 1 });
    await admin.query('CREATE TABLE bench_rows (id text PRIMARY KEY, a smallint[], b bigint[], c int[], d int[], blob bytea)');
    await admin.query(FN);
    await admin.query('CREATE TABLE bench_big (blob bytea)');
    await admin.query('INSERT INTO bench_big VALUES ($1)', [Buffer.alloc(8 * 1024 * 1024, 7)]);
    await admin.end();
    const big = Buffer.alloc(8 * 1024 * 1024, 9);
    const make = [(max: number) => pgClient(server.url, max), (max: number) => postgresClient(server, max)];
    const figures = new Map<string, Map<string, number[]>>();
    const put = (client: string, what: string, v: number): void => {
      if (!figures.has(what)) figures.set(what, new Map());
      const m = figures.get(what)!;
      m.set(client, [...(m.get(client) ?? []), v]);
    };
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? make : [...make].reverse();
      for (const mk of order) {
        const c = await mk(200);
        if (c === null) continue;
        await rate(c, 200, 300); // connect the pool and warm up
        put(c.name, 'commit x1 (calls/s)', await rate(c, 1, 2000));
        put(c.name, 'commit x200 (calls/s)', await rate(c, 200, 2000));
        await c.sendBig(big);
        put(c.name, '8 MiB in (ms)', await timed(() => c.sendBig(big)));
        await c.readBig();
        put(c.name, '8 MiB out (ms)', await timed(() => c.readBig()));
        await c.end();
      }
    }
    const clients = ['pg', 'postgres'];
    console.log(`PostgreSQL client libraries on ${server.version}, ${rounds} rounds (median; per-round ratio postgres / pg)\n`);
    console.log(`| measurement | ${clients.join(' | ')} | postgres / pg |`);
    console.log(`|---|${clients.map(() => '---').join('|')}|---|`);
    for (const [what, byClient] of figures) {
      const a = byClient.get('pg') ?? [];
      const b = byClient.get('postgres') ?? [];
      const ratios = b.map((x, i) => x / a[i]!);
      const fmt = (xs: number[]): string => (xs.length === 0 ? 'not installed' : median(xs).toFixed(what.includes('ms') ? 1 : 0));
      console.log(`| ${what} | ${fmt(a)} | ${fmt(b)} | ${ratios.length === 0 ? '—' : `${median(ratios).toFixed(2)} (${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})`} |`);
    }
  } finally {
    await server.stop();
  }
}

await main();
