// Host store: commit planning, the contract's rules that decide what a batch does, in one place.
//
// Owns: `ScopeTip` (what a commit needs to know of a scope: whether it exists or was deleted, its
// version, the commit id that wrote it, its row range [first, end)), the one retry rule
// (`isRetryOf`), the token rule (`checkBatchToken`), the per-update rule (`stepScope`: the version
// chain, deleted names, the order truncate, drop, append, head, and the row arithmetic) and
// `planCommit`, which applies them to a whole batch in the fixed order: retry, token, then each
// update. Guarantees: every function only reads and either answers or throws HostStoreError
// (CONFLICT, FENCED_OUT, INVALID) before anything is written, so a store runs the plan inside its
// own atomic step (a synchronous step, a transaction, a group under locks) and then writes it.
// The memory store, the fs store and the benchmark peers decide with these functions; the
// PostgreSQL store runs the same rules inside its commit function (lib/host/pg/schema.ts) and is
// held to the memory store by a model-based test.

import { HostStoreError } from './errors.js';
import type { CommitBatch } from './batch.js';
import type { ScopeRef, ScopeUpdate } from './types.js';
import { ScopeVersion } from './types.js';

/** What a commit needs to know of one scope. A scope never created has `exists: false, deleted: false`. */
export interface ScopeTip {
  /** The scope is visible (created and not deleted). */
  exists: boolean;
  /** A tombstone: the scope was deleted, and its name is not created again. */
  deleted: boolean;
  /** The current version (0 for a scope never created). */
  version: number;
  /** The commit id that wrote `version` ('' for a scope never created). */
  commitId: string;
  /** The first visible row's index. */
  first: number;
  /** The index the next appended row takes. */
  end: number;
}

/** The tip of a scope never created. */
export const NO_SCOPE: Readonly<ScopeTip> = Object.freeze({ exists: false, deleted: false, version: 0, commitId: '', first: 0, end: 0 });

/** A range [from, to) of row indices. */
export interface RowRange {
  from: number;
  to: number;
}

/** What one update does to one scope. Rows are removed before the new ones are inserted. */
export interface ScopeStep {
  scope: ScopeRef;
  /** The scope before the batch. */
  before: ScopeTip;
  /** The scope after it. */
  after: ScopeTip;
  /** Row ranges to remove, in order (the truncated tail, the dropped head, or every row of a deleted scope). */
  remove: RowRange[];
  /** Where the appended rows start: row k takes index `insertAt + k`. */
  insertAt: number;
  /** The rows appended. */
  rows: readonly Uint8Array[];
  /** The new head; undefined keeps the current one (a deleted scope's head is empty). */
  head: Uint8Array | undefined;
}

export type CommitPlan = { landed: true } | { landed: false; steps: ScopeStep[] };

/**
 * The one retry rule: `batch` already landed when some scope it writes shows its commit id at the
 * version the batch wrote there (`next`). The current version is always known; a store that keeps
 * older versions' commit ids answers them through `commitIdAt` (undefined: not remembered). Core
 * never commits a scope's next version while a commit touching it is unsettled, so the current
 * version is what a retry from Core finds; remembered versions only make older retries answer Ok
 * rather than CONFLICT. Either way a landed batch never acts twice, since versions only grow.
 */
export function isRetryOf(
  batch: CommitBatch,
  tips: readonly ScopeTip[],
  commitIdAt?: (update: number, version: number) => string | undefined,
): boolean {
  for (let i = 0; i < batch.updates.length; i++) {
    const u = batch.updates[i]!;
    const tip = tips[i]!;
    if (tip.version < u.next) continue;
    if (tip.version === u.next && tip.commitId === batch.commitId) return true;
    if (commitIdAt?.(i, u.next) === batch.commitId) return true;
  }
  return false;
}

/** The token rule: FENCED_OUT below the realm's highest token, INVALID above it (never issued). */
export function checkBatchToken(token: number, highest: number): void {
  if (token < highest) throw HostStoreError.fencedOut(highest);
  if (token > highest) throw HostStoreError.invalid(`fence token ${token} was never issued`);
}

