// The PostgreSQL server of a test file: a scratch server this file starts (and stops), or the
// user's own when SEGLOG_PG_URL is set.
//
// Owns: `postgresForTests()` and `pgRealm()`. Guarantees: the PostgreSQL tests never skip for
// want of a server: when none can be started, `postgresForTests` answers why, and the caller
// registers a failing test that says so. Each realm is a schema of its own with a unique name,
// dropped by `drop()`, so tests never see each other's data, on a scratch server or a user's.

import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { startScratchPostgres, type ScratchPostgres } from '../../lib/host/pg/scratch-server.js';
import { quoteIdent } from '../../lib/host/pg/schema.js';

export interface TestPostgres {
  /** The connection string for the store and for direct SQL. */
  url: string;
  /** The scratch server, or null on a user's server (SEGLOG_PG_URL). */
  server: ScratchPostgres | null;
  /** A pool for direct SQL of the tests (lapsing leases, dropping schemas). */
  admin: pg.Pool;
  stop(): Promise<void>;
}

/** The server of this test file, or why there is none. */
export async function postgresForTests(): Promise<{ ok: true; pg: TestPostgres } | { ok: false; why: string }> {
  const userUrl = process.env['SEGLOG_PG_URL'];
  let server: ScratchPostgres | null = null;
  try {
    if (userUrl === undefined || userUrl === '') server = await startScratchPostgres();
    const url = server?.url ?? (userUrl as string);
    const admin = new pg.Pool({ connectionString: url, max: 4 });
    admin.on('error', () => undefined);
    await admin.query('SELECT 1');
    return {
      ok: true,
      pg: {
        url,
        server,
        admin,
        stop: async () => {
          await admin.end().catch(() => undefined);
          await server?.stop();
        },
      },
    };
  } catch (err) {
    await server?.stop().catch(() => undefined);
    const where = userUrl ? `the server SEGLOG_PG_URL names (${userUrl})` : 'a scratch server (initdb in a temporary directory)';
    return { ok: false, why: `no PostgreSQL server for the PostgreSQL host store tests: ${where}: ${err instanceof Error ? err.message : String(err)}` };
  }
}

/** A fresh, unique schema name (a realm of its own). */
export function freshSchema(prefix: string): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

/** Ends every lease recorded in `schema`'s realm now (the server's clock is the lease's clock). */
export async function lapseLeases(admin: pg.Pool, schema: string): Promise<void> {
  await admin.query(`UPDATE ${quoteIdent(schema)}.lease SET until = LEAST(until, clock_timestamp())`);
}

/** Drops a realm's schema. */
export async function dropSchema(admin: pg.Pool, schema: string): Promise<void> {
  await admin.query(`DROP SCHEMA IF EXISTS ${quoteIdent(schema)} CASCADE`);
}
