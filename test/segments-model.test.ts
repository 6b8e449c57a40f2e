// Model-based test of the segmented log: random sequences of append, stage, read, truncateAfter,
// dropBefore, reset, sync and close+reopen, checked after every step against an in-memory array.
// Tiny segments make rolls happen constantly. Runs on the real file system (temp dir) and on
// MemoryFs. Prints how many operations it ran.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import fc from 'fast-check';
import { openSegmentedLog, type SegmentedLog, type SegmentedLogOptions } from '../segments/index.js';
import { isSeglogError } from '../lib/errors.js';
import { MemoryFs } from '../lib/fs/memory.js';
import type { FileSystem } from '../lib/fs/types.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'seglog-segments-model-'));
after(() => fs.rmSync(root, { recursive: true, force: true }));

type Cmd =
  | { t: 'append'; sizes: number[] }
  | { t: 'stageRead'; sizes: number[]; rel: number }
  | { t: 'burst'; steps: Cmd[] }
  | { t: 'read'; rel: number; limit: number; maxBytes: number | undefined }
  | { t: 'truncate'; rel: number }
  | { t: 'drop'; rel: number }
  | { t: 'reset'; n: number }
  | { t: 'sync' }
  | { t: 'reopen' };

const sizes = fc.array(fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 0, max: 60 }) }, { weight: 1, arbitrary: fc.integer({ min: 61, max: 700 }) }), {
  minLength: 1,
  maxLength: 5,
});
const simple: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 10, arbitrary: sizes.map((s) => ({ t: 'append' as const, sizes: s })) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('stageRead' as const), sizes, rel: fc.nat(40) }) },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('read' as const),
      rel: fc.integer({ min: -2, max: 40 }),
      limit: fc.nat(30),
      maxBytes: fc.option(fc.nat(400), { nil: undefined }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('truncate' as const), rel: fc.integer({ min: -1, max: 40 }) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('drop' as const), rel: fc.integer({ min: -1, max: 45 }) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('reset' as const), n: fc.nat(300) }) },
  { weight: 1, arbitrary: fc.constant({ t: 'sync' as const }) },
  { weight: 1, arbitrary: fc.constant({ t: 'reopen' as const }) },
);
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 8, arbitrary: simple },
  {
    weight: 1,
    arbitrary: fc
      .array(simple.filter((c) => c.t !== 'reopen' && c.t !== 'stageRead'), { minLength: 2, maxLength: 6 })
      .map((steps) => ({ t: 'burst' as const, steps })),
  },
);

class Model {
  first = 0;
  records: Buffer[] = []; // records[i] is index first + i
  get end(): number {
    return this.first + this.records.length;
  }
}

let serial = 0;
function makeRecord(size: number): Buffer {
  const id = ++serial;
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i++) b[i] = (id * 31 + i * 7) & 0xff;
  if (size >= 4) b.writeUInt32LE(id, 0);
  return b;
}

function expectRead(m: Model, from: number, limit: number, maxBytes: number | undefined): Buffer[] {
  const out: Buffer[] = [];
  let bytes = 0;
  for (let i = from; i < m.end && out.length < limit; i++) {
    const r = m.records[i - m.first]!;
    if (out.length > 0 && maxBytes !== undefined && bytes + r.length > maxBytes) break;
    out.push(r);
    bytes += r.length;
  }
  return out;
}

function sameRecords(actual: Uint8Array[], expected: Buffer[], what: string): void {
  assert.equal(actual.length, expected.length, `${what}: count`);
  for (let i = 0; i < actual.length; i++) assert.ok(Buffer.from(actual[i]!).equals(expected[i]!), `${what}: record ${i} differs`);
}

interface Env {
  fs: FileSystem;
  dir: string;
  options: SegmentedLogOptions;
}

