// Crash tests of the segmented log through the recording layer (MemoryFs + lib/crash): for each
// workload (append with rolls, truncateAfter, dropBefore, reset, concurrent appenders, and a
// process killed and restarted), every crash state the engine builds (prefixes of the trace ×
// subsets of the unsynced operations × torn writes × unsynced directory entries) must reopen to a
// state the contract allows: every acknowledged operation in effect, no torn or stale record,
// indices contiguous; a second open agrees, and an append after recovery lands cleanly.
// Prints how many states each workload checked.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openSegmentedLog, type SegmentedLog, type SegmentedLogOptions } from '../segments/index.js';
import { MemoryFs, type DiskImage } from '../lib/fs/memory.js';
import { checkAckAfterSync, exploreCrashStates, type CrashState } from '../lib/crash/index.js';
import { FaultyFs } from '../lib/fs/faulty.js';

const DIR = '/d/log';

let serial = 0;
function makeRecord(size: number): Buffer {
  const id = ++serial;
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i++) b[i] = (id * 29 + i * 11) & 0xff;
  if (size >= 4) b.writeUInt32LE(id, 0);
  return b;
}

/** A log's visible content. */
interface Content {
  first: number;
  records: Buffer[];
}

type Step =
  | { op: 'append'; records: Buffer[] }
  | { op: 'truncate'; index: number }
  | { op: 'drop'; index: number }
  | { op: 'reset'; index: number };

function apply(c: Content, s: Step): Content {
  switch (s.op) {
    case 'append':
      return { first: c.first, records: [...c.records, ...s.records] };
    case 'truncate':
      return s.index >= c.first + c.records.length ? c : { first: c.first, records: c.records.slice(0, s.index - c.first) };
    case 'drop': {
      if (s.index <= c.first) return c;
      const first = Math.min(s.index, c.first + c.records.length);
      return { first, records: c.records.slice(first - c.first) };
    }
    case 'reset':
      return { first: s.index, records: [] };
  }
}

function sameContent(a: Content, b: Content): boolean {
  return a.first === b.first && a.records.length === b.records.length && a.records.every((r, i) => r.equals(b.records[i]!));
}

async function readContent(image: DiskImage, segmentBytes: number): Promise<{ content: Content; log: SegmentedLog; fs: MemoryFs }> {
  const fs = new MemoryFs({ image, trace: false });
  const log = await openSegmentedLog(DIR, { fs, segmentBytes });
  const records = (await log.read(log.firstIndex, 1_000_000)).map((b) => Buffer.from(b));
  assert.equal(log.endIndex, log.firstIndex + records.length, 'endIndex agrees with the records read');
  return { content: { first: log.firstIndex, records }, log, fs };
}

/**
 * Checker for a sequential workload: `states[k]` is the content after step k (states[0] before
 * any); an 'ack' mark with detail k is recorded once step k resolved. A crash may leave the state
 * after any step from the last acknowledged one on, or, inside an append, that state plus a
 * prefix of the append's records (a torn tail is cut at the record boundary).
 */
function sequentialChecker(steps: Step[], states: Content[], segmentBytes: number) {
  return async (state: CrashState): Promise<void> => {
    let acked = 0;
    for (const m of state.acknowledged) if (m.label === 'ack') acked = Math.max(acked, m.detail as number);
    const { content, log, fs } = await readContent(state.image, segmentBytes);
    let ok = false;
    for (let k = acked; k < states.length && !ok; k++) {
      const s = states[k]!;
      if (sameContent(content, s)) ok = true;
      const next = steps[k];
      if (!ok && next?.op === 'append' && content.first === s.first && content.records.length > s.records.length) {
        const extra = content.records.slice(s.records.length);
        ok =
          extra.length <= next.records.length &&
          s.records.every((r, i) => r.equals(content.records[i]!)) &&
          extra.every((r, i) => r.equals(next.records[i]!));
      }
    }
    if (!ok) {
      await log.close();
      throw new Error(
        `reopened first ${content.first} with ${content.records.length} records: no state at or after step ${acked} (` +
          states.slice(acked).map((s) => `${s.first}+${s.records.length}`).join(' ') + ')',
      );
    }
    await afterRecovery(log, fs, content, segmentBytes);
  };
}

