// Host store: the in-memory reference store.
//
// Owns: `MemoryHostRealm` (one realm's state: scopes, the fence) and `MemoryHostStore` (one
// process's handle over a realm). It is the store the conformance suite is validated against, and
// a test double for users of the SPI. Guarantees: all nine obligations (docs/contracts/host-store.md, section 6), with 4 and 5
// met at commit (CONFLICT, FENCED_OUT); each commit's commit point is one synchronous step that
// checks and applies the whole batch, so no load ever sees part of a batch; leases run on the
// realm's clock (`options.clock`); a killed handle's in-flight commit lands wholly or never.
// It is not durable across the process (nothing is on disk): "durable" means "in the realm".
// See docs/host-store.md for the argument per obligation.

import { assert, isIndex } from '../assert.js';
import { monotonicClock, type Clock } from '../clock.js';
import { CommitBatch } from './batch.js';
import { HostStoreError } from './errors.js';
import { checkScopeKind, checkScopeName, checkScopeRef, compareNames, scopeKey } from './names.js';
import { FenceTiming } from './timing.js';
import type { AcquireMode, FenceGrant, HeadPage, HostStore, Row, ScopeKind, ScopeRef, VersionedHead } from './types.js';
import { SCOPE_KINDS, ScopeVersion } from './types.js';

/** Options of a memory realm. */
export interface MemoryHostRealmOptions {
  /** The realm's own clock, on which leases run (monotonic ms). Default: the machine's monotonic clock. */
  clock?: Clock;
  /** The fence timing the realm records and every handle reports. Default: `FenceTiming.default()`. */
  timing?: FenceTiming;
  /**
   * How many of its latest versions' commit ids each scope remembers, so that a retry of a landed
   * batch answers Ok even after the scope moved on (default 64, at least 1). Older retries are
   * refused with CONFLICT; none ever acts twice, since versions only grow.
   */
  rememberedCommitIds?: number;
}

/** Where a stalled commit is held: before its commit point (it has not landed) or after it (landed, not yet answered). */
export type StallPoint = 'before-commit-point' | 'after-commit-point';

/** A commit held in flight (see `MemoryHostRealm.stallCommits`). */
export interface CommitStall {
  /** Resolves once a commit is held. */
  readonly reached: Promise<void>;
  /** Lets the held commit go on; disarms the stall if no commit was held yet. Idempotent. */
  release(): void;
}

interface ScopeState {
  readonly kind: ScopeKind;
  readonly name: string;
  version: number;
  commitId: string;
  head: Uint8Array;
  /** A tombstone: the scope was deleted; its name is not created again. */
  deleted: boolean;
  /** Index of rows[0]; the end index is first + rows.length. */
  first: number;
  rows: Uint8Array[];
  /** The latest versions with the commit ids that wrote them, oldest first. */
  recent: { version: number; commitId: string }[];
}

interface Lease {
  token: number;
  holder: string;
  /** On the realm's clock: the holder is live while now < until. */
  until: number;
}

let realmCount = 0;

/**
 * One realm's state, shared by every handle opened on it. Each handle stands for a process: it
 * holds nothing of its own but its holder id. The realm also offers what the conformance suite's
 * factory needs (`open`, `lapseFenceLeases`, `kill`, `stallCommits`), so a realm can be passed to
 * `hostStoreConformance` as it is.
 */
export class MemoryHostRealm {
  readonly clock: Clock;
  readonly timing: FenceTiming;
  readonly #remembered: number;
  readonly #id = ++realmCount;
  #handles = 0;
  readonly #scopes = new Map<string, ScopeState>();
  /** Visible names per kind, kept sorted by `compareNames`. */
  readonly #names = new Map<ScopeKind, string[]>(SCOPE_KINDS.map((k) => [k, []]));
  /** The highest token ever acquired (0: none yet; the first acquire answers 1). */
  #highest = 0;
  /** The lease of the holder of the highest token. */
  #lease: Lease | null = null;

  constructor(options: MemoryHostRealmOptions = {}) {
    this.clock = options.clock ?? monotonicClock;
    this.timing = options.timing ?? FenceTiming.default();
    const remembered = options.rememberedCommitIds ?? 64;
    if (!isIndex(remembered) || remembered < 1) throw HostStoreError.invalid('rememberedCommitIds must be an integer of at least 1');
    this.#remembered = remembered;
  }

