// The fs host store's checkpointer: moves what the stripes hold into the scopes' homes, so that
// stripe files can be removed and every handle's view stays small.
//
// Owns: `checkpointRound`. One round runs at a time in the realm (it holds `checkpoint.lock`,
// try-lock: a handle that finds it taken skips the round). It never takes a stripe lock, so it
// never holds up a commit. Guarantees, in the order the bytes reach the disk:
// 1. It reads every stripe up to its published note (the cut): only durable, published records.
// 2. For each scope those records touch it computes the visible state with the same rule every
//    load uses (view.ts), and moves the scope's home to it: rows and blobs written and synced, new
//    names directory-synced, then the home cell written (its commit point), then files the cell
//    no longer names removed. A home only ever moves forward (a version it already has is skipped),
//    so a round cut short by a crash is simply done again.
// 3. Only then does it write the checkpoint cell: per stripe, the position before which every
//    record is in the homes (the first record still pending — building on a version not read yet —
//    holds its stripe's position back).
// 4. Then it removes stripe files wholly before the new positions (a crash that loses the unlink
//    leaves a file no one reads: every reader starts at the checkpoint).

import * as path from 'node:path';
import { openCell } from '../../../cells/index.js';
import { CHECKPOINT_FILE, CHECKPOINT_LOCK_FILE, decodeCheckpoint, encodeCheckpoint, parseStripeFileName, type Position } from './format.js';
import { DirSyncs, HomeBuilder, readHomeCell, type HomeCell } from './home.js';
import { forEachLimited, type RealmHandle } from './realm.js';
import type { Stripe } from './stripe.js';
import { stripeDir } from './stripe-files.js';
import type { ScopeKind } from '../types.js';
import { DEAD, PENDING, View, YES, type Rec, type ScopeEntry, type Verdict } from './view.js';

/** Runs one round if no other handle is running one; answers whether it ran. */
export async function checkpointRound(r: RealmHandle): Promise<boolean> {
  const fs = r.fs;
  const lock = await fs.open(path.join(r.dir, CHECKPOINT_LOCK_FILE), 'create');
  try {
    if (!(await lock.tryLock())) return false;
    const cellFile = path.join(r.dir, CHECKPOINT_FILE);
    const cell = await openCell(cellFile, { fs });
    try {
      const raw = await cell.read();
      if (raw === null) throw new Error(`${cellFile} is missing`);
      const ck = decodeCheckpoint(raw, r.format.stripes, cellFile);
      await r.catchUpAll();
      const cut: Position[] = r.stripes.map((st) => ({ ...st.cursor }));
      // The records of the cut: from the checkpoint to what was just read.
      const records: Rec[][] = r.stripes.map((_, j) => r.view.byStripe[j]!.filter((rec) => rec.lsn >= ck.positions[j]!.lsn && rec.lsn < cut[j]!.lsn));
      const scopes = new Map<string, { kind: ScopeKind; name: string; key: string }>();
      for (const list of records) for (const rec of list) for (const u of rec.updates) if (!scopes.has(u.key)) scopes.set(u.key, u);
      const cells = new Map<string, HomeCell | null>();
      await forEachLimited([...scopes.values()], 16, async (x) => {
        cells.set(x.key, await readHomeCell(fs, r.scopeDir(x)));
      });
      // Which records are visible is the live view's rule over the cut. Without a second candidate
      // for any version (anomalies: never, unless something wrote past the checks), a record is
      // visible exactly when the chains of its scopes reach it, which is when `applyQueues` finds
      // it ready; only what it cannot apply needs the full rule, on a view of the cut.
      let cv: View | null = null;
      const judge = (rec: Rec): Verdict => {
        if (cv === null) {
          cv = new View(r.format.stripes);
          for (const list of records) for (const x of list) cv.add(x);
          for (const e of cv.scopes.values()) cv.setHome(e, cells.get(e.key)?.value ?? null);
        }
        return cv.verdict(rec);
      };
      const positions: Position[] = cut.map((p) => ({ ...p }));
      let queues = records;
      if (r.view.anomalies > 0) {
        // Per stripe, the visible records in stripe order, up to the first one still pending.
        queues = records.map((list, j) => {
          const q: Rec[] = [];
          for (const rec of list) {
            const v = judge(rec);
            if (v === PENDING) {
              positions[j] = { seq: rec.seq, offset: rec.offset, lsn: rec.lsn, fence: rec.fence };
              break;
            }
            if (v === YES) q.push(rec);
          }
          return q;
        });
      }
      await applyQueues(r, scopes, cells, queues, positions, cut.map((p) => p.lsn), judge);
      await cell.write(encodeCheckpoint({ round: ck.round + 1, positions }));
      r.checkpoint = { round: ck.round + 1, positions };
      for (let j = 0; j < r.stripes.length; j++) {
        await removeBefore(r, j, positions[j]!.seq);
        for (const e of r.view.trim(j, positions[j]!.lsn)) noteHome(r, e);
      }
      return true;
    } finally {
      await cell.close();
    }
  } finally {
    await lock.close().catch(() => undefined);
  }
}

