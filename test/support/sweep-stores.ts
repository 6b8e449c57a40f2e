// The corruption sweep's subjects for the primitives and the payload store: a segmented log, a
// standalone two-slot cell, a payload store. Each writes a golden state through the store's own
// API, closes it cleanly (so every write is acknowledged), and reads everything back as keys
// (test/support/sweep.ts, `Observed`). Also the byte-layout helpers the other subjects share
// (`cellHints`, `segmentHints`, `digestOf`).

import { createHash } from 'node:crypto';
import { openCell } from '../../cells/index.js';
import { ManualClock } from '../../lib/clock.js';
import { MemoryFs } from '../../lib/fs/memory.js';
import type { FileSystem } from '../../lib/fs/types.js';
import { openPayloadStore } from '../../lib/payloads/index.js';
import { openSegmentedLog } from '../../segments/index.js';
import type { Observed, SweepSubject } from './sweep.js';

const te = new TextEncoder();

/** A short, exact name of some bytes: their length and a prefix of their SHA-256. */
export function digestOf(bytes: Uint8Array): string {
  return `${bytes.length}b:${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}`;
}

function u32(bytes: Uint8Array, at: number): number {
  return at + 4 <= bytes.length ? new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(at, true) : 0;
}

/**
 * The fields of every unit of a two-slot cell file: each unit's start (the slot header's magic,
 * slotBytes, length and slot CRC in a slot's first unit), its stamp and its CRC, the value's first
 * byte, and the last byte of each slot — in both slots, live and dead.
 */
export function cellHints(size: number, slotBytes: number): number[] {
  const unit = slotBytes >= 512 ? 512 : slotBytes;
  const out: number[] = [];
  for (let slot = 0; slot * slotBytes < size; slot++) {
    const s = slot * slotBytes;
    out.push(s, s + 4, s + 8, s + 12, s + 16, s + 17, s + slotBytes - 1);
    for (let u = s; u < s + slotBytes; u += unit) out.push(u, u + unit - 12, u + unit - 8, u + unit - 4);
  }
  return out;
}

/**
 * A segment file's header fields and every frame's CRC, length, index and payload start, with the
 * frames found by walking their lengths (stopping at the first that does not fit); the frame
 * positions of the last frames come first in the walk's order only by offset, all are listed.
 */
export function segmentHints(bytes: Uint8Array): number[] {
  const out = [0, 4, 6, 8, 16, 24, 32, 36];
  let at = 40;
  while (at + 16 <= bytes.length) {
    const len = u32(bytes, at + 4);
    const index = u32(bytes, at + 8);
    if (len === 0 && index === 0 && u32(bytes, at) === 0) break;
    if (at + 16 + len > bytes.length) break;
    out.push(at, at + 4, at + 8, at + 16, at + 16 + Math.floor(len / 2), at + 15 + len);
    at += 16 + len;
  }
  out.push(at);
  return out;
}

/** An index file's header fields and a spread of its offsets. */
export function indexHints(bytes: Uint8Array): number[] {
  const out = [0, 4, 8, 16, 24, 28, 32, 36, 40];
  const count = u32(bytes, 24);
  for (let k = 0; k < Math.min(count, 4096); k += Math.max(1, Math.floor(count / 8))) out.push(36 + 4 * k);
  out.push(36 + 4 * Math.max(0, count - 1));
  return out;
}

/** The hints of any file of a segmented log directory. */
export function logFileHints(path: string, bytes: Uint8Array): number[] {
  if (path.endsWith('/MANIFEST')) return cellHints(bytes.length, 8192);
  if (path.endsWith('.seg')) return segmentHints(bytes);
  if (path.endsWith('.idx')) return indexHints(bytes);
  return [];
}

/** The file kind of a path inside a segmented log directory, or null. */
export function logFileKind(path: string): string | null {
  if (path.endsWith('/MANIFEST')) return 'MANIFEST';
  if (path.endsWith('/LOCK')) return 'LOCK';
  if (path.endsWith('.seg')) return 'segment';
  if (path.endsWith('.idx')) return 'index';
  return null;
}

/** Reads a whole segmented log's records into `out` as `<prefix>rec:<index>`. */
export async function observeLogRecords(log: { firstIndex: number; endIndex: number; read(from: number, limit: number): Promise<Uint8Array[]> }, out: Observed, prefix: string): Promise<void> {
  out.set(`${prefix}first`, String(log.firstIndex));
  out.set(`${prefix}end`, String(log.endIndex));
  for (let i = log.firstIndex; i < log.endIndex; ) {
    const got = await log.read(i, 64);
    if (got.length === 0) throw new Error(`read(${i}) answered nothing inside [${log.firstIndex}, ${log.endIndex})`);
    for (const r of got) out.set(`${prefix}rec:${i++}`, digestOf(r));
  }
}

