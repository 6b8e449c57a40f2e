// `seglog verify` reports as an error (never clean, never a mere warning) a directory from which a
// file was deleted whose loss makes the store serve a different state: a Raft group's state cell (or,
// in the earlier layout, its purged-id, committed or vote cell), its log or journal manifest, the only snapshot after a purge, a log's
// MANIFEST beside a segment a manifest named. Each case checks that the directory was clean
// before the deletion, and that the error names the missing file.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';

import { verifyDataDirectory, verifyExitCode, type VerifyReport } from '../lib/tools/verify.js';
import { groupDirectory, openRaftNode } from '../lib/raft/node.js';
import { openSegmentedLog } from '../segments/index.js';
import { OPTS, buildNode } from './support/damage-node.js';
import { toThreeCellLayout } from './support/three-cell-group.js';
import { openFsHostStore } from '../lib/host/index.js';
import { openPayloadStore } from '../lib/payloads/index.js';



function errors(report: VerifyReport): string[] {
  return report.findings.filter((f) => f.severity === 'error').map((f) => `${f.path}: ${f.message}`);
}

async function withNode(body: (dir: string) => Promise<void>): Promise<void> {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-damage-verify-'));
  try {
    const dir = path.join(root, 'node');
    await buildNode(dir);
    assert.deepEqual(errors(await verifyDataDirectory(dir)), [], 'clean before the deletion');
    await body(dir);
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
}

function assertErrorAt(report: VerifyReport, p: string): void {
  const found = errors(report);
  assert.ok(
    report.findings.some((f) => f.severity === 'error' && f.path === p),
    `an error naming ${p}; errors: ${JSON.stringify(found)}; all: ${JSON.stringify(report.findings)}`,
  );
  assert.notEqual(verifyExitCode(report), 0);
}

for (const victim of ['state.cell', 'log/MANIFEST', 'sm/journal/MANIFEST']) {
  test(`verify: a Raft group whose ${victim} was deleted is an error`, async () => {
    await withNode(async (dir) => {
      const gone = path.join(groupDirectory(dir, 'g'), victim);
      await fsp.rm(gone);
      assertErrorAt(await verifyDataDirectory(dir), gone);
    });
  });
}

for (const victim of ['purged.cell', 'committed.cell', 'vote.cell']) {
  test(`verify: a Raft group of the earlier layout (three cells) whose ${victim} was deleted is an error`, async () => {
    await withNode(async (dir) => {
      await toThreeCellLayout(groupDirectory(dir, 'g'));
      assert.deepEqual(errors(await verifyDataDirectory(dir)), [], 'the earlier layout verifies clean');
      const gone = path.join(groupDirectory(dir, 'g'), victim);
      await fsp.rm(gone);
      assertErrorAt(await verifyDataDirectory(dir), gone);
    });
  });
}

test('verify: a Raft group whose only snapshot was deleted after a purge is an error', async () => {
  await withNode(async (dir) => {
    const snapDir = path.join(groupDirectory(dir, 'g'), 'sm', 'snapshots');
    const [snap] = await fsp.readdir(snapDir);
    await fsp.rm(path.join(snapDir, snap as string));
    assertErrorAt(await verifyDataDirectory(dir), snapDir);
  });
});

test('verify: a Raft group whose log directory was deleted is still recognised, and an error', async () => {
  await withNode(async (dir) => {
    const gone = path.join(groupDirectory(dir, 'g'), 'log');
    await fsp.rm(gone, { recursive: true });
    assertErrorAt(await verifyDataDirectory(dir), path.join(gone, 'MANIFEST'));
  });
});

test('verify: a log whose MANIFEST was deleted after a reset is an error, not a leftover warning', async () => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-damage-verify-'));
  try {
    const dir = path.join(root, 'log');
    const log = await openSegmentedLog(dir, { segmentBytes: 1024 });
    await log.append([new Uint8Array(10)]);
    await log.reset(1000);
    await log.close();
    assert.deepEqual(errors(await verifyDataDirectory(dir)), []);
    await fsp.rm(path.join(dir, 'MANIFEST'));
    const [seg] = (await fsp.readdir(dir)).filter((n) => n.endsWith('.seg'));
    assertErrorAt(await verifyDataDirectory(dir), path.join(dir, seg as string));
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});

test('verify: a host realm whose FORMAT was deleted is an error (a creation leftover only warns)', async () => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-damage-verify-'));
  try {
    const fresh = path.join(root, 'fresh');
    await (await openFsHostStore(fresh)).close();
    await fsp.rm(path.join(fresh, 'FORMAT'));
    assert.deepEqual(errors(await verifyDataDirectory(fresh)), [], 'what a creation writes before FORMAT is a leftover');
    const used = path.join(root, 'used');
    const store = await openFsHostStore(used);
    await store.acquireFence('exclusive');
    await store.checkpoint();
    await store.close();
    assert.deepEqual(errors(await verifyDataDirectory(used)), []);
    await fsp.rm(path.join(used, 'FORMAT'));
    const report = await verifyDataDirectory(used);
    assertErrorAt(report, path.join(used, 'fence', 'state'));
    assertErrorAt(report, path.join(used, 'checkpoint'));
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});

test('verify: a payload store whose refcount file was deleted is an error', async () => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-damage-verify-'));
  try {
    const dir = path.join(root, 'payloads');
    const store = await openPayloadStore(dir);
    const info = await store.put(
      (async function* () {
        yield new TextEncoder().encode('a payload with a holder');
      })(),
    );
    await store.addRef(info.digest, 'queue-a');
    await store.close();
    assert.deepEqual(errors(await verifyDataDirectory(dir)), []);
    const hex = info.digest.slice('sha256:'.length);
    const refsFile = path.join(dir, 'refs', hex.slice(0, 2), hex);
    await fsp.rm(refsFile);
    assertErrorAt(await verifyDataDirectory(dir), refsFile);
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});

test('verify: a group just created (every cell holding its "nothing yet" value) is clean', async () => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-damage-verify-'));
  try {
    const dir = path.join(root, 'node');
    const node = await openRaftNode(dir, OPTS);
    await node.openGroup('fresh');
    await node.close();
    const report = await verifyDataDirectory(dir);
    assert.deepEqual(errors(report), []);
    assert.equal(report.counts.raftGroups, 1);
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});
