// The node's payload store: content-addressed, streamed, reference-counted message bodies.
//
// Owns: `openPayloadStore` and the `FsPayloadStore` it returns (the PayloadStore of
// docs/contracts/raft-store.md, section 3). The bytes of every file are in ./format.ts; the protocols and their crash arguments in
// docs/payloads.md. Guarantees:
// - `put` resolves only when the payload is durable under its digest: the framed blob was written
//   to a temporary file, fdatasynced, linked into `blobs/<hh>/` and that directory synced. A
//   failed put (TOO_LARGE, DIGEST_MISMATCH, the body's own error, an I/O error) leaves no blob and
//   removes its temporary file (and the next open removes any a crash left).
// - Identical bytes are stored once. A put that finds its digest present replaces that copy with
//   its own (same bytes, newer written time) by an atomic rename: this restarts the grace period
//   for the second producer, whose record is on its way too, and heals a damaged old copy.
// - `get` never serves a byte that failed its chunk CRC; damage ends the stream with CORRUPT.
// - References are a durable set of holders per digest (idempotent add and remove); a refcount
//   file is replaced by temp → fdatasync → rename → directory sync, and removed with its last
//   holder. A damaged refcount file is CORRUPT, never an empty set.
// - `collectGarbage` removes a blob only when, under that digest's mutex, it has no holder, the
//   `isNamed` hook says no durable or staged log record names it, and it was written at least
//   `graceMs` of store time ago. Store time is the clock's time while the store is open, carried
//   across restarts by the CLOCK cell: it never runs faster than the node's uptime, so a restart
//   never shortens a grace period (it may lengthen one, by at most the time since the last
//   checkpoint: every collection and every close checkpoints).
// - Everything an answer relies on was synced before the answer: a fan-out directory another
//   process may have changed without syncing is synced once before this store first relies on it.
// - A failed sync (file or directory) that follows a change the store cannot take back poisons
//   the store: every later write rejects with POISONED until it is reopened. Reads keep working.
// - One open store per directory: the LOCK file is try-locked (LOCKED otherwise).

import { lockDirectory } from '../fs/lock.js';
import { ownEntry } from '../fs/own-entry.js';
import * as path from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import { SeglogError, closed, corrupt, fromIo, invalid, notFound, poisoned } from '../errors.js';
import { assert } from '../assert.js';
import type { Clock } from '../clock.js';
import { monotonicClock } from '../clock.js';
import type { FileHandle, FileSystem } from '../fs/types.js';
import { realFs } from '../fs/real.js';
import { openCell, type Cell, type KnownDurable } from '../../cells/index.js';
import {
  BLOB_HEADER_BYTES,
  BLOBS,
  CLOCK_NAME,
  CLOCK_SLOT_BYTES,
  DEFAULT_CHUNK_BYTES,
  DIGEST_PREFIX,
  FORMAT_BYTES,
  FORMAT_NAME,
  LOCK_NAME,
  MAX_CHUNK_BYTES,
  MAX_HOLDERS,
  MIN_CHUNK_BYTES,
  REFS,
  REFS_HEADER_BYTES,
  HELD_SUFFIX,
  TMP,
  checkFormat,
  decodeBlobHeader,
  decodeRefs,
  encodeBlobHeader,
  encodeFormat,
  encodeRefs,
  fanoutOf,
  hexOf,
  holderProblem,
  isFanoutName,
  isHexName,
  isPayloadDigest,
  refsBodyBytes,
  type BlobHeader,
} from './format.js';
import { KeyedMutex } from './mutex.js';
import { BatchBuffers } from './buffers.js';
import { BlobReader } from './read.js';
import { writeFrames } from './write.js';

// ---------------------------------------------------------------------------------------------
// Public shapes (docs/contracts/raft-store.md, section 8)

/** A stored payload: its content address and its length in bytes. */
export interface PayloadInfo {
  /** `'sha256:'` followed by 64 lowercase hex digits: the SHA-256 of the payload's bytes. */
  digest: string;
  size: number;
}

/**
 * A Node.js readable stream as `put` takes it: what `NodeJS.ReadableStream` is, described by its
 * async iterator, so that the published types resolve for a consumer that does not load
 * @types/node. It must be in binary mode: a chunk that is a string is refused (INVALID).
 */
export interface ReadableStreamLike {
  [Symbol.asyncIterator](): AsyncIterator<string | Uint8Array>;
}

/**
 * What `put` takes: any async iterable of byte chunks, or a Node.js readable stream in binary mode
 * (`AsyncIterable<Uint8Array> | NodeJS.ReadableStream`, written without Node's own types).
 */
export type PayloadBody = AsyncIterable<Uint8Array> | ReadableStreamLike;

export interface PutOptions {
  /** Refuse (TOO_LARGE, nothing stored) a body longer than this many bytes. */
  maxBytes?: number;
  /** Refuse (DIGEST_MISMATCH, nothing stored) a body whose digest is not this one. */
  expectedDigest?: string;
}

/** What `collectGarbage` removed: payloads, and the sum of their sizes (payload bytes). */
export interface GarbageReport {
  removed: number;
  bytes: number;
}

