// A store whose defining files are missing refuses to open with CORRUPT naming the file; only an
// empty (or absent) directory is a new store. Each case builds a store with acknowledged state on
// the real file system, deletes one file or directory, and reopens: the answer must be CORRUPT
// naming what is missing — never a store made again empty over what is left (a Raft log without
// its entries, a vote, committed or purged id gone back, a state machine without its snapshot, a
// log's first index gone back, a node without its groups).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';

import { isSeglogError } from '../lib/errors.js';
import { openPayloadStore } from '../lib/payloads/index.js';
import { groupDirectory, openRaftNode } from '../lib/raft/node.js';
import { openSegmentedLog } from '../segments/index.js';
import { OPTS, buildNode } from './support/damage-node.js';
import { toThreeCellLayout } from './support/three-cell-group.js';


async function withRoot(body: (root: string) => Promise<void>): Promise<void> {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-damage-missing-'));
  try {
    await body(root);
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
}

function corruptNaming(p: string): (err: unknown) => boolean {
  return (err) => {
    assert.ok(isSeglogError(err, 'CORRUPT'), `expected CORRUPT, got ${String(err)}`);
    const named = err.details['path'] ?? err.details['file'];
    assert.equal(named, p, err.message);
    return true;
  };
}


for (const victim of ['log', 'log/MANIFEST', 'state.cell', 'sm', 'sm/journal', 'sm/journal/MANIFEST', 'sm/snapshots']) {
  test(`raft group: a deleted ${victim} is CORRUPT naming it, not a group made again over the rest`, async () => {
    await withRoot(async (root) => {
      const dir = path.join(root, 'node');
      await buildNode(dir);
      const gone = path.join(groupDirectory(dir, 'g'), victim);
      await fsp.rm(gone, { recursive: true });
      await assert.rejects(openRaftNode(dir, OPTS), corruptNaming(gone));
    });
  });
}

for (const victim of ['vote.cell', 'committed.cell', 'purged.cell']) {
  test(`raft group of the earlier layout (three cells): a deleted ${victim} is CORRUPT naming it, not a group made again over the rest`, async () => {
    await withRoot(async (root) => {
      const dir = path.join(root, 'node');
      await buildNode(dir);
      await toThreeCellLayout(groupDirectory(dir, 'g'));
      const gone = path.join(groupDirectory(dir, 'g'), victim);
      await fsp.rm(gone);
      await assert.rejects(openRaftNode(dir, OPTS), corruptNaming(gone));
    });
  });
}

test('raft group: the only snapshot deleted after a purge is CORRUPT (the journal dropped what it held)', async () => {
  await withRoot(async (root) => {
    const dir = path.join(root, 'node');
    await buildNode(dir);
    const snapDir = path.join(groupDirectory(dir, 'g'), 'sm', 'snapshots');
    const snaps = await fsp.readdir(snapDir);
    assert.equal(snaps.length, 1);
    await fsp.rm(path.join(snapDir, snaps[0] as string));
    await assert.rejects(openRaftNode(dir, OPTS), corruptNaming(snapDir));
  });
});

test('raft group: a group whose creation was never used still opens empty, and every defining file is there', async () => {
  await withRoot(async (root) => {
    const dir = path.join(root, 'node');
    let node = await openRaftNode(dir, OPTS);
    await node.openGroup('fresh');
    await node.close();
    const gd = groupDirectory(dir, 'fresh');
    for (const f of ['GROUP', 'state.cell', 'log/MANIFEST']) {
      assert.ok((await fsp.stat(path.join(gd, f).replace(/\/$/, ''))) !== null, f);
    }
    // The state machine's files are made at its first write (nothing applied yet: none).
    await assert.rejects(fsp.stat(path.join(gd, 'sm')), { code: 'ENOENT' });
    node = await openRaftNode(dir, OPTS);
    const r = node.recovery.get('fresh');
    assert.ok(r !== undefined);
    assert.equal(r.vote, null);
    assert.equal(r.committed, null);
    assert.equal(r.lastPurgedLogId, null);
    assert.equal(r.lastLogId, null);
    const g = await node.openGroup('fresh');
    assert.equal(await g.log.readVote(), null);
    await g.log.saveVote({ leaderId: { term: 2, nodeId: 1 }, committed: false });
    await node.close();
    node = await openRaftNode(dir, OPTS);
    assert.deepEqual(node.recovery.get('fresh')?.vote, { leaderId: { term: 2, nodeId: 1 }, committed: false });
    await node.close();
  });
});

test('raft node: a deleted groups/ is CORRUPT (groups/ is made before the payload store)', async () => {
  await withRoot(async (root) => {
    const dir = path.join(root, 'node');
    await buildNode(dir);
    await fsp.rm(path.join(dir, 'groups'), { recursive: true });
    await assert.rejects(openRaftNode(dir, OPTS), corruptNaming(path.join(dir, 'groups')));
  });
});

test('raft node: a deleted payloads/ beside groups is CORRUPT', async () => {
  await withRoot(async (root) => {
    const dir = path.join(root, 'node');
    await buildNode(dir);
    await fsp.rm(path.join(dir, 'payloads'), { recursive: true });
    await assert.rejects(openRaftNode(dir, OPTS), corruptNaming(path.join(dir, 'payloads')));
  });
});

test('raft node: an empty or absent directory is a new node', async () => {
  await withRoot(async (root) => {
    for (const dir of [path.join(root, 'absent', 'node'), root]) {
      const node = await openRaftNode(dir, OPTS);
      assert.deepEqual(node.groupIds(), []);
      await node.close();
    }
  });
});

test('segmented log: a deleted MANIFEST beside a segment a manifest named is CORRUPT (the first index would go back)', async () => {
  await withRoot(async (root) => {
    for (const [name, body] of [
      ['reset', async (log: Awaited<ReturnType<typeof openSegmentedLog>>) => log.reset(1000)],
      ['dropBefore after a roll', async (log: Awaited<ReturnType<typeof openSegmentedLog>>) => {
        for (let i = 0; i < 40; i++) await log.append([new Uint8Array(100)]);
        await log.dropBefore(40);
      }],
    ] as const) {
      const dir = path.join(root, name.replace(/\W+/g, '-'));
      const log = await openSegmentedLog(dir, { segmentBytes: 1024 });
      await body(log);
      await log.close();
      await fsp.rm(path.join(dir, 'MANIFEST'));
      const segs = (await fsp.readdir(dir)).filter((n) => n.endsWith('.seg'));
      await assert.rejects(openSegmentedLog(dir, { segmentBytes: 1024 }), (err: unknown) => {
        assert.ok(isSeglogError(err, 'CORRUPT'), `${name}: ${String(err)}`);
        assert.ok(segs.includes(path.basename(String(err.details['file']))), `${name}: names a segment: ${err.message}`);
        return true;
      });
    }
  });
});

test('segmented log: a creation cut before its first manifest is still a new log', async () => {
  await withRoot(async (root) => {
    const dir = path.join(root, 'log');
    const log = await openSegmentedLog(dir, { firstIndex: 7 });
    await log.close();
    // What a creation leaves before its first manifest: the first segment (generation 1, base 7).
    await fsp.rm(path.join(dir, 'MANIFEST'));
    const again = await openSegmentedLog(dir, { firstIndex: 7 });
    assert.equal(again.firstIndex, 7);
    await again.append([new Uint8Array([1])]);
    await again.close();
  });
});

test('payload store: FORMAT deleted beside blobs or refs is CORRUPT; CLOCK deleted is CORRUPT', async () => {
  await withRoot(async (root) => {
    const dir = path.join(root, 'payloads');
    const store = await openPayloadStore(dir);
    const info = await store.put(
      (async function* () {
        yield new TextEncoder().encode('a payload');
      })(),
    );
    await store.addRef(info.digest, 'h');
    await store.close();
    await fsp.rename(path.join(dir, 'FORMAT'), path.join(root, 'FORMAT'));
    await assert.rejects(openPayloadStore(dir), corruptNaming(dir));
    await fsp.rename(path.join(root, 'FORMAT'), path.join(dir, 'FORMAT'));
    await fsp.rm(path.join(dir, 'CLOCK'));
    await assert.rejects(openPayloadStore(dir), corruptNaming(path.join(dir, 'CLOCK')));
  });
});

test('payload store: a deleted refcount file is CORRUPT (its marker says holders were lost), and collection keeps the payload', async () => {
  await withRoot(async (root) => {
    const dir = path.join(root, 'payloads');
    let store = await openPayloadStore(dir, { graceMs: 0 });
    const info = await store.put(
      (async function* () {
        yield new TextEncoder().encode('a payload with holders');
      })(),
    );
    await store.addRef(info.digest, 'queue-a');
    await store.addRef(info.digest, 'queue-b');
    await store.close();
    const hex = info.digest.slice('sha256:'.length);
    const refsFile = path.join(dir, 'refs', hex.slice(0, 2), hex);
    await fsp.rm(refsFile);
    store = await openPayloadStore(dir, { graceMs: 0 });
    try {
      await assert.rejects(store.refs(info.digest), corruptNaming(refsFile));
      await assert.rejects(store.addRef(info.digest, 'queue-c'), corruptNaming(refsFile));
      await assert.rejects(store.collectGarbage(), (err: unknown) => isSeglogError(err, 'CORRUPT'));
      assert.notEqual(await store.stat(info.digest), null, 'the payload is kept');
      const report = await store.verify();
      assert.ok(report.problems.some((p) => p.digest === info.digest && p.code === 'CORRUPT'), JSON.stringify(report.problems));
    } finally {
      await store.close();
    }
  });
});

test('payload store: holders removed one by one leave no marker, and the payload is collected', async () => {
  await withRoot(async (root) => {
    const dir = path.join(root, 'payloads');
    const store = await openPayloadStore(dir, { graceMs: 0 });
    try {
      const info = await store.put(
        (async function* () {
          yield new TextEncoder().encode('held, then let go');
        })(),
      );
      await store.addRef(info.digest, 'a');
      await store.addRef(info.digest, 'b');
      await store.removeRef(info.digest, 'a');
      assert.deepEqual(await store.refs(info.digest), ['b']);
      await store.removeRef(info.digest, 'b');
      const hex = info.digest.slice('sha256:'.length);
      assert.deepEqual(await fsp.readdir(path.join(dir, 'refs', hex.slice(0, 2))), []);
      assert.deepEqual(await store.refs(info.digest), []);
      assert.equal((await store.collectGarbage()).removed, 1);
    } finally {
      await store.close();
    }
  });
});
