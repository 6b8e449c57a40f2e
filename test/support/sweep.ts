// The corruption sweep's harness: damages a store's files one way at a time, reopens the store on
// the damaged disk, reads everything back and classes what it answered.
//
// Owns: the damage kinds (`Damage`), the choice of damages for a store (`planDamages`: every file,
// its structural positions first, then seeded positions spread over it), the outcome classes and
// the oracle (`classify`), the run loop (`sweepStore`) and the printed summary (`formatSummary`).
// Guarantees: deterministic (every choice comes from a seeded generator, the disk is in memory);
// each damaged state starts from a copy of the golden image sharing every undamaged file's bytes;
// an answer is "exact" only when every key of the acknowledged state is read back with the same
// value and no other key is; a read of more than READ_BOUND bytes in one call, or array buffers
// growing past MEMORY_BOUND, is "unbounded"; a state that does not answer in STATE_TIMEOUT_MS is
// "hung". The stores themselves are described by `SweepSubject`s (test/support/sweep-stores*.ts).

import * as posix from 'node:path/posix';
import { MemoryFs, type DiskImage } from '../../lib/fs/memory.js';
import type { FileHandle, FileSystem, OpenMode } from '../../lib/fs/types.js';
import { SeglogError } from '../../lib/errors.js';
import { HostStoreError } from '../../lib/host/errors.js';
import { seededRandom } from '../../lib/crash/determinism.js';

/** What is done to one file. `at` is a byte offset (for 'extend': the number of bytes added). */
export type DamageKind = 'byte-flip' | 'bit-flip' | 'len-max' | 'truncate' | 'extend' | 'delete';
export const DAMAGE_KINDS: readonly DamageKind[] = ['byte-flip', 'bit-flip', 'len-max', 'truncate', 'extend', 'delete'];

export interface Damage {
  file: string;
  kind: DamageKind;
  at: number;
  /** bit-flip: which bit of the byte (0..7). */
  bit?: number;
}

/**
 * detected: the typed CORRUPT the oracle asks for; exact: the acknowledged state, nothing more or
 * less; indistinguishable: a deleted file whose absence is a state the store's format allows (a
 * standalone cell never written, a holder set emptied, a payload without holders collected),
 * served exactly as that state — the disk is then one the store's own API could have left, so no
 * store can tell it from the acknowledged one; served-stale: every acknowledged key came back but some with another value (an older one,
 * damaged bytes) or keys that were removed came back; lost: an acknowledged key is missing;
 * wrong-code: a typed error other than CORRUPT; untyped: anything thrown that is not a SeglogError
 * (for the host store: not a HostStoreError with one of its six codes); unbounded: memory driven by
 * a length on disk; hung: no answer in time.
 */
export type Outcome = 'detected' | 'exact' | 'indistinguishable' | 'served-stale' | 'lost' | 'wrong-code' | 'untyped' | 'unbounded' | 'hung';
export const OUTCOMES: readonly Outcome[] = ['detected', 'exact', 'indistinguishable', 'served-stale', 'lost', 'wrong-code', 'untyped', 'unbounded', 'hung'];
export const GOOD_OUTCOMES: ReadonlySet<Outcome> = new Set(['detected', 'exact', 'indistinguishable']);

/** What a store reads back: one string per key (a record, a row, a head, a cell value, a counter). */
export type Observed = Map<string, string>;

/** A store as the sweep sees it. */
export interface SweepSubject {
  /** The store's name in the report: 'segmented-log', 'cell', 'host-fs', 'raft-node', 'payloads'. */
  readonly store: string;
  /** Writes the golden state and closes the store cleanly (so everything written is acknowledged). */
  build(): Promise<{ image: DiskImage; acknowledged: Observed }>;
  /** The file kind of a path of the golden image, or null for a file the sweep leaves alone. */
  fileKind(path: string): string | null;
  /** Offsets of the file worth damaging first (headers, length fields, checksums, slots, last record). */
  hints(path: string, bytes: Uint8Array): number[];
  /** Opens the store over `fs`, reads everything, closes; throws what the store threw. */
  observe(fs: FileSystem): Promise<Observed>;
  /**
   * For a file whose absence is a state the format allows: the state the store must then serve
   * (the acknowledged one without what that file held); null (or no method) when a missing file
   * must be CORRUPT.
   */
  absentState?(path: string, acknowledged: Observed): Observed | null;
  /** 'host' when errors must be HostStoreErrors and CORRUPT arrives as UNAVAILABLE's cause. */
  readonly errors: 'seglog' | 'host';
}

