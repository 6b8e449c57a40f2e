// A host store realm with every kind of file and state `seglog verify` checks, and a dump of what
// the store itself shows of a realm (the tools-verify tests' oracle for "a flip there is harmless").
//
// `buildHostRealm(dir)` writes, on the real file system, through `openFsHostStore`: 3 stripes of
// 64 KiB files (one stripe rolls before and after the last checkpoint round, so a sealed file
// and a SEAL to follow lie past the checkpoint), three explicit checkpoint rounds (homes written
// once, twice and three times: both cell slots valid), rows, a truncation (a sealed row file with
// frames past its end offset), a drop inside a row file (dropped frames), a head in a blob, a
// multi-scope batch, a delete (a tombstone home), a fence takeover (FENCE records; the old
// holder then FENCED_OUT), and a record per live scope after the last round.
// `dumpRealm(image, dir)` opens the store on a copy of a disk image (a MemoryFs: its recovery
// writes only to the copy) and answers every listing, head and row it shows, and the token the
// next acquire gets.

import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { MemoryFs, type DiskImage } from '../../lib/fs/memory.js';
import { CommitBatch, openFsHostStore, type FsHostStore, type ScopeKind, type ScopeRef } from '../../lib/host/index.js';
import { scopeDigest } from '../../lib/host/fs/format.js';

const enc = new TextEncoder();
export const REALM_STRIPES = 3;

function homeStripe(kind: ScopeKind, name: string): number {
  return parseInt(scopeDigest(kind, name).slice(0, 8), 16) % REALM_STRIPES;
}

/** The first name `base-<i>` of `kind` homed in a stripe `ok` accepts. */
function nameIn(kind: ScopeKind, base: string, ok: (stripe: number) => boolean): string {
  for (let i = 0; ; i++) {
    const name = `${base}-${i}`;
    if (ok(homeStripe(kind, name))) return name;
  }
}

/** The scopes of the realm `buildHostRealm` writes (some deleted). */
export function realmScopes(): { big: ScopeRef; alpha: ScopeRef; beta: ScopeRef; gamma: ScopeRef; delta: ScopeRef; epsilon: ScopeRef; zeta: ScopeRef } {
  const big: ScopeRef = { kind: 'session', name: nameIn('session', 'big', (s) => s === 0) };
  // The deleted scope's stripe never rolls: its delete record stays on disk before the checkpoint.
  const epsilon: ScopeRef = { kind: 'record', name: nameIn('record', 'epsilon', (s) => s !== 0) };
  return {
    big,
    alpha: { kind: 'session', name: nameIn('session', 'alpha', (s) => s === 1) },
    beta: { kind: 'session', name: nameIn('session', 'beta', (s) => s === 2) },
    gamma: { kind: 'identity', name: 'gamma' },
    delta: { kind: 'mob', name: 'delta' },
    epsilon,
    zeta: { kind: 'record', name: 'zeta' },
  };
}

export const REALM_OPTIONS = {
  stripes: REALM_STRIPES,
  stripeFileBytes: 64 * 1024,
  preallocBytes: 4096,
  // Rounds run only when the test asks (deterministic homes).
  checkpointBytes: 1 << 30,
  checkpointIn: 'thread' as const,
  lockLingerMs: 0,
};

function rows(tag: string, n: number, bytes = 40): Uint8Array[] {
  return Array.from({ length: n }, (_, i) => enc.encode(`${tag} row ${i} `.padEnd(bytes, '.')));
}

