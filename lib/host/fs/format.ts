// The file-system host store's bytes: pure encoders and decoders, no I/O.
//
// Owns: the realm's FORMAT value and the boot id's bytes here, and, as the one import of every
// on-disk encoding of the fs host store (docs/format-host.md is its prose twin, byte by byte),
// the modules it re-exports: format-bytes.ts (field helpers), format-names.ts (names of scopes,
// directories and files), format-stripe.ts (stripe file header, record frame, FENCE and SEAL,
// published note), format-batch.ts (the BATCH payload), format-cells.ts (checkpoint and fence
// state values), format-home.ts (home value, row files). Guarantees: every decoder checks magic,
// version, checksum (where the format has one) and every length against a bound before it drives
// an allocation or a loop, and answers null (or throws CORRUPT where the caller cannot go on)
// instead of trusting bad bytes.

import { createHash } from 'node:crypto';
import { corrupt } from '../../errors.js';
import { FORMAT_VERSION, MAGIC, putOpening, putU16, u16, u32 } from './format-bytes.js';

export { FORMAT_VERSION, putU16, putU32, putU64, sameBytes, u16, u32, u64 } from './format-bytes.js';
export * from './format-names.js';
export * from './format-stripe.js';
export * from './format-batch.js';
export * from './format-cells.js';
export * from './format-home.js';
export * from './format-table.js';

/**
 * A realm whose FORMAT names another format version than this build's: version 1 (one home
 * directory per scope, no scope table) or a newer one. Not damage: the store refuses it with the
 * version named (docs/format-host.md, "Versions").
 */
export class OtherFormatVersion extends Error {
  readonly file: string;
  readonly version: number;
  constructor(file: string, version: number) {
    super(`${file}: the realm has format version ${version}; this seglog reads version ${FORMAT_VERSION} only`);
    this.file = file;
    this.version = version;
  }
}

// ---------------------------------------------------------------------------------------------
// FORMAT: the realm's identity (a cell). 0 magic 'SGHF' | 4 version u16 | 6 stripes u16 | 8 realm id (16)

export const MAX_STRIPES = 64;

export interface RealmFormat {
  stripes: number;
  realmId: Uint8Array; // 16 bytes
}

export function encodeFormat(f: RealmFormat): Uint8Array {
  const b = new Uint8Array(24);
  putOpening(b, MAGIC.format);
  putU16(b, 6, f.stripes);
  b.set(f.realmId, 8);
  return b;
}

export function decodeFormat(b: Uint8Array, file: string): RealmFormat {
  if (b.length !== 24 || u32(b, 0) !== MAGIC.format) throw corrupt(`${file} is not a host store realm format`, { file });
  const version = u16(b, 4);
  if (version !== FORMAT_VERSION) throw new OtherFormatVersion(file, version);
  const stripes = u16(b, 6);
  if (stripes < 1 || stripes > MAX_STRIPES) throw corrupt(`${file}: stripe count ${stripes} out of range`, { file });
  return { stripes, realmId: b.slice(8, 24) };
}

// ---------------------------------------------------------------------------------------------
// Boot ids: the 16 bytes a lease and a published note carry (UUID text → bytes; anything else hashed).

export function bootBytes(bootId: string): Uint8Array {
  const hex = bootId.trim().toLowerCase().replace(/-/g, '');
  if (/^[0-9a-f]{32}$/.test(hex)) return Uint8Array.from(Buffer.from(hex, 'hex'));
  return Uint8Array.from(createHash('sha256').update(bootId, 'utf8').digest().subarray(0, 16));
}
