// Streaming a payload out of its blob file, verifying as it goes.
//
// Owns: `BlobReader`, the AsyncIterableIterator that `get` answers. The work is a pipeline of
// batches of 1 MiB of payload (whole frames), READ_AHEAD of them ahead of the consumer (one when
// nothing is hashed): while the consumer works on batch N, the batches after it are read by the
// thread pool (and, when the reader checks the digest, hashed in order: on the hashing thread,
// hash.ts, for a payload of more than one batch; on the event loop for a smaller one, where that
// is faster); when the consumer takes a batch, its CRCs are checked on the event loop.
// Guarantees:
// - No chunk is yielded before its CRC32 (seeded with the blob's salt and the chunk's index,
//   format.ts) has checked: a damaged chunk ends the stream with CORRUPT before any of its bytes
//   are served, and every chunk before it is served. With `checkDigest` (the store's
//   `verifyDigestOnGet`, and `verify({ deep })`), the batch holding the last chunk is also
//   yielded only after the SHA-256 of the whole payload has matched the digest (what a CRC32
//   misses, about 1 in 2^32 of random damage, then ends the stream with CORRUPT at its end).
// - Bounded memory: at most READ_AHEAD batches besides the one being consumed (one, when
//   nothing is hashed). Nothing hashed, each frame of a batch is read (one readv) into a fresh
//   buffer of its own, which the chunk yielded is a view of; hashed on the event loop (a payload
//   of one batch), the batch is read into one fresh buffer and its chunks are views of it; on the
//   thread's path the file is read into SHARED_BUFFERS shared buffers (from the store's
//   BatchBuffers) that the thread hashes, and each yielded chunk is a fresh copy. Either way what
//   is yielded is never reused and never kept here (it belongs to the consumer).
// - The file stays open from `get` to the end of the stream, so a garbage collection that
//   unlinks the name meanwhile does not disturb it; `return()` (a `break` out of `for await`),
//   an error, or the store's `close()` closes it. A read is never in flight when the handle closes.

import { closed, corrupt, fromIo } from '../errors.js';
import type { FileHandle } from '../fs/types.js';
import { BLOB_HEADER_BYTES, CHUNK_CRC_BYTES, chunkCount, chunkCrc, type BlobHeader } from './format.js';
import { BatchBuffers, copyInto } from './buffers.js';
import { inlineHash, threadHash, type PayloadHash } from './hash.js';

/** Payload bytes per batch (whole chunks, at least one): one read call each. */
const BATCH_PAYLOAD_BYTES = 1 << 20;
/** Batches in the pipeline ahead of the consumer: being read, checked or hashed. */
const READ_AHEAD = 3;
/**
 * The same without a hash: one batch is read while the consumer takes the one before. Its frames
 * are read into fresh buffers that the consumer then owns; two or three ahead, those buffers
 * lived long enough to be promoted out of V8's young generation, and 7 of 15 runs of a 1 GiB put
 * and get grew the process by 95–108 MiB instead of 58–62 (docs/payloads.md, "The get path").
 */
const FRESH_READ_AHEAD = 1;
/** Shared buffers of a reader on the thread's path: one per batch ahead, one being hashed. */
const SHARED_BUFFERS = READ_AHEAD + 1;

/** A batch read (and handed to the hash), not yet taken by the consumer. */
interface ReadBatch {
  first: number;
  count: number;
  position: number;
  last: boolean;
  /** The frames as read: a fresh buffer, or (`shared`) a view of a shared one; empty when `pieces` holds them. */
  frames: Uint8Array;
  /** Without a hash: each frame (chunk and CRC) read into a fresh buffer of its own. */
  pieces: Uint8Array[] | null;
  shared: boolean;
  /** Call once the consumer's copy of a shared buffer is made. */
  copied: () => void;
  /** Settles when the batch has been hashed. */
  hashed: Promise<void>;
}

