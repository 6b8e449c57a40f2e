// Host store: commit batches (docs/contracts/host-store.md, sections 3 and 4).
//
// Owns: `CommitBatch`, the only shape a host store commits, and every well-formedness rule that can
// be judged without the store's state. Guarantees: a CommitBatch that exists is well formed; it
// holds its own copy of every byte array the caller passed (a caller that mutates its arrays
// afterwards cannot change a validated batch), and its updates, scope refs and row lists are
// frozen. Rules that need the store's state (a truncateAfter below the first row, a re-created
// deleted name) are the store's to judge at commit.

import { isIndex } from '../assert.js';
import { HostStoreError } from './errors.js';
import { checkCommitId, checkScopeRef, scopeKey } from './names.js';
import { MAX_BATCH_BYTES, MAX_ROW_BYTES, ScopeVersion, type ScopeUpdate } from './types.js';

const UPDATE_FIELDS = ['head', 'append', 'truncateAfter', 'dropBefore'] as const;

/**
 * One atomic batch: a commit id, the writer's fence token and one update per scope it writes.
 * Built only by `tryNew`, which refuses a malformed batch with HostStoreError INVALID.
 */
export class CommitBatch {
  /** Non-empty, at most 128 UTF-8 bytes, no control characters. Core never reuses one for other content. */
  readonly commitId: string;
  /** The fence token of the writer. */
  readonly token: number;
  /** One frozen, copied update per scope, in the caller's order. */
  readonly updates: readonly ScopeUpdate[];
  /** Bytes of heads and rows in all (at most MAX_BATCH_BYTES). */
  readonly payloadBytes: number;

  private constructor(commitId: string, token: number, updates: readonly ScopeUpdate[], payloadBytes: number) {
    this.commitId = commitId;
    this.token = token;
    this.updates = updates;
    this.payloadBytes = payloadBytes;
    Object.freeze(this);
  }

  /**
   * Validates and copies a batch. Refuses with INVALID: no update; two updates of one scope; a
   * malformed update; a malformed commit id; a token that is not a safe non-negative integer; more
   * than MAX_BATCH_BYTES of heads and rows in all.
   */
  static tryNew(commitId: string, token: number, updates: ScopeUpdate[]): CommitBatch {
    checkCommitId(commitId);
    if (!isIndex(token)) throw HostStoreError.invalid(`fence token ${String(token)} is not a safe non-negative integer`, { where: 'token' });
    if (!Array.isArray(updates)) throw HostStoreError.invalid('updates is not an array', { where: 'updates' });
    if (updates.length === 0) throw HostStoreError.invalid('a batch needs at least one update', { where: 'updates' });
    const seen = new Set<string>();
    const copies: ScopeUpdate[] = [];
    let payloadBytes = 0;
    for (let i = 0; i < updates.length; i++) {
      const { update, bytes } = copyUpdate(updates[i], i);
      const key = scopeKey(update.scope);
      if (seen.has(key)) {
        throw HostStoreError.invalid(`two updates of ${update.scope.kind} scope ${JSON.stringify(update.scope.name)}`, { update: i });
      }
      seen.add(key);
      payloadBytes += bytes;
      if (payloadBytes > MAX_BATCH_BYTES) {
        throw HostStoreError.invalid(`heads and rows exceed ${MAX_BATCH_BYTES} bytes in all`, { update: i });
      }
      copies.push(update);
    }
    return new CommitBatch(commitId, token, Object.freeze(copies), payloadBytes);
  }

  /**
   * `batch` itself when it was built by `tryNew`; otherwise (a plain object from a caller that
   * skipped `tryNew`) a validated copy of it. Stores call this first in `commit`.
   */
  static from(batch: unknown): CommitBatch {
    if (batch instanceof CommitBatch) return batch;
    if (typeof batch !== 'object' || batch === null) throw HostStoreError.invalid('the batch is not a CommitBatch', { where: 'batch' });
    const { commitId, token, updates } = batch as { commitId?: unknown; token?: unknown; updates?: unknown };
    if (!Array.isArray(updates)) throw HostStoreError.invalid('updates is not an array', { where: 'updates' });
    return CommitBatch.tryNew(commitId as string, token as number, [...(updates as ScopeUpdate[])]);
  }
}

