// The file-system host store: `openFsHostStore(dir, options)` → `FsHostStore`.
//
// Owns: the public class and its options, the loads (loadHead, readRows, listHeads), and the
// wiring of the commit path (commit.ts), the fence (fence.ts) and the checkpointer
// (checkpoint.ts) over one handle's realm machinery (realm.ts). Guarantees: the nine obligations
// of the Host Store SPI between handles in one process and between processes on one machine,
// with obligations 4 and 5 met at commit (CONFLICT, FENCED_OUT) and loads that still resolve
// deterministically if two batches for one version ever reach the disk. Loads never wait for a
// lock: they read each stripe up to its published note, so a stalled commit never holds up a
// load; a dead writer's records past a note are settled (adopted) by the first load that finds
// them with the stripe's lock free, so every later load, acquire and reopen answers the same.
// The design, the argument per obligation and the crash-safety argument are in
// docs/host-store.md; the bytes in docs/format-host.md.

import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { isIndex } from '../../assert.js';
import { monotonicClock, type Clock } from '../../clock.js';
import { corrupt, SeglogError } from '../../errors.js';
import { isMissing } from '../../fs/errno.js';
import { realFs } from '../../fs/real.js';
import type { FileSystem } from '../../fs/types.js';
import { CommitBatch } from '../batch.js';
import { HostStoreError } from '../errors.js';
import { asHostError, checkAcquireMode, checkFenceToken, checkHolderId, checkListArgs, checkReadArgs, checkTiming } from '../guards.js';
import { readBootId } from '../lease.js';
import { checkScopeRef, compareNames, scopeKey } from '../names.js';
import type { FenceTiming } from '../timing.js';
import type { AcquireMode, FenceGrant, HeadPage, HostStore, ListedHead, Row, ScopeKind, ScopeRef, VersionedHead } from '../types.js';
import { checkpointRound } from './checkpoint.js';
import type { CheckpointAnswer, CheckpointRequest, CheckpointWorkerData } from './checkpoint-worker.js';
import { Committer } from './commit.js';
import { acquire, renew } from './fence.js';
import { bootBytes, FORMAT_VERSION, MAX_HOLDER_ID_BYTES, OtherFormatVersion, type HomeValue, type TableEntry } from './format.js';
import { readHomeHead } from './home.js';
import { RealmHandle, type RealmSettings } from './realm.js';
import { checkStripeCount } from './realm-create.js';
import type { HostMistakes } from './stripe.js';
import { StripeGone } from './stripe-files.js';
import { PENDING, ScopeEntry, type ScopeState } from './view.js';

const MiB = 1024 * 1024;

/**
 * Test-only hooks of the fs host store. They exist so that tests can hold a commit in flight
 * (the conformance suite's stallCommits) and plant a second batch for one version; production
 * code never sets them.
 */
export interface FsHostStoreHooks {
  /** Awaited by each commit after its batch was validated, before it joins a group (before its commit point). */
  beforeCommit?: (batch: CommitBatch) => void | Promise<void>;
  /** Awaited by each commit that landed, after its group's sync and publish, before it answers. */
  afterCommit?: (batch: CommitBatch) => void | Promise<void>;
  /** Writes batches without the version check, so that two batches for one version reach the disk. */
  skipVersionChecks?: boolean;
}

