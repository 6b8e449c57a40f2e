// Tests of `seglog bench stores` that need no peer and assert no timing: the peers' shared commit
// plan (against the in-memory reference store), the ratio to the best peer, the store targets and
// their "not measured" wording, the report schema with memory measurements, the store workloads'
// plumbing (driven against the in-memory reference stores, which are never reported as seglog),
// the generated payload bodies, and the peer loader's answer when the peers are not installed.

import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { REPORT_MARKER, spliceInto, STORES_BEGIN, STORES_END } from '../bench/cli.js';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { CommitBatch } from '../lib/host/batch.js';
import { HostStoreError } from '../lib/host/errors.js';
import { MemoryHostRealm } from '../lib/host/memory.js';
import type { HostStore, ScopeRef, ScopeUpdate } from '../lib/host/types.js';
import { kvPlugin } from '../lib/raft/kv.js';
import { MemoryRaftDisk, openMemoryRaftGroup } from '../lib/raft/memory.js';
import type { RaftLogStorage } from '../lib/raft/types.js';
import {
  describeMachine,
  MIB,
  pairedRatiosToBest,
  ratioToBest,
  REPORT_SCHEMA_ID,
  REPORT_VERSION,
  renderMarkdown,
  runSection,
  sideBySide,
  summarize,
  validateReport,
  type BenchReport,
  type RunMetrics,
  type SectionResult,
  type StoreImplementation,
} from '../bench/harness/index.js';
import { rowKeyBytes, scopeKeyBytes } from '../bench/stores/host-lmdb.js';
import { decodeScopeMeta, encodeScopeMeta, planAcquire, planCommit, planRenew, type ScopeMeta } from '../bench/stores/host-plan.js';
import { loadPeers } from '../bench/stores/peers.js';
import { NOT_BUILT } from '../bench/stores/seglog.js';
import { collectStoreTargets, concurrentPayloadNotes, concurrentVariantId, durationTarget, hostCommitSection, primitiveNote, PRIMITIVE_ROWS, runsSection, storesConfig } from '../bench/stores/suite.js';
import { payloadBudget } from '../bench/stores/payload-bench.js';
import { SEGLOG_ALONE_SECTIONS, STORES_SECTION_IDS } from '../bench/stores/sections.js';
import { generatedBody, hostCommitWorkload, raftAppendWorkload, type RaftNodeHandle } from '../bench/stores/workloads.js';

// ---------------------------------------------------------------- the commit plan

/** A store made of planCommit over plain maps: what each peer does, minus SQL or LMDB. */
class PlanStore {
  readonly metas = new Map<string, ScopeMeta>();
  readonly rows = new Map<string, Map<number, Uint8Array>>();
  constructor(public token: number) {}
  key(s: ScopeRef): string {
    return `${s.kind}/${s.name}`;
  }
  commit(batch: CommitBatch): void {
    const plan = planCommit(batch, this.token, (s) => this.metas.get(this.key(s)) ?? null);
    if (plan.landed) return;
    for (const step of plan.steps) {
      const k = this.key(step.scope);
      const rows = this.rows.get(k) ?? new Map<number, Uint8Array>();
      for (const r of step.remove) for (let i = r.from; i < r.to; i++) rows.delete(i);
      step.insert.rows.forEach((row, i) => rows.set(step.insert.start + i, row));
      this.rows.set(k, rows);
      this.metas.set(k, step.after);
    }
  }
  visibleRows(s: ScopeRef): number[][] {
    const m = this.metas.get(this.key(s));
    if (m === undefined || m.deleted) return [];
    const rows = this.rows.get(this.key(s)) ?? new Map();
    const out: number[][] = [];
    for (let i = m.first; i < m.end; i++) out.push([i, ...(rows.get(i) ?? [-1])]);
    assert.equal(rows.size, m.end - m.first, 'no row is kept outside [first, end)');
    return out;
  }
}

const SCOPES: ScopeRef[] = [
  { kind: 'session', name: 'a' },
  { kind: 'session', name: 'b' },
  { kind: 'mob', name: 'a' },
];

const updateArb = fc.record({
  scope: fc.integer({ min: 0, max: SCOPES.length - 1 }),
  kind: fc.constantFrom('create', 'next', 'stale', 'delete'),
  head: fc.option(fc.integer({ min: 0, max: 255 }), { nil: undefined }),
  append: fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 3 }),
  truncateAfter: fc.option(fc.integer({ min: 0, max: 8 }), { nil: undefined }),
  dropBefore: fc.option(fc.integer({ min: 0, max: 8 }), { nil: undefined }),
});

