// Host store: what every handle of a host store does before and after its backend's storage.
//
// Owns: `HostStoreHandle`, the base class of the memory store, the PostgreSQL store and the
// benchmark peers: the handle's life (open, closed, killed), the argument guards of every
// operation, the validation of a batch (`CommitBatch.from`), and the conformance suite's commit
// stall (`stallCommits`, `kill`). A backend implements only the `do…` methods over its storage.
// Guarantees: every public call answers UNAVAILABLE on a closed or killed handle and INVALID for a
// malformed argument before the backend is reached; a commit is validated, then claims an armed
// stall and is held before its commit point (or after it, where the stall was armed so), so a
// killed handle's held commit answers INDETERMINATE having never reached the backend (held before)
// or having landed wholly (held after). The fs store runs the same guards (guards.ts) in its own
// class, since its commit path has hooks of its own.

import { CommitBatch } from './batch.js';
import { HostStoreError } from './errors.js';
import { checkAcquireMode, checkFenceToken, checkListArgs, checkReadArgs } from './guards.js';
import { checkScopeRef } from './names.js';
import { CommitStalls, type CommitStall, type StallPoint } from './stall.js';
import type { FenceTiming } from './timing.js';
import type { AcquireMode, FenceGrant, HeadPage, HostStore, Row, ScopeKind, ScopeRef, VersionedHead } from './types.js';

/** A handle over one realm; see the module header. `close()` is idempotent. */
export abstract class HostStoreHandle implements HostStore {
  /** Names this handle in HELD answers. */
  readonly holderId: string;
  readonly #timing: FenceTiming;
  #state: 'open' | 'closed' | 'killed' = 'open';
  readonly #stalls = new CommitStalls();
  /** True when a commit already in flight goes on after `close()` (else it answers UNAVAILABLE once let go). */
  protected readonly commitsOutliveClose: boolean = false;

  constructor(holderId: string, timing: FenceTiming) {
    this.holderId = holderId;
    this.#timing = timing;
  }

  protected abstract doAcquire(mode: AcquireMode): Promise<FenceGrant>;
  protected abstract doRenew(token: number): Promise<void>;
  protected abstract doLoadHead(scope: ScopeRef): Promise<VersionedHead | null>;
  protected abstract doListHeads(kind: ScopeKind, after: string | null, limit: number): Promise<HeadPage>;
  protected abstract doReadRows(scope: ScopeRef, from: number, limit: number): Promise<Row[]>;
  /** Applies a validated batch; its commit point lies inside. */
  protected abstract doCommit(batch: CommitBatch): Promise<void>;
  /** Releases the backend's resources (called once, by the first close or kill). */
  protected abstract doClose(): Promise<void>;

  async acquireFence(mode: AcquireMode): Promise<FenceGrant> {
    this.usable();
    checkAcquireMode(mode);
    return this.doAcquire(mode);
  }

  async renewFence(token: number): Promise<void> {
    this.usable();
    checkFenceToken(token);
    return this.doRenew(token);
  }

  fenceTiming(): FenceTiming {
    return this.#timing;
  }

  async loadHead(scope: ScopeRef): Promise<VersionedHead | null> {
    this.usable();
    checkScopeRef(scope);
    return this.doLoadHead(scope);
  }

  async listHeads(kind: ScopeKind, after: string | null, limit: number): Promise<HeadPage> {
    this.usable();
    checkListArgs(kind, after, limit);
    return this.doListHeads(kind, after, limit);
  }

  async readRows(scope: ScopeRef, from: number, limit: number): Promise<Row[]> {
    this.usable();
    checkReadArgs(scope, from, limit);
    return this.doReadRows(scope, from, limit);
  }

  async commit(batch: CommitBatch): Promise<void> {
    this.usable();
    const checked = CommitBatch.from(batch);
    const stall = this.#stalls.claim();
    await this.#stalls.hold(stall, 'before-commit-point');
    if (this.killed) throw HostStoreError.indeterminate('the process was killed with this commit in flight; it did not land');
    if (this.#state === 'closed' && !this.commitsOutliveClose) throw HostStoreError.unavailable('the store handle is closed');
    await this.doCommit(checked);
    await this.#stalls.hold(stall, 'after-commit-point');
    if (this.killed) throw HostStoreError.indeterminate('the process was killed with this commit in flight; it landed');
  }

  /**
   * Holds the next commit of this handle that passes validation in flight, at `at` (default
   * before its commit point), until `release()` (the conformance suite's `stallCommits`).
   */
  stallCommits(at: StallPoint = 'before-commit-point'): CommitStall {
    return this.#stalls.arm(at);
  }

  /**
   * Drops the handle as a killed process would: every later call answers UNAVAILABLE; a commit
   * held before its commit point never reaches the backend, one held after it has landed; the
   * backend's resources are released as a dead process's are. The lease stays recorded.
   */
  async kill(): Promise<void> {
    if (this.#state === 'killed') return;
    const wasOpen = this.#state === 'open';
    this.#state = 'killed';
    this.#stalls.openAll();
    if (wasOpen) await this.doKill();
  }

  /** Closes the handle (idempotent); later calls answer UNAVAILABLE. */
  async close(): Promise<void> {
    if (this.#state !== 'open') return;
    this.#state = 'closed';
    await this.doClose();
  }

  /** What a kill releases; by default what a close does. */
  protected doKill(): Promise<void> {
    return this.doClose();
  }

  /** True once the handle was closed. */
  protected get closed(): boolean {
    return this.#state === 'closed';
  }

  /** True once the handle was killed. */
  protected get killed(): boolean {
    return this.#state === 'killed';
  }

  /** Throws UNAVAILABLE unless the handle is open. */
  protected usable(): void {
    if (this.#state === 'killed') throw HostStoreError.unavailable('the process behind this handle was killed');
    if (this.#state === 'closed') throw HostStoreError.unavailable('the store handle is closed');
  }
}