export interface FsHostStoreOptions {
  /** The renew interval and lease this store records and reports. Default `FenceTiming.default()`. */
  timing?: FenceTiming;
  /** Names this handle in HELD answers (at most 1024 bytes of UTF-8). Default: host, pid and a random part. */
  holderId?: string;
  /** The store's clock (monotonic ms), on which leases run. Default `monotonicClock`. */
  clock?: Clock;
  /** The file-system layer. Default `realFs`. */
  fs?: FileSystem;
  /** Stripes (write-ahead logs shared by all scopes) of a NEW realm: 1..64, default 4. An existing realm keeps its own. */
  stripes?: number;
  /**
   * The machine's boot id (leases and published notes carry it: a reboot ends every lease and
   * makes the next open rescan the stripes). Default: /proc/sys/kernel/random/boot_id. Tests pass
   * a function to simulate a reboot.
   */
  bootId?: () => string | Promise<string>;
  /** Test-only hooks (see FsHostStoreHooks). */
  hooks?: FsHostStoreHooks;
  /** A stripe file is rolled before it passes this size (default 64 MiB; at least 64 KiB). */
  stripeFileBytes?: number;
  /** Zero-filled space written ahead of a stripe's records, in steps of this size (default 4 MiB). */
  preallocBytes?: number;
  /** A checkpoint round runs once the stripes hold this much past the last one (default 64 MiB). */
  checkpointBytes?: number;
  /** How long a stripe lock is kept after a group, so the next group needs no catch-up (default 2 ms). */
  lockLingerMs?: number;
  /** How long a commit or an acquire waits for locks held elsewhere before UNAVAILABLE (default 30 s). */
  lockWaitMs?: number;
  /**
   * A group that is the handle's only work in flight (one commit, nothing queued, no other group
   * running), while no other writer of this thread (another handle, a segmented log) has work
   * queued or a sync on the pool, has its fdatasync wait on the calling thread, blocking the event
   * loop for the sync, while this handle's recent syncs took less than this on average (ms;
   * default 1; 0: every sync waits on libuv's pool). It saves a lone writer the two thread hand-offs of a pool sync;
   * what is durable, and when a commit answers, are the same either way (docs/host-store.md).
   */
  inlineSyncBelowMs?: number;
  /**
   * Where checkpoint rounds run: 'worker' (a worker thread with a handle of its own, so a round's
   * work runs beside the commits; only with the default file system) or 'thread' (this event loop).
   * Default: 'worker' when `fs` is not given, else 'thread'.
   */
  checkpointIn?: 'worker' | 'thread';
}

function positiveInt(v: unknown, dflt: number, min: number, what: string): number {
  if (v === undefined) return dflt;
  if (!isIndex(v) || v < min) throw HostStoreError.invalid(`${what} must be an integer of at least ${min}`);
  return v;
}

function nonNegative(v: unknown, dflt: number, what: string): number {
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw HostStoreError.invalid(`${what} must be a non-negative number`);
  return v;
}

/** Opens (creating if needed) the realm in `dir`. */
export async function openFsHostStore(dir: string, options: FsHostStoreOptions = {}): Promise<FsHostStore> {
  if (typeof dir !== 'string' || dir.length === 0) throw HostStoreError.invalid('a host store needs a directory path');
  const timing = checkTiming(options.timing);
  const holderId = checkHolderId(options.holderId, MAX_HOLDER_ID_BYTES);
  // One turn of the event loop first: every file-system call of an open may be made on the
  // calling thread (lib/fs/real.ts), and a loop of opens would then never let timers or I/O run.
  await nextTurn();
  // No boot id on this platform: leases then cannot tell a reboot (see docs/host-store.md).
  const bootText = await (options.bootId ?? readBootId)();
  if (typeof bootText !== 'string' || bootText.length === 0) throw HostStoreError.invalid('bootId must answer a non-empty string');
  let stripes: number | undefined;
  try {
    stripes = checkStripeCount(options.stripes);
  } catch (err) {
    throw HostStoreError.invalid((err as Error).message);
  }
  const stripeFileBytes = positiveInt(options.stripeFileBytes, 64 * MiB, 64 * 1024, 'stripeFileBytes');
  const settings: RealmSettings = {
    fs: options.fs ?? realFs,
    clock: options.clock ?? monotonicClock,
    timing,
    holderId,
    boot: bootBytes(bootText),
    stripes,
    stripeFileBytes,
    preallocBytes: Math.min(positiveInt(options.preallocBytes, 4 * MiB, 0, 'preallocBytes'), stripeFileBytes),
    checkpointBytes: positiveInt(options.checkpointBytes, 64 * MiB, 1, 'checkpointBytes'),
    lockLingerMs: nonNegative(options.lockLingerMs, 2, 'lockLingerMs'),
    lockWaitMs: nonNegative(options.lockWaitMs, 30_000, 'lockWaitMs'),
    inlineSyncBelowMs: nonNegative(options.inlineSyncBelowMs, 1, 'inlineSyncBelowMs'),
    mistakes: (options as { mistakes?: HostMistakes }).mistakes ?? {},
    checkpointConcurrency: 2,
  };
  const checkpointIn = options.checkpointIn ?? (options.fs === undefined ? 'worker' : 'thread');
  if (checkpointIn !== 'worker' && checkpointIn !== 'thread') throw HostStoreError.invalid("checkpointIn must be 'worker' or 'thread'");
  if (checkpointIn === 'worker' && options.fs !== undefined && options.fs !== realFs) {
    throw HostStoreError.invalid("checkpointIn 'worker' needs the default file system (a worker cannot share another)");
  }
  let realm: RealmHandle;
  try {
    realm = await RealmHandle.open(dir, settings);
  } catch (err) {
    if (err instanceof OtherFormatVersion) throw formatRefusal(dir, err);
    throw asHostError(err, `open the host store in ${dir}`);
  }
  return new FsHostStore(realm, options.hooks ?? {}, openKey, checkpointIn === 'worker');
}