test('planCommit applies batches exactly as the in-memory reference store does (model check)', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.record({ updates: fc.array(updateArb, { minLength: 1, maxLength: 3 }), token: fc.constantFrom(1, 1, 1, 0, 2), retry: fc.boolean() }), { maxLength: 25 }),
      async (batches) => {
        const realm = new MemoryHostRealm();
        const ref = realm.open();
        await ref.acquireFence('exclusive'); // token 1
        const plan = new PlanStore(1);
        let n = 0;
        let last: CommitBatch | null = null;
        for (const b of batches) {
          let batch: CommitBatch;
          if (b.retry && last !== null) batch = last;
          else {
            const seen = new Set<number>();
            const updates: ScopeUpdate[] = [];
            for (const u of b.updates) {
              if (seen.has(u.scope)) continue;
              seen.add(u.scope);
              const scope = SCOPES[u.scope] as ScopeRef;
              const head = await ref.loadHead(scope);
              const v = head?.version ?? null;
              if (u.kind === 'create' || v === null) updates.push({ scope, previous: null, next: 1, head: new Uint8Array([u.head ?? 0]), append: u.append.map((x) => new Uint8Array([x])) });
              else if (u.kind === 'delete') updates.push({ scope, previous: v, next: v + 1, delete: true });
              else {
                const previous = u.kind === 'stale' ? Math.max(1, v - 1) : v;
                const upd: ScopeUpdate = { scope, previous, next: previous + 1, append: u.append.map((x) => new Uint8Array([x])) };
                if (u.head !== undefined) upd.head = new Uint8Array([u.head]);
                if (u.truncateAfter !== undefined) upd.truncateAfter = u.truncateAfter;
                if (u.dropBefore !== undefined) upd.dropBefore = u.dropBefore;
                updates.push(upd);
              }
            }
            batch = CommitBatch.tryNew(`c${++n}`, b.token, updates);
          }
          last = batch;
          const outcome = async (f: () => unknown): Promise<string> => {
            try {
              await f();
              return 'ok';
            } catch (err) {
              assert.ok(err instanceof HostStoreError, String(err));
              return err.code;
            }
          };
          const expected = await outcome(() => ref.commit(batch));
          const got = await outcome(() => plan.commit(batch));
          assert.equal(got, expected, `batch ${batch.commitId}`);
        }
        for (const scope of SCOPES) {
          const head = await ref.loadHead(scope);
          const meta = plan.metas.get(plan.key(scope));
          const mine = meta === undefined || meta.deleted ? null : { version: meta.version, commitId: meta.commitId, head: [...meta.head] };
          assert.deepEqual(mine, head === null ? null : { version: head.version, commitId: head.commitId, head: [...head.head] });
          const first = meta === undefined || meta.deleted ? 0 : meta.first;
          const rows = head === null ? [] : (await ref.readRows(scope, first, 100)).map((r) => [r.index, ...r.data]);
          assert.deepEqual(plan.visibleRows(scope), rows);
        }
      },
    ),
    { numRuns: 150 },
  );
});

test('planCommit: a retry of a landed batch answers landed; a lower token is FENCED_OUT, a higher one INVALID', () => {
  const scope: ScopeRef = { kind: 'record', name: 'x' };
  const create = CommitBatch.tryNew('c1', 3, [{ scope, previous: null, next: 1, head: new Uint8Array([1]) }]);
  const store = new PlanStore(3);
  store.commit(create);
  assert.deepEqual(planCommit(create, 3, (s) => store.metas.get(store.key(s)) ?? null), { landed: true });
  assert.deepEqual(planCommit(create, 9, (s) => store.metas.get(store.key(s)) ?? null), { landed: true }, 'a landed batch answers Ok even after a newer acquire');
  const next = CommitBatch.tryNew('c2', 3, [{ scope, previous: 1, next: 2, append: [new Uint8Array([7])] }]);
  assert.throws(() => planCommit(next, 4, () => null), (e: unknown) => e instanceof HostStoreError && e.code === 'FENCED_OUT' && e.current === 4);
  assert.throws(() => planCommit(next, 2, () => null), (e: unknown) => e instanceof HostStoreError && e.code === 'INVALID');
  assert.throws(() => planCommit(next, 3, () => null), (e: unknown) => e instanceof HostStoreError && e.code === 'CONFLICT' && e.current === null);
});

test('planCommit: dropBefore past the end removes every row and leaves the end; truncateAfter below the first is INVALID', () => {
  const scope: ScopeRef = { kind: 'session', name: 's' };
  const s = new PlanStore(1);
  const rows = [1, 2, 3].map((x) => new Uint8Array([x]));
  s.commit(CommitBatch.tryNew('a', 1, [{ scope, previous: null, next: 1, head: new Uint8Array(0), append: rows }]));
  s.commit(CommitBatch.tryNew('b', 1, [{ scope, previous: 1, next: 2, dropBefore: 10 }]));
  const m = s.metas.get(s.key(scope)) as ScopeMeta;
  assert.deepEqual([m.first, m.end], [3, 3]);
  assert.throws(
    () => s.commit(CommitBatch.tryNew('c', 1, [{ scope, previous: 2, next: 3, truncateAfter: 1 }])),
    (e: unknown) => e instanceof HostStoreError && e.code === 'INVALID',
  );
  s.commit(CommitBatch.tryNew('d', 1, [{ scope, previous: 2, next: 3, append: [new Uint8Array([9])] }]));
  assert.deepEqual(s.visibleRows(scope), [[3, 9]]);
});

