// One stripe of the fs host store, as one handle (one process) uses it.
//
// Owns: `Stripe`: the stripe's file lock (flock on `stripes/<k>/lock`, try-lock only), the handle's
// cursor (how far it has read the stripe's records), scanning records lock-free up to the
// published note or, under the lock, up to the valid end (adopting what a dead writer left), and
// the write path: one writev and one fdatasync per group, then the published note. Guarantees:
// - Records are written only under the stripe's file lock, at the valid end, with consecutive lsns;
//   each frame's CRC is seeded with its file's random salt and covers its lsn, so zero-filled
//   preallocated space, a torn frame or a stale frame never validates.
// - The published note is rewritten only after the fdatasync that covers every record it names,
//   so a record a lock-free reader accepts (at or below the note) is durable.
// - A failed write, sync or publish voids the group: every byte of its frames (of its SEAL, for a
//   roll) is zeroed and the file synced, so no part of the group can become valid later, not even
//   behind a retry that lands where its first frame was (answer: nothing applied). When
//   the void itself fails the outcome is unknown. Either way the stripe is poisoned in this handle
//   (every later write refuses) until the store is reopened.
// - A file is rolled (a SEAL record, then the next file created and made durable, then the seal
//   synced) before a group would pass `fileBytes`; scanners follow a SEAL to the next file.
// The byte layout is in format.ts and docs/format-host.md; the scan is in stripe-scan.ts, the
// files it opens (creation, the read-handle cache, lazily opened files) in stripe-files.ts.

import * as path from 'node:path';
import type { FileHandle, FileSystem } from '../../fs/types.js';
import type { InlineSyncPolicy } from '../../fs/inline-sync.js';
import { corrupt, fromIo, SeglogError } from '../../errors.js';
import { HostStoreError } from '../errors.js';
import {
  decodePublished,
  decodeStripeHeader,
  encodePublished,
  encodeSealPayload,
  FRAME_HEADER_BYTES,
  frameLength,
  MAX_PAYLOAD_BYTES,
  PUBLISHED_BYTES,
  PUBLISHED_FILE,
  sameBytes,
  sealFrame,
  STRIPE_GATE_FILE,
  STRIPE_HEADER_BYTES,
  STRIPE_LOCK_FILE,
  stripeFileName,
  type Position,
  type Published,
} from './format.js';
import { Mutex } from './mutex.js';
import { createStripeFile, LazyHandle, ReadHandles, StripeGone, stripeDir, zeroChunks } from './stripe-files.js';
import { isMissing } from '../../fs/errno.js';
import { scanStripe, type ScanResult, type ScanSource } from './stripe-scan.js';

/** A SEAL frame's size: header plus its one-byte payload. */
export const SEAL_FRAME_BYTES = FRAME_HEADER_BYTES + 1;

export interface StripeConfig {
  readonly fs: FileSystem;
  /** The realm's directory. */
  readonly realm: string;
  readonly index: number;
  readonly realmTag: Uint8Array;
  readonly boot: Uint8Array;
  /** A stripe file never grows past this. */
  readonly fileBytes: number;
  /** Zero-filled space written ahead of the records, in steps of this much. */
  readonly preallocBytes: number;
  /** Where a group's sync waits (shared by the handle's stripes). */
  readonly syncs: InlineSyncPolicy;
  /** Test-only planted mistakes (see HostMistakes). */
  readonly mistakes?: HostMistakes;
}

/**
 * Test-only switches that plant a known mistake, so that the crash runner proves it catches the
 * class. Never set outside tests; read from an internal `mistakes` field of the store's options.
 * @internal
 */
export interface HostMistakes {
  /** Publish a group (make it visible, answer it) before its fdatasync. */
  publishBeforeSync?: boolean;
  /** Accept a batch whatever its fence token. */
  skipFenceCheck?: boolean;
  /**
   * Loads answer from the published notes alone, leaving a dead writer's unpublished records to
   * whoever takes the stripe's lock next (the rule before loads settled them).
   */
  loadsIgnoreUnpublished?: boolean;
}

/** Where one record of a group went. */
export interface Written {
  seq: number;
  offset: number;
  lsn: number;
}

