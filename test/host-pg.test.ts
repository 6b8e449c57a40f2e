// The PostgreSQL host store against a real server this file starts (test/support/pg.ts; or the
// user's, with SEGLOG_PG_URL): the conformance suite, the same answers as the memory reference
// store for random batches (and after a reopen), listings in UTF-8 byte order whatever the
// database's collation, the options and the schema version, UNAVAILABLE when the server cannot be
// reached, and many multi-scope batches over shared scopes at once without a deadlock.

import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import fc from 'fast-check';
import pg from 'pg';
import { hostStoreConformance, type HostStoreFactory } from '../lib/conformance/host-store.js';
import { SeglogError } from '../lib/errors.js';
import { CommitBatch, FenceTiming, HostStoreError, isDamagedAnswer, MemoryHostRealm, openPgHostStore, SCOPE_KINDS, type HostStore, type PgHostStore, type ScopeRef, type ScopeUpdate } from '../lib/host/index.js';
import { quoteIdent, SCHEMA_VERSION } from '../lib/host/pg/schema.js';
import { dropSchema, freshSchema, lapseLeases, postgresForTests, type TestPostgres } from './support/pg.js';

const found = await postgresForTests();

if (!found.ok) {
  test('PostgreSQL host store: a server to test against', () => assert.fail(found.why));
} else {
  const server = found.pg;
  after(() => server.stop());
  register(server);
}

async function outcome(f: () => Promise<unknown>): Promise<string> {
  try {
    await f();
    return 'ok';
  } catch (err) {
    if (err instanceof SeglogError) return err.code;
    throw err;
  }
}

