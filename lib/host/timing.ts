// Host store: fence timing (docs/contracts/host-store.md, section 8).
//
// Owns: `FenceTiming`, the renew interval, lease, self-fence margin and longest commit a host store
// declares. Guarantees: every FenceTiming that exists satisfies the contract's bounds (renew ≥ 1 s;
// 3 renews ≤ lease ≤ 1 hour; margin ≥ 1 renew; lease − margin ≥ 2 renews; 0 < longest commit ≤
// lease); every constructor refuses anything else with HostStoreError INVALID. All values are
// milliseconds. Instances are frozen.

import { HostStoreError } from './errors.js';
import {
  FENCE_LEASE_SECS,
  FENCE_MAX_COMMIT_LATENCY_SECS,
  FENCE_MIN_LEASE_RENEWALS,
  FENCE_RENEW_INTERVAL_SECS,
} from './types.js';

const SECOND = 1000;

/** The timing of a store's fence leases, in milliseconds. */
export class FenceTiming {
  /** The shortest renew interval: 1 s. */
  static readonly MIN_RENEW_INTERVAL = SECOND;
  /** The longest lease: 1 hour. */
  static readonly MAX_LEASE = 3600 * SECOND;

  /** How often the holder renews. */
  readonly renewInterval: number;
  /** How long a lease lasts from the holder's last acquire or renew, on the store's clock. */
  readonly lease: number;
  /** How long before its lease ends the holder stops on its own clock. */
  readonly selfFenceMargin: number;
  /** How long one commit can take on this store's backend. */
  readonly maxCommitLatency: number;
  /** `lease − selfFenceMargin`: the holder writes only this long after its last acquire or renew started. */
  readonly selfFenceWindow: number;

  private constructor(renewInterval: number, lease: number, selfFenceMargin: number, maxCommitLatency: number) {
    this.renewInterval = renewInterval;
    this.lease = lease;
    this.selfFenceMargin = selfFenceMargin;
    this.maxCommitLatency = maxCommitLatency;
    this.selfFenceWindow = lease - selfFenceMargin;
    Object.freeze(this);
  }

  /** 10 s renew interval, 30 s lease, 10 s margin, 2 s longest commit. */
  static default(): FenceTiming {
    return new FenceTiming(
      FENCE_RENEW_INTERVAL_SECS * SECOND,
      FENCE_LEASE_SECS * SECOND,
      FENCE_RENEW_INTERVAL_SECS * SECOND,
      FENCE_MAX_COMMIT_LATENCY_SECS * SECOND,
    );
  }

  /** A timing whose self-fence margin is one renew interval. Throws INVALID outside the bounds. */
  static tryNew(renewIntervalMs: number, leaseMs: number): FenceTiming {
    return FenceTiming.tryWithMargin(renewIntervalMs, leaseMs, renewIntervalMs);
  }

  /** A timing with a declared self-fence margin. Throws INVALID outside the bounds. */
  static tryWithMargin(renewIntervalMs: number, leaseMs: number, selfFenceMarginMs: number): FenceTiming {
    checkDuration(renewIntervalMs, 'renew interval');
    checkDuration(leaseMs, 'lease');
    checkDuration(selfFenceMarginMs, 'self-fence margin');
    if (renewIntervalMs < FenceTiming.MIN_RENEW_INTERVAL) {
      throw HostStoreError.invalid(`renew interval ${renewIntervalMs} ms is below ${FenceTiming.MIN_RENEW_INTERVAL} ms`);
    }
    if (leaseMs < FENCE_MIN_LEASE_RENEWALS * renewIntervalMs) {
      throw HostStoreError.invalid(`lease ${leaseMs} ms is shorter than ${FENCE_MIN_LEASE_RENEWALS} renew intervals`);
    }
    if (leaseMs > FenceTiming.MAX_LEASE) {
      throw HostStoreError.invalid(`lease ${leaseMs} ms is longer than ${FenceTiming.MAX_LEASE} ms`);
    }
    if (selfFenceMarginMs < renewIntervalMs) {
      throw HostStoreError.invalid(`self-fence margin ${selfFenceMarginMs} ms is below one renew interval`);
    }
    if (leaseMs - selfFenceMarginMs < 2 * renewIntervalMs) {
      throw HostStoreError.invalid(`self-fence window ${leaseMs - selfFenceMarginMs} ms is below two renew intervals`);
    }
    const maxCommitLatency = Math.min(FENCE_MAX_COMMIT_LATENCY_SECS * SECOND, leaseMs);
    return new FenceTiming(renewIntervalMs, leaseMs, selfFenceMarginMs, maxCommitLatency);
  }

  /** This timing with a declared longest commit (more than 0, at most the lease). Throws INVALID otherwise. */
  tryWithMaxCommitLatency(maxCommitLatencyMs: number): FenceTiming {
    checkDuration(maxCommitLatencyMs, 'longest commit');
    if (maxCommitLatencyMs > this.lease) {
      throw HostStoreError.invalid(`longest commit ${maxCommitLatencyMs} ms is longer than the lease ${this.lease} ms`);
    }
    return new FenceTiming(this.renewInterval, this.lease, this.selfFenceMargin, maxCommitLatencyMs);
  }
}

function checkDuration(ms: unknown, what: string): asserts ms is number {
  if (typeof ms !== 'number' || !Number.isFinite(ms) || ms <= 0) {
    throw HostStoreError.invalid(`${what} must be a positive finite number of milliseconds, not ${String(ms)}`);
  }
}
