// Tests of `seglog verify` and `seglog inspect`: a clean directory is clean; a single flipped byte
// anywhere in it is reported (a seeded sample of positions over every file, one flip at a time),
// except in the byte ranges verify lists as unchecked, which are proven harmless here (the store's
// own reader returns the same value); verify never writes; the command's exit codes. The host
// store realms' files are flipped by test/tools-verify-host.test.ts, which holds them to more: an
// error for every flip outside a short list of regions proven harmless.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { MemoryFs, type DiskImage } from '../lib/fs/memory.js';
import { loadImage } from './support/disk-image.js';
import { quietly } from './support/quietly.js';
import { openSegmentedLog } from '../segments/index.js';
import { openCell } from '../cells/index.js';
import { openPayloadStore } from '../lib/payloads/index.js';
import { ManualClock } from '../lib/clock.js';
import { encodeEntry, encodeOptionalLogId, encodeVote } from '../lib/raft/codec.js';
import { writeSnapshotStream } from '../lib/raft/snapshot-format.js';
import { encodeGroupFile, groupDirName } from '../lib/raft/fs-layout.js';
import { runDemo } from '../lib/tools/demo.js';
import { verifyDataDirectory, verifyExitCode, type VerifyReport } from '../lib/tools/verify.js';
import { inspectDataDirectory, formatInspectReport } from '../lib/tools/inspect.js';
import { seededRandom } from '../lib/crash/determinism.js';
import { buildHostRealm } from './support/host-realm-data.js';

const run = promisify(execFile);
const BIN = fileURLToPath(new URL('../bin/seglog.js', import.meta.url));
const enc = new TextEncoder();


async function* once(b: Uint8Array): AsyncGenerator<Uint8Array> {
  yield b;
}

/**
 * A data directory with every kind of file verify knows: the demo's (a cell, a log, a payload
 * store), a log with small segments that rolled, was truncated into a sealed segment and dropped
 * from, cells of other slot sizes written many times, and a Raft group laid out as
 * docs/raft-store.md designs it, whose entries name a payload of the node's payload store, and
 * two host store realms (the demo's, and test/support/host-realm-data.ts's: several scopes,
 * homes written by three checkpoint rounds, a truncate, a drop, a delete and a fence takeover).
 */
async function buildDataDirectory(root: string): Promise<void> {
  await quietly(() => runDemo(['--dir', root, '--records', '120']));
  await quietly(() => runDemo(['--dir', root, '--records', '40']));
  // A host store realm with several scopes through commits, a truncate, a drop, a delete, a fence
  // takeover and checkpoint rounds that wrote homes (the demo's own realm is in host/).
  await buildHostRealm(path.join(root, 'realm'));

  const log = await openSegmentedLog(path.join(root, 'small-log'), { segmentBytes: 512 });
  for (let i = 0; i < 60; i++) await log.append([enc.encode(`record ${i} `.repeat((i % 7) + 1))]);
  await log.truncateAfter(30);
  for (let i = 0; i < 8; i++) await log.append([enc.encode(`again ${i}`)]);
  await log.dropBefore(12);
  await log.close();

  for (const [name, slotBytes, writes] of [['small.cell', 256, 7], ['big.cell', 8192, 3]] as const) {
    const cell = await openCell(path.join(root, name), { slotBytes });
    for (let i = 0; i < writes; i++) await cell.write(enc.encode(`value ${i} of ${name} `.repeat(i + 1)));
    await cell.close();
  }

  const node = path.join(root, 'node');
  const payloads = await openPayloadStore(path.join(node, 'payloads'), { clock: new ManualClock(0) });
  const body = enc.encode('a payload a raft entry names\n'.repeat(300));
  const info = await payloads.put(once(body), {});
  await payloads.addRef(info.digest, 'queue-a');
  await payloads.close();
  const group = path.join(node, 'groups', groupDirName('g1'));
  const raftLog = await openSegmentedLog(path.join(group, 'log'), { firstIndex: 1, segmentBytes: 1024 });
  for (let i = 1; i <= 12; i++) {
    const logId = { leaderId: { term: 1 + Math.floor(i / 5), nodeId: 1 }, index: i };
    const entry = i === 1 ? { logId, payload: { type: 'blank' as const } } : { logId, payload: { type: 'normal' as const, data: enc.encode(`set k${i}`), ...(i === 7 ? { payloads: [info.digest] } : {}) } };
    await raftLog.append([encodeEntry(entry)]);
  }
  await raftLog.close();
  for (const [name, value] of [
    ['vote.cell', encodeVote({ leaderId: { term: 3, nodeId: 1 }, committed: true })],
    ['committed.cell', encodeOptionalLogId({ leaderId: { term: 3, nodeId: 1 }, index: 10 })],
    ['purged.cell', encodeOptionalLogId(null)],
  ] as const) {
    const cell = await openCell(path.join(group, name));
    await cell.write(value);
    await cell.close();
  }
  await fsp.writeFile(path.join(group, 'GROUP'), encodeGroupFile('g1'));
  await fsp.mkdir(path.join(group, 'sm', 'snapshots'), { recursive: true });
  await (await openSegmentedLog(path.join(group, 'sm', 'journal'))).close();
  const parts: Uint8Array[] = [];
  const meta = { lastLogId: { leaderId: { term: 2, nodeId: 1 }, index: 8 }, lastMembership: { logId: null, membership: { configs: [[1]], nodes: {} } }, snapshotId: 'snap-1' };
  for await (const chunk of writeSnapshotStream({ plugin: 'kv', meta }, once(enc.encode('{"k2":"v"}'.repeat(50))))) parts.push(chunk);
  await fsp.writeFile(path.join(group, 'sm', 'snapshots', 'snap-1.snap'), Buffer.concat(parts));
}

