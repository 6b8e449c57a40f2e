// The crash-injection runner: runs named workloads, explores their crash states, reports.
//
// Owns: `runCrashWorkloads` (the library form of `seglog crash`), `replayCrashReproducer` (the
// library form of `seglog crash --replay`), reproducer strings, trace fingerprints.
// For each workload: record one run on a fresh MemoryFs with seeded randomness (so that the
// workload, the seed, the scale and the planted mistake name one trace); count its distinct crash
// states (lib/crash/explore.ts: prefixes × subsets of unsynced operations × torn writes × unsynced
// directory entries); check all of them when they are at most `maxStates`, else a seeded sample of
// `maxStates` spread over the whole run; run the linear pass (acknowledgements after the syncs
// they depend on); and report each violation with a reproducer.
// Guarantees: deterministic for given options (same states, same verdicts); one workload at a
// time; a check that does not settle within `checkTimeoutMs` is a violation, not a hang.

import { createHash } from 'node:crypto';
import { MemoryFs, type DiskImage, type TraceEntry } from '../fs/memory.js';
import { exploreCrashStates, replayCrashState, type CrashFamily, type CrashState } from './explore.js';
import { checkAckAfterSync } from './linear.js';
import { seededRandom, withSeededRandomness } from './determinism.js';
import { loadWorkload, workloadNames, type CrashWorkload, type WorkloadRun } from './workloads/index.js';

/** The disk every workload starts from: an empty, durable /data. */
export const WORKLOAD_INITIAL_IMAGE: DiskImage = { dirs: ['/data'], files: {} };

export interface CrashRunOptions {
  /** Workload names (default: every registered one, in registry order). */
  workloads?: readonly string[];
  /** Seed of the workloads' choices, their random bytes and the state sampling (default 1). */
  seed?: number;
  /** Most states checked per workload (default 4,000; with `exhaustive`, unlimited). */
  maxStates?: number;
  /**
   * Enumerate every subset of up to 14 unsynced operations (not 10), crossed with every tear of
   * one write, and check every state (no sampling) unless `maxStates` is given.
   */
  exhaustive?: boolean;
  /** Workload size multiplier (default 1). */
  scale?: number;
  /** Test-only: plant this mistake in every workload run (each must declare it in `plants`). */
  plant?: string | null;
  /** Stop a workload after this many violations (default 10). */
  maxViolations?: number;
  /** A check that takes longer than this is a violation (default 20,000 ms). */
  checkTimeoutMs?: number;
  onProgress?: (progress: CrashProgress) => void;
}

export interface CrashProgress {
  readonly workload: string;
  readonly phase: 'recording' | 'counting' | 'checking' | 'done';
  /** States checked so far, of `total` to check (0 until counted). */
  readonly checked: number;
  readonly total: number;
  readonly violations: number;
}

export interface CrashViolationReport {
  readonly workload: string;
  readonly seed: number;
  /** The crash state's id, or 'linear' (the linear pass) or 'run' (the recorded run itself failed). */
  readonly stateId: string;
  /** Pass to `seglog crash --replay` (or `replayCrashReproducer`) to run this state alone. */
  readonly reproducer: string;
  readonly family: CrashFamily | 'linear' | 'run';
  readonly point: number;
  /** What the checker threw. */
  readonly message: string;
  /** The state: crash point, acknowledgements, each unsynced operation kept, dropped or torn. */
  readonly description: string;
}

export interface WorkloadReport {
  readonly workload: string;
  readonly seed: number;
  readonly scale: number;
  readonly plant: string | null;
  /** What the recorded run did. */
  readonly summary: string;
  readonly traceEntries: number;
  /** Identifies the recorded trace; a replay compares it. */
  readonly fingerprint: string;
  /** Distinct crash states the run has (under the enumeration options). */
  readonly candidates: number;
  /** States checked. */
  readonly states: number;
  /** True when fewer states were checked than the run has (a seeded sample, or stopped early). */
  readonly sampled: boolean;
  /** True when every crash point had every subset of its unsynced operations enumerated. */
  readonly exhaustive: boolean;
  readonly points: number;
  readonly byFamily: Readonly<Record<string, number>>;
  /** Acknowledgements the linear pass checked (null when the workload skips it). */
  readonly linearAcks: number | null;
  readonly violations: readonly CrashViolationReport[];
  readonly elapsedMs: number;
}

