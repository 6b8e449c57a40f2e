// The fs host store's per-handle view of a realm: records read from the stripes, the scopes they
// touch, and which of them are visible.
//
// Owns: `View` (every record a handle has read past the checkpoint it started from, indexed by
// scope and version, with each scope's home base), the visibility rule, and `ScopeState` (what a
// scope shows: version, commit id, first/end, where its head and each run of rows lie). Guarantees:
// - Deterministic: which records are visible depends only on the set of records and home bases
//   present, never on the order they were read in. The rule (docs/host-store.md, "Two batches for
//   one version"): a record is void when its token is below a fence token before it in its
//   stripe (dropped at scan); for each scope and version the candidate with the highest token,
//   then the lowest commit id (UTF-8 order), wins the slot; a record is visible iff it wins every
//   slot it writes and every scope's visible chain reaches the version it builds on. A batch is
//   therefore visible in all of its scopes or in none.
// - Incremental: a scope's state only moves forward as records arrive (amortised O(1) per record)
//   unless an anomaly (a second candidate for a slot) or a new home base forces a recomputation.
// - Three outcomes per record: visible, dead (lost a slot, or builds on a dead record: never
//   visible), pending (builds on a version not read yet: may become visible after reading more).
// Nothing here does I/O: the store loads home bases (`setHome`) before it asks.

import { compareNames } from '../names.js';
import type { ScopeKind } from '../types.js';
import type { HomeValue } from './format.js';
import type { ScopeTip } from '../plan.js';

export const YES = 1;
export const DEAD = 2;
export const PENDING = 3;
export type Verdict = typeof YES | typeof DEAD | typeof PENDING;

/** One update of a record, with absolute offsets (in its stripe file) of its head and rows. */
export interface RecUpdate {
  readonly key: string;
  readonly kind: ScopeKind;
  readonly name: string;
  readonly previous: number | null;
  readonly next: number;
  readonly del: boolean;
  // Always present (undefined when the update has no such part): one object shape for every update.
  readonly truncateAfter: number | undefined;
  readonly dropBefore: number | undefined;
  /** [offset, length] in the record's stripe file. */
  readonly head: readonly [number, number] | undefined;
  /** Offsets and lengths of the appended rows in the record's stripe file, interleaved. */
  readonly rows: readonly number[];
}

/** One BATCH record of a stripe, as read. */
export interface Rec {
  readonly stripe: number;
  readonly seq: number;
  /** Offset of the frame in file `seq`. */
  readonly offset: number;
  readonly lsn: number;
  /** The highest fence token before this record in its stripe. */
  readonly fence: number;
  readonly token: number;
  readonly commitId: string;
  readonly updates: readonly RecUpdate[];
}

/** Where a run of rows or a head is read from: the scope's home, or a record in a stripe. */
export type Source = { readonly home: true } | { readonly rec: Rec; readonly u: RecUpdate; readonly at: number };

export interface Run {
  from: number;
  to: number;
  /** For a record: `at` is the position in `u.rows` pairs of the row with index `from`. */
  src: Source;
}

/** What a scope shows: its tip (lib/host/plan.ts), where its head is, and its rows' runs. */
export interface ScopeState extends ScopeTip {
  head: Source | null;
  runs: Run[];
}

export class ScopeEntry {
  readonly key: string;
  readonly kind: ScopeKind;
  readonly name: string;
  /** undefined: not read yet; null: the scope has no home (never checkpointed). */
  home: HomeValue | null | undefined = undefined;
  /** Candidates per version (normally one). */
  readonly slots = new Map<number, Rec[]>();
  /** The visible state as far as it was extended; null when it must be rebuilt from the home. */
  state: ScopeState | null = null;
  extending = false;
  /** Caches of the commit path: the name's UTF-8 bytes and the home stripe. */
  nameBytes: Uint8Array | undefined = undefined;
  homeStripe: number | undefined = undefined;

  constructor(key: string, kind: ScopeKind, name: string) {
    this.key = key;
    this.kind = kind;
    this.name = name;
  }
}

