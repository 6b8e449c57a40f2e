// The payload store against real process kills: writer processes
// (test/support/kill-writer-payloads.ts) put payloads of 0 bytes to 2.5 MiB (streamed), put stored
// bytes again (streamed from `get`), add and remove holders, and collect garbage in a real
// temporary directory, and are SIGKILLed at random moments (inside their open, or with one to
// three operations in flight). After every kill a checker in this process reopens the store and
// requires, from the ledger of what the writer had acknowledged:
// - every payload whose put was acknowledged is listed, unless a collection began after that
//   acknowledgement while it had no holder; a payload with an acknowledged holder is never gone;
// - every listed payload is one some writer put, and reads back whole, byte-exact under its digest
//   (its length and SHA-256, computed here from what `get` serves): nothing torn is ever served;
// - each payload's holders are the acknowledged set, or the set the operation in flight on it was
//   making; `verify` finds no problem (no holder without bytes, every refcount file well formed);
//   no temporary file survives open;
// - a second open shows the same: the next life's writer must report exactly that at its open
//   (a life killed before its open must leave exactly that), and each lane's last life is opened
//   once more at the end.
// Writers run from a private copy of dist/ (other engineers rebuild dist/ meanwhile).
// Prints one line: kills, acknowledgements, operations, bytes read back.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import * as os from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { openPayloadStore, type FsPayloadStore } from '../lib/payloads/index.js';
import { snapshotBuild } from './support/snapshot-build.js';
import { runKillCampaign, type KillTarget, type LedgerEntry } from './support/kill-harness.js';
import { PAYLOAD_KILL_OPTIONS, fingerprintOf, renderView, viewOf, type PayloadView } from './support/kill-writer-payloads.js';

const KILLS = Number(process.env['SEGLOG_PAYLOAD_KILLS'] ?? 100);
const SEED = Number(process.env['SEGLOG_PAYLOAD_KILL_SEED'] ?? 1);

/** What the last check found (the next life's writer must find it), and every digest ever put with its size. */
interface Model {
  view: PayloadView;
  sizes: Map<string, number>;
}

type Op = { seq: number; op: 'put' | 'add' | 'remove' | 'gc'; d: string; h: string; acked: boolean };

const stats = { acks: 0, ops: 0, inFlight: 0, bytesRead: 0, payloadsRead: 0, counts: {} as Record<string, number>, checkMs: 0 };
const lastSeen = new Map<string, Model>();

async function openStore(dir: string): Promise<FsPayloadStore> {
  return openPayloadStore(dir, PAYLOAD_KILL_OPTIONS);
}

function parseLedger(ledger: readonly LedgerEntry[], sizes: Map<string, number>): Op[] {
  const ops: Op[] = [];
  const bySeq = new Map<number, Op>();
  for (const e of ledger) {
    if (e.t === 'begin') {
      const op: Op = { seq: e['seq'] as number, op: (e['op'] === 'put' ? 'put' : e['op']) as Op['op'], d: (e['d'] as string | undefined) ?? '', h: (e['h'] as string | undefined) ?? '', acked: false };
      if (op.op === 'put' && e['again'] !== true && !sizes.has(op.d)) sizes.set(op.d, e['size'] as number);
      ops.push(op);
      bySeq.set(op.seq, op);
    } else if (e.t === 'ack') {
      const op = bySeq.get(e['seq'] as number);
      assert.ok(op !== undefined, `an ack of ${String(e['seq'])} that follows no begin of it`);
      op.acked = true;
    }
  }
  return ops;
}

/** Per payload: the holder sets allowed, and whether it must be listed. */
interface Allowed {
  holders: Set<string>;
  mustExist: boolean;
  mayExist: boolean;
}

function allowedStates(model: Model, ops: readonly Op[]): Map<string, Allowed> {
  const holders = new Map<string, string[]>();
  const inFlight = new Map<string, Op>();
  const safe = new Set<string>();
  const may = new Set<string>();
  for (const [d, h] of model.view) {
    holders.set(d, [...h]);
    safe.add(d);
    may.add(d);
  }
  for (const op of ops) {
    if (op.op === 'gc') {
      // A collection (it runs alone) may remove what nobody durably holds when it begins.
      for (const d of [...safe]) if ((holders.get(d) ?? []).length === 0) safe.delete(d);
      continue;
    }
    assert.ok(!inFlight.has(op.d), `two operations on ${op.d} overlap (the writer keeps them apart)`);
    if (!op.acked) {
      inFlight.set(op.d, op);
      if (op.op === 'put') may.add(op.d);
      continue;
    }
    const h = holders.get(op.d) ?? [];
    if (op.op === 'put') {
      safe.add(op.d);
      may.add(op.d);
    } else if (op.op === 'add') {
      if (!h.includes(op.h)) h.push(op.h);
    } else {
      const at = h.indexOf(op.h);
      if (at >= 0) h.splice(at, 1);
    }
    holders.set(op.d, h.sort());
  }
  const out = new Map<string, Allowed>();
  for (const d of new Set([...holders.keys(), ...may])) {
    const h = holders.get(d) ?? [];
    const options = new Set([h.join(',')]);
    const f = inFlight.get(d);
    if (f?.op === 'add') options.add([...new Set([...h, f.h])].sort().join(','));
    if (f?.op === 'remove') options.add(h.filter((x) => x !== f.h).join(','));
    // An acknowledged holder keeps its payload: nothing collects a payload with a holder.
    const held = [...options].every((o) => o !== '');
    out.set(d, { holders: options, mustExist: safe.has(d) || held, mayExist: may.has(d) || held });
  }
  return out;
}

