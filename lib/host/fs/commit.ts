// The fs host store's commit path: group commit per stripe.
//
// Owns: `Committer`: the queue of each stripe, the group (the commits gathered in one event-loop
// turn whose lowest home stripe is that stripe), its checks and its one writev + one fdatasync.
// Guarantees (the argument is in docs/host-store.md):
// - One batch is one record in one stripe file (the lowest home stripe of its scopes): all or
//   nothing, without any realm-wide lock, pointer or sequence.
// - A group holds, from its checks to its answer, the file locks of its stripe and of every home
//   stripe of its scopes (taken in ascending order, try-lock, all or back off). A record that
//   touches a scope is only ever written under that scope's home-stripe lock, so under it the
//   handle's view of the scope is exact (realm.ts `refresh`): the version check (CONFLICT) and the
//   retry check (landed: Ok) are exact across handles and processes.
// - The fence token is checked against the highest FENCE record in the group's stripe; an
//   acquire writes its FENCE record into every stripe under that stripe's lock, so a commit that
//   checked the old token has finished (or died with its record written) before the acquire
//   answers, and every later one sees the new token (FENCED_OUT).
// - The commit point is the group's fdatasync; a commit resolves only after it and after the
//   published note names it. A failed write or sync answers UNAVAILABLE when the group was voided
//   (it can never land) and INDETERMINATE when even that failed.

import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { isSeglogError } from '../../errors.js';
import { CommitBatch } from '../batch.js';
import { HostStoreError } from '../errors.js';
import { scopeKey, utf8Length } from '../names.js';
import { checkBatchToken, isRetryOf, stepScope, type ScopeTip } from '../plan.js';
import {
  batchPayloadBytes,
  FRAME_HEADER_BYTES,
  MAX_PAYLOAD_BYTES,
  writeBatchPayload,
  type UpdateIn,
} from './format.js';
import { BackOff, type RealmHandle } from './realm.js';
import { GroupFailed } from './stripe.js';
import { setQueued } from '../../fs/inline-sync.js';
import { PENDING, type Rec, type RecUpdate, type ScopeEntry } from './view.js';

/** Where a frame's heads and rows lie in it (what `writeBatchPayload` reports). */
type FrameLayout = { heads: ([number, number] | undefined)[]; rows: number[][] };

const encoder = new TextEncoder();

/** The slab groups' frames are carved from (see `Committer.#frameBytes`). */
const FRAME_SLAB_BYTES = 256 * 1024;

/** Test-only switches of the commit path (see FsHostStoreHooks). */
export interface CommitSwitches {
  skipVersionChecks?: boolean;
  /** A planted mistake (crash runner tests only): accept any token. */
  skipFenceCheck?: boolean;
}

interface Member {
  batch: CommitBatch;
  updates: readonly UpdateIn[];
  names: Uint8Array[];
  /** The commit id's UTF-8 length. */
  commitIdBytes: number;
  frameBytes: number;
  entries: ScopeEntry[];
  homes: number[];
  /** Answered (resolved or rejected): a member is answered once. */
  done: boolean;
  resolve: () => void;
  reject: (err: unknown) => void;
}

type Tip = ScopeTip;

type Verdict = { kind: 'landed' } | { kind: 'same'; as: Member } | { kind: 'accept' } | { kind: 'refuse'; error: HostStoreError };

/** The verdicts that carry nothing of their own (one object each, not one per commit). */
const LANDED: Verdict = Object.freeze({ kind: 'landed' });
const ACCEPT: Verdict = Object.freeze({ kind: 'accept' });

export class Committer {
  readonly #r: RealmHandle;
  readonly #switches: CommitSwitches;
  readonly #queues: Member[][];
  readonly #scheduled: boolean[];
  /** The size of each stripe's last group (how it gathers the next). */
  readonly #lastSize: number[] = [];
  readonly #running = new Set<Promise<void>>();
  /** The lock set of a group whose scopes are all homed on its own stripe, per stripe. */
  readonly #single: (readonly number[] | undefined)[] = [];
  /** A group's checks: the state each scope is left in, and the commits accepted by id. */
  readonly #overlay = new Map<ScopeEntry, Tip>();
  readonly #byCommitId = new Map<string, Member>();
  #slab = new Uint8Array(0);
  #slabAt = 0;
  /** Called after each group that wrote (the store schedules a checkpoint from it). */
  onGroupWritten: () => void = () => undefined;
  /** What each stripe's group is doing now, its lock set and since when (for `FsHostStore.describeLocks`). */
  readonly phase: ({ what: string; set: readonly number[]; since: number } | undefined)[] = [];