function fail(i: number, field: string, message: string): never {
  throw HostStoreError.invalid(`update ${i}: ${message}`, { update: i, field });
}

function copyBytes(value: unknown, i: number, field: string): Uint8Array {
  if (!(value instanceof Uint8Array)) fail(i, field, `${field} is not a Uint8Array`);
  return new Uint8Array(value); // a copy of exactly the view's bytes
}

/** Validates one update and copies it (bytes copied, structure frozen). Answers its payload bytes. */
function copyUpdate(raw: unknown, i: number): { update: ScopeUpdate; bytes: number } {
  if (typeof raw !== 'object' || raw === null) fail(i, 'update', 'not a ScopeUpdate');
  const u = raw as Record<string, unknown>;
  checkScopeRef(u['scope'], `update ${i}: scope`);
  const scopeIn = u['scope'] as { kind: ScopeUpdate['scope']['kind']; name: string };
  const scope = Object.freeze({ kind: scopeIn.kind, name: scopeIn.name });

  const previous = u['previous'];
  const next = u['next'];
  if (previous !== null && !isIndex(previous)) fail(i, 'previous', `previous ${String(previous)} is neither null nor a safe non-negative integer`);
  if (!isIndex(next)) fail(i, 'next', `next ${String(next)} is not a safe non-negative integer`);
  const creating = previous === null;
  if (creating) {
    if (next !== ScopeVersion.FIRST) fail(i, 'next', `a creating update's next must be ${ScopeVersion.FIRST}, not ${next}`);
  } else {
    // Versions start at FIRST, so no version below it exists for an update to apply to.
    if (previous < ScopeVersion.FIRST) fail(i, 'previous', `previous ${previous} is below the first version ${ScopeVersion.FIRST}`);
    if (next !== previous + 1) fail(i, 'next', `next ${next} is not previous + 1 (${previous + 1})`);
  }

  const del = u['delete'];
  if (del !== undefined && typeof del !== 'boolean') fail(i, 'delete', 'delete is not a boolean');
  if (del === true) {
    if (creating) fail(i, 'delete', 'a creating update cannot delete');
    for (const field of UPDATE_FIELDS) {
      if (u[field] !== undefined) fail(i, field, `a deleting update sets nothing else, but ${field} is set`);
    }
    return { update: Object.freeze({ scope, previous, next, delete: true }), bytes: 0 };
  }

  const update: ScopeUpdate = { scope, previous, next };
  let bytes = 0;
  if (u['head'] !== undefined) {
    update.head = copyBytes(u['head'], i, 'head');
    bytes += update.head.length;
  } else if (creating) {
    fail(i, 'head', 'a creating update must set head');
  }
  const append = u['append'];
  if (append !== undefined) {
    if (!Array.isArray(append)) fail(i, 'append', 'append is not an array');
    const rows: Uint8Array[] = [];
    for (let r = 0; r < append.length; r++) {
      const row: unknown = append[r];
      if (!(row instanceof Uint8Array)) fail(i, 'append', `row ${r} is not a Uint8Array`);
      if (row.length > MAX_ROW_BYTES) fail(i, 'append', `row ${r} has ${row.length} bytes, more than ${MAX_ROW_BYTES}`);
      bytes += row.length;
      if (bytes > MAX_BATCH_BYTES) {
        throw HostStoreError.invalid(`heads and rows exceed ${MAX_BATCH_BYTES} bytes in all`, { update: i });
      }
      rows.push(new Uint8Array(row));
    }
    update.append = Object.freeze(rows) as Uint8Array[];
  }
  for (const field of ['truncateAfter', 'dropBefore'] as const) {
    const value = u[field];
    if (value === undefined) continue;
    if (creating) fail(i, field, `a creating update removes no rows, but ${field} is set`);
    if (!isIndex(value)) fail(i, field, `${field} ${String(value)} is not a safe non-negative integer`);
    update[field] = value;
  }
  return { update: Object.freeze(update), bytes };
}
