// A realm's defining files: creating a realm, reading its FORMAT, checking the stripe count.
//
// Owns: `ensureRealm` (the directory tree, the fence lock file made with O_EXCL, every stripe's
// first file, lock, gate and published note, the checkpoint cell, then FORMAT), `checkStripeCount`.
// Guarantees: a realm exists once its FORMAT cell exists, and FORMAT is written last, after
// everything it names is durable (the commit point of creation); creation runs holding the fence
// lock and looks for FORMAT again under it, so two processes creating one realm at once end with
// one realm. An existing realm's stripe count wins over `options.stripes` (which must agree).

import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { cellTempPath, openCell, peekCell } from '../../../cells/index.js';
import { corrupt, fromIo, invalid } from '../../errors.js';
import { isExists } from '../../fs/errno.js';
import type { FileHandle, FileSystem } from '../../fs/types.js';
import { HostStoreError } from '../errors.js';
import {
  decodeCheckpoint,
  decodeFormat,
  encodeCheckpoint,
  encodeFormat,
  encodePublished,
  CHECKPOINT_FILE,
  FENCE_DIR,
  FENCE_LOCK_FILE,
  FORMAT_FILE,
  MAX_STRIPES,
  PUBLISHED_FILE,
  SCOPES_DIR,
  TABLES_DIR,
  STRIPE_GATE_FILE,
  STRIPE_HEADER_BYTES,
  STRIPE_LOCK_FILE,
  STRIPES_DIR,
  type Position,
  type RealmFormat,
} from './format.js';
import { lockWithin } from './realm-locks.js';
import { createStripeFile, stripeDir } from './stripe-files.js';
import { stripeFileName } from './format-names.js';

/** What creating or opening a realm's defining files needs of the handle's settings (RealmSettings). */
export interface RealmFileSettings {
  readonly fs: FileSystem;
  readonly boot: Uint8Array;
  /** The stripe count asked for; undefined: 4 for a new realm, the realm's own for an existing one. */
  readonly stripes: number | undefined;
  readonly preallocBytes: number;
  readonly lockWaitMs: number;
}

/**
 * Creates the realm in `dir` unless it exists; answers its format. The fence lock file is made
 * here with O_EXCL; creation runs holding its flock, and FORMAT is written last (the commit point).
 */
export async function ensureRealm(dir: string, s: RealmFileSettings): Promise<RealmFormat> {
  const fs = s.fs;
  const formatFile = path.join(dir, FORMAT_FILE);
  const existing = await peekCell(fs, formatFile);
  if (existing !== null) return checkStripes(decodeFormat(existing, formatFile), s);
  if ((await fs.stat(dir)) === null) {
    await fs.mkdir(dir);
    await fs.syncDir(path.dirname(path.resolve(dir)));
  }
  await fs.mkdir(path.join(dir, FENCE_DIR));
  const lockFile = path.join(dir, FENCE_DIR, FENCE_LOCK_FILE);
  let lock: FileHandle;
  try {
    lock = await fs.open(lockFile, 'create-exclusive');
    await fs.syncDir(dir);
    await fs.syncDir(path.join(dir, FENCE_DIR));
  } catch (err) {
    if (!isExists(err)) throw err;
    lock = await fs.open(lockFile, 'write');
  }
  try {
    await lockWithin(lock, s.lockWaitMs, `the realm ${dir}`);
    const again = await peekCell(fs, formatFile);
    if (again !== null) return checkStripes(decodeFormat(again, formatFile), s);
    // No FORMAT, and no creation can run beside us now: what is here must be a creation's leftover.
    await checkCreationLeftover(fs, dir);
    const stripes = s.stripes ?? 4;
    const format: RealmFormat = { stripes, realmId: Uint8Array.from(randomBytes(16)) };
    const start: Position = { seq: 0, offset: STRIPE_HEADER_BYTES, lsn: 1, fence: 0 };
    await fs.mkdir(path.join(dir, STRIPES_DIR));
    await fs.mkdir(path.join(dir, SCOPES_DIR));
    await fs.mkdir(path.join(dir, TABLES_DIR));
    for (let k = 0; k < stripes; k++) {
      const sd = stripeDir(dir, k);
      await fs.mkdir(sd);
      const made = await createStripeFile(fs, sd, { stripe: k, seq: 0, firstLsn: 1, fence: 0, realmTag: format.realmId }, s.preallocBytes);
      await made.handle.close();
      for (const name of [STRIPE_LOCK_FILE, STRIPE_GATE_FILE, PUBLISHED_FILE]) {
        const h = await fs.open(path.join(sd, name), 'create');
        try {
          if (name === PUBLISHED_FILE) {
            await h.truncate(0);
            await h.write(encodePublished({ ...start, boot: s.boot }), 0);
            await h.datasync();
          }
        } finally {
          await h.close();
        }
      }
      await fs.syncDir(sd);
    }
    await fs.syncDir(path.join(dir, STRIPES_DIR));
    await fs.syncDir(dir);
    const checkpoint = await openCell(path.join(dir, CHECKPOINT_FILE), { fs });
    try {
      await checkpoint.write(encodeCheckpoint({ round: 0, positions: Array.from({ length: stripes }, () => ({ ...start })), table: null }));
    } finally {
      await checkpoint.close();
    }
    const cell = await openCell(formatFile, { fs });
    try {
      await cell.write(encodeFormat(format));
    } finally {
      await cell.close();
    }
    return format;
  } finally {
    await lock.close().catch(() => undefined);
  }
}

