// FaultyFs: a FileSystem wrapper that fails, stalls or kills chosen calls, for tests.
//
// Owns: fault rules (fail the Nth, every, or a predicate-chosen call of a kind on a path pattern
// with EIO, ENOSPC or any errno, optionally after writing a prefix of the bytes: a short write),
// pauses (hold matching calls until released: a stalled commit), `sever()` (a process kill), and
// per-kind call counters. Guarantees:
// - A failed call never reaches the inner file system, except a short write, which writes exactly
//   the chosen prefix of its bytes (at the call's position) before it throws.
// - After `sever()`, every call through this layer or a handle it opened rejects with 'ESEVERED'
//   (closing a handle resolves: it is already closed), held calls reject without running, every
//   inner handle is closed (so its locks are released), and nothing issued after the cut reaches
//   the inner file system. A call already running in the inner layer at the cut may still land
//   there (as a real write in the kernel would), but its caller sees 'ESEVERED'; `sever()`
//   resolves only once every such call has settled, so that after it nothing more of the dead
//   process lands (as after a real process's death).
// - Rules are checked in the order they were added; the first that picks a call fails it.

import * as posix from 'node:path/posix';
import type { DirEntry, EntryStat, FileHandle, FileStat, FileSystem, OpenMode, SyncWhere } from './types.js';
import { listEntries } from './own-entry.js';
import { errnoError, type FsCallKind } from './memory.js';

/** A path pattern: an exact path, a trailing part after a '/' ('seg' matches '/d/seg'), a glob
 * with '*' (matches any characters, '/' included), a RegExp, or a predicate. */
export type PathPattern = string | RegExp | ((path: string) => boolean);

/** What a rule or a pause sees of a call. */
export interface FaultCall {
  readonly kind: FsCallKind;
  readonly path: string;
  /** rename/link: the destination. */
  readonly to?: string;
  /** write/writev/read: the position and byte count. */
  readonly position?: number;
  readonly length?: number;
  /** 1-based count of calls of this kind through this layer so far, this one included. */
  readonly count: number;
}

export interface FaultRule {
  /** The kind(s) of call the rule applies to; '*' for all. */
  kind: FsCallKind | readonly FsCallKind[] | '*';
  /** Only calls whose path (or destination) matches. Default: any path. */
  path?: PathPattern;
  /** Only calls this predicate picks. */
  when?: (call: FaultCall) => boolean;
  /** Fail the nth matching call (1-based). The default when neither `every` nor `when` is set: 1. */
  nth?: number;
  /** Fail every matching call (the default when `when` is set and `nth` is not). */
  every?: boolean;
  /** Stop after this many failures (default: 1 with `nth`, unlimited otherwise). */
  times?: number;
  /** The errno (default 'EIO'; 'ENOSPC' for a short write). */
  error?: string;
  /** write/writev: write this many leading bytes to the inner layer first, then fail. */
  shortWrite?: number;
}

/** A rule once added: how often it fired; `remove()` disarms it. */
export interface Fault {
  readonly hits: number;
  remove(): void;
}

/** Calls held by `pause` until `release()`. */
export interface Pause {
  /** Resolves with the first call the pause holds. */
  readonly reached: Promise<FaultCall>;
  /** How many calls are held now. */
  readonly held: number;
  /** Lets the held calls (and later ones) through. */
  release(): void;
}

const ALL_KINDS: readonly FsCallKind[] = [
  'open', 'close', 'read', 'write', 'writev', 'datasync', 'sync', 'truncate', 'size', 'lock', 'unlock',
  'readdir', 'mkdir', 'rename', 'link', 'unlink', 'rmdir', 'stat', 'lstat', 'syncDir',
];

