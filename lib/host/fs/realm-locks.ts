// The lock waits of one handle on a realm: a file's try-lock with backoff, and the stripe locks a
// commit group or an acquire takes.
//
// Owns: `lockWithin` (the realm's creation lock, the fence lock) and `StripeLocks`: taking the
// file locks of a group's stripes (try-lock only, all or back off), taking every lock for an
// acquire (gates closed in ascending order), opening the gates again, letting go of idle locks,
// and lingering a lock after use. Guarantees: no handle ever waits for a lock while it holds
// another one a waiter may need, so two processes never deadlock: a group that meets a taken
// lock or a closed gate lets go of every lock it took and retries after a randomized backoff,
// and an acquire, which keeps what it took, is the only waiter that holds locks (there is one at
// a time per handle, under every stripe's mutex). Every wait ends in UNAVAILABLE after
// `lockWaitMs`, holding nothing it took.

import { setTimeout as sleep } from 'node:timers/promises';
import type { FileHandle } from '../../fs/types.js';
import { HostStoreError } from '../errors.js';
import type { Stripe } from './stripe.js';

/** Takes a file's try-lock, retrying with backoff until `waitMs` passed (real time). */
export async function lockWithin(handle: FileHandle, waitMs: number, what: string): Promise<void> {
  const deadline = performance.now() + waitMs;
  let delay = 1;
  for (;;) {
    if (await handle.tryLock()) return;
    if (performance.now() > deadline) throw HostStoreError.unavailable(`${what} stayed locked by another handle for ${waitMs} ms`);
    await sleep(delay * (0.5 + Math.random()));
    delay = Math.min(delay * 2, 20);
  }
}

/** The stripe locks of one handle (see the module header). */
export class StripeLocks {
  constructor(
    private readonly stripes: readonly Stripe[],
    /** The handle's settings: how long a lock may stay taken, how long a used one lingers (ms). */
    private readonly s: { readonly lockWaitMs: number; readonly lockLingerMs: number },
  ) {}

  /**
   * Takes the file locks of `set` (ascending; the caller holds their in-handle mutexes). When one
   * is taken elsewhere it lets go of all of them and of idle lingering ones, backs off and tries
   * again, so two processes never wait on each other; UNAVAILABLE after `lockWaitMs`.
   */
  async lockStripes(set: readonly number[]): Promise<void> {
    const deadline = performance.now() + this.s.lockWaitMs;
    let delay = 0.5;
    for (;;) {
      let ok = true;
      const now = performance.now();
      for (const j of set) {
        const st = this.stripes[j]!;
        // A closed gate: an acquire waits for this stripe; let go of it (even a lingering hold).
        // A lock kept from the groups before checks the gate at most once a millisecond.
        const checkGate = !st.flockHeld || now - st.gateCheckedAt > 1;
        if (checkGate) st.gateCheckedAt = now;
        if ((checkGate && !(await st.gateOpen())) || !(await st.tryLock('group'))) {
          ok = false;
          break;
        }
      }
      if (ok) return;
      for (const j of set) await this.stripes[j]!.unlock();
      await this.releaseIdle();
      if (performance.now() > deadline) throw HostStoreError.unavailable(`stripe locks ${set.join(',')} stayed taken for ${this.s.lockWaitMs} ms`);
      await sleep(delay * (0.5 + Math.random()));
      delay = Math.min(delay * 2, 16);
    }
  }

  /**
   * The group fast path: when every lock of `set` is kept from the groups before (lingering, so
   * the view of its scopes is still exact: `fresh`) and none is due for a gate check, claims them
   * and answers true, without a pause; else false and nothing changed (the caller then takes the
   * locks through `lockStripes`). What it claims is exactly what `lockStripes` would, then finding
   * nothing to refresh.
   */
  claimKept(set: readonly number[]): boolean {
    const now = performance.now();
    for (const j of set) {
      const st = this.stripes[j]!;
      if (!st.flockHeld || !st.fresh || now - st.gateCheckedAt > 1) return false;
    }
    for (const j of set) this.stripes[j]!.inUse = true;
    return true;
  }

  /**
   * Takes every stripe lock for an acquire (the caller holds every in-handle mutex): in ascending
   * order, closing each stripe's gate first and keeping what it took while it waits for the next,
   * so commits that keep a stripe busy let go of it. Groups never wait holding a lock (they back
   * off), so this cannot deadlock. UNAVAILABLE after `lockWaitMs`, holding nothing.
   */
  async lockAllForAcquire(): Promise<void> {
    const deadline = performance.now() + this.s.lockWaitMs;
    try {
      for (const st of this.stripes) {
        let delay = 0.25;
        while (!(await st.holdGate()) || !(await st.tryLock('acquire'))) {
          if (performance.now() > deadline) {
            throw HostStoreError.unavailable(
              st.gateHeld
                ? `stripe ${st.index} stayed locked by another handle for ${this.s.lockWaitMs} ms (its gate held closed)`
                : `the gate of stripe ${st.index} stayed taken by another handle for ${this.s.lockWaitMs} ms`,
            );
          }
          await sleep(delay * (0.5 + Math.random()));
          delay = Math.min(delay * 2, 8);
        }
      }
    } catch (err) {
      for (const st of this.stripes) {
        await st.unlock().catch(() => undefined);
        await st.releaseGate().catch(() => undefined);
      }
      throw err;
    }
  }

  /** Opens every gate this handle closed. */
  async openGates(): Promise<void> {
    for (const st of this.stripes) await st.releaseGate();
  }

  /** Lets go of every stripe lock this handle holds but no group, acquire or adoption is using. */
  async releaseIdle(): Promise<void> {
    for (const st of this.stripes) if (st.flockHeld && !st.inUse) await st.unlock();
  }

  /**
   * After a group or an acquire: the locks of `set` are no longer in use; each is kept a moment (a
   * next group that claims it needs no catch-up) and then let go. A lock nobody claimed is let go
   * even while a group holds the stripe's mutex: that group may be waiting for another stripe's
   * mutex, held by a group that backs off because an acquire in another process closed a gate,
   * and that acquire may be waiting for exactly this lock.
   */
  linger(set: readonly number[]): void {
    const wait = this.s.lockLingerMs;
    const now = performance.now();
    for (const j of set) {
      const st = this.stripes[j]!;
      st.inUse = false;
      if (!st.flockHeld) continue;
      // With no lingering, a lock is handed straight to a group of ours already waiting for the
      // stripe (it claims it within microtasks), else let go now.
      if (wait <= 0 && !st.mutex.busy) {
        void st.unlock().catch(() => undefined);
        continue;
      }
      const keep = Math.max(wait, 1);
      st.lastUse = now;
      // One timer per stripe, re-armed for what is left rather than replaced after every group.
      if (st.lingerTimer !== null) continue;
      const fire = (): void => {
        const left = st.lastUse + keep - performance.now();
        if (left > 0.05 && st.flockHeld && !st.inUse) {
          st.lingerTimer = setTimeout(fire, left);
          st.lingerTimer.unref();
          return;
        }
        st.lingerTimer = null;
        // Claimed again: its user lingers it when done.
        if (st.inUse || !st.flockHeld) return;
        void st.unlock().catch(() => undefined);
      };
      st.lingerTimer = setTimeout(fire, keep);
      st.lingerTimer.unref();
    }
  }
}
