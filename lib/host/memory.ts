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
import type { CommitBatch } from './batch.js';
import { HostStoreError } from './errors.js';
import { belowFirstRow } from './guards.js';
import { HostStoreHandle } from './handle.js';
import { planAcquire, planRenew, type FenceRecord } from './lease.js';
import { compareNames, scopeKey } from './names.js';
import { NO_SCOPE, planCommit, type ScopeStep, type ScopeTip } from './plan.js';
import type { CommitStall, StallPoint } from './stall.js';
import { FenceTiming } from './timing.js';
import type { AcquireMode, FenceGrant, HeadPage, Row, ScopeKind, ScopeRef, VersionedHead } from './types.js';
import { SCOPE_KINDS } from './types.js';

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

/** A memory realm lives in one process, so its clock never restarts: one boot. */
const BOOT = 'memory';

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
  /** The highest token, its holder and lease (null: no acquire yet; the first answers 1). */
  #fence: FenceRecord | null = null;

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
    if (this.#fence !== null && this.#fence.leaseUntil > now) this.#fence = { ...this.#fence, leaseUntil: now };
  }

  /**
   * Kills the process behind `store`: every later call on it answers UNAVAILABLE, and each commit
   * it has in flight lands wholly (when held after its commit point) or never (otherwise); those
   * commits reject with INDETERMINATE, which no one hears in a real kill. Its lease stays recorded.
   */
  kill(store: MemoryHostStore): void {
    void handleOf(store).kill();
  }

  /**
   * Holds the next commit of `store` that passes validation in flight, at `at` (default before its
   * commit point), until `release()`. Later commits of the handle go on.
   */
  stallCommits(store: MemoryHostStore, options: { at?: StallPoint } = {}): CommitStall {
    return handleOf(store).stallCommits(options.at ?? 'before-commit-point');
  }

  // ---- the realm's operations (called by handles) ----

  /** @internal */
  acquire(mode: AcquireMode, holder: string): FenceGrant {
    const { record, grant } = planAcquire(mode, this.#fence, holder, this.clock.now(), BOOT, this.timing.lease);
    this.#fence = record;
    return grant;
  }

  /** @internal */
  renew(token: number): void {
    this.#fence = planRenew(token, this.#fence, this.clock.now(), BOOT, this.timing.lease);
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
    if (from < state.first) throw belowFirstRow(from, state.first);
    const start = from - state.first;
    const rows: Row[] = [];
    for (let i = start; i < state.rows.length && rows.length < limit; i++) {
      rows.push({ index: state.first + i, data: (state.rows[i] as Uint8Array).slice() });
    }
    return rows;
  }

  /**
   * The commit point: checks the whole batch against the realm (plan.ts: retry, token, each
   * update) and applies all of it, in one synchronous step (nothing else runs in between, so no
   * load sees part of it). Answers without acting when the commit id already landed.
   * @internal
   */
  commitPoint(batch: CommitBatch): void {
    const states = batch.updates.map((u) => this.#scopes.get(scopeKey(u.scope)));
    const plan = planCommit(batch, this.#fence?.token ?? 0, states.map(tipOf), (i, version) => states[i]?.recent.find((r) => r.version === version)?.commitId);
    if (plan.landed) return;
    plan.steps.forEach((step, i) => this.#apply(step, states[i], batch.commitId));
  }

  #apply(step: ScopeStep, existing: ScopeState | undefined, commitId: string): void {
    let state = existing;
    if (state === undefined) {
      state = { kind: step.scope.kind, name: step.scope.name, version: 0, commitId, head: new Uint8Array(0), deleted: false, first: 0, rows: [], recent: [] };
      this.#scopes.set(scopeKey(step.scope), state);
      insertSorted(this.#names.get(state.kind) as string[], state.name);
    }
    const { after } = step;
    // The rows kept are those of [after.first, insertAt): truncation and drops remove the rest.
    state.rows = state.rows.slice(after.first - state.first, step.insertAt - state.first);
    for (const row of step.rows) state.rows.push(row.slice());
    state.first = after.first;
    if (step.head !== undefined) state.head = step.head.slice();
    if (after.deleted && !state.deleted) removeSorted(this.#names.get(state.kind) as string[], state.name);
    state.deleted = after.deleted;
    state.version = after.version;
    state.commitId = commitId;
    state.recent.push({ version: after.version, commitId });
    if (state.recent.length > this.#remembered) state.recent.shift();
  }

  #visible(scope: ScopeRef): ScopeState | null {
    const state = this.#scopes.get(scopeKey(scope));
    return state === undefined || state.deleted ? null : state;
  }
}

function tipOf(state: ScopeState | undefined): ScopeTip {
  if (state === undefined) return NO_SCOPE;
  const end = state.first + state.rows.length;
  return { exists: !state.deleted, deleted: state.deleted, version: state.version, commitId: state.commitId, first: state.first, end };
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

function handleOf(store: MemoryHostStore): MemoryHostStore {
  if (!(store instanceof MemoryHostStore)) throw new TypeError('not a MemoryHostStore');
  return store;
}

/**
 * One process's handle over a `MemoryHostRealm` (made by `realm.open()`). Implements the Host
 * Store SPI; `close()` is idempotent, and every call after it (or after a kill) answers UNAVAILABLE;
 * a commit in flight at the close goes on.
 */
export class MemoryHostStore extends HostStoreHandle {
  readonly realm: MemoryHostRealm;
  protected override readonly commitsOutliveClose = true;

  /** @internal Use `realm.open()`. */
  constructor(realm: MemoryHostRealm, holderId: string, key: unknown) {
    if (key !== openKey) throw new TypeError('use MemoryHostRealm.open() to open a MemoryHostStore');
    super(holderId, realm.timing);
    this.realm = realm;
  }

  protected async doAcquire(mode: AcquireMode): Promise<FenceGrant> {
    return this.realm.acquire(mode, this.holderId);
  }

  protected async doRenew(token: number): Promise<void> {
    this.realm.renew(token);
  }

  protected async doLoadHead(scope: ScopeRef): Promise<VersionedHead | null> {
    return this.realm.loadHead(scope);
  }

  protected async doListHeads(kind: ScopeKind, after: string | null, limit: number): Promise<HeadPage> {
    return this.realm.listHeads(kind, after, limit);
  }

  protected async doReadRows(scope: ScopeRef, from: number, limit: number): Promise<Row[]> {
    return this.realm.readRows(scope, from, limit);
  }

  protected async doCommit(batch: CommitBatch): Promise<void> {
    // One turn of the event loop between the call and its commit point, so that concurrent
    // commits interleave as they would against a real store.
    await Promise.resolve();
    if (this.killed) throw HostStoreError.indeterminate('the process was killed with this commit in flight; it did not land');
    this.realm.commitPoint(batch);
  }

  protected async doClose(): Promise<void> {}
}
