// Raw file-system calls for the disk benchmarks: node:fs callbacks on raw descriptors, as promises.
//
// Owns: the thin wrappers the raw benchmarks time. These measure the disk, not seglog, which is why
// they may use node:fs directly (allowed in bench/ only; stores go through lib/fs). Guarantees: the
// same call path as lib/fs/real.ts (callback API on descriptors, no FileHandle objects), so the raw
// figures are a fair floor for the engine; a short write is an error here, never silently counted.

import * as fs from 'node:fs';

export const { O_WRONLY, O_RDONLY, O_CREAT, O_TRUNC, O_EXCL, O_DSYNC, O_SYNC, O_APPEND } = fs.constants;
/** O_DIRECTORY where the platform has it (opening a directory to fsync it). */
export const O_DIRECTORY = fs.constants.O_DIRECTORY ?? 0;

function done<T>(resolve: (v: T) => void, reject: (e: unknown) => void) {
  return (err: NodeJS.ErrnoException | null, value: T): void => (err ? reject(err) : resolve(value));
}

export function open(path: string, flags: number, mode = 0o644): Promise<number> {
  return new Promise((res, rej) => fs.open(path, flags, mode, done(res, rej)));
}

export function close(fd: number): Promise<void> {
  return new Promise((res, rej) => fs.close(fd, (err) => (err ? rej(err) : res())));
}

export function write(fd: number, buf: Uint8Array, position: number | null): Promise<void> {
  return new Promise((res, rej) =>
    fs.write(fd, buf, 0, buf.length, position, (err, n) => {
      if (err) rej(err);
      else if (n !== buf.length) rej(new Error(`short write: ${n} of ${buf.length} bytes`));
      else res();
    }),
  );
}

/** Reads up to buf.length bytes at `position`; answers the count read. */
export function read(fd: number, buf: Uint8Array, position: number): Promise<number> {
  return new Promise((res, rej) => fs.read(fd, buf, 0, buf.length, position, (err, n) => (err ? rej(err) : res(n))));
}

export function writev(fd: number, bufs: Uint8Array[], position: number, total: number): Promise<void> {
  return new Promise((res, rej) =>
    fs.writev(fd, bufs, position, (err, n) => {
      if (err) rej(err);
      else if (n !== total) rej(new Error(`short writev: ${n} of ${total} bytes`));
      else res();
    }),
  );
}

export function fdatasync(fd: number): Promise<void> {
  return new Promise((res, rej) => fs.fdatasync(fd, (err) => (err ? rej(err) : res())));
}

export function fsync(fd: number): Promise<void> {
  return new Promise((res, rej) => fs.fsync(fd, (err) => (err ? rej(err) : res())));
}

export function rename(from: string, to: string): Promise<void> {
  return new Promise((res, rej) => fs.rename(from, to, (err) => (err ? rej(err) : res())));
}

/** fsync of a directory: makes its entries' creations, renames and removals durable. */
export async function syncDir(dir: string): Promise<void> {
  const fd = await open(dir, O_RDONLY | O_DIRECTORY);
  try {
    await fsync(fd);
  } finally {
    await close(fd);
  }
}

/** A buffer of `size` bytes of a fixed non-zero pattern (so nothing compresses or dedupes it away). */
export function payload(size: number, seed = 1): Buffer {
  const b = Buffer.allocUnsafe(size);
  let x = (seed * 2654435761) >>> 0;
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}

/** Creates (or replaces) `path` as `bytes` of zeros, written and fsynced: preallocated space. */
export async function zeroFill(path: string, bytes: number): Promise<void> {
  const fd = await open(path, O_WRONLY | O_CREAT | O_TRUNC);
  try {
    const chunk = Buffer.alloc(Math.min(bytes, 1 << 20));
    for (let at = 0; at < bytes; at += chunk.length) {
      await write(fd, chunk.subarray(0, Math.min(chunk.length, bytes - at)), at);
    }
    await fsync(fd);
  } finally {
    await close(fd);
  }
}