function without(state: Observed, drop: (key: string) => boolean): Observed {
  return new Map([...state].filter(([k]) => !drop(k)));
}

// ---------------------------------------------------------------------------------------------
// A segmented log: several sealed segments, a truncated one, dropped ones, an active one.

const LOG_DIR = '/s/log';
const LOG_OPTIONS = { segmentBytes: 1024 };

function logRecord(i: number): Uint8Array {
  const b = new Uint8Array(1 + ((i * 37) % 150));
  for (let k = 0; k < b.length; k++) b[k] = (i * 13 + k * 7) & 0xff;
  return b;
}

export function segmentedLogSubject(): SweepSubject {
  return {
    store: 'segmented-log',
    errors: 'seglog',
    async build() {
      const fs = new MemoryFs({ trace: false });
      const log = await openSegmentedLog(LOG_DIR, { ...LOG_OPTIONS, fs });
      for (let i = 0; i < 40; i++) await log.append([logRecord(i)]);
      await log.truncateAfter(33); // removes [33, 40): acknowledged removed
      await log.append([logRecord(100), logRecord(101), logRecord(102)]);
      await log.dropBefore(6); // removes [0, 6)
      for (let i = 0; i < 30; i += 3) await log.append([logRecord(200 + i), logRecord(201 + i), logRecord(202 + i)]);
      await log.close();
      const image = fs.currentImage();
      const acknowledged = await this.observe(new MemoryFs({ image, trace: false }));
      // The model: [6, 33) of the first 40, then 100..102, then 200..229.
      const model = [...Array.from({ length: 27 }, (_, k) => logRecord(6 + k)), logRecord(100), logRecord(101), logRecord(102), ...Array.from({ length: 30 }, (_, k) => logRecord(200 + k))];
      const want: Observed = new Map([['first', '6'], ['end', String(6 + model.length)]]);
      model.forEach((r, k) => want.set(`rec:${6 + k}`, digestOf(r)));
      if ([...want].join() !== [...acknowledged].join()) throw new Error('segmented-log: the golden log reads back other than the model');
      return { image, acknowledged };
    },
    fileKind: logFileKind,
    hints: logFileHints,
    async observe(fs: FileSystem) {
      const out: Observed = new Map();
      const log = await openSegmentedLog(LOG_DIR, { ...LOG_OPTIONS, fs });
      try {
        await observeLogRecords(log, out, '');
      } finally {
        await log.close();
      }
      return out;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Standalone cells: one of each unit shape (one-unit 64-byte slots, 512-byte sectors, 4 KiB
// slots), each written several times so both slots hold values.

const CELLS = [
  { path: '/c/small', slotBytes: 64, values: ['a', 'bb', 'small final'] },
  { path: '/c/sector', slotBytes: 512, values: ['one', 'two', 'three'.repeat(40)] },
  { path: '/c/default', slotBytes: 4096, values: ['x'.repeat(3000), 'y'.repeat(1200), 'z'.repeat(2500), 'final'.repeat(300)] },
];

export function cellSubject(): SweepSubject {
  return {
    store: 'cell',
    errors: 'seglog',
    async build() {
      const fs = new MemoryFs({ image: { dirs: ['/c'], files: {} }, trace: false });
      for (const c of CELLS) {
        const cell = await openCell(c.path, { fs, slotBytes: c.slotBytes });
        for (const v of c.values) await cell.write(te.encode(v));
        await cell.close();
      }
      const image = fs.currentImage();
      const acknowledged = await this.observe(new MemoryFs({ image, trace: false }));
      for (const c of CELLS) if (acknowledged.get(c.path) !== digestOf(te.encode(c.values.at(-1)!))) throw new Error(`cell: ${c.path} reads back other than its last write`);
      return { image, acknowledged };
    },
    fileKind(path: string) {
      const c = CELLS.find((x) => x.path === path);
      return c === undefined ? null : `cell ${c.slotBytes}-byte slots`;
    },
    hints(path: string, bytes: Uint8Array) {
      return cellHints(bytes.length, CELLS.find((x) => x.path === path)!.slotBytes);
    },
    absentState(path: string, acknowledged: Observed) {
      // A standalone cell is one file: without it, the cell was never written.
      return without(acknowledged, (k) => k === path);
    },
    async observe(fs: FileSystem) {
      const out: Observed = new Map();
      for (const c of CELLS) {
        const cell = await openCell(c.path, { fs, slotBytes: c.slotBytes });
        try {
          const v = await cell.read();
          if (v !== null) out.set(c.path, digestOf(v)); // a value gone is lost
        } finally {
          await cell.close();
        }
      }
      return out;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// A payload store: blobs of several sizes (empty, one chunk, several chunks), holder sets, CLOCK.

const PAYLOAD_DIR = '/p';
const PAYLOAD_OPTIONS = { graceMs: 60_000, chunkBytes: 256 };

function payloadBody(n: number, size: number): Uint8Array {
  const b = new Uint8Array(size);
  for (let k = 0; k < size; k++) b[k] = (n * 29 + k * 3) & 0xff;
  return b;
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

/** Reads every byte of a payload back (a stream's error is the caller's). */
export async function readPayload(get: Promise<AsyncIterable<Uint8Array>>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const chunk of await get) parts.push(chunk);
  return Buffer.concat(parts);
}

export function payloadSubject(): SweepSubject {
  const digests: string[] = [];
  return {
    store: 'payloads',
    errors: 'seglog',
    async build() {
      const fs = new MemoryFs({ trace: false });
      const clock = new ManualClock(1_000);
      const store = await openPayloadStore(PAYLOAD_DIR, { ...PAYLOAD_OPTIONS, fs, clock });
      const sizes = [0, 100, 700, 1500];
      for (let n = 0; n < sizes.length; n++) {
        const info = await store.put(once(payloadBody(n, sizes[n]!)));
        digests.push(info.digest);
        if (n > 0) await store.addRef(info.digest, `holder-${n}`);
        if (n > 1) await store.addRef(info.digest, `second-${n}`);
      }
      await store.removeRef(digests[3]!, 'second-3');
      clock.advance(5_000);
      await store.close();
      const image = fs.currentImage();
      return { image, acknowledged: await this.observe(new MemoryFs({ image, trace: false })) };
    },
    fileKind(path: string) {
      const rel = path.slice(PAYLOAD_DIR.length + 1);
      if (rel === 'FORMAT' || rel === 'CLOCK' || rel === 'LOCK') return rel;
      if (rel.startsWith('blobs/')) return 'blob';
      if (rel.startsWith('refs/')) return 'refcount';
      return null;
    },
    hints(path: string, bytes: Uint8Array) {
      const rel = path.slice(PAYLOAD_DIR.length + 1);
      if (rel === 'CLOCK') return cellHints(bytes.length, 64);
      if (rel === 'FORMAT') return [0, 8, 12];
      if (rel.startsWith('refs/')) return [0, 8, 12, 16, 48, 50, bytes.length - 4];
      const out = [0, 8, 12, 16, 24, 32, 40, 72, 76, 80];
      for (let at = 80; at < bytes.length; at += PAYLOAD_OPTIONS.chunkBytes + 4) out.push(at, Math.min(bytes.length - 4, at + PAYLOAD_OPTIONS.chunkBytes));
      return out;
    },
    absentState(path: string, acknowledged: Observed) {
      const hex = path.slice(path.lastIndexOf('/') + 1, path.lastIndexOf('/') + 13);
      // An empty holder set has no file; a payload without holders may have been collected. A
      // payload that has holders cannot be gone (addRef needs it, collection skips it).
      if (path.includes('/refs/')) return without(acknowledged, (k) => k === `refs ${hex}`);
      if (acknowledged.has(`refs ${hex}`)) return null;
      return without(acknowledged, (k) => k === `stat ${hex}` || k === `bytes ${hex}`);
    },
    async observe(fs: FileSystem) {
      const out: Observed = new Map();
      const store = await openPayloadStore(PAYLOAD_DIR, { ...PAYLOAD_OPTIONS, fs, clock: new ManualClock(1_000) });
      try {
        out.set('store time', String(store.storeTime()));
        for (const d of digests) {
          const info = await store.stat(d);
          // Absent answers leave their key out: a blob or holder set that is gone is lost.
          if (info !== null) out.set(`stat ${d.slice(7, 19)}`, `${info.size}`);
          if (info !== null) out.set(`bytes ${d.slice(7, 19)}`, digestOf(await readPayload(store.get(d))));
          const refs = await store.refs(d);
          if (refs.length > 0) out.set(`refs ${d.slice(7, 19)}`, refs.join(','));
        }
      } finally {
        await store.close();
      }
      return out;
    },
  };
}
