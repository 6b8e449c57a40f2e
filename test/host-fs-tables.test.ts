// The fs host store's scope table: small scopes cost bytes in one table, not files; a scope that
// outgrows the table gets a home and gives it up when deleted; a bulk load reads the table in name
// order; damage to the table or to a home it names is CORRUPT, never an older or an absent scope;
// a realm of format version 1 is refused with its version named.

import assert from 'node:assert/strict';
import { mkdtemp, readdir, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { openCell, peekCell } from '../cells/index.js';
import { CommitBatch, isDamagedAnswer, openFsHostStore, type FsHostStore, type ScopeKind, type ScopeRef } from '../lib/host/index.js';
import { INLINE_SCOPE_BYTES } from '../lib/host/fs/format.js';
import { realFs } from '../lib/fs/real.js';
import { decodeBlock, encodeEntry } from '../lib/host/fs/format-table.js';
import { SeglogError } from '../lib/errors.js';

const te = new TextEncoder();

async function withRealm(fn: (dir: string) => Promise<void>): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'seglog-host-tables-'));
  try {
    await fn(join(root, 'realm'));
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

const options = { stripes: 2, checkpointIn: 'thread' as const };

async function listAll(store: FsHostStore, kind: ScopeKind = 'session', page = 97): Promise<{ name: string; version: number; head: string }[]> {
  const out: { name: string; version: number; head: string }[] = [];
  let after: string | null = null;
  for (;;) {
    const p = await store.listHeads(kind, after, page);
    for (const h of p.heads) out.push({ name: h.name, version: h.head.version, head: Buffer.from(h.head.head).toString() });
    if (p.next === null) return out;
    after = p.next;
  }
}

async function homeLeaves(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const f of await readdir(join(dir, 'scopes')).catch(() => [] as string[])) for (const l of await readdir(join(dir, 'scopes', f))) out.push(join(dir, 'scopes', f, l));
  return out;
}

async function tableFiles(dir: string): Promise<string[]> {
  return (await readdir(join(dir, 'tables'))).filter((n) => n.endsWith('.tbl')).map((n) => join(dir, 'tables', n));
}

test('small scopes live in one scope table: no directory per scope, listings in name order across the table and newer records', async () => {
  await withRealm(async (dir) => {
    const store = await openFsHostStore(dir, options);
    const { token } = await store.acquireFence('exclusive');
    const n = 1500;
    const names = Array.from({ length: n }, (_, i) => `s-${String((i * 7919) % n).padStart(5, '0')}`);
    for (let i = 0; i < n; i += 50) {
      const updates = names.slice(i, i + 50).map((name) => ({ scope: { kind: 'session' as const, name }, previous: null, next: 1, head: te.encode(`h1-${name}`), append: [te.encode(`row-${name}`)] }));
      await store.commit(CommitBatch.tryNew(`c-${i}`, token, updates));
    }
    assert.ok(await store.checkpoint());
    assert.deepEqual(await homeLeaves(dir), [], 'no scope has a home');
    assert.equal((await tableFiles(dir)).length, 1, 'one table');
    // Newer records past the checkpoint: a third of the scopes move on, new ones come, one is deleted.
    for (let i = 0; i < n; i += 3) {
      const name = names[i]!;
      await store.commit(CommitBatch.tryNew(`u-${i}`, token, [{ scope: { kind: 'session', name }, previous: 1, next: 2, head: te.encode(`h2-${name}`) }]));
    }
    await store.commit(CommitBatch.tryNew('new', token, [{ scope: { kind: 'session', name: 's-zzz' }, previous: null, next: 1, head: te.encode('h1-s-zzz') }]));
    await store.commit(CommitBatch.tryNew('del', token, [{ scope: { kind: 'session', name: names[1]! }, previous: 1, next: 2, delete: true }]));
    const expected = names
      .map((name, i) => ({ name, version: i % 3 === 0 ? 2 : 1, head: i % 3 === 0 ? `h2-${name}` : `h1-${name}` }))
      .filter((x) => x.name !== names[1])
      .concat([{ name: 's-zzz', version: 1, head: 'h1-s-zzz' }])
      .sort((a, b) => (a.name < b.name ? -1 : 1));
    assert.deepEqual(await listAll(store), expected, 'table entries merged with the records past the checkpoint');
    const reader = await openFsHostStore(dir, options);
    assert.deepEqual(await listAll(reader, 'session', 1000), expected, 'another handle lists the same');
    assert.deepEqual(await listAll(reader, 'mob'), []);
    assert.ok(await store.checkpoint());
    assert.deepEqual(await listAll(reader), expected, 'the reader moves to the next table');
    assert.deepEqual(await listAll(store, 'session', 1), expected, 'pages of one');
    const rows = await reader.readRows({ kind: 'session', name: names[2]! }, 0, 10);
    assert.deepEqual(rows.map((r) => Buffer.from(r.data).toString()), [`row-${names[2]}`]);
    await assert.rejects(store.commit(CommitBatch.tryNew('again', token, [{ scope: { kind: 'session', name: names[1]! }, previous: null, next: 1, head: te.encode('again') }])), { code: 'INVALID' }, 'a deleted name stays deleted');
    await reader.close();
    await store.close();
    assert.equal((await tableFiles(dir)).length, 1, 'the older table was removed');
    assert.deepEqual(await homeLeaves(dir), []);
    const again = await openFsHostStore(dir, { ...options, bootId: () => 'another-boot' });
    assert.deepEqual(await listAll(again), expected, 'after a reopen');
    await again.close();
  });
});

