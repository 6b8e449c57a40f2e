// Small helpers the Raft node tests share: an append awaited through its flush callback, and an
// assertion on a SeglogError's code.

import assert from 'node:assert/strict';

import { isSeglogError } from '../../lib/errors.js';
import type { KvPlugin } from '../../lib/raft/kv.js';
import type { RaftGroup } from '../../lib/raft/node.js';
import type { Entry } from '../../lib/raft/types.js';

/** Appends and waits for the flush callback (rejects with its error, or the append's). */
export function appendFlushed(g: RaftGroup<KvPlugin>, entries: Entry[]): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    g.log.append(entries, (err) => (err === null ? resolve() : reject(err))).catch(reject);
  });
}

/** For assert.rejects: the error is a SeglogError with code `c`. */
export function code(c: string): (err: unknown) => boolean {
  return (err) => {
    assert.ok(isSeglogError(err), `expected SeglogError ${c}, got ${String(err)}`);
    assert.equal(err.code, c, String(err));
    return true;
  };
}
