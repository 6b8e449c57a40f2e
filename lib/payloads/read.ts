// Streaming a payload out of its blob file, verifying as it goes.
//
// Owns: `BlobReader`, the AsyncIterableIterator that `get` answers. Guarantees:
// - No chunk is yielded before its CRC32 (seeded with the blob's salt and the chunk's index,
//   format.ts) has checked, and the batch holding the last chunk is yielded only after the
//   SHA-256 of the whole payload has matched the digest: a damaged chunk ends the stream with
//   CORRUPT before any of its bytes are served. (Damage that a CRC32 misses, about 1 in 2^32 for
//   random damage, is caught by the SHA-256 at the end of the stream.)
// - Bounded memory: one batch of about 1 MiB read ahead (prefetched while the consumer works on
//   the previous one); yielded chunks are views of a fresh buffer per batch, never reused.
// - The file stays open from `get` to the end of the stream, so a garbage collection that
//   unlinks the name meanwhile does not disturb it; `return()` (a `break` out of `for await`),
//   an error, or the store's `close()` closes it. A read is never in flight when the handle closes.

import { createHash, type Hash } from 'node:crypto';
import { closed, corrupt, fromIo } from '../errors.js';
import type { FileHandle } from '../fs/types.js';
import { BLOB_HEADER_BYTES, CHUNK_CRC_BYTES, chunkCount, chunkCrc, type BlobHeader } from './format.js';

const BATCH_TARGET_BYTES = 1 << 20;

export class BlobReader implements AsyncIterableIterator<Uint8Array> {
  readonly #handle: FileHandle;
  readonly #header: BlobHeader;
  readonly #file: string;
  readonly #digest: string;
  readonly #onClose: (reader: BlobReader) => void;
  readonly #framesPerBatch: number;
  readonly #chunks: number;
  readonly #hash: Hash = createHash('sha256');
  #nextChunk = 0;
  #position = BLOB_HEADER_BYTES;
  #ready: Uint8Array[] = [];
  #readyAt = 0;
  #prefetch: Promise<Uint8Array[]> | null = null;
  #finished = false;
  #closing: Promise<void> | null = null;
  #closedByStore = false;

  constructor(handle: FileHandle, header: BlobHeader, digest: string, file: string, onClose: (reader: BlobReader) => void) {
    this.#handle = handle;
    this.#header = header;
    this.#digest = digest;
    this.#file = file;
    this.#onClose = onClose;
    this.#framesPerBatch = Math.max(1, Math.floor(BATCH_TARGET_BYTES / (header.chunkBytes + CHUNK_CRC_BYTES)));
    this.#chunks = chunkCount(header.size, header.chunkBytes);
  }

  /** The stream is its own iterator: one pass only (a second `for await` sees where the first stopped). */
  [Symbol.asyncIterator](): AsyncIterableIterator<Uint8Array> {
    return this;
  }

  async next(): Promise<IteratorResult<Uint8Array>> {
    if (this.#readyAt < this.#ready.length) {
      const value = this.#ready[this.#readyAt++] as Uint8Array;
      return { value, done: false };
    }
    if (this.#closedByStore) throw closed('payload store');
    if (this.#finished) return { value: undefined, done: true };
    try {
      if (this.#nextChunk >= this.#chunks && this.#prefetch === null) {
        // Only an empty payload gets here without having checked its digest.
        if (this.#chunks === 0) this.#checkDigest();
        await this.close();
        return { value: undefined, done: true };
      }
      const batch = await (this.#prefetch ?? this.#readBatch());
      this.#prefetch = null;
      if (this.#nextChunk < this.#chunks) {
        const ahead = this.#readBatch();
        ahead.catch(() => undefined); // observed when the consumer gets there
        this.#prefetch = ahead;
      }
      this.#ready = batch;
      this.#readyAt = 0;
      return this.next();
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  async return(): Promise<IteratorResult<Uint8Array>> {
    await this.close();
    return { value: undefined, done: true };
  }

  async throw(err?: unknown): Promise<IteratorResult<Uint8Array>> {
    await this.close();
    throw err;
  }

  /** Closes the file (after any read in flight); idempotent. */
  close(byStore = false): Promise<void> {
    if (byStore && !this.#finished) this.#closedByStore = true;
    if (this.#closing === null) {
      this.#finished = true;
      this.#ready = [];
      this.#readyAt = 0;
      const prefetch = this.#prefetch;
      this.#prefetch = null;
      this.#closing = (async () => {
        if (prefetch !== null) await prefetch.catch(() => undefined);
        await this.#handle.close().catch(() => undefined);
        this.#onClose(this);
      })();
    }
    return this.#closing;
  }

  #checkDigest(): void {
    const got = this.#hash.digest();
    if (Buffer.compare(got, this.#header.sha256) !== 0) {
      throw corrupt(`payload ${this.#digest}: content does not match its digest`, { path: this.#file, digest: this.#digest });
    }
  }

  /** Reads, checks and hashes the next batch of frames; the last batch also checks the digest. */
  async #readBatch(): Promise<Uint8Array[]> {
    const { chunkBytes, size, salt } = this.#header;
    const first = this.#nextChunk;
    const count = Math.min(this.#framesPerBatch, this.#chunks - first);
    const last = first + count === this.#chunks;
    const payloadBytes = last ? size - first * chunkBytes : count * chunkBytes;
    const bytes = payloadBytes + count * CHUNK_CRC_BYTES;
    const buffer = new Uint8Array(bytes);
    const position = this.#position;
    this.#nextChunk = first + count;
    this.#position = position + bytes;
    let n: number;
    try {
      n = await this.#handle.read(buffer, position);
    } catch (err) {
      throw fromIo(err, 'read payload', this.#file);
    }
    if (n !== bytes) {
      throw corrupt(`payload ${this.#digest}: file ends at ${position + n}, expected ${position + bytes}`, {
        path: this.#file,
        digest: this.#digest,
      });
    }
    const chunks: Uint8Array[] = [];
    const view = new DataView(buffer.buffer, buffer.byteOffset, buffer.byteLength);
    let at = 0;
    for (let i = 0; i < count; i++) {
      const index = first + i;
      const length = index === this.#chunks - 1 ? size - index * chunkBytes : chunkBytes;
      const chunk = buffer.subarray(at, at + length);
      if (view.getUint32(at + length, true) !== chunkCrc(salt, index, chunk)) {
        throw corrupt(`payload ${this.#digest}: chunk ${index} fails its checksum`, {
          path: this.#file,
          digest: this.#digest,
          chunk: index,
          offset: position + at,
        });
      }
      this.#hash.update(chunk);
      chunks.push(chunk);
      at += length + CHUNK_CRC_BYTES;
    }
    if (last) this.#checkDigest();
    return chunks;
  }
}
