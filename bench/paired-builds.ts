// The command shape of the paired A/B scripts (cells-ab.ts, tail-ab.ts): this build against another
// build of seglog, section by section, the two run in rotated order every round.
//
// Owns: `pairedBuildsMain`: the arguments (--baseline <dist> --rounds N --ms N --slices N --memory
// --only TEXT), loading both builds, a scratch directory removed at the end, and one line per
// variant with this build's ratio to the baseline per round (median, min–max).

import { mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runSection, type Variant } from './harness/runner.js';
import type { Budget } from './harness/timing.js';

export interface PairedBuildsCommand<B> {
  /** The script's name (dist/bench/<name>.js) and what it compares, for the usage and the header. */
  name: string;
  what: string;
  /** Extra options, shown in the usage line. */
  extraUsage?: string;
  rounds: number;
  ms: number;
  budget: Omit<Budget, 'durationMs'>;
  load(id: string, dist: string): Promise<B>;
  /** Runs before the sections (e.g. an interleaved measurement of its own). */
  before?(builds: B[], root: string, memory: boolean, arg: (name: string) => string | undefined): Promise<void>;
  sections(builds: B[], root: string, memory: boolean): [string, Variant[]][];
}

/** Runs a paired A/B command over `argv` (see the module header). */
export async function pairedBuildsMain<B>(argv: string[], c: PairedBuildsCommand<B>): Promise<void> {
  const arg = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i < 0 ? undefined : argv[i + 1];
  };
  const baseline = arg('--baseline');
  if (baseline === undefined) {
    console.error(`usage: node dist/bench/${c.name}.js --baseline <other build>/dist [--rounds N] [--ms N] [--slices N]${c.extraUsage ?? ''} [--only TEXT] [--memory]`);
    process.exitCode = 2;
    return;
  }
  const rounds = Number(arg('--rounds') ?? c.rounds);
  const ms = Number(arg('--ms') ?? c.ms);
  const slices = Number(arg('--slices') ?? 4);
  const memory = argv.includes('--memory');
  const only = arg('--only');
  const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const builds = [await c.load('baseline', path.resolve(baseline)), await c.load('this', here)];
  const root = path.join(tmpdir(), `seglog-${c.name}-${process.pid}`);
  await mkdir(root, { recursive: true });
  try {
    const sections = c.sections(builds, root, memory);
    console.log(`${c.what} on ${memory ? 'MemoryFs (CPU only)' : `the disk under ${root}`}: ${rounds} paired rounds of ${ms} ms per variant, ${slices} slices`);
    if (c.before !== undefined) await c.before(builds, root, memory, arg);
    const width = Math.max(...sections.map(([title]) => title.length)) + 2;
    for (const [title, variants] of sections) {
      if (only !== undefined && !title.includes(only)) continue;
      const r = await runSection({ id: title, title, description: '', variants, baseline: 'baseline', rounds, warmupRounds: 1, slices, budget: { durationMs: ms, ...c.budget } });
      for (const v of r.variants) {
        const s = v.summary;
        const ratio = v.ratio === null ? '' : `; this/baseline per round: median ${v.ratio.recordsPerSec.median.toFixed(3)} (${v.ratio.recordsPerSec.min.toFixed(2)}–${v.ratio.recordsPerSec.max.toFixed(2)})`;
        console.log(`${title.padEnd(width)} ${v.id.padEnd(8)} ${s.opsPerSec.median.toFixed(0)} ops/s, p50 ${s.p50Us.median.toFixed(0)} µs, p99 ${s.p99Us.median.toFixed(0)} µs${ratio}`);
      }
    }
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