  /** `phase[s]` as a line of a failure report. */
  describePhase(s: number): string {
    const p = this.phase[s];
    return p === undefined ? 'none' : `${p.what} (set ${p.set.join(',')}, since ${Math.round(p.since)} ms)`;
  }

  constructor(r: RealmHandle, switches: CommitSwitches) {
    this.#r = r;
    this.#switches = switches;
    this.#queues = r.stripes.map(() => []);
    this.#scheduled = r.stripes.map(() => false);
  }

  /** Checks what needs no state (the record's size), then queues the batch on its stripe. */
  submit(batch: CommitBatch): Promise<void> {
    const r = this.#r;
    const updates = batch.updates;
    const n = updates.length;
    const entries: ScopeEntry[] = new Array(n);
    const names: Uint8Array[] = new Array(n);
    const homes: number[] = new Array(n);
    // Not Infinity: a double here would reach every record's `stripe` field (boxed by V8 then).
    let stripe = -1;
    for (let i = 0; i < n; i++) {
      const scope = updates[i]!.scope;
      const e = r.view.entry(scopeKey(scope), scope.kind, scope.name);
      entries[i] = e;
      names[i] = e.nameBytes ??= encoder.encode(scope.name);
      const h = (e.homeStripe ??= r.homeStripe(e.kind, e.name, e.key));
      homes[i] = h;
      if (stripe < 0 || h < stripe) stripe = h;
    }
    // Its UTF-8 length only: the encoder writes it into the frame (format-batch.ts).
    const commitIdBytes = utf8Length(batch.commitId);
    const payload = batchPayloadBytes(commitIdBytes, updates, names);
    const frameBytes = FRAME_HEADER_BYTES + payload;
    const limit = Math.min(MAX_PAYLOAD_BYTES, r.stripes[0]!.maxGroupBytes - FRAME_HEADER_BYTES);
    if (payload > limit) {
      return Promise.reject(HostStoreError.invalid(`the batch takes ${payload} bytes as a record, more than this store's ${limit}`));
    }
    return new Promise<void>((resolve, reject) => {
      this.#queues[stripe]!.push({ batch, updates, names, commitIdBytes, frameBytes, entries, homes, done: false, resolve, reject });
      setQueued(this, true);
      this.#schedule(stripe);
    });
  }

  /** Resolves once no group is running or queued. */
  async drain(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
  }

  #schedule(s: number): void {
    if (this.#scheduled[s]) return;
    this.#scheduled[s] = true;
    const run = this.#run(s).finally(() => this.#running.delete(run));
    this.#running.add(run);
  }

