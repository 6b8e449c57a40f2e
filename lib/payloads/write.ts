// Streaming a payload body into a framed blob file.
//
// Owns: `writeFrames`, which consumes a body (any AsyncIterable of Uint8Array, a Node Readable
// included), hashes it with SHA-256, cuts it into chunks of `chunkBytes`, appends each chunk's
// CRC32 (format.ts) and writes the frames at increasing positions. Guarantees:
// - Bounded memory: two batch buffers of about 1 MiB each (one being filled while the other is
//   being written), whatever the payload's size; the body's own chunks are copied, never kept.
// - `maxBytes` is checked before a byte past it is hashed or written: the body is abandoned
//   (its iterator's `return` runs, which destroys a Readable) and TOO_LARGE is thrown.
// - On any failure, no write this function issued is still running when it rejects. A failed
//   write rejects with NO_SPACE or IO_ERROR; the body's own error passes through unchanged.

import { createHash } from 'node:crypto';
import { SeglogError, fromIo, invalid } from '../errors.js';
import type { FileHandle } from '../fs/types.js';
import { CHUNK_CRC_BYTES, chunkCrc } from './format.js';

/** Target bytes per write call (whole frames, at least one). */
const BATCH_TARGET_BYTES = 1 << 20;

export interface FrameWriteOptions {
  chunkBytes: number;
  salt: Uint8Array;
  /** Refuse a body longer than this (TOO_LARGE). */
  maxBytes: number;
  /** File position of the first frame. */
  start: number;
}

export interface FrameWriteResult {
  size: number;
  sha256: Uint8Array;
}

export async function writeFrames(
  handle: FileHandle,
  body: AsyncIterable<unknown>,
  options: FrameWriteOptions,
): Promise<FrameWriteResult> {
  const { chunkBytes, salt, maxBytes } = options;
  const frameBytes = chunkBytes + CHUNK_CRC_BYTES;
  const batchBytes = Math.max(1, Math.floor(BATCH_TARGET_BYTES / frameBytes)) * frameBytes;
  const hash = createHash('sha256');
  let current: Uint8Array = new Uint8Array(batchBytes);
  let spare: Uint8Array | null = null;
  let fill = 0; // bytes of finished frames in `current`
  let chunkFill = 0; // bytes of the chunk being filled, which starts at `fill`
  let chunkIndex = 0;
  let position = options.start;
  let size = 0;
  let pending: Promise<void> | null = null;

  const sealChunk = (): void => {
    const chunk = current.subarray(fill, fill + chunkFill);
    const crc = chunkCrc(salt, chunkIndex, chunk);
    new DataView(current.buffer, current.byteOffset + fill + chunkFill, CHUNK_CRC_BYTES).setUint32(0, crc, true);
    fill += chunkFill + CHUNK_CRC_BYTES;
    chunkFill = 0;
    chunkIndex++;
  };

  // Issues the write of `current` and switches to the other buffer, which is free once the
  // previous write (the only other one in flight) has finished.
  const flush = async (): Promise<void> => {
    if (fill === 0) return;
    if (pending !== null) await pending;
    const at = position;
    const write = handle.write(current.subarray(0, fill), at).catch((err: unknown) => {
      throw fromIo(err, 'write payload', handle.path);
    });
    write.catch(() => undefined); // observed when awaited; never an unhandled rejection
    pending = write;
    position += fill;
    const next: Uint8Array = spare ?? new Uint8Array(batchBytes);
    spare = current;
    current = next;
    fill = 0;
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
      hash.update(piece);
      let at = 0;
      while (at < piece.length) {
        const n = Math.min(chunkBytes - chunkFill, piece.length - at);
        current.set(piece.subarray(at, at + n), fill + chunkFill);
        chunkFill += n;
        at += n;
        if (chunkFill === chunkBytes) {
          sealChunk();
          if (fill === batchBytes) await flush();
        }
      }
    }
    if (chunkFill > 0) sealChunk();
    await flush();
    if (pending !== null) await pending;
    pending = null;
  } catch (err) {
    if (pending !== null) await (pending as Promise<void>).catch(() => undefined);
    throw err;
  }
  return { size, sha256: new Uint8Array(hash.digest()) };
}
