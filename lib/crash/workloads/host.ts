// Crash workload `host`: the file-system host store (lib/host/fs) through commits, fencing,
// checkpoints and kills.
//
// Owns: the `host` workload and its checker. A realm of 2 or 3 stripes with 64 KiB stripe files
// (so stripes roll) under /data/realm, driven by a seeded plan: single-scope commits (creates,
// appends, head changes), multi-scope commits across stripes, truncateAfter, dropBefore, delete,
// bursts of concurrent commits on disjoint scopes (group commit), rows large enough to roll files,
// and explicit checkpoint rounds (so homes are written mid-run). Process A acquires the fence and
// commits; process B opens, takes the fence over, and A's next commit must answer FENCED_OUT;
// B commits and checkpoints, then is killed inside a commit (at a stripe's fdatasync); process D
// opens and loads the killed batch's scope before anyone acquires (a load that finds the dead
// writer's unpublished record settles it: its answer is the batch's fate for good, and after a
// settlement every crash state must show the batch); process C opens, takes over, must see the
// killed batch exactly as D did, observes, and commits more.
// The checker opens the store on the crash image (a new boot) and requires, scope by scope, a
// state from that scope's history, such that: every batch acknowledged before the crash shows;
// every batch shows in all of its scopes or in none; nothing of a batch that was refused
// (FENCED_OUT) ever shows; a second open (another process) shows the same; a new acquire answers a
// token above every acknowledged one, both processes show the same again after that acquire, and
// a commit on top of what shows lands.

import { ManualClock } from '../../clock.js';
import { MemoryFs } from '../../fs/memory.js';
import { FaultyFs } from '../../fs/faulty.js';
import type { FileSystem } from '../../fs/types.js';
import { CommitBatch } from '../../host/batch.js';
import { scopeDigest } from '../../host/fs/format.js';
import { openFsHostStore, type FsHostStore, type FsHostStoreOptions } from '../../host/fs/store.js';
import type { HostMistakes } from '../../host/fs/stripe.js';
import { scopeKey } from '../../host/names.js';
import { FenceTiming } from '../../host/timing.js';
import type { ScopeKind, ScopeRef, ScopeUpdate } from '../../host/types.js';
import { randomInt } from '../determinism.js';
import type { CrashState } from '../explore.js';
import type { CrashWorkload, WorkloadContext, WorkloadRun } from './types.js';

const DIR = '/data/realm';

/** Test-only planted mistakes (lib/host/fs/stripe.ts `HostMistakes`): each must be caught. */
const PLANTS: Record<string, HostMistakes> = {
  'publish-before-sync': { publishBeforeSync: true },
  'skip-fence-check': { skipFenceCheck: true },
  'loads-ignore-unpublished': { loadsIgnoreUnpublished: true },
};
const ACK = 'ack';
const TOKEN = 'token';

/** What one scope shows. */
interface ScopeModel {
  version: number;
  commitId: string;
  head: Buffer;
  first: number;
  rows: Buffer[];
}

interface Entry {
  /** The batch that produced this state (null: the initial absent state). */
  batch: string | null;
  state: ScopeModel | null;
}

interface BatchInfo {
  id: string;
  scopes: string[];
  /** Acknowledged (its commit resolved) at this ack ordinal. */
  label: string;
}

/** The model: per scope, the sequence of states batches lead it through. */
class Model {
  readonly refs = new Map<string, ScopeRef>();
  readonly seqs = new Map<string, Entry[]>();
  readonly batches = new Map<string, BatchInfo>();
  readonly deleted = new Set<string>();

  current(key: string): ScopeModel | null {
    const s = this.seqs.get(key);
    return s === undefined ? null : s[s.length - 1]!.state;
  }

