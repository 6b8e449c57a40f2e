// The commit logic the peer host stores share: what a batch does to each scope, decided from the
// scopes' current state, before anything is written.
//
// Owns: `ScopeMeta` (a scope's versioned head and row range), `planCommit` (the checks of a
// commit — retry, fence token, version chain, deleted names, row bounds — and the changes it makes)
// and the lease arithmetic of the fence. Guarantees: the same rules as lib/host/memory.ts, the
// reference store (obligations 3, 4 and 5 met at commit: a retry of a landed batch answers Ok,
// CONFLICT and FENCED_OUT refuse the whole batch); `planCommit` only reads (through `load`) and
// throws HostStoreError before anything is written, so a peer runs it inside its transaction,
// then writes the plan. Each peer therefore does the same work per commit as seglog's store:
// read each scope's head, check, write the head, write the rows.

import { readFileSync } from 'node:fs';
import { HostStoreError } from '../../lib/host/errors.js';
import type { CommitBatch } from '../../lib/host/batch.js';
import type { FenceGrant, ScopeRef } from '../../lib/host/types.js';
import { ScopeVersion } from '../../lib/host/types.js';

/** A scope as a peer stores it: the visible head, and the range [first, end) of its rows. */
export interface ScopeMeta {
  version: number;
  commitId: string;
  head: Uint8Array;
  first: number;
  end: number;
  /** A tombstone: the scope was deleted (its name is not created again). */
  deleted: boolean;
}

/** The changes one update makes to one scope. Rows are removed before new rows are inserted. */
export interface ScopeStep {
  scope: ScopeRef;
  /** The scope's state before the batch (null: it never existed). */
  before: ScopeMeta | null;
  /** Its state after the batch. */
  after: ScopeMeta;
  /** Row index ranges [from, to) to delete, in order (truncation, drop, or deletion). */
  remove: { from: number; to: number }[];
  /** Rows to insert: `rows[i]` takes index `start + i`. */
  insert: { start: number; rows: readonly Uint8Array[] };
}

export type CommitPlan = { landed: true } | { landed: false; steps: ScopeStep[] };

/**
 * Decides what `batch` does, given the realm's highest fence token and each scope's current state
 * (`load` answers null for a scope that never existed). Throws HostStoreError CONFLICT, FENCED_OUT
 * or INVALID; answers `{ landed: true }` for a retry of a batch that already landed.
 */
export function planCommit(batch: CommitBatch, highestToken: number, load: (scope: ScopeRef) => ScopeMeta | null): CommitPlan {
  const metas = batch.updates.map((u) => load(u.scope));
  // A retry of a landed batch: a scope it wrote is at the version it wrote, by this commit id.
  // (Core never commits a scope's next version while a commit touching it is unsettled, so the
  // current version is the only one a retry can find.)
  for (let i = 0; i < batch.updates.length; i++) {
    const m = metas[i];
    const u = batch.updates[i]!;
    if (m != null && m.version === u.next && m.commitId === batch.commitId) return { landed: true };
  }
  if (batch.token < highestToken) throw HostStoreError.fencedOut(highestToken);
  if (batch.token > highestToken) throw HostStoreError.invalid(`fence token ${batch.token} was never issued`);
  const steps: ScopeStep[] = [];
  for (let i = 0; i < batch.updates.length; i++) {
    const u = batch.updates[i]!;
    const before = metas[i] ?? null;
    if (u.previous === null && before?.deleted === true) {
      throw HostStoreError.invalid(`${u.scope.kind} scope ${JSON.stringify(u.scope.name)} was deleted; its name is not created again`, { update: i });
    }
    const current = before === null || before.deleted ? null : before.version;
    if (current !== u.previous) throw HostStoreError.conflict(u.scope, current);
    if (before === null) {
      const rows = u.append ?? [];
      steps.push({
        scope: u.scope,
        before,
        after: { version: ScopeVersion.FIRST, commitId: batch.commitId, head: u.head as Uint8Array, first: 0, end: rows.length, deleted: false },
        remove: [],
        insert: { start: 0, rows },
      });
      continue;
    }
    if (u.delete === true) {
      steps.push({
        scope: u.scope,
        before,
        after: { version: u.next, commitId: batch.commitId, head: new Uint8Array(0), first: before.end, end: before.end, deleted: true },
        remove: before.end > before.first ? [{ from: before.first, to: before.end }] : [],
        insert: { start: before.end, rows: [] },
      });
      continue;
    }
    if (u.truncateAfter !== undefined && u.truncateAfter < before.first) {
      throw HostStoreError.invalid(`update ${i}: truncateAfter ${u.truncateAfter} is below the first visible row ${before.first}`, { update: i });
    }
    const remove: { from: number; to: number }[] = [];
    let first = before.first;
    let end = before.end;
    if (u.truncateAfter !== undefined && u.truncateAfter < end) {
      remove.push({ from: u.truncateAfter, to: end });
      end = u.truncateAfter;
    }
    if (u.dropBefore !== undefined && u.dropBefore > first) {
      const to = Math.min(u.dropBefore, end);
      if (to > first) remove.push({ from: first, to });
      // Past the end every row goes and the end stays: the first index becomes the end.
      first = Math.min(u.dropBefore, end);
    }
    const rows = u.append ?? [];
    if (!Number.isSafeInteger(end + rows.length)) throw HostStoreError.invalid(`update ${i}: row indices would overflow`);
    steps.push({
      scope: u.scope,
      before,
      after: { version: u.next, commitId: batch.commitId, head: u.head ?? before.head, first, end: end + rows.length, deleted: false },
      remove,
      insert: { start: end, rows },
    });
  }
  return { landed: false, steps };
}

