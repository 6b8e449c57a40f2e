// Helpers for the payload-store tests: deterministic bodies generated lazily, stream collection,
// disk images with a flipped byte, temp directories.

import { createHash } from 'node:crypto';
import * as os from 'node:os';
import * as path from 'node:path';
import { mkdtemp, rm } from 'node:fs/promises';
import type { DiskImage } from '../../lib/fs/memory.js';

/** Byte `i` of the deterministic payload with this seed. */
export function byteAt(seed: number, i: number): number {
  return (Math.imul(i + 1, 2654435761) ^ Math.imul(seed + 7, 40503) ^ (i >>> 13)) & 0xff;
}

/** The whole deterministic payload (small sizes only). */
export function bytesOf(seed: number, size: number): Uint8Array {
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = byteAt(seed, i);
  return out;
}

/**
 * A lazily generated body of `size` bytes in pieces of `piece` bytes (the last shorter). With
 * `reuse`, one buffer is refilled for every piece (the store copies before asking for the next).
 */
export async function* lazyBody(seed: number, size: number, piece: number, reuse = false): AsyncGenerator<Uint8Array> {
  let shared: Uint8Array | null = null;
  for (let at = 0; at < size; at += piece) {
    const n = Math.min(piece, size - at);
    const buf: Uint8Array = reuse ? (shared !== null && shared.length === n ? shared : (shared = new Uint8Array(n))) : new Uint8Array(n);
    for (let i = 0; i < n; i++) buf[i] = byteAt(seed, at + i);
    yield buf;
  }
}

/** The body `bytes` cut into pieces of the given sizes (cycled). */
export async function* piecesOf(bytes: Uint8Array, sizes: readonly number[] = [bytes.length || 1]): AsyncGenerator<Uint8Array> {
  let at = 0;
  let k = 0;
  while (at < bytes.length) {
    const n = Math.max(1, sizes[k++ % sizes.length] ?? 1);
    yield bytes.slice(at, at + n);
    at += n;
  }
}

export function digestOf(bytes: Uint8Array): string {
  return 'sha256:' + createHash('sha256').update(bytes).digest('hex');
}

/** The digest of the lazily generated payload, computed without holding it. */
export function lazyDigest(seed: number, size: number): string {
  const hash = createHash('sha256');
  const piece = 1 << 20;
  for (let at = 0; at < size; at += piece) {
    const n = Math.min(piece, size - at);
    const buf = new Uint8Array(n);
    for (let i = 0; i < n; i++) buf[i] = byteAt(seed, at + i);
    hash.update(buf);
  }
  return 'sha256:' + hash.digest('hex');
}

/** Reads a stream to the end, joined. */
export async function collect(stream: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let total = 0;
  for await (const c of stream) {
    parts.push(c.slice());
    total += c.length;
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Reads a stream until it ends or throws: the bytes received before, and the error (or null). */
export async function collectUntilError(stream: AsyncIterable<Uint8Array>): Promise<{ bytes: Uint8Array; error: unknown }> {
  const parts: number[] = [];
  let error: unknown = null;
  try {
    for await (const c of stream) for (const b of c) parts.push(b);
  } catch (err) {
    error = err;
  }
  return { bytes: Uint8Array.from(parts), error };
}

/** A copy of `image` with `file` replaced by `bytes`. */
export function withFile(image: DiskImage, file: string, bytes: Uint8Array): DiskImage {
  return { dirs: image.dirs ?? [], files: { ...image.files, [file]: bytes } };
}

/** A copy of `image` with one bit flipped at `offset` of `file`. */
export function withFlippedBit(image: DiskImage, file: string, offset: number, bit = 0): DiskImage {
  const original = image.files[file];
  if (original === undefined) throw new Error(`no file ${file} in the image`);
  const copy = original.slice();
  copy[offset] = (copy[offset] ?? 0) ^ (1 << bit);
  return withFile(image, file, copy);
}

/** Blob path of a digest in a store at `dir`. */
export function blobPath(dir: string, digest: string): string {
  const hex = digest.slice('sha256:'.length);
  return path.posix.join(dir, 'blobs', hex.slice(0, 2), hex);
}

export function refsPath(dir: string, digest: string): string {
  const hex = digest.slice('sha256:'.length);
  return path.posix.join(dir, 'refs', hex.slice(0, 2), hex);
}

/** Files of an image under a directory prefix. */
export function filesUnder(image: DiskImage, prefix: string): string[] {
  return Object.keys(image.files).filter((f) => f.startsWith(prefix.endsWith('/') ? prefix : prefix + '/')).sort();
}

export async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'seglog-payloads-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
