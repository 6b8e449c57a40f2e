// The BATCH payload of a stripe record: one commit's updates to one or more scopes. Pure
// encoder and decoder, no I/O.
//
// Owns: the layout of a BATCH (token, commit id, per update: scope, flags, version, truncation
// and drop bounds, head, rows; docs/format-host.md), its size, and where each head and row lies
// in it. Guarantees: the decoder bounds every length by the bytes it has before it reads or loops,
// rejects an unknown kind, text that is not UTF-8 and trailing bytes, and throws CORRUPT rather
// than answer a partial batch.

import { corrupt } from '../../errors.js';
import type { ScopeKind } from '../types.js';
import { putU16, putU32, putU64, text, u16, u32, u64 } from './format-bytes.js';
import { KIND_CODE, kindOfCode } from './format-names.js';
import { REC_BATCH } from './format-stripe.js';

// ---------------------------------------------------------------------------------------------
// BATCH payload.
//  0 type u8 (1) | 1 token u64 | 9 commit id length u8 | 10 commit id | update count u32 | updates
// update: kind u8 | name length u16 | name | flags u8 | next u64 | [truncateAfter u64] [dropBefore u64]
//         [head length u32, head bytes] | row count u32 | rows: length u32, bytes
// flags: 1 creating (previous is null; else previous = next − 1) | 2 head | 4 truncateAfter |
//        8 dropBefore | 16 delete

export const F_CREATE = 1;
export const F_HEAD = 2;
export const F_TRUNCATE = 4;
export const F_DROP = 8;
export const F_DELETE = 16;

/** What an encoder needs of an update (a ScopeUpdate, already validated). */
export interface UpdateIn {
  readonly scope: { readonly kind: ScopeKind; readonly name: string };
  previous: number | null;
  next: number;
  head?: Uint8Array;
  append?: readonly Uint8Array[];
  truncateAfter?: number;
  dropBefore?: number;
  delete?: boolean;
}

/** Bytes of the BATCH payload for these updates (names pre-encoded; the commit id's UTF-8 length). */
export function batchPayloadBytes(commitIdBytes: number, updates: readonly UpdateIn[], names: readonly Uint8Array[]): number {
  let n = 1 + 8 + 1 + commitIdBytes + 4;
  for (let i = 0; i < updates.length; i++) {
    const u = updates[i]!;
    n += 1 + 2 + names[i]!.length + 1 + 8 + 4;
    if (u.truncateAfter !== undefined) n += 8;
    if (u.dropBefore !== undefined) n += 8;
    if (u.head !== undefined) n += 4 + u.head.length;
    for (const r of u.append ?? []) n += 4 + r.length;
  }
  return n;
}

/**
 * Writes the BATCH payload into `b` at `at`; answers the end offset. With `layout`, records where
 * each update's head and rows went: offsets relative to `at` (the payload's start).
 */
export function writeBatchPayload(
  b: Uint8Array,
  at: number,
  token: number,
  commitId: string,
  commitIdBytes: number,
  updates: readonly UpdateIn[],
  names: readonly Uint8Array[],
  layout?: { heads: ([number, number] | undefined)[]; rows: number[][] },
): number {
  b[at] = REC_BATCH;
  putU64(b, at + 1, token);
  b[at + 9] = commitIdBytes;
  putUtf8(b, at + 10, commitId, commitIdBytes);
  let p = at + 10 + commitIdBytes;
  putU32(b, p, updates.length);
  p += 4;
  for (let i = 0; i < updates.length; i++) {
    const u = updates[i]!;
    const name = names[i]!;
    b[p] = KIND_CODE[u.scope.kind];
    putU16(b, p + 1, name.length);
    b.set(name, p + 3);
    p += 3 + name.length;
    let flags = 0;
    if (u.previous === null) flags |= F_CREATE;
    if (u.head !== undefined) flags |= F_HEAD;
    if (u.truncateAfter !== undefined) flags |= F_TRUNCATE;
    if (u.dropBefore !== undefined) flags |= F_DROP;
    if (u.delete === true) flags |= F_DELETE;
    b[p] = flags;
    putU64(b, p + 1, u.next);
    p += 9;
    if (u.truncateAfter !== undefined) {
      putU64(b, p, u.truncateAfter);
      p += 8;
    }
    if (u.dropBefore !== undefined) {
      putU64(b, p, u.dropBefore);
      p += 8;
    }
    if (u.head !== undefined) {
      putU32(b, p, u.head.length);
      b.set(u.head, p + 4);
      layout?.heads.push([p + 4 - at, u.head.length]);
      p += 4 + u.head.length;
    } else layout?.heads.push(undefined);
    const rows = u.append ?? [];
    putU32(b, p, rows.length);
    p += 4;
    const offsets: number[] | undefined = layout === undefined ? undefined : [];
    for (const r of rows) {
      putU32(b, p, r.length);
      b.set(r, p + 4);
      offsets?.push(p + 4 - at, r.length);
      p += 4 + r.length;
    }
    if (offsets !== undefined) layout!.rows.push(offsets);
  }
  return p;
}