test('planAcquire and planRenew: HELD while live, takeover reports the remaining lease, a reboot ends leases', () => {
  const first = planAcquire('exclusive', null, 'p1', 1000, 'boot-a', 30_000);
  assert.deepEqual(first.grant, { token: 1, supersededLease: 0 });
  assert.throws(() => planAcquire('exclusive', first.record, 'p2', 11_000, 'boot-a', 30_000), (e: unknown) => e instanceof HostStoreError && e.code === 'HELD' && e.remaining === 20_000);
  assert.deepEqual(planAcquire('takeover', first.record, 'p2', 11_000, 'boot-a', 30_000).grant, { token: 2, supersededLease: 20_000 });
  assert.deepEqual(planAcquire('exclusive', first.record, 'p2', 11_000, 'boot-b', 30_000).grant, { token: 2, supersededLease: 0 });
  assert.equal(planRenew(1, first.record, 50_000, 'boot-a', 30_000).leaseUntil, 80_000, 'a lapsed holder still renews its current token');
  assert.throws(() => planRenew(0, first.record, 0, 'boot-a', 30_000), (e: unknown) => e instanceof HostStoreError && e.code === 'FENCED_OUT');
  assert.throws(() => planRenew(2, first.record, 0, 'boot-a', 30_000), (e: unknown) => e instanceof HostStoreError && e.code === 'INVALID');
});

test('scope metadata round-trips through its binary form', () => {
  fc.assert(
    fc.property(
      fc.record({
        version: fc.integer({ min: 1, max: 2 ** 40 }),
        commitId: fc.string({ minLength: 1, maxLength: 40 }),
        head: fc.uint8Array({ maxLength: 64 }),
        first: fc.integer({ min: 0, max: 1000 }),
        span: fc.integer({ min: 0, max: 1000 }),
        deleted: fc.boolean(),
      }),
      (m) => {
        const meta: ScopeMeta = { version: m.version, commitId: m.commitId, head: m.head, first: m.first, end: m.first + m.span, deleted: m.deleted };
        const back = decodeScopeMeta(encodeScopeMeta(meta));
        assert.deepEqual({ ...back, head: [...back.head] }, { ...meta, head: [...meta.head] });
      },
    ),
  );
});

test('lmdb keys: scopes sort by kind then UTF-8 bytes of the name; rows by index, inside their scope', () => {
  const names = ['b', 'a', 'ab', '\u{1F600}', '\uFFFD', 'a b'];
  const sorted = [...names].map((n) => scopeKeyBytes('session', n)).sort(Buffer.compare).map((k) => k.toString('utf8', 1));
  assert.deepEqual(sorted, [...names].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y))));
  assert.ok(Buffer.compare(scopeKeyBytes('session', 'zzz'), scopeKeyBytes('identity', 'a')) < 0);
  const k = scopeKeyBytes('mob', 'a');
  const rows = [300, 2, 256, 1, 2 ** 40].map((i) => rowKeyBytes(k, i)).sort(Buffer.compare).map((b) => Number(b.readBigUInt64BE(b.length - 8)));
  assert.deepEqual(rows, [1, 2, 256, 300, 2 ** 40]);
  // Every row of scope "a" sorts before scope "a " (its key is a prefix plus NUL).
  assert.ok(Buffer.compare(rowKeyBytes(k, 2 ** 40), scopeKeyBytes('mob', 'a ')) < 0);
});

// ---------------------------------------------------------------- ratios to the best peer and targets

test('pairedRatiosToBest: each run against the fastest competitor of the same round', () => {
  assert.deepEqual(pairedRatiosToBest([10, 30, 20], [[5, 40, 10], [8, 10, 40]]), [10 / 8, 30 / 40, 20 / 40]);
  assert.throws(() => pairedRatiosToBest([1], []), /competitor/);
  assert.throws(() => pairedRatiosToBest([1, 2], [[1]]), /equal run counts/);
  const run = (recordsPerSec: number) => ({ recordsPerSec }) as RunMetrics;
  const s = ratioToBest([run(100), run(300), run(200)], [[run(50), run(100), run(400)], [run(200), run(150), run(100)]]);
  assert.deepEqual(s, summarize([0.5, 2, 0.5]));
});

async function storesSections(withSeglog: boolean): Promise<SectionResult[]> {
  const rates: Record<string, number[]> = {
    'raw-300': [1000, 2000, 1000, 1000, 1000],
    'host-1/sqlite': [900, 1800, 900, 900, 900],
    'host-200/sqlite': [1000, 1000, 1000, 1000, 1000],
    'host-200/lmdb': [20_000, 40_000, 20_000, 10_000, 20_000],
    ...(withSeglog ? { 'host-1/seglog': [950, 1900, 950, 950, 950], 'host-200/seglog': [30_000, 30_000, 30_000, 30_000, 30_000] } : {}),
  };
  const variants = scriptedVariants(rates);
  const host = await runSection({ id: 'host-commits', title: 't', description: 'd', variants, baseline: 'raw-300', rounds: 5, warmupRounds: 0, budget: { durationMs: 1, maxOps: 1, minOps: 1 } });
  const open: SectionResult = {
    ...host,
    id: 'host-open',
    variants: [],
    baseline: null,
    measurements: withSeglog
      ? [{ id: 'open-list-realm/seglog', label: 'open', unit: 'ms', params: {}, runs: [300, 400, 500, 350, 450], summary: summarize([300, 400, 500, 350, 450]), notes: [] }]
      : [],
  };
  const rss: SectionResult = {
    ...open,
    id: 'payload-rss',
    measurements: [{ id: 'payload-rss-growth/seglog', label: 'rss', unit: 'MiB', params: {}, runs: [20, 30, 25, 22, 70], summary: summarize([20, 30, 25, 22, 70]), notes: [] }],
  };
  const snapshot: SectionResult = {
    ...open,
    id: 'raft-snapshot-rss',
    measurements: [{ id: 'raft-snapshot-rss-growth/seglog', label: 'snap', unit: 'MiB', params: {}, runs: [50, 48, 52, 70, 49], summary: summarize([50, 48, 52, 70, 49]), notes: [] }],
  };
  return [host, open, rss, snapshot];
}

