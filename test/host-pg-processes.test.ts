// The PostgreSQL host store across real processes and a real server failure, against a server
// this file starts (test/support/pg.ts; SEGLOG_PG_URL points the first two at a user's server):
// - writer processes SIGKILLed at random moments — inside their open, inside their takeover of
//   the fence, inside commits, after another writer took the fence from them — with the ledger
//   checker (test/support/host-ledger.ts) right after every round: loads from two handles, before
//   and after the next acquire, and after a reopen, agree with each other and with what the
//   writers were told;
// - two handles in two processes racing acquires and commits on shared scopes, meeting CONFLICT
//   and FENCED_OUT under real concurrency, checked the same way;
// - the server itself stopped with `pg_ctl stop -m immediate` (no checkpoint, as in a crash) and
//   started again while commits are in flight: every acknowledged commit survives, every commit in
//   flight shows wholly or never, and every load says the same.

import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { seededRandom } from '../lib/crash/determinism.js';
import { CommitBatch, FenceTiming, isHostStoreError, openPgHostStore, type PgHostStore, type ScopeRef, type ScopeUpdate } from '../lib/host/index.js';
import { startScratchPostgres, type ScratchPostgres } from '../lib/host/pg/scratch-server.js';
import { rowText, SCOPES } from './support/host-kill-scopes.js';
import { LedgerCheck, spawnLedgerWriter, type LedgerWriter } from './support/host-ledger.js';
import { dropSchema, freshSchema, postgresForTests, type TestPostgres } from './support/pg.js';
import { snapshotBuild } from './support/snapshot-build.js';

const KILLS = Number(process.env['SEGLOG_PG_KILLS'] ?? 100);
const TIME_BUDGET_MS = Number(process.env['SEGLOG_PG_KILL_MS'] ?? 150_000);
const timing = FenceTiming.tryNew(1000, 3000);

