// The sync policy: when a segmented log makes appended records durable, and when an append resolves.
//
// Owns: the `SyncPolicy` type (the one definition: the package and the benchmarks import it from
// here), its parsing, and `SyncSchedule`, the policy's decisions as the writer and the syncer ask
// them: must an append wait for its sync, must a group write wait until the last one's sync is
// issued, is a sync due after a write, and after how long a timer should force one. Adding a
// policy (say, "every N appends") is a new case of the type, of `parseSyncPolicy` and of
// `SyncSchedule`, in this file only.
// Guarantees: whatever the policy, a record's `durable` settles only after the sync that covers it
// (the syncer's rule, not the policy's); the policy only chooses when syncs start and whether an
// append's promise waits for one.

import { invalid } from '../lib/errors.js';
import { isIndex } from '../lib/assert.js';
import type { AppendOp } from './queue.js';

/**
 * When appended records are made durable.
 * - `'always'` (default): every append resolves after the fdatasync that covers it (group commit).
 * - `{ everyBytes }`: appends resolve once written; a sync runs when that many bytes are unsynced.
 * - `{ everyMs }`: appends resolve once written; a sync runs at most that long after a write.
 * - `'none'`: appends resolve once written; only `sync()`, structural changes and `close()` sync.
 * Whatever the policy, `stage(...).durable` settles only after the covering sync.
 */
export type SyncPolicy = 'always' | 'none' | { everyBytes: number } | { everyMs: number };

/** Checks a policy given by a caller; INVALID unless it is one of the shapes above. */
export function parseSyncPolicy(p: SyncPolicy | undefined): SyncPolicy {
  if (p === undefined || p === 'always' || p === 'none') return p ?? 'always';
  if (typeof p === 'object' && p !== null) {
    const bytes = (p as { everyBytes?: unknown }).everyBytes;
    const ms = (p as { everyMs?: unknown }).everyMs;
    if (bytes !== undefined && ms === undefined && isIndex(bytes) && bytes > 0) return { everyBytes: bytes };
    if (ms !== undefined && bytes === undefined && typeof ms === 'number' && ms > 0 && Number.isFinite(ms)) return { everyMs: ms };
  }
  throw invalid(`sync policy must be 'always', 'none', { everyBytes: n } or { everyMs: n }`);
}

/** One log's policy, with what it counts between syncs. */
export class SyncSchedule {
  readonly policy: SyncPolicy;
  /**
   * An append resolves only once durable, and a group write waits until every earlier group's
   * sync has started (a pipeline of two: one group syncing while the next is written).
   */
  readonly acksAfterSync: boolean;
  readonly #everyBytes: number;
  readonly #everyMs: number;
  /** Frame bytes written since the last sync started. */
  #unsyncedBytes = 0;

  constructor(policy: SyncPolicy) {
    this.policy = policy;
    this.acksAfterSync = policy === 'always';
    this.#everyBytes = typeof policy === 'object' && 'everyBytes' in policy ? policy.everyBytes : 0;
    this.#everyMs = typeof policy === 'object' && 'everyMs' in policy ? policy.everyMs : 0;
  }

  /**
   * Counts a group write: its appends, of `bytes` frame bytes in all (a policy that counts
   * appends or records counts them here).
   */
  written(_group: readonly AppendOp[], bytes: number): void {
    this.#unsyncedBytes += bytes;
  }

  /** A sync starts: it covers everything counted so far. */
  syncStarted(): void {
    this.#unsyncedBytes = 0;
  }

  /** Whether written, unsynced data should be synced now (besides a sync someone asked for). */
  due(): boolean {
    return this.acksAfterSync || (this.#everyBytes > 0 && this.#unsyncedBytes >= this.#everyBytes);
  }

  /** How long after a write, when no sync is due, a timer should force one (0: no timer). */
  timerMs(): number {
    return this.#everyMs;
  }
}