function noteHome(r: RealmHandle, e: ScopeEntry): void {
  const digest = r.digestOf(e.kind, e.name, e.key);
  const leaf = path.basename(r.scopeDir(e));
  if (!r.homeDirs.has(leaf)) r.homeDirs.set(leaf, { kind: e.kind, digest, named: true });
}

/**
 * Applies the queued records to the homes, stripe by stripe in stripe order (each stripe read
 * sequentially through a window), a record only once every scope it writes is at the version it
 * builds on (records of one scope in two stripes interleave by version). A record that cannot be
 * applied (no order of the queues reaches it) holds its stripe's position back. Then every home
 * that moved is made durable.
 */
async function applyQueues(
  r: RealmHandle,
  scopes: ReadonlyMap<string, { kind: ScopeKind; name: string; key: string }>,
  cells: ReadonlyMap<string, HomeCell | null>,
  queues: Rec[][],
  positions: Position[],
  cut: number[],
  judge: (rec: Rec) => Verdict,
): Promise<void> {
  const builders = new Map<string, HomeBuilder>();
  const dirs = new DirSyncs(r.fs);
  const windows = r.stripes.map((st) => new Window(st));
  const builderOf = (key: string): HomeBuilder => {
    let b = builders.get(key);
    if (b === undefined) {
      const e = scopes.get(key)!;
      b = new HomeBuilder(r.fs, r.dir, e.kind, e.name, r.digestOf(e.kind, e.name, e.key), cells.get(key) ?? null, dirs);
      builders.set(key, b);
    }
    return b;
  };
  let pending = 0;
  let applied = 0;
  for (let progress = true; progress; ) {
    progress = false;
    for (let j = 0; j < queues.length; j++) {
      const q = queues[j]!;
      let n = 0;
      for (; n < q.length; n++) {
        const rec = q[n]!;
        // Each scope of the record: already past it (a round cut short applied it), at the
        // version it builds on, or not there yet (its predecessor is in another queue).
        let done = 0;
        let ready = 0;
        for (const u of rec.updates) {
          const v = builderOf(u.key).version;
          if (v >= u.next) done++;
          else if (v === (u.previous ?? 0)) ready++;
        }
        if (done + ready < rec.updates.length) break;
        if (done > 0 && ready > 0) {
          // Partly past it: only the full rule tells a record a round applied in part from one
          // that never counted.
          const v = judge(rec);
          if (v === PENDING) break;
          if (v === DEAD) continue;
        }
        const w = windows[j]!;
        for (const u of rec.updates) {
          const b = builderOf(u.key);
          if (b.version >= u.next) continue; // already in the home (a round cut short before)
          // Each view is copied before the next read can move the window.
          let head: Uint8Array | null = null;
          if (u.head !== undefined) head = (w.cached(rec.seq, u.head[0], u.head[1]) ?? (await w.bytes(rec.seq, u.head[0], u.head[1]))).slice();
          const rows: Uint8Array[] = [];
          for (let k = 0; k < u.rows.length; k += 2) {
            const off = u.rows[k]!;
            const len = u.rows[k + 1]!;
            rows.push((w.cached(rec.seq, off, len) ?? (await w.bytes(rec.seq, off, len))).slice());
          }
          const before = b.pending;
          if (!b.applySync(u, rec.commitId, rows, head)) await b.apply(u, rec.commitId, rows, head);
          if (b.pending >= 1 << 20) await b.flush();
          pending += b.pending - before;
        }
        // Let commits run between records now and then: the round shares the event loop.
        if (++applied % 256 === 0) await new Promise((resolve) => setImmediate(resolve));
        // Keep the rows buffered across homes within a budget.
        if (pending > 32 * 1024 * 1024) {
          for (const b of builders.values()) await b.flush();
          pending = 0;
        }
      }
      if (n > 0) {
        q.splice(0, n);
        progress = true;
      } else if (q.length > 0 && judge(q[0]!) === DEAD) {
        // Never visible (a lost slot, a chain through a lost record): nothing to apply.
        q.shift();
        progress = true;
      }
    }
  }
  for (let j = 0; j < queues.length; j++) {
    const stuck = queues[j]![0];
    if (stuck !== undefined && stuck.lsn < positions[j]!.lsn) positions[j] = { seq: stuck.seq, offset: stuck.offset, lsn: stuck.lsn, fence: stuck.fence };
  }
  try {
    // A few homes at a time: the libuv pool is shared with the commits' syncs.
    await forEachLimited([...builders.values()], r.s.checkpointConcurrency, async (b) => {
      if (b.version === (b.old?.version ?? 0)) return;
      await b.finish(cut);
    });
    // New scope directories' names (and new fan-out directories'), once per directory.
    await dirs.flush();
  } finally {
    for (const b of builders.values()) await b.close();
  }
}

