// The real file-system layer: Node's `fs` on file descriptors, plus try-locks.
//
// Owns: `realFs`, the FileSystem every store uses unless a test passes another. Guarantees: full
// writes (short writes are continued, never returned), positional I/O only, and locks that never
// wait (flock-style locks from fs-native-extensions, owned by the open file description).
// Uses the callback API on raw descriptors: it costs less per call than fs/promises handles.
// Reads and writes of at most SMALL_IO_BYTES are made synchronously, on the calling thread: a
// small positional read or write is a page-cache copy of a few microseconds, less than the
// round trip through libuv's thread pool that an asynchronous call costs (20-50 us under load),
// and the stores make many of them (published notes, cell slots, frame headers, home cells).
// Opening a file that exists (to read, or to write without creating), opening a directory to
// read, closing a descriptor nothing was written through, stat, lstat, fstat and readdir are
// made there too (path lookups, inode and directory reads of the page cache; a directory sync
// sends only its fsync to the pool). Measured on the 2-core machine, loaded: opening a node of
// 1,000 groups took 0.45x the time it took with these on the pool (docs/raft-store.md). So an
// open or a load may never hand anything to the pool: the stores' opens each wait one turn of the
// event loop (setImmediate) so that a loop of opens cannot starve timers and I/O callbacks.
// Large transfers, syncs, and opens that create keep to the pool; a sync, a large write or a
// large read runs on the calling thread only when its caller asks (`datasync('inline')`,
// `writev(..., 'inline')`, `read(..., 'inline')`).

import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import type { EntryStat, FileHandle, FileStat, FileSystem, OpenMode, SyncWhere } from './types.js';

const require = createRequire(import.meta.url);
const lockNative = require('fs-native-extensions') as {
  tryLock(fd: number): boolean;
  unlock(fd: number): void;
};

/** Reads and writes up to this size are synchronous (see the header). */
export const SMALL_IO_BYTES = 16 * 1024;

/** The most bytes Linux moves in one read(2) (MAX_RW_COUNT): a longer request reads short before the end. */
const MAX_ONE_READ = 0x7ffff000;

const { O_RDONLY, O_RDWR, O_CREAT, O_EXCL, O_DIRECTORY } = fs.constants;

const FLAGS: Record<OpenMode, number> = {
  read: O_RDONLY,
  write: O_RDWR,
  create: O_RDWR | O_CREAT,
  'create-exclusive': O_RDWR | O_CREAT | O_EXCL,
};

function call<T>(fn: (cb: (err: NodeJS.ErrnoException | null, value: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))));
}

function shortWriteError(path: string): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(`write to ${path} made no progress`);
  err.code = 'EIO';
  return err;
}

/** What is left of `chunks` once their first `n` bytes were written (a short writev) or read (a short readv). */
function afterWritten(chunks: readonly Uint8Array[], n: number): Uint8Array[] {
  let left = n;
  const rest: Uint8Array[] = [];
  for (const chunk of chunks) {
    if (left >= chunk.length) left -= chunk.length;
    else {
      rest.push(left > 0 ? chunk.subarray(left) : chunk);
      left = 0;
    }
  }
  return rest;
}

class RealFileHandle implements FileHandle {
  readonly path: string;
  #fd: number;
  #closed = false;

  readonly #readOnly: boolean;
  /** Whether anything was written through this descriptor (a write, a writev or a truncate). */
  #wrote = false;

  constructor(path: string, fd: number, readOnly: boolean) {
    this.path = path;
    this.#fd = fd;
    this.#readOnly = readOnly;
  }

