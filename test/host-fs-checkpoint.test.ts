// The fs host store's checkpointer on the real file system: rounds run on a worker thread (the
// default with the default file system) while commits go on; stripe files are removed as rounds
// cover them, the scopes' homes take their rows and heads (large heads as blobs), and every load —
// from the committing handle, another handle, and a reopened realm — shows exactly what was
// committed, through truncations and drops. Also: a handle that only reads trims its view.

import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { CommitBatch, openFsHostStore, type FsHostStore, type ScopeRef } from '../lib/host/index.js';

const te = new TextEncoder();

function rowOf(scope: number, index: number): Uint8Array {
  // Every fourth scope has long rows: it outgrows the scope table and gets a home of its own.
  const long = scope % 4 === 0 ? 'L'.repeat(700) : '';
  return te.encode(`s${scope}-r${index}-${'x'.repeat((scope * 37 + index * 11) % 300)}${long}`);
}

async function expectScope(store: FsHostStore, ref: ScopeRef, want: { version: number; head: string; first: number; end: number; scope: number }): Promise<void> {
  const head = await store.loadHead(ref);
  assert.equal(head?.version, want.version, `${ref.name} version`);
  assert.equal(Buffer.from(head!.head).toString().slice(0, 40), want.head.slice(0, 40), `${ref.name} head`);
  assert.equal(head!.head.length, want.head.length);
  if (want.first > 0) await assert.rejects(store.readRows(ref, want.first - 1, 1), { code: 'INVALID' });
  const rows = await store.readRows(ref, want.first, 100_000);
  assert.equal(rows.length, want.end - want.first, `${ref.name} rows`);
  rows.forEach((r, k) => assert.deepEqual(Buffer.from(r.data), Buffer.from(rowOf(want.scope, want.first + k)), `${ref.name} row ${want.first + k}`));
}

/** The handles a test opened: `closeAll` closes them, in order, and forgets them. */
interface Handles {
  track(s: FsHostStore): FsHostStore;
  closeAll(): Promise<void>;
}

/**
 * Runs `body` on a realm directory of its own; every handle it tracks is closed, and the directory
 * removed, however it ends (an open handle, and its checkpoint worker, would keep the test process
 * alive).
 */
async function withRealm(prefix: string, body: (dir: string, handles: Handles) => Promise<void>): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), prefix));
  const open: FsHostStore[] = [];
  const handles: Handles = {
    track: (s) => (open.push(s), s),
    closeAll: async () => {
      for (const s of open.splice(0)) await s.close();
    },
  };
  try {
    await body(join(root, 'realm'), handles);
  } finally {
    for (const s of open) await s.close().catch(() => undefined);
    await rm(root, { recursive: true, force: true });
  }
}

