// Host store: the shapes and limits of the Host Store SPI, as docs/contracts/host-store.md states them.
//
// Owns: the public types every host store speaks (scopes, heads, rows, fence grants, updates, the
// `HostStore` interface) and the SPI's constants. Guarantees: names and shapes are exactly those
// of docs/contracts/host-store.md; everything here is data, with no behaviour (validation lives in batch.ts/names.ts).

import type { CommitBatch } from './batch.js';
import type { FenceTiming } from './timing.js';

/** What a scope holds for Core. Each kind is a namespace of its own: one name may exist in two kinds. */
export type ScopeKind = 'session' | 'identity' | 'mob' | 'record';

/** Every scope kind, in a fixed order. */
export const SCOPE_KINDS: readonly ScopeKind[] = Object.freeze(['session', 'identity', 'mob', 'record']);

/**
 * Names one scope. `name` is 1..512 bytes of UTF-8, well-formed (no lone surrogate) and without
 * control characters (Unicode category Cc). Names sort by their UTF-8 bytes (see `compareNames`).
 */
export interface ScopeRef {
  kind: ScopeKind;
  name: string;
}

/** A scope's visible head: its version, the commit id of the batch that wrote that version, and the bytes. */
export interface VersionedHead {
  version: number;
  commitId: string;
  head: Uint8Array;
}

/** One entry of a listing. */
export interface ListedHead {
  name: string;
  head: VersionedHead;
}

/**
 * One page of `listHeads`. `next` is null exactly when no visible scope of the kind sorts after
 * the last name returned; otherwise pass it back as `after` to read on.
 */
export interface HeadPage {
  heads: ListedHead[];
  next: string | null;
}

/** One row of a scope, with its stable index. */
export interface Row {
  index: number;
  data: Uint8Array;
}

/** `exclusive` answers HELD while another holder's lease lasts; `takeover` supersedes any holder. */
export type AcquireMode = 'exclusive' | 'takeover';

/**
 * The answer of an acquire: a token higher than any acquired before in the realm, and what was
 * left of the superseded live holder's lease, in milliseconds (0 when no holder was live).
 */
export interface FenceGrant {
  token: number;
  supersededLease: number;
}

/**
 * What one batch does to one scope. The parts apply in the order truncateAfter, dropBefore,
 * append, head. A creating update (`previous: null`) must set `head`, removes no rows and cannot
 * delete. A deleting update sets nothing else. Row indices start at 0 in a new scope.
 */
export interface ScopeUpdate {
  scope: ScopeRef;
  /** The version the update applies to; null creates the scope. */
  previous: number | null;
  /** previous + 1, or `ScopeVersion.FIRST` (1) when creating. */
  next: number;
  /** The new head; absent keeps the current one. Required when creating. */
  head?: Uint8Array;
  /** Rows appended at the end, in order; the first takes the end index left after any truncation. */
  append?: Uint8Array[];
  /** Removes every row whose index is at least this; at or past the end nothing is removed. */
  truncateAfter?: number;
  /** Removes every row whose index is below this, without renumbering; past the end, every row (the end stays). */
  dropBefore?: number;
  /** Deletes the scope with its head and rows. Nothing else may be set. */
  delete?: boolean;
}

/**
 * The Host Store SPI. Every method answers errors as `HostStoreError` (lib/host/errors.ts) with
 * the SPI's codes: CONFLICT, FENCED_OUT, INDETERMINATE, INVALID, UNAVAILABLE, HELD.
 */
export interface HostStore {
  /** A token higher than any before, durably, with a new lease for its holder. `exclusive`: HELD while a holder is live. */
  acquireFence(mode: AcquireMode): Promise<FenceGrant>;
  /** Confirms no higher token exists and records a new lease from now (also after a lapse); FENCED_OUT otherwise. */
  renewFence(token: number): Promise<void>;
  /** The renew interval and lease this store records. */
  fenceTiming(): FenceTiming;
  /** The scope's visible head, or null when it was never created or was deleted. */
  loadHead(scope: ScopeRef): Promise<VersionedHead | null>;
  /** Visible scopes of `kind` whose names sort after `after` (exclusive), in UTF-8 byte order, at most `limit` (≥ 1). */
  listHeads(kind: ScopeKind, after: string | null, limit: number): Promise<HeadPage>;
  /** At most `limit` visible rows from `from`, in index order; `from` below the first row is INVALID. */
  readRows(scope: ScopeRef, from: number, limit: number): Promise<Row[]>;
  /** Applies the batch atomically; resolving means durable. A commit id that already landed answers Ok again. */
  commit(batch: CommitBatch): Promise<void>;
}

const MiB = 1024 * 1024;

/** Heads and rows of one batch, in all: 8 MiB. */
export const MAX_BATCH_BYTES = 8 * MiB;
/** One row: 1 MiB. */
export const MAX_ROW_BYTES = MiB;
/** A scope name, in UTF-8 bytes: 512. */
export const MAX_SCOPE_NAME_BYTES = 512;
/** A commit id, in UTF-8 bytes: 128. */
export const MAX_COMMIT_ID_BYTES = 128;
/** The default renew interval, in seconds. */
export const FENCE_RENEW_INTERVAL_SECS = 10;
/** The default lease, in seconds. */
export const FENCE_LEASE_SECS = 30;
/** A lease lasts at least this many renew intervals. */
export const FENCE_MIN_LEASE_RENEWALS = 3;
/** The default longest commit, in seconds. */
export const FENCE_MAX_COMMIT_LATENCY_SECS = 2;

/** Scope versions. Every scope starts at `FIRST` and each batch moves it to the next. */
export const ScopeVersion = Object.freeze({
  /** The version a creating update writes. */
  FIRST: 1,
});