  /** A new process's handle over this realm. `holderId` names it in HELD answers (default: unique). */
  open(options: { holderId?: string } = {}): MemoryHostStore {
    const holderId = options.holderId ?? `memory-${this.#id}-${++this.#handles}`;
    return new MemoryHostStore(this, holderId, openKey);
  }

  /** Ends every recorded lease now (as if the realm's clock had run past them). */
  lapseFenceLeases(): void {
    const now = this.clock.now();
    if (this.#lease !== null && this.#lease.until > now) this.#lease = { ...this.#lease, until: now };
  }

  /**
   * Kills the process behind `store`: every later call on it answers UNAVAILABLE, and each commit
   * it has in flight lands wholly (when held after its commit point) or never (otherwise); those
   * commits reject with INDETERMINATE, which no one hears in a real kill. Its lease stays recorded.
   */
  kill(store: MemoryHostStore): void {
    controlsOf(store).kill();
  }

  /**
   * Holds the next commit of `store` that passes validation in flight, at `at` (default before its
   * commit point), until `release()`. Later commits of the handle go on.
   */
  stallCommits(store: MemoryHostStore, options: { at?: StallPoint } = {}): CommitStall {
    return controlsOf(store).armStall(options.at ?? 'before-commit-point');
  }

  // ---- the realm's operations (called by handles) ----

  /** @internal */
  acquire(mode: AcquireMode, holder: string): FenceGrant {
    const now = this.clock.now();
    const live = this.#lease !== null && now < this.#lease.until ? this.#lease : null;
    if (mode === 'exclusive' && live !== null) throw HostStoreError.held(live.holder, live.until - now, live.token);
    const token = ++this.#highest;
    this.#lease = { token, holder, until: now + this.timing.lease };
    return { token, supersededLease: live === null ? 0 : live.until - now };
  }

  /** @internal */
  renew(token: number): void {
    if (token > this.#highest) throw HostStoreError.invalid(`fence token ${token} was never issued`);
    if (token < this.#highest) throw HostStoreError.fencedOut(this.#highest);
    const lease = this.#lease;
    if (lease === null || lease.token !== token) throw HostStoreError.invalid(`fence token ${token} was never issued`);
    this.#lease = { ...lease, until: this.clock.now() + this.timing.lease };
  }

  /** @internal */
  loadHead(scope: ScopeRef): VersionedHead | null {
    const state = this.#visible(scope);
    return state === null ? null : versionedHead(state);
  }

  /** @internal */
  listHeads(kind: ScopeKind, after: string | null, limit: number): HeadPage {
    const names = this.#names.get(kind) ?? [];
    let at = after === null ? 0 : upperBound(names, after);
    const heads = [];
    for (; at < names.length && heads.length < limit; at++) {
      const name = names[at] as string;
      const state = this.#scopes.get(scopeKey({ kind, name }));
      assert(state !== undefined && !state.deleted, 'every listed name has a visible scope');
      heads.push({ name, head: versionedHead(state) });
    }
    const last = heads[heads.length - 1];
    return { heads, next: at < names.length && last !== undefined ? last.name : null };
  }

  /** @internal */
  readRows(scope: ScopeRef, from: number, limit: number): Row[] {
    const state = this.#visible(scope);
    if (state === null) return [];
    if (from < state.first) {
      throw HostStoreError.invalid(`row ${from} is below the first visible row ${state.first}`, { first: state.first });
    }
    const start = from - state.first;
    const rows: Row[] = [];
    for (let i = start; i < state.rows.length && rows.length < limit; i++) {
      rows.push({ index: state.first + i, data: (state.rows[i] as Uint8Array).slice() });
    }
    return rows;
  }

  /**
   * The commit point: checks the whole batch against the realm and applies all of it, in one
   * synchronous step (nothing else runs in between, so no load sees part of it). Answers without
   * acting when the commit id already landed.
   * @internal
   */
  commitPoint(batch: CommitBatch): void {
    // A retry of a landed batch: some scope it wrote remembers its commit id at the version it wrote.
    for (const u of batch.updates) {
      const state = this.#scopes.get(scopeKey(u.scope));
      if (state?.recent.some((r) => r.version === u.next && r.commitId === batch.commitId)) return;
    }
    if (batch.token < this.#highest) throw HostStoreError.fencedOut(this.#highest);
    if (batch.token > this.#highest) throw HostStoreError.invalid(`fence token ${batch.token} was never issued`);
    for (let i = 0; i < batch.updates.length; i++) {
      const u = batch.updates[i]!;
      const state = this.#scopes.get(scopeKey(u.scope));
      if (u.previous === null && state?.deleted) {
        throw HostStoreError.invalid(`${u.scope.kind} scope ${JSON.stringify(u.scope.name)} was deleted; its name is not created again`, {
          update: i,
        });
      }
      const current = state === undefined || state.deleted ? null : state.version;
      if (current !== u.previous) throw HostStoreError.conflict(u.scope, current);
      if (state === undefined || u.delete === true) continue;
      if (u.truncateAfter !== undefined && u.truncateAfter < state.first) {
        throw HostStoreError.invalid(`update ${i}: truncateAfter ${u.truncateAfter} is below the first visible row ${state.first}`, {
          update: i,
          first: state.first,
        });
      }
      const end = Math.min(state.first + state.rows.length, u.truncateAfter ?? Infinity);
      if (!Number.isSafeInteger(end + (u.append?.length ?? 0))) throw HostStoreError.invalid(`update ${i}: row indices would overflow`);
    }
    for (const u of batch.updates) this.#apply(u, batch.commitId);
  }

  #apply(u: CommitBatch['updates'][number], commitId: string): void {
    const key = scopeKey(u.scope);
    let state = this.#scopes.get(key);
    if (state === undefined) {
      state = {
        kind: u.scope.kind,
        name: u.scope.name,
        version: ScopeVersion.FIRST,
        commitId,
        head: (u.head as Uint8Array).slice(),
        deleted: false,
        first: 0,
        rows: (u.append ?? []).map((r) => r.slice()),
        recent: [],
      };
      this.#scopes.set(key, state);
      insertSorted(this.#names.get(state.kind) as string[], state.name);
    } else if (u.delete === true) {
      state.deleted = true;
      state.head = new Uint8Array(0);
      state.first += state.rows.length;
      state.rows = [];
      removeSorted(this.#names.get(state.kind) as string[], state.name);
    } else {
      const end = state.first + state.rows.length;
      if (u.truncateAfter !== undefined && u.truncateAfter < end) state.rows.length = u.truncateAfter - state.first;
      if (u.dropBefore !== undefined && u.dropBefore > state.first) {
        const dropped = Math.min(u.dropBefore, state.first + state.rows.length) - state.first;
        state.rows.splice(0, dropped);
        state.first += dropped;
      }
      for (const row of u.append ?? []) state.rows.push(row.slice());
      if (u.head !== undefined) state.head = u.head.slice();
    }
    state.version = u.next;
    state.commitId = commitId;
    state.recent.push({ version: u.next, commitId });
    if (state.recent.length > this.#remembered) state.recent.shift();
  }

  #visible(scope: ScopeRef): ScopeState | null {
    const state = this.#scopes.get(scopeKey(scope));
    return state === undefined || state.deleted ? null : state;
  }
}

function versionedHead(state: ScopeState): VersionedHead {
  return { version: state.version, commitId: state.commitId, head: state.head.slice() };
}

/** The position of the first name that sorts after `name`. */
function upperBound(names: readonly string[], name: string): number {
  let lo = 0;
  let hi = names.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareNames(names[mid] as string, name) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function insertSorted(names: string[], name: string): void {
  names.splice(upperBound(names, name), 0, name);
}

function removeSorted(names: string[], name: string): void {
  const at = upperBound(names, name) - 1;
  if (names[at] === name) names.splice(at, 1);
}

/** Proves a MemoryHostStore is made by its realm. */
const openKey: unknown = Object.freeze({});

/** A handle's kill and stall controls, reachable by its realm only. */
interface HandleControls {
  kill(): void;
  armStall(at: StallPoint): CommitStall;
}
const controls = new WeakMap<MemoryHostStore, HandleControls>();

function controlsOf(store: MemoryHostStore): HandleControls {
  const c = controls.get(store);
  if (c === undefined) throw new TypeError('not a MemoryHostStore');
  return c;
}

interface Stall {
  at: StallPoint;
  released: boolean;
  reached: () => void;
  gate: Promise<void>;
  open: () => void;
}

/**
 * One process's handle over a `MemoryHostRealm` (made by `realm.open()`). Implements the Host
 * Store SPI; `close()` is idempotent, and every call after it (or after a kill) answers UNAVAILABLE.
 */
export class MemoryHostStore implements HostStore {
  readonly realm: MemoryHostRealm;
  /** Names this handle in HELD answers. */
  readonly holderId: string;
  #state: 'open' | 'closed' | 'killed' = 'open';
  #armed: Stall | null = null;
  readonly #held = new Set<Stall>();

  /** @internal Use `realm.open()`. */
  constructor(realm: MemoryHostRealm, holderId: string, key: unknown) {
    if (key !== openKey) throw new TypeError('use MemoryHostRealm.open() to open a MemoryHostStore');
    this.realm = realm;
    this.holderId = holderId;
    controls.set(this, {
      kill: () => {
        this.#state = 'killed';
        this.#armed = null;
        for (const stall of this.#held) stall.open();
      },
      armStall: (at) => this.#armStall(at),
    });
  }

  async acquireFence(mode: AcquireMode): Promise<FenceGrant> {
    this.#usable();
    if (mode !== 'exclusive' && mode !== 'takeover') throw HostStoreError.invalid(`acquire mode ${String(mode)} is not exclusive or takeover`);
    return this.realm.acquire(mode, this.holderId);
  }

  async renewFence(token: number): Promise<void> {
    this.#usable();
    if (!isIndex(token)) throw HostStoreError.invalid(`fence token ${String(token)} is not a safe non-negative integer`);
    this.realm.renew(token);
  }

  fenceTiming(): FenceTiming {
    return this.realm.timing;
  }

  async loadHead(scope: ScopeRef): Promise<VersionedHead | null> {
    this.#usable();
    checkScopeRef(scope);
    return this.realm.loadHead(scope);
  }

  async listHeads(kind: ScopeKind, after: string | null, limit: number): Promise<HeadPage> {
    this.#usable();
    checkScopeKind(kind);
    if (after !== null) checkScopeName(after, 'after');
    if (!isIndex(limit) || limit < 1) throw HostStoreError.invalid(`limit ${String(limit)} is not an integer of at least 1`);
    return this.realm.listHeads(kind, after, limit);
  }

  async readRows(scope: ScopeRef, from: number, limit: number): Promise<Row[]> {
    this.#usable();
    checkScopeRef(scope);
    if (!isIndex(from)) throw HostStoreError.invalid(`from ${String(from)} is not a safe non-negative integer`);
    if (!isIndex(limit)) throw HostStoreError.invalid(`limit ${String(limit)} is not a safe non-negative integer`);
    return this.realm.readRows(scope, from, limit);
  }

  async commit(batch: CommitBatch): Promise<void> {
    this.#usable();
    const checked = CommitBatch.from(batch);
    const stall = this.#armed;
    this.#armed = null;
    if (stall !== null) await this.#hold(stall, 'before-commit-point');
    // One turn of the event loop between the call and its commit point, so that concurrent
    // commits interleave as they would against a real store.
    await Promise.resolve();
    if (this.#killed()) throw HostStoreError.indeterminate('the process was killed with this commit in flight; it did not land');
    this.realm.commitPoint(checked);
    if (stall !== null) await this.#hold(stall, 'after-commit-point');
    if (this.#killed()) throw HostStoreError.indeterminate('the process was killed with this commit in flight; it landed');
  }

  /** Closes the handle (idempotent). Commits in flight go on; later calls answer UNAVAILABLE. */
  async close(): Promise<void> {
    if (this.#state === 'open') this.#state = 'closed';
  }

  #killed(): boolean {
    return this.#state === 'killed';
  }

  #usable(): void {
    if (this.#state === 'killed') throw HostStoreError.unavailable('the process behind this handle was killed');
    if (this.#state === 'closed') throw HostStoreError.unavailable('the store handle is closed');
  }

  #armStall(at: StallPoint): CommitStall {
    let reached!: () => void;
    let open!: () => void;
    const reachedP = new Promise<void>((resolve) => (reached = resolve));
    const gate = new Promise<void>((resolve) => (open = resolve));
    const stall: Stall = { at, released: false, reached, gate, open };
    this.#armed = stall;
    return {
      reached: reachedP,
      release: () => {
        stall.released = true;
        if (this.#armed === stall) this.#armed = null;
        stall.open();
      },
    };
  }

  async #hold(stall: Stall, point: StallPoint): Promise<void> {
    if (stall.at !== point || stall.released || this.#state === 'killed') return;
    this.#held.add(stall);
    stall.reached();
    try {
      await stall.gate;
    } finally {
      this.#held.delete(stall);
    }
  }
}