function register(server: TestPostgres): void {
  const timing = FenceTiming.tryNew(1000, 3000);
  hostStoreConformance(
    (): HostStoreFactory<PgHostStore> => {
      const schema = freshSchema('conf');
      let n = 0;
      return {
        open: () => openPgHostStore({ connectionString: server.url, schema, timing, holderId: `process-${++n}` }),
        lapseFenceLeases: () => lapseLeases(server.admin, schema),
        kill: (h) => h.kill(),
        stallCommits: (h) => h.stallCommits('before-commit-point'),
        close: (h) => h.close(),
        cleanup: () => dropSchema(server.admin, schema),
      };
    },
    { name: 'PgHostStore conformance' },
  );

  hostStoreConformance(
    (): HostStoreFactory<PgHostStore> => {
      const schema = freshSchema('conf_after');
      return {
        open: () => openPgHostStore({ connectionString: server.url, schema, timing }),
        lapseFenceLeases: () => lapseLeases(server.admin, schema),
        kill: (h) => h.kill(),
        stallCommits: (h) => h.stallCommits('after-commit-point'),
        close: (h) => h.close(),
        cleanup: () => dropSchema(server.admin, schema),
      };
    },
    { name: 'PgHostStore conformance (stall after the commit point)', concurrentScopes: 256 },
  );

  describe('PgHostStore', () => {
    test('the package entry point exports openPgHostStore and PgHostStore', async () => {
      const main = (await import('../lib/index.js')) as Record<string, unknown>;
      assert.equal(main['openPgHostStore'], openPgHostStore);
      assert.equal(typeof main['PgHostStore'], 'function');
    });

    test('answers as the memory reference store does, for random batches, and again after a reopen', async () => {
      await fc.assert(fc.asyncProperty(fc.array(batchArb, { minLength: 4, maxLength: 20 }), (batches) => sameAsReference(server, batches)), { numRuns: 20 });
    });

    test('lists in UTF-8 byte order, with a page cursor that agrees, in a database whose collation does not', async () => {
      // A database with a linguistic collation (where one is available) sorts text unlike bytes: the names are bytea.
      const collations = (await server.admin.query(`SELECT collname FROM pg_collation WHERE collname IN ('en_US.utf8', 'en-x-icu', 'und-x-icu') ORDER BY 1`)).rows as { collname: string }[];
      const schema = freshSchema('order');
      const store = await openPgHostStore({ connectionString: server.url, schema });
      try {
        const names = ['b', 'B', 'a', 'ab', 'a b', '\u{1F600}', '\uFFFD', '\uE000', 'é', 'e\u0301', 'Z', '~', 'a/../b', 'x'.repeat(512)];
        const { token } = await store.acquireFence('exclusive');
        await store.commit(CommitBatch.tryNew('names', token, names.map((name) => ({ scope: { kind: 'record', name }, previous: null, next: 1, head: new Uint8Array([1]) }))));
        const byBytes = [...names].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
        for (const pageSize of [1, 3, 100]) {
          const listed: string[] = [];
          for (let after: string | null = null; ; ) {
            const page = await store.listHeads('record', after, pageSize);
            listed.push(...page.heads.map((h) => h.name));
            if (page.next === null) break;
            after = page.next;
          }
          assert.deepEqual(listed, byBytes, `pages of ${pageSize}`);
        }
        const all = await store.listHeads('record', null, Number.MAX_SAFE_INTEGER);
        assert.deepEqual(all.heads.map((h) => h.name), byBytes, 'a limit past any page size lists everything');
        assert.equal(all.next, null);
        const sample = collations[0]?.collname;
        if (sample !== undefined) {
          const text = (await server.admin.query(`SELECT n FROM unnest($1::text[]) n ORDER BY n COLLATE ${quoteIdent(sample)}`, [names])).rows.map((r: { n: string }) => r.n);
          assert.notDeepEqual(text, byBytes, `the ${sample} collation orders these names otherwise, so the test can tell`);
        }
      } finally {
        await store.close();
        await dropSchema(server.admin, schema);
      }
    });

    test('close() ends its own pool, never a pool it was given; options are checked', async () => {
      const schema = freshSchema('pool');
      const pool = new pg.Pool({ connectionString: server.url, max: 2 });
      try {
        const a = await openPgHostStore({ pool, schema });
        const b = await openPgHostStore({ pool, schema, holderId: 'b' });
        const { token } = await a.acquireFence('exclusive');
        await a.commit(CommitBatch.tryNew('c1', token, [{ scope: { kind: 'mob', name: 'm' }, previous: null, next: 1, head: new Uint8Array([7]) }]));
        await a.close();
        await a.close();
        assert.equal((await b.loadHead({ kind: 'mob', name: 'm' }))?.commitId, 'c1', 'the given pool still serves after a close');
        assert.equal((await pool.query('SELECT 1 AS one')).rows[0].one, 1);
        await b.close();
        assert.equal(await outcome(() => a.loadHead({ kind: 'mob', name: 'm' })), 'UNAVAILABLE', 'a closed handle answers UNAVAILABLE');
        const own = await openPgHostStore({ connectionString: server.url, schema });
        await own.close();
        assert.equal(await outcome(() => own.loadHead({ kind: 'mob', name: 'm' })), 'UNAVAILABLE');
        for (const bad of [{}, { connectionString: server.url, pool }, { connectionString: '' }, { pool: {} }, { connectionString: server.url, schema: '' }, { connectionString: server.url, schema: 'x'.repeat(64) }, { connectionString: server.url, holderId: '' }, { connectionString: server.url, timing: { lease: 1 } }, { connectionString: server.url, maxConnections: 0 }]) {
          assert.equal(await outcome(() => openPgHostStore(bad as never)), 'INVALID', JSON.stringify(Object.keys(bad)));
        }
      } finally {
        await pool.end();
        await dropSchema(server.admin, schema);
      }
    });

    test('a realm with a newer schema version is refused with VERSION_TOO_NEW, and left as it is', async () => {
      const schema = freshSchema('version');
      try {
        const store = await openPgHostStore({ connectionString: server.url, schema });
        await store.close();
        await server.admin.query(`UPDATE ${quoteIdent(schema)}.seglog_meta SET value = value + 1 WHERE key = 'schema_version'`);
        const err = await openPgHostStore({ connectionString: server.url, schema }).then(
          () => assert.fail('a newer schema version opened'),
          (e: unknown) => e,
        );
        assert.ok(err instanceof SeglogError && err.code === 'VERSION_TOO_NEW', String(err));
        assert.equal((err as SeglogError).details['version'], SCHEMA_VERSION + 1);
        const v = await server.admin.query(`SELECT value::int AS v FROM ${quoteIdent(schema)}.seglog_meta WHERE key = 'schema_version'`);
        assert.equal(v.rows[0].v, SCHEMA_VERSION + 1, 'the refused open changed nothing');
      } finally {
        await dropSchema(server.admin, schema);
      }
    });

    test('a version-1 realm (the same tables, no commit_one) opens, keeps its scopes and rows, and is recorded as this version', async () => {
      const schema = freshSchema('v1');
      const s = quoteIdent(schema);
      const scope: ScopeRef = { kind: 'session', name: 'old' };
      try {
        // A realm as version 1 left it: write through this version, then take away what version 2 added.
        const first = await openPgHostStore({ connectionString: server.url, schema });
        const { token } = await first.acquireFence('exclusive');
        await first.commit(CommitBatch.tryNew('v1-a', token, [{ scope, previous: null, next: 1, head: bytes(1), append: [bytes(2)] }]));
        await first.close();
        await server.admin.query(`DROP PROCEDURE ${s}.commit_one; UPDATE ${s}.seglog_meta SET value = 1 WHERE key = 'schema_version'`);
        const stores = await Promise.all([0, 1].map(() => openPgHostStore({ connectionString: server.url, schema })));
        const v = await server.admin.query(`SELECT value::int AS v FROM ${s}.seglog_meta WHERE key = 'schema_version'`);
        assert.equal(v.rows[0].v, SCHEMA_VERSION);
        const store = stores[0]!;
        assert.deepEqual(await store.loadHead(scope), { version: 1, commitId: 'v1-a', head: bytes(1) });
        await lapseLeases(server.admin, schema);
        const next = await store.acquireFence('exclusive');
        await store.commit(CommitBatch.tryNew('v2-b', next.token, [{ scope, previous: 1, next: 2, head: bytes(3), append: [bytes(4), bytes(5)] }]));
        assert.deepEqual((await store.readRows(scope, 0, 10)).map((r) => [r.index, [...r.data]]), [[0, [2]], [1, [4]], [2, [5]]]);
        for (const x of stores) await x.close();
        // A version no seglog wrote is damage, never a realm to guess at.
        await server.admin.query(`UPDATE ${s}.seglog_meta SET value = 0 WHERE key = 'schema_version'`);
        const err = await openPgHostStore({ connectionString: server.url, schema }).then(
          () => assert.fail('schema version 0 opened'),
          (e: unknown) => e,
        );
        assert.ok(isDamagedAnswer(err), String(err));
      } finally {
        await dropSchema(server.admin, schema);
      }
    });

    test('two first opens of one schema at once both succeed (one creates, the other reads)', async () => {
      const schema = freshSchema('race_open');
      try {
        const stores = await Promise.all([0, 1, 2, 3].map(() => openPgHostStore({ connectionString: server.url, schema })));
        const { token } = await stores[0]!.acquireFence('exclusive');
        assert.equal(token, 1);
        for (const s of stores) await s.close();
      } finally {
        await dropSchema(server.admin, schema);
      }
    });

    test('a server that cannot be reached answers UNAVAILABLE, at open and after', async () => {
      const nowhere = `postgresql://postgres@/postgres?host=${encodeURIComponent('/nonexistent-seglog-socket-dir')}`;
      assert.equal(await outcome(() => openPgHostStore({ connectionString: nowhere })), 'UNAVAILABLE');
      const schema = freshSchema('gone');
      const pool = new pg.Pool({ connectionString: server.url, max: 2 });
      pool.on('error', () => undefined);
      try {
        const store = await openPgHostStore({ pool, schema });
        const { token } = await store.acquireFence('exclusive');
        const scope: ScopeRef = { kind: 'session', name: 's' };
        await store.commit(CommitBatch.tryNew('c1', token, [{ scope, previous: null, next: 1, head: new Uint8Array([1]) }]));
        // The pool's server goes away: its connections are cut, and new ones point at a socket that does not exist.
        (pool.options as { connectionString?: string }).connectionString = nowhere;
        const clients = (pool as unknown as { _clients: pg.PoolClient[] })._clients;
        for (const c of [...clients]) (c as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
        await new Promise((resolve) => setTimeout(resolve, 50));
        assert.equal(await outcome(() => store.loadHead(scope)), 'UNAVAILABLE');
        assert.equal(await outcome(() => store.commit(CommitBatch.tryNew('c2', token, [{ scope, previous: 1, next: 2 }]))), 'UNAVAILABLE', 'nothing was sent: UNAVAILABLE');
        await store.close();
      } finally {
        await pool.end().catch(() => undefined);
        await dropSchema(server.admin, schema);
      }
    });

    test('200 batches over shared scopes at once, each locking its scopes in one fixed order: no deadlock, each lands or is CONFLICT', async () => {
      const schema = freshSchema('deadlock');
      const store = await openPgHostStore({ connectionString: server.url, schema, maxConnections: 40 });
      try {
        const { token } = await store.acquireFence('exclusive');
        const scopes: ScopeRef[] = Array.from({ length: 8 }, (_, i) => ({ kind: SCOPE_KINDS[i % 4]!, name: `shared-${7 - i}` }));
        await store.commit(CommitBatch.tryNew('create', token, scopes.map((scope) => ({ scope, previous: null, next: 1, head: new Uint8Array([0]) }))));
        let serial = 0;
        const results = await Promise.all(
          Array.from({ length: 200 }, async (_, w) => {
            // Each batch names three of the scopes in an order of its own.
            const pick = [w % 8, (w * 3 + 1) % 8, (w * 5 + 2) % 8].filter((x, i, all) => all.indexOf(x) === i);
            const updates: ScopeUpdate[] = [];
            for (const i of pick.reverse()) {
              const v = (await store.loadHead(scopes[i]!))!.version;
              updates.push({ scope: scopes[i]!, previous: v, next: v + 1, append: [new Uint8Array([w & 255])] });
            }
            return outcome(() => store.commit(CommitBatch.tryNew(`w${w}-${++serial}`, token, updates)));
          }),
        );
        assert.ok(results.every((r) => r === 'ok' || r === 'CONFLICT'), `answers: ${[...new Set(results)].join(', ')}`);
        assert.ok(results.includes('ok'), 'some batches landed');
        // Every scope's version counts the batches that landed in it, and its rows agree.
        for (const scope of scopes) {
          const head = (await store.loadHead(scope))!;
          const rows = await store.readRows(scope, 0, 1000);
          assert.equal(rows.length, head.version - 1, `${scope.name}: one row per landed batch`);
        }
      } finally {
        await store.close();
        await dropSchema(server.admin, schema);
      }
    });
  });
}

// ---- the model-based comparison with the memory store ----

const SCOPES: ScopeRef[] = [
  { kind: 'session', name: 'a' },
  { kind: 'session', name: 'b/../c' },
  { kind: 'session', name: '\u{1F600}' },
  { kind: 'session', name: '\uFFFD' },
  { kind: 'mob', name: 'a' },
];

const updateArb = fc.record({
  scope: fc.integer({ min: 0, max: SCOPES.length - 1 }),
  kind: fc.constantFrom('create', 'next', 'next', 'next', 'stale', 'delete'),
  head: fc.option(fc.integer({ min: 0, max: 255 }), { nil: undefined }),
  append: fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 3 }),
  truncateAfter: fc.option(fc.integer({ min: 0, max: 8 }), { nil: undefined }),
  dropBefore: fc.option(fc.integer({ min: 0, max: 8 }), { nil: undefined }),
});
const batchArb = fc.record({ updates: fc.array(updateArb, { minLength: 1, maxLength: 3 }), token: fc.constantFrom(1, 1, 1, 1, 0, 2), retry: fc.boolean() });
type BatchSpec = typeof batchArb extends fc.Arbitrary<infer T> ? T : never;