export class BlobReader implements AsyncIterableIterator<Uint8Array> {
  readonly #handle: FileHandle;
  readonly #buffers: BatchBuffers;
  readonly #header: BlobHeader;
  readonly #file: string;
  readonly #digest: string;
  readonly #onClose: (reader: BlobReader) => void;
  readonly #framesPerBatch: number;
  /** READ_AHEAD, or FRESH_READ_AHEAD when nothing is hashed. */
  readonly #readAhead: number;
  readonly #chunks: number;
  /** The SHA-256 of the whole payload, checked before the last batch is yielded; null: the CRCs only. */
  readonly #hash: PayloadHash | null;
  /** The first chunk and the file position of the next batch to issue. */
  #nextChunk = 0;
  #position = BLOB_HEADER_BYTES;
  /** Batches issued and not yet taken by the consumer, in order. */
  readonly #queue: Promise<ReadBatch>[] = [];
  /** Every batch issued and not yet settled (close waits for them). */
  readonly #running = new Set<Promise<unknown>>();
  /** Resolves when the last issued batch was handed to the hash (rejects if it never will be). */
  #handedOver: Promise<void> = Promise.resolve();
  /** The first failure of the hash (the hashing thread stopped): later batches fail with it. */
  #hashFailure: { error: unknown } | null = null;
  /** Hash steps not yet finished (close waits for them before it abandons the hash). */
  readonly #hashing = new Set<Promise<void>>();
  /** Shared buffers for the hashing thread: how many exist, the free ones, and who waits for one. */
  #slots = 0;
  readonly #freeSlots: Uint8Array[] = [];
  readonly #slotWaiters: ((slot: Uint8Array) => void)[] = [];
  #ready: Uint8Array[] = [];
  #readyAt = 0;
  #finished = false;
  #closing: Promise<void> | null = null;
  #closedByStore = false;

