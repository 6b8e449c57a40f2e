// The fs host store's realm and its defining files: a realm that lost one refuses to open, and the
// answer is the host stores' answer to damage — UNAVAILABLE (one of the six codes of the contract;
// nothing applied) whose cause is the CORRUPT SeglogError naming the missing file. Never a realm
// made again over what is left: with FORMAT deleted, the old code cut the first stripe files and
// rewrote the checkpoint, and acknowledged scopes vanished. A creation that stopped before its
// FORMAT (the commit point) is still a new realm.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';

import { isSeglogError } from '../lib/errors.js';
import { CommitBatch, HostStoreError, openFsHostStore } from '../lib/host/index.js';

async function withRealm(checkpoint: boolean, body: (dir: string) => Promise<void>): Promise<void> {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-damage-host-'));
  try {
    const dir = path.join(root, 'realm');
    const store = await openFsHostStore(dir);
    const { token } = await store.acquireFence('exclusive');
    for (let i = 0; i < 6; i++) {
      await store.commit(CommitBatch.tryNew(`c${i}`, token, [{ scope: { kind: 'record', name: `s${i}` }, previous: null, next: 1, head: new Uint8Array([i]) }]));
    }
    if (checkpoint) assert.equal(await store.checkpoint(), true);
    await store.close();
    await body(dir);
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
}

function damageNaming(file: string): (err: unknown) => boolean {
  return (err) => {
    assert.ok(err instanceof HostStoreError, `a HostStoreError, got ${String(err)}`);
    assert.equal(err.code, 'UNAVAILABLE', err.message);
    assert.ok(isSeglogError(err.cause, 'CORRUPT'), `cause CORRUPT, got ${String(err.cause)}`);
    assert.equal(err.cause.details['file'] ?? err.cause.details['path'], file, err.cause.message);
    assert.deepEqual((err.details['corrupt'] as Record<string, unknown> | undefined)?.['file'] ?? (err.details['corrupt'] as Record<string, unknown> | undefined)?.['path'], file);
    return true;
  };
}

for (const checkpoint of [false, true]) {
  test(`fs realm: a deleted FORMAT (${checkpoint ? 'after a checkpoint' : 'records in the stripes only'}) is damage, not a new realm`, async () => {
    await withRealm(checkpoint, async (dir) => {
      await fsp.rm(path.join(dir, 'FORMAT'));
      const before = await fsp.readdir(path.join(dir, 'stripes', '0'));
      const sizes = await Promise.all(before.map(async (n) => (await fsp.stat(path.join(dir, 'stripes', '0', n))).size));
      await assert.rejects(openFsHostStore(dir), damageNaming(path.join(dir, 'FORMAT')));
      // Nothing was made again: the stripe files are as they were.
      assert.deepEqual(await Promise.all(before.map(async (n) => (await fsp.stat(path.join(dir, 'stripes', '0', n))).size)), sizes);
    });
  });
}

test('fs realm: a creation that stopped before FORMAT is still a new realm', async () => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-damage-host-'));
  try {
    const dir = path.join(root, 'realm');
    await (await openFsHostStore(dir)).close();
    // Everything a creation writes before its FORMAT, and no more: what a crash just before it leaves.
    await fsp.rm(path.join(dir, 'FORMAT'));
    const store = await openFsHostStore(dir);
    const { token } = await store.acquireFence('exclusive');
    await store.commit(CommitBatch.tryNew('c', token, [{ scope: { kind: 'record', name: 'x' }, previous: null, next: 1, head: new Uint8Array([7]) }]));
    assert.equal((await store.loadHead({ kind: 'record', name: 'x' }))?.version, 1);
    await store.close();
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});

for (const [victim, checkpoint] of [
  ['checkpoint', false],
  ['fence/state', false],
  ['fence/lock', false],
  ['scopes', true],
  ['tables', true],
  ['tables/0000000000000001.tbl', true],
  ['stripes/0/published', false],
  ['stripes/1/lock', false],
  ['stripes/2/gate', false],
  ['stripes/0/0000000000000000.wal', false],
] as const) {
  test(`fs realm: a deleted ${victim} is damage naming it`, async () => {
    await withRealm(checkpoint, async (dir) => {
      const gone = path.join(dir, victim);
      await fsp.rm(gone, { recursive: true });
      await assert.rejects(openFsHostStore(dir), damageNaming(gone));
    });
  });
}

test('fs realm: a damaged FORMAT is damage naming FORMAT', async () => {
  await withRealm(false, async (dir) => {
    const file = path.join(dir, 'FORMAT');
    const bytes = await fsp.readFile(file);
    // Every non-zero byte flipped: no slot of the cell is whole.
    for (let at = 0; at < bytes.length; at++) if (bytes[at] !== 0) bytes[at] = (bytes[at] as number) ^ 0x10;
    await fsp.writeFile(file, bytes);
    await assert.rejects(openFsHostStore(dir), damageNaming(file));
  });
});

/** Every file under `dir`, relative to it. */
async function filesUnder(dir: string, at = ''): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fsp.readdir(path.join(dir, at), { withFileTypes: true })) {
    const rel = path.join(at, e.name);
    if (e.isDirectory()) out.push(...(await filesUnder(dir, rel)));
    else out.push(rel);
  }
  return out.sort();
}