const openKey: unknown = Object.freeze({});

/**
 * A realm of another format version: a newer one is VERSION_TOO_NEW (open it with the newer
 * seglog); version 1 (one home directory per scope, before scope tables) is INVALID with the
 * version named: this build does not read it, and nothing was read or changed.
 */
function formatRefusal(dir: string, err: OtherFormatVersion): Error {
  const details = { dir, file: err.file, version: err.version, supported: FORMAT_VERSION };
  if (err.version > FORMAT_VERSION) {
    return new SeglogError('VERSION_TOO_NEW', `the realm in ${dir} has format version ${err.version}; this seglog reads version ${FORMAT_VERSION}`, { details });
  }
  return HostStoreError.invalid(
    `the realm in ${dir} has format version ${err.version} (one home directory per scope); this seglog reads format version ${FORMAT_VERSION} (scope tables) only: nothing was read or changed`,
    details,
  );
}

/** A handle on a realm kept in a directory (see the module header). Implements HostStore; `close()` is idempotent. */
export class FsHostStore implements HostStore {
  /** The realm's directory. */
  readonly dir: string;
  /** Names this handle in HELD answers. */
  readonly holderId: string;
  readonly #r: RealmHandle;
  readonly #hooks: FsHostStoreHooks;
  readonly #committer: Committer;
  #closing: Promise<void> | null = null;
  #checkpointing: Promise<void> | null = null;
  readonly #lists = new Map<ScopeKind, { generation: number; names: string[] }>();

  readonly #useWorker: boolean;
  #worker: { w: Worker; next: number; waiting: Map<number, (ran: boolean) => void> } | null = null;

  /** @internal Use `openFsHostStore`. */
  constructor(realm: RealmHandle, hooks: FsHostStoreHooks, key: unknown, useWorker = false) {
    this.#useWorker = useWorker;
    if (key !== openKey) throw new TypeError('use openFsHostStore() to open an FsHostStore');
    this.#r = realm;
    this.dir = realm.dir;
    this.holderId = realm.s.holderId;
    this.#hooks = hooks;
    this.#committer = new Committer(realm, { skipVersionChecks: hooks.skipVersionChecks === true, skipFenceCheck: realm.s.mistakes.skipFenceCheck === true });
    this.#committer.onGroupWritten = () => this.#maybeCheckpoint();
  }

  /**
   * @internal For failure reports of tests: per stripe, whether this handle holds its file lock
   * and its gate, whether a group holds or waits for it, and what the stripe's group is doing.
   */
  describeLocks(): string {
    return `now ${Math.round(performance.now())} ms\n` + this.#r.stripes
      .map(
        (st, j) =>
          `stripe ${j}: flock ${st.flockHeld ? (st.inUse ? 'held, in use' : 'held, lingering') : 'free'}${st.fresh ? ', fresh' : ''}` +
          `${st.lockUse !== null ? ` (last taken for ${st.lockUse.why} at ${Math.round(st.lockUse.at)} ms)` : ''}, ` +
          `gate ${st.gateHeld ? 'held' : 'open'} (checked ${st.gateStats.checks}, found closed ${st.gateStats.closed}), ` +
          `mutex ${st.mutex.busy ? 'busy' : 'idle'}, linger ${st.lingerTimer !== null ? 'armed' : 'none'}, group: ${this.#committer.describePhase(j)}`,
      )
      .join('\n');
  }

  /** How many stripes the realm has. */
  get stripes(): number {
    return this.#r.format.stripes;
  }

