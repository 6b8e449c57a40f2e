// Host store: the argument guards of the SPI's operations and of a store's open options.
//
// Owns: one guard per operation (`checkAcquireMode`, `checkFenceToken`, `checkListArgs`,
// `checkReadArgs`; `checkScopeRef` for loadHead lives in names.ts), the options every backend takes
// (`checkTiming`, `checkHolderId`, `defaultHolderId`) and `asHostError`, which turns what a backend
// threw into an SPI answer. Guarantees: every store runs the same guard before it touches its
// storage, so a malformed argument answers INVALID, with the same message, from every backend and
// changes nothing.

import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { isIndex } from '../assert.js';
import { HostStoreError } from './errors.js';
import { SeglogError } from '../errors.js';
import { checkScopeKind, checkScopeName, checkScopeRef } from './names.js';
import { FenceTiming } from './timing.js';
import type { AcquireMode, ScopeKind, ScopeRef } from './types.js';

/** Throws INVALID unless `mode` is 'exclusive' or 'takeover'. */
export function checkAcquireMode(mode: unknown): asserts mode is AcquireMode {
  if (mode !== 'exclusive' && mode !== 'takeover') throw HostStoreError.invalid(`acquire mode ${String(mode)} is not exclusive or takeover`);
}

/** Throws INVALID unless `token` is a safe non-negative integer (renewFence's argument). */
export function checkFenceToken(token: unknown): asserts token is number {
  if (!isIndex(token)) throw HostStoreError.invalid(`fence token ${String(token)} is not a safe non-negative integer`);
}

/** listHeads' arguments: a scope kind, null or a valid name after which to list, a limit of at least 1. */
export function checkListArgs(kind: unknown, after: unknown, limit: unknown): asserts kind is ScopeKind {
  checkScopeKind(kind);
  if (after !== null) checkScopeName(after, 'after');
  if (!isIndex(limit) || limit < 1) throw HostStoreError.invalid(`limit ${String(limit)} is not an integer of at least 1`);
}

/** readRows' arguments: a scope, and `from` and `limit` that are safe non-negative integers. */
export function checkReadArgs(scope: unknown, from: unknown, limit: unknown): asserts scope is ScopeRef {
  checkScopeRef(scope);
  if (!isIndex(from)) throw HostStoreError.invalid(`from ${String(from)} is not a safe non-negative integer`);
  if (!isIndex(limit)) throw HostStoreError.invalid(`limit ${String(limit)} is not a safe non-negative integer`);
}

/** The readRows refusal for a `from` below the scope's first visible row. */
export function belowFirstRow(from: number, first: number): HostStoreError {
  return HostStoreError.invalid(`row ${from} is below the first visible row ${first}`, { first });
}

/** `timing` itself, or the default when absent; INVALID when it is not a FenceTiming. */
export function checkTiming(timing: unknown): FenceTiming {
  if (timing === undefined) return FenceTiming.default();
  if (!(timing instanceof FenceTiming)) throw HostStoreError.invalid('timing must be a FenceTiming');
  return timing;
}

/** A holder id naming this process: host, pid and a random part. */
export function defaultHolderId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/** `holderId` itself, or `defaultHolderId()` when absent; INVALID unless it is 1..`maxBytes` bytes of UTF-8. */
export function checkHolderId(holderId: unknown, maxBytes: number): string {
  const id = holderId ?? defaultHolderId();
  if (typeof id !== 'string' || id.length === 0 || Buffer.byteLength(id) > maxBytes) {
    throw HostStoreError.invalid(`holderId must be a non-empty string of at most ${maxBytes} bytes`);
  }
  return id;
}

/**
 * `err` when it is a HostStoreError already; damage (a CORRUPT SeglogError) as
 * `HostStoreError.damaged` (UNAVAILABLE, the CORRUPT error its cause); anything else UNAVAILABLE
 * naming `what` failed (nothing was applied).
 */
export function asHostError(err: unknown, what: string): HostStoreError {
  if (err instanceof HostStoreError) return err;
  if (err instanceof SeglogError && err.code === 'CORRUPT') return HostStoreError.damaged(err, what);
  const message = err instanceof Error ? err.message : String(err);
  return HostStoreError.unavailable(`${what}: ${message}`, err);
}