export interface StateResult {
  store: string;
  fileKind: string;
  damage: Damage;
  outcome: Outcome;
  /** For anything but detected/exact: what was served against what was acknowledged, or the error. */
  detail: string;
  /** The state was opened a second time (its first open changed the damaged file or its directory). */
  reopened: boolean;
}

/** One call's read buffer larger than this is memory sized by a length on disk. */
export const READ_BOUND = 64 * 1024 * 1024;
/** Array buffers of the process above this after a state: memory sized by a length on disk. */
export const MEMORY_BOUND = 1024 * 1024 * 1024;
export const STATE_TIMEOUT_MS = 20_000;

// ---------------------------------------------------------------------------------------------
// Deterministic choices.

/** A small seeded generator (the crash runner's mulberry32). */
export const rng = seededRandom;

function seedOf(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return h >>> 0;
}

/** The structural damages of one file: at its hints and its first and last bytes. */
function essentialDamages(file: string, bytes: Uint8Array, hints: readonly number[]): Damage[] {
  const size = bytes.length;
  const out: Damage[] = [{ file, kind: 'delete', at: 0 }];
  if (size === 0) return [...out, { file, kind: 'extend', at: 1 }, { file, kind: 'extend', at: 4096 }];
  const at = new Set<number>();
  for (const h of hints) if (h >= 0 && h < size) at.add(h);
  for (let i = 0; i < Math.min(size, 16); i++) at.add(i);
  for (let i = Math.max(0, size - 8); i < size; i++) at.add(i);
  const positions = [...at].sort((a, b) => a - b);
  for (const p of positions) {
    out.push({ file, kind: 'byte-flip', at: p });
    out.push({ file, kind: 'bit-flip', at: p, bit: p % 8 });
  }
  for (const h of new Set(hints)) if (h >= 0 && h + 4 <= size) out.push({ file, kind: 'len-max', at: h });
  const cuts = new Set<number>([0, 1, size - 1, Math.floor(size / 2)]);
  for (const h of hints) if (h > 0 && h < size) cuts.add(h);
  for (const c of cuts) if (c >= 0 && c < size) out.push({ file, kind: 'truncate', at: c });
  out.push({ file, kind: 'extend', at: 1 }, { file, kind: 'extend', at: 17 }, { file, kind: 'extend', at: 4096 });
  return out;
}

/** A damage at a seeded random position of one file. */
function randomDamage(file: string, size: number, next: () => number): Damage {
  const kinds: DamageKind[] = size === 0 ? ['extend'] : ['byte-flip', 'bit-flip', 'bit-flip', 'byte-flip', 'len-max', 'truncate', 'extend'];
  const kind = kinds[Math.floor(next() * kinds.length)]!;
  if (kind === 'extend') return { file, kind, at: 1 + Math.floor(next() * 600) };
  const at = Math.floor(next() * size);
  return kind === 'bit-flip' ? { file, kind, at, bit: Math.floor(next() * 8) } : { file, kind, at };
}

function damageKey(d: Damage): string {
  return `${d.file}|${d.kind}|${d.at}|${d.bit ?? ''}`;
}

function sweptFiles(subject: SweepSubject, image: DiskImage): string[] {
  return Object.keys(image.files)
    .filter((f) => subject.fileKind(f) !== null)
    .sort();
}

/** The structural damages of every swept file of `image` (before any seeded random one). */
export function structuralDamages(subject: SweepSubject, image: DiskImage): Damage[] {
  const out: Damage[] = [];
  for (const f of sweptFiles(subject, image)) out.push(...essentialDamages(f, image.files[f]!, subject.hints(f, image.files[f]!)));
  return out;
}

/**
 * About `budget` damages over the swept files of `image`: the structural ones of every file first
 * (sampled evenly when they alone exceed the budget), then seeded random positions, spread over the
 * files in proportion to the square root of their sizes, so small files are not starved.
 */
