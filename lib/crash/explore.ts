// The crash-state explorer: every disk a crash may leave, given a recorded run, and a checker on each.
//
// Owns: `exploreCrashStates` (enumerate and check), `replayCrashState` (rebuild one state from its
// id), the state ids, and the families of states (docs/crash-testing.md):
//   durable  — the prefix with nothing unsynced kept (what a sync-only view says);
//   all      — the prefix with every unsynced operation kept (what the page cache held);
//   omit-one — every unsynced operation kept but one (ordering bugs);
//   torn     — every unsynced operation kept, one write landed only in its first sectors, with or
//              without the file size already extended over the missing ones (atomicity bugs);
//   subset   — every subset of the unsynced operations (when there are at most `exhaustiveLimit`);
//   random   — seeded random subsets, some with a torn write (when there are more);
//   torn-subset — with `tornSubsets`: every subset crossed with every tear of one write (the
//              exhaustive mode of `seglog crash --exhaustive`).
// Guarantees: deterministic for a given trace, options and seed; each state has a stable id
// (crash point, operations dropped or kept, the torn write) from which `replayCrashState`
// rebuilds exactly that disk; a state already checked with the same acknowledgements is not
// checked twice; at most `maxStates` states are checked (the result says when the cap cut it);
// `select` lets a caller check a chosen subset of the distinct states, by their ordinal in the
// (deterministic) enumeration order, so that a sample can spread over the whole run instead of
// stopping at its first N states.

import type { DiskImage, TraceEntry } from '../fs/memory.js';
import { seededRandom } from './determinism.js';
import { ReplayModel, isFileUnit, sectorsOf, type FileUnit, type Tear, type Unit } from './model.js';

export type CrashFamily = 'durable' | 'all' | 'omit-one' | 'torn' | 'subset' | 'random' | 'torn-subset';

/** An unsynced operation, as a state reports it. */
export interface CrashUnit {
  /** Stable id: the trace index of the call ('.k' for the k-th entry change of one call). */
  readonly uid: string;
  readonly entry: number;
  /** write/truncate of a file's bytes, or link/unlink of a directory entry. */
  readonly kind: 'write' | 'truncate' | 'link' | 'unlink';
  /** The call that made it (a rename is an unlink plus a link; a create is a link). */
  readonly call: string;
  readonly path: string;
  readonly offset?: number;
  readonly length?: number;
  readonly size?: number;
}

export interface CrashTear {
  readonly unit: CrashUnit;
  /** Sectors of the write that landed, of `of`. */
  readonly sectors: number;
  readonly of: number;
  /** The file size covers the whole write although the missing sectors did not land (zeros). */
  readonly extend: boolean;
}

/** One disk a crash may leave. */
export interface CrashState {
  readonly id: string;
  /** How many trace entries ran before the crash. */
  readonly point: number;
  readonly family: CrashFamily;
  /** The disk; load it with `new MemoryFs({ image })`. */
  readonly image: DiskImage;
  /** The markers recorded before the crash (the acknowledgements the disk must honour). */
  readonly acknowledged: readonly TraceEntry[];
  readonly kept: readonly CrashUnit[];
  readonly dropped: readonly CrashUnit[];
  readonly torn: CrashTear | null;
  /** A readable account: the crash point, the acknowledgements, each unit kept, dropped or torn. */
  describe(): string;
}

export interface CrashViolation {
  readonly id: string;
  readonly family: CrashFamily;
  readonly point: number;
  readonly description: string;
  readonly error: unknown;
}