async function snapshotOf(root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (d: string): Promise<void> => {
    for (const e of await fsp.readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) {
        out.set(p, 'dir');
        await walk(p);
      } else {
        const st = await fsp.stat(p);
        out.set(p, `${st.size}:${st.mtimeMs}:${Buffer.from(await fsp.readFile(p)).toString('base64')}`);
      }
    }
  };
  await walk(root);
  return out;
}

const READ_KINDS = new Set(['open', 'read', 'size', 'close', 'readdir', 'stat']);

test('verify: a clean directory is clean, nothing is unknown, and verify only reads', async (t) => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-verify-'));
  try {
    await buildDataDirectory(root);
    const before = await snapshotOf(root);
    const report = await verifyDataDirectory(root);
    t.diagnostic(`clean directory: ${JSON.stringify(report.counts)}`);
    assert.deepEqual(report.findings, []);
    assert.deepEqual(report.unknown, []);
    assert.equal(verifyExitCode(report), 0);
    assert.equal(report.counts.raftGroups, 2, "the demo's group and this test's own");
    assert.equal(report.counts.hostRealms, 2, "the demo's realm and this test's own");
    // Four scopes of the test realm outgrew the scope table (homes); the rest are in the table.
    assert.ok(report.counts.hostHomes >= 4 && report.counts.hostRowFiles >= 5, JSON.stringify(report.counts));
    assert.ok(report.counts.segments >= 6, 'the small log rolled');
    assert.deepEqual(await snapshotOf(root), before, 'verify changed nothing on disk');

    const m = new MemoryFs({ image: await loadImage(root) });
    const inMemory = await verifyDataDirectory('/data', { fs: m });
    assert.deepEqual(inMemory.findings, []);
    const kinds = new Set(m.trace.map((e) => e.kind));
    for (const k of kinds) assert.ok(READ_KINDS.has(k), `verify made a ${k} call`);
    assert.ok(m.trace.every((e) => e.kind !== 'open' || e.mode === 'read'));
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});

/** The value the store's own reader gets from a cell file, given its slot size. */
async function cellValue(m: MemoryFs, file: string, slotBytes: number): Promise<string> {
  const cell = await openCell(file, { fs: m, slotBytes });
  const v = await cell.read();
  await cell.close();
  return v === null ? 'null' : Buffer.from(v).toString('hex');
}