/** What a creation writes in a realm directory before FORMAT (and the cells' first-write temporaries). */
const CREATION_ENTRIES = new Set(['fence', 'stripes', 'scopes', 'tables', 'checkpoint', path.basename(cellTempPath('/checkpoint')), path.basename(cellTempPath('/FORMAT'))]);
const STRIPE_CREATION_ENTRIES = new Set([stripeFileName(0), 'lock', 'gate', 'published']);
/** Bytes after a first stripe file's header that must be zero in a creation's leftover (a record starts there). */
const FIRST_RECORD_PROBE = 64;

/**
 * A realm directory without FORMAT is a new realm, or a creation that stopped before its FORMAT
 * (the commit point): then it holds only what creation writes, each part as creation leaves it —
 * `fence/lock` alone, an empty `scopes/`, per stripe its first file with no record and its lock,
 * gate and note, a checkpoint of round 0 at the start. Anything else (a fence state, a home, a
 * record, a later stripe file, a checkpoint that moved, a foreign file) means a realm that lost
 * its FORMAT: CORRUPT naming FORMAT (and, as `found`, what shows the realm existed). Creating
 * again would cut the first stripe files and rewrite the checkpoint: acknowledged scopes would
 * vanish.
 */
async function checkCreationLeftover(fs: FileSystem, dir: string): Promise<void> {
  const formatFile = path.join(dir, 'FORMAT');
  const lost = (found: string, why: string): Error =>
    corrupt(`realm ${dir} has no FORMAT but ${why} (${found}): its FORMAT was lost; a realm is never created again over what is left`, { file: formatFile, found });
  const list = async (d: string): Promise<string[]> => {
    try {
      return await fs.readdir(d);
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ENOENT') return [];
      throw fromIo(err, 'list', d);
    }
  };
  for (const n of await list(dir)) if (!CREATION_ENTRIES.has(n)) throw lost(path.join(dir, n), 'it holds a file no creation writes');
  for (const n of await list(path.join(dir, 'fence'))) if (n !== 'lock') throw lost(path.join(dir, 'fence', n), 'it holds a fence state');
  for (const n of await list(path.join(dir, 'scopes'))) throw lost(path.join(dir, 'scopes', n), 'it holds a scope home');
  for (const n of await list(path.join(dir, 'tables'))) throw lost(path.join(dir, 'tables', n), 'it holds a scope table');
  for (const k of await list(path.join(dir, 'stripes'))) {
    const sd = path.join(dir, 'stripes', k);
    for (const n of await list(sd)) {
      if (!STRIPE_CREATION_ENTRIES.has(n)) throw lost(path.join(sd, n), 'it holds a stripe file beyond the first');
    }
    const first = path.join(sd, stripeFileName(0));
    if ((await fs.stat(first)) === null) continue;
    const probe = new Uint8Array(FIRST_RECORD_PROBE);
    let n: number;
    try {
      const h = await fs.open(first, 'read');
      try {
        n = await h.read(probe, STRIPE_HEADER_BYTES);
      } finally {
        await h.close();
      }
    } catch (err) {
      throw fromIo(err, 'read', first);
    }
    if (probe.subarray(0, n).some((b) => b !== 0)) throw lost(first, 'a stripe holds a record');
  }
  const checkpointFile = path.join(dir, 'checkpoint');
  const value = await peekCell(fs, checkpointFile);
  if (value !== null) {
    const c = decodeCheckpoint(value, value.length >= 8 ? value[6]! | (value[7]! << 8) : 0, checkpointFile);
    const moved = c.round !== 0 || c.table !== null || c.positions.some((p) => p.seq !== 0 || p.offset !== STRIPE_HEADER_BYTES || p.lsn !== 1 || p.fence !== 0);
    if (moved) throw lost(checkpointFile, `its checkpoint is at round ${c.round}`);
  }
}

function checkStripes(format: RealmFormat, s: RealmFileSettings): RealmFormat {
  if (s.stripes !== undefined && s.stripes !== format.stripes) {
    throw HostStoreError.invalid(`the realm has ${format.stripes} stripes; options.stripes ${s.stripes} applies only when a realm is created`);
  }
  return format;
}

export function checkStripeCount(n: unknown): number | undefined {
  if (n === undefined) return undefined;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_STRIPES) throw invalid(`stripes must be an integer in [1, ${MAX_STRIPES}]`);
  return n;
}