/** Issues one command against log and model without awaiting its completion; answers a check. */
function issue(log: SegmentedLog, m: Model, c: Cmd, durables: Promise<void>[]): Promise<void> {
  switch (c.t) {
    case 'append': {
      const recs = c.sizes.map(makeRecord);
      const expectFirst = m.end;
      m.records.push(...recs);
      return log.append(recs).then((first) => assert.equal(first, expectFirst));
    }
    case 'stageRead': {
      const recs = c.sizes.map(makeRecord);
      const s = log.stage(recs);
      assert.equal(s.first, m.end);
      m.records.push(...recs);
      durables.push(s.durable);
      const from = m.first + (c.rel % (m.records.length + 1));
      const expected = expectRead(m, from, 50, undefined);
      return log.read(from, 50).then((got) => sameRecords(got, expected, 'read of staged records'));
    }
    case 'read': {
      const from = m.first + c.rel;
      if (from < m.first || from < 0) {
        if (from < 0) return Promise.resolve();
        return assert.rejects(log.read(from, c.limit, c.maxBytes), (e: unknown) => isSeglogError(e, 'INVALID'));
      }
      const expected = expectRead(m, from, c.limit, c.maxBytes);
      return log.read(from, c.limit, c.maxBytes).then((got) => sameRecords(got, expected, `read(${from}, ${c.limit}, ${c.maxBytes})`));
    }
    case 'truncate': {
      const i = m.first + c.rel;
      if (i < 0) return Promise.resolve();
      if (i < m.first) return assert.rejects(log.truncateAfter(i), (e: unknown) => isSeglogError(e, 'INVALID'));
      if (i < m.end) m.records.length = i - m.first;
      return log.truncateAfter(i);
    }
    case 'drop': {
      const i = m.first + c.rel;
      if (i < 0) return Promise.resolve();
      if (i > m.first) {
        const first = Math.min(i, m.end);
        m.records.splice(0, first - m.first);
        m.first = first;
      }
      return log.dropBefore(i);
    }
    case 'reset':
      m.first = c.n;
      m.records = [];
      return log.reset(c.n);
    case 'sync':
      return log.sync();
    case 'burst':
    case 'reopen':
      throw new Error('not issued directly');
  }
}

async function runSequence(env: Env, cmds: Cmd[]): Promise<number> {
  const m = new Model();
  let log = await openSegmentedLog(env.dir, env.options);
  let ops = 0;
  const durables: Promise<void>[] = [];
  try {
    for (const c of cmds) {
      ops++;
      if (c.t === 'reopen') {
        await log.close();
        await Promise.all(durables.splice(0));
        log = await openSegmentedLog(env.dir, env.options);
      } else if (c.t === 'burst') {
        ops += c.steps.length - 1;
        await Promise.all(c.steps.map((s) => issue(log, m, s, durables)));
      } else {
        await issue(log, m, c, durables);
      }
      assert.equal(log.firstIndex, m.first, 'firstIndex');
      assert.equal(log.endIndex, m.end, 'endIndex');
    }
    await log.sync(); // under a lazy policy, staged records become durable only at a sync
    await Promise.all(durables.splice(0));
    sameRecords(await log.read(m.first, Number.MAX_SAFE_INTEGER), m.records, 'final read');
    await log.close();
    // Everything survives a clean reopen.
    log = await openSegmentedLog(env.dir, env.options);
    assert.equal(log.firstIndex, m.first, 'firstIndex after reopen');
    assert.equal(log.endIndex, m.end, 'endIndex after reopen');
    sameRecords(await log.read(m.first, Number.MAX_SAFE_INTEGER), m.records, 'read after reopen');
  } finally {
    await log.close().catch(() => undefined);
  }
  return ops;
}

const policies: SegmentedLogOptions['sync'][] = ['always', 'none', { everyBytes: 300 }];
const runConfig = fc.record({
  segmentBytes: fc.integer({ min: 64, max: 600 }),
  policy: fc.constantFrom(...policies),
  cmds: fc.array(cmd, { minLength: 20, maxLength: 80 }),
});

test('model: random operations on the real file system agree with an array model', async () => {
  let total = 0;
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(runConfig, async ({ segmentBytes, policy, cmds }) => {
      const dir = path.join(root, `run-${++runs}`);
      total += await runSequence({ fs: undefined as unknown as FileSystem, dir, options: { segmentBytes, sync: policy } }, cmds);
      fs.rmSync(dir, { recursive: true, force: true });
    }),
    { numRuns: 60 },
  );
  console.log(`model (real fs): ${runs} runs, ${total} operations`);
  assert.ok(total >= 2000, `ran ${total} operations`);
});

test('model: random operations on MemoryFs agree with an array model', async () => {
  let total = 0;
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(runConfig, async ({ segmentBytes, policy, cmds }) => {
      runs++;
      const mem = new MemoryFs({ trace: false });
      total += await runSequence({ fs: mem, dir: '/data/log', options: { fs: mem, segmentBytes, sync: policy } }, cmds);
    }),
    { numRuns: 400 },
  );
  console.log(`model (MemoryFs): ${runs} runs, ${total} operations`);
  assert.ok(total >= 12000, `ran ${total} operations`);
});