export interface ExploreOptions {
  /** The image the recorded run started from (`memoryFs.initialImage`); default empty. */
  initial?: DiskImage;
  /** The recorded run (`memoryFs.trace`). */
  trace: readonly TraceEntry[];
  /** Throws (or rejects) when the state breaks an invariant. */
  check: (state: CrashState) => Promise<void> | void;
  /** Seed of the random family (default 1). */
  seed?: number;
  /** Most states to check (default 20,000). */
  maxStates?: number;
  /** Enumerate every subset when at most this many operations are unsynced (default 10). */
  exhaustiveLimit?: number;
  /** Random subsets per crash point when more are unsynced (default 24). */
  samplesPerPoint?: number;
  /**
   * Where crashes happen: 'every-op' (default) after every call that changed the disk or the
   * page cache and after every marker; 'syncs' just before and after every sync, after every
   * marker and at the end.
   */
  points?: 'every-op' | 'syncs';
  /** Build torn-write states (default true). */
  tornWrites?: boolean;
  /** Stop after this many violations (default 10). */
  maxViolations?: number;
  /**
   * Which distinct states to check, by ordinal (0, 1, ... in enumeration order, duplicates not
   * counted); the others are enumerated but neither built nor checked. Default: every one.
   * `() => false` counts the states of a run cheaply (`candidates` in the result).
   */
  select?: (ordinal: number) => boolean;
  /**
   * Where every subset is enumerated (at most `exhaustiveLimit` unsynced operations), also cross
   * each subset with each tear of one write (family 'torn-subset'). Default false.
   */
  tornSubsets?: boolean;
  /** Called after each crash point with the progress so far. */
  onProgress?: (progress: { point: number; points: number; states: number }) => void;
}

export interface ExploreResult {
  /** States checked. */
  readonly states: number;
  /** Distinct states enumerated (checked or left out by `select`) until the exploration stopped. */
  readonly candidates: number;
  /** Crash points visited. */
  readonly points: number;
  /** Candidate states skipped because an identical one (same acknowledgements) was checked. */
  readonly duplicates: number;
  readonly byFamily: Readonly<Record<CrashFamily, number>>;
  /** True when `maxStates` or `maxViolations` stopped the exploration early. */
  readonly truncated: boolean;
  /** True when every crash point had all subsets of its unsynced operations enumerated. */
  readonly exhaustive: boolean;
  readonly violations: readonly CrashViolation[];
  readonly elapsedMs: number;
}

const MUTATING = new Set<TraceEntry['kind']>(['write', 'writev', 'truncate', 'datasync', 'sync', 'syncDir']);
const SYNCS = new Set<TraceEntry['kind']>(['datasync', 'sync', 'syncDir']);

/** The crash points of a trace, ascending (a point p means: the first p entries ran). */
export function crashPoints(trace: readonly TraceEntry[], mode: 'every-op' | 'syncs' = 'every-op'): number[] {
  const points = new Set<number>([0, trace.length]);
  for (const e of trace) {
    if (e.error !== undefined) continue;
    if (e.kind === 'mark') points.add(e.index + 1);
    else if (mode === 'every-op') {
      if (MUTATING.has(e.kind) || e.changes !== undefined) points.add(e.index + 1);
    } else if (SYNCS.has(e.kind)) {
      points.add(e.index);
      points.add(e.index + 1);
    }
  }
  return [...points].sort((a, b) => a - b);
}

function describeUnit(u: CrashUnit): string {
  if (u.kind === 'write') return `#${u.uid} write ${u.path} @${u.offset ?? 0}+${u.length ?? 0}`;
  if (u.kind === 'truncate') return `#${u.uid} truncate ${u.path} to ${u.size ?? 0}`;
  return `#${u.uid} ${u.kind} ${u.path} (${u.call})`;
}

function toCrashUnit(u: Unit): CrashUnit {
  if (!isFileUnit(u)) return { uid: u.uid, entry: u.entry, kind: u.kind, call: u.call, path: u.path };
  if (u.kind === 'write') {
    return { uid: u.uid, entry: u.entry, kind: 'write', call: 'write', path: u.path, offset: u.offset, length: u.data.length };
  }
  return { uid: u.uid, entry: u.entry, kind: 'truncate', call: 'truncate', path: u.path, size: u.size };
}