/** True when `p` matches `pattern` (see PathPattern). */
export function matchPath(pattern: PathPattern, p: string): boolean {
  if (typeof pattern === 'function') return pattern(p);
  if (pattern instanceof RegExp) return pattern.test(p);
  if (pattern.includes('*')) {
    const source = pattern.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*');
    return new RegExp(`^${source}$`).test(p) || new RegExp(`/${source}$`).test(p);
  }
  return p === pattern || p.endsWith('/' + pattern) || posix.normalize(p) === posix.normalize(pattern);
}

class ActiveRule implements Fault {
  readonly rule: FaultRule;
  readonly kinds: ReadonlySet<FsCallKind>;
  matched = 0;
  hits = 0;
  removed = false;

  constructor(rule: FaultRule) {
    this.rule = rule;
    this.kinds = new Set(rule.kind === '*' ? ALL_KINDS : typeof rule.kind === 'string' ? [rule.kind] : rule.kind);
  }

  remove(): void {
    this.removed = true;
  }

  /** Counts the call if it matches; answers whether this rule fails it. */
  picks(call: FaultCall): boolean {
    const r = this.rule;
    if (this.removed || !this.kinds.has(call.kind)) return false;
    if (r.path !== undefined && !matchPath(r.path, call.path) && !(call.to !== undefined && matchPath(r.path, call.to))) {
      return false;
    }
    if (r.when !== undefined && !r.when(call)) return false;
    this.matched++;
    const every = r.every ?? (r.when !== undefined && r.nth === undefined);
    const limit = r.times ?? (every ? Infinity : 1);
    if (this.hits >= limit) return false;
    // From the nth match on, fail until the limit is spent (nth mode: `times` calls in a row).
    if (this.matched < (r.nth ?? 1)) return false;
    this.hits++;
    return true;
  }
}

class ActivePause implements Pause {
  readonly kinds: ReadonlySet<FsCallKind>;
  readonly pattern: PathPattern | undefined;
  readonly reached: Promise<FaultCall>;
  #reach!: (call: FaultCall) => void;
  #waiters: { resolve(): void; reject(err: unknown): void }[] = [];
  #released = false;
  readonly #onRelease: (pause: ActivePause) => void;

  constructor(kind: FsCallKind | readonly FsCallKind[] | '*', pattern: PathPattern | undefined, onRelease: (p: ActivePause) => void) {
    this.kinds = new Set(kind === '*' ? ALL_KINDS : typeof kind === 'string' ? [kind] : kind);
    this.pattern = pattern;
    this.#onRelease = onRelease;
    this.reached = new Promise((resolve) => {
      this.#reach = resolve;
    });
  }

  get held(): number {
    return this.#waiters.length;
  }