/** Reads a payload whole; answers its length and SHA-256 as `get` served them. */
async function readBack(store: FsPayloadStore, d: string): Promise<{ size: number; digest: string }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of await store.get(d)) {
    hash.update(chunk);
    size += chunk.length;
  }
  return { size, digest: 'sha256:' + hash.digest('hex') };
}

async function checkLife(dir: string, model: Model, ledger: readonly LedgerEntry[]): Promise<Model> {
  const open = ledger.find((e) => e.t === 'open');
  if (open !== undefined) assert.equal(open['state'], fingerprintOf(model.view), `the writer found ${String(open['shows'])} (${String(open['state'])}), the last check left ${renderView(model.view)}`);
  const sizes = new Map(model.sizes);
  const ops = parseLedger(ledger, sizes);
  stats.ops += ops.length;
  stats.acks += ops.filter((o) => o.acked).length;
  if (ops.some((o) => !o.acked)) stats.inFlight++;
  for (const o of ops) stats.counts[o.op] = (stats.counts[o.op] ?? 0) + 1;
  const allowed = allowedStates(model, ops);
  const store = await openStore(dir);
  let view: PayloadView;
  try {
    const leftovers = await readdir(join(dir, 'tmp'));
    assert.deepEqual(leftovers, [], 'no temporary file survives open');
    view = await viewOf(store);
    for (const [d, h] of view) {
      const size = sizes.get(d);
      assert.ok(size !== undefined, `the store lists ${d}, which no writer put`);
      const a = allowed.get(d);
      assert.ok(a?.mayExist === true, `${d} is listed, but it was gone and no put of it began since`);
      let got: { size: number; digest: string };
      try {
        got = await readBack(store, d);
      } catch (err) {
        throw new Error(`${d} is listed but does not read back whole (torn?): ${err instanceof Error ? err.message : String(err)}`);
      }
      assert.deepEqual(got, { size, digest: d }, `${d} does not read back byte-exact`);
      stats.bytesRead += got.size;
      stats.payloadsRead++;
      assert.ok(a.holders.has(h.join(',')), `${d} is held by [${h.join(',')}], allowed: ${[...a.holders].map((x) => `[${x}]`).join(' or ')}`);
    }
    for (const [d, a] of allowed) {
      if (a.mustExist) assert.ok(view.has(d), `${d} is gone, but its put was acknowledged with no collection since, or it has an acknowledged holder`);
      if (!view.has(d)) {
        const h = await store.refs(d);
        assert.deepEqual(h, [], `${d} is not stored but has holders`);
        assert.ok(a.holders.has(''), `${d} is gone, but holders were acknowledged`);
      }
    }
    const report = await store.verify();
    assert.deepEqual(report.problems, [], 'verify finds no problem');
    assert.equal(report.payloads, view.size);
  } finally {
    await store.close();
  }
  return { view, sizes };
}

const target: KillTarget<Model> = {
  name: 'payloads',
  writer: new URL('./support/kill-writer-payloads.js', import.meta.url), // replaced by the snapshot's copy
  initialModel: () => ({ view: new Map(), sizes: new Map() }),
  async check(dir, model, ledger) {
    const started = performance.now();
    try {
      const next = await checkLife(dir, model, ledger);
      lastSeen.set(dir, next);
      return next;
    } finally {
      stats.checkMs += performance.now() - started;
    }
  },
};

test(`payload store: ${KILLS} SIGKILLs of writers with puts, references and collections in flight`, { timeout: 300_000 }, async (t) => {
  const root = await mkdtemp(join(os.tmpdir(), 'seglog-payloads-kill-'));
  try {
    const writer = await snapshotBuild(root, 'kill-writer-payloads.js', [join('lib', 'payloads', 'store.js'), join('test', 'support', 'kill-writer-payloads.js')]);
    const result = await runKillCampaign({ ...target, writer: pathToFileURL(writer) }, { kills: KILLS, lanes: 2, seed: SEED, root, maxRunMs: 80 });
    // The second open of each lane's last life (every earlier life's is the next writer's open).
    for (const [dir, seen] of lastSeen) {
      const store = await openStore(dir);
      try {
        assert.equal(renderView(await viewOf(store)), renderView(seen.view), `${dir}: a second open shows something else`);
      } finally {
        await store.close();
      }
    }
    const held = [...lastSeen.values()].reduce((n, m) => n + [...m.view.values()].filter((h) => h.length > 0).length, 0);
    const line =
      `payloads kill test (seed ${SEED}): ${result.kills} kills (${result.afterReady} after the writer opened its store, ${result.kills - result.afterReady} before or inside its open), ` +
      `${stats.acks} acknowledged operations of ${stats.ops} issued (${Object.entries(stats.counts).map(([k, v]) => `${v} ${k}`).join(', ')}), ` +
      `${stats.inFlight} kills with operations in flight, ${stats.payloadsRead} payloads (${(stats.bytesRead / 2 ** 20).toFixed(1)} MiB) read back byte-exact, ` +
      `${held} held payloads at the end, ${(result.elapsedMs / 1000).toFixed(1)} s (checks ${(stats.checkMs / 1000).toFixed(1)} s)`;
    t.diagnostic(line);
    console.log(line);
    assert.equal(result.kills, KILLS);
    assert.ok(result.afterReady >= KILLS / 2, `only ${result.afterReady} kills after the writer was ready`);
    assert.ok(stats.acks > KILLS, `only ${stats.acks} acknowledgements`);
    assert.ok(stats.inFlight > KILLS / 3, `only ${stats.inFlight} kills with operations in flight`);
    for (const op of ['put', 'add', 'remove', 'gc']) assert.ok((stats.counts[op] ?? 0) > 0, `the writers issued ${op}`);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
