// Real-process crash test of the segmented log: writer processes (test/support/
// kill-writer-segments.ts) SIGKILLed at random moments, each life recovering from the previous
// kill; after every kill the log must reopen holding every acknowledged operation, the operation
// in flight either absent or in effect (an append in flight: a prefix of its records, at least
// through its last acknowledged batch), every record the bytes its writer wrote there, and a
// second open must read the same (as must the next writer at its open).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { openSegmentedLog, type SegmentedLog } from '../segments/index.js';
import { runKillCampaign, type KillTarget, type LedgerEntry } from './support/kill-harness.js';
import { KILL_SEGMENT_BYTES, killRecord } from './support/kill-records.js';

interface Content {
  first: number;
  records: Buffer[];
}

type Op =
  | { op: 'append'; seq: number; batches: number[][]; firsts: number[]; acked: Set<number>; records: Buffer[] }
  | { op: 'truncate' | 'drop' | 'reset'; seq: number; index: number; acked: boolean };

function endOf(c: Content): number {
  return c.first + c.records.length;
}

function apply(c: Content, o: Op): Content {
  switch (o.op) {
    case 'append':
      assert.equal(o.firsts[0], endOf(c), `append ${o.seq} staged at ${o.firsts[0]}, the log ended at ${endOf(c)}`);
      return { first: c.first, records: [...c.records, ...o.records] };
    case 'truncate':
      return o.index >= endOf(c) ? c : { first: c.first, records: c.records.slice(0, o.index - c.first) };
    case 'drop': {
      if (o.index <= c.first) return c;
      const first = Math.min(o.index, endOf(c));
      return { first, records: c.records.slice(first - c.first) };
    }
    case 'reset':
      return { first: o.index, records: [] };
  }
}

function parseOps(ledger: readonly LedgerEntry[], life: number): Op[] {
  const ops: Op[] = [];
  for (const e of ledger) {
    if (e.t === 'begin') {
      const seq = e['seq'] as number;
      if (e['op'] === 'append') {
        const batches = e['batches'] as number[][];
        let j = 0;
        const records = batches.flatMap((lens) => lens.map((len) => killRecord(life, seq, j++, len)));
        ops.push({ op: 'append', seq, batches, firsts: e['firsts'] as number[], acked: new Set(), records });
      } else {
        ops.push({ op: e['op'] as 'truncate' | 'drop' | 'reset', seq, index: e['index'] as number, acked: false });
      }
    } else if (e.t === 'ack') {
      const o = ops[ops.length - 1];
      assert.ok(o !== undefined && o.seq === e['seq'], `an ack of ${String(e['seq'])} that follows no begin of it`);
      if (o.op === 'append') o.acked.add(e['b'] as number);
      else o.acked = true;
    }
  }
  return ops;
}

function same(a: Content, b: Content): boolean {
  return a.first === b.first && a.records.length === b.records.length && a.records.every((r, i) => r.equals(b.records[i]!));
}

async function readAll(log: SegmentedLog): Promise<Content> {
  const records = (await log.read(log.firstIndex, Number.MAX_SAFE_INTEGER)).map((r) => Buffer.from(r));
  assert.equal(log.endIndex, log.firstIndex + records.length);
  return { first: log.firstIndex, records };
}

const show = (c: Content): string => `[${c.first}, ${endOf(c)})`;

const target: KillTarget<Content> = {
  name: 'segments',
  writer: new URL('./support/kill-writer-segments.js', import.meta.url),
  initialModel: () => ({ first: 0, records: [] }),
  async check(dir, model, ledger, life) {
    const open = ledger.find((e) => e.t === 'open');
    if (open !== undefined) {
      assert.deepEqual([open['first'], open['end']], [model.first, endOf(model)], 'the writer found what the last check left');
    }
    const ops = parseOps(ledger, life);
    let expected = model;
    let inFlight: Op | null = null;
    ops.forEach((o, k) => {
      const done = o.op === 'append' ? o.acked.size === o.batches.length : o.acked;
      if (done) expected = apply(expected, o);
      else {
        assert.equal(k, ops.length - 1, 'only the last operation can be in flight');
        inFlight = o;
      }
    });
    const log = await openSegmentedLog(dir, { segmentBytes: KILL_SEGMENT_BYTES });
    const got = await readAll(log);
    await log.close();
    let ok = same(got, expected);
    const o = inFlight as Op | null;
    if (!ok && o !== null) {
      if (o.op !== 'append') ok = same(got, apply(expected, o));
      else if (got.first === expected.first && got.records.length >= expected.records.length) {
        // A prefix of the burst, reaching at least through every acknowledged batch.
        const extra = got.records.length - expected.records.length;
        let floor = 0;
        for (const b of o.acked) floor = Math.max(floor, o.firsts[b]! - o.firsts[0]! + o.batches[b]!.length);
        ok =
          extra >= floor &&
          extra <= o.records.length &&
          expected.records.every((r, i) => r.equals(got.records[i]!)) &&
          got.records.slice(expected.records.length).every((r, i) => r.equals(o.records[i]!));
      }
    }
    assert.ok(ok, `reopened ${show(got)}; acknowledged ${show(expected)}; in flight: ${o === null ? 'nothing' : `${o.op} ${o.seq}`}`);
    const again = await openSegmentedLog(dir, { segmentBytes: KILL_SEGMENT_BYTES });
    const second = await readAll(again);
    await again.close();
    assert.ok(same(second, got), `a second open read ${show(second)} after ${show(got)}`);
    return got;
  },
};

test('segmented log: writer processes SIGKILLed at random moments lose nothing acknowledged', async (t) => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-kill-'));
  try {
    const result = await runKillCampaign(target, { kills: 120, lanes: 2, seed: 1, root });
    t.diagnostic(
      `segments: ${result.kills} real kills (${result.afterReady} after the writer opened its log), ` +
        `${result.acks} acknowledgements checked, ${result.ledgerLines} ledger lines, ${(result.elapsedMs / 1000).toFixed(1)} s`,
    );
    assert.equal(result.kills, 120);
    assert.ok(result.afterReady > 50);
    assert.ok(result.acks > 100, `only ${result.acks} acknowledgements`);
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});