export class Stripe {
  readonly cfg: StripeConfig;
  readonly dir: string;
  /** In-handle exclusive use of the stripe's lock and write side (groups, acquires). */
  readonly mutex = new Mutex();
  /** Serializes everything that moves the cursor or adds this stripe's records to the view. */
  readonly cursorLock = new Mutex();
  /** The file lock is ours. */
  flockHeld = false;
  /**
   * The lock is claimed: a group, an acquire or an adoption is using it (set by `tryLock`, cleared
   * by `unlock` and by `RealmHandle.linger`). A held lock that is not in use is lingering, and
   * may be let go at any time, even while a group that will claim it holds the mutex.
   */
  inUse = false;
  /**
   * The lock has been held continuously since this handle caught up every stripe up to this one:
   * its view of every scope homed here is exact.
   */
  fresh = false;
  /** How far this handle has read (published or adopted records only). */
  cursor: Position;
  cursorSalt: number;
  /** Set when a write or sync failed: every later write refuses until the store is reopened. */
  poisoned: HostStoreError | null = null;
  /** When the lock was last used (for lingering). */
  lastUse = 0;
  lingerTimer: ReturnType<typeof setTimeout> | null = null;

  readonly #lock: LazyHandle;
  readonly #gate: LazyHandle;
  readonly #published: LazyHandle;
  #writer: { seq: number; handle: FileHandle; salt: number; allocated: number } | null = null;
  readonly #readers: ReadHandles;
  #saltOf = new Map<number, number>();
  /** What `scan` reads through (see stripe-scan.ts). */
  readonly #scanSource: ScanSource;