test('a scope that outgrows the table gets a home; deleted, it leaves only its tombstone in the table', async () => {
  await withRealm(async (dir) => {
    const store = await openFsHostStore(dir, options);
    const { token } = await store.acquireFence('exclusive');
    const chunk = (i: number, k: number): Uint8Array => te.encode(`chunk-${i}-${k}-`.padEnd(3000, 'c'));
    const scopes: ScopeRef[] = Array.from({ length: 20 }, (_, i) => ({ kind: 'record', name: `chunk-${i}` }));
    for (const [i, scope] of scopes.entries()) {
      await store.commit(CommitBatch.tryNew(`a-${i}`, token, [{ scope, previous: null, next: 1, head: te.encode('x'), append: [0, 1, 2].map((k) => chunk(i, k)) }]));
    }
    assert.ok(await store.checkpoint());
    assert.deepEqual(await homeLeaves(dir), [], 'three chunks fit the table');
    for (const [i, scope] of scopes.entries()) {
      const more = Array.from({ length: Math.ceil(INLINE_SCOPE_BYTES / 3000) }, (_, k) => chunk(i, 3 + k));
      await store.commit(CommitBatch.tryNew(`b-${i}`, token, [{ scope, previous: 1, next: 2, append: more }]));
    }
    assert.ok(await store.checkpoint());
    assert.equal((await homeLeaves(dir)).length, scopes.length, 'each outgrown scope has a home');
    const total = 3 + Math.ceil(INLINE_SCOPE_BYTES / 3000);
    const rows = await store.readRows(scopes[7]!, 0, 100);
    assert.equal(rows.length, total);
    rows.forEach((r, k) => assert.deepEqual(Buffer.from(r.data), Buffer.from(chunk(7, k))));
    // Deleted: the homes go, tombstones stay in the table (a deleted name is not created again).
    for (const [i, scope] of scopes.entries()) await store.commit(CommitBatch.tryNew(`d-${i}`, token, [{ scope, previous: 2, next: 3, delete: true }]));
    assert.ok(await store.checkpoint());
    assert.deepEqual(await homeLeaves(dir), [], 'deleted chunk scopes leave no directory');
    assert.equal(await store.loadHead(scopes[3]!), null);
    await assert.rejects(store.commit(CommitBatch.tryNew('re', token, [{ scope: scopes[3]!, previous: null, next: 1, head: te.encode('re') }])), { code: 'INVALID' });
    assert.deepEqual(await listAll(store, 'record'), []);
    await store.close();
    const again = await openFsHostStore(dir, options);
    assert.equal(await again.loadHead(scopes[3]!), null);
    await assert.rejects(again.commit(CommitBatch.tryNew('re2', (await again.acquireFence('takeover')).token, [{ scope: scopes[3]!, previous: null, next: 1, head: te.encode('re') }])), { code: 'INVALID' });
    await again.close();
  });
});

/** A realm of one small scope and one homed scope, checkpointed and closed. */
async function twoScopeRealm(dir: string): Promise<{ small: ScopeRef; large: ScopeRef }> {
  const small: ScopeRef = { kind: 'session', name: 'small' };
  const large: ScopeRef = { kind: 'mob', name: 'large' };
  const store = await openFsHostStore(dir, options);
  const { token } = await store.acquireFence('exclusive');
  await store.commit(
    CommitBatch.tryNew('c1', token, [
      { scope: small, previous: null, next: 1, head: te.encode('small-head'), append: [te.encode('r0')] },
      { scope: large, previous: null, next: 1, head: te.encode('large-head'), append: [new Uint8Array(INLINE_SCOPE_BYTES + 10).fill(7)] },
    ]),
  );
  assert.ok(await store.checkpoint());
  await store.close();
  assert.equal((await homeLeaves(dir)).length, 1);
  return { small, large };
}