/** The tear variants worth trying for one write: every landed prefix when short, a spread when long. */
function tearsOf(unit: FileUnit): Tear[] {
  const sectors = sectorsOf(unit);
  if (sectors < 1) return [];
  const extends_ = unit.offset + unit.data.length > unit.sizeBefore;
  const counts =
    sectors <= 8
      ? Array.from({ length: sectors }, (_, k) => k)
      : [...new Set([0, 1, 2, Math.floor(sectors / 2), sectors - 2, sectors - 1])];
  const tears: Tear[] = [];
  for (const k of counts) {
    if (k > 0) tears.push({ unit, sectors: k, extend: false });
    if (extends_) tears.push({ unit, sectors: k, extend: true });
  }
  return tears;
}

function stateId(point: number, units: readonly Unit[], kept: ReadonlySet<Unit>, tear: Tear | undefined): string {
  const keptIds: string[] = [];
  const droppedIds: string[] = [];
  for (const u of units) {
    if (tear !== undefined && tear.unit === u) continue;
    (kept.has(u) ? keptIds : droppedIds).push(u.uid);
  }
  let id = `p${point}`;
  if (droppedIds.length <= keptIds.length) {
    if (droppedIds.length > 0) id += `-d${droppedIds.join(',')}`;
  } else {
    id += `-k${keptIds.join(',')}`;
  }
  if (tear !== undefined) id += `-t${tear.unit.uid}:${tear.sectors}${tear.extend ? 'x' : ''}`;
  return id;
}

class State implements CrashState {
  readonly id: string;
  readonly point: number;
  readonly family: CrashFamily;
  readonly image: DiskImage;
  readonly #marks: readonly TraceEntry[];
  readonly #markCount: number;
  readonly #units: readonly Unit[];
  readonly #kept: ReadonlySet<Unit>;
  readonly #tear: Tear | undefined;
  readonly #trace: readonly TraceEntry[];

  constructor(
    model: ReplayModel,
    trace: readonly TraceEntry[],
    family: CrashFamily,
    units: readonly Unit[],
    kept: ReadonlySet<Unit>,
    tear: Tear | undefined,
  ) {
    this.point = model.point;
    this.family = family;
    this.#marks = model.marks;
    this.#markCount = model.marks.length;
    this.#units = units;
    this.#kept = kept;
    this.#tear = tear;
    this.#trace = trace;
    this.id = stateId(this.point, units, kept, tear);
    this.image = model.image(kept, tear);
  }

  get acknowledged(): readonly TraceEntry[] {
    return this.#marks.slice(0, this.#markCount);
  }

  get kept(): readonly CrashUnit[] {
    return this.#units.filter((u) => this.#kept.has(u) && u !== this.#tear?.unit).map(toCrashUnit);
  }

  get dropped(): readonly CrashUnit[] {
    return this.#units.filter((u) => !this.#kept.has(u) && u !== this.#tear?.unit).map(toCrashUnit);
  }

  get torn(): CrashTear | null {
    const t = this.#tear;
    return t === undefined ? null : { unit: toCrashUnit(t.unit), sectors: t.sectors, of: sectorsOf(t.unit), extend: t.extend };
  }

  describe(): string {
    const lines: string[] = [];
    const last = this.#trace[this.point - 1];
    lines.push(
      `crash state ${this.id} (family ${this.family}): crash after ${this.point} trace entries` +
        (last === undefined ? ' (before the first)' : `, the last #${last.index} ${last.kind} ${last.label ?? last.path}`),
    );
    const acks = this.acknowledged;
    const lastAck = acks[acks.length - 1];
    lines.push(
      `acknowledged before the crash: ${acks.length} marker(s)` +
        (lastAck === undefined ? '' : `, the last #${lastAck.index} "${lastAck.label ?? ''}"`),
    );
    lines.push(`unsynced at the crash: ${this.#units.length} operation(s)`);
    for (const u of this.#units) {
      const cu = toCrashUnit(u);
      if (this.#tear?.unit === u) {
        const t = this.#tear;
        lines.push(
          `  torn     ${describeUnit(cu)}: ${t.sectors} of ${sectorsOf(t.unit)} sectors landed` +
            (t.extend ? ', size extended over the rest (zeros)' : ''),
        );
      } else {
        lines.push(`  ${this.#kept.has(u) ? 'kept   ' : 'dropped'}  ${describeUnit(cu)}`);
      }
    }
    return lines.join('\n');
  }
}

