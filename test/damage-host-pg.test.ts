// The PostgreSQL host store's answer to damage in the database (a server this file starts, or the
// user's with SEGLOG_PG_URL): a HostStoreError whose code is one of the six of the contract —
// UNAVAILABLE, nothing applied — whose `cause` is the CORRUPT SeglogError naming what failed (the
// schema, the table, the value). Never a bare SeglogError, never a realm made again over a schema
// that lost its seglog_meta table or its version row.

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { isSeglogError } from '../lib/errors.js';
import { CommitBatch, HostStoreError, openPgHostStore } from '../lib/host/index.js';
import { quoteIdent } from '../lib/host/pg/schema.js';
import { dropSchema, freshSchema, postgresForTests, type TestPostgres } from './support/pg.js';

const found = await postgresForTests();
if (!found.ok) {
  test('PostgreSQL damage: a server to test against', () => assert.fail(found.why));
} else {
  const server = found.pg;
  after(() => server.stop());
  register(server);
}

function damaged(details: Record<string, unknown>): (err: unknown) => boolean {
  return (err) => {
    assert.ok(err instanceof HostStoreError, `a HostStoreError, got ${String(err)}`);
    assert.equal(err.code, 'UNAVAILABLE');
    assert.ok(isSeglogError(err.cause, 'CORRUPT'), `the cause is CORRUPT: ${String(err.cause)}`);
    for (const [k, v] of Object.entries(details)) assert.equal(err.cause.details[k], v, `cause.details.${k}`);
    return true;
  };
}

function register(server: TestPostgres): void {
  async function realmWithScope(schema: string): Promise<void> {
    const store = await openPgHostStore({ connectionString: server.url, schema });
    try {
      const { token } = await store.acquireFence('exclusive');
      await store.commit(CommitBatch.tryNew('c1', token, [{ scope: { kind: 'record', name: 'a' }, previous: null, next: 1, head: new Uint8Array([1]) }]));
    } finally {
      await store.close();
    }
  }

  test('pg: a scope name that is not UTF-8 is UNAVAILABLE with a CORRUPT cause naming the table', async () => {
    const schema = freshSchema('dmg_name');
    try {
      await realmWithScope(schema);
      await server.admin.query(`UPDATE ${quoteIdent(schema)}.scopes SET name = '\\xff61'::bytea`);
      const store = await openPgHostStore({ connectionString: server.url, schema });
      try {
        await assert.rejects(store.listHeads('record', null, 10), damaged({ table: 'scopes', column: 'name' }));
      } finally {
        await store.close();
      }
    } finally {
      await dropSchema(server.admin, schema);
    }
  });

  test('pg: an int8 beyond the safe integers is UNAVAILABLE with a CORRUPT cause', async () => {
    const schema = freshSchema('dmg_int');
    try {
      await realmWithScope(schema);
      await server.admin.query(`UPDATE ${quoteIdent(schema)}.scopes SET version = 9007199254740993`);
      const store = await openPgHostStore({ connectionString: server.url, schema });
      try {
        await assert.rejects(store.loadHead({ kind: 'record', name: 'a' }), damaged({ value: '9007199254740993' }));
      } finally {
        await store.close();
      }
    } finally {
      await dropSchema(server.admin, schema);
    }
  });

  test('pg: a realm whose version row or seglog_meta table was deleted is damage, not a new realm', async () => {
    const schema = freshSchema('dmg_meta');
    try {
      await realmWithScope(schema);
      await server.admin.query(`DELETE FROM ${quoteIdent(schema)}.seglog_meta`);
      await assert.rejects(openPgHostStore({ connectionString: server.url, schema }), damaged({ schema, table: 'seglog_meta' }));
      await server.admin.query(`DROP TABLE ${quoteIdent(schema)}.seglog_meta`);
      await assert.rejects(openPgHostStore({ connectionString: server.url, schema }), damaged({ schema, table: 'seglog_meta' }));
      const left = await server.admin.query(`SELECT count(*)::int AS n FROM ${quoteIdent(schema)}.scopes`);
      assert.equal((left.rows[0] as { n: number }).n, 1, 'the scope is still there');
    } finally {
      await dropSchema(server.admin, schema);
    }
  });
}