test('checkpoint rounds on a worker thread move the stripes into the scope table and the homes while commits go on', { timeout: 120_000 }, async () => {
  await withRealm('seglog-host-ckpt-', async (dir, { track }) => {
    const options = { stripes: 2, stripeFileBytes: 64 * 1024, preallocBytes: 8 * 1024, checkpointBytes: 32 * 1024 };
    const store = track(await openFsHostStore(dir, options));
    const { token } = await store.acquireFence('exclusive');
    const n = 24;
    const scopes: ScopeRef[] = Array.from({ length: n }, (_, i) => ({ kind: i % 2 === 0 ? 'session' : 'record', name: `scope-${i}` }));
    const model = scopes.map((_, i) => ({ version: 0, head: '', first: 0, end: 0, scope: i }));
    for (let round = 0; round < 40; round++) {
      await Promise.all(
        scopes.map(async (scope, i) => {
          const m = model[i]!;
          // Now and then a truncation (rows rewritten at the same indices) or a drop.
          const truncate = round % 7 === 3 && m.end - m.first > 2 ? m.end - 1 : undefined;
          const drop = round % 11 === 5 ? m.first + 1 : undefined;
          const at = truncate ?? m.end;
          const append = [rowOf(i, at), rowOf(i, at + 1)];
          const head = `head-${i}-${round}-${round % 9 === 4 ? 'H'.repeat(5000) : ''}`;
          const update =
            m.version === 0
              ? { scope, previous: null, next: 1, head: te.encode(head), append }
              : { scope, previous: m.version, next: m.version + 1, head: te.encode(head), append, ...(truncate !== undefined ? { truncateAfter: truncate } : {}), ...(drop !== undefined ? { dropBefore: drop } : {}) };
          await store.commit(CommitBatch.tryNew(`c-${i}-${round}`, token, [update]));
          if (truncate !== undefined) m.end = truncate;
          if (drop !== undefined) m.first = Math.min(Math.max(m.first, drop), m.end);
          m.version++;
          m.head = head;
          // Rows appended after a truncation reuse the indices: rowOf names them by index.
          m.end += 2;
        }),
      );
    }
    // Rounds ran (on the worker): a scope table exists, the large scopes have homes, and early
    // stripe files are gone.
    let homes = 0;
    let tables = 0;
    for (let wait = 0; wait < 200 && (homes === 0 || tables === 0); wait++) {
      homes = (await readdir(join(dir, 'scopes')).catch(() => [])).length;
      tables = (await readdir(join(dir, 'tables')).catch(() => [])).length;
      if (homes === 0 || tables === 0) await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(tables > 0, 'a checkpoint round wrote a scope table');
    assert.ok(homes > 0, 'a checkpoint round gave the large scopes homes');
    const reader = track(await openFsHostStore(dir, { ...options, checkpointIn: 'thread' }));
    for (const [i, scope] of scopes.entries()) {
      await expectScope(store, scope, model[i]!);
      await expectScope(reader, scope, model[i]!);
    }
    await store.close(); // waits for the worker's round and closes the worker's files (and locks)
    assert.ok(await reader.checkpoint(), 'an explicit round runs when no other does');
    await reader.close();
    const stripe0 = await readdir(join(dir, 'stripes', '0'));
    assert.ok(!stripe0.includes('0000000000000000.wal'), `the first stripe file was removed (${stripe0.join(', ')})`);
    const again = track(await openFsHostStore(dir, { ...options, bootId: () => 'another-boot' }));
    for (const [i, scope] of scopes.entries()) await expectScope(again, scope, model[i]!);
    let listed = 0;
    for (const kind of ['session', 'record'] as const) listed += (await again.listHeads(kind, null, 1000)).heads.length;
    assert.equal(listed, n);
    await again.close();
  });
});

// A handle whose cursor fell behind a checkpoint round finds its stripe files gone: through a
// cached read handle it can still read the file it stopped in, but that file's SEAL leads to a
// successor the round removed. That is a removed file (the handle jumps to the checkpoint), not
// damage and not a writer that died rolling (a roll to complete would publish an end behind the
// real one).
test('a handle behind a checkpoint round that removed the successor of its file loads and commits on', { timeout: 60_000 }, async () => {
  const options = { stripes: 1, stripeFileBytes: 64 * 1024, preallocBytes: 8 * 1024, checkpointBytes: 1 << 30, checkpointIn: 'thread' as const, lockLingerMs: 0 };
  await withRealm('seglog-host-ckpt-behind-', async (dir, { track, closeAll }) => {
    const a = track(await openFsHostStore(dir, options));
    const { token } = await a.acquireFence('exclusive');
    const scope: ScopeRef = { kind: 'session', name: 'busy' };
    const other: ScopeRef = { kind: 'record', name: 'quiet' };
    let version = 0;
    const commitA = async (): Promise<void> => {
      const update = { scope, previous: version === 0 ? null : version, next: version + 1, head: te.encode(`v${version + 1}`), append: [te.encode('x'.repeat(1000))] };
      await a.commit(CommitBatch.tryNew(`a-${version + 1}`, token, [update]));
      version++;
    };
    const b = track(await openFsHostStore(dir, options));
    let otherVersion = 0;
    for (const step of ['commit', 'load'] as const) {
      await commitA();
      // b reads the stripe's current file (and keeps a read handle of it).
      assert.equal((await b.loadHead(scope))?.version, version);
      const before = await readdir(join(dir, 'stripes', '0'));
      // a rolls past two files, and a round covers them and removes them.
      for (let k = 0; k < 140; k++) await commitA();
      assert.ok(await a.checkpoint(), 'a round ran');
      const after = await readdir(join(dir, 'stripes', '0'));
      const gone = before.filter((n) => n.endsWith('.wal') && !after.includes(n));
      assert.ok(gone.length >= 1, `the round removed the file b stopped in and its successor (before ${before.join(' ')}, after ${after.join(' ')})`);
      if (step === 'load') {
        const head = await b.loadHead(scope);
        assert.equal(head?.version, version, 'the load jumped to the checkpoint and read on');
      } else {
        // b's commit takes the stripe's lock and reads to the valid end from its stale cursor.
        await b.commit(CommitBatch.tryNew(`b-${otherVersion + 1}`, token, [{ scope: other, previous: otherVersion === 0 ? null : otherVersion, next: otherVersion + 1, head: te.encode('b'), append: [te.encode('row')] }]));
        otherVersion++;
        await commitA(); // and a writes on after it
        assert.equal((await b.loadHead(scope))?.version, version);
      }
    }
    await closeAll();
    const again = track(await openFsHostStore(dir, options));
    assert.equal((await again.loadHead(scope))?.version, version);
    assert.equal((await again.readRows(scope, 0, 1000)).length, version);
    assert.equal((await again.loadHead(other))?.version, otherVersion);
  });
});

// The stress that found the case above: on the real file system, a writer's checkpoint rounds run
// on the worker thread while two other handles write scopes of their own (their cursors fall
// behind the rounds between their commits) and a loop opens fresh handles and loads. Every commit
// and every open answers, and a fresh handle at the end reads every scope at the version its
// writer reached, with all its rows.
test('two more writing handles and a loop of opens beside a writer whose rounds remove stripe files: every call answers, nothing is lost', { timeout: 120_000 }, async () => {
  const options = { stripes: 2, stripeFileBytes: 64 * 1024, preallocBytes: 8 * 1024, checkpointBytes: 32 * 1024 };
  await withRealm('seglog-host-ckpt-stress-', async (dir, { track, closeAll }) => {
    const a = track(await openFsHostStore(dir, options));
    const { token } = await a.acquireFence('exclusive');
    const b = track(await openFsHostStore(dir, options));
    const c = track(await openFsHostStore(dir, { ...options, checkpointIn: 'thread', checkpointBytes: 48 * 1024 }));
    const rounds = 150;
    const writer = async (store: FsHostStore, tag: string, n: number, paced: boolean): Promise<{ scopes: ScopeRef[]; versions: number[] }> => {
      const scopes: ScopeRef[] = Array.from({ length: n }, (_, i) => ({ kind: 'session', name: `${tag}-${i}` }));
      const versions = scopes.map(() => 0);
      for (let round = 0; round < rounds; round++) {
        // The paced writers let the busy one roll and checkpoint past their cursors.
        if (paced && round % 10 === 0) await new Promise((r) => setTimeout(r, 20));
        await Promise.all(
          scopes.map(async (scope, i) => {
            const v = versions[i]!;
            const row = te.encode(`${tag}-${i}-${round}-${'r'.repeat(100 + ((i * 37) % 300))}${i % 4 === 0 ? 'L'.repeat(700) : ''}`);
            await store.commit(CommitBatch.tryNew(`${tag}-${i}-${round}`, token, [{ scope, previous: v === 0 ? null : v, next: v + 1, head: te.encode(`h${round}`), append: [row] }]));
            versions[i] = v + 1;
          }),
        );
      }
      return { scopes, versions };
    };
    let writing = true;
    let opens = 0;
    const opener = (async () => {
      while (writing) {
        const r = await openFsHostStore(dir, { ...options, checkpointIn: 'thread' });
        try {
          for (let i = 0; i < 16; i++) await r.loadHead({ kind: 'session', name: `a-${i}` });
        } finally {
          await r.close();
        }
        opens++;
      }
    })();
    let written: { scopes: ScopeRef[]; versions: number[] }[];
    try {
      written = await Promise.all([writer(a, 'a', 16, false), writer(b, 'b', 2, true), writer(c, 'c', 3, true)]);
    } finally {
      writing = false;
      await opener;
    }
    assert.ok(opens > 0, 'the loop opened handles while the writers ran');
    const stripeFiles = (await readdir(join(dir, 'stripes', '0'))).filter((n) => n.endsWith('.wal'));
    assert.ok(!stripeFiles.includes('0000000000000000.wal'), 'rounds removed stripe files meanwhile');
    await closeAll();
    const again = track(await openFsHostStore(dir, options));
    for (const { scopes, versions } of written) {
      for (const [i, scope] of scopes.entries()) {
        assert.equal((await again.loadHead(scope))?.version, versions[i], `${scope.name} version`);
        assert.equal((await again.readRows(scope, 0, 100_000)).length, versions[i], `${scope.name} rows`);
      }
    }
  });
});

// Every file-system call of an open, a load and a close of a realm at rest may be made on the
// calling thread (lib/fs/real.ts): without the turn of the event loop an open waits, a loop of
// them would run to its end before any timer or I/O callback (the stress above hung so).
test('a loop of opens, loads and closes of a realm at rest lets timers run', { timeout: 60_000 }, async () => {
  await withRealm('seglog-host-open-turn-', async (dir) => {
    const options = { stripes: 2, checkpointIn: 'thread' as const };
    const store = await openFsHostStore(dir, options);
    const { token } = await store.acquireFence('exclusive');
    const scope: ScopeRef = { kind: 'session', name: 'x' };
    await store.commit(CommitBatch.tryNew('c1', token, [{ scope, previous: null, next: 1, head: te.encode('h'), append: [te.encode('r')] }]));
    await store.close();
    let fired = 0;
    const timer = setInterval(() => fired++, 1);
    let loops = 0;
    try {
      for (; loops < 500 && fired < 3; loops++) {
        const s = await openFsHostStore(dir, options);
        assert.equal((await s.loadHead(scope))?.version, 1);
        await s.close();
      }
    } finally {
      clearInterval(timer);
    }
    assert.ok(fired >= 3, `a timer ran during the loop (${fired} times in ${loops} opens)`);
  });
});