/** The node's payload store (docs/contracts/raft-store.md, section 3). */
export interface PayloadStore {
  /**
   * Streams `body` in and resolves once it is durable under its digest. Identical bytes are
   * stored once. Rejects with TOO_LARGE or DIGEST_MISMATCH (nothing stored), INVALID for bad
   * options, with the body's own error when it throws, POISONED, NO_SPACE or IO_ERROR.
   */
  put(body: PayloadBody, options?: PutOptions): Promise<PayloadInfo>;
  /**
   * The payload's bytes as a stream (NOT_FOUND when absent). Each chunk is verified (its CRC32,
   * seeded with the blob's salt and the chunk's index) before it is yielded; damage ends the
   * stream with CORRUPT. With `verifyDigestOnGet` the SHA-256 of the whole payload is also checked
   * before the last chunk is yielded. The file stays open until the stream ends, is broken out
   * of, or the store closes: consume it or call `return()`.
   */
  get(digest: string): Promise<AsyncIterable<Uint8Array>>;
  /** The payload's digest and size, or null when absent (reads the header only). */
  stat(digest: string): Promise<PayloadInfo | null>;
  /** Adds `holder` to the payload's holders; durable on resolve; NOT_FOUND when absent. Idempotent. */
  addRef(digest: string, holder: string): Promise<void>;
  /** Removes `holder` from the payload's holders; durable on resolve. Idempotent. */
  removeRef(digest: string, holder: string): Promise<void>;
  /** The payload's holders, in the byte order of their UTF-8. */
  refs(digest: string): Promise<string[]>;
  /** Removes payloads nobody holds or names and that are older than the grace period. */
  collectGarbage(): Promise<GarbageReport>;
}

export interface PayloadStoreOptions {
  /** The file-system layer (default: the real one). */
  fs?: FileSystem;
  /** Monotonic milliseconds (default: the machine's monotonic clock). Measures the grace period. */
  clock?: Clock;
  /**
   * How long (store time, ms) an unreferenced payload is kept after its last `put`, so that the
   * record naming it can reach the log. Default 10 minutes.
   */
  graceMs?: number;
  /** Payload bytes per verified chunk of a new blob (default 65536; 64 .. 4 MiB). */
  chunkBytes?: number;
  /**
   * Every `get` also recomputes the SHA-256 of the whole payload and ends the stream with
   * CORRUPT, before its last chunk, when it differs from the digest (default false: each chunk's
   * salted CRC32 and the header are checked, as every record of seglog's logs is; `verify({ deep
   * })` always recomputes the digest). On, a get runs no faster than one core's SHA-256 (about
   * 1.5 GiB/s here); off, at about the speed of a plain read of the file (docs/payloads.md,
   * "What a get checks").
   */
  verifyDigestOnGet?: boolean;
  /**
   * Asked by `collectGarbage`, under the digest's mutex, before it removes an unreferenced payload
   * past its grace period: true keeps it. The node answers true for every digest named by a log
   * record that is durable or staged (see docs/payloads.md, "The isNamed hook"). A throw aborts
   * the collection. Default: nothing is named.
   */
  isNamed?: (digest: string) => boolean | Promise<boolean>;
}

export const DEFAULT_GRACE_MS = 10 * 60 * 1000;

/** What `verify` found: payloads and their bytes that checked, refcount files, and every problem. */
export interface PayloadVerifyReport {
  payloads: number;
  bytes: number;
  refFiles: number;
  problems: { digest: string; code: string; message: string }[];
}

// ---------------------------------------------------------------------------------------------
// Layout (the names are format.ts's)

/** A refcount file missing beside its marker: the holder set was lost. */
function lostRefs(file: string, marker: string): SeglogError {
  return corrupt(`refcount file ${file} is missing beside its marker ${marker}: the payload's holders were lost`, { path: file });
}

function tempName(kind: 'put' | 'ref' | 'format'): string {
  return `${kind}-${randomBytes(8).toString('hex')}`;
}

function errnoOf(err: unknown): unknown {
  return (err as { code?: unknown } | null)?.code;
}

function encodeStoreTime(ms: number): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(ms), true);
  return out;
}

function decodeStoreTime(bytes: Uint8Array, file: string): number {
  if (bytes.length !== 8) throw corrupt(`store clock ${file} holds ${bytes.length} bytes, expected 8`, { path: file });
  const value = new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw corrupt(`store clock ${file} is out of range`, { path: file });
  return Number(value);
}

