// Streaming a payload body into a framed blob file.
//
// Owns: `writeFrames`, which consumes a body (any AsyncIterable of Uint8Array, a Node Readable
// included), cuts it into chunks of `chunkBytes`, appends each chunk's CRC32 (format.ts), writes
// the frames at increasing positions, and answers the body's SHA-256. The work is a pipeline of
// batches of 1 MiB of payload (whole frames): while the event loop copies and checksums batch N+1,
// batch N is written by the thread pool and hashed by a hashing thread (hash.ts; a body that
// fits one batch is hashed on the event loop, where that is faster), and fdatasyncs of the file
// run meanwhile (one at a time: whenever EARLY_SYNC_BYTES more were written, checked as each
// write lands and as each sync ends, and once more when the last frame is written while its hash
// is still running), so that the disk is already writing while the rest is hashed and the
// caller's final fdatasync has little more than the header left. Guarantees:
// - Bounded memory: at most MAX_BATCHES batch buffers, whatever the payload's size; the body's own
//   chunks are copied, never kept.
// - The frames are written in order, one write in flight at a time; a write is never issued
//   after an earlier one failed.
// - `maxBytes` is checked before a byte past it is hashed or written: the body is abandoned
//   (its iterator's `return` runs, which destroys a Readable) and TOO_LARGE is thrown.
// - On any failure, no write, sync or hash this function issued is still running when it rejects.
//   A failed write or early fdatasync rejects with NO_SPACE or IO_ERROR (the file is then to be
//   abandoned: a failed fdatasync is never retried); the body's own error passes through unchanged.

import { SeglogError, fromIo, invalid } from '../errors.js';
import type { FileHandle } from '../fs/types.js';
import { CHUNK_CRC_BYTES, chunkCrc } from './format.js';
import { BatchBuffers, copyInto } from './buffers.js';
import { inlineHash, threadHash, type PayloadHash } from './hash.js';

/** Payload bytes per batch (whole chunks, at least one): one write call each. */
export const BATCH_PAYLOAD_BYTES = 1 << 20;
/** Batch buffers one put may hold: one filling, one being written, the rest waiting to be hashed. */
const MAX_BATCHES = 4;
/** Bytes written between the fdatasyncs that start the disk's write-back early (one at a time). */
export const EARLY_SYNC_BYTES = 4 << 20;

export interface FrameWriteOptions {
  chunkBytes: number;
  salt: Uint8Array;
  /** Refuse a body longer than this (TOO_LARGE). */
  maxBytes: number;
  /** File position of the first frame. */
  start: number;
  /** Where batch buffers come from and go back to (default: fresh ones). */
  buffers?: BatchBuffers;
}

export interface FrameWriteResult {
  size: number;
  sha256: Uint8Array;
}

/** A batch handed to the writer and the hash; its buffer is free again once both are done. */
interface InFlight {
  buffer: Uint8Array;
  settled: Promise<unknown>;
  done: boolean;
}