test('collectStoreTargets: judges the host store against raw and the faster peer per round; says why when not measured', async () => {
  const why = { host: null, raft: `${NOT_BUILT}: no openRaftNode`, payloads: null, peers: null };
  const full = { realmScopes: 10_000, bigPayloadBytes: 1024 * MIB, snapshotBytes: 1024 * MIB, payloadBytes: 16 * MIB, largePayloadBytes: 33 * MIB, logBytes: 1024 * MIB };
  const byId = new Map(collectStoreTargets(await storesSections(true), full, why).map((t) => [t.id, t]));
  assert.ok(Math.abs((byId.get('host-one-scope')?.measured ?? 0) - 0.95) < 1e-9);
  assert.equal(byId.get('host-one-scope')?.met, true);
  // Per round: 30000 / max(1000, lmdb) = 1.5, 0.75, 1.5, 3, 1.5 → median 1.5.
  assert.equal(byId.get('host-200-scopes-vs-peers')?.measured, 1.5);
  assert.equal(byId.get('host-200-scopes-vs-peers')?.met, true);
  assert.equal(byId.get('host-open-10k-scopes')?.measured, 400);
  assert.equal(byId.get('host-open-10k-scopes')?.met, true);
  assert.equal(byId.get('raft-one-per-append')?.met, null);
  assert.match(byId.get('raft-one-per-append')?.note ?? '', /NOT MEASURED \(store not built\)/);
  assert.equal(byId.get('payload-1gib-rss')?.measured, 25);
  assert.equal(byId.get('payload-1gib-rss')?.met, true);
  assert.equal(byId.get('raft-snapshot-1gib-rss')?.measured, 50);
  assert.equal(byId.get('raft-snapshot-1gib-rss')?.met, true);

  const small = new Map(collectStoreTargets(await storesSections(true), { realmScopes: 1000, bigPayloadBytes: 64 * MIB, snapshotBytes: 32 * MIB, payloadBytes: 4 * MIB, largePayloadBytes: 8 * MIB, logBytes: 32 * MIB }, why).map((t) => [t.id, t]));
  assert.equal(small.get('host-open-10k-scopes')?.met, null, 'a smaller realm is not judged');
  assert.equal(small.get('payload-1gib-rss')?.met, null, 'a smaller payload is not judged');
  assert.equal(small.get('raft-snapshot-1gib-rss')?.met, null, 'a smaller snapshot is not judged');
  assert.match(small.get('raft-snapshot-1gib-rss')?.note ?? '', /not 1 GiB: not judged/);

  const notBuilt = collectStoreTargets(await storesSections(false), full, { ...why, host: `${NOT_BUILT}: the package exports no openFsHostStore` });
  const noSnapshot = collectStoreTargets((await storesSections(true)).filter((x) => x.id !== 'raft-snapshot-rss'), full, why).find((t) => t.id === 'raft-snapshot-1gib-rss');
  assert.equal(noSnapshot?.met, null);
  assert.match(noSnapshot?.note ?? '', /^NOT MEASURED \(store not built\)/);
  for (const id of ['host-one-scope', 'host-200-scopes-vs-peers', 'host-open-10k-scopes']) {
    const t = notBuilt.find((x) => x.id === id);
    assert.equal(t?.measured, null);
    assert.equal(t?.met, null);
    assert.match(t?.note ?? '', /^NOT MEASURED \(store not built\)/);
  }
});