  /** Applies a batch the store accepted (or adopted) to the model. */
  apply(id: string, updates: readonly ScopeUpdate[], label: string): void {
    const scopes: string[] = [];
    for (const u of updates) {
      const key = scopeKey(u.scope);
      this.refs.set(key, u.scope);
      let seq = this.seqs.get(key);
      if (seq === undefined) this.seqs.set(key, (seq = [{ batch: null, state: null }]));
      const cur = seq[seq.length - 1]!.state;
      let next: ScopeModel | null;
      if (u.delete === true) {
        next = null;
        this.deleted.add(key);
      } else if (u.previous === null) {
        next = { version: 1, commitId: id, head: Buffer.from(u.head!), first: 0, rows: (u.append ?? []).map((r) => Buffer.from(r)) };
      } else {
        const c = cur!;
        let rows = [...c.rows];
        let first = c.first;
        let end = first + rows.length;
        if (u.truncateAfter !== undefined && u.truncateAfter < end) {
          rows = rows.slice(0, Math.max(0, u.truncateAfter - first));
          end = first + rows.length;
        }
        if (u.dropBefore !== undefined && u.dropBefore > first) {
          const to = Math.min(u.dropBefore, end);
          rows = rows.slice(to - first);
          first = to;
        }
        rows.push(...(u.append ?? []).map((r) => Buffer.from(r)));
        next = { version: u.next, commitId: id, head: u.head !== undefined ? Buffer.from(u.head) : c.head, first, rows };
      }
      seq.push({ batch: id, state: next });
      scopes.push(key);
    }
    this.batches.set(id, { id, scopes, label });
  }
}

function sameModel(a: ScopeModel | null, b: ScopeModel | null): boolean {
  if (a === null || b === null) return a === b;
  return (
    a.version === b.version &&
    a.commitId === b.commitId &&
    a.head.equals(b.head) &&
    a.first === b.first &&
    a.rows.length === b.rows.length &&
    a.rows.every((r, i) => r.equals(b.rows[i]!))
  );
}

function show(s: ScopeModel | null): string {
  return s === null ? 'absent' : `v${s.version} ${s.commitId} [${s.first}, ${s.first + s.rows.length})`;
}

/** What the store shows of a scope, read against the model's candidate states (by version and commit id). */
async function observe(store: FsHostStore, ref: ScopeRef, candidates: readonly Entry[]): Promise<{ index: number; found: ScopeModel | null }> {
  const head = await store.loadHead(ref);
  if (head === null) {
    const rows = await store.readRows(ref, 0, 10);
    if (rows.length > 0) throw new Error(`${ref.kind}/${ref.name}: no head but rows`);
    // The absent states: the initial one or after a delete. Which one is told by the batches around it.
    const i = candidates.findIndex((c) => c.state === null);
    return { index: i, found: null };
  }
  const index = candidates.findIndex((c) => c.state !== null && c.state.version === head.version && c.state.commitId === head.commitId);
  const want = index < 0 ? null : candidates[index]!.state!;
  const first = want?.first ?? 0;
  const rows = (await store.readRows(ref, first, 1_000_000)).map((r) => Buffer.from(r.data));
  if (first > 0) {
    let below = false;
    try {
      await store.readRows(ref, first - 1, 1);
    } catch (err) {
      below = (err as { code?: unknown }).code === 'INVALID';
    }
    if (!below) throw new Error(`${ref.kind}/${ref.name}: row ${first - 1} below the first row ${first} is readable`);
  }
  return { index, found: { version: head.version, commitId: head.commitId, head: Buffer.from(head.head), first, rows } };
}

/** Names (of `kind`) spread over the stripes: names[k] holds names homed in stripe k. */
function namesByStripe(kind: ScopeKind, stripes: number, perStripe: number, prefix: string): string[][] {
  const out: string[][] = Array.from({ length: stripes }, () => []);
  for (let i = 0; out.some((l) => l.length < perStripe); i++) {
    const name = `${prefix}-${i}`;
    const home = parseInt(scopeDigest(kind, name).slice(0, 8), 16) % stripes;
    if (out[home]!.length < perStripe) out[home]!.push(name);
  }
  return out;
}

function bytes(tag: string, size: number): Buffer {
  const b = Buffer.alloc(size);
  const t = Buffer.from(tag);
  for (let i = 0; i < size; i++) b[i] = i < t.length ? t[i]! : (i * 31 + t.length * 7) & 0xff;
  return b;
}

