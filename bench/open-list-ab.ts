// A paired A/B of the host store's cold open + list (what `bench stores --only host-open` measures
// for seglog) between this build and another build of seglog, in fresh processes.
//
// Owns: `node dist/bench/open-list-ab.js --baseline <other>/dist [--scopes N] [--rounds N]`: builds
// one realm of N scopes (a 100 B head and one 200 B row each, batches of 500, then a checkpoint
// round: the bench's realm) with this build, then every round opens it and lists every head once in
// a fresh Node process per build, the two in rotated order; prints each build's median and this
// build's ratio to the baseline per round (median, min–max). A cold open is the point: in one
// process the second listing runs warm code and hides what a restart pays. The realm is removed at
// the end. Both builds must read this build's realm format.

import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const thisDist = path.resolve(here, '..');

/** The child: open the realm in `dir` with the build at `dist`, list every head, print the times. */
async function child(dist: string, dir: string): Promise<void> {
  const host = (await import(pathToFileURL(path.join(dist, 'lib/host/index.js')).href)) as typeof import('../lib/host/index.js');
  const t0 = performance.now();
  const store = await host.openFsHostStore(dir);
  const t1 = performance.now();
  let heads = 0;
  for (const kind of host.SCOPE_KINDS) {
    for (let after: string | null = null; ; ) {
      const page = await store.listHeads(kind, after, 1000);
      heads += page.heads.length;
      if (page.next === null) break;
      after = page.next;
    }
  }
  const t2 = performance.now();
  await store.close();
  process.stdout.write(JSON.stringify({ openMs: t1 - t0, openListMs: t2 - t0, heads }));
}

async function main(argv: string[]): Promise<void> {
  const arg = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i < 0 ? undefined : argv[i + 1];
  };
  if (argv[0] === '--child') return child(argv[1]!, argv[2]!);
  const baseline = arg('--baseline');
  if (baseline === undefined) {
    console.error('usage: node dist/bench/open-list-ab.js --baseline <other build>/dist [--scopes N] [--rounds N]');
    process.exitCode = 2;
    return;
  }
  const scopes = Number(arg('--scopes') ?? 10_000);
  const rounds = Number(arg('--rounds') ?? 12);
  const root = await mkdtemp(path.join(tmpdir(), 'seglog-open-list-ab-'));
  try {
    const dir = path.join(root, 'realm');
    const { openFsHostStore } = await import('../lib/host/index.js');
    const { buildRealm } = await import('./stores/suite.js');
    const store = await openFsHostStore(dir);
    await buildRealm(store, scopes);
    await store.checkpoint();
    await store.close();
    const builds = [
      { name: 'baseline', dist: path.resolve(baseline) },
      { name: 'this build', dist: thisDist },
    ];
    const ms: number[][] = [[], []];
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? [0, 1] : [1, 0];
      for (const b of order) {
        const out = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', builds[b]!.dist, dir], { encoding: 'utf8' });
        if (out.status !== 0) throw new Error(`${builds[b]!.name}: the child failed: ${out.stderr}`);
        const res = JSON.parse(out.stdout) as { openListMs: number; heads: number };
        if (res.heads !== scopes) throw new Error(`${builds[b]!.name} listed ${res.heads} of ${scopes} scopes`);
        ms[b]!.push(res.openListMs);
      }
    }
    const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    const ratios = ms[1]!.map((v, i) => v / ms[0]![i]!);
    console.log(`open + list of ${scopes.toLocaleString('en-US')} scopes, fresh processes, ${rounds} rounds`);
    console.log(`baseline ${median(ms[0]!).toFixed(1)} ms, this build ${median(ms[1]!).toFixed(1)} ms`);
    console.log(`this build / baseline, paired by round: ${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)})`);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

await main(process.argv.slice(2));
