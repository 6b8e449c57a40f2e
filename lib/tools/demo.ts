// `seglog demo`: the main job on an embedded data directory, for a fresh machine.
//
// Owns: a short, real workload over the primitives and stores that exist, on a directory that
// persists between runs (default ./seglog-data), so that a second run shows the first run's data
// survived. It prints what it did and what it found; it never deletes the directory.

import * as path from 'node:path';
import { openSegmentedLog } from '../../segments/index.js';
import { openCell } from '../../cells/index.js';
import { openPayloadStore } from '../payloads/index.js';
import { realFs } from '../fs/real.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function parseArgs(argv: string[]): { dir: string; records: number } {
  let dir = 'seglog-data';
  let records = 1000;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--dir' && argv[i + 1] !== undefined) dir = argv[++i] as string;
    else if (arg === '--records' && argv[i + 1] !== undefined) records = Number(argv[++i]);
    else throw new Error(`seglog demo: unknown argument '${arg}' (usage: seglog demo [--dir D] [--records N])`);
  }
  if (!Number.isSafeInteger(records) || records < 1) throw new Error('seglog demo: --records takes a positive integer');
  return { dir: path.resolve(dir), records };
}

export async function runDemo(argv: string[]): Promise<number> {
  const { dir, records } = parseArgs(argv);
  await realFs.mkdir(dir);
  console.log(`seglog demo on ${dir}`);

  // A cell: how many times this directory has been opened by the demo.
  const runs = await openCell(path.join(dir, 'runs.cell'));
  const previous = await runs.read();
  const run = previous === null ? 1 : Number(decoder.decode(previous)) + 1;
  await runs.write(encoder.encode(String(run)));
  await runs.close();
  console.log(`  cell runs.cell: this is run ${run} (durable before this line was printed)`);

  // A segmented log: every run appends `records` durable records, 32 appenders at a time.
  const log = await openSegmentedLog(path.join(dir, 'events'));
  const before = log.endIndex;
  const started = performance.now();
  const appenders = 32;
  let next = 0;
  await Promise.all(
    Array.from({ length: appenders }, async () => {
      while (next < records) {
        const n = next++;
        await log.append([encoder.encode(`run ${run} record ${n} at ${new Date().toISOString()}`)]);
      }
    }),
  );
  const elapsed = performance.now() - started;
  const [first] = await log.read(log.firstIndex, 1);
  const [last] = await log.read(log.endIndex - 1, 1);
  console.log(
    `  log events/: appended ${records} durable records in ${elapsed.toFixed(0)} ms ` +
      `(${((records / elapsed) * 1000).toFixed(0)}/s); indices ${before}..${log.endIndex - 1}, ` +
      `${log.endIndex - log.firstIndex} records in all`,
  );
  console.log(`    first: ${first === undefined ? '-' : decoder.decode(first)}`);
  console.log(`    last:  ${last === undefined ? '-' : decoder.decode(last)}`);
  await log.close();

  // The payload store: one body per run, streamed in and back out, content-addressed.
  const payloads = await openPayloadStore(path.join(dir, 'payloads'));
  const body = encoder.encode(`payload of run ${run}\n`.repeat(1000));
  const info = await payloads.put(
    (async function* () {
      yield body;
    })(),
  );
  await payloads.addRef(info.digest, `demo-run-${run}`);
  let size = 0;
  for await (const chunk of await payloads.get(info.digest)) size += chunk.length;
  console.log(`  payloads/: stored ${info.digest} (${info.size} bytes), read back ${size} bytes, holders ${(await payloads.refs(info.digest)).length}`);
  await payloads.close();

  console.log('done; run it again to see the data persist.');
  return 0;
}
