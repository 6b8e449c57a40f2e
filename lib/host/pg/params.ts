// The PostgreSQL host store's commit parameters: a CommitBatch as commit_one's arguments and as
// commit_batch's arguments, and commit_batch's refusals as SPI answers.
//
// Owns: `lockOrder`, `fastParams`, `commitParams`, `refusal`. Guarantees: the updates are sent
// in one fixed order (kind, then the name's UTF-8 bytes), the order in which commit_batch locks
// their rows, so two batches never deadlock; every name, head and row travels as binary `bytea`
// (byte-exact, no hex): commit_one's as parameters of their own (several rows concatenated with
// their lengths), commit_batch's in one blob addressed by 1-based offsets and lengths; a refusal
// names the update of the batch's own order that plan.ts would name.

import type { CommitBatch } from '../batch.js';
import { HostStoreError } from '../errors.js';
import { deletedName } from '../plan.js';
import type { ScopeUpdate } from '../types.js';
import { KIND_CODE, OP, SQLSTATE } from './schema.js';

/** The updates in lock order, each with its name's bytes and its position in the batch. */
export type Sorted = { u: ScopeUpdate; name: Buffer; at: number }[];

/** Sorts a batch's updates into the fixed lock order: kind, then the name's UTF-8 bytes. */
export function lockOrder(updates: readonly ScopeUpdate[]): Sorted {
  const keyed = updates.map((u, at) => ({ u, name: Buffer.from(u.scope.name, 'utf8'), at }));
  return keyed.sort((a, b) => KIND_CODE[a.u.scope.kind] - KIND_CODE[b.u.scope.kind] || Buffer.compare(a.name, b.name));
}

/**
 * The parameters of `commit_one` (see schema.ts), or null when `batch` is not its case: one update
 * that moves an existing scope to its next version, setting a head and/or appending rows, with no
 * truncation, drop or delete. Everything else (and a miss: a conflict, a fence, a retry of a
 * landed batch) goes to commit_batch, which decides the answer. One row (the common case) travels
 * as it is, with no copy; several are concatenated into one bytea with their lengths.
 */
export function fastParams(batch: CommitBatch): unknown[] | null {
  if (batch.updates.length !== 1) return null;
  const u = batch.updates[0]!;
  if (u.previous === null || u.delete === true || u.truncateAfter !== undefined || u.dropBefore !== undefined) return null;
  const rows = u.append;
  let data: Uint8Array | null = null;
  let lengths: number[] | null = null;
  if (rows !== undefined && rows.length === 1) {
    data = rows[0]!;
  } else if (rows !== undefined && rows.length > 1) {
    lengths = rows.map((row) => row.length);
    data = Buffer.concat(rows);
  }
  return [batch.commitId, batch.token, KIND_CODE[u.scope.kind], Buffer.from(u.scope.name, 'utf8'), u.previous, u.head ?? null, data, lengths];
}

/** The parameters of `commit_batch` for `batch` (see schema.ts). */
export function commitParams(batch: CommitBatch, sorted: Sorted): unknown[] {
  const kind: number[] = [];
  const prev: (number | null)[] = [];
  const op: number[] = [];
  const trunc: (number | null)[] = [];
  const drop: (number | null)[] = [];
  const nameOff: number[] = [];
  const nameLen: number[] = [];
  const headOff: number[] = [];
  const headLen: number[] = [];
  const rowFirst: number[] = [];
  const rowCount: number[] = [];
  const rowOff: number[] = [];
  const rowLen: number[] = [];
  const pieces: Uint8Array[] = [];
  let at = 1;
  const put = (bytes: Uint8Array): number => {
    const start = at;
    pieces.push(bytes);
    at += bytes.length;
    return start;
  };
  for (const { u, name } of sorted) {
    kind.push(KIND_CODE[u.scope.kind]);
    prev.push(u.previous);
    op.push((u.delete === true ? OP.delete : 0) | (u.head !== undefined ? OP.head : 0) | (u.truncateAfter !== undefined ? OP.truncate : 0) | (u.dropBefore !== undefined ? OP.drop : 0));
    trunc.push(u.truncateAfter ?? null);
    drop.push(u.dropBefore ?? null);
    nameOff.push(put(name));
    nameLen.push(name.length);
    headOff.push(u.head !== undefined ? put(u.head) : at);
    headLen.push(u.head?.length ?? 0);
    const rows = u.append ?? [];
    rowFirst.push(rowOff.length + 1);
    rowCount.push(rows.length);
    for (const row of rows) {
      rowOff.push(put(row));
      rowLen.push(row.length);
    }
  }
  const blob = Buffer.concat(pieces, at - 1);
  // The batch's own order, as positions in the lock order (1-based): a refusal names the update plan.ts would.
  const order = sorted.map((x, pos) => ({ at: x.at, pos: pos + 1 })).sort((a, b) => a.at - b.at).map((x) => x.pos);
  return [batch.commitId, batch.token, kind, prev, op, trunc, drop, nameOff, nameLen, headOff, headLen, rowFirst, rowCount, rowOff, rowLen, order, blob];
}

/** The SPI answer for a refusal `commit_batch` raised; null when the batch landed before (Ok). */
export function refusal(err: { code: string; message: string; detail?: string }, batch: CommitBatch, sorted: Sorted): HostStoreError | null {
  const at = (text: string | undefined): ScopeUpdate => sorted[Number(text)]!.u;
  switch (err.code) {
    case SQLSTATE.landed:
      return null;
    case SQLSTATE.fencedOut:
      return HostStoreError.fencedOut(Number(err.message));
    case SQLSTATE.conflict: {
      const u = at(err.message);
      return HostStoreError.conflict(u.scope, err.detail === undefined || err.detail === '' ? null : Number(err.detail));
    }
    default: {
      if (err.message === 'never-issued') return HostStoreError.invalid(`fence token ${batch.token} was never issued`);
      const [i, first] = (err.detail ?? '').split(' ');
      const u = at(i);
      const index = batch.updates.indexOf(u);
      if (err.message === 'deleted-name') return deletedName(u.scope, index);
      if (err.message === 'truncate-below-first') {
        return HostStoreError.invalid(`update ${index}: truncateAfter ${u.truncateAfter} is below the first visible row ${first}`, { update: index, first: Number(first) });
      }
      return HostStoreError.invalid(`update ${index}: row indices would overflow`);
    }
  }
}
