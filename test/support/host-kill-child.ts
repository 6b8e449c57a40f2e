// A writer process of the fs host store's kill test (test/host-kill.test.ts): it is SIGKILLed at a
// random moment, and writes its acknowledgement ledger as it goes.
//
// Owns: the writer's protocol. Run as `node host-kill-child.js <dir> <seed> <life> <holder>`. It opens
// the realm in <dir>, takes the fence over (the previous holder is dead, or is the other writer of
// this round), loads every scope's head, and commits forever: batches of one to three scopes
// (one to four at once, on disjoint scopes), each appending rows named after the batch. Ledger
// lines (one synchronous write each to fd 3, a pipe: in the kernel before the next statement, so a
// kill cuts only between lines) carry CLOCK_MONOTONIC times, which every process on the machine
// shares:
//   {t:'start'}                 modules loaded
//   {t:'open'}                  the store is open
//   {t:'acquired', token, at}   the takeover answered (written after it resolved)
//   {t:'begin', id, scopes, at} written before the commit is issued
//   {t:'ack', id}               written after the commit resolved (a kill between the two loses
//                               this line: the ledger may miss an acknowledgement, never invent one)
//   {t:'fail', id, code}        the commit was refused (FENCED_OUT after a takeover, ...)
// A refused or unknown commit (UNAVAILABLE, INDETERMINATE) is settled the way Core settles it: by
// loading the heads of its scopes again.

import { ledger, runWriter, writerArgs } from './kill-child.js';
import { CommitBatch } from '../../lib/host/batch.js';
import { openFsHostStore } from '../../lib/host/fs/store.js';
import type { ScopeRef, ScopeUpdate } from '../../lib/host/types.js';
import { rowText, SCOPES } from './host-kill-scopes.js';
import { lockHolders } from './lock-holders.js';
import { traceFsCalls } from './tracing-fs.js';

function now(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

const enc = new TextEncoder();

runWriter(async () => {
  const { dir, random } = writerArgs();
  const holder = process.argv[5] ?? 'writer';
  // Small stripe files and frequent checkpoint rounds (on a worker thread), so kills land in rolls and rounds too.
  const calls = traceFsCalls();
  const store = await openFsHostStore(dir, { holderId: holder, lockLingerMs: 1, stripeFileBytes: 64 * 1024, preallocBytes: 8 * 1024, checkpointBytes: 8 * 1024 });
  ledger({ t: 'open' });
  // A failing writer asks the lock holder (SIGUSR2) to say what its stripes are doing.
  process.on('SIGUSR2', () => process.stderr.write(`state of ${holder} (pid ${process.pid}):\n${store.describeLocks()}\ncalls in flight:\n${calls.pending().join('\n')}\n`));
  const grant = await store.acquireFence('takeover').catch(async (err: unknown) => {
    // For the failure report: which process holds which lock of the realm now.
    const holders = lockHolders(dir);
    for (const pid of new Set(holders.map((h) => Number(h.split(' ')[1])))) if (pid !== process.pid) process.kill(pid, 'SIGUSR2');
    await new Promise((resolve) => setTimeout(resolve, 500)); // the holders write their state
    throw new Error(`${String(err)}\npid ${process.pid}; locks held under ${dir}:\n${holders.join('\n')}`);
  });
  ledger({ t: 'acquired', token: grant.token, at: now() });
  const versions = new Map<string, number | null>();
  const reload = async (scopes: readonly ScopeRef[]): Promise<void> => {
    for (const s of scopes) versions.set(s.name, (await store.loadHead(s))?.version ?? null);
  };
  await reload(SCOPES);
  let serial = 0;
  const commitOne = async (scopes: ScopeRef[]): Promise<void> => {
    const id = `${holder}-${++serial}`;
    const updates: ScopeUpdate[] = scopes.map((s) => {
      const n = 1 + Math.floor(random() * 3);
      const rows = Array.from({ length: n }, (_, k) => enc.encode(rowText(id, s.name, k, n)));
      const v = versions.get(s.name) ?? null;
      return v === null ? { scope: s, previous: null, next: 1, head: enc.encode(id), append: rows } : { scope: s, previous: v, next: v + 1, head: enc.encode(id), append: rows };
    });
    ledger({ t: 'begin', id, scopes: scopes.map((s) => s.name), at: now() });
    try {
      await store.commit(CommitBatch.tryNew(id, grant.token, updates));
    } catch (err) {
      ledger({ t: 'fail', id, code: String((err as { code?: unknown }).code) });
      await reload(scopes);
      return;
    }
    ledger({ t: 'ack', id });
    for (const u of updates) versions.set(u.scope.name, u.next);
  };
  for (;;) {
    // One to four commits at once, on disjoint scopes (a group per stripe).
    const order = [...SCOPES].sort(() => random() - 0.5);
    const jobs: Promise<void>[] = [];
    const parallel = 1 + Math.floor(random() * 4);
    for (let j = 0, at = 0; j < parallel; j++) {
      const width = 1 + Math.floor(random() * 3);
      const scopes = order.slice(at, at + width);
      at += width;
      if (scopes.length > 0) jobs.push(commitOne(scopes));
    }
    await Promise.all(jobs);
  }
});
