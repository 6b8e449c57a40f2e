// Host store: scope names, commit ids and their order.
//
// Owns: the well-formedness rules of scope kinds, scope names and commit ids, and `compareNames`,
// the one order of names every host store lists in. Guarantees: `compareNames` orders well-formed
// strings exactly as their UTF-8 bytes compare (which is code-point order), and is a total order
// on all strings; the checks answer HostStoreError INVALID, naming what is wrong.

import { HostStoreError } from './errors.js';
import { MAX_COMMIT_ID_BYTES, MAX_SCOPE_NAME_BYTES, SCOPE_KINDS, type ScopeKind, type ScopeRef } from './types.js';

const CONTROL = /\p{Cc}/u;
// With the `u` flag a surrogate pair is one code point, so this matches only a lone surrogate.
const LONE_SURROGATE = /\p{Cs}/u;
const KINDS: ReadonlySet<unknown> = new Set(SCOPE_KINDS);

/**
 * Orders two names by their UTF-8 bytes. UTF-8 byte order is code-point order, which differs from
 * JavaScript's UTF-16 code-unit order only where a surrogate (a code point above U+FFFF) meets a
 * code unit in U+E000..U+FFFF; at the first differing code unit this lifts surrogates above that
 * range. Answers a negative number, 0 or a positive number.
 */
export function compareNames(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) return liftSurrogate(x) - liftSurrogate(y);
    return x - y;
  }
  return a.length - b.length;
}

function liftSurrogate(unit: number): number {
  return unit >= 0xe000 ? unit - 0x800 : unit + 0x2000;
}

/** Bytes of `s` in UTF-8 (for a well-formed string). */
export function utf8Length(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

/** True for one of the four scope kinds. */
export function isScopeKind(kind: unknown): kind is ScopeKind {
  return KINDS.has(kind);
}

/** Why `text` is not a well-formed name or id of at most `maxBytes` UTF-8 bytes, or null when it is. */
function textProblem(text: unknown, maxBytes: number): string | null {
  if (typeof text !== 'string') return 'is not a string';
  if (text.length === 0) return 'is empty';
  if (LONE_SURROGATE.test(text)) return 'is not well-formed UTF-16 (a lone surrogate)';
  if (CONTROL.test(text)) return 'contains a control character';
  if (text.length > maxBytes || utf8Length(text) > maxBytes) return `is longer than ${maxBytes} bytes of UTF-8`;
  return null;
}

/** True when `name` is a valid scope name: 1..512 UTF-8 bytes, well-formed, no control characters. */
export function isScopeName(name: unknown): name is string {
  return textProblem(name, MAX_SCOPE_NAME_BYTES) === null;
}

/** True when `id` is a valid commit id: 1..128 UTF-8 bytes, well-formed, no control characters. */
export function isCommitId(id: unknown): id is string {
  return textProblem(id, MAX_COMMIT_ID_BYTES) === null;
}

/** Throws INVALID unless `kind` is a scope kind. */
export function checkScopeKind(kind: unknown, where = 'scope kind'): asserts kind is ScopeKind {
  if (!isScopeKind(kind)) throw HostStoreError.invalid(`${where} ${describe(kind)} is not one of ${SCOPE_KINDS.join(', ')}`, { where });
}

/** Throws INVALID unless `name` is a valid scope name. */
export function checkScopeName(name: unknown, where = 'scope name'): asserts name is string {
  const problem = textProblem(name, MAX_SCOPE_NAME_BYTES);
  if (problem !== null) throw HostStoreError.invalid(`${where} ${problem}`, { where });
}

/** Throws INVALID unless `id` is a valid commit id. */
export function checkCommitId(id: unknown): asserts id is string {
  const problem = textProblem(id, MAX_COMMIT_ID_BYTES);
  if (problem !== null) throw HostStoreError.invalid(`commit id ${problem}`, { where: 'commitId' });
}

/** Throws INVALID unless `scope` is a `ScopeRef` with a valid kind and name. */
export function checkScopeRef(scope: unknown, where = 'scope'): asserts scope is ScopeRef {
  if (typeof scope !== 'object' || scope === null) throw HostStoreError.invalid(`${where} is not a ScopeRef`, { where });
  const { kind, name } = scope as { kind?: unknown; name?: unknown };
  checkScopeKind(kind, `${where} kind`);
  checkScopeName(name, `${where} name`);
}

/**
 * A string that identifies a scope within a realm (kind and name). Unambiguous because neither a
 * kind nor a valid name contains a control character.
 */
export function scopeKey(scope: ScopeRef): string {
  return `${scope.kind}\u0000${scope.name}`;
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  return String(value);
}
