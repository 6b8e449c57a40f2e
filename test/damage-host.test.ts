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
  ['stripes/0/published', false],
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
