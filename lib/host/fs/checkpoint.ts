// The fs host store's checkpointer: moves what the stripes hold into the realm's scope table (and
// the homes of large scopes), so that stripe files can be removed and every handle's view stays
// small.
//
// Owns: `checkpointRound`. One round runs at a time in the realm (it holds `checkpoint.lock`,
// try-lock: a handle that finds it taken skips the round). It never takes a stripe lock, so it
// never holds up a commit. Guarantees, in the order the bytes reach the disk:
// 1. It reads every stripe up to its published note (the cut): only durable, published records.
// 2. For each scope those records touch it computes the visible state with the same rule every
//    load uses (view.ts), starting from the scope's base in the table the checkpoint names (or its
//    home). A large scope's home moves to it as home.ts says (rows and blobs synced, names
//    directory-synced, then the home cell, its commit point). A home only moves forward (a version
//    it already has is skipped), so a round cut short by a crash is simply done again.
// 3. It writes the next scope table: every entry of the old one, the touched scopes' replaced, in
//    key order, synced, its directory synced.
// 4. Only then does it write the checkpoint cell (the round's commit point): the new table and per
//    stripe the position before which every record is in the table or a home (the first record
//    still pending — building on a version not read yet — holds its stripe's position back).
// 5. Then it removes what nothing names any more: older tables, stripe files wholly before the
//    new positions, the homes of deleted scopes (a crash that loses an unlink leaves a file no one
//    reads: every reader starts at the checkpoint and reads the table it names).

import * as path from 'node:path';
import { openCell } from '../../../cells/index.js';
import { corrupt } from '../../errors.js';
import type { FileSystem } from '../../fs/types.js';
import {
  CHECKPOINT_FILE,
  CHECKPOINT_LOCK_FILE,
  compareKeys,
  decodeCheckpoint,
  encodeCheckpoint,
  HOME_STATE_FILE,
  parseStripeFileName,
  parseTableFileName,
  TABLES_DIR,
  type CheckpointValue,
  type Position,
  type TableEntry,
  type TableRef,
} from './format.js';
import { DirSyncs, readHomeCell, unlinkWhere } from './home.js';
import { baseOfEntry, forEachLimited, type RealmHandle } from './realm.js';
import { ScopeWork, type TableRow } from './scope-work.js';
import type { Stripe } from './stripe.js';
import { stripeDir } from './stripe-files.js';
import { TableWriter } from './table.js';
import type { ScopeKind } from '../types.js';
import { DEAD, PENDING, View, YES, type Rec, type Verdict } from './view.js';
import type { HomeValue } from './format.js';

type Touched = { kind: ScopeKind; name: string; key: string };

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
      // The round starts from the table the cell names (another handle's round may have moved it).
      await r.adoptCheckpoint(ck);
      await r.catchUpAll();
      const cut: Position[] = r.stripes.map((st) => ({ ...st.cursor }));
      // The records of the cut: from the checkpoint to what was just read.
      const records: Rec[][] = r.stripes.map((_, j) => r.view.byStripe[j]!.filter((rec) => rec.lsn >= ck.positions[j]!.lsn && rec.lsn < cut[j]!.lsn));
      const scopes = new Map<string, Touched>();
      for (const list of records) for (const rec of list) for (const u of rec.updates) if (!scopes.has(u.key)) scopes.set(u.key, u);
      const work = await startWork(r, scopes);
      // Which records are visible is the live view's rule over the cut. Without a second candidate
      // for any version (anomalies: never, unless something wrote past the checks), a record is
      // visible exactly when the chains of its scopes reach it, which is when `applyQueues` finds
      // it ready; only what it cannot apply needs the full rule, on a view of the cut.
      let cv: View | null = null;
      const judge = (rec: Rec): Verdict => {
        if (cv === null) {
          cv = new View(r.format.stripes);
          for (const list of records) for (const x of list) cv.add(x);
          for (const e of cv.scopes.values()) cv.setHome(e, work.bases.get(e.key) ?? null);
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
      const cutLsns = cut.map((p) => p.lsn);
      const { rows, giveUp } = await applyQueues(r, work.scopes, work.dirs, queues, positions, cutLsns, judge);
      const table = rows.length === 0 ? ck.table : await writeTable(r, ck.table, rows, cutLsns);
      const next: CheckpointValue = { round: ck.round + 1, positions, table };
      await cell.write(encodeCheckpoint(next));
      await r.adoptCheckpoint(next);
      await removeTablesBut(fs, r.dir, table?.seq ?? 0);
      for (let j = 0; j < r.stripes.length; j++) await removeBefore(r, j, positions[j]!.seq);
      for (const dir of giveUp) await removeHome(fs, dir);
      return true;
    } finally {
      await cell.close();
    }
  } finally {
    await lock.close().catch(() => undefined);
  }
}

/**
 * The work of every touched scope, from its base: the table's entry, or the home cell of a homed
 * scope (CORRUPT when the table names a home that is missing). Only a homed scope's home is read:
 * a home directory the table does not name (a round that moved a scope to a home was cut short
 * before its checkpoint cell) is never read, and is written over if the scope outgrows the table
 * again.
 */
