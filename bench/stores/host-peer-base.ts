// What the peer host stores share: the handle of lib/host (guards, life, the commit stall) and
// their options.
//
// Owns: `PeerHostBase` and `PeerHostOptions`. Guarantees: every public call checks its arguments
// with the same guards as seglog's stores (lib/host/handle.ts) before touching storage; a stalled
// commit is held before its transaction starts (before its commit point), and a killed handle's
// held commit never starts its transaction.

import { monotonicClock, type Clock } from '../../lib/clock.js';
import { HostStoreHandle } from '../../lib/host/handle.js';
import type { CommitStall } from '../../lib/host/stall.js';
import { FenceTiming } from '../../lib/host/timing.js';

export interface PeerHostOptions {
  clock?: Clock;
  timing?: FenceTiming;
  holderId?: string;
}

let handles = 0;

export abstract class PeerHostBase extends HostStoreHandle {
  protected readonly clock: Clock;
  protected readonly timing: FenceTiming;

  constructor(kind: string, options: PeerHostOptions) {
    const timing = options.timing ?? FenceTiming.default();
    super(options.holderId ?? `${kind}-${process.pid}-${++handles}`, timing);
    this.clock = options.clock ?? monotonicClock;
    this.timing = timing;
  }

  /** Holds the next commit before its transaction starts, until `release()`. */
  stallNextCommit(): CommitStall {
    return this.stallCommits('before-commit-point');
  }
}