const encoder = new TextEncoder();

/**
 * Writes `s` (well formed) as UTF-8 at `at`: `bytes` is its UTF-8 length. An ASCII string (as long
 * in bytes as in code units) is copied here, without the encoder's call and its answer.
 */
function putUtf8(b: Uint8Array, at: number, s: string, bytes: number): void {
  if (bytes === s.length) {
    for (let i = 0; i < bytes; i++) b[at + i] = s.charCodeAt(i);
    return;
  }
  encoder.encodeInto(s, b.subarray(at, at + bytes));
}

/** One update of a decoded BATCH, with where its bytes lie (offsets relative to the payload). */
export interface UpdateOut {
  kind: ScopeKind;
  name: string;
  previous: number | null;
  next: number;
  del: boolean;
  truncateAfter?: number;
  dropBefore?: number;
  /** [offset, length] of the head bytes, relative to the payload start. */
  head?: [number, number];
  /** Offsets and lengths of the rows, relative to the payload start, interleaved. */
  rows: number[];
}

export interface BatchOut {
  token: number;
  commitId: string;
  updates: UpdateOut[];
}

/** Decodes a BATCH payload (which passed its frame checksum). Throws CORRUPT when it does not parse. */
export function decodeBatchPayload(b: Uint8Array, where: string, at?: { file: string; offset: number }): BatchOut {
  const bad = (why: string): Error => corrupt(`${where}: batch record ${why}`, { where, ...at });
  const end = b.length;
  const need = (p: number, n: number): void => {
    if (p + n > end) throw bad('is truncated');
  };
  need(0, 10);
  if (b[0] !== REC_BATCH) throw bad('has the wrong type');
  const token = u64(b, 1);
  if (!Number.isSafeInteger(token)) throw bad('has an unsafe token');
  const idLen = b[9]!;
  need(10, idLen + 4);
  let commitId: string;
  try {
    commitId = text(b.subarray(10, 10 + idLen));
  } catch {
    throw bad('has a commit id that is not UTF-8');
  }
  let p = 10 + idLen;
  const count = u32(b, p);
  p += 4;
  if (count < 1 || count > end) throw bad('has an impossible update count');
  const updates: UpdateOut[] = [];
  for (let i = 0; i < count; i++) {
    need(p, 3);
    const kind = kindOfCode(b[p]!);
    if (kind === undefined) throw bad('names an unknown kind');
    const nameLen = u16(b, p + 1);
    need(p + 3, nameLen + 9);
    let name: string;
    try {
      name = text(b.subarray(p + 3, p + 3 + nameLen));
    } catch {
      throw bad('has a name that is not UTF-8');
    }
    p += 3 + nameLen;
    const flags = b[p]!;
    const next = u64(b, p + 1);
    if (!Number.isSafeInteger(next) || next < 1) throw bad('has an impossible version');
    p += 9;
    const u: UpdateOut = { kind, name, previous: (flags & F_CREATE) !== 0 ? null : next - 1, next, del: (flags & F_DELETE) !== 0, rows: [] };
    if ((flags & F_TRUNCATE) !== 0) {
      need(p, 8);
      u.truncateAfter = u64(b, p);
      p += 8;
    }
    if ((flags & F_DROP) !== 0) {
      need(p, 8);
      u.dropBefore = u64(b, p);
      p += 8;
    }
    if ((flags & F_HEAD) !== 0) {
      need(p, 4);
      const len = u32(b, p);
      need(p + 4, len);
      u.head = [p + 4, len];
      p += 4 + len;
    }
    need(p, 4);
    const rows = u32(b, p);
    p += 4;
    if (rows > end - p) throw bad('has an impossible row count');
    for (let r = 0; r < rows; r++) {
      need(p, 4);
      const len = u32(b, p);
      need(p + 4, len);
      u.rows.push(p + 4, len);
      p += 4 + len;
    }
    updates.push(u);
  }
  if (p !== end) throw bad('has trailing bytes');
  return { token, commitId, updates };
}