async function run(context: WorkloadContext): Promise<WorkloadRun> {
  const { fs, random, scale } = context;
  const mistakes = context.plant === null ? {} : PLANTS[context.plant];
  if (mistakes === undefined) throw new RangeError(`host: no planted mistake '${context.plant}'`);
  const stripes = context.seed % 2 === 0 ? 2 : 3;
  const clock = new ManualClock(1_000_000);
  const timing = FenceTiming.tryNew(1000, 3000);
  const options = (view: FileSystem, holder: string): FsHostStoreOptions => ({
    fs: view,
    clock,
    timing,
    holderId: holder,
    bootId: () => 'boot-of-the-run',
    stripes,
    stripeFileBytes: 64 * 1024,
    preallocBytes: 8 * 1024,
    checkpointBytes: Number.MAX_SAFE_INTEGER,
    lockLingerMs: 0,
    lockWaitMs: 10_000,
    ...({ mistakes } as object),
  });
  const model = new Model();
  const kinds: ScopeKind[] = ['session', 'mob', 'record', 'identity'];
  const pool = kinds.flatMap((k) => namesByStripe(k, stripes, 2, k[0]!).flat().map((name) => ({ kind: k, name })));
  const counts: Record<string, number> = {};
  const count = (what: string): void => {
    counts[what] = (counts[what] ?? 0) + 1;
  };
  let serial = 0;
  let acks = 0;
  const maxAckedToken = { value: 0 };

  const live = (): ScopeRef[] => pool.filter((r) => model.current(scopeKey(r)) !== null);
  const fresh = (): ScopeRef[] => pool.filter((r) => !model.seqs.has(scopeKey(r)));
  const pick = <T>(list: readonly T[]): T => list[randomInt(random, 0, list.length - 1)]!;
  const rowsOf = (id: string, n: number): Uint8Array[] =>
    Array.from({ length: n }, (_, i) => bytes(`${id}.r${i}:`, random() < 0.15 ? randomInt(random, 3000, 9000) : randomInt(random, 1, 120)));
  /** An update of `ref` as the model stands (create when absent). */
  const updateOf = (ref: ScopeRef, id: string, kind: string): ScopeUpdate => {
    const cur = model.current(scopeKey(ref));
    if (cur === null) return { scope: ref, previous: null, next: 1, head: bytes(`${id}.h`, randomInt(random, 1, 60)), append: rowsOf(id, randomInt(random, 0, 3)) };
    const u: ScopeUpdate = { scope: ref, previous: cur.version, next: cur.version + 1 };
    const end = cur.first + cur.rows.length;
    if (kind === 'truncate') u.truncateAfter = randomInt(random, cur.first, end);
    if (kind === 'drop') u.dropBefore = randomInt(random, cur.first, end + 2);
    if (kind === 'delete') return { ...u, delete: true };
    if (random() < 0.7) u.append = rowsOf(id, randomInt(random, 1, 3));
    if (random() < 0.5 || kind === 'head') u.head = bytes(`${id}.h`, random() < 0.1 ? 3000 : randomInt(random, 0, 60));
    return u;
  };
  /**
   * Commits a batch and acknowledges it (or answers the acknowledgement to mark, with `later`:
   * concurrent commits are marked once all resolved, so that no mark sits between another
   * commit's write and its sync — the linear pass takes every earlier call as a dependency).
   * `expect` a refusal code instead.
   */
  const commit = async (store: FsHostStore, view: MemoryFs, token: number, updates: ScopeUpdate[], expect?: string, later?: (mark: () => void) => void): Promise<void> => {
    const id = `b${++serial}`;
    try {
      await store.commit(CommitBatch.tryNew(id, token, updates));
    } catch (err) {
      if (expect !== undefined && (err as { code?: unknown }).code === expect) {
        count(`refused ${expect}`);
        return;
      }
      throw err;
    }
    if (expect !== undefined) throw new Error(`host: batch ${id} landed; expected ${expect}`);
    model.apply(id, updates, `ack ${acks + 1}`);
    const mark = (): void => {
      view.mark(ACK, id);
      acks++;
    };
    if (later === undefined) mark();
    else later(mark);
  };
  /** One step of the plan with `store` holding `token`. */
  const step = async (store: FsHostStore, view: MemoryFs, token: number): Promise<void> => {
    const r = random();
    const alive = live();
    const unborn = fresh().filter((x) => !model.deleted.has(scopeKey(x)));
    if (alive.length < 2 || r < 0.15) {
      if (unborn.length === 0) return;
      count('create');
      const a = pick(unborn);
      const b = pick(unborn);
      const refs = a === b || random() < 0.5 ? [a] : [a, b];
      await commit(store, view, token, refs.map((x) => updateOf(x, `b${serial + 1}`, 'create')));
    } else if (r < 0.45) {
      count('single');
      const kind = random() < 0.3 ? 'head' : 'append';
      await commit(store, view, token, [updateOf(pick(alive), `b${serial + 1}`, kind)]);
    } else if (r < 0.6) {
      count('multi');
      const a = pick(alive);
      const others = alive.filter((x) => x !== a);
      const b = pick(others);
      const c = others.length > 1 && random() < 0.4 ? pick(others.filter((x) => x !== b)) : null;
      await commit(store, view, token, [a, b, ...(c === null ? [] : [c])].map((x) => updateOf(x, `b${serial + 1}`, 'append')));
    } else if (r < 0.7) {
      count('truncate');
      await commit(store, view, token, [updateOf(pick(alive), `b${serial + 1}`, 'truncate')]);
    } else if (r < 0.8) {
      count('drop');
      await commit(store, view, token, [updateOf(pick(alive), `b${serial + 1}`, 'drop')]);
    } else if (r < 0.85 && alive.length > 3) {
      count('delete');
      await commit(store, view, token, [updateOf(pick(alive), `b${serial + 1}`, 'delete')]);
    } else {
      count('burst');
      // Concurrent commits on disjoint scopes: one group per stripe.
      const chosen = [...alive].sort(() => random() - 0.5).slice(0, randomInt(random, 2, 4));
      const updates = chosen.map((x, i) => updateOf(x, `b${serial + 1 + i}`, 'append'));
      const marks: (() => void)[] = [];
      await Promise.all(updates.map((u) => commit(store, view, token, [u], undefined, (m) => marks.push(m))));
      for (const m of marks) m();
    }
  };
  const plan = async (store: FsHostStore, view: MemoryFs, token: number, n: number): Promise<void> => {
    for (let i = 0; i < n; i++) await step(store, view, token);
  };
  const acquire = async (store: FsHostStore, view: MemoryFs, mode: 'exclusive' | 'takeover'): Promise<number> => {
    const grant = await store.acquireFence(mode);
    view.mark(TOKEN, grant.token);
    maxAckedToken.value = Math.max(maxAckedToken.value, grant.token);
    count(`acquire ${mode}`);
    return grant.token;
  };
  /** The store must show exactly the model (no crash happened: nothing is in doubt). */
  const expectModel = async (store: FsHostStore, who: string): Promise<void> => {
    for (const [key, seq] of model.seqs) {
      const ref = model.refs.get(key)!;
      const { found } = await observe(store, ref, seq);
      if (!sameModel(found, seq[seq.length - 1]!.state)) throw new Error(`host: ${who} sees ${ref.kind}/${ref.name} as ${show(found)}, expected ${show(seq[seq.length - 1]!.state)}`);
    }
  };
  const n = Math.max(6, Math.round(14 * scale));

  // Process A: acquires, commits, checkpoints once.
  const a = await openFsHostStore(DIR, options(fs, 'A'));
  const tokenA = await acquire(a, fs, 'exclusive');
  await plan(a, fs, tokenA, n);
  await a.checkpoint();
  count('checkpoint');
  await plan(a, fs, tokenA, Math.ceil(n / 2));

  // Process B: opens, takes over; A's next commit is fenced out.
  const viewB = fs.newProcess();
  const faultyB = new FaultyFs(viewB);
  const b = await openFsHostStore(DIR, options(faultyB, 'B'));
  const tokenB = await acquire(b, viewB, 'takeover');
  await expectModel(b, 'process B');
  const target = live()[0]!;
  await commit(a, fs, tokenA, [updateOf(target, `b${serial + 1}`, 'append')], 'FENCED_OUT');
  await plan(b, viewB, tokenB, n);
  await b.checkpoint();
  count('checkpoint');
  await plan(b, viewB, tokenB, Math.ceil(n / 3));
  await a.close();

  // B is killed inside a commit: at the fdatasync of a stripe file.
  const victim = live()[randomInt(random, 0, live().length - 1)]!;
  const killedId = `b${++serial}`;
  const killed = [updateOf(victim, killedId, 'append')];
  // With an even seed the killed batch is nearly a whole stripe file: it rolls the file, and the
  // kill lands inside the roll (at the new file's fdatasync, before its name is durable, before
  // any record is written). With an odd seed it is killed at its own records' fdatasync: they are
  // complete in the page cache, unpublished, and the next load must settle them.
  if (context.seed % 2 === 0) {
    killed[0]!.append = [bytes(`${killedId}.big`, 60 * 1024)];
    count('killed inside a roll');
  }
  const pause = faultyB.pause('datasync', '*.wal');
  const dying = b.commit(CommitBatch.tryNew(killedId, tokenB, killed)).catch(() => undefined);
  await Promise.race([pause.reached, dying]);
  await faultyB.sever();
  count('killed in a commit');

  // Process D: a fresh process loads the killed batch's scope before anyone acquires. Whatever it
  // answers is the batch's fate: the takeover below and every later load must agree, and once it
  // answered that the batch landed, every crash state from then on must show it (the mark).
  const viewD = fs.newProcess();
  const d = await openFsHostStore(DIR, options(viewD, 'D'));
  const settled = (await d.loadHead(victim))?.commitId === killedId;
  await d.close();
  if (settled) {
    model.apply(killedId, killed, 'settled');
    viewD.mark(ACK, killedId);
    count('killed batch settled by a load');
  }

  // Process C: opens, takes over, observes, commits.
  const viewC = fs.newProcess();
  const c = await openFsHostStore(DIR, options(viewC, 'C'));
  const tokenC = await acquire(c, viewC, 'takeover');
  const seen = (await c.loadHead(victim))?.commitId === killedId;
  if (seen !== settled) {
    throw new Error(`host: the killed batch ${killedId} ${settled ? 'showed' : 'did not show'} to a load before the takeover and ${seen ? 'shows' : 'does not show'} after it: loads disagree`);
  }
  await expectModel(c, 'process C');
  await plan(c, viewC, tokenC, Math.ceil(n / 2));
  await c.checkpoint();
  count('checkpoint');
  await plan(c, viewC, tokenC, Math.ceil(n / 3));
  await c.close();

  // What the rounds left: the scope table, and the homes of the scopes that outgrew it.
  const files = Object.keys(fs.currentImage().files);
  const homes = files.filter((f) => f.startsWith(`${DIR}/scopes/`) && f.endsWith('/state')).length;
  const tables = files.filter((f) => f.startsWith(`${DIR}/tables/`)).length;
  const summary = `${stripes} stripes; ${Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(', ')}; ${tables} scope table(s), ${homes} home(s) at the end`;

  return {
    summary,
    // Lock and gate files (only ever flock'd), published notes (rewritten, never synced: a new boot
    // rescans past them) and garbage removal are not what an acknowledgement depends on; every
    // other write and directory entry of the store is.
    ackCheck: {
      dependsOn: (_marker, op) => !/\/(published|lock|gate)$/.test(op.path) && op.kind !== 'unlink',
    },
    explain: (state) => {
      const acked = state.acknowledged.filter((m) => m.label === ACK).map((m) => String(m.detail));
      return `acknowledged ${acked.length} batch(es), the last ${acked[acked.length - 1] ?? 'none'}`;
    },
    check: (state) => check(state, model, stripes, options),
  };
}

