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

test('checkpoint rounds on a worker thread move the stripes into the scope table and the homes while commits go on', { timeout: 120_000 }, async () => {
  const root = await mkdtemp(join(tmpdir(), 'seglog-host-ckpt-'));
  const dir = join(root, 'realm');
  try {
    const options = { stripes: 2, stripeFileBytes: 64 * 1024, preallocBytes: 8 * 1024, checkpointBytes: 32 * 1024 };
    const store = await openFsHostStore(dir, options);
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
    const reader = await openFsHostStore(dir, { ...options, checkpointIn: 'thread' });
    for (const [i, scope] of scopes.entries()) {
      await expectScope(store, scope, model[i]!);
      await expectScope(reader, scope, model[i]!);
    }
    await store.close(); // waits for the worker's round and closes the worker's files (and locks)
    assert.ok(await reader.checkpoint(), 'an explicit round runs when no other does');
    await reader.close();
    const stripe0 = await readdir(join(dir, 'stripes', '0'));
    assert.ok(!stripe0.includes('0000000000000000.wal'), `the first stripe file was removed (${stripe0.join(', ')})`);
    const again = await openFsHostStore(dir, { ...options, bootId: () => 'another-boot' });
    for (const [i, scope] of scopes.entries()) await expectScope(again, scope, model[i]!);
    let listed = 0;
    for (const kind of ['session', 'record'] as const) listed += (await again.listHeads(kind, null, 1000)).heads.length;
    assert.equal(listed, n);
    await again.close();
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
