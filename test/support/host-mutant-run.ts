// Runs the host store conformance suite against one deliberately broken store (a "mutant" of the
// memory reference store), named by the environment variable SEGLOG_HOST_MUTANT. Run as
// `node --test dist/test/support/host-mutant-run.js` by test/host-conformance-mutants.test.ts, which
// checks that the suite catches each mutant. Each mutant breaks one obligation from outside the
// store, through the HostStore interface only.

import { ManualClock } from '../../lib/clock.js';
import { hostStoreConformance, type HostStoreFactory, type HostStoreStall } from '../../lib/conformance/host-store.js';
import {
  CommitBatch,
  FenceTiming,
  HostStoreError,
  MemoryHostRealm,
  type AcquireMode,
  type FenceGrant,
  type HeadPage,
  type HostStore,
  type MemoryHostStore,
  type Row,
  type ScopeKind,
  type ScopeRef,
  type VersionedHead,
} from '../../lib/host/index.js';

export const MUTANTS = [
  'no-fence-at-commit',
  'split-batch',
  'js-name-order',
  'next-on-full-page',
  'exclusive-is-takeover',
  'global-commit-lock',
  'renew-needs-live-lease',
  'retry-acts-again',
  'ignore-previous',
  'row-index-from-zero',
] as const;
export type Mutant = (typeof MUTANTS)[number];

interface Shared {
  realm: MemoryHostRealm;
  clock: ManualClock;
  highest: number;
  renewedAt: Map<number, number>;
  committed: Set<string>;
  lock: Promise<void>;
}

class MutantStore implements HostStore {
  readonly inner: MemoryHostStore;
  readonly #mutant: Mutant;
  readonly #shared: Shared;
  /** split-batch: a stall to arm between the parts of the next commit. */
  pendingStall: ((stall: HostStoreStall) => void) | null = null;

  constructor(inner: MemoryHostStore, mutant: Mutant, shared: Shared) {
    this.inner = inner;
    this.#mutant = mutant;
    this.#shared = shared;
  }

  async acquireFence(mode: AcquireMode): Promise<FenceGrant> {
    const grant = await this.inner.acquireFence(this.#mutant === 'exclusive-is-takeover' ? 'takeover' : mode);
    this.#shared.highest = Math.max(this.#shared.highest, grant.token);
    this.#shared.renewedAt.set(grant.token, this.#shared.clock.now());
    return grant;
  }

  async renewFence(token: number): Promise<void> {
    const at = this.#shared.renewedAt.get(token);
    if (this.#mutant === 'renew-needs-live-lease' && at !== undefined && this.#shared.clock.now() >= at + this.fenceTiming().lease) {
      throw HostStoreError.fencedOut(token + 1);
    }
    await this.inner.renewFence(token);
    this.#shared.renewedAt.set(token, this.#shared.clock.now());
  }

  fenceTiming(): FenceTiming {
    return this.inner.fenceTiming();
  }

  loadHead(scope: ScopeRef): Promise<VersionedHead | null> {
    return this.inner.loadHead(scope);
  }

  async listHeads(kind: ScopeKind, after: string | null, limit: number): Promise<HeadPage> {
    if (this.#mutant === 'js-name-order') {
      const all = (await this.inner.listHeads(kind, null, 1_000_000)).heads.sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
      const rest = after === null ? all : all.filter((h) => h.name > after);
      const heads = rest.slice(0, limit);
      return { heads, next: rest.length > limit ? (heads[heads.length - 1]?.name ?? null) : null };
    }
    const page = await this.inner.listHeads(kind, after, limit);
    if (this.#mutant === 'next-on-full-page' && page.next === null && page.heads.length === limit) {
      return { heads: page.heads, next: page.heads[page.heads.length - 1]?.name ?? null };
    }
    return page;
  }

  async readRows(scope: ScopeRef, from: number, limit: number): Promise<Row[]> {
    const rows = await this.inner.readRows(scope, from, limit);
    return this.#mutant === 'row-index-from-zero' ? rows.map((r, i) => ({ index: i, data: r.data })) : rows;
  }

  async commit(batch: CommitBatch): Promise<void> {
    switch (this.#mutant) {
      case 'no-fence-at-commit':
        return this.inner.commit(CommitBatch.tryNew(batch.commitId, this.#shared.highest, [...batch.updates]));
      case 'split-batch': {
        const [first, ...rest] = batch.updates;
        await this.inner.commit(CommitBatch.tryNew(batch.commitId, batch.token, [first!]));
        if (this.pendingStall !== null) {
          this.pendingStall(this.#shared.realm.stallCommits(this.inner));
          this.pendingStall = null;
        }
        if (rest.length > 0) await this.inner.commit(CommitBatch.tryNew(batch.commitId, batch.token, rest));
        return;
      }
      case 'global-commit-lock': {
        const previous = this.#shared.lock;
        let done!: () => void;
        this.#shared.lock = new Promise((resolve) => (done = resolve));
        await previous;
        try {
          return await this.inner.commit(batch);
        } finally {
          done();
        }
      }
      case 'retry-acts-again':
        // A commit id seen before is applied again on top of the scopes' current versions.
        if (this.#shared.committed.has(batch.commitId)) return this.inner.commit(await this.#rebased(batch));
        await this.inner.commit(batch);
        this.#shared.committed.add(batch.commitId);
        return;
      case 'ignore-previous':
        // Every update applies to whatever version its scope is at: no version chain.
        return this.inner.commit(await this.#rebased(batch));
      default:
        return this.inner.commit(batch);
    }
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  async #rebased(batch: CommitBatch): Promise<CommitBatch> {
    const updates = [];
    for (const u of batch.updates) {
      const head = await this.inner.loadHead(u.scope);
      if (head === null || u.previous === null) updates.push(u);
      else updates.push({ ...u, previous: head.version, next: head.version + 1 });
    }
    return CommitBatch.tryNew(batch.commitId, batch.token, updates);
  }
}

function mutantFactory(mutant: Mutant): HostStoreFactory<MutantStore> {
  const clock = new ManualClock(1_000_000);
  const realm = new MemoryHostRealm({ clock, timing: FenceTiming.tryNew(1000, 3000) });
  const shared: Shared = { realm, clock, highest: 0, renewedAt: new Map(), committed: new Set(), lock: Promise.resolve() };
  return {
    open: () => new MutantStore(realm.open(), mutant, shared),
    lapseFenceLeases: () => clock.advance(realm.timing.lease),
    kill: (handle) => realm.kill(handle.inner),
    stallCommits: (handle) => {
      if (mutant !== 'split-batch') return realm.stallCommits(handle.inner);
      const armed = new Promise<HostStoreStall>((resolve) => (handle.pendingStall = resolve));
      return {
        reached: armed.then((stall) => stall.reached),
        release: () => {
          handle.pendingStall = null;
          void armed.then((stall) => stall.release());
        },
      };
    },
    close: (handle) => handle.close(),
  };
}

const chosen = process.env['SEGLOG_HOST_MUTANT'];
if (chosen !== undefined) {
  if (!(MUTANTS as readonly string[]).includes(chosen)) throw new Error(`unknown mutant ${chosen}`);
  hostStoreConformance(() => mutantFactory(chosen as Mutant), { name: `mutant ${chosen}`, progressDeadlineMs: 1500 });
}
