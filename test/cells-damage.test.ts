// Damage to an acknowledged cell value is CORRUPT, never the older value — in the cell itself and in
// every store that keeps state in cells: a segmented log's MANIFEST, a Raft group's vote, committed
// and purged cells, the fs host store's fence/state, checkpoint and scope home `state` cells. Each
// case writes a cell twice through its store, flips one byte among those the last (acknowledged)
// write changed — the newer slot — and requires the reopened store to refuse with CORRUPT rather
// than serve the value before that write; and `seglog verify` to report it as an error. The bytes
// to damage are found by comparing the file before and after the write, so the test holds for any
// cell layout.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openCell, peekCell } from '../cells/index.js';
import { decodeCell } from '../cells/format.js';
import { ManualClock } from '../lib/clock.js';
import { isSeglogError } from '../lib/errors.js';
import { MemoryFs, type DiskImage } from '../lib/fs/memory.js';
import type { FileSystem, OpenMode } from '../lib/fs/types.js';
import { CommitBatch, FenceTiming, openFsHostStore, type FsHostStore } from '../lib/host/index.js';
import { encodeKvCommand } from '../lib/raft/kv.js';
import { groupDirectory, openRaftNode } from '../lib/raft/node.js';
import type { Entry, LogId } from '../lib/raft/types.js';
import { openSegmentedLog } from '../segments/index.js';
import { openPayloadStore } from '../lib/payloads/index.js';
import { verifyDataDirectory } from '../lib/tools/verify.js';
import { toThreeCellLayout } from './support/three-cell-group.js';

const te = new TextEncoder();

function fileOf(m: MemoryFs, file: string): Uint8Array {
  const bytes = m.currentImage().files[file];
  assert.ok(bytes !== undefined, `${file} exists`);
  return bytes;
}

/** True when `err` is CORRUPT, or is an error whose cause chain holds a CORRUPT. */
function isCorrupt(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (isSeglogError(e, 'CORRUPT')) return true;
  }
  return false;
}

/** The offsets at which `after` differs from `before` (the bytes the last write changed). */
function changedOffsets(before: Uint8Array, after: Uint8Array): number[] {
  assert.equal(after.length, before.length, 'a cell write never changes the file size');
  const out: number[] = [];
  for (let i = 0; i < after.length; i++) if (after[i] !== before[i]) out.push(i);
  assert.ok(out.length > 0, 'the last write changed the file');
  return out;
}

/** A copy of `image` with byte `offset` of `file` flipped (one bit). */
function damaged(image: DiskImage, file: string, offset: number): DiskImage {
  const bytes = Uint8Array.from(image.files[file]!);
  bytes[offset] = bytes[offset]! ^ 0x10;
  return { dirs: image.dirs, files: { ...image.files, [file]: bytes } };
}

/** Offsets to try among the changed ones: the first, the middle, the last, and a spread. */
function picks(offsets: readonly number[]): number[] {
  const n = offsets.length;
  const at = new Set([0, n - 1, Math.floor(n / 2), Math.floor(n / 3), Math.floor((2 * n) / 3)]);
  return [...at].map((k) => offsets[k]!);
}

async function expectVerifyError(image: DiskImage, dir: string, file: string): Promise<void> {
  const report = await verifyDataDirectory(dir, { fs: new MemoryFs({ image, trace: false }) });
  const errors = report.findings.filter((f) => f.severity === 'error' && f.path === file);
  assert.ok(errors.length > 0, `verify reports the damaged cell ${file} as an error (findings: ${report.findings.map((f) => `${f.severity} ${f.path}: ${f.message}`).join(' | ')})`);
}