const found = await postgresForTests();
if (!found.ok) {
  test('PostgreSQL host store processes: a server to test against', () => assert.fail(found.why));
} else {
  const server = found.pg;
  after(() => server.stop());
  register(server);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function now(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

function register(server: TestPostgres): void {
  let root: string | null = null;
  let writerScript: string | null = null;
  const writer = async (): Promise<string> => {
    if (writerScript !== null) return writerScript;
    root = await mkdtemp(join(tmpdir(), 'seglog-pg-processes-'));
    writerScript = await snapshotBuild(root, 'host-pg-writer.js', [join('lib', 'host', 'pg', 'store.js'), join('test', 'support', 'kill-child.js')]);
    return writerScript;
  };
  after(async () => {
    if (root !== null) await rm(root, { recursive: true, force: true });
  });
  const opener = (schema: string) => (holder: string) => openPgHostStore({ connectionString: server.url, schema, holderId: holder, timing });

  test(`PgHostStore: ${KILLS} SIGKILLs of writer processes in and out of commits, holding and losing the fence`, { timeout: TIME_BUDGET_MS + 120_000 }, async () => {
    const script = await writer();
    const schema = freshSchema('kill');
    const check = new LedgerCheck();
    const rng = seededRandom(16);
    const deadline = performance.now() + TIME_BUDGET_MS;
    let kills = 0;
    let early = 0;
    let rounds = 0;
    try {
      for (let round = 0; kills < KILLS && performance.now() < deadline; round++) {
        rounds++;
        const writers: LedgerWriter[] = [];
        const spawnOne = (suffix: string, life: number): LedgerWriter => {
          const w = spawnLedgerWriter(script, [server.url, '16', String(life), `R${round}${suffix}`, schema, 'kill'], `R${round}${suffix}`);
          writers.push(w);
          return w;
        };
        const kill = (w: LedgerWriter, inOpen: boolean): void => {
          if (!w.kill()) return;
          kills++;
          if (inOpen) early++;
        };
        /** Kills `w` inside its open or takeover (20 %), or a random moment after `until` (its own acquire by default). */
        const killAt = async (w: LedgerWriter, until: Promise<void> | null): Promise<void> => {
          await w.started;
          if (rng() < 0.2) {
            await sleep(rng() * 40);
            return kill(w, true);
          }
          await (until ?? w.acquired);
          await sleep(rng() * 80);
          kill(w, false);
        };
        const a = spawnOne('A', round * 2);
        const killers: Promise<void>[] = [];
        if (rng() < 0.9) {
          // A second writer takes the fence over while the first may still be committing.
          await sleep(rng() * 60);
          const b = spawnOne('B', round * 2 + 1);
          killers.push(killAt(a, rng() < 0.75 ? Promise.race([b.acquired, b.exited]) : null), killAt(b, null));
        } else {
          killers.push(killAt(a, null));
        }
        await Promise.all(killers);
        for (const w of writers) await w.exited;
        for (const w of writers) {
          if (w.stderr().length > 0) throw new Error(`writer ${w.holder} (pid ${w.pid}) failed:\n${w.stderr()}`);
          check.absorb(w.holder, w.ledger);
        }
        // Loads at once — two handles, the same before and after the next acquire, a reopen — agree:
        // a dead writer's transaction still open on the server can only roll back.
        await check.check(opener(schema), { acquire: true });
      }
      const answers = Object.fromEntries(check.answers);
      console.log(
        `pg kill test: ${kills} kills in ${rounds} rounds (${early} inside an open or takeover), answers ${JSON.stringify(answers)}, ` +
          `${check.shown()} batch-scope pairs showing at the end`,
      );
      assert.ok(kills >= Math.min(KILLS, 60), `only ${kills} kills within the time budget`);
      assert.ok((check.answers.get('ok') ?? 0) > 0 && (check.answers.get('FENCED_OUT') ?? 0) > 0, 'the run committed and met the fence');
    } finally {
      await dropSchema(server.admin, schema);
    }
  });

  test('PgHostStore: two processes race acquires and commits on shared scopes (CONFLICT and FENCED_OUT under real concurrency)', { timeout: 120_000 }, async () => {
    const script = await writer();
    const schema = freshSchema('race');
    const check = new LedgerCheck();
    try {
      for (let round = 0; round < 3; round++) {
        const racers = ['A', 'B'].map((r, i) => spawnLedgerWriter(script, [server.url, '17', String(round * 2 + i), `race${round}${r}`, schema, 'race', '3000'], `race${round}${r}`));
        for (const w of racers) await w.exited;
        for (const w of racers) {
          if (w.stderr().length > 0) throw new Error(`racer ${w.holder} (pid ${w.pid}) failed:\n${w.stderr()}`);
          assert.equal(w.ledger[w.ledger.length - 1]?.t, 'done', `racer ${w.holder} ran to its end`);
          check.absorb(w.holder, w.ledger, ['FENCED_OUT', 'CONFLICT']);
        }
        await check.check(opener(schema), { acquire: true });
      }
      const answers = Object.fromEntries(check.answers);
      console.log(`pg race test: ${check.acquires.length} acquires, answers ${JSON.stringify(answers)}, ${check.shown()} batch-scope pairs showing`);
      assert.ok((check.answers.get('ok') ?? 0) > 0, 'the racers committed');
      assert.ok((check.answers.get('FENCED_OUT') ?? 0) > 0, 'a racer met FENCED_OUT');
      assert.ok((check.answers.get('CONFLICT') ?? 0) > 0, 'a racer met CONFLICT');
    } finally {
      await dropSchema(server.admin, schema);
    }
  });

  test('PgHostStore: the server stopped (immediate) and started while commits are in flight', { timeout: 240_000 }, async (t) => {
    // A user's server is not this test's to stop: it needs a scratch server of its own.
    let own: ScratchPostgres | null = server.server;
    if (own === null) {
      try {
        own = await startScratchPostgres();
      } catch (err) {
        t.skip(`SEGLOG_PG_URL is set and no scratch server could be started to restart: ${(err as Error).message}`);
        return;
      }
    }
    const schema = freshSchema('restart');
    try {
      await restartRun(own, schema);
    } finally {
      // The realm goes with a scratch server of this test's own; on the file's server its schema is dropped.
      if (own !== server.server) await own.stop();
      else await dropSchema(server.admin, schema).catch(() => dropSchema(server.admin, schema));
    }
  });
}

/** Commit loops on disjoint scope sets, three immediate stops and starts of the server under them, then the ledger check. */
async function restartRun(server: ScratchPostgres, schema: string): Promise<void> {
  const open = (holder: string): Promise<PgHostStore> => openPgHostStore({ connectionString: server.url, schema, holderId: holder, timing, maxConnections: 8 });
  const store = await open('writer');
  const check = new LedgerCheck();
  const ledger: { t: string; [k: string]: unknown }[] = [];
  const { token } = await store.acquireFence('exclusive');
  ledger.push({ t: 'acquired', token, at: now() });
  const enc = new TextEncoder();
  const rng = seededRandom(18);
  let stop = false;
  let serial = 0;
  const outcomes = new Map<string, number>();
  // Four loops, each on three scopes of its own, each batch over one to three of them.
  const loop = async (scopes: ScopeRef[]): Promise<void> => {
    const versions = new Map<string, number | null>(scopes.map((s) => [s.name, null]));
    let unsettled: string[] | null = null;
    while (!stop) {
      if (unsettled !== null) {
        // Core's rule: settle an unknown outcome (load the heads) before the next version.
        try {
          for (const s of scopes) versions.set(s.name, (await store.loadHead(s))?.version ?? null);
          unsettled = null;
        } catch (err) {
          if (!isHostStoreError(err, 'UNAVAILABLE')) throw err;
          await sleep(20);
          continue;
        }
      }
      const chosen = scopes.filter(() => rng() < 0.6);
      if (chosen.length === 0) chosen.push(scopes[0]!);
      const id = `w-${++serial}`;
      const updates: ScopeUpdate[] = chosen.map((s) => {
        const n = 1 + Math.floor(rng() * 3);
        const rows = Array.from({ length: n }, (_, k) => enc.encode(rowText(id, s.name, k, n)));
        const v = versions.get(s.name) ?? null;
        return v === null ? { scope: s, previous: null, next: 1, head: enc.encode(id), append: rows } : { scope: s, previous: v, next: v + 1, head: enc.encode(id), append: rows };
      });
      ledger.push({ t: 'begin', id, scopes: chosen.map((s) => s.name), at: now() });
      try {
        await store.commit(CommitBatch.tryNew(id, token, updates));
        ledger.push({ t: 'ack', id });
        outcomes.set('ok', (outcomes.get('ok') ?? 0) + 1);
        for (const u of updates) versions.set(u.scope.name, u.next);
      } catch (err) {
        if (!isHostStoreError(err)) throw err;
        assert.ok(err.code === 'UNAVAILABLE' || err.code === 'INDETERMINATE', `a commit answered ${err.code}: ${err.message}`);
        ledger.push({ t: 'fail', id, code: err.code });
        outcomes.set(err.code, (outcomes.get(err.code) ?? 0) + 1);
        unsettled = chosen.map((s) => s.name);
        await sleep(10);
      }
    }
  };
  const loops = [0, 1, 2, 3].map((i) => loop(SCOPES.slice(i * 3, i * 3 + 3)));
  let restarts = 0;
  try {
    for (let r = 0; r < 3; r++) {
      await sleep(400 + rng() * 400);
      const before = outcomes.get('ok') ?? 0;
      await server.stopImmediately();
      await sleep(100 + rng() * 400);
      await server.start();
      restarts++;
      // Commits go on after the restart before the next one.
      const deadline = performance.now() + 20_000;
      while ((outcomes.get('ok') ?? 0) < before + 20 && performance.now() < deadline) await sleep(50);
    }
  } finally {
    stop = true;
    await Promise.all(loops);
    await store.close();
  }
  check.absorb('writer', ledger);
  await check.check(open, { acquire: true });
  console.log(`pg restart test: ${restarts} immediate stops and starts of the server; commit answers ${JSON.stringify(Object.fromEntries(outcomes))}; ${check.shown()} batch-scope pairs showing`);
  assert.equal(restarts, 3);
  assert.ok((outcomes.get('ok') ?? 0) > 60, 'commits went on between the restarts');
  assert.ok((outcomes.get('UNAVAILABLE') ?? 0) + (outcomes.get('INDETERMINATE') ?? 0) + (outcomes.get('ok') ?? 0) > 0);
}