/** Enumerates the crash states of a recorded run and checks each; see the module header. */
export async function exploreCrashStates(options: ExploreOptions): Promise<ExploreResult> {
  const started = performance.now();
  const trace = options.trace;
  const maxStates = options.maxStates ?? 20_000;
  const exhaustiveLimit = options.exhaustiveLimit ?? 10;
  const samples = options.samplesPerPoint ?? 24;
  const maxViolations = options.maxViolations ?? 10;
  const tornWrites = options.tornWrites ?? true;
  const rng = seededRandom(options.seed ?? 1);
  const model = new ReplayModel(options.initial, trace);
  const points = crashPoints(trace, options.points ?? 'every-op');
  const seen = new Set<string>();
  const byFamily: Record<CrashFamily, number> = { durable: 0, all: 0, 'omit-one': 0, torn: 0, subset: 0, random: 0, 'torn-subset': 0 };
  const select = options.select;
  const tornSubsets = options.tornSubsets ?? false;
  let candidates = 0;
  const violations: CrashViolation[] = [];
  let states = 0;
  let duplicates = 0;
  let truncated = false;
  let exhaustive = true;
  let visited = 0;
  let previous = { epoch: -1, acks: -1, units: 0 };

  /** Checks one candidate; answers false when the exploration must stop. */
  const consider = async (family: CrashFamily, units: readonly Unit[], kept: ReadonlySet<Unit>, tear?: Tear): Promise<boolean> => {
    let key = `${model.epoch}|${model.marks.length}|`;
    for (const u of units) if (kept.has(u) && u !== tear?.unit) key += u.uid + ',';
    if (tear !== undefined) key += `t${tear.unit.uid}:${tear.sectors}${tear.extend ? 'x' : ''}`;
    if (seen.has(key)) {
      duplicates++;
      return true;
    }
    if (states >= maxStates) {
      truncated = true;
      return false;
    }
    seen.add(key);
    const ordinal = candidates++;
    if (select !== undefined && !select(ordinal)) return true;
    const state = new State(model, trace, family, units, kept, tear);
    states++;
    byFamily[family]++;
    try {
      await options.check(state);
    } catch (error) {
      violations.push({ id: state.id, family, point: state.point, description: state.describe(), error });
      if (violations.length >= maxViolations) {
        truncated = true;
        return false;
      }
    }
    return true;
  };

  const visitPoint = async (): Promise<boolean> => {
    const units = model.pending();
    const n = units.length;
    const sameBase = previous.epoch === model.epoch && previous.acks === model.marks.length;
    // Units only accumulate between syncs, so with the same durable state and acknowledgements
    // the first `fresh` units are the previous point's: subsets without a newer one were checked.
    const fresh = sameBase ? Math.min(previous.units, n) : 0;
    previous = { epoch: model.epoch, acks: model.marks.length, units: n };
    const all = new Set(units);
    if (!(await consider('durable', units, new Set()))) return false;
    if (n === 0) return true;
    if (!(await consider('all', units, all))) return false;
    for (const u of units) {
      const kept = new Set(all);
      kept.delete(u);
      if (!(await consider('omit-one', units, kept))) return false;
    }
    if (tornWrites) {
      for (const u of units) {
        if (u.kind !== 'write') continue;
        for (const tear of tearsOf(u)) if (!(await consider('torn', units, all, tear))) return false;
      }
    }
    if (n <= exhaustiveLimit) {
      for (let hi = sameBase ? 1 : 0; hi < 2 ** (n - fresh); hi++) {
        for (let lo = 0; lo < 2 ** fresh; lo++) {
          const mask = lo + hi * 2 ** fresh;
          const kept = new Set<Unit>();
          units.forEach((u, i) => {
            if (Math.floor(mask / 2 ** i) % 2 === 1) kept.add(u);
          });
          if (!(await consider('subset', units, kept))) return false;
          if (tornSubsets && tornWrites) {
            // The torn write is one of the mask's units: it landed in part, the rest of the mask whole.
            for (const u of kept) {
              if (u.kind !== 'write') continue;
              const rest = new Set(kept);
              rest.delete(u);
              for (const tear of tearsOf(u)) if (!(await consider('torn-subset', units, rest, tear))) return false;
            }
          }
        }
      }
    } else {
      exhaustive = false;
      const writes = units.filter((u): u is FileUnit => u.kind === 'write');
      for (let s = 0; s < samples; s++) {
        const kept = new Set(units.filter(() => rng() < 0.5));
        let tear: Tear | undefined;
        if (tornWrites && writes.length > 0 && rng() < 0.33) {
          const w = writes[Math.floor(rng() * writes.length)];
          const tears = w === undefined ? [] : tearsOf(w);
          tear = tears[Math.floor(rng() * tears.length)];
        }
        if (!(await consider('random', units, kept, tear))) return false;
      }
    }
    return true;
  };

  for (const point of points) {
    while (model.point < point) model.step();
    visited++;
    const go = await visitPoint();
    options.onProgress?.({ point, points: points.length, states });
    if (!go) break;
  }
  if (truncated) exhaustive = false;
  return {
    states,
    candidates,
    points: visited,
    duplicates,
    byFamily,
    truncated,
    exhaustive,
    violations,
    elapsedMs: performance.now() - started,
  };
}