test('the home a table names, deleted: loads, listings and the open answer CORRUPT, never an absent scope', async () => {
  await withRealm(async (dir) => {
    const { small, large } = await twoScopeRealm(dir);
    const [home] = await homeLeaves(dir);
    await unlink(join(home!, 'state'));
    const store = await openFsHostStore(dir, options);
    const err = await store.loadHead(large).then(() => null, (e: unknown) => e);
    assert.ok(isDamagedAnswer(err), `a damaged answer, got ${String(err)}`);
    const listed = await store.listHeads('mob', null, 10).then(() => null, (e: unknown) => e);
    assert.ok(isDamagedAnswer(listed), 'the listing too');
    assert.equal((await store.loadHead(small))?.version, 1, 'the small scope is served');
    await store.close();
  });
});

test('a damaged or missing scope table is CORRUPT: a flipped byte anywhere in it, a cut, a deletion', async () => {
  await withRealm(async (dir) => {
    const { small } = await twoScopeRealm(dir);
    const [file] = await tableFiles(dir);
    const good = await readFile(file!);
    // Every 7th byte flipped in turn (header, entries, index, footer), and the file cut short.
    const variants: [string, Buffer | null][] = [];
    for (let at = 0; at < good.length; at += 7) {
      const b = Buffer.from(good);
      b[at] = b[at]! ^ 0x10;
      variants.push([`byte ${at} flipped`, b]);
    }
    variants.push(['cut short', good.subarray(0, good.length - 1)], ['deleted', null]);
    for (const [what, bytes] of variants) {
      if (bytes === null) await unlink(file!);
      else await writeFile(file!, bytes);
      const outcome = await (async () => {
        const store = await openFsHostStore(dir, options);
        try {
          await store.loadHead(small);
          await store.listHeads('session', null, 10);
          await store.listHeads('mob', null, 10);
          return null;
        } finally {
          await store.close();
        }
      })().then(
        () => null,
        (e: unknown) => e,
      );
      assert.ok(isDamagedAnswer(outcome), `${what}: a damaged answer, got ${String(outcome)}`);
      await writeFile(file!, good);
    }
  });
});

test('a realm of format version 1 is refused with its version named, and nothing in it changes', async () => {
  await withRealm(async (dir) => {
    await twoScopeRealm(dir);
    const formatFile = join(dir, 'FORMAT');
    const value = (await peekCell(realFs, formatFile))!;
    const old = Uint8Array.from(value);
    old[4] = 1;
    old[5] = 0;
    const cell = await openCell(formatFile);
    await cell.write(old);
    await cell.close();
    const before = (await stat(formatFile)).mtimeMs;
    const err = await openFsHostStore(dir, options).then(() => null, (e: unknown) => e as { code?: string; message?: string; details?: { version?: number } });
    assert.equal(err?.code, 'INVALID');
    assert.match(err?.message ?? '', /format version 1/);
    assert.equal(err?.details?.version, 1);
    assert.equal((await stat(formatFile)).mtimeMs, before);
    old[4] = 9;
    const cell2 = await openCell(formatFile);
    await cell2.write(old);
    await cell2.close();
    const newer = await openFsHostStore(dir, options).then(() => null, (e: unknown) => e as { code?: string });
    assert.equal(newer?.code, 'VERSION_TOO_NEW');
  });
});