export async function buildHostRealm(dir: string): Promise<void> {
  const s = realmScopes();
  const a = await openFsHostStore(dir, { ...REALM_OPTIONS, holderId: 'writer-a' });
  const versions = new Map<string, number>();
  const commit = async (store: FsHostStore, id: string, token: number, updates: { scope: ScopeRef; head?: Uint8Array; append?: Uint8Array[]; truncateAfter?: number; dropBefore?: number; delete?: boolean }[]): Promise<void> => {
    const batch = CommitBatch.tryNew(
      id,
      token,
      updates.map((u) => {
        const key = `${u.scope.kind}/${u.scope.name}`;
        const v = versions.get(key) ?? 0;
        return v === 0 ? { ...u, previous: null, next: 1, head: u.head ?? enc.encode(`head of ${key}`) } : { ...u, previous: v, next: v + 1 };
      }),
    );
    await store.commit(batch);
    for (const u of updates) versions.set(`${u.scope.kind}/${u.scope.name}`, (versions.get(`${u.scope.kind}/${u.scope.name}`) ?? 0) + 1);
  };
  try {
    const t1 = (await a.acquireFence('exclusive')).token;
    // Alpha, beta and gamma outgrow the scope table (their rows pass 16 KiB): they have homes, so
    // the realm holds a truncated row file, a dropped one and a head blob; the others stay in the table.
    await commit(a, 'a-1', t1, [{ scope: s.alpha, append: rows('alpha', 6, 3000) }]);
    await commit(a, 'a-2', t1, [{ scope: s.beta, append: rows('beta', 6, 3000) }]);
    await commit(a, 'a-3', t1, [{ scope: s.gamma, head: enc.encode('G'.repeat(3000)), append: rows('gamma', 2, 8000) }]);
    await commit(a, 'a-4', t1, [{ scope: s.delta, append: rows('delta', 1) }, { scope: s.alpha, append: rows('alpha+delta', 1) }]);
    await commit(a, 'a-5', t1, [{ scope: s.epsilon, append: rows('epsilon', 3) }]);
    await commit(a, 'a-6', t1, [{ scope: s.big, append: rows('big', 2) }]);
    assert.ok(await a.checkpoint(), 'round 1');

    await commit(a, 'a-7', t1, [{ scope: s.alpha, truncateAfter: 4, append: rows('alpha again', 2) }]);
    await commit(a, 'a-8', t1, [{ scope: s.beta, dropBefore: 3, append: rows('beta again', 1) }]);
    await commit(a, 'a-9', t1, [{ scope: s.epsilon, delete: true }]);
    await commit(a, 'a-10', t1, [{ scope: s.gamma, head: enc.encode('H'.repeat(2500)) }, { scope: s.delta, append: rows('delta', 2) }]);
    await commit(a, 'a-11', t1, [{ scope: s.zeta, append: rows('zeta', 2) }]);
    // The big scope's stripe rolls (64 KiB files).
    for (let i = 0; i < 7; i++) await commit(a, `a-big-${i}`, t1, [{ scope: s.big, append: rows(`big ${i}`, 1, 12_000) }]);
    assert.ok(await a.checkpoint(), 'round 2');

    const b = await openFsHostStore(dir, { ...REALM_OPTIONS, holderId: 'writer-b' });
    try {
      const t2 = (await b.acquireFence('takeover')).token;
      await assert.rejects(commit(a, 'a-late', t1, [{ scope: s.zeta, append: rows('late', 1) }]), { code: 'FENCED_OUT' });
      await commit(b, 'b-1', t2, [{ scope: s.alpha, append: rows('alpha b', 2) }, { scope: s.delta, head: enc.encode('delta by b') }]);
      await commit(b, 'b-2', t2, [{ scope: s.zeta, truncateAfter: 1, append: rows('zeta b', 1) }]);
      for (let i = 0; i < 2; i++) await commit(b, `b-big-${i}`, t2, [{ scope: s.big, append: rows(`big b ${i}`, 1, 12_000) }]);
      assert.ok(await b.checkpoint(), 'round 3');
      // After the last round: a record for every live scope, and the big stripe rolls again.
      for (const scope of [s.alpha, s.beta, s.gamma, s.delta, s.zeta]) await commit(b, `b-after-${scope.name}`, t2, [{ scope, append: rows(`after ${scope.name}`, 1) }]);
      for (let i = 0; i < 5; i++) await commit(b, `b-big-after-${i}`, t2, [{ scope: s.big, append: rows(`big after ${i}`, 1, 12_000) }]);
    } finally {
      await b.close();
    }
  } finally {
    await a.close();
  }
  // A closed realm gives back its stripes' zero-filled space; a writer that was killed leaves it.
  // The realm is left as a killed writer leaves it (zeros past the records of each newest stripe
  // file), so that its tails are there to damage.
  for (const k of await fsp.readdir(path.join(dir, 'stripes'))) {
    const files = (await fsp.readdir(path.join(dir, 'stripes', k))).filter((n) => n.endsWith('.wal')).sort();
    const newest = files[files.length - 1];
    if (newest !== undefined) await fsp.appendFile(path.join(dir, 'stripes', k, newest), new Uint8Array(8192));
  }
}

/** What the store shows of the realm at `dir` of `image` (opened on a copy, as a new boot). */
export async function dumpRealm(image: DiskImage, dir: string, refs: readonly ScopeRef[]): Promise<string> {
  const store = await openFsHostStore(dir, { fs: new MemoryFs({ image, trace: false }), bootId: () => 'dump-boot', checkpointIn: 'thread', lockWaitMs: 2000, holderId: 'dump' });
  try {
    const out: unknown[] = [];
    const names = new Map<string, ScopeRef>();
    for (const r of refs) names.set(`${r.kind}/${r.name}`, r);
    for (const kind of ['session', 'identity', 'mob', 'record'] as const) {
      const listed: string[] = [];
      for (let after: string | null = null; ; ) {
        const page = await store.listHeads(kind, after, 2);
        for (const h of page.heads) {
          listed.push(`${h.name}@${h.head.version}`);
          names.set(`${kind}/${h.name}`, { kind, name: h.name });
        }
        if (page.next === null) break;
        after = page.next;
      }
      out.push({ kind, listed });
    }
    for (const [key, ref] of [...names].sort()) {
      const head = await store.loadHead(ref);
      let first = 0;
      const got = await store.readRows(ref, 0, 100_000).catch((err: { code?: string; details?: { first?: number } }) => {
        if (err.code !== 'INVALID' || typeof err.details?.first !== 'number') throw err;
        first = err.details.first;
        return store.readRows(ref, first, 100_000);
      });
      out.push({
        key,
        head: head === null ? null : { version: head.version, commitId: head.commitId, head: Buffer.from(head.head).toString('hex') },
        first,
        rows: got.map((r) => `${r.index}:${Buffer.from(r.data).toString('hex')}`),
      });
    }
    out.push({ nextToken: (await store.acquireFence('takeover')).token });
    return JSON.stringify(out);
  } finally {
    await store.close();
  }
}