/** The fence as a peer records it: the highest token, its holder, and the lease on the store's clock. */
export interface FenceRecord {
  token: number;
  holder: string;
  /** The holder is live while now < leaseUntil (same boot only). */
  leaseUntil: number;
  /** The boot the lease was recorded in: a reboot ends every lease (the clock restarts). */
  boot: string;
}

/** An acquire: throws HELD for an exclusive acquire while a holder is live; else the new record and grant. */
export function planAcquire(
  mode: 'exclusive' | 'takeover',
  current: FenceRecord | null,
  holder: string,
  now: number,
  boot: string,
  leaseMs: number,
): { record: FenceRecord; grant: FenceGrant } {
  const live = current !== null && current.boot === boot && now < current.leaseUntil ? current : null;
  if (mode === 'exclusive' && live !== null) throw HostStoreError.held(live.holder, live.leaseUntil - now, live.token);
  const token = (current?.token ?? 0) + 1;
  return {
    record: { token, holder, leaseUntil: now + leaseMs, boot },
    grant: { token, supersededLease: live === null ? 0 : live.leaseUntil - now },
  };
}

/** A renew: FENCED_OUT below the highest token, INVALID above it; else the record with a new lease. */
export function planRenew(token: number, current: FenceRecord | null, now: number, boot: string, leaseMs: number): FenceRecord {
  const highest = current?.token ?? 0;
  if (current === null || token > highest) throw HostStoreError.invalid(`fence token ${token} was never issued`);
  if (token < highest) throw HostStoreError.fencedOut(highest);
  return { ...current, leaseUntil: now + leaseMs, boot };
}

// ---- a compact binary form of ScopeMeta and FenceRecord (for key-value peers) ----

const META_FIXED = 8 + 8 + 8 + 1 + 2;

/** ScopeMeta as bytes: version, first, end (f64 each), deleted (u8), commit id (u16 length + UTF-8), head. */
export function encodeScopeMeta(m: ScopeMeta): Buffer {
  const id = Buffer.from(m.commitId, 'utf8');
  const out = Buffer.allocUnsafe(META_FIXED + id.length + m.head.length);
  out.writeDoubleLE(m.version, 0);
  out.writeDoubleLE(m.first, 8);
  out.writeDoubleLE(m.end, 16);
  out.writeUInt8(m.deleted ? 1 : 0, 24);
  out.writeUInt16LE(id.length, 25);
  id.copy(out, META_FIXED);
  out.set(m.head, META_FIXED + id.length);
  return out;
}

export function decodeScopeMeta(b: Uint8Array): ScopeMeta {
  const buf = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  if (buf.length < META_FIXED) throw new RangeError('scope meta too short');
  const idLen = buf.readUInt16LE(25);
  if (buf.length < META_FIXED + idLen) throw new RangeError('scope meta too short for its commit id');
  return {
    version: buf.readDoubleLE(0),
    first: buf.readDoubleLE(8),
    end: buf.readDoubleLE(16),
    deleted: buf.readUInt8(24) === 1,
    commitId: buf.toString('utf8', META_FIXED, META_FIXED + idLen),
    head: Uint8Array.prototype.slice.call(buf, META_FIXED + idLen),
  };
}

export function encodeFence(f: FenceRecord): Buffer {
  return Buffer.from(JSON.stringify(f), 'utf8');
}

export function decodeFence(b: Uint8Array): FenceRecord {
  return JSON.parse(Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('utf8')) as FenceRecord;
}

/** The boot id of this machine (a reboot restarts the monotonic clock, ending every lease). */
export function bootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return 'unknown-boot';
  }
}