test('what a listing and a load answer from the table are plain Uint8Arrays of their own, exact across many blocks', async () => {
  await withRealm(async (dir) => {
    const store = await openFsHostStore(dir, options);
    const { token } = await store.acquireFence('exclusive');
    const n = 3000;
    const headOf = (i: number): Uint8Array => Uint8Array.from({ length: 100 }, (_, k) => (i * 31 + k) & 0xff);
    const rowOf = (i: number): Uint8Array => Uint8Array.from({ length: 200 }, (_, k) => (i * 7 + k * 3) & 0xff);
    const name = (i: number): string => `scope-${String(i).padStart(5, '0')}`;
    for (let at = 0; at < n; at += 500) {
      const updates = [];
      for (let i = at; i < at + 500; i++) updates.push({ scope: { kind: 'session' as const, name: name(i) }, previous: null, next: 1, head: headOf(i), append: [rowOf(i)] });
      await store.commit(CommitBatch.tryNew(`b-${at}`, token, updates));
    }
    assert.ok(await store.checkpoint());
    await store.close();
    const again = await openFsHostStore(dir, options);
    let i = 0;
    for (let after: string | null = null; ; ) {
      // Pages of 1,000 span many 16 KiB blocks and several reads of a scan.
      const p = await again.listHeads('session', after, 1000);
      for (const h of p.heads) {
        assert.equal(h.name, name(i));
        assert.equal(Object.getPrototypeOf(h.head.head), Uint8Array.prototype, 'a plain Uint8Array');
        assert.equal(h.head.head.byteLength, h.head.head.buffer.byteLength, 'a buffer of its own');
        assert.deepEqual(h.head.head, headOf(i), `head of ${name(i)}`);
        i++;
      }
      if (p.next === null) break;
      after = p.next;
    }
    assert.equal(i, n);
    for (const k of [0, 1234, n - 1]) {
      const head = (await again.loadHead({ kind: 'session', name: name(k) }))!.head;
      assert.equal(Object.getPrototypeOf(head), Uint8Array.prototype);
      assert.deepEqual(head, headOf(k));
      const [row] = await again.readRows({ kind: 'session', name: name(k) }, 0, 10);
      assert.equal(Object.getPrototypeOf(row!.data), Uint8Array.prototype);
      assert.deepEqual(row!.data, rowOf(k));
    }
    await again.close();
  });
});

test('a table lists names in the order of their UTF-8 bytes, where UTF-16 order differs, and ASCII and other names mixed', async () => {
  await withRealm(async (dir) => {
    const store = await openFsHostStore(dir, options);
    const { token } = await store.acquireFence('exclusive');
    // U+FF5E sorts before U+1F600 by UTF-8 bytes (EF… < F0…) and after it by UTF-16 code units
    // (0xFF5E > 0xD83D); every ASCII name sorts before both, 'é' (C3 A9) between.
    const names = ['\u{1F600}', 'z', '\uFF5E', 'é', 'b~', 'a', 'ab', 'a\u{1F600}', 'a\uFF5E', 'aé'];
    const updates = names.map((name) => ({ scope: { kind: 'session' as const, name }, previous: null, next: 1, head: te.encode(`h:${name}`), append: [] }));
    await store.commit(CommitBatch.tryNew('mixed', token, updates));
    assert.ok(await store.checkpoint());
    await store.close();
    const byBytes = [...names].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    assert.deepEqual(byBytes, ['a', 'ab', 'aé', 'a\uFF5E', 'a\u{1F600}', 'b~', 'z', 'é', '\uFF5E', '\u{1F600}']);
    const again = await openFsHostStore(dir, options);
    try {
      for (const page of [1, 3, 1000]) {
        const listed = await listAll(again, 'session', page);
        assert.deepEqual(listed.map((h) => h.name), byBytes, `pages of ${page}`);
        assert.deepEqual(listed.map((h) => h.head), byBytes.map((n) => `h:${n}`));
      }
      for (const name of names) assert.equal(Buffer.from((await again.loadHead({ kind: 'session', name }))!.head).toString(), `h:${name}`);
    } finally {
      await again.close();
    }
  });
});

test('a block whose entries are out of name order, or repeat a name, is CORRUPT (ASCII and other names alike)', () => {
  const entry = (name: string, kind: ScopeKind = 'session'): Uint8Array =>
    encodeEntry({ kind, nameBytes: te.encode(name), deleted: false, homed: false, version: 1, commitId: 'c', first: 0, end: 0, head: te.encode('h'), rows: [] });
  const block = (...names: (string | [string, ScopeKind])[]): Uint8Array => Buffer.concat(names.map((n) => (typeof n === 'string' ? entry(n) : entry(n[0], n[1]))));
  const decoded = (b: Uint8Array): string[] => decodeBlock(b, 'test.tbl', 0).map((e) => `${e.kind}:${e.name}`);
  assert.deepEqual(decoded(block('a', 'ab', 'b', 'é', '\uFF5E', '\u{1F600}')), ['session:a', 'session:ab', 'session:b', 'session:é', 'session:\uFF5E', 'session:\u{1F600}']);
  assert.deepEqual(decoded(block('z', ['a', 'identity'])), ['session:z', 'identity:a'], 'a later kind starts over');
  for (const bad of [block('b', 'a'), block('a', 'a'), block('ab', 'a'), block('é', 'z'), block('\u{1F600}', '\uFF5E'), block('é', 'é'), block(['a', 'identity'], 'z')]) {
    assert.throws(() => decodeBlock(bad, 'test.tbl', 0), (err: unknown) => err instanceof SeglogError && err.code === 'CORRUPT' && /out of name order/.test(err.message));
  }
});
