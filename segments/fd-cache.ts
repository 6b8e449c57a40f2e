// A cache of open file handles, shared by any number of logs, so that thousands of logs can be
// open at once without thousands of descriptors.
//
// Owns: `FdCache`. Guarantees: a handle is never closed while a user holds it (acquire/release
// count); when more than `max` handles are open, the least recently used idle ones are closed.
// Handles in use may push the count past `max` for as long as they are held (a soft cap: refusing
// would deadlock a read that needs one more file). Handles are keyed by file system and path, so
// two file-system layers (a test's MemoryFs and the real one) never share an entry.

import type { FileHandle, FileSystem } from '../lib/fs/types.js';

interface Entry {
  key: string;
  fs: FileSystem;
  path: string;
  /** The open in progress or done. */
  handle: Promise<FileHandle>;
  users: number;
  /** Set once the entry left the map (evicted or forgotten); the last release closes it. */
  retired: boolean;
}

export interface FdCacheOptions {
  /** Most idle handles kept open (default 512). */
  max?: number;
}

/** An LRU cache of open FileHandles; pass one as `options.fdCache` to share it between logs. */
export class FdCache {
  readonly max: number;
  /** In least-recently-used-first order: a use moves an entry to the end. */
  #entries = new Map<string, Entry>();
  #fsIds = new WeakMap<FileSystem, number>();
  #nextFsId = 1;

  constructor(options: FdCacheOptions = {}) {
    const max = options.max ?? 512;
    if (!Number.isSafeInteger(max) || max < 1) throw new RangeError('FdCache max must be a positive integer');
    this.max = max;
  }

  /** Open handles, idle and in use. */
  get size(): number {
    return this.#entries.size;
  }

  #key(fs: FileSystem, path: string): string {
    let id = this.#fsIds.get(fs);
    if (id === undefined) {
      id = this.#nextFsId++;
      this.#fsIds.set(fs, id);
    }
    return `${id}\u0000${path}`;
  }

  /**
   * A handle on `path` opened for reading and writing (the file must exist), held until the
   * returned `release` is called.
   */
  async acquire(fs: FileSystem, path: string): Promise<{ handle: FileHandle; release: () => void }> {
    const key = this.#key(fs, path);
    let entry = this.#entries.get(key);
    if (entry === undefined) {
      entry = { key, fs, path, handle: fs.open(path, 'write'), users: 0, retired: false };
      this.#entries.set(key, entry);
      const e = entry;
      // A failed open leaves no entry behind, so the next acquire retries.
      e.handle.catch(() => {
        if (this.#entries.get(key) === e) this.#entries.delete(key);
        e.retired = true;
      });
    }
    else {
      this.#entries.delete(key);
      this.#entries.set(key, entry);
    }
    entry.users++;
    const e = entry;
    let handle: FileHandle;
    try {
      handle = await e.handle;
    } catch (err) {
      e.users--;
      throw err;
    }
    this.#trim();
    let released = false;
    return {
      handle,
      release: () => {
        if (released) return;
        released = true;
        e.users--;
        if (e.users === 0 && e.retired) void closeQuietly(e.handle);
        else this.#trim();
      },
    };
  }

  /**
   * Drops the entry for `path` (before an unlink, or when its log closes): closed now if idle,
   * else by its last release. Resolves once an idle handle is closed.
   */
  async forget(fs: FileSystem, path: string): Promise<void> {
    const key = this.#key(fs, path);
    const e = this.#entries.get(key);
    if (e === undefined) return;
    this.#entries.delete(key);
    e.retired = true;
    if (e.users === 0) await closeQuietly(e.handle);
  }

  /** Closes idle handles, least recently used first, until at most `max` remain. */
  #trim(): void {
    let excess = this.#entries.size - this.max;
    if (excess <= 0) return;
    for (const e of this.#entries.values()) {
      if (excess <= 0) break;
      if (e.users > 0) continue;
      this.#entries.delete(e.key);
      e.retired = true;
      void closeQuietly(e.handle);
      excess--;
    }
  }
}

async function closeQuietly(handle: Promise<FileHandle>): Promise<void> {
  try {
    await (await handle).close();
  } catch {
    // Closing a read/write handle whose data was synced loses nothing; an open that failed has
    // nothing to close.
  }
}

/** The process-wide cache every log uses unless given its own. */
export const defaultFdCache = new FdCache({ max: 512 });
