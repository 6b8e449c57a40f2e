// Run as a program: put and get throughput of the payload store against a raw write + fsync and
// a raw read of the same bytes, interleaved in one run (the disk's speed drifts: docs/benchmarks.md), plus
// the peak growth of resident memory during put and get.
//   node dist/test/support/payloads-throughput.js [MiB=256] [rounds=3] [dir=os.tmpdir()]
// Prints one line per measurement and a JSON summary. Reads come from the page cache for both
// the raw read and get (nothing here drops caches), so the read figures compare CPU paths:
// CRC32 per chunk plus SHA-256 against a bare read.

import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, open as openFile } from 'node:fs/promises';
import { openPayloadStore } from '../../lib/payloads/index.js';

const PIECE = 1 << 20;

function mbps(bytes: number, ms: number): number {
  return Math.round((bytes / 1048576 / (ms / 1000)) * 10) / 10;
}

async function main(): Promise<void> {
  const mib = Number(process.argv[2] ?? 256);
  const rounds = Number(process.argv[3] ?? 3);
  const parent = process.argv[4] ?? os.tmpdir();
  const size = mib * PIECE;
  const dir = await mkdtemp(path.join(parent, 'seglog-payload-bench-'));
  const piece = new Uint8Array(randomBytes(PIECE));
  const results: Record<string, number[]> = { rawWrite: [], put: [], rawRead: [], get: [] };
  let rssPut = 0;
  let rssGet = 0;
  try {
    for (let round = 0; round < rounds; round++) {
      // raw: write 1 MiB pieces, then one fsync. put: a fresh store per round (each round's
      // payload differs in its first byte). Odd rounds run put first: the disk's state after one
      // large sync affects the next.
      const rawPath = path.join(dir, `raw-${round}`);
      const rawWrite = async (): Promise<void> => {
        const t0 = performance.now();
        const fh = await openFile(rawPath, 'wx');
        for (let at = 0; at < size; at += PIECE) await fh.write(piece, 0, PIECE, at);
        await fh.sync();
        await fh.close();
        results['rawWrite']?.push(mbps(size, performance.now() - t0));
      };
      const store = await openPayloadStore(path.join(dir, `store-${round}`));
      piece[0] = round;
      let info = { digest: '', size: 0 };
      const put = async (): Promise<void> => {
        const base = process.memoryUsage().rss;
        let peak = base;
        async function* body(): AsyncGenerator<Uint8Array> {
          for (let at = 0; at < size; at += PIECE) {
            peak = Math.max(peak, process.memoryUsage().rss);
            yield piece;
          }
        }
        const t0 = performance.now();
        info = await store.put(body());
        results['put']?.push(mbps(size, performance.now() - t0));
        rssPut = Math.max(rssPut, peak - base);
      };
      if (round % 2 === 0) {
        await rawWrite();
        await put();
      } else {
        await put();
        await rawWrite();
      }
      let t: number;

      // raw read of the raw file
      t = performance.now();
      const rh = await openFile(rawPath, 'r');
      const buf = new Uint8Array(PIECE);
      for (let at = 0; at < size; at += PIECE) await rh.read(buf, 0, PIECE, at);
      await rh.close();
      results['rawRead']?.push(mbps(size, performance.now() - t));

      // get
      const before = process.memoryUsage().rss;
      let getPeak = before;
      t = performance.now();
      let total = 0;
      let n = 0;
      for await (const chunk of await store.get(info.digest)) {
        total += chunk.length;
        if ((++n & 15) === 0) getPeak = Math.max(getPeak, process.memoryUsage().rss);
      }
      results['get']?.push(mbps(size, performance.now() - t));
      if (total !== size) throw new Error(`read ${total} of ${size} bytes`);
      rssGet = Math.max(rssGet, getPeak - before);
      await store.close();
      await rm(rawPath);
      await rm(path.join(dir, `store-${round}`), { recursive: true });
      console.log(`round ${round}: ` + Object.entries(results).map(([k, v]) => `${k} ${v[round]} MB/s`).join(', '));
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const median = (v: number[]): number => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)] ?? 0;
  const summary = {
    mib,
    rounds,
    medianMBps: Object.fromEntries(Object.entries(results).map(([k, v]) => [k, median(v)])),
    rssGrowthMiB: { put: Math.round(rssPut / 1048576), get: Math.round(rssGet / 1048576) },
  };
  console.log(JSON.stringify(summary));
}

await main();