  /**
   * The descriptor, or EBADF once closed: a closed descriptor's number is reused by the next open
   * in the process (worker threads included), and a late call through a stale handle would read,
   * write or lock some other file.
   */
  get #live(): number {
    if (this.#closed) {
      const err: NodeJS.ErrnoException = new Error(`EBADF: ${this.path} was used after close`);
      err.code = 'EBADF';
      throw err;
    }
    return this.#fd;
  }

  read(into: Uint8Array, position: number, where: SyncWhere = 'pool'): Promise<number> {
    if (into.length <= SMALL_IO_BYTES || where === 'inline') {
      try {
        const fd = this.#live;
        let done = 0;
        while (done < into.length) {
          const want = into.length - done;
          const n = fs.readSync(fd, into, done, want, position + done);
          done += n;
          // A regular file reads short only at its end (or past Linux's cap on one call): a
          // second call to learn that it is the end would be one system call of every small read
          // of a whole file (a cell's, a manifest's) in vain.
          if (n === 0 || (n < want && want <= MAX_ONE_READ)) break;
        }
        return Promise.resolve(done);
      } catch (err) {
        return Promise.reject(err as Error);
      }
    }
    return this.#readAll(into, position);
  }

  async #readAll(into: Uint8Array, position: number): Promise<number> {
    let done = 0;
    while (done < into.length) {
      const want = into.length - done;
      const n = await call<number>((cb) => fs.read(this.#live, into, done, want, position + done, cb));
      done += n;
      if (n === 0 || (n < want && want <= MAX_ONE_READ)) break;
    }
    return done;
  }

  async readv(into: readonly Uint8Array[], position: number): Promise<number> {
    let pending = into.filter((b) => b.length > 0);
    let want = 0;
    for (const b of pending) want += b.length;
    let done = 0;
    while (pending.length > 0) {
      const left = want - done;
      const n = await call<number>((cb) => fs.readv(this.#live, pending, position + done, cb));
      done += n;
      // As in #readAll: short at the end of a regular file (or past Linux's cap on one call).
      if (n === 0 || (n < left && left <= MAX_ONE_READ)) break;
      pending = afterWritten(pending, n);
    }
    return done;
  }

  write(data: Uint8Array, position: number): Promise<void> {
    this.#wrote = true;
    // Not an async function: a small write is done here, and its answer needs no frame of its own.
    if (data.length <= SMALL_IO_BYTES) {
      try {
        const fd = this.#live;
        for (let done = 0; done < data.length; ) {
          const n = fs.writeSync(fd, data, done, data.length - done, position + done);
          if (n <= 0) throw shortWriteError(this.path);
          done += n;
        }
        return Promise.resolve();
      } catch (err) {
        return Promise.reject(err as Error);
      }
    }
    return this.#writeAll(data, position);
  }

  async #writeAll(data: Uint8Array, position: number): Promise<void> {
    let done = 0;
    while (done < data.length) {
      const n = await call<number>((cb) => fs.write(this.#live, data, done, data.length - done, position + done, cb));
      if (n <= 0) throw shortWriteError(this.path);
      done += n;
    }
  }

  writev(chunks: readonly Uint8Array[], position: number, where: SyncWhere = 'pool'): Promise<void> {
    this.#wrote = true;
    let total = 0;
    for (const c of chunks) total += c.length;
    if (where !== 'inline' && total > SMALL_IO_BYTES) return this.#writevPool(chunks, position);
    // Made here (not an async function: the commit path writes one small group per commit).
    try {
      let pending = chunks as Uint8Array[];
      let at = position;
      let left = total;
      while (left > 0) {
        const n = fs.writevSync(this.#live, pending, at);
        if (n <= 0) throw shortWriteError(this.path);
        at += n;
        left -= n;
        if (left > 0) pending = afterWritten(pending, n);
      }
      return Promise.resolve();
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  async #writevPool(chunks: readonly Uint8Array[], position: number): Promise<void> {
    let pending = chunks.filter((c) => c.length > 0);
    let at = position;
    while (pending.length > 0) {
      const n = await call<number>((cb) => fs.writev(this.#live, pending as Uint8Array[], at, cb));
      if (n <= 0) throw shortWriteError(this.path);
      at += n;
      pending = afterWritten(pending, n);
    }
  }

  datasync(where: SyncWhere = 'pool'): Promise<void> {
    if (where === 'inline') {
      try {
        fs.fdatasyncSync(this.#live);
        return Promise.resolve();
      } catch (err) {
        return Promise.reject(err as Error);
      }
    }
    return call<void>((cb) => fs.fdatasync(this.#live, (err) => cb(err, undefined)));
  }

  sync(): Promise<void> {
    return call<void>((cb) => fs.fsync(this.#live, (err) => cb(err, undefined)));
  }

  truncate(size: number): Promise<void> {
    this.#wrote = true;
    return call<void>((cb) => fs.ftruncate(this.#live, size, (err) => cb(err, undefined)));
  }

  size(): Promise<number> {
    // An fstat reads the inode the descriptor holds: no I/O, made here like a small read.
    try {
      return Promise.resolve(fs.fstatSync(this.#live).size);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  async tryLock(): Promise<boolean> {
    // The native call is a non-blocking flock(LOCK_EX | LOCK_NB): it never waits on the pool.
    return lockNative.tryLock(this.#live);
  }

  async unlock(): Promise<void> {
    lockNative.unlock(this.#live);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    // Closing a descriptor nothing was written through writes nothing back (a read-only one, or
    // one opened to write that only read, as a cell's open does): done here, without a pool round
    // trip. One that wrote closes on the pool (a file system may flush at close).
    if (this.#readOnly || !this.#wrote) fs.closeSync(this.#fd);
    else await call<void>((cb) => fs.close(this.#fd, (err) => cb(err, undefined)));
  }
}

async function openReal(path: string, mode: OpenMode): Promise<FileHandle> {
  // Opening a file that exists (to read, or to read and write: no O_CREAT, no O_TRUNC) is a path
  // lookup in the dentry cache with nothing created or written: made on the calling thread like a
  // small read (a listing opens thousands of small files; a node of 1,000 groups opens its cells
  // and manifests). An open that may create a file keeps to the pool.
  const fd = mode === 'read' || mode === 'write' ? fs.openSync(path, FLAGS[mode]) : await call<number>((cb) => fs.open(path, FLAGS[mode], 0o644, cb));
  return new RealFileHandle(path, fd, mode === 'read');
}

async function syncDir(dir: string): Promise<void> {
  // Opening a directory to read and closing that descriptor write nothing: made here, so that a
  // directory sync costs one pool round trip (the fsync), not three.
  const fd = fs.openSync(dir, O_RDONLY | O_DIRECTORY);
  try {
    await call<void>((cb) => fs.fsync(fd, (err) => cb(err, undefined)));
  } finally {
    fs.closeSync(fd);
  }
}

// A stat is a path lookup, as an open to read is: made on the calling thread (opening a node of
// 1,000 groups checks every file it opens is no link, about twenty lookups a group).
async function stat(path: string): Promise<FileStat | null> {
  const st = fs.statSync(path, { throwIfNoEntry: false });
  return st === undefined ? null : { size: st.size, isDirectory: st.isDirectory() };
}

async function lstat(path: string): Promise<EntryStat | null> {
  const st = fs.lstatSync(path, { throwIfNoEntry: false });
  return st === undefined ? null : { size: st.size, isDirectory: st.isDirectory(), isSymbolicLink: st.isSymbolicLink() };
}

/** The real file system. */
export const realFs: FileSystem = {
  open: openReal,
  // A listing is read on the calling thread too: the stores' directories are small or sharded
  // (a group's or a log's few files, 256 shards of blobs, homes and refcounts), and on a busy
  // machine the pool's hand-off costs more than a listing of a few hundred names.
  readdir: async (dir) => fs.readdirSync(dir),
  // d_type from the same getdents (Node lstats an entry the file system did not type).
  readdirEntries: async (dir) =>
    fs.readdirSync(dir, { withFileTypes: true }).map((e) => ({
      name: e.name,
      kind: e.isSymbolicLink() ? 'symlink' : e.isDirectory() ? 'directory' : e.isFile() ? 'file' : 'other',
    })),
  mkdir: async (dir) => {
    await fs.promises.mkdir(dir, { recursive: true });
  },
  rename: (from, to) => fs.promises.rename(from, to),
  link: (from, to) => fs.promises.link(from, to),
  unlink: (path) => fs.promises.unlink(path),
  rmdir: (dir) => fs.promises.rmdir(dir),
  stat,
  lstat,
  syncDir,
};
