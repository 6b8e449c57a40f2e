// A writer process of the PostgreSQL host store's process tests (test/host-pg-processes.test.ts),
// writing its acknowledgement ledger as it goes (./host-ledger.ts says what the lines mean).
//
// Owns: the writer's protocol. Run as `node host-pg-writer.js <url> <seed> <life> <holder> <schema> <mode>`:
// - mode 'kill': opens the realm, takes the fence over, loads every scope's head and commits
//   forever — one to four batches at once on disjoint scopes, each over one to three scopes and
//   appending rows named after the batch — until it is SIGKILLed;
// - mode 'race': for a few seconds, again and again takes the fence over and commits a few batches
//   on scopes the other racer writes too, meeting CONFLICT and FENCED_OUT; then it exits.
// A refused or unknown commit is settled the way Core settles it: by loading the heads of its
// scopes again.

import { ledger, runWriter, writerArgs } from './kill-child.js';
import { CommitBatch } from '../../lib/host/batch.js';
import { isHostStoreError } from '../../lib/host/errors.js';
import { openPgHostStore } from '../../lib/host/pg/store.js';
import { FenceTiming } from '../../lib/host/timing.js';
import type { ScopeRef, ScopeUpdate } from '../../lib/host/types.js';
import { rowText, SCOPES } from './host-kill-scopes.js';

function now(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

const enc = new TextEncoder();

runWriter(async () => {
  const { dir: url, random } = writerArgs();
  const holder = process.argv[5] ?? 'writer';
  const schema = process.argv[6] ?? 'seglog';
  const mode = process.argv[7] ?? 'kill';
  const store = await openPgHostStore({ connectionString: url, schema, holderId: holder, timing: FenceTiming.tryNew(1000, 3000), maxConnections: 4 });
  ledger({ t: 'open' });
  const versions = new Map<string, number | null>();
  const reload = async (scopes: readonly ScopeRef[]): Promise<void> => {
    for (const s of scopes) versions.set(s.name, (await store.loadHead(s))?.version ?? null);
  };
  let token = 0;
  const acquire = async (): Promise<void> => {
    token = (await store.acquireFence('takeover')).token;
    ledger({ t: 'acquired', token, at: now() });
    await reload(SCOPES);
  };
  let serial = 0;
  /** Commits one batch; answers its outcome code. */
  const commitOne = async (scopes: ScopeRef[]): Promise<string> => {
    const id = `${holder}-${++serial}`;
    const updates: ScopeUpdate[] = scopes.map((s) => {
      const n = 1 + Math.floor(random() * 3);
      const rows = Array.from({ length: n }, (_, k) => enc.encode(rowText(id, s.name, k, n)));
      const v = versions.get(s.name) ?? null;
      return v === null ? { scope: s, previous: null, next: 1, head: enc.encode(id), append: rows } : { scope: s, previous: v, next: v + 1, head: enc.encode(id), append: rows };
    });
    ledger({ t: 'begin', id, scopes: scopes.map((s) => s.name), at: now(), token });
    try {
      await store.commit(CommitBatch.tryNew(id, token, updates));
    } catch (err) {
      const code = String((err as { code?: unknown }).code);
      ledger({ t: 'fail', id, code });
      if (!isHostStoreError(err)) throw err;
      await reload(scopes).catch(() => undefined);
      return code;
    }
    ledger({ t: 'ack', id });
    for (const u of updates) versions.set(u.scope.name, u.next);
    return 'ok';
  };
  const pick = (): ScopeRef[][] => {
    const order = [...SCOPES].sort(() => random() - 0.5);
    const out: ScopeRef[][] = [];
    const parallel = 1 + Math.floor(random() * 4);
    for (let j = 0, at = 0; j < parallel; j++) {
      const width = 1 + Math.floor(random() * 3);
      const scopes = order.slice(at, at + width);
      at += width;
      if (scopes.length > 0) out.push(scopes);
    }
    return out;
  };
  if (mode === 'kill') {
    await acquire();
    for (;;) await Promise.all(pick().map(commitOne));
  }
  // 'race': a few seconds of fighting over the fence and the scopes, then a clean exit.
  const until = performance.now() + Number(process.argv[8] ?? 4000);
  while (performance.now() < until) {
    // Half the time the racer keeps the versions it had before it took the fence back: the other
    // racer's commits since then make its next batches meet CONFLICT.
    const stale = new Map(versions);
    await acquire();
    if (random() < 0.5) for (const [name, v] of stale) versions.set(name, v);
    for (let k = 1 + Math.floor(random() * 4); k > 0; k--) {
      const codes = await Promise.all(pick().map(commitOne));
      if (codes.includes('FENCED_OUT')) break;
    }
  }
  await store.close();
  ledger({ t: 'done' });
  process.exit(0);
});
