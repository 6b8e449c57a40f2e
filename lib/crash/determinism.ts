// Seeded randomness for a recorded run, so that (workload, seed) names one trace exactly.
//
// Owns: `withSeededRandomness(seed, fn)` and `seededRandom(seed)`. A crash reproducer is "workload,
// seed, state id"; the state id names trace entries by position, so a replay must record the same
// trace, byte for byte. Stores draw random bytes for segment ids, salts and temporary names; this
// module replaces node:crypto's random sources (and Math.random) with a seeded generator while
// `fn` runs, and restores them after, including the live bindings that ESM `import { randomBytes }
// from 'node:crypto'` holds (module.syncBuiltinESMExports).
// Guarantees: the same seed gives the same sequence of random bytes in the same call order;
// nesting is refused (the replaced functions are process-wide); the originals are back when the
// returned promise settles, whatever `fn` did. Nothing else may run real randomness-dependent work
// concurrently in the process meanwhile (the runner runs one workload at a time).

import { createRequire, syncBuiltinESMExports } from 'node:module';

const require = createRequire(import.meta.url);
const crypto = require('node:crypto') as Record<string, unknown> & { webcrypto: unknown };

/** mulberry32: small, fast, deterministic across platforms. Answers numbers in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A seeded integer in [lo, hi]. */
export function randomInt(rng: () => number, lo: number, hi: number): number {
  return lo + Math.floor(rng() * (hi - lo + 1));
}

let active = false;

const REPLACED = ['randomFillSync', 'randomBytes', 'randomUUID', 'randomInt', 'randomFill'] as const;

/** Runs `fn` with node:crypto's random sources and Math.random drawn from `seed`. */
export async function withSeededRandomness<T>(seed: number, fn: () => Promise<T>): Promise<T> {
  if (active) throw new Error('withSeededRandomness does not nest');
  const rng = seededRandom(seed ^ 0x5eed5eed);
  const fill = <B extends ArrayBufferView>(view: B): B => {
    const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(rng() * 256);
    return view;
  };
  const saved = new Map<string, unknown>();
  for (const name of REPLACED) saved.set(name, crypto[name]);
  const web = crypto.webcrypto as object;
  const savedWeb = Object.getOwnPropertyDescriptor(web, 'getRandomValues');
  const savedMath = Math.random;
  active = true;
  crypto['randomFillSync'] = <B extends ArrayBufferView>(view: B, offset = 0, size?: number): B => {
    const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
    fill(bytes.subarray(offset, size === undefined ? undefined : offset + size));
    return view;
  };
  crypto['randomBytes'] = (n: number, cb?: (err: Error | null, b: Buffer) => void): Buffer | undefined => {
    const b = fill(Buffer.alloc(n));
    if (cb === undefined) return b;
    queueMicrotask(() => cb(null, b));
    return undefined;
  };
  crypto['randomFill'] = (view: ArrayBufferView, ...rest: unknown[]): void => {
    const cb = rest[rest.length - 1] as (err: Error | null, v: ArrayBufferView) => void;
    fill(view);
    queueMicrotask(() => cb(null, view));
  };
  crypto['randomUUID'] = (): string => {
    const b = fill(new Uint8Array(16));
    b[6] = (b[6]! & 0x0f) | 0x40;
    b[8] = (b[8]! & 0x3f) | 0x80;
    const h = Buffer.from(b).toString('hex');
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  };
  crypto['randomInt'] = (a: number, b?: number): number => {
    const [lo, hi] = b === undefined ? [0, a] : [a, b];
    return lo + Math.floor(rng() * (hi - lo));
  };
  Object.defineProperty(web, 'getRandomValues', { value: fill, configurable: true, writable: true });
  Math.random = rng;
  syncBuiltinESMExports();
  try {
    return await fn();
  } finally {
    for (const [name, value] of saved) crypto[name] = value;
    if (savedWeb === undefined) delete (web as { getRandomValues?: unknown }).getRandomValues;
    else Object.defineProperty(web, 'getRandomValues', savedWeb);
    Math.random = savedMath;
    syncBuiltinESMExports();
    active = false;
  }
}