test('a cell: a flipped byte in the newer slot is CORRUPT, never the older value', async () => {
  for (const slotBytes of [64, 256, 1024, 4096]) {
    const m = new MemoryFs({ image: { dirs: ['/d'], files: {} }, trace: false });
    const cell = await openCell('/d/c', { fs: m, slotBytes });
    await cell.write(te.encode('older'));
    const before = fileOf(m, '/d/c');
    await cell.write(te.encode('newer, acknowledged'));
    await cell.close();
    const image = m.currentImage();
    const offsets = changedOffsets(before, fileOf(m, '/d/c'));
    for (const offset of offsets) {
      const disk = new MemoryFs({ image: damaged(image, '/d/c', offset), trace: false });
      let got: string;
      try {
        const again = await openCell('/d/c', { fs: disk, slotBytes });
        got = Buffer.from((await again.read())!).toString();
        await again.close();
      } catch (err) {
        assert.ok(isSeglogError(err, 'CORRUPT'), `slot ${slotBytes}, byte ${offset}: ${String(err)}`);
        continue;
      }
      assert.fail(`slot ${slotBytes}: a flipped byte at ${offset} of the newer slot served ${JSON.stringify(got)}`);
    }
  }
});

test('a segmented log: a damaged MANIFEST written by truncateAfter and dropBefore is CORRUPT, never the older manifest', async () => {
  for (const op of ['truncateAfter', 'dropBefore'] as const) {
    const m = new MemoryFs({ image: { dirs: ['/d'], files: {} }, trace: false });
    const log = await openSegmentedLog('/d/log', { fs: m, segmentBytes: 4096 });
    for (let i = 0; i < 40; i++) await log.append([te.encode(`record ${i} ${'x'.repeat(300)}`)]);
    const before = fileOf(m, '/d/log/MANIFEST');
    if (op === 'truncateAfter') await log.truncateAfter(10);
    else await log.dropBefore(30);
    await log.close();
    const image = m.currentImage();
    const offsets = changedOffsets(before, fileOf(m, '/d/log/MANIFEST'));
    for (const offset of picks(offsets)) {
      const bad = damaged(image, '/d/log/MANIFEST', offset);
      await assert.rejects(
        (async () => {
          const again = await openSegmentedLog('/d/log', { fs: new MemoryFs({ image: bad, trace: false }), segmentBytes: 4096 });
          const range = `[${again.firstIndex}, ${again.endIndex})`;
          await again.close();
          return range;
        })(),
        (err: unknown) => isCorrupt(err),
        `${op}: a flipped byte at ${offset} of the MANIFEST's newer slot`,
      );
    }
    await expectVerifyError(damaged(image, '/d/log/MANIFEST', offsets[Math.floor(offsets.length / 2)]!), '/d', '/d/log/MANIFEST');
  }
});

function lid(term: number, index: number): LogId {
  return { leaderId: { term, nodeId: 1 }, index };
}

function entry(term: number, index: number): Entry {
  return { logId: lid(term, index), payload: { type: 'normal', data: encodeKvCommand({ op: 'set', key: `k${index}`, value: te.encode(`v${index}`) }) } };
}

function openNode(fs: FileSystem) {
  return openRaftNode('/node', { fs, clock: new ManualClock(), payloads: { graceMs: 0 }, segmentBytes: 4096, journalSegmentBytes: 4096 });
}

