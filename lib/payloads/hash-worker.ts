// The body of the payload store's hashing thread (started by ./hash.ts, never imported).
//
// Owns: one SHA-256 state per job, fed with the payload bytes of framed batches (each frame is
// `chunkBytes` of payload then a 4-byte CRC32; the last frame of a batch may be shorter) that the
// main thread posts: shared memory (the main thread keeps the batch; it reuses it only after this
// thread's answer) or a transferred buffer (sent back with the answer). Guarantees: the requests of
// one job are hashed in the order they were posted (a MessagePort delivers in order); every
// request is answered exactly once, by its id; a job's state is dropped at its digest or on request.

import { createHash, type Hash } from 'node:crypto';
import { parentPort } from 'node:worker_threads';
import type { HashReply, HashRequest } from './hash.js';

const CRC_BYTES = 4;
const port = parentPort;
if (port === null) throw new Error('hash-worker.js runs as a worker thread only');

const jobs = new Map<number, Hash>();

port.on('message', (m: HashRequest) => {
  if (m.op === 'drop') {
    jobs.delete(m.job);
    return;
  }
  let hash = jobs.get(m.job);
  if (hash === undefined) {
    hash = createHash('sha256');
    jobs.set(m.job, hash);
  }
  if (m.op === 'digest') {
    jobs.delete(m.job);
    const reply: HashReply = { id: m.id, digest: new Uint8Array(hash.digest()) };
    port.postMessage(reply);
    return;
  }
  const bytes = new Uint8Array(m.buffer, m.offset, m.length);
  for (let at = 0; at < bytes.length; ) {
    const n = Math.min(m.chunkBytes, bytes.length - at - CRC_BYTES);
    hash.update(bytes.subarray(at, at + n));
    at += n + CRC_BYTES;
  }
  const reply: HashReply = { id: m.id, buffer: m.buffer instanceof ArrayBuffer ? m.buffer : null };
  port.postMessage(reply, m.buffer instanceof ArrayBuffer ? [m.buffer] : []);
});
