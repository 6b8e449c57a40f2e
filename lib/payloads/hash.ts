// SHA-256 of a payload fed batch by batch: on the calling thread, or on a hashing thread.
//
// Owns: `PayloadHash` and its two kinds — `inlineHash()` hashes on the calling thread;
// `threadHash()` hands each batch to one of the process's hashing threads (./hash-worker.ts, at
// most two), so that the event loop can copy, checksum, read and write the next batch
// meanwhile — and those threads' lives. Why a thread at all: SHA-256 runs at about 1.6–1.9 GB/s
// on one core here, slower than the page cache takes writes and serves reads, so on the event
// loop it would bound a put or a get to less than the disk's speed; the machine has a second
// core. Why a second thread: one SHA-256 stream cannot be split, so with one thread every
// payload in flight at once shares one core's hashing speed. Why not always: a hand-off costs
// about 30 µs each way, more than hashing a small payload (docs/payloads.md, "Measurements").
// Guarantees:
// - Both kinds hash exactly the payload bytes of the frames they are given (each frame is
//   `chunkBytes` of payload and a 4-byte CRC32; a batch's last frame may be shorter), in the order
//   `update` was called; `digest` answers the SHA-256 of all of them. One payload's batches all
//   go to the same thread (its SHA-256 state lives there).
// - A thread hash reads a batch in shared memory while the caller may write it to a file; the
//   caller must not change it until `update` resolved. A batch in an ordinary ArrayBuffer is
//   moved to the thread (detached here) and back: use only the view `update` resolves with.
// - The first thread starts at the first `threadHash()`; a second (only on a machine of three
//   cores or more) starts only when a `threadHash()` finds every running thread with a payload
//   still being hashed (one payload at a time never costs a second thread's memory). Threads are
//   kept for the next payloads, and each keeps the process alive only while a request to it is
//   outstanding. If one stops (an error inside it, or terminated), every outstanding request to
//   it rejects with IO_ERROR, nothing is retried, and later `threadHash()` calls start a new one;
//   if none can be started, they share a running one, or answer an inline hash when there is none.

import { createHash, type Hash } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { SeglogError } from '../errors.js';

const CRC_BYTES = 4;

/** What the main thread asks the hashing thread (hash-worker.ts). */
export type HashRequest =
  | { op: 'update'; id: number; job: number; buffer: ArrayBuffer | SharedArrayBuffer; offset: number; length: number; chunkBytes: number }
  | { op: 'digest'; id: number; job: number }
  | { op: 'drop'; job: number };

/** What the hashing thread answers: the batch moved back (null when shared), or a digest. */
export type HashReply = { id: number; buffer: ArrayBuffer | null } | { id: number; digest: Uint8Array };

export interface PayloadHash {
  /** True when the hashing thread does the work. */
  readonly onThread: boolean;
  /**
   * Hashes the payload bytes of `frames` (whole frames, the last possibly shorter). Resolves with
   * the batch, when the caller may use or change it again: the same view, or (an ArrayBuffer
   * moved to the thread and back) a new view of the same bytes.
   */
  update(frames: Uint8Array, chunkBytes: number): Promise<Uint8Array>;
  /** The SHA-256 of everything fed; the hash is spent after it. */
  digest(): Promise<Uint8Array>;
  /** Forgets the state (on failure or cancellation); later calls reject. Idempotent. */
  abandon(): void;
}

function eachChunk(frames: Uint8Array, chunkBytes: number, fn: (chunk: Uint8Array) => void): void {
  for (let at = 0; at < frames.length; ) {
    const n = Math.min(chunkBytes, frames.length - at - CRC_BYTES);
    fn(frames.subarray(at, at + n));
    at += n + CRC_BYTES;
  }
}

class InlineHash implements PayloadHash {
  readonly onThread = false;
  #hash: Hash | null = createHash('sha256');

  update(frames: Uint8Array, chunkBytes: number): Promise<Uint8Array> {
    const hash = this.#hash;
    if (hash === null) return Promise.reject(new Error('payload hash used after its digest or abandon'));
    eachChunk(frames, chunkBytes, (chunk) => hash.update(chunk));
    return Promise.resolve(frames);
  }

  digest(): Promise<Uint8Array> {
    const hash = this.#hash;
    if (hash === null) return Promise.reject(new Error('payload hash used after its digest or abandon'));
    this.#hash = null;
    return Promise.resolve(new Uint8Array(hash.digest()));
  }

  abandon(): void {
    this.#hash = null;
  }
}

/** A hash on the calling thread. */
export function inlineHash(): PayloadHash {
  return new InlineHash();
}

interface Waiter {
  resolve: (reply: HashReply) => void;
  reject: (err: unknown) => void;
}

/** The hashing thread: requests by id, answered in order. */
class HashThread {
  readonly #worker: Worker;
  readonly #waiting = new Map<number, Waiter>();
  #nextId = 1;
  #stopped: SeglogError | null = null;
  /** Hashes of payloads using this thread that have not asked for their digest nor been abandoned. */
  jobs = 0;
  #terminating = false;

