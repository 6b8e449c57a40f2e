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
import { openCell, peekCell } from '../../../cells/index.js';
import { invalid } from '../../errors.js';
import { isExists } from '../../fs/errno.js';
import type { FileHandle, FileSystem } from '../../fs/types.js';
import { HostStoreError } from '../errors.js';
import {
  decodeFormat,
  encodeCheckpoint,
  encodeFormat,
  encodePublished,
  MAX_STRIPES,
  STRIPE_HEADER_BYTES,
  type Position,
  type RealmFormat,
} from './format.js';
import { lockWithin } from './realm-locks.js';
import { createStripeFile, stripeDir } from './stripe-files.js';

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
  const formatFile = path.join(dir, 'FORMAT');
  const existing = await peekCell(fs, formatFile);
  if (existing !== null) return checkStripes(decodeFormat(existing, formatFile), s);
  if ((await fs.stat(dir)) === null) {
    await fs.mkdir(dir);
    await fs.syncDir(path.dirname(path.resolve(dir)));
  }
  await fs.mkdir(path.join(dir, 'fence'));
  const lockFile = path.join(dir, 'fence', 'lock');
  let lock: FileHandle;
  try {
    lock = await fs.open(lockFile, 'create-exclusive');
    await fs.syncDir(dir);
    await fs.syncDir(path.join(dir, 'fence'));
  } catch (err) {
    if (!isExists(err)) throw err;
    lock = await fs.open(lockFile, 'write');
  }
  try {
    await lockWithin(lock, s.lockWaitMs, `the realm ${dir}`);
    const again = await peekCell(fs, formatFile);
    if (again !== null) return checkStripes(decodeFormat(again, formatFile), s);
    const stripes = s.stripes ?? 4;
    const format: RealmFormat = { stripes, realmId: Uint8Array.from(randomBytes(16)) };
    const start: Position = { seq: 0, offset: STRIPE_HEADER_BYTES, lsn: 1, fence: 0 };
    await fs.mkdir(path.join(dir, 'stripes'));
    await fs.mkdir(path.join(dir, 'scopes'));
    for (let k = 0; k < stripes; k++) {
      const sd = stripeDir(dir, k);
      await fs.mkdir(sd);
      const made = await createStripeFile(fs, sd, { stripe: k, seq: 0, firstLsn: 1, fence: 0, realmTag: format.realmId }, s.preallocBytes);
      await made.handle.close();
      for (const name of ['lock', 'gate', 'published']) {
        const h = await fs.open(path.join(sd, name), 'create');
        try {
          if (name === 'published') {
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
    await fs.syncDir(path.join(dir, 'stripes'));
    await fs.syncDir(dir);
    const checkpoint = await openCell(path.join(dir, 'checkpoint'), { fs });
    try {
      await checkpoint.write(encodeCheckpoint({ round: 0, positions: Array.from({ length: stripes }, () => ({ ...start })) }));
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