  #usable(): void {
    if (this.#closing !== null) throw HostStoreError.unavailable('the store handle is closed');
  }

  // ---------------------------------------------------------------------------------------------
  // Fence

  async acquireFence(mode: AcquireMode): Promise<FenceGrant> {
    this.#usable();
    checkAcquireMode(mode);
    try {
      return await acquire(this.#r, mode);
    } catch (err) {
      throw asHostError(err, 'acquire the fence');
    }
  }

  async renewFence(token: number): Promise<void> {
    this.#usable();
    checkFenceToken(token);
    try {
      await renew(this.#r, token);
    } catch (err) {
      throw asHostError(err, 'renew the fence');
    }
  }

  fenceTiming(): FenceTiming {
    return this.#r.s.timing;
  }

  // ---------------------------------------------------------------------------------------------
  // Commit

  commit(batch: CommitBatch): Promise<void> {
    let checked: CommitBatch;
    try {
      this.#usable();
      checked = CommitBatch.from(batch);
    } catch (err) {
      return Promise.reject(err);
    }
    // Without hooks (production), the committer's promise is the answer: no extra turns per commit.
    if (this.#hooks.beforeCommit === undefined && this.#hooks.afterCommit === undefined) return this.#committer.submit(checked);
    return this.#commitHooked(checked);
  }

  async #commitHooked(checked: CommitBatch): Promise<void> {
    if (this.#hooks.beforeCommit !== undefined) await this.#hooks.beforeCommit(checked);
    this.#usable();
    await this.#committer.submit(checked);
    if (this.#hooks.afterCommit !== undefined) await this.#hooks.afterCommit(checked);
  }

  // ---------------------------------------------------------------------------------------------
  // Loads

  /**
   * Runs a load: catches up first; on a stripe file or home file that vanished under it (the
   * checkpointer moved on) it jumps or re-reads and runs again. Errors that are not the SPI's
   * answer UNAVAILABLE.
   */
  async #load<T>(what: string, fn: () => Promise<T>): Promise<T> {
    this.#usable();
    for (let attempt = 0; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        if (err instanceof HostStoreError) throw err;
        if (attempt < 8 && err instanceof StripeGone) {
          await this.#r.jump().catch(() => undefined);
          continue;
        }
        if (isMissing(err)) {
          if (attempt < 8) {
            // A home file named by a home value this handle holds was replaced: read the homes
            // again (after the first two tries, a moment later: the checkpointer may be mid-round).
            this.#r.view.forgetAllHomes();
            if (attempt >= 2) await sleep(attempt);
            continue;
          }
          // Read afresh nine times, the scope's home still names a file that is not there: the
          // checkpointer removes a row file or head blob only after the home stopped naming it,
          // so the file was lost, not replaced.
          const file = (err as { path?: unknown }).path;
          throw HostStoreError.damaged(
            corrupt(`a file the scope's home names is missing: ${typeof file === 'string' ? file : 'unknown path'}`, { file: typeof file === 'string' ? file : '' }),
            what,
          );
        }
        throw asHostError(err, what);
      }
    }
  }

  /** The scope's entry (a detached one when the view holds no record of it) with its state, settled. */
  async #settle(scope: ScopeRef): Promise<{ e: ScopeEntry; st: ScopeState }> {
    const r = this.#r;
    const key = scopeKey(scope);
    for (let round = 0; ; round++) {
      await r.catchUpAll(undefined, true);
      const known = r.view.scopes.get(key);
      // A scope no record in the view touches is read from its base alone (a detached entry).
      const e = known ?? new ScopeEntry(key, scope.kind, scope.name);
      if (e.home === undefined) {
        const epoch = r.tableEpoch;
        const home = known === undefined ? await r.readBase(e) : await r.loadHome(e);
        // A newer checkpoint came in meanwhile: records it covers may have left the view.
        if (epoch !== r.tableEpoch && round < 8) continue;
        if (known === undefined) {
          if (r.view.scopes.has(key)) continue; // a record touching it arrived meanwhile
          e.home = home;
        }
        if (r.ahead(home) && round < 8) continue;
      }
      await r.resolve([e], true);
      if (r.view.stoppedOn(e) === PENDING && round < 8) continue;
      this.#maybeCheckpoint();
      return { e, st: r.view.state(e) };
    }
  }

  async loadHead(scope: ScopeRef): Promise<VersionedHead | null> {
    this.#usable();
    checkScopeRef(scope);
    return this.#load('load a head', async () => {
      const { e, st } = await this.#settle(scope);
      if (!st.exists) return null;
      return { version: st.version, commitId: st.commitId, head: await this.#head(e, st) };
    });
  }

