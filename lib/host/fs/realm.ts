// One handle's hold on a realm directory: everything the fs host store's operations share.
//
// Owns: opening a realm (created first if need be: realm-create.ts; a new boot's recovery of every
// stripe, the view built from the checkpoint on), and the handle's machinery: catching the view
// up with the stripes (lock-free, up to each published note; for a load, settling a dead writer's
// records past a note), refreshing a stripe's scopes under its lock (adopting a dead writer's
// records), and loading home bases; the stripe locks themselves are realm-locks.ts (try-lock
// only, all-or-back-off, so two processes never deadlock). Guarantees:
// - After `refresh(L)` every record that touches a scope homed in a stripe of L is in the view,
//   durable and published, and no other handle can add one while the locks stay held.
// - A load answers only after every CRC-valid record it found past a note with the stripe's lock
//   free (its writer is gone) was adopted: synced and published. So the first load after a
//   writer's death fixes the fate of the batch it had in flight, for every later load.
// - A realm exists once its FORMAT cell exists; creation runs under the fence lock, so two
//   processes creating one realm at once end with one realm (realm-create.ts).
// - Every stripe's published note carries this boot's id before the handle serves anything: a
//   note from an earlier boot may have lost its last rewrite in a crash, so the first handle of a
//   boot rescans and republishes every stripe under its lock.

import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { peekCell } from '../../../cells/index.js';
import type { Clock } from '../../clock.js';
import { corrupt, fromIo } from '../../errors.js';
import type { FileSystem } from '../../fs/types.js';
import { HostStoreError } from '../errors.js';
import type { FenceTiming } from '../timing.js';
import type { ScopeKind } from '../types.js';
import {
  CHECKPOINT_FILE,
  decodeCheckpoint,
  HOME_STATE_FILE,
  sameBytes,
  SCOPES_DIR,
  scopeDigest,
  TABLES_DIR,
  type CheckpointValue,
  type HomeValue,
  type RealmFormat,
  type TableEntry,
} from './format.js';
import { STRIPE_GATE_FILE, STRIPE_LOCK_FILE } from './format-names.js';
import { HomeRows, readHome, scopeDirOf } from './home.js';
import { ScopeTable, tablePath } from './table.js';
import { ensureRealm } from './realm-create.js';
import { checkFenceFiles } from './fence.js';
import { StripeLocks } from './realm-locks.js';
import { Stripe, type HostMistakes, type LockUse } from './stripe.js';
import { StripeGone } from './stripe-files.js';
import type { ScanResult } from './stripe-scan.js';
import { View, type ScopeEntry } from './view.js';
import { InlineSyncPolicy } from '../../fs/inline-sync.js';
import { isMissing } from '../../fs/errno.js';

/** Settings a handle runs with (FsHostStoreOptions after defaults). */
export interface RealmSettings {
  fs: FileSystem;
  clock: Clock;
  timing: FenceTiming;
  holderId: string;
  boot: Uint8Array;
  stripes: number | undefined;
  stripeFileBytes: number;
  preallocBytes: number;
  checkpointBytes: number;
  lockLingerMs: number;
  lockWaitMs: number;
  /** A lone group's sync waits on the event loop while recent syncs took less than this (ms; 0: never). */
  inlineSyncBelowMs: number;
  /** Test-only planted mistakes. */
  mistakes: HostMistakes;
  /** Homes a checkpoint round finishes at once (2 on the commits' thread, more on a worker). */
  checkpointConcurrency: number;
}

/** Thrown inside a group when it must let go of its locks and try again. */
export class BackOff extends Error {
  constructor() {
    super('back off and retry');
  }
}

/** Reads a cell's value without opening it for writing (lock-free); null when the file does not exist. */
export { peekCell };


/**
 * At open: every stripe's lock and gate files, made with the realm and never removed, are there
 * (the note is read at open already). CORRUPT naming the one lost: made again, a second writer
 * could lock a new file while the first holds the lost one.
 */
async function checkStripeFiles(fs: FileSystem, dirs: readonly string[]): Promise<void> {
  for (const d of dirs) {
    for (const name of [STRIPE_LOCK_FILE, STRIPE_GATE_FILE]) {
      const file = path.join(d, name);
      if ((await fs.stat(file)) === null) throw corrupt(`${file} is missing (it is made with the realm)`, { file });
    }
  }
}