async function check(state: CrashState, model: Model, _stripes: number, options: (view: FileSystem, holder: string) => FsHostStoreOptions): Promise<void> {
  const acked = new Set(state.acknowledged.filter((m) => m.label === ACK).map((m) => m.detail as string));
  const tokens = state.acknowledged.filter((m) => m.label === TOKEN).map((m) => m.detail as number);
  const disk = new MemoryFs({ image: state.image, trace: false });
  const afterCrash = (view: FileSystem, holder: string): FsHostStoreOptions => ({ ...options(view, holder), bootId: () => 'boot-after-the-crash' });
  if (!(await disk.stat(`${DIR}/FORMAT`))) {
    // The realm was never created durably: nothing can have been acknowledged.
    if (acked.size > 0 || tokens.length > 0) throw new Error(`the realm is missing although ${acked.size} batch(es) were acknowledged`);
    // A creation cut short is a new realm (its leftover never taken for damage): it opens.
    await (await openFsHostStore(DIR, afterCrash(disk, 'checker-new'))).close();
    return;
  }
  const first = await openFsHostStore(DIR, afterCrash(disk, 'checker-1'));
  const seen = await observeAll(first, model);
  const landed = explain(seen, model, acked);
  for (const id of acked) if (landed.get(id) !== true) throw new Error(`acknowledged batch ${id} does not show`);
  // A second process sees the same.
  const second = await openFsHostStore(DIR, afterCrash(disk.newProcess(), 'checker-2'));
  const again = await observeAll(second, model);
  for (const [key, o] of seen) {
    if (!sameModel(o.found, again.get(key)!.found)) throw new Error(`a second open shows ${key} as ${show(again.get(key)!.found)}, the first ${show(o.found)}`);
  }
  // Tokens only grow, durably; loads after the acquire show what the loads before it showed; a
  // commit on top of what shows lands and shows to the other process.
  const grant = await second.acquireFence('exclusive');
  const maxToken = Math.max(0, ...tokens);
  if (grant.token <= maxToken) throw new Error(`an acquire after the crash answered token ${grant.token}, not above the acknowledged ${maxToken}`);
  for (const [who, store] of [['the acquiring process', second], ['the first process', first]] as const) {
    const after = await observeAll(store, model);
    for (const [key, o] of seen) {
      if (!sameModel(o.found, after.get(key)!.found)) throw new Error(`after an acquire ${who} shows ${key} as ${show(after.get(key)!.found)}, before it ${show(o.found)}`);
    }
  }
  const probe = [...seen.entries()].find(([, o]) => o.found !== null);
  if (probe !== undefined) {
    const [key, o] = probe;
    const ref = model.refs.get(key)!;
    await second.commit(CommitBatch.tryNew('probe-after-crash', grant.token, [{ scope: ref, previous: o.found!.version, next: o.found!.version + 1, append: [Buffer.from('probe')] }]));
    const h = await first.loadHead(ref);
    if (h?.commitId !== 'probe-after-crash') throw new Error('a commit after recovery does not show to another process');
  }
  await first.close();
  await second.close();
}