/** Reads a stripe's records' bytes in increasing offsets through a 1 MiB window. */
class Window {
  readonly #st: Stripe;
  #seq = -1;
  #at = 0;
  #buf = new Uint8Array(0);
  #len = 0;

  constructor(st: Stripe) {
    this.#st = st;
  }

  /** The bytes when the window holds them (a view valid until the next read), else null. */
  cached(seq: number, offset: number, length: number): Uint8Array | null {
    if (seq !== this.#seq || offset < this.#at || offset + length > this.#at + this.#len) return null;
    return this.#buf.subarray(offset - this.#at, offset - this.#at + length);
  }

  /** `length` bytes at `offset` of file `seq` (a view valid until the next read). */
  async bytes(seq: number, offset: number, length: number): Promise<Uint8Array> {
    if (seq !== this.#seq || offset < this.#at || offset + length > this.#at + this.#len) {
      const want = Math.max(length, 1 << 20);
      if (this.#buf.length < want) this.#buf = new Uint8Array(want);
      this.#len = await this.#st.readAt(seq, this.#buf.subarray(0, want), offset);
      this.#seq = seq;
      this.#at = offset;
      if (this.#len < length) throw new Error(`stripe file ${this.#st.fileOf(seq)} is shorter than a record it holds`);
    }
    return this.#buf.subarray(offset - this.#at, offset - this.#at + length);
  }
}

async function removeBefore(r: RealmHandle, j: number, seq: number): Promise<void> {
  const dir = stripeDir(r.dir, j);
  let names: string[];
  try {
    names = await r.fs.readdir(dir);
  } catch {
    return;
  }
  for (const n of names) {
    const s = parseStripeFileName(n);
    if (s !== null && s < seq) await r.fs.unlink(path.join(dir, n)).catch(() => undefined);
  }
}