test('a Raft group: a damaged state cell, or vote, committed or purged cell of the earlier layout, is CORRUPT at open, never the older term or id', async () => {
  for (const layout of ['state cell', 'three cells'] as const) {
    for (const which of ['vote', 'committed', 'purged'] as const) {
      const m = new MemoryFs({ image: { dirs: ['/node'], files: {} }, trace: false });
      let node = await openNode(m);
      let g = await node.openGroup('g');
      await new Promise<void>((resolve, reject) => {
        g.log.append([entry(1, 1), entry(1, 2), entry(1, 3), entry(2, 4)], (err) => (err === null ? resolve() : reject(err))).catch(reject);
      });
      if (layout === 'three cells') {
        await node.close();
        await toThreeCellLayout(groupDirectory('/node', 'g'), m);
        node = await openNode(m);
        g = await node.openGroup('g');
      }
      const cellName = layout === 'state cell' ? 'state.cell' : `${which}.cell`;
      const cellFile = (): string => {
        const name = Object.keys(m.currentImage().files).find((f) => f.endsWith(`/${cellName}`));
        assert.ok(name !== undefined, `${cellName} exists`);
        return name;
      };
      let before: Uint8Array;
      if (which === 'vote') {
        await g.log.saveVote({ leaderId: { term: 1, nodeId: 1 }, committed: false });
        before = fileOf(m, cellFile());
        await g.log.saveVote({ leaderId: { term: 2, nodeId: 1 }, committed: true });
      } else if (which === 'committed') {
        await g.log.saveCommitted(lid(1, 2));
        before = fileOf(m, cellFile());
        await g.log.saveCommitted(lid(2, 4));
      } else {
        await g.log.saveCommitted(lid(2, 4));
        await g.log.purge(lid(1, 1));
        before = fileOf(m, cellFile());
        await g.log.purge(lid(1, 3));
      }
      await node.close();
      const file = cellFile();
      const image = m.currentImage();
      const offsets = changedOffsets(before, fileOf(m, file));
      for (const offset of picks(offsets)) {
        const bad = damaged(image, file, offset);
        await assert.rejects(
          (async () => {
            const again = await openNode(new MemoryFs({ image: bad, trace: false }));
            const group = await again.openGroup('g');
            const state = which === 'vote' ? await group.log.readVote() : which === 'committed' ? await group.log.readCommitted() : (await group.log.getLogState()).lastPurgedLogId;
            await again.close();
            return state;
          })(),
          (err: unknown) => isCorrupt(err),
          `${layout}, ${which}: a flipped byte at ${offset} of the newer slot`,
        );
      }
      await expectVerifyError(damaged(image, file, offsets[Math.floor(offsets.length / 2)]!), '/node', file);
    }
  }
});

const timing = FenceTiming.tryNew(1000, 3000);

function openRealm(fs: FileSystem, holderId: string) {
  return openFsHostStore('/realm', { fs, clock: new ManualClock(10_000_000), timing, holderId, bootId: () => 'boot-1', stripes: 1, checkpointIn: 'thread' });
}

test('the fs host store: a damaged fence/state is CORRUPT at the next acquire, never a token re-issued', async () => {
  const m = new MemoryFs({ image: { dirs: [], files: {} }, trace: false });
  const a = await openRealm(m, 'a');
  await a.acquireFence('takeover');
  const before = fileOf(m, '/realm/fence/state');
  const { token } = await a.acquireFence('takeover');
  await a.close();
  const image = m.currentImage();
  const offsets = changedOffsets(before, fileOf(m, '/realm/fence/state'));
  for (const offset of picks(offsets)) {
    let b: FsHostStore;
    try {
      b = await openRealm(new MemoryFs({ image: damaged(image, '/realm/fence/state', offset), trace: false }), 'b');
    } catch (err) {
      assert.ok(isCorrupt(err), `open: ${String(err)}`);
      continue;
    }
    const got = await b.acquireFence('takeover').catch((err: unknown) => err);
    await b.close();
    assert.ok(isCorrupt(got), `byte ${offset}: the acquire after damage answered ${got instanceof Error ? got.message : `token ${(got as { token: number }).token} (the last one issued was ${token})`}`);
  }
  await expectVerifyError(damaged(image, '/realm/fence/state', offsets[Math.floor(offsets.length / 2)]!), '/realm', '/realm/fence/state');
});