  async #run(s: number): Promise<void> {
    // Gather the group: with concurrent writers, one turn of the event loop (every commit issued in
    // this turn, also by other stripes' completions, joins); with one writer, only this turn's
    // microtasks (a loop turn would only add latency).
    if ((this.#lastSize[s] ?? 0) > 1) await nextTurn();
    else await Promise.resolve();
    try {
      while (this.#queues[s]!.length > 0) {
        const queue = this.#queues[s]!;
        const budget = this.#r.stripes[s]!.maxGroupBytes;
        let bytes = 0;
        let n = 0;
        while (n < queue.length && (n === 0 || bytes + queue[n]!.frameBytes <= budget)) bytes += queue[n++]!.frameBytes;
        const members = queue.splice(0, n);
        setQueued(this, this.#anyQueued());
        this.#lastSize[s] = members.length;
        await this.#group(s, members);
      }
    } finally {
      this.#scheduled[s] = false;
      if (this.#queues[s]!.length > 0) this.#schedule(s);
    }
  }

  #anyQueued(): boolean {
    for (const q of this.#queues) if (q.length > 0) return true;
    return false;
  }

  /** The accepted members' frames, in one buffer for the group (each frame a view of it), and where each put its heads and rows. */
  #encodeFrames(accepted: readonly Member[]): { frames: Uint8Array[]; layouts: FrameLayout[] } {
    let total = 0;
    for (const m of accepted) total += m.frameBytes;
    const buffer = this.#frameBytes(total);
    const layouts: FrameLayout[] = [];
    const frames: Uint8Array[] = [];
    for (let i = 0, at = 0; i < accepted.length; i++) {
      const m = accepted[i]!;
      const f = buffer.subarray(at, at + m.frameBytes);
      const layout: FrameLayout = { heads: [], rows: [] };
      writeBatchPayload(f, FRAME_HEADER_BYTES, m.batch.token, m.batch.commitId, m.commitIdBytes, m.updates, m.names, layout);
      frames.push(f);
      layouts.push(layout);
      at += m.frameBytes;
    }
    return { frames, layouts };
  }

  async #group(s: number, members: Member[]): Promise<void> {
    const r = this.#r;
    const set = this.#lockSet(s, members);
    const releases: (() => void)[] = [];
    let wrote = false;
    // Kept cheap (the commit path): one record per stripe, reused by its groups, formatted only
    // when a report asks.
    const phase = (this.phase[s] ??= { what: '', set, since: 0 });
    phase.set = set;
    step(phase, 'waiting for mutexes');
    try {
      for (const j of set) {
        const mutex = r.stripes[j]!.mutex;
        releases.push(mutex.tryLock() ?? (await mutex.lock()));
      }
      if (r.closed) throw HostStoreError.unavailable('the store handle is closed');
      const poisoned = r.stripes[s]!.poisoned;
      if (poisoned !== null) throw poisoned;
      step(phase, 'taking locks');
      // The kept locks claimed here, without the call's promise (the one-writer fast path).
      if (!r.locks.claimKept(set)) await this.#lockAndRefresh(set);
      step(phase, 'resolving');
      const entries = members.length === 1 ? members[0]!.entries : members.flatMap((m) => m.entries);
      // Every base held and no state stopped on a version not read yet: what the loop of
      // #resolveGroup would find at once, answered without its call.
      if (!this.#readyNow(entries)) await this.#resolveGroup(entries);
      step(phase, 'checking');
      const { accepted, followers } = this.#decide(s, members);
      if (accepted.length > 0) {
        const st = r.stripes[s]!;
        const { frames, layouts } = this.#encodeFrames(accepted);
        const fence = st.cursor.fence;
        let written;
        step(phase, 'writing');
        try {
          written = await st.write(frames, fence, accepted.length === 1 && this.#alone(), this);
        } catch (err) {
          if (err instanceof GroupFailed) {
            const failed = err.voided
              ? HostStoreError.unavailable(`the commit's write failed and was voided; nothing was applied: ${err.cause.message}`, err.cause)
              : HostStoreError.indeterminate(`the commit's write failed and its outcome is unknown: ${err.cause.message}`, err.cause);
            for (const m of accepted) {
              answer(m, failed);
              for (const f of followers?.get(m) ?? []) answer(f, failed);
            }
            return;
          }
          throw err;
        }
        wrote = true;
        for (let i = 0; i < accepted.length; i++) {
          const w = written[i]!;
          r.view.add(recOfMember(s, w.seq, w.offset, w.lsn, fence, accepted[i]!, layouts[i]!));
        }
        for (const m of accepted) {
          answer(m);
          if (followers !== null) for (const f of followers.get(m) ?? []) answer(f);
        }
      }
      if (followers !== null) for (const [, fs] of followers) for (const f of fs) answer(f);
    } catch (err) {
      const failed =
        err instanceof HostStoreError
          ? err
          : HostStoreError.unavailable(`the commit could not be made: ${err instanceof Error ? err.message : String(err)}`, err);
      for (const m of members) answer(m, failed);
    } finally {
      step(phase, 'done');
      for (const release of releases) release();
      r.locks.linger(set);
      if (wrote) this.onGroupWritten();
    }
  }

  /**
   * Nothing else of this handle in flight (the policy also asks about the thread's other writers):
   * no other commit waits for this thread while a lone group's sync waits on it.
   */
  #alone(): boolean {
    if (this.#running.size !== 1) return false;
    for (const q of this.#queues) if (q.length > 0) return false;
    return true;
  }

  /** True when every scope of `entries` has its base and none stops on a version not read yet. */
  #readyNow(entries: readonly ScopeEntry[]): boolean {
    const r = this.#r;
    if (!r.resolvedNow(entries)) return false;
    for (const e of entries) if (e.slots.size > 0 && r.view.stoppedOn(e) === PENDING) return false;
    return true;
  }

  /** Loads the bases of the group's scopes and reads on until their states settle (UNAVAILABLE otherwise). */
  async #resolveGroup(entries: readonly ScopeEntry[]): Promise<void> {
    const r = this.#r;
    for (let attempt = 0; ; attempt++) {
      if (!r.resolvedNow(entries)) await r.resolve(entries);
      // A record that builds on a version not read yet (another stripe's note was read first):
      // that version was published before the record was written, so reading again finds it.
      for (let i = 0; i < 3 && entries.some((e) => e.slots.size > 0 && r.view.stoppedOn(e) === PENDING); i++) {
        await r.catchUpAll();
        await r.resolve(entries);
      }
      // The checks run without a pause on the bases held now: a checkpoint round that moved this
      // handle to a newer table meanwhile forgot some (its trim), and those are read again.
      if (r.resolvedNow(entries)) return;
      if (attempt >= 8) throw HostStoreError.unavailable('the scopes of a commit did not settle');
    }
  }

  /**
   * The group's checks, in order, without a pause (so the committer's maps serve every group):
   * refused and landed commits are answered here; the accepted ones are answered (and their
   * followers, the same commit queued twice) after the write.
   */
  #decide(s: number, members: readonly Member[]): { accepted: Member[]; followers: Map<Member, Member[]> | null } {
    const overlay = this.#overlay;
    const byCommitId = this.#byCommitId;
    // Left empty by every group (cleared at the end below); a lone member records nothing in them
    // (no member after it reads them), which spares their tables a clear per commit.
    const record = members.length > 1;
    const accepted: Member[] = [];
    let followers: Map<Member, Member[]> | null = null;
    for (const m of members) {
      const v = this.#check(s, m, overlay, byCommitId, record);
      if (v.kind === 'refuse') answer(m, v.error);
      else if (v.kind === 'landed') answer(m);
      else if (v.kind === 'same') {
        followers ??= new Map();
        followers.set(v.as, [...(followers.get(v.as) ?? []), m]);
      } else {
        accepted.push(m);
        if (record) byCommitId.set(m.batch.commitId, m);
      }
    }
    if (record) {
      overlay.clear();
      byCommitId.clear();
    }
    return { accepted, followers };
  }

  /**
   * Zeroed bytes for a group's frames: carved from a shared slab, bump-allocated and never handed
   * out twice (a region is never rewritten, so a layer below that kept a view of a written frame
   * still sees exactly what was written); a large group gets a buffer of its own. One allocation
   * per slab instead of one per group keeps the collector's work per commit down.
   */
  #frameBytes(total: number): Uint8Array {
    if (total > FRAME_SLAB_BYTES / 8) return new Uint8Array(total);
    if (this.#slabAt + total > this.#slab.length) {
      this.#slab = new Uint8Array(FRAME_SLAB_BYTES);
      this.#slabAt = 0;
    }
    const out = this.#slab.subarray(this.#slabAt, this.#slabAt + total);
    this.#slabAt += total;
    return out;
  }