async function stateOf(store: HostStore): Promise<unknown> {
  const out: unknown[] = [];
  for (const kind of SCOPE_KINDS) {
    for (let after: string | null = null; ; ) {
      const page = await store.listHeads(kind, after, 2);
      out.push(page.heads.map((h) => [kind, h.name, h.head.version, h.head.commitId, [...h.head.head]]), page.next);
      if (page.next === null) break;
      after = page.next;
    }
  }
  for (const scope of SCOPES) {
    const head = await store.loadHead(scope);
    let rows: unknown = [];
    if (head !== null) {
      let from = 0;
      for (; from < 64; from++) if ((await outcome(() => store.readRows(scope, from, 0))) === 'ok') break;
      rows = (await store.readRows(scope, from, 100)).map((r) => [r.index, ...r.data]);
    }
    out.push(head === null ? null : [head.version, head.commitId, [...head.head]], rows);
  }
  return out;
}

async function sameAsReference(server: TestPostgres, batches: BatchSpec[]): Promise<void> {
  const schema = freshSchema('model');
  const ref = new MemoryHostRealm().open();
  let store = await openPgHostStore({ connectionString: server.url, schema, maxConnections: 2 });
  try {
    assert.deepEqual(await store.acquireFence('exclusive'), await ref.acquireFence('exclusive'));
    let n = 0;
    let last: CommitBatch | null = null;
    for (const b of batches) {
      let batch: CommitBatch;
      if (b.retry && last !== null) batch = last;
      else {
        const seen = new Set<number>();
        const updates: ScopeUpdate[] = [];
        for (const u of b.updates) {
          if (seen.has(u.scope)) continue;
          seen.add(u.scope);
          const scope = SCOPES[u.scope]!;
          const v = (await ref.loadHead(scope))?.version ?? null;
          if (u.kind === 'create' || v === null) updates.push({ scope, previous: null, next: 1, head: new Uint8Array([u.head ?? 0]), append: u.append.map((x) => new Uint8Array([x])) });
          else if (u.kind === 'delete') updates.push({ scope, previous: v, next: v + 1, delete: true });
          else {
            const previous = u.kind === 'stale' ? Math.max(1, v - 1) : v;
            const upd: ScopeUpdate = { scope, previous, next: previous + 1, append: u.append.map((x) => new Uint8Array([x])) };
            if (u.head !== undefined) upd.head = new Uint8Array([u.head]);
            if (u.truncateAfter !== undefined) upd.truncateAfter = u.truncateAfter;
            if (u.dropBefore !== undefined) upd.dropBefore = u.dropBefore;
            updates.push(upd);
          }
        }
        batch = CommitBatch.tryNew(`c${++n}`, b.token, updates);
      }
      last = batch;
      const [mine, theirs] = await Promise.all([refusal(store.commit(batch)), refusal(ref.commit(batch))]);
      assert.deepEqual(mine, theirs, `batch ${batch.commitId}`);
    }
    const expected = await stateOf(ref);
    assert.deepEqual(await stateOf(store), expected);
    await store.close();
    store = await openPgHostStore({ connectionString: server.url, schema });
    assert.deepEqual(await stateOf(store), expected, 'after a reopen');
  } finally {
    await store.close();
    await dropSchema(server.admin, schema);
  }
}

/** A commit's answer, with the fields an SPI error carries. */
async function refusal(p: Promise<void>): Promise<unknown> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    if (!(err instanceof HostStoreError)) throw err;
    return { code: err.code, scope: err.scope, current: err.current, message: err.message };
  }
}

function bytes(...values: number[]): Uint8Array {
  return Uint8Array.from(values);
}