  matches(call: FaultCall): boolean {
    if (this.#released || !this.kinds.has(call.kind)) return false;
    return this.pattern === undefined || matchPath(this.pattern, call.path) || (call.to !== undefined && matchPath(this.pattern, call.to));
  }

  hold(call: FaultCall): Promise<void> {
    this.#reach(call);
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.#onRelease(this);
    for (const w of this.#waiters.splice(0)) w.resolve();
  }

  kill(err: unknown): void {
    this.#released = true;
    for (const w of this.#waiters.splice(0)) w.reject(err);
  }
}

/** Wraps a FileSystem and injects faults; see the module header. */
export class FaultyFs implements FileSystem {
  readonly inner: FileSystem;
  /** Calls per kind that reached this layer (failed, held and severed ones included). */
  readonly calls: Record<FsCallKind, number>;
  /** Calls failed on purpose so far. */
  failures = 0;
  #rules: ActiveRule[] = [];
  #pauses: ActivePause[] = [];
  #severed = false;
  readonly #handles = new Set<FaultyHandle>();
  /** Calls running in the inner layer now (a sever waits for them). */
  readonly #running = new Set<Promise<unknown>>();

  constructor(inner: FileSystem) {
    this.inner = inner;
    this.calls = Object.fromEntries(ALL_KINDS.map((k) => [k, 0])) as Record<FsCallKind, number>;
  }

  /** Adds a fault rule. */
  fail(rule: FaultRule): Fault {
    const active = new ActiveRule(rule);
    this.#rules.push(active);
    return active;
  }

  /** Removes every rule (pauses stay). */
  clearFaults(): void {
    for (const r of this.#rules) r.remove();
    this.#rules = [];
  }

  /** Holds calls of `kind` on paths matching `path` until the pause (or this layer) is released. */
  pause(kind: FsCallKind | readonly FsCallKind[] | '*', path?: PathPattern): Pause {
    const pause = new ActivePause(kind, path, (p) => {
      this.#pauses = this.#pauses.filter((q) => q !== p);
    });
    this.#pauses.push(pause);
    return pause;
  }

  /** Releases every pause. */
  release(): void {
    for (const p of [...this.#pauses]) p.release();
  }

  /** Kills the process this layer stands for; see the module header. Resolves once inner handles are closed. */
  async sever(): Promise<void> {
    if (this.#severed) return;
    this.#severed = true;
    for (const p of this.#pauses.splice(0)) p.kill(errnoError('ESEVERED', 'held', '', 'the process was killed'));
    const handles = [...this.#handles];
    this.#handles.clear();
    await Promise.allSettled([...this.#running]);
    await Promise.all(handles.map((h) => h.die()));
  }

  get severed(): boolean {
    return this.#severed;
  }

  /** @internal: runs one call through counters, pauses, rules and the sever check. */
  async run<T>(
    call: Omit<FaultCall, 'count'>,
    op: () => Promise<T>,
    shortWrite?: (bytes: number) => Promise<void>,
  ): Promise<T> {
    const full: FaultCall = { ...call, count: ++this.calls[call.kind] };
    if (this.#severed) throw errnoError('ESEVERED', call.kind, call.path);
    for (const pause of this.#pauses) {
      if (pause.matches(full)) await pause.hold(full);
    }
    if (this.#severed) throw errnoError('ESEVERED', call.kind, call.path);
    for (const rule of this.#rules) {
      if (!rule.picks(full)) continue;
      this.failures++;
      const r = rule.rule;
      if (r.shortWrite !== undefined && shortWrite !== undefined) {
        await shortWrite(Math.max(0, Math.min(r.shortWrite, full.length ?? 0)));
      }
      throw errnoError(r.error ?? (r.shortWrite !== undefined ? 'ENOSPC' : 'EIO'), call.kind, call.path, 'injected');
    }
    const running = op();
    this.#running.add(running);
    let result: T;
    try {
      result = await running;
    } finally {
      this.#running.delete(running);
    }
    if (this.#severed) throw errnoError('ESEVERED', call.kind, call.path);
    return result;
  }

  /** @internal */
  forget(handle: FaultyHandle): void {
    this.#handles.delete(handle);
  }

  async open(path: string, mode: OpenMode): Promise<FileHandle> {
    const inner = await this.run({ kind: 'open', path }, () => this.inner.open(path, mode));
    if (this.#severed) {
      await inner.close().catch(() => undefined);
      throw errnoError('ESEVERED', 'open', path);
    }
    const handle = new FaultyHandle(this, inner);
    this.#handles.add(handle);
    return handle;
  }

  readdir(dir: string): Promise<string[]> {
    return this.run({ kind: 'readdir', path: dir }, () => this.inner.readdir(dir));
  }

  /** Counted and faulted as a `readdir`; a layer under it without the call answers it by lstats. */
  readdirEntries(dir: string): Promise<DirEntry[]> {
    return this.run({ kind: 'readdir', path: dir }, () => listEntries(this.inner, dir));
  }

  mkdir(dir: string): Promise<void> {
    return this.run({ kind: 'mkdir', path: dir }, () => this.inner.mkdir(dir));
  }

  rename(from: string, to: string): Promise<void> {
    return this.run({ kind: 'rename', path: from, to }, () => this.inner.rename(from, to));
  }

  link(from: string, to: string): Promise<void> {
    return this.run({ kind: 'link', path: from, to }, () => this.inner.link(from, to));
  }

  unlink(path: string): Promise<void> {
    return this.run({ kind: 'unlink', path }, () => this.inner.unlink(path));
  }

  rmdir(dir: string): Promise<void> {
    return this.run({ kind: 'rmdir', path: dir }, () => this.inner.rmdir(dir));
  }

  stat(path: string): Promise<FileStat | null> {
    return this.run({ kind: 'stat', path }, () => this.inner.stat(path));
  }

  lstat(path: string): Promise<EntryStat | null> {
    return this.run({ kind: 'lstat', path }, () => this.inner.lstat(path));
  }

  syncDir(dir: string): Promise<void> {
    return this.run({ kind: 'syncDir', path: dir }, () => this.inner.syncDir(dir));
  }
}

/** The leading `bytes` bytes of `chunks`, as chunks. */
function prefixOf(chunks: readonly Uint8Array[], bytes: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  let left = bytes;
  for (const c of chunks) {
    if (left <= 0) break;
    out.push(c.length <= left ? c : c.subarray(0, left));
    left -= c.length;
  }
  return out;
}

class FaultyHandle implements FileHandle {
  readonly #fs: FaultyFs;
  readonly #inner: FileHandle;
  #closed = false;

  constructor(fs: FaultyFs, inner: FileHandle) {
    this.#fs = fs;
    this.#inner = inner;
  }

  get path(): string {
    return this.#inner.path;
  }

  async die(): Promise<void> {
    this.#closed = true;
    await this.#inner.close().catch(() => undefined);
  }

  read(into: Uint8Array, position: number, where?: SyncWhere): Promise<number> {
    return this.#fs.run({ kind: 'read', path: this.path, position, length: into.length }, () => this.#inner.read(into, position, where));
  }

  readv(into: readonly Uint8Array[], position: number): Promise<number> {
    let length = 0;
    for (const b of into) length += b.length;
    return this.#fs.run({ kind: 'read', path: this.path, position, length }, () => this.#inner.readv(into, position));
  }

  write(data: Uint8Array, position: number): Promise<void> {
    return this.#fs.run(
      { kind: 'write', path: this.path, position, length: data.length },
      () => this.#inner.write(data, position),
      async (n) => {
        if (n > 0) await this.#inner.write(data.subarray(0, n), position);
      },
    );
  }

  writev(chunks: readonly Uint8Array[], position: number, where?: SyncWhere): Promise<void> {
    let length = 0;
    for (const c of chunks) length += c.length;
    return this.#fs.run(
      { kind: 'writev', path: this.path, position, length },
      () => this.#inner.writev(chunks, position, where),
      async (n) => {
        if (n > 0) await this.#inner.writev(prefixOf(chunks, n), position, where);
      },
    );
  }

  datasync(where?: SyncWhere): Promise<void> {
    return this.#fs.run({ kind: 'datasync', path: this.path }, () => this.#inner.datasync(where));
  }

  sync(): Promise<void> {
    return this.#fs.run({ kind: 'sync', path: this.path }, () => this.#inner.sync());
  }

  truncate(size: number): Promise<void> {
    return this.#fs.run({ kind: 'truncate', path: this.path, length: size }, () => this.#inner.truncate(size));
  }

  size(): Promise<number> {
    return this.#fs.run({ kind: 'size', path: this.path }, () => this.#inner.size());
  }

  tryLock(): Promise<boolean> {
    return this.#fs.run({ kind: 'lock', path: this.path }, () => this.#inner.tryLock());
  }

  unlock(): Promise<void> {
    return this.#fs.run({ kind: 'unlock', path: this.path }, () => this.#inner.unlock());
  }

  async close(): Promise<void> {
    if (this.#closed || this.#fs.severed) return;
    await this.#fs.run({ kind: 'close', path: this.path }, async () => {
      this.#closed = true;
      this.#fs.forget(this);
      await this.#inner.close();
    });
  }
}