/** An append after recovery lands at the end, and a second open sees exactly content + it. */
async function afterRecovery(log: SegmentedLog, fs: MemoryFs, content: Content, segmentBytes: number): Promise<void> {
  const probe = Buffer.from('probe-after-recovery');
  assert.equal(await log.append([probe]), content.first + content.records.length);
  await log.close();
  const again = await openSegmentedLog(DIR, { fs, segmentBytes });
  const records = (await again.read(again.firstIndex, 1_000_000)).map((b) => Buffer.from(b));
  await again.close();
  assert.ok(sameContent({ first: again.firstIndex, records }, { first: content.first, records: [...content.records, probe] }), 'a second open differs');
}

async function runSequential(steps: Step[], segmentBytes: number, options: SegmentedLogOptions = {}): Promise<{ m: MemoryFs; states: Content[] }> {
  const m = new MemoryFs({ image: { dirs: ['/d'], files: {} } });
  const log = await openSegmentedLog(DIR, { ...options, fs: m, segmentBytes });
  const states: Content[] = [{ first: 0, records: [] }];
  m.mark('ack', 0);
  for (const [k, s] of steps.entries()) {
    if (s.op === 'append') await log.append(s.records);
    else if (s.op === 'truncate') await log.truncateAfter(s.index);
    else if (s.op === 'drop') await log.dropBefore(s.index);
    else await log.reset(s.index);
    states.push(apply(states[k]!, s));
    m.mark('ack', k + 1);
  }
  await log.close();
  return { m, states };
}

async function explore(name: string, steps: Step[], segmentBytes: number, t: { diagnostic(s: string): void }, options: SegmentedLogOptions = {}): Promise<MemoryFs['trace']> {
  const { m, states } = await runSequential(steps, segmentBytes, options);
  const result = await exploreCrashStates({
    initial: m.initialImage,
    trace: m.trace,
    check: sequentialChecker(steps, states, segmentBytes),
    maxStates: 6000,
    maxViolations: 3,
  });
  const msg = `${name}: ${result.states} crash states checked (${JSON.stringify(result.byFamily)}), ${result.points} points, ${result.elapsedMs.toFixed(0)} ms${result.truncated ? ' (capped)' : ''}`;
  t.diagnostic(msg);
  assert.deepEqual(result.violations.map((v) => `${v.id}: ${String(v.error)}\n${v.description}`), []);
  assert.ok(result.byFamily.torn > 0, 'torn writes were explored');
  const linear = checkAckAfterSync(m.trace, { dependsOn: (_marker, op) => !notDependedOn(op.kind, op.path) });
  assert.deepEqual(linear.violations.map((v) => v.description), [], 'every acknowledgement after the syncs it depends on');
  assert.deepEqual(linear.renamesBeforeSync, []);
  return m.trace;
}

/**
 * Operations no acknowledgement depends on, by design (docs/crash-safety.md (segmented log)): an index
 * file is derived data (a missing or torn one is rebuilt), the unlink of a segment the manifest no
 * longer names is garbage collection (a file that comes back is deleted again at open), and the
 * LOCK file holds no data.
 */
function notDependedOn(kind: string, path: string): boolean {
  return path.endsWith('.idx') || path.endsWith('/LOCK') || (kind === 'unlink' && path.endsWith('.seg'));
}

const sizes = [0, 13, 40, 7, 90, 1, 55, 22, 31, 64, 5, 17];
const appends = (n: number, batchEvery = 4): Step[] =>
  Array.from({ length: n }, (_, i) => ({
    op: 'append' as const,
    records: i % batchEvery === batchEvery - 1 ? [makeRecord(sizes[i % sizes.length]!), makeRecord(9), makeRecord(0)] : [makeRecord(sizes[i % sizes.length]!)],
  }));