/** The refusal of a create whose name was deleted before. */
export function deletedName(scope: ScopeRef, update: number): HostStoreError {
  return HostStoreError.invalid(`${scope.kind} scope ${JSON.stringify(scope.name)} was deleted; its name is not created again`, { update });
}

/**
 * What update `i` of a batch with `commitId` does to a scope at `tip`. Throws CONFLICT when the
 * scope is not at the update's `previous` (unless `checkVersions` is false: a planted mistake of
 * the fs store's tests), INVALID for a create of a deleted name, a truncateAfter below the first
 * visible row, or row indices past the safe integers.
 */
export function stepScope(u: ScopeUpdate, i: number, tip: ScopeTip, commitId: string, checkVersions = true): ScopeStep {
  if (checkVersions) {
    if (u.previous === null && tip.deleted) throw deletedName(u.scope, i);
    const current = tip.exists ? tip.version : null;
    if (current !== u.previous) throw HostStoreError.conflict(u.scope, current);
  }
  const rows = u.append ?? [];
  if (u.previous === null) {
    const after: ScopeTip = { exists: true, deleted: false, version: ScopeVersion.FIRST, commitId, first: 0, end: rows.length };
    return { scope: u.scope, before: tip, after, remove: [], insertAt: 0, rows, head: u.head };
  }
  if (u.delete === true) {
    const after: ScopeTip = { exists: false, deleted: true, version: u.next, commitId, first: tip.end, end: tip.end };
    const remove = tip.end > tip.first ? [{ from: tip.first, to: tip.end }] : [];
    return { scope: u.scope, before: tip, after, remove, insertAt: tip.end, rows: [], head: new Uint8Array(0) };
  }
  const remove: RowRange[] = [];
  let first = tip.first;
  let end = tip.end;
  if (u.truncateAfter !== undefined) {
    if (u.truncateAfter < first) {
      throw HostStoreError.invalid(`update ${i}: truncateAfter ${u.truncateAfter} is below the first visible row ${first}`, { update: i, first });
    }
    if (u.truncateAfter < end) {
      remove.push({ from: u.truncateAfter, to: end });
      end = u.truncateAfter;
    }
  }
  if (u.dropBefore !== undefined && u.dropBefore > first) {
    // Past the end every row goes and the end stays: the first index becomes the end.
    const to = Math.min(u.dropBefore, end);
    if (to > first) remove.push({ from: first, to });
    first = to;
  }
  if (!Number.isSafeInteger(end + rows.length)) throw HostStoreError.invalid(`update ${i}: row indices would overflow`);
  // (With the version checks, `previous` is the current version: the scope exists and is not deleted.)
  const after: ScopeTip = { exists: tip.exists, deleted: tip.deleted, version: u.next, commitId, first, end: end + rows.length };
  return { scope: u.scope, before: tip, after, remove, insertAt: end, rows, head: u.head };
}

/**
 * Decides what `batch` does, given the realm's highest fence token and each update's scope tip
 * (`tips[i]` for `batch.updates[i]`; NO_SCOPE for a scope never created). Answers `{ landed: true }`
 * for a retry of a batch that landed (checked first: a retry answers Ok even after a takeover);
 * otherwise checks the token, then each update in order, and answers the steps. Throws
 * HostStoreError CONFLICT, FENCED_OUT or INVALID, having decided nothing.
 */
export function planCommit(
  batch: CommitBatch,
  highest: number,
  tips: readonly ScopeTip[],
  commitIdAt?: (update: number, version: number) => string | undefined,
): CommitPlan {
  if (isRetryOf(batch, tips, commitIdAt)) return { landed: true };
  checkBatchToken(batch.token, highest);
  return { landed: false, steps: batch.updates.map((u, i) => stepScope(u, i, tips[i]!, batch.commitId)) };
}