test('collectStoreTargets: the Raft open and 1,000-group targets, the 8× open paired by round with the 1× open', async () => {
  const [host] = await storesSections(true);
  const m = (id: string, unit: 'ms' | 'MiB' | 'KiB' | 'count', runs: number[]) => ({ id, label: id, unit, params: {}, runs, summary: summarize(runs), notes: [] });
  const base = host as SectionResult;
  const open: SectionResult = {
    ...base,
    id: 'raft-open',
    variants: [],
    baseline: null,
    measurements: [
      m('open-log/seglog', 'ms', [10, 20, 15]),
      m('open-log-8x/seglog', 'ms', [11, 30, 15]),
      m('rss-open-log/seglog', 'MiB', [1, 2, 1.5]),
      m('rss-open-log-8x/seglog', 'MiB', [3, 5, 4.5]),
    ],
  };
  const groups: SectionResult = {
    ...base,
    id: 'raft-groups',
    variants: [],
    baseline: null,
    measurements: [m('raft-groups-open-read/seglog', 'ms', [600, 700, 650]), m('raft-groups-fds/seglog', 'count', [535, 535, 536]), m('raft-groups-disk-allocated/seglog', 'KiB', [16, 16, 16]), m('raft-groups-rss/seglog', 'KiB', [40, 50, 45])],
  };
  const why = { host: null, raft: null, payloads: null, peers: null };
  const full = { realmScopes: 10_000, bigPayloadBytes: 1024 * MIB, snapshotBytes: 1024 * MIB, payloadBytes: 16 * MIB, largePayloadBytes: 33 * MIB, logBytes: 1024 * MIB };
  const byId = new Map(collectStoreTargets([open, groups], full, why).map((t) => [t.id, t]));
  assert.equal(byId.get('raft-open-1gib')?.measured, 15);
  assert.equal(byId.get('raft-open-1gib')?.met, true);
  // Per round 8x / 1x: 1.1, 1.5, 1 → median 1.1.
  assert.ok(Math.abs((byId.get('raft-open-8x-vs-1x')?.measured ?? 0) - 1.1) < 1e-9);
  assert.equal(byId.get('raft-open-8x-vs-1x')?.met, true);
  assert.equal(byId.get('raft-open-rss')?.measured, 4.5, 'the larger of the two medians');
  assert.equal(byId.get('raft-open-rss')?.met, false);
  assert.equal(byId.get('raft-groups-open-read-1000')?.met, false);
  assert.equal(byId.get('raft-groups-fds-1000')?.met, true);
  assert.equal(byId.get('raft-groups-disk-allocated-1000')?.met, true, 'at most 16 KiB: 16 is met');
  assert.equal(byId.get('raft-groups-rss-1000')?.met, false);
  const small = new Map(collectStoreTargets([open], { ...full, logBytes: 32 * MIB }, why).map((t) => [t.id, t]));
  assert.equal(small.get('raft-open-1gib')?.met, null, 'a smaller log is not judged');
  assert.match(small.get('raft-open-8x-vs-1x')?.note ?? '', /not judged/);
  assert.equal(small.get('raft-groups-fds-1000')?.met, null, 'the groups section did not run');
  const no8x = new Map(collectStoreTargets([{ ...open, measurements: open.measurements.filter((x) => !x.id.includes('-8x')) }], full, why).map((t) => [t.id, t]));
  assert.equal(no8x.get('raft-open-8x-vs-1x')?.measured, null);
  assert.match(no8x.get('raft-open-8x-vs-1x')?.note ?? '', /was not measured/);
  assert.equal(no8x.get('raft-open-rss')?.measured, 1.5);
});

/** A section of variants with the given ops/s, round by round. */
async function rateSection(id: string, rates: Record<string, number[]>, baseline: string): Promise<SectionResult> {
  const variants = Object.keys(rates).map((v) => ({
    id: v,
    label: v,
    async run() {
      const r = rates[v]?.shift() ?? 1;
      return { ops: 10, records: 10, bytes: 10 * MIB, elapsedNs: (10 / r) * 1e9, latenciesNs: new Float64Array(10).fill(1000) };
    },
  }));
  return runSection({ id, title: id, description: 'd', variants, baseline, rounds: 3, warmupRounds: 0, budget: { durationMs: 1, maxOps: 1, minOps: 1 } });
}

test('collectStoreTargets: payload put and get against raw at 16 MiB and 33 MiB, and 4 puts at once against one, paired by round', async () => {
  const sections = [
    await rateSection('payload-put', { 'raw-write-fsync': [100, 200, 100], 'put/seglog': [90, 160, 70] }, 'raw-write-fsync'),
    await rateSection('payload-get-large', { 'raw-read': [100, 100, 100], 'get/seglog': [70, 90, 60] }, 'raw-read'),
    await rateSection(
      'payload-put-concurrent',
      { [concurrentVariantId('seglog', 'put', 1)]: [10, 20, 10], [concurrentVariantId('raw', 'put', 4)]: [40, 40, 40], [concurrentVariantId('seglog', 'put', 4)]: [16, 40, 12] },
      concurrentVariantId('seglog', 'put', 1),
    ),
  ];
  const why = { host: null, raft: null, payloads: null, peers: null };
  const full = { realmScopes: 10_000, bigPayloadBytes: 1024 * MIB, snapshotBytes: 1024 * MIB, payloadBytes: 16 * MIB, largePayloadBytes: 33 * MIB, logBytes: 1024 * MIB };
  const byId = new Map(collectStoreTargets(sections, full, why).map((t) => [t.id, t]));
  // put: 0.9, 0.8, 0.7 → median 0.8 (met at >= 0.8); get 33 MiB: 0.7, 0.9, 0.6 → 0.7 (not met).
  assert.ok(Math.abs((byId.get('payload-put-vs-raw')?.measured ?? 0) - 0.8) < 1e-9);
  assert.equal(byId.get('payload-put-vs-raw')?.met, true);
  assert.ok(Math.abs((byId.get('payload-get-large-vs-raw')?.measured ?? 0) - 0.7) < 1e-9);
  assert.equal(byId.get('payload-get-large-vs-raw')?.met, false);
  for (const id of ['payload-put-large-vs-raw', 'payload-get-vs-raw']) {
    assert.equal(byId.get(id)?.measured, null, id);
    assert.equal(byId.get(id)?.met, null, id);
  }
  // 4 at once over one at a time: 1.6, 2, 1.2 → 1.6.
  assert.ok(Math.abs((byId.get('payload-4-puts-vs-one')?.measured ?? 0) - 1.6) < 1e-9);
  assert.equal(byId.get('payload-4-puts-vs-one')?.met, true);
  const quick = new Map(collectStoreTargets(sections, { ...full, payloadBytes: 4 * MIB, largePayloadBytes: 8 * MIB, logBytes: 32 * MIB }, why).map((t) => [t.id, t]));
  for (const id of ['payload-put-vs-raw', 'payload-get-large-vs-raw', 'payload-4-puts-vs-one']) {
    assert.equal(quick.get(id)?.met, null, `${id}: smaller payloads are not judged`);
    assert.match(quick.get(id)?.note ?? '', /not judged/);
  }
  const notes = concurrentPayloadNotes(sections[2] as SectionResult, storesConfig('/x', false, 3), 'put');
  // 4 at once against raw 4 at once: 0.4, 1, 0.3 → 0.40 (0.30–1.00); one at a time has no raw row here.
  assert.deepEqual(notes, ['put, 4 at once, against raw at the same concurrency: 0.40× (0.30–1.00).']);
});