test('the fs host store: a damaged scope home state or checkpoint is CORRUPT, never an older version of the scope', async () => {
  const m = new MemoryFs({ image: { dirs: [], files: {} }, trace: false });
  const store = await openRealm(m, 'a');
  const { token } = await store.acquireFence('takeover');
  const scope = { kind: 'session' as const, name: 'alpha' };
  // A row past what the scope table keeps inline: the scope has a home, whose cell is damaged below.
  await store.commit(CommitBatch.tryNew('c1', token, [{ scope, previous: null, next: 1, head: te.encode('head 1'), append: [new Uint8Array(17 * 1024).fill(1)] }]));
  assert.ok(await store.checkpoint());
  const files = Object.keys(m.currentImage().files);
  const home = files.find((f) => f.startsWith('/realm/scopes/') && f.endsWith('/state'));
  assert.ok(home !== undefined, 'the round wrote a home');
  const homeBefore = fileOf(m, home);
  const checkpointBefore = fileOf(m, '/realm/checkpoint');
  await store.commit(CommitBatch.tryNew('c2', token, [{ scope, previous: 1, next: 2, head: te.encode('head 2'), append: [te.encode('row 1')] }]));
  assert.ok(await store.checkpoint());
  await store.close();
  const image = m.currentImage();
  for (const [file, before] of [
    [home, homeBefore],
    ['/realm/checkpoint', checkpointBefore],
  ] as const) {
    const offsets = changedOffsets(before, fileOf(m, file));
    for (const offset of picks(offsets)) {
      const disk = new MemoryFs({ image: damaged(image, file, offset), trace: false });
      const got = await (async () => {
        const again = await openRealm(disk, 'b');
        try {
          return await again.loadHead(scope);
        } finally {
          await again.close();
        }
      })().catch((err: unknown) => err);
      assert.ok(isCorrupt(got), `${file} byte ${offset}: a load after damage answered ${got instanceof Error ? got.message : `version ${(got as { version: number } | null)?.version}`}`);
    }
    await expectVerifyError(damaged(image, file, offsets[Math.floor(offsets.length / 2)]!), '/realm', file);
  }
});

test('the payload store: a damaged CLOCK is CORRUPT at open, never an older store time', async () => {
  const m = new MemoryFs({ image: { dirs: [], files: {} }, trace: false });
  const clock = new ManualClock(1_000);
  let store = await openPayloadStore('/p', { fs: m, clock, graceMs: 60_000 });
  clock.advance(5_000);
  await store.close();
  store = await openPayloadStore('/p', { fs: m, clock, graceMs: 60_000 });
  const before = fileOf(m, '/p/CLOCK');
  clock.advance(50_000);
  await store.close();
  const image = m.currentImage();
  const offsets = changedOffsets(before, fileOf(m, '/p/CLOCK'));
  for (const offset of picks(offsets)) {
    await assert.rejects(
      openPayloadStore('/p', { fs: new MemoryFs({ image: damaged(image, '/p/CLOCK', offset), trace: false }), clock, graceMs: 60_000 }).then((s) => s.close()),
      (err: unknown) => isCorrupt(err),
      `a flipped byte at ${offset} of CLOCK`,
    );
  }
  await expectVerifyError(damaged(image, '/p/CLOCK', offsets[0]!), '/p', '/p/CLOCK');
});

test('the fs host store: a home whose value would not fit its cell keeps its head in a blob instead', async () => {
  // The largest home value: 64 stripes (a cut of 64 positions), a 512-byte name, 128-byte commit
  // ids, a head at the inline bound and ~150 row files is more than a home cell holds.
  const m = new MemoryFs({ image: { dirs: [], files: {} }, trace: false });
  const store = await openFsHostStore('/realm', { fs: m, clock: new ManualClock(10_000_000), timing, holderId: 'a', bootId: () => 'boot-1', stripes: 64, preallocBytes: 0, checkpointIn: 'thread' });
  const { token } = await store.acquireFence('takeover');
  const scope = { kind: 'record' as const, name: 'n'.repeat(512) };
  const head = new Uint8Array(2048).fill(7);
  let end = 0;
  for (let v = 1; v <= 149; v++) {
    // Each round seals the row file holding the last row and starts a new one.
    const id = `${String(v).padStart(4, '0')}${'c'.repeat(124)}`;
    // The first row outgrows the scope table (the scope has a home); truncations keep it.
    const update = v === 1 ? { scope, previous: null, next: 1, head, append: [new Uint8Array(17 * 1024).fill(1), te.encode('r')] } : { scope, previous: v - 1, next: v, head, truncateAfter: end - 1, append: [te.encode('r'), te.encode('r')] };
    await store.commit(CommitBatch.tryNew(id, token, [update]));
    end = v === 1 ? 2 : end + 1;
    assert.ok(await store.checkpoint());
  }
  const loaded = await store.loadHead(scope);
  assert.equal(loaded?.version, 149);
  assert.deepEqual(loaded?.head, head);
  assert.equal((await store.readRows(scope, 0, 1000)).length, end);
  await store.close();
  const files = Object.keys(m.currentImage().files).filter((f) => f.includes('/scopes/'));
  assert.ok(files.some((f) => /\/h-[0-9a-f]{16}$/.test(f)), 'the head moved to a blob');
  const again = await openFsHostStore('/realm', { fs: m, clock: new ManualClock(10_000_000), timing, holderId: 'b', bootId: () => 'boot-1', checkpointIn: 'thread' });
  assert.deepEqual((await again.loadHead(scope))?.head, head);
  await again.close();
});