test('crash: appends with rolls', async (t) => {
  await explore('append+roll', appends(18), 300, t);
});

test('crash: recycled segments (a dropped segment\'s file reused by the next roll, its old frames behind the new ones)', async (t) => {
  // Records of 60-90 bytes in 300-byte segments: dropping the sealed segments keeps one file as
  // the spare; the next roll makes a segment out of it, whose old frames (another salt, other
  // indices) lie behind every new one, torn or not. A truncation into it, and a reset, follow.
  const fill = (n: number): Step[] => Array.from({ length: n }, (_, i) => ({ op: 'append' as const, records: [makeRecord(60 + ((i * 7) % 31))] }));
  const steps: Step[] = [...fill(7), { op: 'drop', index: 6 }, ...fill(5), { op: 'truncate', index: 10 }, ...fill(1), { op: 'drop', index: 11 }, ...fill(4)];
  const trace = await explore('recycle', steps, 300, t);
  const links = trace.filter((e) => e.kind === 'link' && e.path.endsWith('.seg'));
  assert.ok(links.length >= 2, `${links.length} segments made out of a spare`);
});

const bigRecordSteps = (): Step[] => {
  const big = (n: number): Buffer => makeRecord(256 * 1024 + n);
  return [
    { op: 'append', records: [big(0)] },
    { op: 'append', records: [makeRecord(40)] },
    { op: 'append', records: [big(7), makeRecord(13), big(100)] },
    { op: 'append', records: [big(3)] },
    { op: 'truncate', index: 4 },
    { op: 'append', records: [makeRecord(5), big(9)] },
  ];
};

test('crash: records of 256 KiB and more written on the pool (their CRC fields written after the payload), beside small ones, with rolls', async (t) => {
  // A large record's frame goes out with a CRC field of zero, then the field in a write of its own:
  // states where the payload landed and the field did not (or the reverse, or either torn) must
  // read as a torn tail, never as a record. (inlineSyncBelowMs 0: every group write on the pool.)
  const trace = await explore('late CRC', bigRecordSteps(), 600 * 1024, t, { inlineSyncBelowMs: 0 });
  const fieldWrites = trace.filter((e) => e.kind === 'write' && e.path.endsWith('.seg') && e.length === 4);
  assert.equal(fieldWrites.length, 5, `${fieldWrites.length} CRC fields written after their frames`);
});

test('crash: records of 256 KiB and more written inline (each CRC in its frame header), beside small ones, with rolls', async (t) => {
  // A lone group written on the calling thread carries its CRCs from the start. The policy's
  // first group write goes to the pool (its field write is the one below); the rest go inline.
  const trace = await explore('inline large writes', bigRecordSteps(), 600 * 1024, t, { inlineSyncBelowMs: 1_000 });
  const fieldWrites = trace.filter((e) => e.kind === 'write' && e.path.endsWith('.seg') && e.length === 4);
  assert.equal(fieldWrites.length, 1, `${fieldWrites.length} CRC fields written after their frames`);
});

test('crash: truncateAfter inside the active segment and into a sealed one, appends after each', async (t) => {
  const steps: Step[] = [...appends(8), { op: 'truncate', index: 9 }, ...appends(3), { op: 'truncate', index: 2 }, ...appends(4)];
  await explore('truncateAfter', steps, 300, t);
});

test('crash: dropBefore inside a segment, of whole segments, and past the end', async (t) => {
  const steps: Step[] = [...appends(10), { op: 'drop', index: 3 }, { op: 'drop', index: 9 }, ...appends(2), { op: 'drop', index: 1000 }, ...appends(2)];
  await explore('dropBefore', steps, 300, t);
});

test('crash: reset forwards and backwards', async (t) => {
  const steps: Step[] = [...appends(6), { op: 'reset', index: 100 }, ...appends(3), { op: 'reset', index: 4 }, ...appends(2)];
  await explore('reset', steps, 300, t);
});