async function readExactly(handle: FileHandle, length: number, position: number, file: string): Promise<Uint8Array> {
  const bytes = new Uint8Array(length);
  const n = await handle.read(bytes, position);
  if (n !== length) throw corrupt(`${file} ends at ${position + n}, expected at least ${position + length}`, { path: file });
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// Opening

/**
 * Opens (creating it when `dir` holds no store) the payload store in `dir`. Rejects with LOCKED
 * when another handle has it open, CORRUPT when its structure is damaged, INVALID for bad options.
 * Removes the temporary files of writers that died.
 */
export async function openPayloadStore(dir: string, options: PayloadStoreOptions = {}): Promise<FsPayloadStore> {
  if (typeof dir !== 'string' || dir.length === 0) throw invalid('a payload store needs a directory');
  const graceMs = options.graceMs ?? DEFAULT_GRACE_MS;
  if (!Number.isSafeInteger(graceMs) || graceMs < 0) throw invalid(`graceMs must be a safe non-negative integer`);
  const chunkBytes = options.chunkBytes ?? DEFAULT_CHUNK_BYTES;
  if (!Number.isSafeInteger(chunkBytes) || chunkBytes < MIN_CHUNK_BYTES || chunkBytes > MAX_CHUNK_BYTES) {
    throw invalid(`chunkBytes must be an integer in [${MIN_CHUNK_BYTES}, ${MAX_CHUNK_BYTES}]`);
  }
  if (options.isNamed !== undefined && typeof options.isNamed !== 'function') throw invalid('isNamed must be a function');
  const verifyDigestOnGet = options.verifyDigestOnGet ?? false;
  if (typeof verifyDigestOnGet !== 'boolean') throw invalid('verifyDigestOnGet must be a boolean');
  const clock = options.clock ?? monotonicClock;
  if (typeof clock?.now !== 'function') throw invalid('clock must have now()');
  const fs = options.fs ?? realFs;
  // An owner that recorded the store's clean close (a Raft node) knows its files are durable.
  const knownDurable = (options as KnownDurable).knownDurable === true;
  // One turn of the event loop first: such an open may make every file-system call on the calling
  // thread (lib/fs/real.ts), and a loop of opens would never let timers or I/O run.
  await nextTurn();

  try {
    await fs.mkdir(dir);
  } catch (err) {
    throw fromIo(err, 'create payload store directory', dir);
  }
  const lock = await lockDirectory(fs, dir, LOCK_NAME);
  let cell: Cell | null = null;
  try {
    const created = await prepareLayout(fs, dir, knownDurable);
    await removeTemps(fs, dir, new Set(), true);
    const clockPath = path.join(dir, CLOCK_NAME);
    cell = await openCell(clockPath, { fs, slotBytes: CLOCK_SLOT_BYTES, ...(knownDurable ? { knownDurable: true } : {}) });
    const stored = await cell.read();
    if (stored === null) throw corrupt(`store clock ${clockPath} is missing`, { path: clockPath });
    const base = decodeStoreTime(stored, clockPath);
    return new FsPayloadStore({ dir, fs, clock, graceMs, chunkBytes, verifyDigestOnGet, isNamed: options.isNamed, lock, cell, base, created });
  } catch (err) {
    if (cell !== null) await cell.close().catch(() => undefined);
    await lock.close().catch(() => undefined);
    throw fromIo(err, 'open payload store', dir);
  }
}

/**
 * Checks the structure of an existing store, or creates a new one; answers whether it created.
 * Creation order: sub-directories, the CLOCK cell (value 0), then FORMAT, each made durable
 * before the next; FORMAT is the commit point, so a store without it holds no payload yet.
 */
async function prepareLayout(fs: FileSystem, dir: string, knownDurable: boolean): Promise<boolean> {
  const formatPath = path.join(dir, FORMAT_NAME);
  let format: FileHandle | null = null;
  try {
    format = await fs.open(formatPath, 'read');
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw fromIo(err, 'open', formatPath);
  }
  if (format !== null) {
    try {
      const size = await format.size();
      const bytes = new Uint8Array(FORMAT_BYTES);
      await format.read(bytes, 0);
      checkFormat(bytes, size, formatPath);
    } finally {
      await format.close().catch(() => undefined);
    }
    for (const sub of [BLOBS, REFS, TMP]) {
      const st = await ownEntry(fs, path.join(dir, sub), 'payload store directory');
      if (st === null || !st.isDirectory) throw corrupt(`payload store ${dir} has no ${sub}/ directory`, { path: path.join(dir, sub) });
    }
    // An earlier process may have died before syncing what we just read: make it durable
    // (unless the owner knows it is: KnownDurable).
    if (!knownDurable) await fs.syncDir(dir);
    return false;
  }
  // No marker: a new store, or a creation that did not finish. Either way no payload was ever
  // acknowledged here; anything found in blobs/ or refs/ means the marker was lost.
  for (const sub of [BLOBS, REFS, TMP]) await ownEntry(fs, path.join(dir, sub), 'payload store directory');
  for (const sub of [BLOBS, REFS]) {
    const at = path.join(dir, sub);
    const st = await fs.stat(at);
    if (st !== null && (!st.isDirectory || (await fs.readdir(at)).length > 0)) {
      throw corrupt(`payload store ${dir} has ${sub}/ content but no ${FORMAT_NAME} marker`, { path: dir });
    }
  }
  for (const sub of [BLOBS, REFS, TMP]) await fs.mkdir(path.join(dir, sub));
  await fs.syncDir(dir);
  // The store's own directory (and any parent mkdir made) is an entry of its parent: durable only
  // after the parent's sync. Once per store lifetime, so every ancestor up to the root (an
  // ancestor above the parent that we may not open was not made by us: skip it).
  for (let at = dir, up = path.dirname(dir); up !== at; at = up, up = path.dirname(up)) {
    try {
      await fs.syncDir(up);
    } catch (err) {
      const errno = errnoOf(err);
      if (up === path.dirname(dir) || (errno !== 'EACCES' && errno !== 'EPERM')) throw err;
    }
  }
  const clockPath = path.join(dir, CLOCK_NAME);
  if ((await ownEntry(fs, `${clockPath}.tmp`, 'payload store temporary file')) !== null) await fs.unlink(`${clockPath}.tmp`).catch(() => undefined);
  const cell = await openCell(clockPath, { fs, slotBytes: CLOCK_SLOT_BYTES });
  try {
    if ((await cell.read()) === null) await cell.write(encodeStoreTime(0));
  } finally {
    await cell.close();
  }
  const temp = path.join(dir, TMP, tempName('format'));
  const handle = await fs.open(temp, 'create-exclusive');
  try {
    await handle.write(encodeFormat(), 0);
    await handle.datasync();
  } finally {
    await handle.close();
  }
  await fs.rename(temp, formatPath);
  await fs.syncDir(dir);
  return true;
}

/**
 * Unlinks every file in tmp/ not named in `keep`; at open also a leftover of the CLOCK cell's
 * creation (the cell is not open then, and its file exists, so the cell never needs it again).
 */
async function removeTemps(fs: FileSystem, dir: string, keep: ReadonlySet<string>, atOpen: boolean): Promise<number> {
  const tmp = path.join(dir, TMP);
  let removed = 0;
  let names: string[];
  await ownEntry(fs, tmp, 'payload store directory');
  try {
    names = await fs.readdir(tmp);
  } catch (err) {
    throw fromIo(err, 'list', tmp);
  }
  for (const name of names) {
    if (keep.has(name)) continue;
    // Only a file this store wrote is removed: a link or a directory in tmp/ is not one.
    const st = await ownEntry(fs, path.join(tmp, name), 'payload store temporary file');
    if (st === null) continue;
    if (st.isDirectory) throw corrupt(`payload store temporary file ${path.join(tmp, name)} is a directory`, { path: path.join(tmp, name) });
    try {
      await fs.unlink(path.join(tmp, name));
      removed++;
    } catch (err) {
      if (errnoOf(err) !== 'ENOENT') throw fromIo(err, 'remove temporary file', path.join(tmp, name));
    }
  }
  try {
    if (removed > 0) await fs.syncDir(tmp);
    const cellTemp = path.join(dir, `${CLOCK_NAME}.tmp`);
    if (atOpen && (await ownEntry(fs, cellTemp, 'payload store temporary file')) !== null) {
      await fs.unlink(cellTemp);
      await fs.syncDir(dir);
      removed++;
    }
  } catch (err) {
    throw fromIo(err, 'remove temporary files', tmp);
  }
  return removed;
}

// ---------------------------------------------------------------------------------------------
// The store

interface StoreParts {
  dir: string;
  fs: FileSystem;
  clock: Clock;
  graceMs: number;
  chunkBytes: number;
  verifyDigestOnGet: boolean;
  isNamed: ((digest: string) => boolean | Promise<boolean>) | undefined;
  lock: FileHandle;
  cell: Cell;
  base: number;
  created: boolean;
}

/** The payload store of one node, in one directory. See the module header. */
export class FsPayloadStore implements PayloadStore {
  readonly dir: string;
  readonly #fs: FileSystem;
  readonly #clock: Clock;
  readonly #graceMs: number;
  readonly #chunkBytes: number;
  readonly #verifyDigestOnGet: boolean;
  readonly #isNamed: ((digest: string) => boolean | Promise<boolean>) | undefined;
  readonly #lock: FileHandle;
  readonly #cell: Cell;
  /** Store time at open, and the clock's reading then. */
  readonly #storeBase: number;
  readonly #clockAtOpen: number;
  #lastStoreTime: number;
  readonly #mutex = new KeyedMutex();
  /** Names in tmp/ that a running operation of this store owns. */
  readonly #temps = new Set<string>();
  /** Fan-out directories synced (or being synced) since open: trusted from then on. */
  readonly #trusted = new Map<string, Promise<void>>();
  /** `blobs/` and `refs/` synced (or being synced) since open. */
  readonly #kindSyncs = new Map<string, Promise<void>>();
  readonly #readers = new Set<BlobReader>();
  /** Batch buffers shared by this store's puts and gets. */
  readonly #buffers = new BatchBuffers();
  readonly #active = new Set<Promise<unknown>>();
  #gcTail: Promise<unknown> = Promise.resolve();
  #poison: unknown = null;
  #closedClean = false;
  #closing: Promise<void> | null = null;
  /** True when this open created the store. */
  readonly created: boolean;

  /** @internal: use openPayloadStore. */
  constructor(parts: StoreParts) {
    this.dir = parts.dir;
    this.#fs = parts.fs;
    this.#clock = parts.clock;
    this.#graceMs = parts.graceMs;
    this.#chunkBytes = parts.chunkBytes;
    this.#verifyDigestOnGet = parts.verifyDigestOnGet;
    this.#isNamed = parts.isNamed;
    this.#lock = parts.lock;
    this.#cell = parts.cell;
    this.#storeBase = parts.base;
    this.#lastStoreTime = parts.base;
    this.#clockAtOpen = parts.clock.now();
    this.created = parts.created;
  }

  /** The grace period in ms of store time. */
  get graceMs(): number {
    return this.#graceMs;
  }

  /**
   * Store time in ms: the CLOCK cell's value at open plus the clock's progress since. Never
   * decreases; never runs faster than the clock.
   */
  storeTime(): number {
    const elapsed = Math.max(0, this.#clock.now() - this.#clockAtOpen);
    const t = Math.floor(this.#storeBase + elapsed);
    if (t > this.#lastStoreTime) this.#lastStoreTime = t;
    return this.#lastStoreTime;
  }

  // --- put -----------------------------------------------------------------------------------

  async put(body: PayloadBody, options: PutOptions = {}): Promise<PayloadInfo> {
    return this.#op(() => this.#put(body, options));
  }

  async #put(body: PayloadBody, options: PutOptions): Promise<PayloadInfo> {
    const maxBytes = options?.maxBytes ?? Number.MAX_SAFE_INTEGER;
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw invalid('maxBytes must be a safe non-negative integer');
    const expected = options?.expectedDigest;
    if (expected !== undefined && !isPayloadDigest(expected)) {
      throw invalid(`expectedDigest must be '${DIGEST_PREFIX}' + 64 lowercase hex digits`);
    }
    if (body === null || typeof body !== 'object' || typeof (body as { [Symbol.asyncIterator]?: unknown })[Symbol.asyncIterator] !== 'function') {
      throw invalid('a payload body must be an AsyncIterable<Uint8Array> or a Readable');
    }
    this.#checkWritable();
    const name = tempName('put');
    const temp = path.join(this.dir, TMP, name);
    this.#temps.add(name);
    let handle: FileHandle | null = null;
    try {
      try {
        handle = await this.#fs.open(temp, 'create-exclusive');
      } catch (err) {
        throw fromIo(err, 'create temporary file', temp);
      }
      const salt = new Uint8Array(randomBytes(8));
      const { size, sha256 } = await writeFrames(handle, body as AsyncIterable<unknown>, {
        chunkBytes: this.#chunkBytes,
        salt,
        maxBytes,
        start: BLOB_HEADER_BYTES,
        buffers: this.#buffers,
      });
      const hex = Buffer.from(sha256).toString('hex');
      const digest = DIGEST_PREFIX + hex;
      if (expected !== undefined && expected !== digest) {
        throw new SeglogError('DIGEST_MISMATCH', `payload digest is ${digest}, expected ${expected}`, {
          details: { digest, expected },
        });
      }
      this.#checkWritable();
      const header = encodeBlobHeader({ chunkBytes: this.#chunkBytes, size, written: this.storeTime(), salt, sha256 });
      // The fan-out directory is made ready while the file syncs: either may finish first, the
      // link waits for both.
      const fanout = this.#fanout(BLOBS, fanoutOf(hex), true);
      fanout.catch(() => undefined); // awaited below, after the sync
      try {
        await handle.write(header, 0);
        await handle.datasync();
      } catch (err) {
        await fanout.catch(() => undefined);
        // A failed fdatasync of this temporary file is not retried: the file is abandoned.
        throw fromIo(err, 'write payload', temp);
      }
      const h = handle;
      handle = null;
      // The link needs the file synced, not closed: the close runs beside the fan-out's syncs.
      const closing = h.close().catch(() => undefined);
      try {
        await fanout;
      } finally {
        await closing;
      }
      await this.#mutex.run(hex, () => this.#linkBlob(temp, hex));
      return { digest, size };
    } catch (err) {
      if (handle !== null) await handle.close().catch(() => undefined);
      await this.#fs.unlink(temp).catch(() => undefined);
      throw err; // file-system failures were wrapped where they happened; the body's own error passes

    } finally {
      this.#temps.delete(name);
    }
  }

  /** Puts the synced temporary file in place under its digest, then syncs the fan-out directory. */
  async #linkBlob(temp: string, hex: string): Promise<void> {
    this.#checkWritable();
    const blob = this.#blobPath(hex);
    try {
      await this.#fs.link(temp, blob);
      await this.#fs.unlink(temp);
    } catch (err) {
      if (errnoOf(err) !== 'EEXIST') throw fromIo(err, 'link payload', blob);
      // Identical bytes are stored already. Ours replace them (atomically, same bytes): the
      // written time restarts this producer's grace period, and a damaged old copy is healed.
      try {
        await this.#fs.rename(temp, blob);
      } catch (err2) {
        throw fromIo(err2, 'replace payload', blob);
      }
    }
    await this.#syncDir(path.dirname(blob));
  }

  // --- get / stat ----------------------------------------------------------------------------

  get(digest: string): Promise<AsyncIterable<Uint8Array>> {
    return this.#get(digest, this.#verifyDigestOnGet);
  }

  /** `get`; `checkDigest`: the whole payload's SHA-256 is checked before its last chunk is yielded. */
  async #get(digest: string, checkDigest: boolean): Promise<AsyncIterable<Uint8Array>> {
    const hex = this.#hexOrThrow(digest);
    return this.#op(async () => {
      const opened = await this.#mutex.run(hex, () => this.#openBlob(hex));
      if (opened === null) throw notFound(`payload ${digest} is not stored`, { digest });
      const reader = new BlobReader(opened.handle, opened.header, digest, this.#blobPath(hex), (r) => this.#readers.delete(r), this.#buffers, checkDigest);
      this.#readers.add(reader);
      return reader;
    });
  }

  async stat(digest: string): Promise<PayloadInfo | null> {
    const hex = this.#hexOrThrow(digest);
    return this.#op(async () => {
      const opened = await this.#mutex.run(hex, () => this.#openBlob(hex));
      if (opened === null) return null;
      await opened.handle.close().catch(() => undefined);
      return { digest, size: opened.header.size };
    });
  }

  /**
   * Opens a blob and validates its header; null when absent, CORRUPT when absent although it has
   * holders. Call under the digest's mutex.
   */
  async #openBlob(hex: string): Promise<{ handle: FileHandle; header: BlobHeader } | null> {
    if (!(await this.#fanout(BLOBS, fanoutOf(hex), false))) return this.#absentBlob(hex);
    const file = this.#blobPath(hex);
    let handle: FileHandle;
    try {
      handle = await this.#fs.open(file, 'read');
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return this.#absentBlob(hex);
      throw fromIo(err, 'open payload', file);
    }
    try {
      const size = await handle.size();
      const bytes = new Uint8Array(BLOB_HEADER_BYTES);
      await handle.read(bytes, 0);
      const header = decodeBlobHeader(bytes, size, hex, file);
      return { handle, header };
    } catch (err) {
      await handle.close().catch(() => undefined);
      throw fromIo(err, 'read payload header', file);
    }
  }

  /**
   * A blob that is not there: null (never stored, or collected), unless its holder set is not
   * empty. `addRef` needs the blob and collection skips a blob with holders, so holders without a
   * blob mean the blob was lost: CORRUPT, never "not stored". Call under the digest's mutex.
   */
  async #absentBlob(hex: string): Promise<null> {
    const holders = (await this.#fanout(REFS, fanoutOf(hex), false)) ? await this.#readRefs(hex) : [];
    if (holders.length > 0) {
      const file = this.#blobPath(hex);
      throw corrupt(`payload sha256:${hex} has ${holders.length} holder(s) but its blob ${file} is gone`, { digest: `sha256:${hex}`, path: file });
    }
    return null;
  }

  // --- references ----------------------------------------------------------------------------

  async addRef(digest: string, holder: string): Promise<void> {
    const hex = this.#hexOrThrow(digest);
    this.#holderOrThrow(holder);
    return this.#op(() =>
      this.#mutex.run(hex, async () => {
        this.#checkWritable();
        const present = (await this.#fanout(BLOBS, fanoutOf(hex), false)) && (await this.#exists(this.#blobPath(hex)));
        if (!present) throw notFound(`payload ${digest} is not stored`, { digest });
        await this.#fanout(REFS, fanoutOf(hex), true);
        const holders = await this.#readRefs(hex);
        if (holders.includes(holder)) return;
        if (holders.length >= MAX_HOLDERS) {
          throw new SeglogError('TOO_LARGE', `payload ${digest} already has ${MAX_HOLDERS} holders`, { details: { digest } });
        }
        await this.#writeRefs(hex, [...holders, holder]);
        // The first holder: the refcount file is durable, now its marker (see #heldPath). If the
        // marker cannot be made, the holder set goes back to empty before the call fails, so a
        // failed addRef leaves nothing (and a retry makes both again).
        if (holders.length === 0) {
          try {
            await this.#markHeld(hex);
          } catch (err) {
            await this.#writeRefs(hex, []);
            throw err;
          }
        }
      }),
    );
  }

  async removeRef(digest: string, holder: string): Promise<void> {
    const hex = this.#hexOrThrow(digest);
    this.#holderOrThrow(holder);
    return this.#op(() =>
      this.#mutex.run(hex, async () => {
        this.#checkWritable();
        if (!(await this.#fanout(REFS, fanoutOf(hex), false))) return;
        const holders = await this.#readRefs(hex);
        if (!holders.includes(holder)) return;
        await this.#writeRefs(
          hex,
          holders.filter((h) => h !== holder),
        );
      }),
    );
  }

  async refs(digest: string): Promise<string[]> {
    const hex = this.#hexOrThrow(digest);
    return this.#op(() =>
      this.#mutex.run(hex, async () => {
        if (!(await this.#fanout(REFS, fanoutOf(hex), false))) return [];
        return this.#readRefs(hex);
      }),
    );
  }

  /**
   * The holder set of a digest ([] when it has no refcount file). CORRUPT when damaged, and when
   * the refcount file is missing beside its marker (the set was lost, not emptied).
   */
  async #readRefs(hex: string): Promise<string[]> {
    const file = this.#refsPath(hex);
    let handle: FileHandle;
    try {
      handle = await this.#fs.open(file, 'read');
    } catch (err) {
      if (errnoOf(err) !== 'ENOENT') throw fromIo(err, 'open refcount file', file);
      if (await this.#exists(this.#heldPath(hex))) throw lostRefs(file, this.#heldPath(hex));
      return [];
    }
    try {
      const size = await handle.size();
      const header = await readExactly(handle, Math.min(size, REFS_HEADER_BYTES), 0, file);
      const body = refsBodyBytes(header, size, file); // bounds the allocation below
      const bytes = await readExactly(handle, REFS_HEADER_BYTES + body + 4, 0, file);
      return decodeRefs(bytes, hex, file);
    } catch (err) {
      throw fromIo(err, 'read refcount file', file);
    } finally {
      await handle.close().catch(() => undefined);
    }
  }

  /**
   * Durably replaces the holder set of a digest: temp → fdatasync → rename → directory sync, or,
   * for an empty set, unlink → directory sync. Call under the digest's mutex.
   */
  async #writeRefs(hex: string, holders: string[]): Promise<void> {
    const file = this.#refsPath(hex);
    const dir = path.dirname(file);
    if (holders.length === 0) {
      // The marker goes first, durably: a crash never leaves a marker without its refcount file.
      for (const p of [this.#heldPath(hex), file]) {
        try {
          await this.#fs.unlink(p);
        } catch (err) {
          if (errnoOf(err) !== 'ENOENT') throw fromIo(err, 'remove refcount file', p);
        }
        await this.#syncDir(dir);
      }
      return;
    }
    const name = tempName('ref');
    const temp = path.join(this.dir, TMP, name);
    this.#temps.add(name);
    try {
      let renamed = false;
      try {
        const handle = await this.#fs.open(temp, 'create-exclusive');
        try {
          await handle.write(encodeRefs(hex, holders), 0);
          await handle.datasync();
        } finally {
          await handle.close().catch(() => undefined);
        }
        await this.#fs.rename(temp, file);
        renamed = true;
      } catch (err) {
        if (!renamed) await this.#fs.unlink(temp).catch(() => undefined);
        throw fromIo(err, 'write refcount file', file);
      }
      await this.#syncDir(dir);
    } finally {
      this.#temps.delete(name);
    }
  }

  // --- garbage collection --------------------------------------------------------------------

  async collectGarbage(): Promise<GarbageReport> {
    return this.#op(() => {
      // One collection at a time; a second call runs after the first.
      const run = this.#gcTail.then(
        () => this.#collect(),
        () => this.#collect(),
      );
      this.#gcTail = run.catch(() => undefined);
      return run;
    });
  }

  async #collect(): Promise<GarbageReport> {
    this.#checkWritable();
    await this.#checkpoint();
    const now = this.storeTime();
    // Temporary files of writers that died are garbage (a resurrected unlink is harmless: the
    // next open or collection removes it again), so a failure here does not poison.
    await removeTemps(this.#fs, this.dir, this.#temps, false);
    let removed = 0;
    let bytes = 0;
    const damaged: string[] = [];
    const blobs = path.join(this.dir, BLOBS);
    for (const hh of (await this.#readdir(blobs)).sort()) {
      if (!isFanoutName(hh)) continue;
      const blobDir = path.join(blobs, hh);
      await this.#fanout(BLOBS, hh, false);
      const names = await this.#readdir(blobDir);
      const held = new Set(await this.#readdir(path.join(this.dir, REFS, hh), true));
      let unlinked = false;
      for (const hex of names.sort()) {
        if (!isHexName(hex) || fanoutOf(hex) !== hh || held.has(hex)) continue;
        const outcome = await this.#mutex.run(hex, () => this.#collectOne(hex, now));
        if (outcome === 'damaged') damaged.push(DIGEST_PREFIX + hex);
        else if (outcome !== 'kept') {
          removed++;
          bytes += outcome;
          unlinked = true;
        }
      }
      if (unlinked) await this.#syncDir(blobDir);
    }
    if (damaged.length > 0) {
      throw corrupt(`${damaged.length} unreferenced payload(s) have a damaged header or a lost refcount file and were kept: ${damaged.slice(0, 8).join(', ')}`, {
        digests: damaged,
        removed,
        bytes,
      });
    }
    return { removed, bytes };
  }

  /** Decides one blob under its mutex: 'kept', 'damaged', or the size of a removed payload. */
  async #collectOne(hex: string, now: number): Promise<'kept' | 'damaged' | number> {
    this.#checkWritable();
    if (await this.#exists(this.#refsPath(hex))) return 'kept';
    if (await this.#exists(this.#heldPath(hex))) return 'damaged'; // its refcount file was lost: kept
    let opened: { handle: FileHandle; header: BlobHeader } | null;
    try {
      opened = await this.#openBlob(hex);
    } catch (err) {
      if (err instanceof SeglogError && err.code === 'CORRUPT') return 'damaged';
      throw err;
    }
    if (opened === null) return 'kept'; // gone meanwhile
    await opened.handle.close().catch(() => undefined);
    const { written, size } = opened.header;
    // written > now: the copy was written after the last checkpoint of a run that crashed; it is
    // young (its age is unknown but not more than the store time lost).
    if (written > now || now - written < this.#graceMs) return 'kept';
    if (this.#isNamed !== undefined && (await this.#isNamed(DIGEST_PREFIX + hex))) return 'kept';
    this.#checkWritable();
    try {
      await this.#fs.unlink(this.#blobPath(hex));
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return 'kept';
      throw fromIo(err, 'remove payload', this.#blobPath(hex));
    }
    return size;
  }

  /** Makes the current store time durable (the CLOCK cell). A failure poisons the store. */
  async #checkpoint(): Promise<void> {
    try {
      await this.#cell.write(encodeStoreTime(this.storeTime()));
    } catch (err) {
      if (this.#poison === null) this.#poison = err;
      throw fromIo(err, 'checkpoint store time', path.join(this.dir, CLOCK_NAME));
    }
  }

  // --- listing -------------------------------------------------------------------------------

  /** Every stored digest, fan-out directory by fan-out directory (for verification and rebuilds). */
  async *digests(): AsyncIterable<string> {
    if (this.#closing !== null) throw closed('payload store');
    const blobs = path.join(this.dir, BLOBS);
    for (const hh of (await this.#readdir(blobs)).sort()) {
      if (!isFanoutName(hh)) continue;
      for (const hex of (await this.#readdir(path.join(blobs, hh), true)).sort()) {
        if (isHexName(hex) && fanoutOf(hex) === hh) yield DIGEST_PREFIX + hex;
      }
    }
  }

  /**
   * Checks every blob (its header and length; with `deep`, every chunk's CRC and the digest) and
   * every refcount file (and that its payload exists), without changing anything. For
   * `seglog verify`: answers what it found instead of throwing at the first problem.
   */
  async verify(options: { deep?: boolean } = {}): Promise<PayloadVerifyReport> {
    return this.#op(async () => {
      const report: PayloadVerifyReport = { payloads: 0, bytes: 0, refFiles: 0, problems: [] };
      const problem = (digest: string, err: unknown): void => {
        const code = err instanceof SeglogError ? err.code : 'IO_ERROR';
        report.problems.push({ digest, code, message: err instanceof Error ? err.message : String(err) });
      };
      for await (const digest of this.digests()) {
        try {
          const info = options.deep === true ? await this.#drain(digest) : await this.stat(digest);
          if (info !== null) {
            report.payloads++;
            report.bytes += info.size;
          }
        } catch (err) {
          problem(digest, err);
        }
      }
      const refs = path.join(this.dir, REFS);
      for (const hh of (await this.#readdir(refs)).sort()) {
        if (!isFanoutName(hh)) continue;
        for (const hex of (await this.#readdir(path.join(refs, hh), true)).sort()) {
          const marked = hex.endsWith(HELD_SUFFIX) ? hex.slice(0, -HELD_SUFFIX.length) : null;
          if (marked !== null && isHexName(marked) && fanoutOf(marked) === hh && !(await this.#exists(this.#refsPath(marked)))) {
            problem(DIGEST_PREFIX + marked, lostRefs(this.#refsPath(marked), this.#heldPath(marked)));
            continue;
          }
          if (!isHexName(hex) || fanoutOf(hex) !== hh) continue;
          const digest = DIGEST_PREFIX + hex;
          report.refFiles++;
          try {
            const holders = await this.refs(digest);
            if (holders.length > 0 && !(await this.#exists(this.#blobPath(hex)))) {
              problem(digest, corrupt(`payload ${digest} has holders (${holders.length}) but no bytes`, { digest }));
            }
          } catch (err) {
            problem(digest, err);
          }
        }
      }
      return report;
    });
  }

  /** Reads the payload to its end, every chunk's CRC and the whole payload's digest checked. */
  async #drain(digest: string): Promise<PayloadInfo> {
    let size = 0;
    for await (const chunk of await this.#get(digest, true)) size += chunk.length;
    return { digest, size };
  }

  // --- lifecycle -----------------------------------------------------------------------------

  /**
   * Refuses new calls, waits for the running ones, ends every open `get` stream (a later `next()` rejects with
   * CLOSED), checkpoints the store time, and releases the directory. Idempotent.
   */
  /**
   * True once close() finished with no write or sync failure in the store's life: every file of
   * it was durable then (an owner may record that, and open with KnownDurable). @internal
   */
  get closedClean(): boolean {
    return this.#closedClean;
  }

  close(): Promise<void> {
    if (this.#closing === null) {
      this.#closing = (async () => {
        // New calls are refused from now on; calls already admitted finish (a get among them
        // may still add a reader), then every reader is ended.
        while (this.#active.size > 0) await Promise.allSettled([...this.#active]);
        await Promise.allSettled([...this.#readers].map((r) => r.close(true)));
        let clean = this.#poison === null;
        if (this.#poison === null) {
          await this.#cell.write(encodeStoreTime(this.storeTime())).catch(() => {
            clean = false;
          });
        }
        await this.#cell.close().catch(() => {
          clean = false;
        });
        this.#closedClean = clean;
        await this.#lock.close().catch(() => undefined);
      })();
    }
    return this.#closing;
  }

  // --- helpers -------------------------------------------------------------------------------

  #op<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#closing !== null) return Promise.reject(closed('payload store'));
    const run = fn();
    this.#active.add(run);
    const forget = (): void => {
      this.#active.delete(run);
    };
    run.then(forget, forget);
    return run;
  }

  /** Refuses a write after a sync failure. (A call admitted before close() runs to its end.) */
  #checkWritable(): void {
    if (this.#poison !== null) throw poisoned('payload store', this.#poison);
  }

  #hexOrThrow(digest: string): string {
    if (!isPayloadDigest(digest)) throw invalid(`a digest is '${DIGEST_PREFIX}' + 64 lowercase hex digits`, { digest });
    return hexOf(digest);
  }

  #holderOrThrow(holder: string): void {
    const problem = holderProblem(holder);
    if (problem !== null) throw invalid(problem);
  }

  #blobPath(hex: string): string {
    return path.join(this.dir, BLOBS, fanoutOf(hex), hex);
  }

  /**
   * The marker of a digest with holders: an empty `refs/<hh>/<hex>.held`, made once its first
   * holder's refcount file is durable and removed (durably) before its last one's refcount file.
   * So a marker is never without its refcount file in any state a crash leaves, and a refcount
   * file missing beside its marker was lost: CORRUPT, never an empty holder set.
   */
  #heldPath(hex: string): string {
    return `${this.#refsPath(hex)}${HELD_SUFFIX}`;
  }

  /** Makes the marker of `hex` durable (its refcount file is durable already). */
  async #markHeld(hex: string): Promise<void> {
    const marker = this.#heldPath(hex);
    try {
      const h = await this.#fs.open(marker, 'create');
      await h.close();
    } catch (err) {
      throw fromIo(err, 'create refcount marker', marker);
    }
    await this.#syncDir(path.dirname(marker));
  }

  #refsPath(hex: string): string {
    return path.join(this.dir, REFS, fanoutOf(hex), hex);
  }

  async #exists(file: string): Promise<boolean> {
    try {
      return (await this.#fs.stat(file)) !== null;
    } catch (err) {
      throw fromIo(err, 'stat', file);
    }
  }

  async #readdir(dir: string, missingOk = false): Promise<string[]> {
    try {
      return await this.#fs.readdir(dir);
    } catch (err) {
      if (missingOk && errnoOf(err) === 'ENOENT') return [];
      throw fromIo(err, 'list', dir);
    }
  }

  /** fsync of a directory after a change that cannot be taken back: a failure poisons the store. */
  async #syncDir(dir: string): Promise<void> {
    try {
      await this.#fs.syncDir(dir);
    } catch (err) {
      throw this.#poisonIfSync(err, 'sync directory', dir);
    }
  }

  #poisonIfSync(err: unknown, action: string, at: string): SeglogError {
    if (this.#poison === null && !(err instanceof SeglogError)) this.#poison = err;
    return fromIo(err, action, at);
  }

  /**
   * Makes `<kind>/<hh>` trusted: its entry in `<kind>/` and its own entries are durable, so that
   * nothing this store answers rests on a directory entry a power loss could still take back (an
   * earlier process may have died before syncing them). A directory that exists is trusted after
   * `<kind>/` has been synced once since open and the directory itself once; one that this call
   * creates (`create`) is trusted once `<kind>/` is synced after the mkdir — it is empty, and
   * every entry this store adds to it is synced by the protocol that adds it. Without `create`,
   * answers false when the directory does not exist.
   */
  async #fanout(kind: typeof BLOBS | typeof REFS, hh: string, create: boolean): Promise<boolean> {
    assert(isFanoutName(hh), 'a fan-out directory is named by two hex digits');
    const dir = path.join(this.dir, kind, hh);
    let ready = this.#trusted.get(dir);
    if (ready === undefined) {
      // Never through a link: a collection would remove what it finds behind one.
      const st = await ownEntry(this.#fs, dir, 'payload store fan-out directory');
      if (st !== null && !st.isDirectory) throw corrupt(`${dir} is not a directory`, { path: dir });
      if (st === null && !create) return false;
      ready = this.#trusted.get(dir); // another call may have started meanwhile
      if (ready === undefined) {
        ready =
          st === null
            ? (async () => {
                try {
                  await this.#fs.mkdir(dir);
                } catch (err) {
                  throw fromIo(err, 'create directory', dir);
                }
                await this.#syncDir(path.join(this.dir, kind));
              })()
            : (async () => {
                await this.#kindSynced(kind);
                await this.#syncDir(dir);
              })();
        this.#trusted.set(dir, ready);
        const settled = ready;
        settled.catch(() => {
          if (this.#trusted.get(dir) === settled) this.#trusted.delete(dir);
        });
      }
    }
    await ready;
    return true;
  }

  /** Syncs `<kind>/` once per open (again only after a failure): its entries then are durable. */
  #kindSynced(kind: typeof BLOBS | typeof REFS): Promise<void> {
    let synced = this.#kindSyncs.get(kind);
    if (synced === undefined) {
      synced = this.#syncDir(path.join(this.dir, kind));
      this.#kindSyncs.set(kind, synced);
      const settled = synced;
      settled.catch(() => {
        if (this.#kindSyncs.get(kind) === settled) this.#kindSyncs.delete(kind);
      });
    }
    return synced;
  }
}