/** A stripe file that the current checkpoint (or the records after it) names, missing: damage. */
function missingStripeFile(err: StripeGone, round: number): Error {
  return corrupt(`stripe file ${err.file} is missing, though the realm's checkpoint (round ${round}) reaches it`, { file: err.file });
}

/** The handle's machinery (see the module header). */
export class RealmHandle {
  readonly dir: string;
  readonly s: RealmSettings;
  readonly fs: FileSystem;
  readonly format: RealmFormat;
  readonly stripes: Stripe[];
  readonly view: View;
  readonly homeRows: HomeRows;
  /** Taking, lingering and letting go of the stripes' file locks (realm-locks.ts). */
  readonly locks: StripeLocks;
  /** The checkpoint positions this handle last read. */
  checkpoint: CheckpointValue;
  /** The scope table that checkpoint names (null before the first round that wrote one). */
  table: ScopeTable | null = null;
  /** Bumped whenever `table` is replaced: a base read from the one before is read again. */
  tableEpoch = 0;
  readonly #digests = new Map<string, string>();
  readonly #nameBytes = new Map<string, Uint8Array>();
  /** Set by close or by a failure that makes the handle unusable. */
  closed = false;

  private constructor(dir: string, s: RealmSettings, format: RealmFormat, stripes: Stripe[], checkpoint: CheckpointValue) {
    this.dir = dir;
    this.s = s;
    this.fs = s.fs;
    this.format = format;
    this.stripes = stripes;
    this.view = new View(format.stripes);
    this.homeRows = new HomeRows(s.fs);
    this.locks = new StripeLocks(stripes, s);
    this.checkpoint = checkpoint;
  }

  static async open(dir: string, s: RealmSettings): Promise<RealmHandle> {
    const format = await ensureRealm(dir, s);
    for (let attempt = 0; ; attempt++) {
      const checkpoint = await readCheckpoint(s.fs, dir, format.stripes);
      try {
        return await RealmHandle.#openAt(dir, s, format, checkpoint);
      } catch (err) {
        if (!(err instanceof StripeGone)) throw err;
        // A checkpoint that moved meanwhile removed the file (try again from it); one that did
        // not names a stripe file that is missing.
        const now = await readCheckpoint(s.fs, dir, format.stripes);
        if (now.round === checkpoint.round) throw missingStripeFile(err, checkpoint.round);
        if (attempt >= 3) throw err;
      }
    }
  }