  /** The group's lock set: its stripe and every home stripe of its commits, ascending. */
  #lockSet(s: number, members: readonly Member[]): readonly number[] {
    if (members.length === 1 && members[0]!.homes.every((h) => h === s)) return (this.#single[s] ??= Object.freeze([s]));
    return [...new Set([s, ...members.flatMap((m) => m.homes)])].sort((a, b) => a - b);
  }

  /** Takes the group's stripe locks and makes the view exact for their scopes (backing off when told to). */
  async #lockAndRefresh(set: readonly number[]): Promise<void> {
    const r = this.#r;
    const deadline = performance.now() + r.s.lockWaitMs;
    let delay = 1;
    for (;;) {
      await r.locks.lockStripes(set);
      try {
        await r.refresh(set);
        return;
      } catch (err) {
        if (!(err instanceof BackOff)) throw err;
      }
      for (const j of set) await r.stripes[j]!.unlock();
      await r.locks.releaseIdle();
      if (performance.now() > deadline) throw HostStoreError.unavailable('the stripes a commit needs stayed busy');
      await sleep(delay * (0.5 + Math.random()));
      delay = Math.min(delay * 2, 16);
    }
  }

  /** The scope's state as the members accepted so far in this group leave it (read-only). */
  #tip(e: ScopeEntry, overlay: Map<ScopeEntry, Tip>): Tip {
    return overlay.get(e) ?? this.#r.view.state(e);
  }

  /** The checks of one member against the view and the members accepted before it in its group (lib/host/plan.ts). */
  #check(s: number, m: Member, overlay: Map<ScopeEntry, Tip>, byCommitId: Map<string, Member>, record: boolean): Verdict {
    const r = this.#r;
    const batch = m.batch;
    const earlier = byCommitId.get(batch.commitId);
    if (earlier !== undefined) return { kind: 'same', as: earlier };
    const tips = m.entries.map((e) => this.#tip(e, overlay));
    // A retry of a batch that landed: some scope it writes shows its commit id at its version.
    if (isRetryOf(batch, tips, (i, version) => r.view.visibleAt(m.entries[i]!, version)?.commitId)) return LANDED;
    let next: Tip[];
    try {
      checkBatchToken(batch.token, this.#switches.skipFenceCheck === true ? batch.token : r.stripes[s]!.cursor.fence);
      next = batch.updates.map((u, i) => stepScope(u, i, tips[i]!, batch.commitId, !this.#switches.skipVersionChecks).after);
    } catch (err) {
      if (err instanceof HostStoreError) return { kind: 'refuse', error: err };
      throw err;
    }
    if (record) for (let i = 0; i < m.entries.length; i++) overlay.set(m.entries[i]!, next[i]!);
    return ACCEPT;
  }
}

/** Answers a member once (later answers are ignored). */
function answer(m: Member, err?: unknown): void {
  if (m.done) return;
  m.done = true;
  if (err === undefined) m.resolve();
  else m.reject(err);
}

/** A group's phase moves on: what it does now, and since when. */
function step(phase: { what: string; since: number }, what: string): void {
  phase.what = what;
  phase.since = performance.now();
}

/** The view's record of a member just written (the same record a scan of the stripe reads back). */
function recOfMember(stripe: number, seq: number, offset: number, lsn: number, fence: number, m: Member, layout: FrameLayout): Rec {
  const base = offset + FRAME_HEADER_BYTES;
  const updates: RecUpdate[] = new Array(m.updates.length);
  for (let i = 0; i < m.updates.length; i++) {
    const u = m.updates[i]!;
    const e = m.entries[i]!;
    const head = layout.heads[i];
    const rows = layout.rows[i]!;
    for (let k = 0; k < rows.length; k += 2) rows[k]! += base;
    // The layout's own pair, moved to the file's offsets like the rows: no second pair per head.
    if (head !== undefined) head[0] += base;
    updates[i] = {
      key: e.key,
      kind: e.kind,
      name: e.name,
      previous: u.previous,
      next: u.next,
      del: u.delete === true,
      truncateAfter: u.truncateAfter,
      dropBefore: u.dropBefore,
      head,
      rows,
    };
  }
  return { stripe, seq, offset, lsn, fence, token: m.batch.token, commitId: m.batch.commitId, updates };
}

/** True for the I/O error a severed (killed) handle answers. */
export function isSevered(err: unknown): boolean {
  return (err as { code?: unknown } | null)?.code === 'ESEVERED' || (isSeglogError(err) && (err.cause as { code?: unknown } | undefined)?.code === 'ESEVERED');
}

export { CommitBatch };
