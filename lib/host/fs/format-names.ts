// The names of the fs host store: the realm's fixed entries, scope kinds as codes and letters,
// scope digests, and the names of scope directories, stripe files and home files. No I/O.
//
// Owns: the name of every fixed entry of a realm (FORMAT, checkpoint, fence/, stripes/, scopes/
// and what they hold), used by the store and by the offline check alike; the mapping of a scope
// to its directory (`scopes/<2 hex>/<kind letter><64 hex>`, from a SHA-256 of kind and name: a
// scope's name never becomes a path), the stripe file name (`<16 digits>.wal`) and the home file
// names (`r-<gen>`, `h-<gen>`). Guarantees: every parser answers null for a name it did not make,
// so a stray file is never taken for one of these.

import { createHash } from 'node:crypto';
import type { ScopeKind } from '../types.js';

// ---------------------------------------------------------------------------------------------
// The realm's directory tree (docs/format-host.md, "The directory tree"): the store and the
// offline check name every entry from here.

/** The realm's identity cell, written last at creation. */
export const FORMAT_FILE = 'FORMAT';
export const CHECKPOINT_FILE = 'checkpoint';
/** Held by the one checkpointer of the realm. */
export const CHECKPOINT_LOCK_FILE = 'checkpoint.lock';
export const FENCE_DIR = 'fence';
/** In `fence/`: the lock an acquire, a renew and the realm's creation hold. */
export const FENCE_LOCK_FILE = 'lock';
/** In `fence/`: the fence state cell. */
export const FENCE_STATE_FILE = 'state';
export const STRIPES_DIR = 'stripes';
export const SCOPES_DIR = 'scopes';
/** The scope tables (`<seq>.tbl`): the one the checkpoint cell names, and leftovers of rounds cut short. */
export const TABLES_DIR = 'tables';
/** In `stripes/<k>/`: the stripe's file lock. */
export const STRIPE_LOCK_FILE = 'lock';
/** In `stripes/<k>/`: the gate an acquire closes while it waits for the stripe's lock. */
export const STRIPE_GATE_FILE = 'gate';
/** In `stripes/<k>/`: the published note. */
export const PUBLISHED_FILE = 'published';
/** In a scope's home directory: its home cell. */
export const HOME_STATE_FILE = 'state';


export const KIND_CODE: Readonly<Record<ScopeKind, number>> = Object.freeze({ session: 1, identity: 2, mob: 3, record: 4 });
/** The kind of each code (index), undefined for a code no kind has. */
export const KIND_BY_CODE: readonly (ScopeKind | undefined)[] = [undefined, 'session', 'identity', 'mob', 'record'];
const KIND_LETTER: Readonly<Record<ScopeKind, string>> = Object.freeze({ session: 's', identity: 'i', mob: 'm', record: 'r' });
const KIND_BY_LETTER: Readonly<Record<string, ScopeKind>> = Object.freeze({ s: 'session', i: 'identity', m: 'mob', r: 'record' });

export function kindOfCode(code: number): ScopeKind | undefined {
  return KIND_BY_CODE[code];
}

/** SHA-256 over kind code, 0, name bytes: a scope's name never becomes a path. Lowercase hex. */
export function scopeDigest(kind: ScopeKind, name: string): string {
  const h = createHash('sha256');
  h.update(Uint8Array.of(KIND_CODE[kind], 0));
  h.update(name, 'utf8');
  return h.digest('hex');
}

/** `scopes/<2 hex>/<kind letter><64 hex>`, relative to the realm. */
export function scopeDirName(kind: ScopeKind, digest: string): { fanout: string; leaf: string } {
  return { fanout: digest.slice(0, 2), leaf: `${KIND_LETTER[kind]}${digest}` };
}

/** Parses a scope directory's leaf name; null for anything else. */
export function parseScopeLeaf(leaf: string): { kind: ScopeKind; digest: string } | null {
  const m = /^([simr])([0-9a-f]{64})$/.exec(leaf);
  if (m === null) return null;
  return { kind: KIND_BY_LETTER[m[1]!]!, digest: m[2]! };
}

/** `<seq, 16 digits><suffix>`: the names of stripe files (`.wal`) and scope tables (`.tbl`). */
export function seqFileName(seq: number, suffix: '.wal' | '.tbl'): string {
  return `${String(seq).padStart(16, '0')}${suffix}`;
}
/** The seq of a `seqFileName(seq, suffix)` name; null for any other name. */
export function parseSeqFileName(name: string, suffix: '.wal' | '.tbl'): number | null {
  if (name.length !== 16 + suffix.length || !name.endsWith(suffix) || !/^\d{16}$/.test(name.slice(0, 16))) return null;
  const n = Number(name.slice(0, 16));
  return Number.isSafeInteger(n) ? n : null;
}

export function stripeFileName(seq: number): string {
  return seqFileName(seq, '.wal');
}
export function parseStripeFileName(name: string): number | null {
  return parseSeqFileName(name, '.wal');
}

export function rowFileName(gen: string): string {
  return `r-${gen}`;
}
export function headFileName(gen: string): string {
  return `h-${gen}`;
}
