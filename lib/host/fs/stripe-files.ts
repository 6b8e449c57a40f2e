// A stripe's files as one handle opens them: creating a stripe file, reading through a cache of
// read handles, and the lock, gate and note files opened once on first use.
//
// Owns: `createStripeFile` (header and zero-filled space written, the file and its directory
// synced before it answers), `ReadHandles` (at most 8 read handles per stripe, least recently
// used evicted), `LazyHandle`, `StripeGone`, `stripeDir`, `zeroChunks`. Guarantees: a read handle
// is closed only once no read is in flight on it (a closed descriptor's number is reused by the
// next open in the process, so a late read would read another file); a lazily opened file is
// opened exactly once even when first uses race (a second open would leak a descriptor, and with
// it any lock taken through it); a missing stripe file reads as StripeGone, never as empty.

import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { FileHandle, FileSystem, OpenMode } from '../../fs/types.js';
import { corrupt } from '../../errors.js';
import { isMissing } from '../../fs/errno.js';
import { encodeStripeHeader, STRIPE_HEADER_BYTES, stripeFileName, STRIPES_DIR } from './format.js';

const ZEROS = new Uint8Array(1024 * 1024);
const READ_HANDLES = 8;

/** Thrown when a stripe file the cursor needs is gone (the checkpointer removed it). */
export class StripeGone extends Error {
  constructor(readonly file: string) {
    super(`stripe file ${file} is gone`);
  }
}

export function stripeDir(realm: string, index: number): string {
  return path.join(realm, STRIPES_DIR, String(index));
}

/** Creates stripe file `seq` with its header and `prealloc` bytes of zero-filled space, durably (directory too). */
export async function createStripeFile(
  fs: FileSystem,
  dir: string,
  header: { stripe: number; seq: number; firstLsn: number; fence: number; realmTag: Uint8Array },
  prealloc: number,
): Promise<{ handle: FileHandle; salt: number; allocated: number }> {
  const salt = randomBytes(4).readUInt32LE(0);
  const file = path.join(dir, stripeFileName(header.seq));
  const handle = await fs.open(file, 'create');
  try {
    await handle.truncate(0);
    const size = Math.max(prealloc, STRIPE_HEADER_BYTES);
    await handle.writev([encodeStripeHeader({ ...header, salt }), ...zeroChunks(size - STRIPE_HEADER_BYTES)], 0);
    await handle.datasync();
    await fs.syncDir(dir);
    return { handle, salt, allocated: size };
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw err;
  }
}

/** `n` zero bytes as views of one shared zero-filled buffer. */
export function zeroChunks(n: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  while (n > 0) {
    const k = Math.min(n, ZEROS.length);
    out.push(ZEROS.subarray(0, k));
    n -= k;
  }
  return out;
}

/** A cached read handle: `pins` reads in flight; `evicted` once the cache let go of it. */
interface ReadHandle {
  handle: FileHandle;
  pins: number;
  evicted: boolean;
}

/** The read handles of one stripe's files, most recently used last. */
export class ReadHandles {
  readonly #readers = new Map<number, ReadHandle>();

  constructor(
    private readonly fs: FileSystem,
    private readonly fileOf: (seq: number) => string,
  ) {}

  /**
   * Reads into `into` at `offset` of file `seq` through the cache of read handles; answers the
   * bytes read (short at the end of the file). Throws StripeGone when the file does not exist.
   * A handle is pinned while a read is in flight: the cache closes an evicted handle only once its
   * last read settled (a closed descriptor's number is reused by the next open in the process).
   */
  async readAt(seq: number, into: Uint8Array, offset: number): Promise<number> {
    const entry = await this.#reader(seq);
    try {
      return await entry.handle.read(into, offset);
    } finally {
      entry.pins--;
      if (entry.evicted && entry.pins === 0) void entry.handle.close().catch(() => undefined);
    }
  }

  /** The cached read handle of file `seq`, pinned once (the caller unpins). */
  async #reader(seq: number): Promise<ReadHandle> {
    const open = this.#readers.get(seq);
    if (open !== undefined) {
      this.#readers.delete(seq);
      this.#readers.set(seq, open); // most recent last
      open.pins++;
      return open;
    }
    let h: FileHandle;
    try {
      h = await this.fs.open(this.fileOf(seq), 'read');
    } catch (err) {
      if (isMissing(err)) throw new StripeGone(this.fileOf(seq));
      throw err;
    }
    const raced = this.#readers.get(seq);
    if (raced !== undefined) {
      await h.close().catch(() => undefined);
      return this.#reader(seq);
    }
    const entry: ReadHandle = { handle: h, pins: 1, evicted: false };
    this.#readers.set(seq, entry);
    while (this.#readers.size > READ_HANDLES) {
      const [oldSeq, old] = this.#readers.entries().next().value as [number, ReadHandle];
      if (oldSeq === seq) break;
      this.#readers.delete(oldSeq);
      old.evicted = true;
      if (old.pins === 0) void old.handle.close().catch(() => undefined);
    }
    return entry;
  }

  /**
   * Lets go of every handle: answers those to close now; one with a read in flight closes itself
   * when that read settles.
   */
  drain(): FileHandle[] {
    const idle: FileHandle[] = [];
    for (const entry of this.#readers.values()) {
      // A read in flight closes its handle when it settles.
      entry.evicted = true;
      if (entry.pins === 0) idle.push(entry.handle);
    }
    this.#readers.clear();
    return idle;
  }
}

/**
 * A file opened on first use, exactly once even when first uses race: a second open would leak a
 * descriptor, and with it any lock taken through it (held until the process exits).
 */
export class LazyHandle {
  #opening: Promise<FileHandle> | null = null;
  /** The open handle, once the open resolved. */
  current: FileHandle | null = null;

  constructor(
    private readonly fs: FileSystem,
    private readonly file: string,
    private readonly mode: OpenMode,
  ) {}

  get(): Promise<FileHandle> {
    if (this.#opening === null) {
      const opened = this.fs.open(this.file, this.mode).catch((err: unknown) => {
        // A file opened without 'create' is one the realm's creation made and nothing removes.
        if (this.mode !== 'create' && isMissing(err)) throw corrupt(`${this.file} is missing (it is made with the realm)`, { file: this.file });
        throw err;
      });
      const opening = opened.then((h) => {
        if (this.#opening === opening) this.current = h;
        else void h.close().catch(() => undefined); // closed while opening
        return h;
      });
      this.#opening = opening;
      opening.catch(() => {
        if (this.#opening === opening) this.#opening = null;
      });
    }
    return this.#opening;
  }

  /** Closes the handle (a lock taken through it is released); the next `get` opens it again. */
  async close(): Promise<void> {
    const h = this.current;
    this.#opening = null;
    this.current = null;
    await h?.close().catch(() => undefined);
  }
}