test('crash: concurrent appenders (group commit): every acknowledged index present, a contiguous prefix', async (t) => {
  const m = new MemoryFs({ image: { dirs: ['/d'], files: {} } });
  const log = await openSegmentedLog(DIR, { fs: m, segmentBytes: 400 });
  const written: Buffer[] = [];
  const work: Promise<void>[] = [];
  for (let w = 0; w < 6; w++) {
    work.push(
      (async () => {
        for (let i = 0; i < 6; i++) {
          const recs = [makeRecord(sizes[(w + i) % sizes.length]!)];
          const s = log.stage(recs);
          written[s.first] = recs[0]!;
          await s.durable;
          m.mark('ack', s.first);
        }
      })(),
    );
  }
  await Promise.all(work);
  await log.close();
  const result = await exploreCrashStates({
    initial: m.initialImage,
    trace: m.trace,
    maxStates: 4000,
    maxViolations: 3,
    check: async (state) => {
      const { content, log: reopened, fs } = await readContent(state.image, 400);
      assert.equal(content.first, 0);
      for (const mk of state.acknowledged) {
        if (mk.label === 'ack') assert.ok((mk.detail as number) < content.records.length, `acknowledged record ${String(mk.detail)} lost`);
      }
      content.records.forEach((r, i) => assert.ok(r.equals(written[i]!), `record ${i} is not the one written there`));
      await afterRecovery(reopened, fs, content, 400);
    },
  });
  const msg = `concurrent appends: ${result.states} crash states checked (${JSON.stringify(result.byFamily)})${result.truncated ? ' (capped)' : ''}`;
  t.diagnostic(msg);
  assert.deepEqual(result.violations.map((v) => `${v.id}: ${String(v.error)}\n${v.description}`), []);
});

test('crash: a process killed with unsynced appends, restarted, appending and rolling on', async (t) => {
  const m = new MemoryFs({ image: { dirs: ['/d'], files: {} } });
  const first = await openSegmentedLog(DIR, { fs: m, segmentBytes: 300, sync: 'none' });
  const written: Buffer[] = [];
  for (let i = 0; i < 5; i++) {
    const r = makeRecord(20);
    written.push(r);
    await first.append([r]); // written, not synced: not acknowledged as durable
  }
  m.sever(); // the process dies; its page cache survives
  const m2 = m.newProcess();
  const second = await openSegmentedLog(DIR, { fs: m2, segmentBytes: 300 });
  assert.equal(second.endIndex, 5, 'the restarted process sees the page cache');
  m2.mark('observed', 5);
  for (let i = 0; i < 8; i++) {
    const r = makeRecord(30);
    written.push(r);
    const at = await second.append([r]);
    m2.mark('ack', at);
  }
  await second.close();
  const result = await exploreCrashStates({
    initial: m.initialImage,
    trace: m.trace,
    maxStates: 4000,
    maxViolations: 3,
    check: async (state) => {
      const { content, log: reopened, fs } = await readContent(state.image, 300);
      let floor = 0;
      for (const mk of state.acknowledged) {
        if (mk.label === 'ack') floor = Math.max(floor, (mk.detail as number) + 1);
        if (mk.label === 'observed') floor = Math.max(floor, mk.detail as number);
      }
      assert.ok(content.records.length >= floor, `${content.records.length} records after ${floor} were observed or acknowledged`);
      content.records.forEach((r, i) => assert.ok(r.equals(written[i]!), `record ${i} is not the one written there`));
      await afterRecovery(reopened, fs, content, 300);
    },
  });
  const msg = `kill and restart: ${result.states} crash states checked (${JSON.stringify(result.byFamily)})${result.truncated ? ' (capped)' : ''}`;
  t.diagnostic(msg);
  assert.deepEqual(result.violations.map((v) => `${v.id}: ${String(v.error)}\n${v.description}`), []);
});