const HOME: Source = Object.freeze({ home: true });
const NONE: ScopeEntry[] = [];

/** The state a home base shows (or an absent scope's). */
export function stateOfHome(home: HomeValue | null): ScopeState {
  if (home === null) return { exists: false, deleted: false, version: 0, commitId: '', first: 0, end: 0, head: null, runs: [] };
  if (home.deleted) return { exists: false, deleted: true, version: home.version, commitId: home.commitId, first: home.end, end: home.end, head: null, runs: [] };
  return {
    exists: true,
    deleted: false,
    version: home.version,
    commitId: home.commitId,
    first: home.first,
    end: home.end,
    head: HOME,
    runs: home.end > home.first ? [{ from: home.first, to: home.end, src: HOME }] : [],
  };
}

/** Applies one update of a record to a state (the parts in the order truncate, drop, append, head). */
export function applyUpdate(st: ScopeState, rec: Rec, u: RecUpdate): void {
  st.version = u.next;
  st.commitId = rec.commitId;
  if (u.previous === null) {
    st.exists = true;
    st.deleted = false;
    st.first = 0;
    st.end = 0;
    st.runs = [];
  }
  if (u.del) {
    st.exists = false;
    st.deleted = true;
    st.first = st.end;
    st.runs = [];
    st.head = null;
    return;
  }
  if (u.truncateAfter !== undefined && u.truncateAfter < st.end) {
    st.end = Math.max(u.truncateAfter, st.first);
    cutAbove(st.runs, st.end);
  }
  if (u.dropBefore !== undefined && u.dropBefore > st.first) {
    st.first = Math.min(u.dropBefore, st.end);
    cutBelow(st.runs, st.first);
  }
  const n = u.rows.length / 2;
  if (n > 0) {
    st.runs.push({ from: st.end, to: st.end + n, src: { rec, u, at: 0 } });
    st.end += n;
  }
  if (u.head !== undefined) st.head = { rec, u, at: 0 };
}

function cutAbove(runs: Run[], end: number): void {
  while (runs.length > 0 && runs[runs.length - 1]!.from >= end) runs.pop();
  const last = runs[runs.length - 1];
  if (last !== undefined && last.to > end) last.to = end;
}

function cutBelow(runs: Run[], first: number): void {
  let drop = 0;
  while (drop < runs.length && runs[drop]!.to <= first) drop++;
  if (drop > 0) runs.splice(0, drop);
  const head = runs[0];
  if (head !== undefined && head.from < first) {
    const src = head.src;
    runs[0] = { from: first, to: head.to, src: 'rec' in src ? { rec: src.rec, u: src.u, at: src.at + (first - head.from) } : src };
  }
}

export function cloneState(st: ScopeState): ScopeState {
  return { ...st, runs: st.runs.map((r) => ({ ...r })) };
}

/** The winner of a slot: highest token, then lowest commit id in UTF-8 order. */
export function winnerOf(cands: readonly Rec[]): Rec {
  let w = cands[0]!;
  for (let i = 1; i < cands.length; i++) {
    const c = cands[i]!;
    if (c.token > w.token || (c.token === w.token && compareNames(c.commitId, w.commitId) < 0)) w = c;
  }
  return w;
}

/**
 * A set of records and home bases, and the visibility rule over them. The live view of a handle
 * is one; the checkpointer builds another over the cut it applies.
 */
export class View {
  readonly scopes = new Map<string, ScopeEntry>();
  /** Verdicts that never change while the record set only grows without anomalies. */
  #memo = new Map<Rec, Verdict>();
  /**
   * Records found PENDING, with the generation they were found in: while nothing changes, asking
   * again answers the same (a record that writes thousands of scopes is asked once per scope).
   */
  #pendingAt = new Map<Rec, number>();
  #visiting = new Set<Rec>();
  /** Scopes whose home base a question needed and found not loaded (see `state`). */
  readonly wanted = new Set<ScopeEntry>();
  /** Bumped whenever visibility may have changed anywhere (a record added, a base replaced). */
  generation = 0;
  /** Records held, per stripe, in lsn order. */
  readonly byStripe: Rec[][];
  anomalies = 0;