export async function writeFrames(
  handle: FileHandle,
  body: AsyncIterable<unknown>,
  options: FrameWriteOptions,
): Promise<FrameWriteResult> {
  const { chunkBytes, salt, maxBytes } = options;
  const frameBytes = chunkBytes + CHUNK_CRC_BYTES;
  const batchBytes = Math.max(1, Math.floor(BATCH_PAYLOAD_BYTES / chunkBytes)) * frameBytes;
  // Shared memory, so that the hashing thread reads a batch while the thread pool writes it.
  const pool = options.buffers ?? new BatchBuffers();
  const newBuffer = (): Uint8Array => pool.take(batchBytes);
  const taken: Uint8Array[] = [];
  let current = newBuffer();
  taken.push(current);
  let buffers = 1;
  const free: Uint8Array[] = [];
  const inFlight: InFlight[] = [];
  let fill = 0; // bytes of finished frames in `current`
  let chunkFill = 0; // bytes of the chunk being filled, which starts at `fill`
  let chunkIndex = 0;
  let position = options.start;
  let size = 0;
  let hash: PayloadHash | null = null;
  let lastWrite: Promise<void> | null = null; // null: no write in flight
  let earlySync: Promise<void> | null = null;
  let unsynced = 0;
  let hashesPending = 0;
  let ended = false; // the last batch was handed on
  let writesPending = 0;
  let stopping = false; // failing: no sync is started any more
  let failure: { error: unknown } | null = null;
  const fail = (error: unknown): void => {
    if (failure === null) failure = { error };
  };

  const sealChunk = (): void => {
    const chunk = current.subarray(fill, fill + chunkFill);
    const crc = chunkCrc(salt, chunkIndex, chunk);
    new DataView(current.buffer, current.byteOffset + fill + chunkFill, CHUNK_CRC_BYTES).setUint32(0, crc, true);
    fill += chunkFill + CHUNK_CRC_BYTES;
    chunkFill = 0;
    chunkIndex++;
  };

  // Starts an fdatasync of what is written so far when one is due and none is running: after
  // EARLY_SYNC_BYTES more were written, and once the last frame is written while the hash is still
  // behind (the tail then reaches the disk while the hash catches up, and the caller's final sync
  // has only the header left). Called when a write lands and when a sync ends, so that the disk
  // never waits for the next write to learn that it has more to do.
  const syncIfDue = (): void => {
    if (earlySync !== null || stopping || failure !== null || unsynced === 0) return;
    const tail = ended && writesPending === 0 && hashesPending > 0;
    if (unsynced < EARLY_SYNC_BYTES && !tail) return;
    unsynced = 0;
    earlySync = handle.datasync().then(
      () => {
        earlySync = null;
        syncIfDue();
      },
      (err: unknown) => {
        earlySync = null;
        fail(fromIo(err, 'sync payload', handle.path));
      },
    );
  };

  // Hands `current` to the writer and the hash, and takes a free buffer for the next batch.
  const flush = async (last: boolean): Promise<void> => {
    if (fill > 0) {
      // A body that fits one batch is hashed here: a hand-off to the thread costs more.
      if (hash === null) hash = last && position === options.start ? inlineHash() : threadHash();
      const frames = current.subarray(0, fill);
      const at = position;
      writesPending++;
      const write = async (): Promise<void> => {
        try {
          if (failure !== null) throw failure.error;
          try {
            await handle.write(frames, at);
          } catch (err) {
            throw fromIo(err, 'write payload', handle.path);
          }
          unsynced += frames.length;
        } finally {
          writesPending--;
        }
        syncIfDue();
      };
      // Issued before the hash, so that an inline hash runs while the pool writes.
      const written = lastWrite === null ? write() : lastWrite.then(write);
      lastWrite = written;
      void written.then(
        () => {
          if (lastWrite === written) lastWrite = null;
        },
        fail,
      );
      hashesPending++;
      const hashed = hash.update(frames, chunkBytes).finally(() => {
        hashesPending--;
      });
      hashed.catch(fail);
      const batch: InFlight = { buffer: current, settled: Promise.allSettled([hashed, written]), done: false };
      void batch.settled.then(() => {
        batch.done = true;
      });
      inFlight.push(batch);
      position += fill;
      fill = 0;
      if (!last) {
        const reused = free.pop();
        if (reused !== undefined) current = reused;
        else if (buffers < MAX_BATCHES) {
          current = newBuffer();
          taken.push(current);
          buffers++;
        } else {
          const oldest = inFlight.shift() as InFlight;
          await oldest.settled;
          current = oldest.buffer;
        }
      }
    }
    // Reclaim the buffers of finished batches (oldest first: batches finish in order).
    while (inFlight[0]?.done === true) free.push((inFlight.shift() as InFlight).buffer);
    if (failure !== null) throw failure.error;
  };

  const drain = async (): Promise<void> => {
    await Promise.allSettled(inFlight.map((b) => b.settled));
    inFlight.length = 0;
    // Every write and hash has finished. From here no sync starts (what is still unsynced is the
    // caller's final fdatasync's): wait for the one running, if any.
    stopping = true;
    for (let running = earlySync; running !== null; running = earlySync) await running;
  };

  try {
    for await (const piece of body) {
      if (!(piece instanceof Uint8Array)) {
        throw invalid('a payload body must yield Uint8Arrays (a Readable in binary mode, not with an encoding)');
      }
      if (size + piece.length > maxBytes) {
        throw new SeglogError('TOO_LARGE', `payload exceeds maxBytes ${maxBytes}`, { details: { maxBytes } });
      }
      size += piece.length;
      let at = 0;
      while (at < piece.length) {
        // A full batch is handed on only when more bytes come: a body of exactly one batch then
        // ends with it in hand, and is hashed here rather than on the thread.
        if (fill === batchBytes) await flush(false);
        const n = Math.min(chunkBytes - chunkFill, piece.length - at);
        copyInto(current, fill + chunkFill, piece.subarray(at, at + n));
        chunkFill += n;
        at += n;
        if (chunkFill === chunkBytes) sealChunk();
      }
    }
    if (chunkFill > 0) sealChunk();
    ended = true;
    await flush(true);
    await drain();
    if (failure !== null) throw (failure as { error: unknown }).error;
    const digest = await ((hash as PayloadHash | null) ?? inlineHash()).digest();
    return { size, sha256: digest };
  } catch (err) {
    stopping = true;
    await drain();
    (hash as PayloadHash | null)?.abandon();
    throw err;
  } finally {
    // Every write and hash has finished here (drained): no one reads the buffers any more.
    for (const b of taken) pool.give(b);
  }
}