export function planDamages(subject: SweepSubject, image: DiskImage, budget: number): Damage[] {
  const files = sweptFiles(subject, image);
  const essentials = structuralDamages(subject, image);
  const seen = new Set<string>();
  const chosen: Damage[] = [];
  const take = (d: Damage): void => {
    const key = damageKey(d);
    if (seen.has(key)) return;
    seen.add(key);
    chosen.push(d);
  };
  if (essentials.length > budget) {
    // Deletions of every file always; the rest evenly.
    for (const d of essentials) if (d.kind === 'delete') take(d);
    const rest = essentials.filter((d) => d.kind !== 'delete');
    const room = Math.max(0, budget - chosen.length);
    for (let k = 0; k < room; k++) take(rest[Math.floor((k * rest.length) / room)]!);
    return chosen;
  }
  for (const d of essentials) take(d);
  const next = rng(seedOf(subject.store));
  const weights = files.map((f) => Math.sqrt(image.files[f]!.length + 64));
  const total = weights.reduce((a, b) => a + b, 0);
  let guard = 0;
  while (chosen.length < budget && guard++ < budget * 20) {
    let pick = next() * total;
    let k = 0;
    while (k < files.length - 1 && pick >= weights[k]!) pick -= weights[k++]!;
    const f = files[k]!;
    take(randomDamage(f, image.files[f]!.length, next));
  }
  return chosen;
}

/** The golden image with one damage applied (every other file's bytes shared). */
export function applyDamage(image: DiskImage, d: Damage): DiskImage {
  const files: Record<string, Uint8Array> = { ...image.files };
  const old = image.files[d.file]!;
  switch (d.kind) {
    case 'delete':
      delete files[d.file];
      break;
    case 'truncate':
      files[d.file] = old.slice(0, d.at);
      break;
    case 'extend': {
      const grown = new Uint8Array(old.length + d.at);
      grown.set(old);
      // Garbage that is not zeros: what a device or another writer might leave.
      for (let i = old.length; i < grown.length; i++) grown[i] = (i * 131 + 7) & 0xff;
      files[d.file] = grown;
      break;
    }
    case 'byte-flip':
    case 'bit-flip':
    case 'len-max': {
      const bytes = Uint8Array.from(old);
      if (d.kind === 'byte-flip') bytes[d.at] = bytes[d.at]! ^ 0xff;
      else if (d.kind === 'bit-flip') bytes[d.at] = bytes[d.at]! ^ (1 << (d.bit ?? 0));
      else for (let i = d.at; i < Math.min(bytes.length, d.at + 4); i++) bytes[i] = 0xff;
      files[d.file] = bytes;
      break;
    }
  }
  return { dirs: image.dirs ?? [], files };
}

export function describeDamage(d: Damage): string {
  if (d.kind === 'delete') return `delete ${d.file}`;
  if (d.kind === 'extend') return `extend ${d.file} by ${d.at} bytes`;
  if (d.kind === 'truncate') return `truncate ${d.file} to ${d.at} bytes`;
  if (d.kind === 'bit-flip') return `flip bit ${d.bit} of byte ${d.at} of ${d.file}`;
  if (d.kind === 'len-max') return `0xFFFFFFFF at byte ${d.at} of ${d.file}`;
  return `flip byte ${d.at} of ${d.file}`;
}

// ---------------------------------------------------------------------------------------------
// The oracle.

/** The codes in the cause chain of `err`, outermost first. */
export function codeChain(err: unknown): string[] {
  const out: string[] = [];
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof SeglogError) out.push(e.code);
    else out.push(`untyped ${e instanceof Error ? e.name : typeof e}`);
  }
  return out;
}

const HOST_CODES = new Set(['CONFLICT', 'FENCED_OUT', 'INDETERMINATE', 'INVALID', 'UNAVAILABLE', 'HELD']);

/** The outcome of a store that threw `err`. */
export function classifyError(err: unknown, errors: 'seglog' | 'host'): { outcome: Outcome; detail: string } {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 8; e = (e as { cause?: unknown }).cause, depth++) {
    if (e instanceof BoundError) return { outcome: 'unbounded', detail: e.message };
  }
  if (err instanceof HangError) return { outcome: 'hung', detail: err.message };
  const message = err instanceof Error ? err.message.slice(0, 300) : String(err);
  const chain = codeChain(err);
  const detail = `threw [${chain.join(' <- ')}] ${message}`;
  if (!(err instanceof SeglogError)) return { outcome: 'untyped', detail };
  if (errors === 'host') {
    if (!(err instanceof HostStoreError) || !HOST_CODES.has(err.code)) return { outcome: 'untyped', detail };
    return err.code === 'UNAVAILABLE' && chain.slice(1).includes('CORRUPT') ? { outcome: 'detected', detail: '' } : { outcome: 'wrong-code', detail };
  }
  return chain.includes('CORRUPT') ? { outcome: 'detected', detail: '' } : { outcome: 'wrong-code', detail };
}