  static async #openAt(dir: string, s: RealmSettings, format: RealmFormat, checkpoint: CheckpointValue): Promise<RealmHandle> {
    const stripes: Stripe[] = [];
    // One estimate for the handle: its stripes share the disk.
    const syncs = new InlineSyncPolicy(s.inlineSyncBelowMs);
    for (let k = 0; k < format.stripes; k++) {
      const cfg = {
        fs: s.fs,
        realm: dir,
        index: k,
        realmTag: format.realmId.slice(0, 8),
        boot: s.boot,
        fileBytes: s.stripeFileBytes,
        preallocBytes: s.preallocBytes,
        syncs,
        mistakes: s.mistakes,
      };
      const start = checkpoint.positions[k]!;
      const st = new Stripe(cfg, start, 0);
      try {
        st.cursorSalt = await st.saltOf(start.seq);
      } catch (err) {
        for (const open of [...stripes, st]) await open.close();
        throw err;
      }
      stripes.push(st);
    }
    const handle = new RealmHandle(dir, s, format, stripes, checkpoint);
    try {
      await handle.#checkTablesDir();
      handle.table = await handle.#openTable(checkpoint);
      for (const st of stripes) await handle.#recoverBoot(st);
      await handle.catchUpAll();
      await checkFenceFiles(handle);
      await checkStripeFiles(s.fs, stripes.map((st) => st.dir));
    } catch (err) {
      await handle.closeFiles();
      throw err;
    }
    return handle;
  }

  /**
   * Makes sure the stripe's published note is of this boot: otherwise rescans it under its lock
   * from the checkpoint (every CRC-valid record past the note is on disk after a reboot, and was
   * possibly acknowledged: the note is rewritten without a sync), syncs and republishes.
   */
  async #recoverBoot(st: Stripe): Promise<void> {
    const deadline = performance.now() + this.s.lockWaitMs;
    let delay = 1;
    for (;;) {
      const pub = await st.readPublished();
      if (pub !== null && sameBytes(pub.boot, this.s.boot)) return;
      if (await st.tryLock('recover')) {
        try {
          const pubNow = await st.readPublished();
          if (pubNow !== null && sameBytes(pubNow.boot, this.s.boot)) return;
          const scan = await this.#scanToValidEnd(st);
          await st.adopt(scan, pubNow);
          // The view is built by the ordinary catch-up that follows.
          return;
        } finally {
          await st.unlock();
        }
      }
      // Another process of this boot holds the lock: it republishes before it writes anything.
      if (performance.now() > deadline) throw HostStoreError.unavailable(`stripe ${st.index} stayed locked while recovering`);
      await sleep(delay);
      delay = Math.min(delay * 2, 20);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Names

  digestOf(kind: ScopeKind, name: string, key: string): string {
    let d = this.#digests.get(key);
    if (d === undefined) {
      d = scopeDigest(kind, name);
      this.#digests.set(key, d);
    }
    return d;
  }

  /** The stripe a scope is homed in: the first 32 bits of its digest, modulo the stripe count. */
  homeStripe(kind: ScopeKind, name: string, key: string): number {
    // `| 0` keeps the (small) result an integer V8 stores unboxed: the 32-bit value modulo K is a
    // double otherwise, and it ends in every record's `stripe` field.
    return (parseInt(this.digestOf(kind, name, key).slice(0, 8), 16) % this.format.stripes) | 0;
  }

  scopeDir(e: { kind: ScopeKind; name: string; key: string }): string {
    return scopeDirOf(this.dir, e.kind, this.digestOf(e.kind, e.name, e.key));
  }

  // ---------------------------------------------------------------------------------------------
  // Catching up

  /**
   * Reads stripe `j`'s records up to its published note into the view (no lock). With `settle`
   * (every load), a dead writer's records past the note are settled first (`#settleUnpublished`).
   */
  async catchUp(j: number, settle = false): Promise<void> {
    const st = this.stripes[j]!;
    if (st.flockHeld && st.fresh) return; // we are its only writer: the view has everything
    await st.cursorLock.run(async () => {
      if (st.flockHeld && st.fresh) return;
      // The note is rewritten in place without a lock: a read that meets the rewrite fails its CRC
      // and is simply read again.
      let pub = await st.readPublished();
      for (let attempt = 0; pub === null && attempt < 20; attempt++) {
        await sleep(attempt < 5 ? 0 : 1);
        pub = await st.readPublished();
      }
      if (pub === null) throw corrupt(`stripe ${j}: the published note is unreadable`, { stripe: j, file: path.join(st.dir, 'published'), offset: 0 });
      if (pub.lsn <= st.cursor.lsn) return;
      const res = await st.scan(st.cursor, st.cursorSalt, pub);
      for (const rec of res.recs) this.view.add(rec);
      st.cursor = res.end;
      st.cursorSalt = res.endSalt;
    });
    if (settle) await this.#settleUnpublished(j);
  }

  /**
   * A load's rule for records past stripe `j`'s published note (docs/host-store.md, "A dead
   * writer's last batch"). Such records were written under the stripe's lock by a writer that has
   * not published them. If the lock is free, that writer is dead (the kernel let go of its lock),
   * and a load must not answer without them while a later lock holder would adopt them: so the
   * load takes the lock (try-lock only: a load never waits) and adopts them — synced, then
   * published — before it answers. If the lock is held, their writer is alive and its commit is in
   * flight: the load answers from the note, and the holder publishes or voids them before it lets
   * go. A stripe this handle is using itself (a group or an acquire of ours holds its mutex, or we
   * hold its lock) has no such records of another writer.
   */
  async #settleUnpublished(j: number): Promise<void> {
    const st = this.stripes[j]!;
    if (st.mutex.busy || st.flockHeld) return;
    if (!(await st.hasUnpublished())) return;
    if (this.s.mistakes.loadsIgnoreUnpublished === true) return;
    if (st.mutex.busy || st.flockHeld) return; // one of our groups took it meanwhile: alive
    // The mutex is free, so this resolves at once; nothing ran between the check and the claim.
    const release = await st.mutex.lock();
    try {
      // Our own write failed here and its void too: the records may be ours, and this handle
      // cannot trust a sync of that file any more. Another handle settles them.
      if (st.poisoned !== null) throw st.poisoned;
      await this.#tryLockedCatchUp(j, 'settle');
    } finally {
      release();
    }
  }

  /**
   * Takes stripe `j`'s file lock (try-lock only; the caller holds the stripe's mutex), catches up
   * under it (`lockedCatchUp`) and lets go of it. False, having done nothing, when another handle
   * holds the lock.
   */
  async #tryLockedCatchUp(j: number, why: LockUse): Promise<boolean> {
    const st = this.stripes[j]!;
    if (!(await st.tryLock(why))) return false;
    try {
      await this.lockedCatchUp(j);
    } finally {
      await st.unlock();
    }
    return true;
  }

  /**
   * Catches every stripe (or those of `only`) up; when a stripe file is gone, jumps to the
   * checkpoint and tries again. `settle`: the caller is a load (see `#settleUnpublished`).
   */
  async catchUpAll(only?: readonly number[], settle = false): Promise<void> {
    await this.#jumpingWhenGone(() => Promise.all((only ?? this.stripes.map((_, k) => k)).map((k) => this.catchUp(k, settle))));
  }

  /**
   * Runs `read` (a catch-up from the cursors); when a stripe file it needs is gone, jumps to the
   * checkpoint (a round removed the file: the cursors behind it move to its positions) and runs
   * it again. Gone again after a jump to a checkpoint that did not move since: the file that
   * checkpoint reaches is missing, CORRUPT.
   */
  async #jumpingWhenGone(read: () => Promise<unknown>): Promise<void> {
    let jumpedTo: number | null = null;
    for (let attempt = 0; ; attempt++) {
      try {
        await read();
        return;
      } catch (err) {
        if (!(err instanceof StripeGone)) throw err;
        if (jumpedTo !== null && jumpedTo === this.checkpoint.round) throw missingStripeFile(err, this.checkpoint.round);
        if (attempt >= 3) throw err;
        await this.jump();
        jumpedTo = this.checkpoint.round;
      }
    }
  }

  /**
   * Under stripe `st`'s lock: its records from the cursor to the valid end. A scan that ends at a
   * SEAL whose next file does not exist met either a writer that died rolling (the next file was
   * never made: the adopt completes the roll) or a next file a checkpoint round removed after the
   * scan read the sealed one through a cached handle. The round's cell is written before it
   * removes a file, and it removes only files before its position, which lies at or before the
   * published note: a dead roll never published anything past its SEAL, so a checkpoint position
   * past the sealed file means the file was removed. That is StripeGone (the caller jumps), never
   * a roll to complete: making that file again would publish an end behind the real one.
   */
  async #scanToValidEnd(st: Stripe): Promise<ScanResult> {
    const scan = await st.scan(st.cursor, st.cursorSalt, null);
    if (scan.sealedWithoutNext) {
      const ck = await readCheckpoint(this.fs, this.dir, this.format.stripes);
      if (ck.positions[st.index]!.seq > scan.end.seq) throw new StripeGone(st.fileOf(scan.end.seq + 1));
    }
    return scan;
  }

  /**
   * Under stripe `j`'s lock: reads to the valid end, adopts what is unpublished (a dead writer's
   * records: fdatasync, then publish), adds it to the view.
   */
  async lockedCatchUp(j: number): Promise<void> {
    // A cursor behind the checkpoint may find its files gone: it jumps (outside the cursor lock,
    // which the jump takes) and reads again.
    await this.#jumpingWhenGone(() => this.#lockedCatchUpOnce(j));
  }

  async #lockedCatchUpOnce(j: number): Promise<void> {
    const st = this.stripes[j]!;
    await st.cursorLock.run(async () => {
      const pub = await st.readPublished();
      const res = await this.#scanToValidEnd(st);
      let adopted;
      try {
        adopted = await st.adopt(res, pub);
      } catch (err) {
        if (err instanceof StripeGone) throw err; // nothing written: the caller jumps and reads again
        const cause = fromIo(err, `adopt records of stripe ${j}`, st.dir);
        st.poisoned = HostStoreError.unavailable(`stripe ${j} refuses writes after an I/O failure; reopen the store`, cause);
        throw st.poisoned;
      }
      for (const rec of res.recs) this.view.add(rec);
      st.cursor = adopted.end;
      st.cursorSalt = adopted.salt;
    });
  }

  /**
   * Makes the view exact for every scope homed in a stripe of `locked` (whose file locks this
   * handle holds): catches up every stripe up to the highest of them, adopting dead writers'
   * records; a record past a published note elsewhere that touches one of those scopes is adopted
   * under that stripe's lock too (or the caller backs off).
   */
  async refresh(locked: readonly number[]): Promise<void> {
    // The common case (every lock kept from the groups before): nothing to read.
    if (locked.every((h) => this.stripes[h]!.fresh)) return;
    const stale = locked.filter((h) => !this.stripes[h]!.fresh);
    if (stale.length === 0) return;
    const top = Math.max(...stale);
    const inSet = new Set(locked);
    for (let j = 0; j <= top; j++) {
      if (inSet.has(j)) {
        if (!this.stripes[j]!.fresh) await this.lockedCatchUp(j);
        continue;
      }
      await this.catchUpAll([j]);
      await this.#adoptStrays(j, inSet);
    }
    for (const h of stale) this.stripes[h]!.fresh = true;
  }

  /** Records past stripe `j`'s published note that touch a scope homed in `homes`: adopt them under j's lock. */
  async #adoptStrays(j: number, homes: ReadonlySet<number>): Promise<void> {
    const st = this.stripes[j]!;
    if (st.flockHeld) return; // another group of ours holds it and adopted on taking it
    const probe = await st.scan(st.cursor, st.cursorSalt, null);
    const stray = probe.recs.some((rec) => rec.updates.some((u) => homes.has(this.homeStripe(u.kind, u.name, u.key))));
    if (!stray) return;
    if (st.mutex.busy) throw new BackOff();
    const release = await st.mutex.lock();
    try {
      if (!(await this.#tryLockedCatchUp(j, 'strays'))) throw new BackOff();
    } finally {
      release();
    }
  }

  /** Re-reads the checkpoint and moves every cursor that fell behind it there (their files are gone). */
  async jump(): Promise<void> {
    const ck = await readCheckpoint(this.fs, this.dir, this.format.stripes);
    await this.#useTable(ck);
    this.checkpoint = ck;
    for (let j = 0; j < this.stripes.length; j++) {
      const st = this.stripes[j]!;
      const p = ck.positions[j]!;
      await st.cursorLock.run(async () => {
        if (st.cursor.lsn < p.lsn) {
          st.cursorSalt = await st.saltOf(p.seq);
          st.cursor = { ...p };
        }
      });
      this.view.trim(j, p.lsn);
    }
    // Records this handle never read were applied to homes: any home may be newer than it knows.
    this.view.forgetAllHomes();
  }

  /** Reads the checkpoint and drops from the view what it covers (memory stays bounded). */
  async trimToCheckpoint(): Promise<void> {
    const ck = await readCheckpoint(this.fs, this.dir, this.format.stripes);
    if (ck.round === this.checkpoint.round) return;
    await this.adoptCheckpoint(ck);
  }

  /**
   * Moves the handle to checkpoint `ck` (a newer one than it holds): its table first, then the view
   * drops the records the checkpoint covers, and the scopes they touched read their bases again
   * (from the new table). The records past this handle's cursors stay to be read: a base from the
   * new table that reflects them is ahead, which makes the next load catch up first.
   */
  async adoptCheckpoint(ck: CheckpointValue): Promise<void> {
    if (ck.round === this.checkpoint.round) return;
    await this.#useTable(ck);
    this.checkpoint = ck;
    for (let j = 0; j < this.stripes.length; j++) this.view.trim(j, Math.min(ck.positions[j]!.lsn, this.stripes[j]!.cursor.lsn));
  }

  /** Opens the table `ck` names (unless it is the one held) and retires the one before. */
  async #useTable(ck: CheckpointValue): Promise<void> {
    const now = this.table;
    if ((now?.ref.seq ?? 0) === (ck.table?.seq ?? 0)) return;
    const next = await this.#openTable(ck);
    this.table = next;
    this.tableEpoch++;
    await now?.retire();
  }

  /**
   * The table `ck` names, open. A table that is missing is CORRUPT unless the checkpoint moved on
   * meanwhile (a newer round removed it): then the caller's next read of the checkpoint finds the
   * newer one, which is what `StripeGone` makes every reader do.
   */
  async #openTable(ck: CheckpointValue): Promise<ScopeTable | null> {
    if (ck.table === null) return null;
    try {
      return await ScopeTable.open(this.fs, this.dir, ck.table, this.format.stripes, this.format.realmId);
    } catch (err) {
      if (!isMissing(err)) throw err;
      const now = await readCheckpoint(this.fs, this.dir, this.format.stripes);
      const file = tablePath(this.dir, ck.table.seq);
      if (now.round === ck.round) throw corrupt(`scope table ${file} is missing, though the realm's checkpoint (round ${ck.round}) names it`, { file });
      throw new StripeGone(file);
    }
  }

  /** `scopes/` and `tables/` are made with the realm: a realm without one lost its homes or its scope tables. */
  async #checkTablesDir(): Promise<void> {
    for (const name of [SCOPES_DIR, TABLES_DIR]) {
      const d = path.join(this.dir, name);
      const st = await this.fs.lstat(d);
      if (st === null || !st.isDirectory) throw corrupt(`realm ${this.dir} has no ${name}/ directory`, { file: d });
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Homes

  /** Reads the scope's base into the view (lock-free): from the table, or its home for a homed scope. */
  async loadHome(e: ScopeEntry): Promise<HomeValue | null> {
    for (let attempt = 0; ; attempt++) {
      const epoch = this.tableEpoch;
      const base = await this.readBase(e);
      // A newer table came in while this one was read: the trim that came with it may have
      // forgotten this scope's base, so a base from the older table must not be set now.
      if (epoch !== this.tableEpoch && attempt < 8) continue;
      this.view.setHome(e, base);
      return base;
    }
  }

  /**
   * The scope's base as this handle's table and the scope's home say, without touching the view:
   * null when the table holds no entry (the scope was never checkpointed), the entry's state for
   * a small scope, the home's value for a homed one. A homed scope whose home is missing is CORRUPT
   * unless the checkpoint moved on (a newer round removed a deleted scope's home): then this
   * handle moves to the newer checkpoint and reads again.
   */
  async readBase(e: { kind: ScopeKind; name: string; key: string }): Promise<HomeValue | null> {
    for (let attempt = 0; ; attempt++) {
      const t = this.table;
      if (t === null) return null;
      const ent = await t.find(e.kind, this.nameBytesOf(e));
      if (ent === null) return null;
      if (!ent.homed) return baseOfEntry(ent, t.cut);
      const dir = this.scopeDir(e);
      const home = await readHome(this.fs, dir);
      const file = path.join(dir, HOME_STATE_FILE);
      if (home === null) {
        const ck = await readCheckpoint(this.fs, this.dir, this.format.stripes);
        if ((ck.table?.seq ?? 0) === t.ref.seq || attempt >= 3) {
          throw corrupt(`the home of ${e.kind} scope ${JSON.stringify(e.name)} is missing, though the scope table ${t.file} names it`, { file });
        }
        await this.jump();
        continue;
      }
      if (home.kind !== e.kind || home.name !== e.name) throw corrupt(`home of ${e.kind} scope ${JSON.stringify(e.name)} names another scope`, { dir, file });
      if (home.version < ent.version) {
        throw corrupt(`home of ${e.kind} scope ${JSON.stringify(e.name)} is at version ${home.version}, below the ${ent.version} the scope table names`, { dir, file });
      }
      return home;
    }
  }

  /** The UTF-8 bytes of a scope's name (kept per scope, like its digest). */
  nameBytesOf(e: { name: string; key: string }): Uint8Array {
    let b = this.#nameBytes.get(e.key);
    if (b === undefined) {
      b = Buffer.from(e.name, 'utf8');
      if (this.#nameBytes.size >= 65536) this.#nameBytes.clear();
      this.#nameBytes.set(e.key, b);
    }
    return b;
  }

  /** True when `home` reflects a record this handle has not read yet. */
  ahead(home: HomeValue | null | undefined): boolean {
    if (home === null || home === undefined) return false;
    return home.cut.some((lsn, j) => j < this.stripes.length && lsn > this.stripes[j]!.cursor.lsn);
  }

  /**
   * Makes the states of `entries` computable: loads every home base they depend on, and catches up
   * when a home reflects records not read yet (`settle`: the caller is a load).
   */
  /**
   * True when `resolve(entries)` has nothing to load: every entry has its home base and their
   * states need no other (the common case of a commit on scopes already used), checked without a pause.
   */
  resolvedNow(entries: readonly ScopeEntry[]): boolean {
    for (const e of entries) if (e.home === undefined) return false;
    for (const e of entries) this.view.state(e);
    if (this.view.wanted.size === 0) return true;
    return false;
  }

  async resolve(entries: readonly ScopeEntry[], settle = false): Promise<void> {
    // Their own home bases first: a record's verdict is not kept while a base it needs is missing,
    // so asking first would judge a record that writes n scopes n times over.
    const unloaded = entries.filter((e) => e.home === undefined);
    if (unloaded.length > 0) {
      let behind = false;
      await forEachLimited(unloaded, 16, async (e) => {
        if (this.ahead(await this.loadHome(e))) behind = true;
      });
      if (behind) await this.catchUpAll(undefined, settle);
    }
    for (let round = 0; round < 1000; round++) {
      for (const e of entries) this.view.state(e);
      const wanted = this.view.takeWanted();
      if (wanted.length === 0) return;
      let behind = false;
      await forEachLimited(wanted, 16, async (e) => {
        if (this.ahead(await this.loadHome(e))) behind = true;
      });
      if (behind) await this.catchUpAll(undefined, settle);
    }
    throw HostStoreError.unavailable('the view did not settle');
  }


  /**
   * At close: gives back each stripe's zero-filled space past its records, so a realm at rest takes
   * the bytes of its records, not of their preallocation. Only under the stripe's lock (try-lock:
   * a stripe another handle is writing keeps its space) and after adopting what a dead writer left
   * past the note (so every record up to the cut is durable and published). Best effort: a stripe
   * that cannot be trimmed stays as it is.
   */
  async trimStripeTails(): Promise<void> {
    for (let j = 0; j < this.stripes.length; j++) {
      const st = this.stripes[j]!;
      if (st.poisoned !== null || st.mutex.busy) continue;
      const release = await st.mutex.lock();
      try {
        if (!(await st.tryLock('trim'))) continue;
        try {
          await this.lockedCatchUp(j);
          await st.trimTail(st.cursor);
        } finally {
          await st.unlock();
        }
      } catch {
        // Nothing depends on the trim: the space stays allocated.
      } finally {
        release();
      }
    }
  }

  async closeFiles(): Promise<void> {
    for (const st of this.stripes) await st.close();
    await this.table?.retire();
  }
}

/** A small scope's base as its table entry holds it (head and rows copied out of the block). */
export function baseOfEntry(ent: TableEntry, cut: readonly number[]): HomeValue {
  const head = ent.deleted ? new Uint8Array(0) : ent.copyHead();
  return {
    kind: ent.kind,
    name: ent.name,
    version: ent.version,
    commitId: ent.commitId,
    deleted: ent.deleted,
    cut: [...cut],
    first: ent.first,
    end: ent.end,
    headLength: head.length,
    headCrc: 0,
    head,
    headGen: null,
    rowFiles: [],
    inlineRows: ent.copyRows(),
  };
}

/** Reads the checkpoint cell (lock-free). */
export async function readCheckpoint(fs: FileSystem, dir: string, stripes: number): Promise<CheckpointValue> {
  const file = path.join(dir, CHECKPOINT_FILE);
  const value = await peekCell(fs, file);
  if (value === null) throw corrupt(`${file} is missing`, { file });
  return decodeCheckpoint(value, stripes, file);
}

/** Runs `fn` over `items`, at most `limit` at a time. */
export async function forEachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