test('verify: every single flipped byte is reported, or lies in a range proven harmless', async (t) => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-verify-'));
  try {
    await buildDataDirectory(root);
    const image = await loadImage(root);
    const clean = await verifyDataDirectory('/data', { fs: new MemoryFs({ image, trace: false }) });
    assert.deepEqual(clean.findings, []);

    // Every byte of a cell lies under a sector's checksum: no range is left unchecked.
    assert.deepEqual(clean.unchecked, []);
    const uncheckedAt = (file: string, at: number): boolean => clean.unchecked.some((r) => r.path === file && at >= r.from && at < r.to);

    const rng = seededRandom(20261130);
    let flips = 0;
    let reported = 0;
    let harmless = 0;
    const byFile: string[] = [];
    for (const [file, bytes] of Object.entries(image.files)) {
      if (bytes.length === 0) continue;
      // Host store realms: test/tools-verify-host.test.ts flips their files (and requires errors).
      if (file.startsWith('/data/host/') || file.startsWith('/data/realm/')) continue;
      const positions = new Set<number>([0, bytes.length - 1]);
      const want = Math.min(bytes.length, 22);
      while (positions.size < want) positions.add(Math.floor(rng() * bytes.length));
      let fileReported = 0;
      for (const at of positions) {
        const flipped = bytes.slice();
        flipped[at] = flipped[at]! ^ (1 + Math.floor(rng() * 255));
        const damaged: DiskImage = { dirs: image.dirs ?? [], files: { ...image.files, [file]: flipped } };
        // Only the top-level entry that holds the file: every check that reads a file (a Raft
        // group's payload references included) lies within it.
        const top = '/data/' + path.relative('/data', file).split('/')[0]!;
        const report: VerifyReport = await verifyDataDirectory(top, { fs: new MemoryFs({ image: damaged, trace: false }) });
        flips++;
        if (report.findings.length > 0) {
          reported++;
          fileReported++;
          assert.ok(verifyExitCode(report) !== 0);
          continue;
        }
        // Not reported: it must be a byte no reader reads. Prove it with the store's own reader.
        assert.ok(uncheckedAt(file, at), `a flip of byte ${at} of ${file} went unreported`);
        const slotBytes = bytes.length / 2;
        const a = await cellValue(new MemoryFs({ image, trace: false }), file, slotBytes);
        const b = await cellValue(new MemoryFs({ image: damaged, trace: false }), file, slotBytes);
        assert.equal(b, a, `a flip of byte ${at} of ${file} changed what the cell reads`);
        harmless++;
      }
      byFile.push(`${path.relative('/data', file)} ${fileReported}/${positions.size}`);
    }
    t.diagnostic(`${flips} single-byte flips over ${byFile.length} files (the host realms' are flipped by tools-verify-host): ${reported} reported, ${harmless} in unchecked cell slot tails (proven harmless)`);
    t.diagnostic(byFile.join('; '));
    assert.equal(reported + harmless, flips);
    assert.ok(flips >= 300, `only ${flips} flips`);
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});

test('verify: torn tails, leftovers and damage are told apart (warnings vs errors)', async () => {
  const base = new MemoryFs({ image: { dirs: ['/data'], files: {} } });
  const log = await openSegmentedLog('/data/log', { fs: base, segmentBytes: 4096, sync: 'none' });
  for (let i = 0; i < 20; i++) await log.append([enc.encode(`r${i}`)]);
  await log.sync();
  // A crash: unsynced garbage after the last record, a leftover temp of a cell, no close.
  const image = base.currentImage();
  const seg = Object.keys(image.files).find((f) => f.endsWith('.seg'))!;
  const segBytes = image.files[seg]!.slice();
  const firstZero = segBytes.findIndex((b, i) => i > 100 && b === 0 && segBytes.subarray(i).every((z) => z === 0));
  segBytes[firstZero + 3] = 0x5a;
  const torn = { dirs: image.dirs ?? [], files: { ...image.files, [seg]: segBytes, '/data/x.cell.tmp': new Uint8Array(10), '/data/x.cell': image.files['/data/log/MANIFEST']! } };
  const r1 = await verifyDataDirectory('/data', { fs: new MemoryFs({ image: torn, trace: false }) });
  assert.equal(r1.errors, 0, JSON.stringify(r1.findings));
  assert.ok(r1.findings.some((f) => f.severity === 'warning' && /torn by a crash/.test(f.message)));
  assert.ok(r1.findings.some((f) => f.path === '/data/x.cell.tmp'));
  assert.equal(verifyExitCode(r1), 3);

  // A damaged record that an index (written at a clean close) vouches for is an error.
  await log.close();
  const closed = base.currentImage();
  const bytes = closed.files[seg]!.slice();
  bytes[60] = bytes[60]! ^ 0xff;
  const r2 = await verifyDataDirectory('/data', { fs: new MemoryFs({ image: { dirs: closed.dirs ?? [], files: { ...closed.files, [seg]: bytes } }, trace: false }) });
  assert.ok(r2.errors > 0, JSON.stringify(r2.findings));
  assert.equal(verifyExitCode(r2), 1);

  // A missing segment the manifest names is an error.
  const files = { ...closed.files };
  delete files[seg];
  const r3 = await verifyDataDirectory('/data', { fs: new MemoryFs({ image: { dirs: closed.dirs ?? [], files }, trace: false }) });
  assert.ok(r3.findings.some((f) => f.severity === 'error' && /missing/.test(f.message)));
});