interface Observed {
  found: ScopeModel | null;
  /** The index in the scope's history of the state shown (present scopes), or -1. */
  index: number;
}

/** What the store shows of every scope of the model; a present state must be one of its history. */
async function observeAll(store: FsHostStore, model: Model): Promise<Map<string, Observed>> {
  const out = new Map<string, Observed>();
  for (const [key, seq] of model.seqs) {
    const ref = model.refs.get(key)!;
    const { index, found } = await observe(store, ref, seq);
    if (found !== null && (index < 0 || !sameModel(found, seq[index]!.state))) {
      throw new Error(`${ref.kind}/${ref.name} shows ${show(found)}, which no batch leaves it in (history: ${seq.map((e) => show(e.state)).join(' → ')})`);
    }
    out.set(key, { found, index: found === null ? -1 : index });
  }
  return out;
}

/**
 * Which batches show, from what every scope shows; throws when a batch shows in part. A scope
 * that shows absent is at one of its absent states (never created yet, or deleted): the earliest
 * one at or after its last acknowledged batch that agrees with the other scopes.
 */
function explain(seen: Map<string, Observed>, model: Model, acked: ReadonlySet<string>): Map<string, boolean> {
  const landed = new Map<string, boolean>();
  const note = (key: string, seq: readonly Entry[], at: number): void => {
    for (let i = 1; i < seq.length; i++) {
      const id = seq[i]!.batch!;
      const here = i <= at;
      const before = landed.get(id);
      if (before !== undefined && before !== here) throw new Error(`batch ${id} shows in part (in ${key} it ${here ? 'does' : 'does not'})`);
      landed.set(id, here);
    }
  };
  for (const [key, o] of seen) if (o.found !== null) note(key, model.seqs.get(key)!, o.index);
  for (const [key, o] of seen) {
    if (o.found !== null) continue;
    const seq = model.seqs.get(key)!;
    let lastAcked = 0;
    seq.forEach((e, i) => {
      if (e.batch !== null && acked.has(e.batch)) lastAcked = i;
    });
    const fits = (at: number): boolean =>
      seq.every((e, i) => e.batch === null || landed.get(e.batch) === undefined || landed.get(e.batch) === i <= at);
    const at = seq.findIndex((e, i) => e.state === null && i >= lastAcked && fits(i));
    if (at < 0) throw new Error(`${key} shows absent, which no state of its history at or after its acknowledged batches explains`);
    note(key, seq, at);
  }
  return landed;
}

export const workload: CrashWorkload = {
  name: 'host',
  plants: {
    'publish-before-sync': 'a commit group is published and answered before its fdatasync',
    'skip-fence-check': 'a commit is accepted whatever its fence token',
    'loads-ignore-unpublished': "loads answer from the published notes alone, leaving a dead writer's last batch to the next lock holder",
  },
  description: 'fs host store: commits over stripes, multi-scope batches, truncate/drop/delete, fence takeover, checkpoints, a kill inside a commit settled by the next load',
  run,
};
