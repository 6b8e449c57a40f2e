// What the peer host stores share besides lib/host: a scope as a peer stores it, the commit plan
// in the peers' terms, and compact binary forms of a scope and of the fence record.
//
// Owns: `ScopeMeta` (a scope's visible head and the range [first, end) of its rows), `planCommit`
// (lib/host/plan.ts's plan, answered as the heads and rows a peer writes) and the codecs.
// Guarantees: the peers decide every commit, acquire and renew with the rules of seglog's own
// stores (lib/host/plan.ts, lib/host/lease.ts, re-exported here): a retry of a landed batch answers
// Ok, CONFLICT and FENCED_OUT refuse the whole batch, all before anything is written, so a peer
// runs the plan inside its transaction, then writes it. Each peer therefore does the same work per
// commit as seglog's store: read each scope's head, check, write the head, write the rows.

import type { CommitBatch } from '../../lib/host/batch.js';
import { NO_SCOPE, planCommit as planBatch, type RowRange, type ScopeTip } from '../../lib/host/plan.js';
import type { FenceRecord } from '../../lib/host/lease.js';
import type { ScopeRef } from '../../lib/host/types.js';

export { planAcquire, planRenew, readBootId, type FenceRecord } from '../../lib/host/lease.js';

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
  remove: RowRange[];
  /** Rows to insert: `rows[i]` takes index `start + i`. */
  insert: { start: number; rows: readonly Uint8Array[] };
}

export type CommitPlan = { landed: true } | { landed: false; steps: ScopeStep[] };

function tipOf(m: ScopeMeta | null): ScopeTip {
  return m === null ? NO_SCOPE : { exists: !m.deleted, deleted: m.deleted, version: m.version, commitId: m.commitId, first: m.first, end: m.end };
}

/**
 * Decides what `batch` does, given the realm's highest fence token and each scope's current state
 * (`load` answers null for a scope that never existed), by lib/host/plan.ts's rules. Throws
 * HostStoreError CONFLICT, FENCED_OUT or INVALID; answers `{ landed: true }` for a retry of a
 * batch that already landed.
 */
export function planCommit(batch: CommitBatch, highestToken: number, load: (scope: ScopeRef) => ScopeMeta | null): CommitPlan {
  const metas = batch.updates.map((u) => load(u.scope));
  const plan = planBatch(batch, highestToken, metas.map(tipOf));
  if (plan.landed) return plan;
  const steps = plan.steps.map((step, i): ScopeStep => {
    const before = metas[i] ?? null;
    const { version, commitId, first, end, deleted } = step.after;
    const head = step.head ?? before?.head ?? new Uint8Array(0);
    return { scope: step.scope, before, after: { version, commitId, head, first, end, deleted }, remove: step.remove, insert: { start: step.insertAt, rows: step.rows } };
  });
  return { landed: false, steps };
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