test('inspect prints cells, logs, payloads, the Raft group and the host realms; the commands exit as documented', async () => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-verify-'));
  try {
    await buildDataDirectory(root);
    const text = formatInspectReport(await inspectDataDirectory(root, { records: 2 }));
    assert.match(text, /runs\.cell: cell, 4096-byte slots, live slot \d, stamp 3, 1 byte\(s\): "2"/);
    assert.match(text, /events\/: log \[0, 160\)/);
    assert.match(text, /record 0: "run 1 record 0 at/);
    assert.match(text, /payloads\/: payload store/);
    assert.match(text, /groups\/[0-9a-f]{64}\/: Raft group "g1", vote term 3 for node 1 .*12 entries, 1 payload\(s\) named/);
    assert.match(text, /snap-1\.snap: Raft snapshot snap-1 of plugin kv/);
    assert.match(text, /host\/: host store realm, 4 stripe\(s\), .*fence token 2 held by "demo-run-2"/);
    assert.match(text, /session "demo": version 2, rows \[0, 2\) \(2\), head 7 bytes, commit "demo-run-2"; no home/);
    assert.match(text, /realm\/: host store realm, 3 stripe\(s\), .*checkpoint round 3; scope table 0000000000000003\.tbl: 7 scope\(s\), 6 live, 4 homed; 4 home\(s\)/);
    assert.match(text, /verify: clean/);

    const ok = await run(process.execPath, [BIN, 'verify', root]);
    assert.match(ok.stdout, /clean/);
    assert.match(ok.stdout, /2 host realm\(s\) with \d+ stripe file\(s\)/);
    const inspect = await run(process.execPath, [BIN, 'inspect', root, '--records', '1']);
    assert.match(inspect.stdout, /small-log\/: log/);
    const json = JSON.parse((await run(process.execPath, [BIN, 'verify', root, '--json'])).stdout) as { clean: boolean; exitCode: number };
    assert.equal(json.clean, true);
    assert.equal(json.exitCode, 0);

    // One flipped byte in a sealed segment, on the real file system: exit 1, naming the file.
    const logDir = path.join(root, 'small-log');
    const sealed = (await fsp.readdir(logDir)).filter((n) => n.endsWith('.seg')).sort()[0]!;
    const file = path.join(logDir, sealed);
    const original = await fsp.readFile(file);
    const damaged = Buffer.from(original);
    damaged[50] = damaged[50]! ^ 0x01;
    await fsp.writeFile(file, damaged);
    const bad = await run(process.execPath, [BIN, 'verify', root]).then(
      () => assert.fail('verify exited 0 on a damaged directory'),
      (err: { code: number; stdout: string }) => err,
    );
    assert.equal(bad.code, 1);
    assert.ok(bad.stdout.includes(sealed), bad.stdout);
    await fsp.writeFile(file, original);
    const usage = await run(process.execPath, [BIN, 'verify']).then(
      () => assert.fail('verify without a directory exited 0'),
      (err: { code: number }) => err,
    );
    assert.equal(usage.code, 2);
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});
