// What the two peer host stores share besides the commit plan: argument checks, the handle's
// state (open, closed, killed), and the commit stall the conformance suite asks of a factory.
//
// Owns: `PeerHostBase`. Guarantees: every public call checks its arguments with the same helpers
// as seglog's stores (lib/host/names.ts, CommitBatch.from) before touching storage; a stalled
// commit is held before its transaction starts (before its commit point), and a killed handle's
// held commit never starts its transaction.

import { isIndex } from '../../lib/assert.js';
import { CommitBatch } from '../../lib/host/batch.js';
import { HostStoreError } from '../../lib/host/errors.js';
import { checkScopeKind, checkScopeName, checkScopeRef } from '../../lib/host/names.js';
import { FenceTiming } from '../../lib/host/timing.js';
import type { AcquireMode, FenceGrant, HeadPage, HostStore, Row, ScopeKind, ScopeRef, VersionedHead } from '../../lib/host/types.js';
import { monotonicClock, type Clock } from '../../lib/clock.js';

export interface PeerHostOptions {
  clock?: Clock;
  timing?: FenceTiming;
  holderId?: string;
}

export interface PeerStall {
  readonly reached: Promise<void>;
  release(): void;
}

let handles = 0;

export abstract class PeerHostBase implements HostStore {
  protected readonly clock: Clock;
  protected readonly timing: FenceTiming;
  readonly holderId: string;
  #state: 'open' | 'closed' | 'killed' = 'open';
  #armed: { gate: Promise<void>; reached: () => void } | null = null;
  /** Opens the gate of every stall armed so far (a kill lets held commits go, to be refused). */
  readonly #openers = new Set<() => void>();

  constructor(kind: string, options: PeerHostOptions) {
    this.clock = options.clock ?? monotonicClock;
    this.timing = options.timing ?? FenceTiming.default();
    this.holderId = options.holderId ?? `${kind}-${process.pid}-${++handles}`;
  }

  protected abstract doAcquire(mode: AcquireMode): Promise<FenceGrant>;
  protected abstract doRenew(token: number): Promise<void>;
  protected abstract doLoadHead(scope: ScopeRef): Promise<VersionedHead | null>;
  protected abstract doListHeads(kind: ScopeKind, after: string | null, limit: number): Promise<HeadPage>;
  protected abstract doReadRows(scope: ScopeRef, from: number, limit: number): Promise<Row[]>;
  protected abstract doCommit(batch: CommitBatch): Promise<void>;
  protected abstract doClose(): Promise<void>;

  async acquireFence(mode: AcquireMode): Promise<FenceGrant> {
    this.usable();
    if (mode !== 'exclusive' && mode !== 'takeover') throw HostStoreError.invalid(`acquire mode ${String(mode)} is not exclusive or takeover`);
    return this.doAcquire(mode);
  }

  async renewFence(token: number): Promise<void> {
    this.usable();
    if (!isIndex(token)) throw HostStoreError.invalid(`fence token ${String(token)} is not a safe non-negative integer`);
    return this.doRenew(token);
  }

  fenceTiming(): FenceTiming {
    return this.timing;
  }

  async loadHead(scope: ScopeRef): Promise<VersionedHead | null> {
    this.usable();
    checkScopeRef(scope);
    return this.doLoadHead(scope);
  }

  async listHeads(kind: ScopeKind, after: string | null, limit: number): Promise<HeadPage> {
    this.usable();
    checkScopeKind(kind);
    if (after !== null) checkScopeName(after, 'after');
    if (!isIndex(limit) || limit < 1) throw HostStoreError.invalid(`limit ${String(limit)} is not an integer of at least 1`);
    return this.doListHeads(kind, after, limit);
  }

  async readRows(scope: ScopeRef, from: number, limit: number): Promise<Row[]> {
    this.usable();
    checkScopeRef(scope);
    if (!isIndex(from)) throw HostStoreError.invalid(`from ${String(from)} is not a safe non-negative integer`);
    if (!isIndex(limit)) throw HostStoreError.invalid(`limit ${String(limit)} is not a safe non-negative integer`);
    return this.doReadRows(scope, from, limit);
  }

  async commit(batch: CommitBatch): Promise<void> {
    this.usable();
    const checked = CommitBatch.from(batch);
    const stall = this.#armed;
    this.#armed = null;
    if (stall !== null) {
      stall.reached();
      await stall.gate;
      if (this.#state === 'killed') throw HostStoreError.indeterminate('the process was killed with this commit in flight; it did not land');
    }
    if (this.#state !== 'open') throw HostStoreError.unavailable('the store handle is closed');
    return this.doCommit(checked);
  }

  /** Holds the next commit before its transaction starts, until `release()`. */
  stallNextCommit(): PeerStall {
    let reached!: () => void;
    let open!: () => void;
    const reachedP = new Promise<void>((r) => (reached = r));
    const gate = new Promise<void>((r) => (open = r));
    this.#armed = { gate, reached };
    this.#openers.add(open);
    return {
      reached: reachedP,
      release: () => {
        if (this.#armed?.gate === gate) this.#armed = null;
        open();
      },
    };
  }

  /** Drops the handle as a killed process would: held commits never start; storage is closed. */
  async kill(): Promise<void> {
    if (this.#state === 'killed') return;
    const wasOpen = this.#state === 'open';
    this.#state = 'killed';
    this.#armed = null;
    for (const open of this.#openers) open();
    if (wasOpen) await this.doClose();
  }

  async close(): Promise<void> {
    if (this.#state !== 'open') return;
    this.#state = 'closed';
    await this.doClose();
  }

  protected usable(): void {
    if (this.#state === 'killed') throw HostStoreError.unavailable('the process behind this handle was killed');
    if (this.#state === 'closed') throw HostStoreError.unavailable('the store handle is closed');
  }
}