  constructor(cfg: StripeConfig, start: Position, startSalt: number) {
    this.cfg = cfg;
    this.dir = stripeDir(cfg.realm, cfg.index);
    // Made with the realm and never removed: one missing is CORRUPT (made again, a second writer
    // could lock a new file while the first holds the lost one).
    this.#lock = new LazyHandle(cfg.fs, path.join(this.dir, STRIPE_LOCK_FILE), 'write');
    this.#gate = new LazyHandle(cfg.fs, path.join(this.dir, STRIPE_GATE_FILE), 'write');
    this.#published = new LazyHandle(cfg.fs, path.join(this.dir, PUBLISHED_FILE), 'write');
    this.#readers = new ReadHandles(cfg.fs, (seq) => this.fileOf(seq));
    this.#scanSource = {
      index: cfg.index,
      realmTag: cfg.realmTag,
      fileOf: (seq) => this.fileOf(seq),
      readAt: (seq, into, offset) => this.readAt(seq, into, offset),
      learnSalt: (seq, salt) => void this.#saltOf.set(seq, salt),
    };
    this.cursor = { ...start };
    this.cursorSalt = startSalt;
  }

  get index(): number {
    return this.cfg.index;
  }

  fileOf(seq: number): string {
    return path.join(this.dir, stripeFileName(seq));
  }

  // ---------------------------------------------------------------------------------------------
  // The file lock

  /** Tries to take the stripe's file lock (never waits). */
  async tryLock(why: LockUse): Promise<boolean> {
    if (this.flockHeld) {
      this.inUse = true;
      return true;
    }
    const got = await (await this.#lock.get()).tryLock();
    if (got) {
      this.flockHeld = true;
      this.inUse = true;
      this.fresh = false;
      this.lockUse = { why, at: performance.now() };
    }
    return got;
  }

  /** Who took the file lock last, and when (for failure reports: `FsHostStore.describeLocks`). */
  lockUse: { why: LockUse; at: number } | null = null;
  /** Gate checks made by groups, and how many found the gate closed (for failure reports). */
  readonly gateStats = { checks: 0, closed: 0 };

  /**
   * The stripe's gate: an acquire holds it while it waits for the stripe lock, and a group only
   * uses the lock (taking it, or keeping a lingering one) while the gate is open. So a writer that
   * keeps the lock busy lets go of it, and an acquire is never starved.
   */
  async gateOpen(): Promise<boolean> {
    if (this.gateHeld) return true;
    const gate = await this.#gate.get();
    this.gateStats.checks++;
    if (!(await gate.tryLock())) {
      this.gateStats.closed++;
      return false;
    }
    await gate.unlock();
    return true;
  }

  /** Tries to close the gate (an acquire). */
  async holdGate(): Promise<boolean> {
    if (this.gateHeld) return true;
    this.gateHeld = await (await this.#gate.get()).tryLock();
    return this.gateHeld;
  }

  async releaseGate(): Promise<void> {
    if (!this.gateHeld) return;
    this.gateHeld = false;
    await this.#gate.current?.unlock();
  }

  /** This handle holds the gate closed. */
  gateHeld = false;
  /** When a group last found the gate open. */
  gateCheckedAt = 0;

  async unlock(): Promise<void> {
    if (this.lingerTimer !== null) {
      clearTimeout(this.lingerTimer);
      this.lingerTimer = null;
    }
    this.inUse = false;
    if (!this.flockHeld) return;
    this.flockHeld = false;
    this.fresh = false;
    await this.#lock.current?.unlock();
  }

  // ---------------------------------------------------------------------------------------------
  // Reading

  async readPublished(): Promise<Published | null> {
    const h = await this.#published.get();
    const b = new Uint8Array(PUBLISHED_BYTES);
    const n = await h.read(b, 0);
    return n === PUBLISHED_BYTES ? decodePublished(b) : null;
  }
  /**
   * Reads into `into` at `offset` of file `seq` through the cache of read handles; answers the
   * bytes read (short at the end of the file). Throws StripeGone when the file does not exist.
   * A handle is pinned while a read is in flight: the cache closes an evicted handle only once its
   * last read settled (a closed descriptor's number is reused by the next open in the process).
   */
  readAt(seq: number, into: Uint8Array, offset: number): Promise<number> {
    return this.#readers.readAt(seq, into, offset);
  }

  /** The salt of file `seq` (read from its header the first time). */
  async saltOf(seq: number): Promise<number> {
    const known = this.#saltOf.get(seq);
    if (known !== undefined) return known;
    const b = new Uint8Array(STRIPE_HEADER_BYTES);
    await this.readAt(seq, b, 0);
    const header = decodeStripeHeader(b);
    if (header === null || header.seq !== seq || header.stripe !== this.index) {
      throw corrupt(`stripe file ${this.fileOf(seq)} has no valid header`, { file: this.fileOf(seq) });
    }
    this.#saltOf.set(seq, header.salt);
    return header.salt;
  }

  /** Reads `length` bytes at `offset` of file `seq`. */
  async readBytes(seq: number, offset: number, length: number): Promise<Uint8Array> {
    const b = new Uint8Array(length);
    const n = await this.readAt(seq, b, offset);
    if (n !== length) throw corrupt(`stripe file ${this.fileOf(seq)} is shorter than a record it holds`, { file: this.fileOf(seq), offset });
    return b;
  }

  /**
   * Reads the records from `from` on: up to `limit` (a published position: every frame before it
   * must be valid, or the stripe is corrupt) or, with `limit` null, up to the first frame that
   * does not validate (the valid end; only under the lock is that end stable). See stripe-scan.ts.
   */
  scan(from: Position, fromSalt: number, limit: Position | null): Promise<ScanResult> {
    return scanStripe(this.#scanSource, from, fromSalt, limit);
  }


  /**
   * True when CRC-valid BATCH records follow the cursor, which the caller has just moved to the
   * published note: a writer wrote them and has not published them, so it is still in its group
   * (holding the lock) or it died. Zero-filled space past the note, the common case, costs one
   * read of a frame header; a torn frame or a fenced-out record does not count.
   */
  async hasUnpublished(): Promise<boolean> {
    const from = this.cursor;
    const salt = this.cursorSalt;
    const header = new Uint8Array(FRAME_HEADER_BYTES);
    if ((await this.readAt(from.seq, header, from.offset)) < FRAME_HEADER_BYTES) return false;
    const len = frameLength(header, 0);
    if (len < 1 || len > MAX_PAYLOAD_BYTES) return false;
    return (await this.scan(from, salt, null)).recs.length > 0;
  }

  // ---------------------------------------------------------------------------------------------
  // Writing (under the file lock)

  /**
   * Makes the records of a locked scan durable and published (a dead writer's records, or a
   * new boot's first look): completes a roll the writer did not finish, fdatasyncs the files the
   * scan crossed, then writes the published note. Answers the new end.
   */
  async adopt(scan: ScanResult, published: Published | null): Promise<{ end: Position; salt: number }> {
    let end = scan.end;
    let salt = scan.endSalt;
    const behind =
      published === null ||
      !sameBytes(published.boot, this.cfg.boot) ||
      published.seq !== end.seq ||
      published.offset !== end.offset ||
      published.lsn !== end.lsn ||
      scan.sealedWithoutNext;
    if (!behind) return { end, salt };
    for (const seq of scan.seqs) {
      let h: FileHandle;
      try {
        h = await this.#writeHandle(seq);
      } catch (err) {
        // A file the scan read through a cached handle, removed since by a checkpoint round (its
        // records are durable: the round covered them): the caller jumps and scans again. Nothing
        // was written yet.
        if (isMissing(err)) throw new StripeGone(this.fileOf(seq));
        throw err;
      }
      await h.datasync();
    }
    // The scan followed a SEAL into a file whose writer may have died before the directory sync
    // that makes its name durable (it writes records there only after that sync): sync it here.
    if (scan.seqs.length > 1) await this.cfg.fs.syncDir(this.dir);
    if (scan.sealedWithoutNext) {
      const made = await createStripeFile(
        this.cfg.fs,
        this.dir,
        { stripe: this.index, seq: end.seq + 1, firstLsn: end.lsn, fence: end.fence, realmTag: this.cfg.realmTag },
        this.cfg.preallocBytes,
      );
      await this.#setWriter(end.seq + 1, made.handle, made.salt, made.allocated);
      end = { seq: end.seq + 1, offset: STRIPE_HEADER_BYTES, lsn: end.lsn, fence: end.fence };
      salt = made.salt;
    }
    await this.publish(end);
    return { end, salt };
  }

  publish(p: Position): Promise<void> {
    const note = encodePublished({ seq: p.seq, offset: p.offset, lsn: p.lsn, fence: p.fence, boot: this.cfg.boot });
    // Not an async function: once the note's file is open (after the first) this is one small write.
    const h = this.#published.current;
    return h !== null && h !== undefined ? h.write(note, 0) : this.#published.get().then((opened) => opened.write(note, 0));
  }

  async #writeHandle(seq: number): Promise<FileHandle> {
    const handle = await this.cfg.fs.open(this.fileOf(seq), 'write');
    const allocated = await handle.size();
    const salt = await this.saltOf(seq);
    await this.#setWriter(seq, handle, salt, allocated);
    return handle;
  }

  async #setWriter(seq: number, handle: FileHandle, salt: number, allocated: number): Promise<void> {
    const old = this.#writer;
    this.#writer = { seq, handle, salt, allocated };
    this.#saltOf.set(seq, salt);
    if (old !== null && old.handle !== handle) await old.handle.close().catch(() => undefined);
  }

  /** The largest group (in frame bytes) one file can take. */
  get maxGroupBytes(): number {
    return this.cfg.fileBytes - STRIPE_HEADER_BYTES - SEAL_FRAME_BYTES;
  }

  /**
   * Writes frames (each: 16 bytes of room for the header, then the payload) at the cursor with
   * one writev and one fdatasync, then publishes. The cursor must be the valid end (lock held,
   * caught up). `fence` is the highest fence token after the group. `lone`: the group is the
   * only work in flight of `writer` (the handle's committer), so its sync may wait on the
   * calling thread (InlineSyncPolicy). On failure the group is voided (see the module header)
   * and the stripe poisoned; the error says whether the void held.
   */
  async write(frames: readonly Uint8Array[], fence: number, lone = false, writer: object = this): Promise<Written[]> {
    if (this.poisoned !== null) throw this.poisoned;
    let total = 0;
    for (const f of frames) total += f.length;
    if (total > this.maxGroupBytes) throw new RangeError('group larger than a stripe file');
    // The cursor is replaced, never changed in place: holding the object keeps the position.
    const start = this.cursor;
    // What a failure zeroes: the group's frames, or the SEAL of a roll (see #voidAndPoison).
    const voidAt: VoidRange = { handle: null, offset: 0, length: 0 };
    try {
      if (start.offset + total + SEAL_FRAME_BYTES > this.cfg.fileBytes) await this.#roll(start, voidAt);
      else if (this.#writer?.seq !== start.seq) await this.#writeHandle(start.seq);
      const file = this.#writer!;
      const handle = file.handle;
      const cursor = this.cursor;
      const salt = this.cursorSalt;
      const out: Written[] = new Array(frames.length);
      let at = cursor.offset;
      let lsn = cursor.lsn;
      for (let i = 0; i < frames.length; i++) {
        const f = frames[i]!;
        sealFrame(f, 0, f.length - FRAME_HEADER_BYTES, lsn, salt);
        out[i] = { seq: cursor.seq, offset: at, lsn };
        at += f.length;
        lsn++;
      }
      const chunks = groupChunks(frames, total);
      let allocated = file.allocated;
      if (at > allocated || allocated - at < FRAME_HEADER_BYTES) {
        const target = Math.min(this.cfg.fileBytes, Math.ceil((at + this.cfg.preallocBytes) / 4096) * 4096);
        if (target > at) for (const z of zeroChunks(target - at)) chunks.push(z);
        allocated = Math.max(at, target);
      }
      // Every frame of the group, not only the first: after a void, a retry of the same size lands
      // where the first frame was, and a frame after it left valid would follow it in the chain.
      if (voidAt.handle === null) {
        voidAt.handle = handle;
        voidAt.offset = cursor.offset;
        voidAt.length = total;
      }
      await handle.writev(chunks, cursor.offset);
      file.allocated = Math.max(file.allocated, allocated);
      const end = { seq: cursor.seq, offset: at, lsn, fence: Math.max(fence, cursor.fence) };
      if (this.cfg.mistakes?.publishBeforeSync === true) {
        await this.publish(end);
        // The planted mistake: the sync runs a turn later, after the answer.
        setImmediate(() => void handle.datasync().catch(() => undefined));
      } else {
        await this.cfg.syncs.datasync(handle, lone, writer);
        await this.publish(end);
      }
      this.cursor = end;
      this.cursorSalt = salt;
      if (this.#pendingClose !== null) await this.#closePending();
      return out;
    } catch (err) {
      throw await this.#voidAndPoison(err, start, voidAt);
    }
  }

  /**
   * The roll before a group that would pass the file: a SEAL at `start`, the next file created
   * and made durable, then the seal synced; the cursor moves to the new file's first record.
   * Voiding the seal voids the group: the new file is then no successor of this one, and the
   * roll that follows rewrites it from its start.
   */
  async #roll(start: Position, voidAt: VoidRange): Promise<void> {
    const handle = this.#writer?.seq === start.seq ? this.#writer.handle : await this.#writeHandle(start.seq);
    const seal = new Uint8Array(SEAL_FRAME_BYTES);
    seal.set(encodeSealPayload(), FRAME_HEADER_BYTES);
    sealFrame(seal, 0, 1, start.lsn, this.cursorSalt);
    voidAt.handle = handle;
    voidAt.offset = start.offset;
    voidAt.length = SEAL_FRAME_BYTES;
    await handle.write(seal, start.offset);
    const made = await createStripeFile(
      this.cfg.fs,
      this.dir,
      { stripe: this.index, seq: start.seq + 1, firstLsn: start.lsn + 1, fence: start.fence, realmTag: this.cfg.realmTag },
      this.cfg.preallocBytes,
    );
    await handle.datasync();
    this.#writer = { seq: start.seq + 1, handle: made.handle, salt: made.salt, allocated: made.allocated };
    this.#saltOf.set(start.seq + 1, made.salt);
    // The old handle stays open for a void of the seal; it is closed once the group settles.
    this.cursor = { seq: start.seq + 1, offset: STRIPE_HEADER_BYTES, lsn: start.lsn + 1, fence: start.fence };
    this.cursorSalt = made.salt;
    this.#pendingClose = handle;
  }

  /**
   * After a failed write, sync or publish: zeroes what `voidAt` names and syncs it, puts the
   * cursor back at `start`, poisons the stripe, and answers the GroupFailed to throw.
   */
  async #voidAndPoison(err: unknown, start: Position, voidAt: VoidRange): Promise<GroupFailed> {
    const cause = err instanceof SeglogError ? err : fromIo(err, `write stripe ${this.index}`, this.fileOf(start.seq));
    let voided = voidAt.handle === null;
    if (voidAt.handle !== null) {
      try {
        await voidAt.handle.writev(zeroChunks(voidAt.length), voidAt.offset);
        await voidAt.handle.datasync();
        voided = true;
      } catch {
        voided = false;
      }
    }
    this.cursor = start;
    this.cursorSalt = await this.saltOf(start.seq).catch(() => this.cursorSalt);
    await this.#closePending();
    this.poisoned = HostStoreError.unavailable(`stripe ${this.index} refuses writes after an I/O failure; reopen the store`, cause);
    return new GroupFailed(voided, cause);
  }

  #pendingClose: FileHandle | null = null;

  async #closePending(): Promise<void> {
    const h = this.#pendingClose;
    this.#pendingClose = null;
    if (h !== null && h !== this.#writer?.handle) await h.close().catch(() => undefined);
  }

  /** Closes every file this stripe holds open (the lock too, which releases it). */
  /**
   * Under the file lock, with every record up to `end` durable and published: cuts file `end.seq`
   * back to `end.offset`, giving back the zero-filled space ahead of the records. A writer that
   * comes next writes at the end (the file grows with its frames) and preallocates again once past
   * what it last knew. The cut is synced (a cut lost in a crash would only leave zeros, which never
   * validate as a frame, but the sync keeps every write before an acknowledgement durable by then).
   */
  async trimTail(end: Position): Promise<void> {
    const own = this.#writer !== null && this.#writer.seq === end.seq ? this.#writer : null;
    const h = own?.handle ?? (await this.cfg.fs.open(this.fileOf(end.seq), 'write'));
    try {
      if ((await h.size()) > end.offset) {
        await h.truncate(end.offset);
        // Synced, so that no later acknowledgement waits on a cut another file's sync does not cover.
        await h.datasync();
      }
      if (own !== null) own.allocated = end.offset;
    } finally {
      if (own === null) await h.close().catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    if (this.lingerTimer !== null) clearTimeout(this.lingerTimer);
    this.lingerTimer = null;
    const handles = [this.#writer?.handle ?? null, this.#pendingClose];
    this.gateHeld = false;
    this.#writer = null;
    this.#pendingClose = null;
    this.flockHeld = false;
    this.inUse = false;
    this.fresh = false;
    handles.push(...this.#readers.drain());
    await Promise.all([this.#lock.close(), this.#gate.close(), this.#published.close()]);
    for (const h of handles) if (h !== null) await h.close().catch(() => undefined);
  }
}

/**
 * Why a handle took a stripe's file lock: a commit group, an acquire, adopting strays, recovery at
 * open, a load settling a dead writer's unpublished records.
 */
export type LockUse = 'group' | 'acquire' | 'strays' | 'recover' | 'settle' | 'trim';


/** A group's write failed: `voided` tells whether the group is certain never to land. */
export class GroupFailed extends Error {
  constructor(
    readonly voided: boolean,
    readonly cause: SeglogError,
  ) {
    super(`group write failed (${voided ? 'voided' : 'outcome unknown'}): ${cause.message}`);
  }
}

/** What a failed group zeroes: a range of one file (no handle: nothing was written yet). */
interface VoidRange {
  handle: FileHandle | null;
  offset: number;
  length: number;
}

/** The chunks of one writev for a group's frames: back-to-back views of one buffer go out as one. */
function groupChunks(frames: readonly Uint8Array[], total: number): Uint8Array[] {
  const f0 = frames[0]!;
  if (frames.length === 1) return [f0];
  let contiguous = true;
  for (let i = 1; contiguous && i < frames.length; i++) {
    const f = frames[i]!;
    const before = frames[i - 1]!;
    contiguous = f.buffer === f0.buffer && f.byteOffset === before.byteOffset + before.length;
  }
  return contiguous ? [new Uint8Array(f0.buffer, f0.byteOffset, total)] : [...frames];
}
