// Snapshot files: streaming a snapshot's bytes into a file and back out of it.
//
// Owns: `BufferedFileWriter` (sequential writes through a bounded buffer: it copies what it is
// given, so a caller may reuse its chunk once `write` resolves) and `FileStream` (a file's bytes
// from an already open handle as an async iterable of fresh chunks, which closes the handle when
// the iteration ends or is abandoned), and `FsSnapshotSink` (a received snapshot streamed into a
// temporary file, its writes in call order). Guarantees: neither holds more than one buffer of
// `bufferBytes` (1 MiB by default); every I/O error is a SeglogError (lib/errors.ts `fromIo`).

import { closed, fromIo, invalid } from '../errors.js';
import type { FileHandle } from '../fs/types.js';
import type { SnapshotSink } from './types.js';

const DEFAULT_BUFFER_BYTES = 1024 * 1024;
/** Chunks a FileStream yields: small enough that the garbage they leave is collected often. */
const DEFAULT_STREAM_CHUNK_BYTES = 256 * 1024;

/** Appends bytes to a file from offset 0 through one buffer. */
export class BufferedFileWriter {
  readonly #handle: FileHandle;
  readonly #buf: Buffer;
  #used = 0;
  #offset = 0;

  constructor(handle: FileHandle, bufferBytes = DEFAULT_BUFFER_BYTES) {
    this.#handle = handle;
    this.#buf = Buffer.allocUnsafe(bufferBytes);
  }

  /** Bytes written so far (buffered ones included). */
  get size(): number {
    return this.#offset + this.#used;
  }

  async write(chunk: Uint8Array): Promise<void> {
    let at = 0;
    while (at < chunk.length) {
      const n = Math.min(chunk.length - at, this.#buf.length - this.#used);
      this.#buf.set(chunk.subarray(at, at + n), this.#used);
      this.#used += n;
      at += n;
      if (this.#used === this.#buf.length) await this.flush();
    }
  }

  /** Writes what is buffered (not a sync). */
  async flush(): Promise<void> {
    if (this.#used === 0) return;
    const n = this.#used;
    try {
      await this.#handle.write(this.#buf.subarray(0, n), this.#offset);
    } catch (err) {
      throw fromIo(err, 'write', this.#handle.path);
    }
    this.#offset += n;
    this.#used = 0;
  }
}

/**
 * The bytes of a file, `[0, size)`, read in chunks from an open handle. Iterable once; the handle
 * is closed at the end, on `return()` (a `for await` left early), or by `close()`.
 */
export class FileStream implements AsyncIterable<Uint8Array> {
  readonly #handle: FileHandle;
  readonly #size: number;
  readonly #chunkBytes: number;
  readonly #onClose: (s: FileStream) => void;
  readonly #closeHandle: boolean;
  #started = false;
  #closed = false;

  /**
   * `onClose` is told when the stream ends; with `closeHandle: false` the handle stays open for
   * its owner (default: the stream closes it).
   */
  constructor(handle: FileHandle, size: number, options: { onClose?: (s: FileStream) => void; closeHandle?: boolean; chunkBytes?: number } = {}) {
    this.#handle = handle;
    this.#size = size;
    this.#chunkBytes = options.chunkBytes ?? DEFAULT_STREAM_CHUNK_BYTES;
    this.#onClose = options.onClose ?? (() => undefined);
    this.#closeHandle = options.closeHandle ?? true;
  }

  /** Ends the stream (idempotent) and closes the handle if it owns it; a later `next()` ends. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#onClose(this);
    if (this.#closeHandle) await this.#handle.close().catch(() => undefined);
  }

  [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    if (this.#started) throw new TypeError('a snapshot stream can be iterated once');
    this.#started = true;
    let at = 0;
    return {
      next: async (): Promise<IteratorResult<Uint8Array>> => {
        if (this.#closed || at >= this.#size) {
          await this.close();
          return { done: true, value: undefined };
        }
        const n = Math.min(this.#chunkBytes, this.#size - at);
        const chunk = new Uint8Array(n);
        let got: number;
        try {
          got = await this.#handle.read(chunk, at);
        } catch (err) {
          await this.close();
          throw fromIo(err, 'read', this.#handle.path);
        }
        if (got === 0) {
          await this.close();
          return { done: true, value: undefined };
        }
        at += got;
        return { done: false, value: got === n ? chunk : chunk.subarray(0, got) };
      },
      return: async (): Promise<IteratorResult<Uint8Array>> => {
        await this.close();
        return { done: true, value: undefined };
      },
    };
  }
}

/** A sink streaming a received snapshot into a temporary file. */
export class FsSnapshotSink implements SnapshotSink {
  used = false;
  #tail: Promise<void> = Promise.resolve();
  #failed: unknown = null;

  constructor(
    readonly file: string,
    readonly handle: FileHandle,
    readonly writer: BufferedFileWriter,
    private readonly isClosed: () => boolean,
  ) {}

  write(chunk: Uint8Array): Promise<void> {
    if (this.isClosed()) return Promise.reject(closed('raft state machine'));
    if (this.used) return Promise.reject(invalid('this snapshot sink was installed already'));
    if (!(chunk instanceof Uint8Array)) return Promise.reject(invalid('a snapshot chunk must be a Uint8Array'));
    // Writes run one after another, in call order; each copies its chunk before it resolves.
    const run = this.#tail.then(async () => {
      if (this.#failed !== null) throw this.#failed;
      try {
        await this.writer.write(chunk);
      } catch (err) {
        this.#failed = err;
        throw err;
      }
    });
    this.#tail = run.catch(() => undefined);
    return run;
  }

  /** Waits for the writes, flushes; answers the file's size. */
  async finish(): Promise<number> {
    await this.#tail;
    if (this.#failed !== null) throw this.#failed;
    await this.writer.flush();
    return this.writer.size;
  }
}