test('payloadBudget: whole rounds of workers, at least two operations each, within the byte cap', () => {
  assert.deepEqual(payloadBudget(16 * MIB, 16, 512 * MIB), { maxOps: 32 });
  assert.deepEqual(payloadBudget(16 * MIB, 4, 512 * MIB), { maxOps: 32 });
  assert.deepEqual(payloadBudget(MIB, 16, 512 * MIB), { maxOps: 512 });
  assert.deepEqual(payloadBudget(33 * MIB, 1, 128 * MIB), { maxOps: 3 });
  assert.deepEqual(payloadBudget(33 * MIB, 16, 128 * MIB), { maxOps: 32 }, 'two each even past the cap');
});

test('durationTarget: under 60 s for --quick, under 10 minutes for the full run', () => {
  assert.equal(durationTarget(true, 59_000).met, true);
  assert.equal(durationTarget(true, 61_000).met, false);
  assert.equal(durationTarget(false, 599_000).met, true);
  assert.equal(durationTarget(false, 600_000).met, false);
  assert.equal(durationTarget(false, 1).unit, 's');
  const partial = durationTarget(false, 1000, true);
  assert.equal(partial.met, null, 'a run of some sections (--only) is not judged');
  assert.match(partial.note, /--only/);
});

test('--only: runsSection selects the named sections, every one when absent', () => {
  assert.ok(STORES_SECTION_IDS.every((id) => runsSection({}, id)));
  const only = storesConfig('/x', false, 5, { only: ['raft-1mib'] });
  assert.deepEqual(STORES_SECTION_IDS.filter((id) => runsSection(only, id)), ['raft-1mib']);
});

test('storesConfig: quick and full sizes, overrides, and at least 5 runs of every child measurement', () => {
  const quick = storesConfig('/x', true, 5);
  const full = storesConfig('/x', false, 5, { realmScopes: 123 });
  assert.equal(quick.realmScopes, 1000);
  assert.equal(full.realmScopes, 123);
  assert.equal(full.logBytes, 1024 * MIB);
  assert.equal(full.bigPayloadBytes, 1024 * MIB);
  assert.equal(full.snapshotBytes, 1024 * MIB);
  assert.ok(quick.snapshotBytes < full.snapshotBytes, 'quick measures a smaller snapshot');
  assert.ok(quick.childRuns >= 5 && full.childRuns >= 5);
  assert.equal(full.processPerRun, true, 'a full run opens every store in a fresh process');
});

test('a stores report with memory measurements validates and renders its units; an unknown unit does not validate', async () => {
  const sections = await storesSections(true);
  const report: BenchReport = {
    schema: REPORT_SCHEMA_ID,
    version: REPORT_VERSION,
    command: 'seglog bench stores',
    quick: false,
    startedAt: new Date(0).toISOString(),
    finishedAt: new Date(1000).toISOString(),
    durationMs: 1000,
    units: { latency: 'us', throughput: 'MiB/s', rate: 'per second', size: 'bytes' },
    machine: describeMachine(os.tmpdir()),
    load: { start: 0, end: 0 },
    sections,
    targets: [...collectStoreTargets(sections, { realmScopes: 10_000, bigPayloadBytes: 1024 * MIB, snapshotBytes: 1024 * MIB, payloadBytes: 16 * MIB, largePayloadBytes: 33 * MIB, logBytes: 1024 * MIB }, { host: null, raft: null, payloads: null, peers: null }), durationTarget(false, 1000)],
    notes: [],
  };
  assert.deepEqual(validateReport(JSON.parse(JSON.stringify(report))), []);
  const md = renderMarkdown(report);
  assert.match(md, /\| rss \| 25 MiB \(20–70\) \| 5 \|/);
  assert.match(md, /\| open \| 400 ms \(300–500\) \| 5 \|/);
  const bad = JSON.parse(JSON.stringify(report)) as { sections: { measurements: { unit: string }[] }[] };
  (bad.sections[2]?.measurements[0] as { unit: string }).unit = 'GB';
  assert.ok(validateReport(bad).some((p) => /unit/.test(p)));
});

// ---------------------------------------------------------------- workload plumbing (reference stores, never reported)