export interface CrashRunReport {
  readonly seed: number;
  readonly workloads: readonly WorkloadReport[];
  /** States checked over all workloads. */
  readonly states: number;
  readonly violations: number;
  readonly elapsedMs: number;
}

// ---------------------------------------------------------------------------------------------
// Reproducers: `<workload>[+<plant>]@<seed>[x<scale>]/<state id>[#<fingerprint>]`

export interface Reproducer {
  readonly workload: string;
  readonly plant: string | null;
  readonly seed: number;
  readonly scale: number;
  readonly stateId: string;
  readonly fingerprint: string | null;
}

export function formatReproducer(r: Reproducer): string {
  return (
    `${r.workload}${r.plant === null ? '' : `+${r.plant}`}@${r.seed}${r.scale === 1 ? '' : `x${r.scale}`}/${r.stateId}` +
    (r.fingerprint === null ? '' : `#${r.fingerprint}`)
  );
}

export function parseReproducer(text: string): Reproducer {
  const m = /^([a-z0-9-]+)(?:\+([a-z0-9-]+))?@(\d+)(?:x([0-9.]+))?\/([^#\s]+)(?:#([0-9a-f]+))?$/.exec(text.trim());
  if (m === null) throw new TypeError(`not a crash reproducer: '${text}' (expected <workload>[+<plant>]@<seed>[x<scale>]/<state id>[#<fingerprint>])`);
  const scale = m[4] === undefined ? 1 : Number(m[4]);
  if (!(scale > 0)) throw new TypeError(`bad scale in reproducer '${text}'`);
  return { workload: m[1]!, plant: m[2] ?? null, seed: Number(m[3]), scale, stateId: m[5]!, fingerprint: m[6] ?? null };
}

/** A short hash of everything a replay must find again in the trace. */
export function traceFingerprint(trace: readonly TraceEntry[]): string {
  const h = createHash('sha256');
  for (const e of trace) {
    h.update(`${e.kind}|${e.process}|${e.path}|${e.to ?? ''}|${e.offset ?? ''}|${e.length ?? ''}|${e.size ?? ''}|${e.error ?? ''}|${e.label ?? ''}\n`);
    if (e.data !== undefined) h.update(e.data);
  }
  return h.digest('hex').slice(0, 12);
}

// ---------------------------------------------------------------------------------------------
// Running

interface Recorded {
  readonly workload: CrashWorkload;
  readonly fs: MemoryFs;
  readonly run: WorkloadRun | null;
  readonly error: unknown;
}

async function record(name: string, seed: number, scale: number, plant: string | null): Promise<Recorded> {
  const workload = await loadWorkload(name);
  if (plant !== null && workload.plants?.[plant] === undefined) {
    throw new RangeError(`workload '${name}' has no planted mistake '${plant}' (it has: ${Object.keys(workload.plants ?? {}).join(', ') || 'none'})`);
  }
  const fs = new MemoryFs({ image: WORKLOAD_INITIAL_IMAGE });
  try {
    const run = await withSeededRandomness(seed, () => workload.run({ fs, seed, random: seededRandom(seed), scale, plant }));
    return { workload, fs, run, error: null };
  } catch (error) {
    return { workload, fs, run: null, error };
  }
}

function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** k distinct ordinals in [0, n), seeded (Floyd's algorithm). */
function sampleOrdinals(n: number, k: number, rng: () => number): Set<number> {
  const chosen = new Set<number>();
  for (let j = n - k; j < n; j++) {
    const t = Math.floor(rng() * (j + 1));
    chosen.add(chosen.has(t) ? j : t);
  }
  return chosen;
}

/** Runs one workload: record, count, check, linear pass. */
export async function runCrashWorkload(name: string, options: CrashRunOptions = {}): Promise<WorkloadReport> {
  const started = performance.now();
  const seed = options.seed ?? 1;
  const scale = options.scale ?? 1;
  const plant = options.plant ?? null;
  const exhaustive = options.exhaustive ?? false;
  const maxStates = options.maxStates ?? (exhaustive ? Number.POSITIVE_INFINITY : 4000);
  const maxViolations = options.maxViolations ?? 10;
  const timeoutMs = options.checkTimeoutMs ?? 20_000;
  const progress = (phase: CrashProgress['phase'], checked: number, total: number, violations: number): void =>
    options.onProgress?.({ workload: name, phase, checked, total, violations });

  progress('recording', 0, 0, 0);
  const recorded = await record(name, seed, scale, plant);
  const { fs } = recorded;
  const trace = fs.trace;
  const fingerprint = traceFingerprint(trace);
  const reproducer = (stateId: string): string => formatReproducer({ workload: name, plant, seed, scale, stateId, fingerprint });
  const base = { workload: name, seed, scale, plant, traceEntries: trace.length, fingerprint };

  if (recorded.run === null) {
    const message = messageOf(recorded.error);
    return {
      ...base,
      summary: 'the recorded run failed',
      candidates: 0,
      states: 0,
      sampled: false,
      exhaustive: false,
      points: 0,
      byFamily: {},
      linearAcks: null,
      violations: [
        {
          workload: name,
          seed,
          stateId: 'run',
          reproducer: reproducer('run'),
          family: 'run',
          point: trace.length,
          message,
          description: `the workload's own run failed after ${trace.length} trace entries (a restarted process found a state no step leaves, or the store threw): ${message}`,
        },
      ],
      elapsedMs: performance.now() - started,
    };
  }
  const run = recorded.run;
  const enumeration = {
    initial: fs.initialImage,
    trace,
    seed,
    ...(exhaustive ? { exhaustiveLimit: 14, tornSubsets: true } : {}),
  };

  progress('counting', 0, 0, 0);
  const counted = await exploreCrashStates({ ...enumeration, check: () => undefined, select: () => false, maxStates: Number.POSITIVE_INFINITY });
  const candidates = counted.candidates;
  const total = Math.min(candidates, maxStates);
  const selected = candidates > maxStates ? sampleOrdinals(candidates, maxStates, seededRandom(seed ^ 0x9e3779b9)) : null;

  let checked = 0;
  const result = await exploreCrashStates({
    ...enumeration,
    maxViolations,
    ...(selected === null ? {} : { select: (ordinal: number) => selected.has(ordinal) }),
    check: async (state: CrashState) => {
      try {
        await withTimeout(run.check(state), timeoutMs, `the check of state ${state.id}`);
      } finally {
        checked++;
      }
    },
    onProgress: () => progress('checking', checked, total, 0),
  });

  const violations: CrashViolationReport[] = result.violations.map((v) => {
    let description = v.description;
    if (run.explain !== undefined) {
      try {
        description += '\n' + run.explain(replayCrashState({ initial: fs.initialImage, trace, id: v.id }));
      } catch {
        // The explanation is a courtesy; the description stands alone.
      }
    }
    return {
      workload: name,
      seed,
      stateId: v.id,
      reproducer: reproducer(v.id),
      family: v.family,
      point: v.point,
      message: messageOf(v.error),
      description,
    };
  });

  let linearAcks: number | null = null;
  if (run.ackCheck !== false) {
    const linear = checkAckAfterSync(trace, run.ackCheck ?? {});
    linearAcks = linear.acks;
    for (const v of linear.violations.slice(0, maxViolations)) {
      violations.push({
        workload: name,
        seed,
        stateId: 'linear',
        reproducer: reproducer('linear'),
        family: 'linear',
        point: v.marker.index,
        message: v.description,
        description: `the linear pass: ${v.description}`,
      });
    }
  }
  progress('done', result.states, total, violations.length);
  return {
    ...base,
    summary: run.summary ?? '',
    candidates,
    states: result.states,
    sampled: result.states < candidates,
    exhaustive: result.exhaustive && result.states === candidates,
    points: result.points,
    byFamily: result.byFamily,
    linearAcks,
    violations,
    elapsedMs: performance.now() - started,
  };
}

/** Runs the named workloads (default: all) one after another; see the module header. */
export async function runCrashWorkloads(options: CrashRunOptions = {}): Promise<CrashRunReport> {
  const started = performance.now();
  const names = options.workloads === undefined || options.workloads.length === 0 ? workloadNames() : [...options.workloads];
  for (const name of names) if (!workloadNames().includes(name)) throw new RangeError(`no crash workload '${name}' (known: ${workloadNames().join(', ')})`);
  const reports: WorkloadReport[] = [];
  for (const name of names) reports.push(await runCrashWorkload(name, options));
  return {
    seed: options.seed ?? 1,
    workloads: reports,
    states: reports.reduce((n, r) => n + r.states, 0),
    violations: reports.reduce((n, r) => n + r.violations.length, 0),
    elapsedMs: performance.now() - started,
  };
}

// ---------------------------------------------------------------------------------------------
// Replay

export interface ReplayReport {
  readonly reproducer: Reproducer;
  /** False when the recorded trace differs from the one the reproducer was made from. */
  readonly sameTrace: boolean;
  readonly fingerprint: string;
  /** The state, as `CrashState.describe()` gives it (null for 'linear' and 'run'). */
  readonly state: CrashState | null;
  /** The whole explanation: state, operations kept, dropped and torn, the workload's window. */
  readonly explanation: string;
  /** True when the check passed (no violation) on this state. */
  readonly passed: boolean;
  readonly message: string | null;
}

/** Records the reproducer's workload run again, rebuilds its state alone, and checks it. */
export async function replayCrashReproducer(text: string, options: { checkTimeoutMs?: number } = {}): Promise<ReplayReport> {
  const reproducer = parseReproducer(text);
  const recorded = await record(reproducer.workload, reproducer.seed, reproducer.scale, reproducer.plant);
  const trace = recorded.fs.trace;
  const fingerprint = traceFingerprint(trace);
  const sameTrace = reproducer.fingerprint === null || reproducer.fingerprint === fingerprint;
  const header = [
    `workload ${reproducer.workload}${reproducer.plant === null ? '' : ` with planted mistake '${reproducer.plant}'`}, seed ${reproducer.seed}` +
      (reproducer.scale === 1 ? '' : `, scale ${reproducer.scale}`) +
      `: ${trace.length} trace entries, fingerprint ${fingerprint}` +
      (sameTrace ? '' : ` (the reproducer was made from ${reproducer.fingerprint}: the workload changed since; the state may differ)`),
  ];
  if (recorded.run === null) {
    const message = messageOf(recorded.error);
    return { reproducer, sameTrace, fingerprint, state: null, explanation: [...header, `the recorded run failed: ${message}`].join('\n'), passed: false, message };
  }
  const run = recorded.run;
  if (reproducer.stateId === 'run') {
    return { reproducer, sameTrace, fingerprint, state: null, explanation: [...header, `the recorded run succeeded: ${run.summary ?? ''}`].join('\n'), passed: true, message: null };
  }
  if (reproducer.stateId === 'linear') {
    const linear = checkAckAfterSync(trace, run.ackCheck === false ? {} : (run.ackCheck ?? {}));
    const lines = [...header, `linear pass over ${linear.acks} acknowledgement(s): ${linear.violations.length} violation(s)`];
    for (const v of linear.violations) lines.push(`  ${v.description}`);
    return {
      reproducer,
      sameTrace,
      fingerprint,
      state: null,
      explanation: lines.join('\n'),
      passed: linear.violations.length === 0,
      message: linear.violations[0]?.description ?? null,
    };
  }
  const state = replayCrashState({ initial: recorded.fs.initialImage, trace, id: reproducer.stateId });
  const lines = [...header, `what the workload did: ${run.summary ?? ''}`, state.describe()];
  if (run.explain !== undefined) lines.push(run.explain(state));
  const last = trace[state.point - 1];
  if (last !== undefined) lines.push(`the crash came right after trace entry #${last.index} (${last.kind} ${last.label ?? last.path})`);
  let message: string | null = null;
  try {
    await withTimeout(run.check(state), options.checkTimeoutMs ?? 20_000, `the check of state ${state.id}`);
  } catch (error) {
    message = messageOf(error);
  }
  lines.push(message === null ? 'the check passed: this state does not break the contract' : `VIOLATION: ${message}`);
  return { reproducer, sameTrace, fingerprint, state, explanation: lines.join('\n'), passed: message === null, message };
}
