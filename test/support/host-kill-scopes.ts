// What the fs host store's kill test (test/host-kill.test.ts) and its writer
// (./host-kill-child.ts) share: the scopes the writers commit to and the rows they append.

import type { ScopeKind, ScopeRef } from '../../lib/host/types.js';

const KINDS: readonly ScopeKind[] = ['session', 'mob', 'record', 'identity'];

export const SCOPES: readonly ScopeRef[] = Array.from({ length: 12 }, (_, i) => ({ kind: KINDS[i % 4]!, name: `s${i}` }));

/** The row a batch appends to a scope: `<batch>|<scope>|<k>|<n>` (part k of the batch's n rows there). */
export function rowText(batch: string, scope: string, k: number, n: number): string {
  return `${batch}|${scope}|${k}|${n}`;
}