  constructor(stripes: number) {
    this.byStripe = Array.from({ length: stripes }, () => []);
  }

  entry(key: string, kind: ScopeKind, name: string): ScopeEntry {
    let e = this.scopes.get(key);
    if (e === undefined) {
      e = new ScopeEntry(key, kind, name);
      this.scopes.set(key, e);
      this.generation++;
    }
    return e;
  }

  /** Adds a record (read from a stripe, in that stripe's order). */
  add(rec: Rec): void {
    this.byStripe[rec.stripe]!.push(rec);
    this.generation++;
    let anomaly = false;
    for (const u of rec.updates) {
      const e = this.entry(u.key, u.kind, u.name);
      const cands = e.slots.get(u.next);
      if (cands === undefined) e.slots.set(u.next, [rec]);
      else {
        if (cands.some((c) => c.commitId === rec.commitId && c.token === rec.token)) continue;
        cands.push(rec);
        anomaly = true;
      }
    }
    if (anomaly) this.#reset();
  }

  /** Replaces a scope's home base (a newer read of its home cell, or the first). */
  setHome(e: ScopeEntry, home: HomeValue | null): void {
    const before = e.home;
    e.home = home;
    if (before === undefined) {
      // The first base of this scope. No kept verdict read it: while it was unknown, every question
      // that reached this scope answered PENDING, which is not kept (a DEAD found elsewhere in the
      // same record holds whatever this base is). Keeping the others matters when thousands of
      // scopes of one record are loaded one by one.
      e.state = null;
      this.generation++;
      return;
    }
    if (before === null || home === null || before.version !== home.version || before.deleted !== home.deleted) {
      e.state = null;
      this.generation++;
      // A record's verdict may depend on this base (a version the base now covers).
      this.#memo.clear();
    }
  }

  /** Forgets a scope's home base (the checkpointer moved it on; read it again before use). */
  forgetHome(e: ScopeEntry): void {
    e.home = undefined;
    e.state = null;
    this.#memo.clear();
    this.generation++;
  }

  /**
   * Drops every record of stripe `stripe` with lsn below `lsn` (the checkpointer applied them to
   * the homes); the scopes they touched must read their home again. Answers those scopes.
   */
  trim(stripe: number, lsn: number): ScopeEntry[] {
    const list = this.byStripe[stripe]!;
    let n = 0;
    while (n < list.length && list[n]!.lsn < lsn) n++;
    if (n === 0) return [];
    const gone = list.splice(0, n);
    const touched = new Set<ScopeEntry>();
    for (const rec of gone) {
      for (const u of rec.updates) {
        const e = this.scopes.get(u.key);
        if (e === undefined) continue;
        const cands = e.slots.get(u.next);
        if (cands !== undefined) {
          const left = cands.filter((c) => c !== rec);
          if (left.length === 0) e.slots.delete(u.next);
          else e.slots.set(u.next, left);
        }
        touched.add(e);
      }
    }
    for (const e of touched) {
      e.home = undefined;
      e.state = null;
    }
    this.#memo.clear();
    this.#pendingAt.clear();
    this.generation++;
    return [...touched];
  }

