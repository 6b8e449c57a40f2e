// Run as a program (by test/payloads.test.ts, in a fresh process so that memory freed by other
// tests cannot hide growth): puts a lazily generated payload of argv[3] bytes into a store in
// argv[2], reads it back, samples resident memory while streaming, and prints one JSON line:
// { size, digestOk, threadGrowth, putGrowth, getGrowth, growth } (bytes of RSS over the baseline).
// The baseline is taken after a warm-up put and get of three batches, which start the process's
// hashing thread: that is a cost paid once per process (threadGrowth), not per payload byte.

import { openPayloadStore } from '../../lib/payloads/index.js';
import { lazyBody, lazyDigest } from './payloads.js';

async function main(): Promise<void> {
  const dir = process.argv[2];
  const size = Number(process.argv[3]);
  if (dir === undefined || !Number.isSafeInteger(size)) throw new Error('usage: payloads-memory <dir> <bytes>');
  const store = await openPayloadStore(dir);
  try {
    const before = process.memoryUsage().rss;
    const warmUp = await store.put(lazyBody(5, 3 << 20, 256 * 1024, true)); // starts the hashing thread
    for await (const chunk of await store.get(warmUp.digest)) void chunk;
    const base = process.memoryUsage().rss;
    let peak = base;
    const sample = (): void => {
      peak = Math.max(peak, process.memoryUsage().rss);
    };
    async function* sampled(body: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
      for await (const piece of body) {
        sample();
        yield piece;
      }
    }
    const info = await store.put(sampled(lazyBody(11, size, 256 * 1024, true)));
    const putPeak = peak;
    let total = 0;
    for await (const chunk of await store.get(info.digest)) {
      total += chunk.length;
      sample();
    }
    const digestOk = info.digest === lazyDigest(11, size) && total === size && info.size === size;
    process.stdout.write(JSON.stringify({ size, digestOk, threadGrowth: base - before, putGrowth: putPeak - base, getGrowth: peak - base, growth: peak - base }) + '\n');
  } finally {
    await store.close();
  }
}

await main();
