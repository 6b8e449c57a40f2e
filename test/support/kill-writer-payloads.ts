// Kill-harness writer for the payload store (./kill-harness.ts, test/payloads-kill.test.ts), and
// the pure functions its checker shares with it (exported; the writer runs only when this file is
// the process's main module).
//
// Owns: the writer's protocol. It opens the store (grace 0: a collection removes every payload
// nobody holds, unless a restart made it look younger than the store's clock), reports what it
// found, then runs rounds until it is killed: either one collection alone, or one to three tasks
// at once on distinct payloads — a put of new bytes (0 bytes to 2.5 MiB, streamed in pieces of
// random sizes), often followed by an addRef; a second put of stored bytes, streamed from `get`
// (the rename over the existing copy while it is read); an addRef; a removeRef. So the operations
// on one payload never overlap, and nothing overlaps a collection. Ledger lines (./kill-child.ts):
//   {t:'open', state, shows}            what the store holds (see `fingerprintOf`)
//   {t:'begin', seq, op, d, ...}        before the operation is issued: op 'put' with the bytes'
//                                       `life`/`seq`/`size` (new bytes) or `again`, 'add' and
//                                       'remove' with the holder `h`, 'gc'
//   {t:'ack', seq}                      after it resolved
// An error of any operation ends the writer (the harness fails the test with its stderr).

import { createHash } from 'node:crypto';
import { setImmediate as yieldTurn } from 'node:timers/promises';
import { pathToFileURL } from 'node:url';
import { randomInt } from '../../lib/crash/determinism.js';
import { openPayloadStore, type FsPayloadStore } from '../../lib/payloads/index.js';
import { ledger, runWriter, writerArgs } from './kill-child.js';

/** Store options of the writer and of the checker. */
export const PAYLOAD_KILL_OPTIONS = { graceMs: 0, chunkBytes: 16 * 1024 } as const;
export const PAYLOAD_KILL_HOLDERS = ['q1', 'q2', 'q3'] as const;

/** Byte `i` of the payload put as operation `seq` of life `life`. */
function byteAt(life: number, seq: number, i: number): number {
  return (Math.imul(i + 1, 2654435761) ^ Math.imul(life * 7919 + seq, 40503) ^ (i >>> 11)) & 0xff;
}

/** Bytes [at, at + n) of that payload. */
export function payloadBytes(life: number, seq: number, at: number, n: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = byteAt(life, seq, at + i);
  return b;
}

/** The digest of that payload of `size` bytes, computed 256 KiB at a time. */
export function payloadDigest(life: number, seq: number, size: number): string {
  const hash = createHash('sha256');
  for (let at = 0; at < size; at += 1 << 18) hash.update(payloadBytes(life, seq, at, Math.min(1 << 18, size - at)));
  return 'sha256:' + hash.digest('hex');
}

/** What the store holds: for each payload listed, its holders (sorted). */
export type PayloadView = Map<string, string[]>;

/** Lists every stored payload and the holders of every listed payload. */
export async function viewOf(store: FsPayloadStore): Promise<PayloadView> {
  const view: PayloadView = new Map();
  for await (const d of store.digests()) view.set(d, [...(await store.refs(d))].sort());
  return view;
}

/** A canonical rendering of a view, and a short fingerprint of it. */
export function renderView(view: ReadonlyMap<string, readonly string[]>): string {
  return [...view].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([d, h]) => `${d.slice(7, 19)}[${h.join(',')}]`).join(' ');
}

export function fingerprintOf(view: ReadonlyMap<string, readonly string[]>): string {
  return createHash('sha256').update(renderView(view)).digest('hex').slice(0, 20);
}

// ---------------------------------------------------------------------------------------------
// The writer