/** Compares what was read back with the acknowledged state. */
export function compareObserved(acknowledged: Observed, got: Observed): { outcome: Outcome; detail: string } {
  const missing: string[] = [];
  const changed: string[] = [];
  const extra: string[] = [];
  for (const [k, v] of acknowledged) {
    const g = got.get(k);
    if (g === undefined) missing.push(`${k}: acknowledged ${v}, not served`);
    else if (g !== v) changed.push(`${k}: acknowledged ${v}, served ${g}`);
  }
  for (const [k, v] of got) if (!acknowledged.has(k)) extra.push(`${k}: not acknowledged, served ${v}`);
  if (missing.length + changed.length + extra.length === 0) return { outcome: 'exact', detail: '' };
  const parts = [...changed, ...missing, ...extra];
  const more = parts.length > 4 ? ` (+${parts.length - 4} more)` : '';
  return { outcome: missing.length > 0 ? 'lost' : 'served-stale', detail: parts.slice(0, 4).join('; ') + more };
}

// ---------------------------------------------------------------------------------------------
// Bounded memory and time.

class BoundError extends Error {}
class HangError extends Error {}

const MUTATING_HANDLE_CALLS = new Set<PropertyKey>(['write', 'writev', 'truncate']);
const MUTATING_FS_CALLS = new Set<PropertyKey>(['rename', 'link', 'unlink', 'mkdir', 'rmdir']);

/** What a store changed through `boundedFs`: files written or truncated, and directory entries. */
export interface Touched {
  /** Files written or truncated. */
  data: Set<string>;
  /** Paths created, renamed (both), linked (both), removed. */
  entries: Set<string>;
}

/**
 * `fs` with every handle's reads checked against READ_BOUND, and every call that changes
 * something noted in `touched`.
 */
