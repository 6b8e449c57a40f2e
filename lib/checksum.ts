// CRC-32 (the IEEE polynomial, zlib's `crc32`) of the stores' larger checksummed runs: payload
// chunks, scope-table blocks and indexes, segment frames.
//
// Owns: `crc32(data, value?)`, and the choice of implementation behind it. Inputs of
// NATIVE_FROM_BYTES or more go to `@node-rs/crc32` (a carry-less-multiply implementation, about
// 12 GB/s on one core here against zlib's 4.4 GB/s at 64 KiB and 1 MiB: docs/dependencies.md);
// shorter ones, where the two cost the same, to `zlib.crc32`. Guarantees: the answer is exactly
// `zlib.crc32(data, value)` for every input, so nothing on disk depends on which one ran — the
// native one is checked against zlib on fixed inputs (several lengths and seeds) when this module
// loads, and is not used at all if it does not load or disagrees; an empty input always goes to
// zlib (which answers 0 for it whatever the seed, where the native one answers the seed).

import { createRequire } from 'node:module';
import { crc32 as zlibCrc32 } from 'node:zlib';

/** Inputs at least this long use the native implementation (when it loaded and agreed with zlib). */
export const NATIVE_FROM_BYTES = 1024;

type NativeCrc32 = (input: Uint8Array, initialState?: number) => number;

/** The native CRC-32 when it loads and answers as zlib does on every check; null otherwise. */
function loadNative(): NativeCrc32 | null {
  let native: NativeCrc32;
  try {
    const mod = createRequire(import.meta.url)('@node-rs/crc32') as { crc32?: unknown };
    if (typeof mod.crc32 !== 'function') return null;
    native = mod.crc32 as NativeCrc32;
  } catch {
    return null; // no prebuilt binary for this platform: zlib serves every input
  }
  const bytes = new Uint8Array(NATIVE_FROM_BYTES * 3 + 17);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 131 + 7) & 0xff;
  for (const length of [NATIVE_FROM_BYTES, NATIVE_FROM_BYTES + 1, bytes.length]) {
    for (const seed of [0, 1, 0x7fffffff, 0xffffffff]) {
      const input = bytes.subarray(bytes.length - length);
      try {
        if (native(input, seed) !== zlibCrc32(input, seed)) return null;
      } catch {
        return null;
      }
    }
  }
  return native;
}

const native = loadNative();

/** True when the native implementation serves the long inputs (for the benchmarks' and tests' reports). */
export const nativeCrc32 = native !== null;

/** CRC-32 of `data`, continuing from `value` (default 0): exactly `zlib.crc32(data, value)`. */
export function crc32(data: Uint8Array, value = 0): number {
  return native !== null && data.length >= NATIVE_FROM_BYTES ? native(data, value) : zlibCrc32(data, value);
}