  constructor(
    handle: FileHandle,
    header: BlobHeader,
    digest: string,
    file: string,
    onClose: (reader: BlobReader) => void,
    buffers: BatchBuffers = new BatchBuffers(),
    checkDigest = true,
  ) {
    this.#buffers = buffers;
    this.#handle = handle;
    this.#header = header;
    this.#digest = digest;
    this.#file = file;
    this.#onClose = onClose;
    this.#framesPerBatch = Math.max(1, Math.floor(BATCH_PAYLOAD_BYTES / header.chunkBytes));
    this.#chunks = chunkCount(header.size, header.chunkBytes);
    // A payload of one batch is hashed here: a hand-off to the thread costs more than it saves.
    // An empty payload is always "hashed" (nothing to hash): its name is then checked for free.
    if (!checkDigest && this.#chunks > 0) this.#hash = null;
    else this.#hash = this.#chunks > this.#framesPerBatch ? threadHash() : inlineHash();
    this.#readAhead = this.#hash === null ? FRESH_READ_AHEAD : READ_AHEAD;
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
      if (this.#nextChunk >= this.#chunks && this.#queue.length === 0) {
        // Only an empty payload gets here without having checked its digest.
        if (this.#chunks === 0) await this.#checkDigest();
        await this.close();
        return { value: undefined, done: true };
      }
      this.#fill();
      const batch = await (this.#queue.shift() as Promise<ReadBatch>);
      this.#fill();
      this.#ready = await this.#deliver(batch);
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

  /** Closes the file (after every read in flight); idempotent. */
  close(byStore = false): Promise<void> {
    if (byStore && !this.#finished) this.#closedByStore = true;
    if (this.#closing === null) {
      this.#finished = true;
      this.#ready = [];
      this.#readyAt = 0;
      this.#queue.length = 0;
      this.#closing = (async () => {
        await Promise.allSettled([...this.#running, ...this.#hashing]);
        this.#hash?.abandon();
        // Nothing reads the shared buffers now: every batch and every hash has finished.
        for (const slot of this.#freeSlots.splice(0)) this.#buffers.give(slot);
        await this.#handle.close().catch(() => undefined);
        this.#onClose(this);
      })();
    }
    return this.#closing;
  }

  async #checkDigest(): Promise<void> {
    if (this.#hash === null) return;
    const got = await this.#hash.digest();
    if (Buffer.compare(got, this.#header.sha256) !== 0) {
      throw corrupt(`payload ${this.#digest}: content does not match its digest`, { path: this.#file, digest: this.#digest });
    }
  }

  /** Issues batches until `#readAhead` are in the pipeline or none is left. */
  #fill(): void {
    while (!this.#finished && this.#queue.length < this.#readAhead && this.#nextChunk < this.#chunks) {
      const batch = this.#batch();
      batch.catch(() => undefined); // observed when the consumer gets there
      this.#running.add(batch);
      void batch.then(
        () => this.#running.delete(batch),
        () => this.#running.delete(batch),
      );
      this.#queue.push(batch);
    }
  }

  /**
   * Reads the next batch of frames and hands it to the hash (if any) after the batches before it.
   * Answers the batch as read (its CRCs are checked by #deliver, on the bytes handed out).
   * Without a hash, #unhashedBatch.
   */
  async #batch(): Promise<ReadBatch> {
    const { chunkBytes, size } = this.#header;
    const first = this.#nextChunk;
    const count = Math.min(this.#framesPerBatch, this.#chunks - first);
    const last = first + count === this.#chunks;
    const payloadBytes = last ? size - first * chunkBytes : count * chunkBytes;
    const bytes = payloadBytes + count * CHUNK_CRC_BYTES;
    const position = this.#position;
    this.#nextChunk = first + count;
    this.#position = position + bytes;
    const hash = this.#hash;
    if (hash === null) return this.#unhashedBatch(first, count, last, position, bytes);
    // Batches reach the hash in order: each is handed over once the one before it was.
    const before = this.#handedOver;
    let handedOver!: () => void;
    let notHanded!: (err: unknown) => void;
    const mine = new Promise<void>((resolve, reject) => {
      handedOver = resolve;
      notHanded = reject;
    });
    mine.catch(() => undefined);
    this.#handedOver = mine;
    // On the thread's path the file is read into a shared buffer that the thread hashes; the
    // consumer gets a copy made when it takes the batch (so that the fresh buffer lives only as
    // long as the consumer holds it). The shared buffer goes back once both are done with it.
    let slot: Uint8Array | null = null;
    let handed = false;
    try {
      slot = hash.onThread ? await this.#takeSlot() : null;
      if (this.#finished) throw closed('payload stream'); // closed while it waited: nothing to read for
      // Not zero-filled first: the read fills it whole, or the batch fails (CORRUPT) unserved.
      const frames = slot === null ? freshUnfilled(bytes) : slot.subarray(0, bytes);
      await this.#readExactly([frames], position, bytes);
      await before;
      if (this.#hashFailure !== null) throw this.#hashFailure.error; // fail fast, not at the end
      const done = hash.update(frames, chunkBytes);
      handedOver();
      handed = true;
      const held = slot;
      let holds = 2; // the hash, and the copy for the consumer
      const letGo = (): void => {
        if (--holds === 0 && held !== null) this.#releaseSlot(held);
      };
      const hashed = done.then(
        () => letGo(),
        (err: unknown) => {
          this.#hashFailure ??= { error: err };
          letGo();
          throw err;
        },
      );
      hashed.catch(() => undefined); // a failure reaches the consumer at the last batch, or sooner
      this.#hashing.add(hashed);
      void hashed.then(
        () => this.#hashing.delete(hashed),
        () => this.#hashing.delete(hashed),
      );
      return { first, count, position, last, frames, pieces: null, shared: held !== null, copied: letGo, hashed };
    } catch (err) {
      if (!handed) {
        notHanded(err);
        if (slot !== null) this.#releaseSlot(slot);
      }
      throw err;
    }
  }

  /**
   * A batch when nothing is hashed: its frames read with one call, each into a fresh buffer of
   * its own that the consumer then owns (per chunk, not per batch: see #deliver), not zero-filled
   * first (the read fills them whole, or the batch fails unserved).
   */
  async #unhashedBatch(first: number, count: number, last: boolean, position: number, bytes: number): Promise<ReadBatch> {
    const { chunkBytes, size } = this.#header;
    const pieces: Uint8Array[] = new Array(count);
    for (let i = 0; i < count; i++) {
      const index = first + i;
      const length = index === this.#chunks - 1 ? size - index * chunkBytes : chunkBytes;
      pieces[i] = freshUnfilled(length + CHUNK_CRC_BYTES);
    }
    if (this.#finished) throw closed('payload stream');
    await this.#readExactly(pieces, position, bytes);
    return { first, count, position, last, frames: NO_FRAMES, pieces, shared: false, copied: () => undefined, hashed: HASHED };
  }

  /**
   * The consumer's chunks of a batch, each checked against its CRC on the bytes handed out, and
   * (with a hash) for the last batch the digest checked once every batch has been hashed. On the
   * thread's path each chunk is a fresh copy of its own, and without a hash each was read into
   * one (one ArrayBuffer per chunk, not per batch: V8 reclaims many chunk-sized buffers a
   * consumer has dropped sooner than a few batch-sized ones, which on Node 24 pile up unreclaimed
   * through a whole 64 MiB stream).
   */
  async #deliver(b: ReadBatch): Promise<Uint8Array[]> {
    const { chunkBytes, size } = this.#header;
    const chunks: Uint8Array[] = [];
    let at = 0;
    try {
      for (let i = 0; i < b.count; i++) {
        const index = b.first + i;
        const length = index === this.#chunks - 1 ? size - index * chunkBytes : chunkBytes;
        const read = b.pieces?.[i] ?? b.frames.subarray(at, at + length + CHUNK_CRC_BYTES);
        const frame = b.shared ? copyOf(read) : read;
        this.#checkChunks(frame, index, 1, b.position + at);
        chunks.push(frame.subarray(0, length));
        at += length + CHUNK_CRC_BYTES;
      }
    } finally {
      if (b.shared) b.copied();
    }
    if (b.last) {
      await b.hashed;
      await this.#checkDigest();
    }
    return chunks;
  }

  /** A shared batch buffer for the hashing thread; waits for one when READ_AHEAD are in use. */
  #takeSlot(): Promise<Uint8Array> {
    const free = this.#freeSlots.pop();
    if (free !== undefined) return Promise.resolve(free);
    if (this.#slots < SHARED_BUFFERS) {
      this.#slots++;
      return Promise.resolve(this.#buffers.take(this.#framesPerBatch * (this.#header.chunkBytes + CHUNK_CRC_BYTES)));
    }
    return new Promise((resolve) => this.#slotWaiters.push(resolve));
  }

  #releaseSlot(slot: Uint8Array): void {
    const waiter = this.#slotWaiters.shift();
    if (waiter !== undefined) waiter(slot);
    else this.#freeSlots.push(slot);
  }

  /** Fills the buffers of `into` (`bytes` in all) from the file at `position`, one call; CORRUPT when the file ends first. */
  async #readExactly(into: Uint8Array[], position: number, bytes: number): Promise<void> {
    let n: number;
    try {
      n = into.length === 1 ? await this.#handle.read(into[0] as Uint8Array, position) : await this.#handle.readv(into, position);
    } catch (err) {
      throw fromIo(err, 'read payload', this.#file);
    }
    if (n !== bytes) {
      throw corrupt(`payload ${this.#digest}: file ends at ${position + n}, expected ${position + bytes}`, {
        path: this.#file,
        digest: this.#digest,
      });
    }
  }

  /** Checks the CRC of each of the `count` frames in `frames` (read at `position`). */
  #checkChunks(frames: Uint8Array, first: number, count: number, position: number): void {
    const { chunkBytes, size, salt } = this.#header;
    const view = new DataView(frames.buffer, frames.byteOffset, frames.byteLength);
    let at = 0;
    for (let i = 0; i < count; i++) {
      const index = first + i;
      const length = index === this.#chunks - 1 ? size - index * chunkBytes : chunkBytes;
      if (view.getUint32(at + length, true) !== chunkCrc(salt, index, frames.subarray(at, at + length))) {
        throw corrupt(`payload ${this.#digest}: chunk ${index} fails its checksum`, {
          path: this.#file,
          digest: this.#digest,
          chunk: index,
          offset: position + at,
        });
      }
      at += length + CHUNK_CRC_BYTES;
    }
  }
}

const NO_FRAMES = new Uint8Array(0);
const HASHED: Promise<void> = Promise.resolve();

/** A fresh ArrayBuffer of its own (never a slice of a pool), not zero-filled: the caller overwrites all of it. */
function freshUnfilled(length: number): Uint8Array {
  return new Uint8Array(Buffer.allocUnsafeSlow(length).buffer, 0, length);
}

/** A copy of `bytes` in a fresh ArrayBuffer of its own. */
function copyOf(bytes: Uint8Array): Uint8Array {
  const out = freshUnfilled(bytes.length);
  copyInto(out, 0, bytes);
  return out;
}