async function main(): Promise<void> {
  const { dir, life, random } = writerArgs();
  const store = await openPayloadStore(dir, PAYLOAD_KILL_OPTIONS);
  let view = await viewOf(store);
  ledger({ t: 'open', state: fingerprintOf(view), shows: `${view.size} payloads` });
  let seq = 0;
  /** Payloads an operation of the current round works on: no two operations on one payload overlap. */
  const busy = new Set<string>();
  /** Runs one operation between its begin and ack lines. */
  const operate = async (s: number, line: Record<string, unknown>, work: () => Promise<unknown>): Promise<void> => {
    ledger({ t: 'begin', seq: s, ...line });
    await work();
    ledger({ t: 'ack', seq: s });
  };
  const size = (): number => {
    const x = random();
    if (x < 0.05) return 0;
    if (x < 0.3) return randomInt(random, 1, 100);
    if (x < 0.65) return randomInt(random, 101, 64 * 1024);
    if (x < 0.93) return randomInt(random, 64 * 1024, 600 * 1024);
    return randomInt(random, 1 << 20, 5 << 19);
  };
  async function* body(opSeq: number, total: number): AsyncGenerator<Uint8Array> {
    for (let at = 0; at < total; ) {
      const n = Math.min(total - at, random() < 0.5 ? randomInt(random, 1, 4096) : randomInt(random, 4096, 256 * 1024));
      yield payloadBytes(life, opSeq, at, n);
      at += n;
      if (random() < 0.3) await yieldTurn();
    }
  }
  /** A put of new bytes (the same as stored ones only by chance: tiny or empty), then often an addRef. */
  const newPut = async (refChance: number): Promise<void> => {
    const s = ++seq;
    let bytes = size();
    let d = payloadDigest(life, s, bytes);
    while (busy.has(d)) d = payloadDigest(life, s, ++bytes);
    busy.add(d);
    await operate(s, { op: 'put', d, life, seq: s, size: bytes }, async () => {
      const info = await store.put(body(s, bytes));
      if (info.digest !== d || info.size !== bytes) throw new Error(`put answered ${info.digest} (${info.size} bytes), expected ${d} (${bytes})`);
    });
    const held = view.get(d) ?? [];
    view.set(d, held);
    if (random() < refChance) {
      const h = PAYLOAD_KILL_HOLDERS[randomInt(random, 0, PAYLOAD_KILL_HOLDERS.length - 1)]!;
      await operate(++seq, { op: 'add', d, h }, () => store.addRef(d, h));
      if (!held.includes(h)) held.push(h);
      held.sort();
    }
  };
  for (;;) {
    if (random() < 0.08) {
      await operate(++seq, { op: 'gc' }, () => store.collectGarbage());
      view = await viewOf(store);
      continue;
    }
    busy.clear();
    const tasks: Promise<void>[] = [];
    // Few payloads held at a time (a check reads back every stored payload): past six, mostly removes.
    const heldCount = [...view.values()].filter((h) => h.length > 0).length;
    for (let k = randomInt(random, 1, 3); k > 0; k--) {
      const free = [...view.keys()].filter((d) => !busy.has(d));
      const freeHeld = free.filter((d) => view.get(d)!.length > 0);
      const x = random();
      if (x < 0.35 || free.length === 0 || (x >= 0.7 && freeHeld.length === 0)) {
        tasks.push(newPut(heldCount < 6 ? 0.75 : 0.2));
        continue;
      }
      const d = x < 0.7 ? free[randomInt(random, 0, free.length - 1)]! : freeHeld[randomInt(random, 0, freeHeld.length - 1)]!;
      busy.add(d);
      const held = view.get(d)!;
      if (x < 0.45) {
        tasks.push(
          operate(++seq, { op: 'put', d, again: true }, async () => {
            const info = await store.put(await store.get(d));
            if (info.digest !== d) throw new Error(`a second put of ${d} answered ${info.digest}`);
          }),
        );
      } else if (x < 0.7) {
        const h = PAYLOAD_KILL_HOLDERS[randomInt(random, 0, PAYLOAD_KILL_HOLDERS.length - 1)]!;
        tasks.push(
          operate(++seq, { op: 'add', d, h }, () => store.addRef(d, h)).then(() => {
            if (!held.includes(h)) held.push(h);
            held.sort();
          }),
        );
      } else {
        const h = held[randomInt(random, 0, held.length - 1)]!;
        tasks.push(operate(++seq, { op: 'remove', d, h }, () => store.removeRef(d, h)).then(() => void held.splice(held.indexOf(h), 1)));
      }
    }
    await Promise.all(tasks);
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) runWriter(main);