test('fs realm: damage anywhere answers UNAVAILABLE with a CORRUPT cause naming a file of the realm, or is not served', async (t) => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-damage-host-'));
  try {
    const base = path.join(root, 'base');
    const store = await openFsHostStore(base);
    const { token } = await store.acquireFence('exclusive');
    const scopes = Array.from({ length: 5 }, (_, i) => ({ kind: 'record' as const, name: `s${i}` }));
    for (const [i, scope] of scopes.entries()) {
      await store.commit(
        // The last scope's rows outgrow the scope table: it has a home (a cell and a row file).
        CommitBatch.tryNew(`a${i}`, token, [{ scope, previous: null, next: 1, head: new Uint8Array(40).fill(i + 1), append: [new Uint8Array(i === 4 ? 17 * 1024 : 30).fill(i)] }]),
      );
    }
    await store.checkpoint();
    for (const [i, scope] of scopes.entries()) {
      await store.commit(CommitBatch.tryNew(`b${i}`, token, [{ scope, previous: 1, next: 2, head: new Uint8Array(40).fill(i + 9), append: [new Uint8Array(30).fill(i + 9)] }]));
    }
    const expected = await Promise.all(scopes.map((s) => store.loadHead(s)));
    await store.close();
    let cases = 0;
    let refused = 0;
    for (const rel of await filesUnder(base)) {
      const size = (await fsp.stat(path.join(base, rel))).size;
      if (size === 0 || rel.endsWith('lock') || rel.endsWith('gate')) continue;
      for (const at of [...new Set([0, 8, Math.floor(size / 2), size - 1].filter((x) => x >= 0 && x < size))]) {
        cases++;
        const dir = path.join(root, `case-${cases}`);
        await fsp.cp(base, dir, { recursive: true });
        const file = path.join(dir, rel);
        const bytes = await fsp.readFile(file);
        bytes[at] = (bytes[at] as number) ^ 0x5a;
        await fsp.writeFile(file, bytes);
        try {
          const s = await openFsHostStore(dir);
          try {
            for (const [i, scope] of scopes.entries()) {
              const head = await s.loadHead(scope);
              // Served: exactly the acknowledged head (damage in bytes nothing reads, or a torn part).
              assert.deepEqual(head, expected[i], `${rel}@${at}: ${scope.name} served another head`);
              await s.readRows(scope, 0, 10);
            }
            await s.listHeads('record', null, 10);
          } finally {
            await s.close();
          }
        } catch (err) {
          if (err instanceof assert.AssertionError) throw err;
          refused++;
          assert.ok(err instanceof HostStoreError, `${rel}@${at}: a HostStoreError, got ${String(err)}`);
          assert.equal(err.code, 'UNAVAILABLE', `${rel}@${at}: ${err.message}`);
          assert.ok(isSeglogError(err.cause, 'CORRUPT'), `${rel}@${at}: cause CORRUPT, got ${String(err.cause)}`);
          const named = (err.details['corrupt'] as Record<string, unknown>)['file'];
          assert.ok(typeof named === 'string' && named.startsWith(dir), `${rel}@${at}: names a file of the realm: ${String(named)} (${err.message})`);
        }
        await fsp.rm(dir, { recursive: true, force: true });
      }
    }
    t.diagnostic(`${cases} damaged states: ${refused} refused as damage, the rest served exactly the acknowledged heads`);
    assert.ok(refused > cases / 3, `${refused} of ${cases} damaged states refused`);
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});

test("fs realm: a row file or head blob its scope's home names, deleted, is damage naming it (not an I/O error)", async () => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-damage-host-'));
  try {
    const dir = path.join(root, 'realm');
    const scope = { kind: 'record' as const, name: 'big' };
    const store = await openFsHostStore(dir);
    const { token } = await store.acquireFence('exclusive');
        // Rows past what the scope table keeps inline: the scope has a home of its own.
    await store.commit(CommitBatch.tryNew('c1', token, [{ scope, previous: null, next: 1, head: new Uint8Array(3000).fill(7), append: [new Uint8Array([1]), new Uint8Array(17 * 1024).fill(2)] }]));
    assert.equal(await store.checkpoint(), true);
    await store.close();
    const homes: string[] = [];
    for (const fan of await fsp.readdir(path.join(dir, 'scopes'))) {
      for (const home of await fsp.readdir(path.join(dir, 'scopes', fan))) homes.push(path.join(dir, 'scopes', fan, home));
    }
    assert.equal(homes.length, 1, 'one scope home');
    const home = homes[0] as string;
    const files = await fsp.readdir(home);
    const rowFile = files.find((n) => n.startsWith('r-'));
    assert.ok(rowFile !== undefined, `a row file in ${files.join(', ')}`);
    const saved = await fsp.readFile(path.join(home, rowFile));
    await fsp.rm(path.join(home, rowFile));
    const again = await openFsHostStore(dir);
    try {
      await assert.rejects(again.readRows(scope, 0, 10), damageNaming(path.join(home, rowFile)));
    } finally {
      await again.close();
    }
    await fsp.writeFile(path.join(home, rowFile), saved);
    const headBlob = files.find((n) => n.startsWith('h-'));
    assert.ok(headBlob !== undefined, `a 3,000-byte head lives in a blob of its own: ${files.join(', ')}`);
    await fsp.rm(path.join(home, headBlob));
    const third = await openFsHostStore(dir);
    try {
      await assert.rejects(third.loadHead(scope), damageNaming(path.join(home, headBlob)));
    } finally {
      await third.close();
    }
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});

test('isDamagedAnswer tells the host stores’ answer to damage from other UNAVAILABLE answers', async () => {
  const { isDamagedAnswer } = await import('../lib/index.js');
  const { corrupt } = await import('../lib/errors.js');
  assert.equal(isDamagedAnswer(HostStoreError.damaged(corrupt('a flipped byte', { file: '/x' }))), true);
  assert.equal(isDamagedAnswer(HostStoreError.unavailable('the store handle is closed')), false);
  assert.equal(isDamagedAnswer(corrupt('not a host answer')), false);
});