test('crash: sync policy none with explicit syncs and rolls: every state opens, synced records kept', async (t) => {
  const m = new MemoryFs({ image: { dirs: ['/d'], files: {} } });
  const log = await openSegmentedLog(DIR, { fs: m, segmentBytes: 200, sync: 'none' });
  const written: Buffer[] = [];
  for (let i = 0; i < 20; i++) {
    const r = makeRecord(sizes[i % sizes.length]!);
    written.push(r);
    await log.append([r]);
    if (i % 5 === 4) {
      await log.sync();
      m.mark('synced', written.length);
    }
  }
  await log.close();
  const result = await exploreCrashStates({
    initial: m.initialImage,
    trace: m.trace,
    maxStates: 4000,
    maxViolations: 3,
    check: async (state) => {
      const { content, log: reopened, fs } = await readContent(state.image, 200);
      let floor = 0;
      for (const mk of state.acknowledged) if (mk.label === 'synced') floor = Math.max(floor, mk.detail as number);
      assert.ok(content.records.length >= floor, `${content.records.length} records after ${floor} were synced`);
      content.records.forEach((r, i) => assert.ok(r.equals(written[i]!), `record ${i} is not the one written there`));
      await afterRecovery(reopened, fs, content, 200);
    },
  });
  const msg = `sync none: ${result.states} crash states checked (${JSON.stringify(result.byFamily)})${result.truncated ? ' (capped)' : ''}`;
  t.diagnostic(msg);
  assert.deepEqual(result.violations.map((v) => `${v.id}: ${String(v.error)}\n${v.description}`), []);
});

test('crash: a process killed between a manifest write and its sync; the next process builds on what it read', async (t) => {
  const m = new MemoryFs({ image: { dirs: ['/d'], files: {} } });
  const faulty = new FaultyFs(m);
  const log = await openSegmentedLog(DIR, { fs: faulty, segmentBytes: 150 });
  const written: Buffer[] = [];
  const pause = faulty.pause('datasync', '*MANIFEST');
  let rolled = false;
  void pause.reached.then(() => {
    rolled = true;
  });
  for (let i = 0; i < 10 && !rolled; i++) {
    const r = makeRecord(30);
    const s = log.stage([r]);
    written.push(r);
    s.durable.catch(() => undefined);
    await Promise.race([s.durable, pause.reached]);
  }
  assert.ok(rolled, 'a roll reached its manifest sync');
  await faulty.sever(); // killed: the new manifest is in the page cache only
  const m2 = m.newProcess();
  const second = await openSegmentedLog(DIR, { fs: m2, segmentBytes: 150 });
  const seen = second.endIndex;
  m2.mark('observed', seen);
  for (let i = 0; i < 6; i++) {
    const r = makeRecord(30);
    written[second.endIndex] = r;
    const at = await second.append([r]);
    m2.mark('ack', at);
  }
  await second.close();
  const result = await exploreCrashStates({
    initial: m.initialImage,
    trace: m.trace,
    maxStates: 4000,
    maxViolations: 3,
    check: async (state) => {
      const { content, log: reopened, fs } = await readContent(state.image, 150);
      let floor = 0;
      for (const mk of state.acknowledged) {
        if (mk.label === 'ack') floor = Math.max(floor, (mk.detail as number) + 1);
        if (mk.label === 'observed') floor = Math.max(floor, mk.detail as number);
      }
      assert.ok(content.records.length >= floor, `${content.records.length} records after ${floor} were observed or acknowledged`);
      content.records.forEach((r, i) => assert.ok(r.equals(written[i]!), `record ${i} is not the one written there`));
      await afterRecovery(reopened, fs, content, 150);
    },
  });
  const msg = `kill mid-manifest: ${result.states} crash states checked (${JSON.stringify(result.byFamily)})${result.truncated ? ' (capped)' : ''}`;
  t.diagnostic(msg);
  assert.deepEqual(result.violations.map((v) => `${v.id}: ${String(v.error)}\n${v.description}`), []);
});