/** Rebuilds the crash state with this id (from `exploreCrashStates`) of the same run. */
export function replayCrashState(options: { initial?: DiskImage; trace: readonly TraceEntry[]; id: string }): CrashState {
  const match = /^p(\d+)((?:-[dkt][^-]*)*)$/.exec(options.id);
  if (match === null) throw new TypeError(`not a crash state id: ${options.id}`);
  const point = Number(match[1]);
  if (point > options.trace.length) throw new RangeError(`crash point ${point} is past the trace's end`);
  const model = new ReplayModel(options.initial, options.trace);
  while (model.point < point) model.step();
  const units = model.pending();
  const byUid = new Map(units.map((u) => [u.uid, u] as const));
  const parts = (match[2] ?? '').split('-').filter((p) => p.length > 0);
  let dropped: Set<Unit> | undefined;
  let keptOnly: Set<Unit> | undefined;
  let tear: Tear | undefined;
  const lookup = (uid: string): Unit => {
    const u = byUid.get(uid);
    if (u === undefined) throw new RangeError(`no unsynced operation ${uid} at crash point ${point}`);
    return u;
  };
  for (const part of parts) {
    const body = part.slice(1);
    if (part[0] === 'd') dropped = new Set(body.split(',').map(lookup));
    else if (part[0] === 'k') keptOnly = new Set(body.length === 0 ? [] : body.split(',').map(lookup));
    else {
      const [uid = '', rest = ''] = body.split(':');
      const unit = lookup(uid);
      if (unit.kind !== 'write') throw new RangeError(`operation ${uid} is not a write`);
      tear = { unit, sectors: Number.parseInt(rest, 10), extend: rest.endsWith('x') };
    }
  }
  const kept = new Set<Unit>();
  for (const u of units) {
    if (u === tear?.unit) continue;
    if (keptOnly !== undefined ? keptOnly.has(u) : !(dropped?.has(u) ?? false)) kept.add(u);
  }
  const family: CrashFamily =
    tear !== undefined ? 'torn' : kept.size === units.length ? 'all' : kept.size === 0 ? 'durable' : kept.size === units.length - 1 ? 'omit-one' : 'subset';
  return new State(model, options.trace, family, units, kept, tear);
}