test('a lock-free read that meets a write in progress reads again; damage that stays is CORRUPT', async () => {
  const S = 2048;
  const m = new MemoryFs({ image: { dirs: ['/d'], files: {} }, trace: false });
  const cell = await openCell('/d/c', { fs: m, slotBytes: S });
  const states: Uint8Array[] = [];
  for (const v of ['v1', 'v2', 'v3', 'v4']) {
    await cell.write(te.encode(`${v} ${'x'.repeat(1500)}`));
    states.push(fileOf(m, '/d/c'));
  }
  await cell.close();
  // What a reader copying out slot 0 before the third write and slot 1 during the fourth sees:
  // slot 0 still holding v1, slot 1 part v4 (through the middle of its second sector), part v2.
  const straddle = Uint8Array.from(states[3]!);
  straddle.set(states[1]!.subarray(0, S), 0);
  straddle.set(states[1]!.subarray(S + 700, 2 * S), S + 700);
  /** A file system whose first `reads` reads of /d/c answer `seen` instead of the file. */
  const racing = (seen: Uint8Array, reads: number): FileSystem => {
    let left = reads;
    return new Proxy(m, {
      get(target, key, receiver) {
        if (key !== 'open') return Reflect.get(target, key, receiver);
        return async (p: string, mode: OpenMode) => {
          const h = await target.open(p, mode);
          if (p !== '/d/c' || left === 0) return h;
          left--;
          return new Proxy(h, {
            get(th, k, r) {
              if (k !== 'read') return Reflect.get(th, k, r);
              return async (into: Uint8Array, at: number) => {
                const n = Math.max(0, Math.min(into.length, seen.length - at));
                into.set(seen.subarray(at, at + n));
                return n;
              };
            },
          });
        };
      },
    }) as FileSystem;
  };
  // The same, with the copy of slot 1 stopped at a sector boundary: torn between v2 and v4, both
  // newer than the v1 slot 0 still shows.
  const straddleTorn = Uint8Array.from(states[3]!);
  straddleTorn.set(states[1]!.subarray(0, S), 0);
  straddleTorn.set(states[1]!.subarray(S + 1024, 2 * S), S + 1024);
  assert.throws(() => decodeCell(straddleTorn, straddleTorn.length, S, '/d/c'), (err: unknown) => isSeglogError(err, 'CORRUPT'));
  assert.equal(Buffer.from((await peekCell(racing(straddleTorn, 1), '/d/c', S))!).toString().slice(0, 2), 'v4');
  assert.throws(() => decodeCell(straddle, straddle.length, S, '/d/c'), (err: unknown) => isSeglogError(err, 'CORRUPT'));
  assert.equal(Buffer.from((await peekCell(racing(straddle, 2), '/d/c', S))!).toString().slice(0, 2), 'v4', 'read again after the write');
  await assert.rejects(peekCell(racing(straddle, 1000), '/d/c', S), (err: unknown) => isSeglogError(err, 'CORRUPT'), 'damage that stays');
});
