// The fs host store's fence: tokens, leases, and the pass that fences commits.
//
// Owns: `acquire` and `renew`. The fence state is a two-slot cell `fence/state` (highest token,
// the holder's token, id, boot id and lease end on the store's monotonic clock); `fence/lock`
// (made once with O_EXCL when the realm is created) is flock'd around every acquire and renew —
// the kernel drops a flock when its process dies, so no stale lock needs breaking. Guarantees:
// - Tokens only grow, durably: an acquire writes highest + 1 into the cell (fdatasync) before it
//   writes any FENCE record or answers; a crash after the cell write burns that token.
// - A holder is live while the boot id recorded with its lease is this machine's and the clock
//   has not reached its lease end: a wall-clock jump moves neither, a reboot ends every lease.
// - An acquire holds every stripe's file lock while it writes the new token and a FENCE record
//   into each stripe (one writev + fdatasync each, then the published note), so when it answers,
//   every commit that checked an older token has finished or died, and every later commit of an
//   older token meets the FENCE record (FENCED_OUT). If it cannot take the stripe locks within
//   `lockWaitMs` it answers UNAVAILABLE having changed nothing.

import * as path from 'node:path';
import { openCell, type Cell } from '../../../cells/index.js';
import { corrupt } from '../../errors.js';
import { isMissing } from '../../fs/errno.js';
import type { FileHandle } from '../../fs/types.js';
import { HostStoreError } from '../errors.js';
import type { AcquireMode, FenceGrant } from '../types.js';
import {
  decodeFenceState,
  encodeFencePayload,
  encodeFenceState,
  FENCE_DIR,
  FENCE_LOCK_FILE,
  FENCE_STATE_FILE,
  FRAME_HEADER_BYTES,
  sameBytes,
  type FenceState,
} from './format.js';
import type { RealmHandle } from './realm.js';
import { lockWithin } from './realm-locks.js';
import { GroupFailed } from './stripe.js';

/** Runs `fn` holding the realm's fence lock and its state cell. */
async function withFence<T>(r: RealmHandle, fn: (state: FenceState | null, cell: Cell) => Promise<T>): Promise<T> {
  const fs = r.fs;
  let lock: FileHandle | null = null;
  let cell: Cell | null = null;
  try {
    const lockFile = path.join(r.dir, FENCE_DIR, FENCE_LOCK_FILE);
    lock = await fs.open(lockFile, 'write').catch((err: unknown) => {
      // Made with the realm, never removed: a realm without it lost it.
      if (isMissing(err)) throw corrupt(`${lockFile} is missing (it is made with the realm)`, { file: lockFile });
      throw err;
    });
    await lockWithin(lock, r.s.lockWaitMs, 'the fence');
    const stateFile = path.join(r.dir, FENCE_DIR, FENCE_STATE_FILE);
    cell = await openCell(stateFile, { fs });
    const raw = await cell.read();
    if (raw === null) checkNeverAcquired(r, stateFile);
    return await fn(raw === null ? null : decodeFenceState(raw, stateFile), cell);
  } finally {
    if (cell !== null) await cell.close().catch(() => undefined);
    if (lock !== null) await lock.close().catch(() => undefined);
  }
}

/**
 * A realm without a fence state has never been acquired: no token was issued, so no stripe holds
 * a FENCE record and no checkpoint position a token. A realm whose stripes or checkpoint show one
 * lost its fence state: CORRUPT (answering from nothing would issue a token a writer holds).
 */
function checkNeverAcquired(r: RealmHandle, stateFile: string): void {
  const seen = Math.max(0, ...r.stripes.map((st) => st.cursor.fence), ...r.checkpoint.positions.map((p) => p.fence));
  if (seen > 0) throw corrupt(`${stateFile} is missing, though the realm's stripes show token ${seen} was issued`, { file: stateFile, token: seen });
}

/**
 * At open: the fence's files as the realm's creation and its acquires left them — `fence/lock`
 * present, `fence/state` present once any token was issued. CORRUPT naming the one lost.
 */
export async function checkFenceFiles(r: RealmHandle): Promise<void> {
  const lockFile = path.join(r.dir, FENCE_DIR, FENCE_LOCK_FILE);
  const stateFile = path.join(r.dir, FENCE_DIR, FENCE_STATE_FILE);
  if ((await r.fs.stat(lockFile)) === null) throw corrupt(`${lockFile} is missing (it is made with the realm)`, { file: lockFile });
  if ((await r.fs.stat(stateFile)) === null) checkNeverAcquired(r, stateFile);
}

/** What is left of the recorded lease, in ms; 0 when its holder is not live. */
function remainingLease(r: RealmHandle, state: FenceState | null, now: number): number {
  if (state === null || state.holderToken !== state.highest || state.highest === 0) return 0;
  if (!sameBytes(state.boot, r.s.boot)) return 0;
  return Math.max(0, state.leaseEnd - now);
}

export async function acquire(r: RealmHandle, mode: AcquireMode): Promise<FenceGrant> {
  return withFence(r, async (state, cell) => {
    const live = remainingLease(r, state, r.s.clock.now());
    if (mode === 'exclusive' && live > 0) throw HostStoreError.held(state!.holder, live, state!.holderToken);
    const all = r.stripes.map((_, k) => k);
    const releases: (() => void)[] = [];
    try {
      for (const k of all) releases.push(await r.stripes[k]!.mutex.lock());
      for (const st of r.stripes) if (st.poisoned !== null) throw st.poisoned;
      await r.locks.lockAllForAcquire();
      // Every stripe read to its valid end under its lock: a dead writer's record lands before
      // the FENCE record that follows it.
      await r.refresh(all);
      for (const st of r.stripes) if (st.poisoned !== null) throw st.poisoned;
      const token = (state?.highest ?? 0) + 1;
      const start = r.s.clock.now();
      const superseded = mode === 'takeover' ? remainingLease(r, state, start) : 0;
      await cell.write(encodeFenceState({ highest: token, holderToken: token, leaseEnd: start + r.s.timing.lease, boot: r.s.boot, holder: r.s.holderId }));
      const payload = encodeFencePayload(token);
      await Promise.all(
        r.stripes.map(async (st) => {
          const frame = new Uint8Array(FRAME_HEADER_BYTES + payload.length);
          frame.set(payload, FRAME_HEADER_BYTES);
          try {
            await st.write([frame], token);
          } catch (err) {
            if (err instanceof GroupFailed) {
              throw HostStoreError.unavailable(
                `token ${token} was recorded but its FENCE record could not be written to stripe ${st.index}; acquire again`,
                err.cause,
              );
            }
            throw err;
          }
        }),
      );
      return { token, supersededLease: superseded };
    } finally {
      await r.locks.openGates().catch(() => undefined);
      for (const release of releases) release();
      r.locks.linger(all);
    }
  });
}

export async function renew(r: RealmHandle, token: number): Promise<void> {
  await withFence(r, async (state, cell) => {
    const highest = state?.highest ?? 0;
    if (state === null || token > highest) throw HostStoreError.invalid(`fence token ${token} was never issued`);
    if (token < highest) throw HostStoreError.fencedOut(highest);
    await cell.write(encodeFenceState({ ...state, leaseEnd: r.s.clock.now() + r.s.timing.lease, boot: r.s.boot }));
  });
}