test('host workload: each writer moves its own scope one version per commit, with a head and one row', async () => {
  const parent = await mkdtemp(path.join(os.tmpdir(), 'seglog-bench-stores-'));
  try {
    const realms: MemoryHostRealm[] = [];
    const reference: StoreImplementation<HostStore & { close(): Promise<void> }> = {
      name: 'memory-reference',
      label: 'in-memory reference store (plumbing test only)',
      open: async () => {
        const realm = new MemoryHostRealm();
        realms.push(realm);
        return realm.open();
      },
      close: (h) => h.close(),
    };
    const w = hostCommitWorkload({ id: 'h', label: 'h', scopes: 3, shape: { headBytes: 10, rowBytes: 20 } });
    const section = await runSection({
      id: 's',
      title: '',
      description: '',
      variants: sideBySide(w, [reference], parent),
      rounds: 5,
      warmupRounds: 1,
      budget: { durationMs: 60_000, maxOps: 12, minOps: 0 },
    });
    const v = section.variants[0];
    assert.equal(v?.summary.samples, 60);
    assert.equal(v?.runs[0]?.bytes, 12 * 30);
    // 12 ops per run over 3 writers, 6 runs (1 warm-up of 3 ops): every scope got its share.
    const store = (realms[0] as MemoryHostRealm).open(); // a later process's view of the realm
    let total = 0;
    for (let i = 0; i < 3; i++) {
      const scope: ScopeRef = { kind: 'session', name: `bench-h-${i}` };
      const head = await store.loadHead(scope);
      const rows = await store.readRows(scope, 0, 1000);
      assert.equal(rows.length, (head?.version ?? 0) - 1, 'one row per commit after the creating one');
      assert.equal(head?.head.length, 10);
      total += rows.length;
    }
    assert.equal(total, 63);
  } finally {
    await rm(parent, { recursive: true, force: true });
  }
});

test('raft workload: appends in flight take consecutive indices, 64 groups each their own, purge between runs', async () => {
  const parent = await mkdtemp(path.join(os.tmpdir(), 'seglog-bench-stores-'));
  try {
    const groups = new Map<string, RaftLogStorage>();
    const reference: StoreImplementation<RaftNodeHandle> = {
      name: 'memory-reference',
      label: 'in-memory reference group (plumbing test only)',
      open: async () => ({
        async openGroup(id) {
          const g = await openMemoryRaftGroup(new MemoryRaftDisk(), { plugin: kvPlugin });
          groups.set(id, g.log);
          return g.log;
        },
        async close() {},
      }),
      close: (h) => h.close(),
    };
    const budget = { durationMs: 60_000, maxOps: 70, minOps: 0 };
    const inFlight = raftAppendWorkload({ id: 'f', label: 'f', groups: 1, perGroup: 16, entryBytes: 8 });
    const many = raftAppendWorkload({ id: 'g', label: 'g', groups: 4, perGroup: 1, entryBytes: 8 });
    const big = raftAppendWorkload({ id: 'b', label: 'b', groups: 1, perGroup: 1, entryBytes: 8, purgeBetweenRuns: true });
    await runSection({ id: 's', title: '', description: '', variants: sideBySide(inFlight, [reference], parent), rounds: 5, warmupRounds: 0, budget });
    await runSection({ id: 's', title: '', description: '', variants: sideBySide(many, [reference], parent), rounds: 5, warmupRounds: 0, budget });
    await runSection({ id: 's', title: '', description: '', variants: sideBySide(big, [reference], parent), rounds: 5, warmupRounds: 0, budget });
    const f = groups.get('f-g0') as RaftLogStorage;
    const entries = await f.tryGetLogEntries(0, 1000);
    assert.deepEqual(entries.map((e) => e.logId.index), Array.from({ length: 350 }, (_, i) => i + 1));
    let sum = 0;
    for (let g = 0; g < 4; g++) {
      const st = await (groups.get(`g-g${g}`) as RaftLogStorage).getLogState();
      sum += st.lastLogId?.index ?? 0;
    }
    assert.equal(sum, 350);
    const b = await (groups.get('b-g0') as RaftLogStorage).getLogState();
    assert.equal(b.lastLogId?.index, 350);
    assert.equal(b.lastPurgedLogId?.index, 280, 'the entries of the first four runs were purged before the next');
    assert.deepEqual(await (groups.get('f-g0') as RaftLogStorage).readVote(), { leaderId: { term: 1, nodeId: 1 }, committed: true });
  } finally {
    await rm(parent, { recursive: true, force: true });
  }
});

test('generatedBody: the exact size in chunks of the pattern, and no two bodies alike', async () => {
  const pattern = Buffer.alloc(64, 7);
  const collect = async (bytes: number, seq: number): Promise<Buffer> => {
    const parts: Buffer[] = [];
    for await (const c of generatedBody(bytes, seq, pattern)) {
      assert.ok(c.length <= 64);
      parts.push(Buffer.from(c));
    }
    return Buffer.concat(parts);
  };
  const a = await collect(200, 1);
  const b = await collect(200, 1);
  const c = await collect(200, 2);
  assert.equal(a.length, 200);
  assert.equal((await collect(0, 1)).length, 0);
  assert.equal((await collect(5, 1)).length, 5);
  assert.notDeepEqual(a, b, 'a random nonce makes every body different');
  assert.notDeepEqual(a.subarray(8, 16), c.subarray(8, 16), 'the sequence number is stamped');
  assert.deepEqual(a.subarray(64), Buffer.alloc(136, 7), 'past the first chunk, the pattern');
});

