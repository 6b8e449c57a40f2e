// Host store: the fence's lease rules (docs/contracts/host-store.md: fence leases and the writer
// rules), and the machine's boot id that a lease on a monotonic clock needs.
//
// Owns: `FenceRecord` (the highest token, its holder and the lease end on the store's clock, with
// the boot it was recorded in), `planAcquire`, `planRenew` and `readBootId`. Guarantees: the same
// rules for every store that keeps its fence as one record: an acquire answers the highest token
// plus one and records a full lease for its holder; an exclusive acquire answers HELD while the
// recorded holder is live; a takeover reports what was left of a live holder's lease; a renew of
// the highest token records a new lease from now, also after a lapse; a lower token is FENCED_OUT
// and a higher one INVALID (never issued). A lease recorded in another boot is over (a reboot
// restarts the monotonic clock). The fs store keeps its fence in stripes and a cell of its own
// (lib/host/fs/fence.ts); the PostgreSQL store decides the same rules in SQL on the server's clock.

import { readFileSync } from 'node:fs';
import { HostStoreError } from './errors.js';
import type { AcquireMode, FenceGrant } from './types.js';

/** The fence as one record: the highest token, its holder, and the lease on the store's clock. */
export interface FenceRecord {
  token: number;
  holder: string;
  /** The holder is live while now < leaseUntil (in the same boot). */
  leaseUntil: number;
  /** The boot the lease was recorded in. */
  boot: string;
}

/** What is left of `record`'s lease at `now` in boot `boot`, in ms; 0 when its holder is not live. */
export function remainingLease(record: FenceRecord | null, now: number, boot: string): number {
  if (record === null || record.boot !== boot || now >= record.leaseUntil) return 0;
  return record.leaseUntil - now;
}

/** An acquire: throws HELD for an exclusive acquire while a holder is live; else the new record and the grant. */
export function planAcquire(
  mode: AcquireMode,
  current: FenceRecord | null,
  holder: string,
  now: number,
  boot: string,
  leaseMs: number,
): { record: FenceRecord; grant: FenceGrant } {
  const live = remainingLease(current, now, boot);
  if (mode === 'exclusive' && live > 0) throw HostStoreError.held(current!.holder, live, current!.token);
  const token = (current?.token ?? 0) + 1;
  return { record: { token, holder, leaseUntil: now + leaseMs, boot }, grant: { token, supersededLease: live } };
}

/** A renew: FENCED_OUT below the highest token, INVALID above it; else the record with a new lease from `now`. */
export function planRenew(token: number, current: FenceRecord | null, now: number, boot: string, leaseMs: number): FenceRecord {
  const highest = current?.token ?? 0;
  if (current === null || token > highest) throw HostStoreError.invalid(`fence token ${token} was never issued`);
  if (token < highest) throw HostStoreError.fencedOut(highest);
  return { ...current, leaseUntil: now + leaseMs, boot };
}

/** What `readBootId` answers where the platform has no boot id: leases then cannot tell a reboot. */
export const NO_BOOT_ID = 'no-boot-id';

/** This machine's boot id (Linux: /proc/sys/kernel/random/boot_id), or NO_BOOT_ID. */
export async function readBootId(): Promise<string> {
  try {
    // Read on the calling thread: a file of the kernel's, 37 bytes, never on a disk; a first call
    // into fs/promises costs an open more (a few ms of a cold open) than the read itself.
    const text = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    return text.length > 0 ? text : NO_BOOT_ID;
  } catch {
    return NO_BOOT_ID;
  }
}