async function startWork(r: RealmHandle, scopes: ReadonlyMap<string, Touched>): Promise<{ scopes: Map<string, ScopeWork>; bases: Map<string, HomeValue | null>; dirs: DirSyncs }> {
  const t = r.table;
  const out = new Map<string, ScopeWork>();
  const bases = new Map<string, HomeValue | null>();
  const dirs = new DirSyncs(r.fs);
  await forEachLimited([...scopes.values()], 16, async (x) => {
    const nameBytes = r.nameBytesOf(x);
    const ent: TableEntry | null = t === null ? null : await t.find(x.kind, nameBytes);
    const digest = (): string => r.digestOf(x.kind, x.name, x.key);
    if (ent?.homed === true) {
      const dir = r.scopeDir(x);
      const cell = await readHomeCell(r.fs, dir);
      if (cell === null) throw corrupt(`the home of ${x.kind} scope ${JSON.stringify(x.name)} is missing, though the scope table names it`, { file: path.join(dir, HOME_STATE_FILE) });
      out.set(x.key, new ScopeWork(r.fs, r.dir, x, nameBytes, digest, dirs, ent, cell));
      bases.set(x.key, cell.value);
      return;
    }
    out.set(x.key, new ScopeWork(r.fs, r.dir, x, nameBytes, digest, dirs, ent, null));
    bases.set(x.key, ent === null ? null : baseOfEntry(ent, t!.cut));
  });
  return { scopes: out, bases, dirs };
}

/**
 * Applies the queued records to the scopes' work, stripe by stripe in stripe order (each stripe
 * read sequentially through a window), a record only once every scope it writes is at the version
 * it builds on (records of one scope in two stripes interleave by version). A record that cannot
 * be applied (no order of the queues reaches it) holds its stripe's position back. Then every home
 * that moved is made durable, and the touched scopes' rows of the next table are answered in key
 * order, with the homes to give up.
 */
async function applyQueues(
  r: RealmHandle,
  work: ReadonlyMap<string, ScopeWork>,
  dirs: DirSyncs,
  queues: Rec[][],
  positions: Position[],
  cut: number[],
  judge: (rec: Rec) => Verdict,
): Promise<{ rows: TableRow[]; giveUp: string[] }> {
  const windows = r.stripes.map((st) => new Window(st));
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
          const v = work.get(u.key)!.version;
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
          const b = work.get(u.key)!;
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
          for (const b of work.values()) await b.flush();
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
  const rows: TableRow[] = [];
  const giveUp: string[] = [];
  try {
    // A few homes at a time: the libuv pool is shared with the commits' syncs.
    await forEachLimited([...work.entries()], r.s.checkpointConcurrency, async ([key, b]) => {
      // A scope no record of this round moved keeps its entry as it is.
      if (b.version === b.baseVersion && !b.homed) return;
      const done = await b.finish(cut);
      rows.push(done.row);
      if (done.giveUp) giveUp.push(r.scopeDir({ kind: b.kind, name: b.name, key }));
    });
    // New scope directories' names (and new fan-out directories'), once per directory.
    await dirs.flush();
  } finally {
    for (const b of work.values()) await b.close();
  }
  rows.sort((a, b) => compareKeys(a.kind, a.nameBytes, b.kind, b.nameBytes));
  return { rows, giveUp };
}

/**
 * Writes the next table: the old one's entries in key order with the touched scopes' rows in
 * their places, synced, and its name directory-synced.
 */
async function writeTable(r: RealmHandle, old: TableRef | null, rows: readonly TableRow[], cut: readonly number[]): Promise<TableRef> {
  const seq = (old?.seq ?? 0) + 1;
  const w = await TableWriter.create(r.fs, r.dir, seq, cut, r.format.realmId);
  try {
    let k = 0;
    const t = r.table;
    if (t !== null) {
      await t.forEach(async (e) => {
        const code = e.kindCode;
        while (k < rows.length && compareKeys(rows[k]!.kind, rows[k]!.nameBytes, code, e.nameBytes) < 0) {
          const x = rows[k++]!;
          await w.add(x.kind, x.nameBytes, x.raw, x.live);
        }
        if (k < rows.length && compareKeys(rows[k]!.kind, rows[k]!.nameBytes, code, e.nameBytes) === 0) {
          const x = rows[k++]!;
          await w.add(x.kind, x.nameBytes, x.raw, x.live);
        } else await w.add(code, e.nameBytes, e.raw, !e.deleted);
      });
    }
    for (; k < rows.length; k++) await w.add(rows[k]!.kind, rows[k]!.nameBytes, rows[k]!.raw, rows[k]!.live);
    const ref = await w.finish();
    await r.fs.syncDir(path.join(r.dir, TABLES_DIR));
    return ref;
  } catch (err) {
    await w.abort();
    throw err;
  }
}

/** Removes every table file but the one named (older tables, leftovers of rounds cut short). */
async function removeTablesBut(fs: FileSystem, realm: string, keep: number): Promise<void> {
  await unlinkWhere(fs, path.join(realm, TABLES_DIR), (n) => {
    const seq = parseTableFileName(n);
    return seq !== null && seq !== keep;
  });
}

/** Removes a given-up home: its files (only the kinds a home holds), then the directory. */
async function removeHome(fs: FileSystem, dir: string): Promise<void> {
  await unlinkWhere(fs, dir, (n) => n === HOME_STATE_FILE || n.startsWith('r-') || n.startsWith('h-') || n.startsWith(`${HOME_STATE_FILE}.`));
  await fs.rmdir(dir).catch(() => undefined);
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
  await unlinkWhere(r.fs, stripeDir(r.dir, j), (n) => {
    const s = parseStripeFileName(n);
    return s !== null && s < seq;
  });
}