  async #head(e: ScopeEntry, st: ScopeState): Promise<Uint8Array> {
    const src = st.head;
    if (src === null) return new Uint8Array(0);
    if ('home' in src) {
      const home = e.home as HomeValue;
      // A small head lives in the home cell itself: no directory (and no digest) needed.
      if (home.head !== null) return home.head.slice();
      return readHomeHead(this.#r.fs, this.#r.scopeDir(e), home);
    }
    const [offset, length] = src.u.head!;
    return this.#r.stripes[src.rec.stripe]!.readBytes(src.rec.seq, offset, length);
  }

  async readRows(scope: ScopeRef, from: number, limit: number): Promise<Row[]> {
    this.#usable();
    checkReadArgs(scope, from, limit);
    return this.#load('read rows', async () => {
      const { e, st } = await this.#settle(scope);
      if (!st.exists) return [];
      if (from < st.first) throw HostStoreError.invalid(`row ${from} is below the first visible row ${st.first}`, { first: st.first });
      const to = Math.min(st.end, from + limit);
      const out: Row[] = [];
      for (const run of st.runs) {
        const a = Math.max(from, run.from);
        const b = Math.min(to, run.to);
        if (a >= b) continue;
        if ('home' in run.src) {
          await this.#r.homeRows.read(this.#r.scopeDir(e), e.home as HomeValue, a, b, out);
        } else {
          const { rec, u, at } = run.src;
          const stripe = this.#r.stripes[rec.stripe]!;
          const k0 = at + (a - run.from);
          const start = u.rows[2 * k0]!;
          const last = at + (b - 1 - run.from);
          const span = await stripe.readBytes(rec.seq, start, u.rows[2 * last]! + u.rows[2 * last + 1]! - start);
          for (let k = k0; k <= last; k++) {
            const off = u.rows[2 * k]! - start;
            out.push({ index: run.from + (k - at), data: span.slice(off, off + u.rows[2 * k + 1]!) });
          }
        }
      }
      return out.map((row) => ({ index: row.index, data: row.data.slice() }));
    });
  }

  async listHeads(kind: ScopeKind, after: string | null, limit: number): Promise<HeadPage> {
    this.#usable();
    checkListArgs(kind, after, limit);
    return this.#load('list heads', async () => {
      const r = this.#r;
      for (let round = 0; ; round++) {
        await r.catchUpAll(undefined, true);
        const epoch = r.tableEpoch;
        // The scopes records in the view touch: their states are the view's (bases loaded first).
        const candidates = this.#viewScopes(kind);
        await r.resolve(candidates, true);
        if (round < 8 && candidates.some((e) => r.view.stoppedOn(e) === PENDING)) continue;
        const page = await this.#page(kind, after, limit);
        // A newer checkpoint came in while the page was read, or a large scope's home reflects
        // records this handle has not read (a round is moving it): catch up and read it again.
        if ((epoch !== r.tableEpoch || page === null) && round < 8) continue;
        if (page === null) throw HostStoreError.unavailable('a listing did not settle');
        return page;
      }
    });
  }

  /**
   * One page: the table's entries of `kind` after `after`, merged in name order with the scopes the
   * view holds records for (whose view state replaces their entry), the visible ones only, up to
   * `limit`, and one more looked for to tell whether the listing goes on.
   */
  async #page(kind: ScopeKind, after: string | null, limit: number): Promise<HeadPage | null> {
    const r = this.#r;
    const behind = { home: false };
    const names = this.#sortedNames(kind);
    let vi = after === null ? 0 : upperBound(names, after);
    const heads: ListedHead[] = [];
    let more = false;
    /** Takes a visible scope; answers false once the page is full and one more was seen. */
    const full = (): boolean => {
      if (heads.length < limit) return false;
      more = true;
      return true;
    };
    /**
     * Takes a table entry no view state replaces: a tombstone is skipped; a small scope's head is
     * in the entry, so it is taken here, in the fewest calls (a listing takes one entry per scope,
     * most of them in code not yet optimised); a large scope's state is read from its home.
     */
    const take = (ent: TableEntry): boolean | Promise<boolean> => {
      if (ent.homed) return this.#homedInPage(ent, kind, heads, full, behind);
      if (ent.deleted) return true;
      if (full()) return false;
      heads.push({ name: ent.name, head: { version: ent.version, commitId: ent.commitId, head: ent.copyHead() } });
      return true;
    };
    const fromView = async (name: string): Promise<boolean> => {
      const e = r.view.scopes.get(scopeKey({ kind, name }))!;
      const st = r.view.state(e);
      if (!st.exists) return true;
      if (full()) return false;
      heads.push({ name, head: { version: st.version, commitId: st.commitId, head: await this.#head(e, st) } });
      return true;
    };
    const t = r.table;
    if (t !== null) {
      await t.scan(kind, after === null ? null : Buffer.from(after, 'utf8'), (ent) => {
        // Only when a scope of the view sorts at or before this entry does the view have a say.
        if (vi >= names.length || compareNames(names[vi]!, ent.name) > 0) return take(ent);
        return (async () => {
          const x = await this.#viewFirst(names, vi, ent.name, fromView);
          vi = x.vi;
          if (x.more !== true) return x.more === 'taken';
          return take(ent);
        })();
      });
    }
    if (behind.home) return null;
    while (!more && vi < names.length) if (!(await fromView(names[vi++]!))) break;
    const last = heads[heads.length - 1];
    return { heads, next: more && last !== undefined ? last.name : null };
  }

  /** Takes the view's names before `name` (and `name` itself, whose view state replaces its entry). */
  async #viewFirst(names: readonly string[], vi: number, name: string, fromView: (name: string) => Promise<boolean>): Promise<{ vi: number; more: boolean | 'taken' }> {
    while (vi < names.length && compareNames(names[vi]!, name) < 0) if (!(await fromView(names[vi++]!))) return { vi, more: false };
    if (vi < names.length && names[vi] === name) return { vi: vi + 1, more: (await fromView(names[vi]!)) ? 'taken' : false };
    return { vi, more: true };
  }

  /**
   * A large scope's table entry no view state replaces: its state is its home's (unless the home
   * is ahead of this handle: then `behind` is set and the page stops).
   */
  #homedInPage(ent: TableEntry, kind: ScopeKind, heads: ListedHead[], full: () => boolean, behind: { home: boolean }): Promise<boolean> {
    const r = this.#r;
    const ref = { kind, name: ent.name, key: scopeKey({ kind, name: ent.name }) };
    return (async () => {
      const home = await r.readBase(ref);
      if (r.ahead(home)) {
        // Its home already holds records this handle has not read: so may other scopes' entries
        // of the same batch, elsewhere. The page is read again after a catch-up.
        behind.home = true;
        return false;
      }
      if (home === null || home.deleted) return true;
      if (full()) return false;
      heads.push({ name: ent.name, head: { version: home.version, commitId: home.commitId, head: await readHomeHead(r.fs, r.scopeDir(ref), home) } });
      return true;
    })();
  }

  /** The view's scopes of a kind (those records past the checkpoint touch). */
  #viewScopes(kind: ScopeKind): ScopeEntry[] {
    const out: ScopeEntry[] = [];
    for (const e of this.#r.view.scopes.values()) if (e.kind === kind) out.push(e);
    return out;
  }

  /** The names of the view's scopes of a kind in UTF-8 order (kept while nothing in the view changed). */
  #sortedNames(kind: ScopeKind): string[] {
    const r = this.#r;
    const cached = this.#lists.get(kind);
    if (cached !== undefined && cached.generation === r.view.generation) return cached.names;
    const names = this.#viewScopes(kind).map((e) => e.name);
    names.sort(compareNames);
    this.#lists.set(kind, { generation: r.view.generation, names });
    return names;
  }

  // ---------------------------------------------------------------------------------------------
  // Checkpoints

  /**
   * Runs a checkpoint round now (moves what the stripes hold into the scopes' homes and removes
   * stripe files no one needs). Answers false when another handle is running one; a round this
   * handle runs in the background is waited for first.
   */
  async checkpoint(): Promise<boolean> {
    this.#usable();
    await this.#committer.drain();
    await this.#checkpointing?.catch(() => undefined);
    try {
      return await checkpointRound(this.#r);
    } catch (err) {
      throw asHostError(err, 'checkpoint');
    }
  }

  /** How many bytes the stripes hold past the checkpoint this handle knows. */
  #backlog(): number {
    const r = this.#r;
    let bytes = 0;
    for (let j = 0; j < r.stripes.length; j++) {
      const c = r.stripes[j]!.cursor;
      const p = r.checkpoint.positions[j]!;
      bytes += (c.seq - p.seq) * r.s.stripeFileBytes + c.offset - p.offset;
    }
    return bytes;
  }

  #maybeCheckpoint(): void {
    if (this.#checkpointing !== null || this.#closing !== null) return;
    if (this.#backlog() < this.#r.s.checkpointBytes) return;
    this.#checkpointing = (async () => {
      await nextTurn();
      try {
        if (this.#useWorker) {
          await this.#roundInWorker();
          await this.#r.trimToCheckpoint();
        } else {
          const ran = await checkpointRound(this.#r);
          if (!ran) await this.#r.trimToCheckpoint();
        }
      } catch {
        // A failed round changes nothing a load relies on; the next one does it again.
      }
    })().finally(() => {
      this.#checkpointing = null;
    });
  }

  /** Asks the checkpoint worker (started on first use) for a round; resolves when it answered. */
  #roundInWorker(): Promise<boolean> {
    if (this.#worker === null) {
      const r = this.#r;
      const data: CheckpointWorkerData = {
        dir: r.dir,
        boot: r.s.boot,
        holderId: r.s.holderId,
        stripeFileBytes: r.s.stripeFileBytes,
        preallocBytes: r.s.preallocBytes,
        checkpointBytes: r.s.checkpointBytes,
        lockWaitMs: r.s.lockWaitMs,
      };
      const w = new Worker(new URL('./checkpoint-worker.js', import.meta.url), { workerData: data });
      w.unref();
      const state = { w, next: 0, waiting: new Map<number, (ran: boolean) => void>() };
      const failAll = (): void => {
        for (const done of state.waiting.values()) done(false);
        state.waiting.clear();
        if (this.#worker === state) this.#worker = null;
      };
      w.on('message', (m: CheckpointAnswer) => {
        const done = state.waiting.get(m.id);
        state.waiting.delete(m.id);
        done?.(m.ran);
      });
      w.on('error', failAll);
      w.on('exit', failAll);
      this.#worker = state;
    }
    const worker = this.#worker;
    const id = ++worker.next;
    return new Promise<boolean>((resolve) => {
      worker.waiting.set(id, resolve);
      worker.w.postMessage({ type: 'round', id } satisfies CheckpointRequest);
    });
  }

  // ---------------------------------------------------------------------------------------------

  /** Waits for commits in flight and a running checkpoint, then releases every lock and file. Idempotent. */
  close(): Promise<void> {
    if (this.#closing === null) {
      this.#closing = (async () => {
        await this.#committer.drain();
        await this.#checkpointing?.catch(() => undefined);
        const worker = this.#worker;
        this.#worker = null;
        if (worker !== null) {
          // The worker is idle (the round above settled): let it close its files (and so its
          // locks: a worker shares the process's descriptors, which terminating it would leak).
          const exited = new Promise<void>((resolve) => worker.w.once('exit', () => resolve()));
          worker.w.postMessage({ type: 'close' } satisfies CheckpointRequest);
          // Terminating it is the last resort (a worker stuck for as long as a lock wait): its
          // descriptors, and any lock taken through them, would stay with this process.
          const timer = setTimeout(() => void worker.w.terminate(), Math.max(5000, this.#r.s.lockWaitMs));
          await exited;
          clearTimeout(timer);
        }
        // The stripes' zero-filled space goes back (best effort, under their locks).
        await this.#r.trimStripeTails();
        this.#r.closed = true;
        await this.#r.closeFiles();
      })();
    }
    return this.#closing;
  }
}

/** The position of the first name that sorts after `name`. */
function upperBound(names: readonly string[], name: string): number {
  let lo = 0;
  let hi = names.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareNames(names[mid]!, name) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