  #reset(): void {
    this.anomalies++;
    this.#memo.clear();
    this.#pendingAt.clear();
    for (const e of this.scopes.values()) e.state = null;
  }

  /**
   * The scope's visible state, extended as far as the records allow. A home base it needs that is
   * not loaded yet is added to `wanted` (and reads as pending): load those, then ask again.
   */
  state(e: ScopeEntry): ScopeState {
    if (e.state === null) {
      if (e.home === undefined) {
        this.wanted.add(e);
        return stateOfHome(null);
      }
      e.state = stateOfHome(e.home);
    }
    this.#extend(e, Infinity);
    return e.state;
  }

  /** Answers and clears the home bases the last questions needed and did not have. */
  takeWanted(): ScopeEntry[] {
    if (this.wanted.size === 0) return NONE;
    const out = [...this.wanted].filter((e) => e.home === undefined);
    this.wanted.clear();
    return out;
  }

  /** Why the state stopped where it did: the verdict of the next slot's winner (null: no candidate). */
  stoppedOn(e: ScopeEntry): Verdict | null {
    const st = this.state(e);
    const cands = e.slots.get(st.version + 1);
    if (cands === undefined) return null;
    return this.verdict(winnerOf(cands));
  }

  /** The record that wrote version `v` of the scope, if it is one this view holds and it is visible. */
  visibleAt(e: ScopeEntry, v: number): Rec | null {
    const cands = e.slots.get(v);
    if (cands === undefined) return null;
    const w = winnerOf(cands);
    return this.verdict(w) === YES ? w : null;
  }

  #extend(e: ScopeEntry, upTo: number): void {
    if (e.extending || e.state === null) return;
    e.extending = true;
    try {
      const st = e.state;
      while (st.version < upTo) {
        const cands = e.slots.get(st.version + 1);
        if (cands === undefined) break;
        const w = winnerOf(cands);
        // A lone single-scope record that builds on this very version is visible: skip the rule.
        const lone = cands.length === 1 && w.updates.length === 1 && (w.updates[0]!.previous ?? 0) === st.version && (st.version > 0 || w.updates[0]!.previous === null);
        if (!lone && this.verdict(w) !== YES) break;
        const u = lone ? w.updates[0]! : w.updates.find((x) => x.key === e.key)!;
        if (e.state !== st) break; // rebuilt under us (an anomaly); the caller sees the new one
        applyUpdate(st, w, u);
      }
    } finally {
      e.extending = false;
    }
  }

  /** Visible, dead or pending (see the module header). */
  verdict(rec: Rec): Verdict {
    const known = this.#memo.get(rec);
    if (known !== undefined) return known;
    if (this.#pendingAt.get(rec) === this.generation) return PENDING;
    if (this.#visiting.has(rec)) return DEAD; // a cycle: no order of commits writes one
    this.#visiting.add(rec);
    let result: Verdict = YES;
    try {
      for (const u of rec.updates) {
        const e = this.scopes.get(u.key);
        const cands = e?.slots.get(u.next);
        if (e === undefined || cands === undefined || winnerOf(cands) !== rec) {
          result = DEAD;
          break;
        }
        const r = this.#reaches(e, u);
        if (r === DEAD) {
          result = DEAD;
          break;
        }
        if (r === PENDING) result = PENDING;
      }
    } finally {
      this.#visiting.delete(rec);
    }
    if (result !== PENDING) this.#memo.set(rec, result);
    else if (this.#visiting.size === 0) this.#pendingAt.set(rec, this.generation);
    return result;
  }

  /** Whether the scope's visible chain arrives at the version `u` builds on. */
  #reaches(e: ScopeEntry, u: RecUpdate): Verdict {
    if (e.home === undefined) {
      this.wanted.add(e);
      return PENDING;
    }
    const base = e.home === null ? 0 : e.home.version;
    // A version at or below the home base: the checkpointer applied the slot's winner there.
    if (u.next <= base) return YES;
    const previous = u.previous ?? 0;
    if (u.previous === null && base !== 0) return DEAD;
    if (previous === base) return YES;
    if (previous < base) return DEAD;
    if (e.state === null) e.state = stateOfHome(e.home);
    this.#extend(e, previous);
    const st = e.state;
    if (st.version >= previous) return YES;
    const cands = e.slots.get(st.version + 1);
    if (cands === undefined) return PENDING;
    const v = this.verdict(winnerOf(cands));
    return v === YES ? PENDING : v; // YES here means a cycle cut the extension short
  }

  /** Forgets every home base (records were skipped: any home may be newer than the view knows). */
  forgetAllHomes(): void {
    for (const e of this.scopes.values()) {
      e.home = undefined;
      e.state = null;
    }
    this.#memo.clear();
    this.#pendingAt.clear();
    this.generation++;
  }
}