  constructor() {
    this.#worker = new Worker(new URL('./hash-worker.js', import.meta.url));
    this.#worker.unref();
    this.#worker.on('message', (reply: HashReply) => {
      const waiter = this.#waiting.get(reply.id);
      if (waiter === undefined) return;
      this.#waiting.delete(reply.id);
      if (this.#waiting.size === 0 && !this.#terminating) this.#worker.unref();
      waiter.resolve(reply);
    });
    this.#worker.on('error', (err) => this.#stop(err));
    this.#worker.on('exit', (code) => this.#stop(new Error(`the hashing thread exited with code ${code}`)));
  }

  get stopped(): boolean {
    return this.#stopped !== null;
  }

  request(make: (id: number) => HashRequest, transfer: ArrayBuffer[] = []): Promise<HashReply> {
    if (this.#stopped !== null) return Promise.reject(this.#stopped);
    const id = this.#nextId++;
    return new Promise<HashReply>((resolve, reject) => {
      if (this.#waiting.size === 0) this.#worker.ref();
      this.#waiting.set(id, { resolve, reject });
      this.#worker.postMessage(make(id), transfer);
    });
  }

  /** A message that needs no answer. */
  tell(message: HashRequest): void {
    if (this.#stopped === null) this.#worker.postMessage(message);
  }

  #stop(cause: unknown): void {
    if (this.#stopped === null) {
      this.#stopped = new SeglogError('IO_ERROR', `the payload hashing thread stopped: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    }
    const waiting = [...this.#waiting.values()];
    this.#waiting.clear();
    if (!this.#terminating) this.#worker.unref();
    for (const w of waiting) w.reject(this.#stopped);
  }

  /** Stops the thread; the process stays alive until it is gone (an unref'd worker would not). */
  async terminate(): Promise<number> {
    this.#terminating = true;
    this.#worker.ref();
    const code = await this.#worker.terminate();
    this.#stop(new Error(`the hashing thread was terminated (exit code ${code})`)); // whichever comes first, 'exit' or this
    return code;
  }
}

/**
 * Hashing threads at most: two where the machine has a core for each besides the event loop's,
 * so that two puts or gets at once hash on two cores (one SHA-256 stream cannot be split, and one
 * thread caps every payload in flight together at one core's SHA-256 speed); one otherwise. On
 * two cores the event loop and one hashing thread already keep both busy: four puts at once
 * there cost 1.45 ms of CPU per MiB in all, so two cores cap them at about 1,400 MiB/s together,
 * below one thread's SHA-256 speed, and a second thread would buy nothing but its memory.
 */
let maxThreads = Math.max(1, Math.min(2, availableParallelism() - 1));

const threads: HashThread[] = [];
let nextJob = 1;

/**
 * The thread for a new job: the live one with the fewest jobs; a further thread is started only
 * when every live one already has a job (so one payload at a time never costs a second thread's
 * memory). Null when no thread can be started at all.
 */
function threadForJob(): HashThread | null {
  for (let i = threads.length - 1; i >= 0; i--) if ((threads[i] as HashThread).stopped) threads.splice(i, 1);
  let best: HashThread | null = null;
  for (const t of threads) if (best === null || t.jobs < best.jobs) best = t;
  if (best !== null && (best.jobs === 0 || threads.length >= maxThreads)) return best;
  try {
    const t = new HashThread();
    threads.push(t);
    return t;
  } catch {
    return best; // no more threads here: share one, or hash inline
  }
}

class ThreadHash implements PayloadHash {
  readonly onThread = true;
  readonly #thread: HashThread;
  readonly #job = nextJob++;
  #done = false;

  constructor(t: HashThread) {
    this.#thread = t;
    t.jobs++;
  }

  #release(): void {
    if (this.#done) return;
    this.#done = true;
    this.#thread.jobs--;
  }

  async update(frames: Uint8Array, chunkBytes: number): Promise<Uint8Array> {
    if (this.#done) throw new Error('payload hash used after its digest or abandon');
    const { buffer, byteOffset: offset, byteLength: length } = frames; // a moved view reads 0 after
    const moved = buffer instanceof ArrayBuffer;
    const reply = await this.#thread.request((id) => ({ op: 'update', id, job: this.#job, buffer, offset, length, chunkBytes }), moved ? [buffer] : []);
    if (!moved) return frames;
    const back = 'buffer' in reply ? reply.buffer : null;
    if (back === null) throw new Error('the hashing thread kept a moved batch');
    return new Uint8Array(back, offset, length);
  }

  async digest(): Promise<Uint8Array> {
    if (this.#done) throw new Error('payload hash used after its digest or abandon');
    this.#release();
    const reply = await this.#thread.request((id) => ({ op: 'digest', id, job: this.#job }));
    if (!('digest' in reply)) throw new Error('the hashing thread answered a digest request without a digest');
    return reply.digest;
  }

  abandon(): void {
    if (this.#done) return;
    this.#release();
    this.#thread.tell({ op: 'drop', job: this.#job });
  }
}

/** A hash on a hashing thread (inline when no thread can be started). */
export function threadHash(): PayloadHash {
  const t = threadForJob();
  return t === null ? new InlineHash() : new ThreadHash(t);
}

/** Test support: stops every hashing thread as a crash inside it would; answers when they are gone. */
export async function stopHashThreadForTests(): Promise<void> {
  await Promise.all(threads.map((t) => t.terminate()));
}

/** Test support: sets how many hashing threads may run (as on a machine with more cores); answers the old bound. */
export function setMaxHashThreadsForTests(n: number): number {
  const old = maxThreads;
  maxThreads = n;
  return old;
}

/** Test support: how many hashing threads are running. */
export function hashThreadsForTests(): number {
  return threads.filter((t) => !t.stopped).length;
}