test('loadPeers: without an install it answers why and how to install, never throws', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'seglog-bench-nopeers-'));
  try {
    const none = loadPeers(path.join(dir, 'absent'));
    assert.equal(none.ok, false);
    await writeFile(path.join(dir, 'package.json'), '{"name":"x","private":true}');
    const empty = loadPeers(dir);
    assert.equal(empty.ok, false);
    if (!empty.ok) assert.match(empty.missing, /npm run bench:peers/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('render --into: a stores report goes between its own markers and leaves the rest of the page alone', async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'seglog-bench-stores-'));
  try {
    const sections = await storesSections(true);
    const report: BenchReport = {
      schema: REPORT_SCHEMA_ID,
      version: REPORT_VERSION,
      command: 'seglog bench stores',
      quick: false,
      startedAt: new Date(0).toISOString(),
      finishedAt: new Date(1000).toISOString(),
      durationMs: 1000,
      units: { latency: 'us', throughput: 'MiB/s', rate: 'per second', size: 'bytes' },
      machine: describeMachine(os.tmpdir()),
      load: { start: 0, end: 0 },
      sections,
      targets: [],
      notes: [],
    };
    const doc = path.join(dir, 'doc.md');
    await writeFile(doc, `# B\n\nbefore\n\n${STORES_BEGIN}\n\nold stores report\n\n${STORES_END}\n\nafter\n\n${REPORT_MARKER}\n\nthe other report\n`);
    await spliceInto(doc, report, null, undefined);
    const text = await readFile(doc, 'utf8');
    assert.ok(text.startsWith(`# B\n\nbefore\n\n${STORES_BEGIN}\n\n## seglog benchmark report`));
    assert.ok(!text.includes('old stores report'));
    assert.ok(text.includes(`${STORES_END}\n\nafter\n\n${REPORT_MARKER}\n\nthe other report\n`));
    await writeFile(doc, `no markers\n${REPORT_MARKER}\n`);
    await assert.rejects(spliceInto(doc, report, null, undefined), /has no line/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('host-commits: the bare segmented log rows stand beside the one-writer commit, and a note gives the ratio paired by round', async () => {
  const cfg = storesConfig('/tmp/seglog-bench-test', true, 3);
  const impls = { available: [], missing: {} };
  const withLog = hostCommitSection(cfg, impls, async () => {
    throw new Error('not opened by planning');
  });
  assert.deepEqual(
    withLog.variants.map((v) => v.id).filter((id) => id.startsWith('segments-')),
    PRIMITIVE_ROWS.map((r) => r.id),
  );
  assert.deepEqual(PRIMITIVE_ROWS.map((r) => r.size), [256, 300]);
  const without = hostCommitSection(cfg, impls, null);
  assert.equal(without.variants.some((v) => v.id.startsWith('segments-')), false);
  assert.ok((without.notes ?? []).some((n) => n.includes('segmented log rows are not measured')));

  const rates: Record<string, number[]> = {
    'raw-300': [1000, 1000, 1000],
    'segments-300': [2000, 4000, 1000],
    'host-1/seglog': [1000, 1000, 1500],
  };
  const variants = scriptedVariants(rates);
  const section = await runSection({ id: 'host-commits', title: 't', description: 'd', variants, baseline: 'raw-300', rounds: 3, warmupRounds: 0, budget: { durationMs: 1, maxOps: 1, minOps: 1 } });
  // Per round: 1000/2000, 1000/4000, 1500/1000 → median 0.5.
  assert.match(primitiveNote(section) ?? '', /: 0\.500× \(0\.250–1\.500\)/);
  assert.equal(primitiveNote({ ...section, variants: section.variants.filter((v) => v.id !== 'segments-300') }), null);
});

/** One variant per id whose rounds run at the rates given, in order (10 ops of 300 B a round). */
function scriptedVariants(rates: Record<string, number[]>): { id: string; label: string; run(): Promise<{ ops: number; records: number; bytes: number; elapsedNs: number; latenciesNs: Float64Array }> }[] {
  return Object.keys(rates).map((id) => ({
    id,
    label: id,
    async run() {
      const r = rates[id]?.shift() ?? 1;
      return { ops: 10, records: 10, bytes: 3000, elapsedNs: (10 / r) * 1e9, latenciesNs: new Float64Array(10).fill(1000) };
    },
  }));
}

test('the sections of seglog alone (run before the peers are loaded) are the in-process payload sections, and none that needs a peer', () => {
  for (const id of SEGLOG_ALONE_SECTIONS) assert.ok(STORES_SECTION_IDS.includes(id), `${id} is a section`);
  // Every section that pairs seglog with a peer, or runs a child process of its own, stays out.
  for (const id of ['host-commits', 'host-open', 'host-pg', 'raft-appends', 'raft-1mib', 'raft-open', 'raft-snapshot-rss', 'raft-groups', 'payload-rss']) {
    assert.equal(SEGLOG_ALONE_SECTIONS.has(id), false, id);
  }
  for (const id of ['payload-put', 'payload-put-large', 'payload-get', 'payload-get-large', 'payload-put-concurrent-1mib', 'payload-put-concurrent', 'payload-get-concurrent-1mib', 'payload-get-concurrent']) {
    assert.equal(SEGLOG_ALONE_SECTIONS.has(id), true, id);
  }
  assert.equal(SEGLOG_ALONE_SECTIONS.size + 9, STORES_SECTION_IDS.length, 'every section is on one side');
});
