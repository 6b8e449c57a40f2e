// Assertions: invariants stated where they must hold (after TigerBeetle's habit).
//
// Owns: `assert`, which throws an AssertionError naming the broken invariant. A failed
// assertion is a bug in seglog, never a user error: user errors are SeglogErrors.

import { AssertionError } from 'node:assert';

export function assert(condition: unknown, invariant: string): asserts condition {
  if (!condition) throw new AssertionError({ message: `invariant broken: ${invariant}` });
}

/** True for a safe non-negative integer: the shape of every index, version, term and token. */
export function isIndex(n: unknown): n is number {
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
}
