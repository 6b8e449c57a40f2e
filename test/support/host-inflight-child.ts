// The processes of the fs host store's in-flight kill test (test/host-inflight-kill.test.ts).
//
// Owns: two roles, chosen by the first argument.
//   writer <dir> <seed> <life> <holder>
//       Opens the realm, takes the fence over, loads every scope's head, and commits batches of one
//       to three scopes, one at a time, until it is SIGKILLed; so at its death at most one commit
//       is in flight. Ledger lines on fd 3 (see ./kill-child.ts): {t:'start'}, {t:'acquired',
//       token}, {t:'begin', id, scopes} before each commit, {t:'ack', id} after it resolved,
//       {t:'fail', id, code} when it was refused (then it loads the heads again, as Core settles).
//   probe <dir> <acquire|load> <plant> <holder>
//       A fresh process: opens the realm, takes the fence over first when asked (`acquire`), loads
//       the head of every scope, prints them as one JSON line on stdout and closes. `plant` 1 opens
//       the store with the planted old rule (loads answer from the published notes alone).

import { CommitBatch } from '../../lib/host/batch.js';
import { openFsHostStore, type FsHostStoreOptions } from '../../lib/host/fs/store.js';
import { FenceTiming } from '../../lib/host/timing.js';
import type { ScopeRef, ScopeUpdate } from '../../lib/host/types.js';
import { SCOPES } from './host-kill-scopes.js';
import { ledger, runWriter, writerArgs } from './kill-child.js';

const enc = new TextEncoder();

/** The realm's settings, the same for every process: small stripe files that roll, frequent checkpoint rounds. */
function settings(holder: string, plant: boolean): FsHostStoreOptions {
  return {
    holderId: holder,
    timing: FenceTiming.tryNew(1000, 3000),
    stripeFileBytes: 64 * 1024,
    preallocBytes: 8 * 1024,
    checkpointBytes: 32 * 1024,
    ...(plant ? ({ mistakes: { loadsIgnoreUnpublished: true } } as object) : {}),
  };
}

/** What a probe prints for one scope: [version, commitId], or null when the scope does not show. */
export type ShownHead = [number, string] | null;

async function probe(dir: string, mode: string, plant: boolean, holder: string): Promise<void> {
  const store = await openFsHostStore(dir, settings(holder, plant));
  if (mode === 'acquire') await store.acquireFence('takeover');
  else if (mode !== 'load') throw new Error(`probe mode ${mode} is not acquire or load`);
  const heads: Record<string, ShownHead> = {};
  for (const s of SCOPES) {
    const h = await store.loadHead(s);
    heads[s.name] = h === null ? null : [h.version, h.commitId];
  }
  await store.close();
  process.stdout.write(JSON.stringify(heads) + '\n');
}

function writer(): void {
  runWriter(async () => {
    const { dir, random } = writerArgs();
    const holder = process.argv[5] ?? 'writer';
    const store = await openFsHostStore(dir, settings(holder, false));
    const grant = await store.acquireFence('takeover');
    ledger({ t: 'acquired', token: grant.token });
    const versions = new Map<string, number | null>();
    const reload = async (scopes: readonly ScopeRef[]): Promise<void> => {
      for (const s of scopes) versions.set(s.name, (await store.loadHead(s))?.version ?? null);
    };
    await reload(SCOPES);
    for (let serial = 1; ; serial++) {
      const id = `${holder}-${serial}`;
      const scopes = [...SCOPES].sort(() => random() - 0.5).slice(0, 1 + Math.floor(random() * 3));
      const updates: ScopeUpdate[] = scopes.map((s) => {
        const v = versions.get(s.name) ?? null;
        const rows = Array.from({ length: 1 + Math.floor(random() * 3) }, (_, k) => enc.encode(`${id}|${s.name}|${k}`));
        return v === null ? { scope: s, previous: null, next: 1, head: enc.encode(id), append: rows } : { scope: s, previous: v, next: v + 1, head: enc.encode(id), append: rows };
      });
      ledger({ t: 'begin', id, scopes: scopes.map((s) => s.name) });
      try {
        await store.commit(CommitBatch.tryNew(id, grant.token, updates));
      } catch (err) {
        ledger({ t: 'fail', id, code: String((err as { code?: unknown }).code) });
        await reload(scopes);
        continue;
      }
      ledger({ t: 'ack', id });
      for (const u of updates) versions.set(u.scope.name, u.next);
    }
  });
}

const [role, dir, mode, plant, holder] = process.argv.slice(2);
if (role === 'writer') {
  // writerArgs() reads <dir> <seed> <life> from argv[2..4]: drop the role.
  process.argv.splice(2, 1);
  writer();
} else if (role === 'probe' && dir !== undefined && mode !== undefined) {
  probe(dir, mode, plant === '1', holder ?? 'probe').catch((err: unknown) => {
    process.stderr.write(`probe failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(4);
  });
} else {
  process.stderr.write('usage: host-inflight-child.js writer <dir> <seed> <life> <holder> | probe <dir> <acquire|load> <0|1> <holder>\n');
  process.exit(2);
}
