// A paired A/B of a cold open between this build and another build of seglog, in fresh processes:
// the host store's open + list (what `bench stores --only host-open` measures for seglog), or the
// Raft node's open + first read of every group (the open phase of `--only raft-groups`).
//
// Owns: `node dist/bench/cold-open-ab.js --baseline <other>/dist [--store host|raft] [--scopes N]
// [--groups N] [--rounds N]`. host (the default): builds one realm of N scopes (a 100 B head and
// one 200 B row each, batches of 500, then a checkpoint round: the bench's realm); raft: a node of
// N groups, one blank entry each, closed (the bench's node). Both with this build; then every
// round opens it in a fresh Node process per build, the two in rotated order, and prints each
// build's median and this build's ratio to the baseline per round (median, min–max). A cold open
// is the point: in one process a second open runs warm code and hides what a restart pays. The
// store is removed at the end. Both builds must read this build's format.

import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const thisDist = path.resolve(here, '..');

/** The raft child: the bench's open phase of the node in `dir` with the build at `dist`. */
async function raftChild(dist: string, dir: string, groups: number): Promise<void> {
  const bench = (await import(pathToFileURL(path.join(dist, 'bench/stores/groups-bench.js')).href)) as typeof import('./stores/groups-bench.js');
  const r = await bench.raftGroupsOpen(dir, groups);
  process.stdout.write(JSON.stringify({ openMs: r.openMs, openListMs: r.openReadMs, heads: r.groups }));
}

/** The host child: open the realm in `dir` with the build at `dist`, list every head, print the times. */
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
  if (argv[0] === '--raft-child') return raftChild(argv[1]!, argv[2]!, Number(argv[3]));
  const baseline = arg('--baseline');
  if (baseline === undefined) {
    console.error('usage: node dist/bench/cold-open-ab.js --baseline <other build>/dist [--store host|raft] [--scopes N] [--groups N] [--rounds N]');
    process.exitCode = 2;
    return;
  }
  const store = arg('--store') ?? 'host';
  if (store !== 'host' && store !== 'raft') throw new Error(`--store is host or raft, not ${store}`);
  const count = store === 'host' ? Number(arg('--scopes') ?? 10_000) : Number(arg('--groups') ?? 1000);
  const rounds = Number(arg('--rounds') ?? 12);
  const root = await mkdtemp(path.join(tmpdir(), 'seglog-cold-open-ab-'));
  try {
    const dir = path.join(root, store);
    if (store === 'host') {
      const { openFsHostStore } = await import('../lib/host/index.js');
      const { buildRealm } = await import('./stores/suite.js');
      const realm = await openFsHostStore(dir);
      await buildRealm(realm, count);
      await realm.checkpoint();
      await realm.close();
    } else {
      const { raftGroupsCreate } = await import('./stores/groups-bench.js');
      await raftGroupsCreate(dir, count);
    }
    const builds = [
      { name: 'baseline', dist: path.resolve(baseline) },
      { name: 'this build', dist: thisDist },
    ];
    const ms: number[][] = [[], []];
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? [0, 1] : [1, 0];
      for (const b of order) {
        const script = fileURLToPath(import.meta.url);
        const dist = builds[b]!.dist;
        // The raft child measures RSS after a full collection, as the bench's does.
        const args = store === 'host' ? [script, '--child', dist, dir] : ['--expose-gc', script, '--raft-child', dist, dir, String(count)];
        const out = spawnSync(process.execPath, args, { encoding: 'utf8' });
        if (out.status !== 0) throw new Error(`${builds[b]!.name}: the child failed: ${out.stderr}`);
        const res = JSON.parse(out.stdout) as { openListMs: number; heads: number };
        if (res.heads !== count) throw new Error(`${builds[b]!.name} answered ${res.heads} of ${count}`);
        ms[b]!.push(res.openListMs);
      }
    }
    const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    const ratios = ms[1]!.map((v, i) => v / ms[0]![i]!);
    console.log(store === 'host' ? `open + list of ${count.toLocaleString('en-US')} scopes, fresh processes, ${rounds} rounds` : `open + first read of ${count.toLocaleString('en-US')} groups, fresh processes, ${rounds} rounds`);
    console.log(`baseline ${median(ms[0]!).toFixed(1)} ms, this build ${median(ms[1]!).toFixed(1)} ms`);
    console.log(`this build / baseline, paired by round: ${median(ratios).toFixed(3)} (${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)})`);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

await main(process.argv.slice(2));
