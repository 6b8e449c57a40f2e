// Chunk queue: exact reads out of a stream of arbitrarily cut chunks.
//
// Owns: pulling bytes from an AsyncIterable<Uint8Array> in the sizes a parser asks for. Guarantees:
// it buffers only what the current request needs beyond the chunks already received (a request
// for n bytes holds at most n bytes plus one source chunk), copies each byte once, and answers a
// fresh array that never shares memory with the source. Parsers bound n before they ask.

import { corrupt } from '../errors.js';

export class ChunkQueue {
  private chunks: Uint8Array[] = [];
  private head = 0; // offset into chunks[0]
  private buffered = 0;
  private done = false;
  private readonly it: AsyncIterator<Uint8Array>;

  constructor(source: AsyncIterable<Uint8Array>, private readonly what = 'stream') {
    this.it = source[Symbol.asyncIterator]();
  }

  /** Pulls until `n` bytes are buffered; false when the source ended first. */
  private async fill(n: number): Promise<boolean> {
    while (this.buffered < n && !this.done) {
      const next = await this.it.next();
      if (next.done) {
        this.done = true;
        break;
      }
      const chunk: unknown = next.value;
      if (!(chunk instanceof Uint8Array)) throw corrupt(`${this.what} yielded something other than bytes`);
      if (chunk.length === 0) continue;
      this.chunks.push(chunk);
      this.buffered += chunk.length;
    }
    return this.buffered >= n;
  }

  /** Exactly `n` bytes (a fresh copy), or null when the source ended first. */
  async take(n: number): Promise<Uint8Array | null> {
    if (!(await this.fill(n))) return null;
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const first = this.chunks[0] as Uint8Array;
      const k = Math.min(n - filled, first.length - this.head);
      out.set(first.subarray(this.head, this.head + k), filled);
      filled += k;
      this.head += k;
      if (this.head === first.length) {
        this.chunks.shift();
        this.head = 0;
      }
    }
    this.buffered -= n;
    return out;
  }

  /** One byte, or null when the source ended. */
  async byte(): Promise<number | null> {
    if (!(await this.fill(1))) return null;
    const first = this.chunks[0] as Uint8Array;
    const b = first[this.head++] as number;
    if (this.head === first.length) {
      this.chunks.shift();
      this.head = 0;
    }
    this.buffered--;
    return b;
  }

  /**
   * A minimal unsigned LEB128 varint (≤ 8 bytes, a safe integer); null when the source ended
   * before its first byte; CORRUPT when it ends inside one or the varint is malformed.
   */
  async varint(): Promise<number | null> {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 8; i++) {
      const b = await this.byte();
      if (b === null) {
        if (i === 0) return null;
        throw corrupt(`${this.what} ends inside a varint`);
      }
      value += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) {
        if (b === 0 && i > 0) throw corrupt(`${this.what} holds a non-minimal varint`);
        if (!Number.isSafeInteger(value)) throw corrupt(`${this.what} holds a varint beyond 2^53 - 1`);
        return value;
      }
      scale *= 0x80;
    }
    throw corrupt(`${this.what} holds a varint longer than 8 bytes`);
  }

  /** True when the source has no byte left. */
  async atEnd(): Promise<boolean> {
    return !(await this.fill(1));
  }

  /** Stops the source early (calls its `return`). */
  async close(): Promise<void> {
    if (!this.done) {
      this.done = true;
      if (this.it.return) await this.it.return();
    }
  }
}
