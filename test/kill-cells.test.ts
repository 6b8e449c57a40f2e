// Real-process crash test of two-slot cells: writer processes (test/support/kill-writer-cells.ts)
// writing four cells concurrently, SIGKILLed at random moments; after every kill each cell must
// read its last acknowledged value or the value of the write in flight — never a torn or older
// one, never CORRUPT — and a second open (and the next writer) must read the same.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { openCell } from '../cells/index.js';
import { runKillCampaign, type KillTarget } from './support/kill-harness.js';
import { KILL_CELLS, KILL_SLOT_BYTES, digestOf, killValue } from './support/kill-records.js';

type Model = (Buffer | null)[];

async function readCell(dir: string, c: number): Promise<Buffer | null> {
  const cell = await openCell(path.join(dir, `c${c}.cell`), { slotBytes: KILL_SLOT_BYTES });
  try {
    const v = await cell.read();
    return v === null ? null : Buffer.from(v);
  } finally {
    await cell.close();
  }
}

const show = (v: Buffer | null): string => (v === null ? 'nothing' : `${v.length} bytes "${v.subarray(0, 14).toString('latin1')}"`);

const target: KillTarget<Model> = {
  name: 'cells',
  writer: new URL('./support/kill-writer-cells.js', import.meta.url),
  initialModel: () => Array.from({ length: KILL_CELLS }, () => null),
  async check(dir, model, ledger, life) {
    const open = ledger.find((e) => e.t === 'open');
    if (open !== undefined) assert.deepEqual(open['cells'], model.map(digestOf), 'the writer found what the last check left');
    const acked = [...model];
    const inFlight: (Buffer | undefined)[] = Array.from({ length: KILL_CELLS }, () => undefined);
    const pending = new Map<number, Buffer>();
    for (const e of ledger) {
      const c = e['c'] as number;
      const seq = e['seq'] as number;
      if (e.t === 'begin') {
        assert.equal(inFlight[c], undefined, `cell ${c}: two writes in flight`);
        const v = killValue(life, c, seq, e['len'] as number);
        pending.set(seq, v);
        inFlight[c] = v;
      } else if (e.t === 'ack') {
        acked[c] = pending.get(seq) ?? assert.fail(`ack of write ${seq} that never began`);
        inFlight[c] = undefined;
      }
    }
    const next: Model = [];
    for (let c = 0; c < KILL_CELLS; c++) {
      const got = await readCell(dir, c);
      const a = acked[c] ?? null;
      const f = inFlight[c];
      const ok = (got === null ? a === null : a !== null && got.equals(a)) || (f !== undefined && got !== null && got.equals(f));
      assert.ok(ok, `cell ${c} reads ${show(got)}; acknowledged ${show(a)}, in flight ${f === undefined ? 'nothing' : show(f)}`);
      const again = await readCell(dir, c);
      assert.ok(again === null ? got === null : got !== null && again.equals(got), `cell ${c}: a second open read ${show(again)} after ${show(got)}`);
      next.push(got);
    }
    return next;
  },
};

test('cells: writer processes SIGKILLed at random moments never lose or tear an acknowledged value', async (t) => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-kill-'));
  try {
    const result = await runKillCampaign(target, { kills: 85, lanes: 2, seed: 1, root });
    t.diagnostic(
      `cells: ${result.kills} real kills (${result.afterReady} after the writer opened its cells), ` +
        `${result.acks} acknowledgements checked, ${(result.elapsedMs / 1000).toFixed(1)} s`,
    );
    assert.equal(result.kills, 85);
    assert.ok(result.afterReady > 40);
    assert.ok(result.acks > 100, `only ${result.acks} acknowledgements`);
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});