export function boundedFs(fs: FileSystem, touched: Touched = { data: new Set(), entries: new Set() }): FileSystem {
  const check = (into: Uint8Array, path: string): void => {
    if (into.length > READ_BOUND) throw new BoundError(`a read of ${into.length} bytes from ${path}`);
  };
  const wrap = (h: FileHandle): FileHandle =>
    new Proxy(h, {
      get(target, key, receiver) {
        if (key === 'read') {
          return async (into: Uint8Array, position: number) => {
            check(into, target.path);
            return target.read(into, position);
          };
        }
        if (MUTATING_HANDLE_CALLS.has(key)) touched.data.add(target.path);
        const v: unknown = Reflect.get(target, key, receiver);
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  return new Proxy(fs, {
    get(target, key, receiver) {
      if (key === 'open') return async (p: string, mode: OpenMode) => wrap(await target.open(p, mode));
      const v: unknown = Reflect.get(target, key, receiver);
      if (typeof v !== 'function') return v;
      const call = (v as (...a: unknown[]) => unknown).bind(target);
      if (!MUTATING_FS_CALLS.has(key)) return call;
      return (...args: unknown[]) => {
        for (const a of args) if (typeof a === 'string') touched.entries.add(a);
        return call(...args);
      };
    },
  });
}

async function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new HangError(`no answer in ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** One open and read-back of a damaged state, classed. */
async function observeOnce(subject: SweepSubject, fs: FileSystem, acknowledged: Observed, d: Damage): Promise<{ outcome: Outcome; detail: string }> {
  try {
    const got = await withTimeout(subject.observe(fs), STATE_TIMEOUT_MS, describeDamage(d));
    const verdict = compareObserved(acknowledged, got);
    const absent = d.kind === 'delete' && verdict.outcome !== 'exact' ? (subject.absentState?.(d.file, acknowledged) ?? null) : null;
    if (absent !== null && compareObserved(absent, got).outcome === 'exact') return { outcome: 'indistinguishable', detail: '' };
    return verdict;
  } catch (err) {
    return classifyError(err, subject.errors);
  }
}

/**
 * Opens, reads and classes one damaged state. A state that served the acknowledged state while
 * its open wrote the damaged file, or created, renamed or removed an entry beside it (repaired,
 * rebuilt, cut, removed something), is opened a second time on the disk that open left: a repair
 * that destroyed durable data while the first open still served it shows there.
 */
export async function runState(subject: SweepSubject, image: DiskImage, acknowledged: Observed, d: Damage): Promise<StateResult> {
  const fileKind = subject.fileKind(d.file) ?? '?';
  const touched: Touched = { data: new Set(), entries: new Set() };
  const fs = boundedFs(new MemoryFs({ image: applyDamage(image, d), trace: false }), touched);
  let verdict = await observeOnce(subject, fs, acknowledged, d);
  const dir = posix.dirname(d.file);
  const repaired = touched.data.has(d.file) || [...touched.entries].some((p) => p === d.file || posix.dirname(p) === dir);
  const reopened = repaired && (verdict.outcome === 'exact' || verdict.outcome === 'indistinguishable');
  if (reopened) {
    const again = await observeOnce(subject, fs, acknowledged, d);
    if (again.outcome !== verdict.outcome && again.outcome !== 'detected') verdict = { outcome: again.outcome, detail: `on the second open: ${again.detail}` };
  }
  const buffers = process.memoryUsage().arrayBuffers;
  if (buffers > MEMORY_BOUND) verdict = { outcome: 'unbounded', detail: `array buffers at ${buffers} bytes after the state` };
  return { store: subject.store, fileKind, damage: d, ...verdict, reopened };
}

export interface StoreSweep {
  store: string;
  /** The golden image the damages were applied to. */
  image: DiskImage;
  /** How many structural damages the store's files have (all of them run when the budget allows). */
  structural: number;
  results: StateResult[];
  ms: number;
}

/** Builds the golden state, checks that an undamaged reopen serves it exactly, then sweeps. */
export async function sweepStore(subject: SweepSubject, budget: number): Promise<StoreSweep> {
  const started = performance.now();
  const { image, acknowledged } = await subject.build();
  const clean = compareObserved(acknowledged, await subject.observe(new MemoryFs({ image, trace: false })));
  if (clean.outcome !== 'exact') throw new Error(`${subject.store}: the undamaged golden state does not read back as acknowledged: ${clean.detail}`);
  const results: StateResult[] = [];
  for (const d of planDamages(subject, image, budget)) results.push(await runState(subject, image, acknowledged, d));
  return { store: subject.store, image, structural: structuralDamages(subject, image).length, results, ms: performance.now() - started };
}

// ---------------------------------------------------------------------------------------------
// The report.

/** The summary: one line per store and file kind with a count per outcome, then the totals. */
export function formatSummary(sweeps: readonly StoreSweep[]): string {
  const lines: string[] = [];
  const total = new Map<Outcome, number>(OUTCOMES.map((o) => [o, 0]));
  let states = 0;
  let ms = 0;
  for (const s of sweeps) {
    ms += s.ms;
    const byKind = new Map<string, Map<Outcome, number>>();
    for (const r of s.results) {
      const counts = byKind.get(r.fileKind) ?? new Map<Outcome, number>();
      counts.set(r.outcome, (counts.get(r.outcome) ?? 0) + 1);
      byKind.set(r.fileKind, counts);
      total.set(r.outcome, total.get(r.outcome)! + 1);
      states++;
    }
    for (const [kind, counts] of [...byKind].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
      const n = [...counts.values()].reduce((a, b) => a + b, 0);
      const parts = OUTCOMES.filter((o) => counts.has(o)).map((o) => `${o} ${counts.get(o)}`);
      lines.push(`  ${s.store} / ${kind}: ${n} states: ${parts.join(', ')}`);
    }
    const reopened = s.results.filter((r) => r.reopened).length;
    lines.push(`  ${s.store}: ${s.results.length} states (of ${s.structural} structural damages, ${Math.min(s.structural, s.results.length)} run; ${reopened} opened twice) in ${(s.ms / 1000).toFixed(1)} s`);
  }
  const head = `corruption sweep: ${states} damaged states in ${(ms / 1000).toFixed(1)} s: ${OUTCOMES.map((o) => `${o} ${total.get(o)}`).join(', ')}`;
  return [head, ...lines].join('\n');
}

export function formatFinding(r: StateResult): string {
  return `${r.outcome}: ${r.store} / ${r.fileKind}: ${describeDamage(r.damage)}: ${r.detail}`;
}
