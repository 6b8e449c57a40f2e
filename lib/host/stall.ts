// Host store: the commit stall that the conformance suite's factory asks of a store
// (`HostStoreFactory.stallCommits`), for every backend.
//
// Owns: `CommitStalls` (one per handle), `CommitStall` and `StallPoint`. Guarantees: `arm` holds
// the NEXT commit that claims it (a commit claims right after its batch was validated), at the
// chosen point — before its commit point (it has not landed) or after it (landed, not answered);
// commits started while one is held are not stalled; `release` lets the held commit go on, or
// disarms the stall when none was held yet, and is idempotent; `openAll` (a kill) lets every held
// commit go on at once, so that the store can refuse or settle it.

/** Where a stalled commit is held: before its commit point (it has not landed) or after it (landed, not yet answered). */
export type StallPoint = 'before-commit-point' | 'after-commit-point';

/** A commit held in flight. */
export interface CommitStall {
  /** Resolves once a commit is held. */
  readonly reached: Promise<void>;
  /** Lets the held commit go on; disarms the stall if no commit was held yet. Idempotent. */
  release(): void;
}

/** An armed stall, as a commit claimed it. */
export interface ClaimedStall {
  readonly at: StallPoint;
  /** @internal */ released: boolean;
  /** @internal */ readonly reached: () => void;
  /** @internal */ readonly gate: Promise<void>;
  /** @internal */ readonly open: () => void;
}

/** The stalls of one handle (see the module header). */
export class CommitStalls {
  #armed: ClaimedStall | null = null;
  readonly #held = new Set<ClaimedStall>();
  #opened = false;

  /** Arms a stall for the next commit that claims one. */
  arm(at: StallPoint = 'before-commit-point'): CommitStall {
    let reached!: () => void;
    let open!: () => void;
    const reachedP = new Promise<void>((resolve) => (reached = resolve));
    const gate = new Promise<void>((resolve) => (open = resolve));
    const stall: ClaimedStall = { at, released: false, reached, gate, open };
    this.#armed = stall;
    return {
      reached: reachedP,
      release: () => {
        stall.released = true;
        if (this.#armed === stall) this.#armed = null;
        stall.open();
      },
    };
  }

  /** Called by each commit once its batch is valid: the armed stall, now this commit's, or null. */
  claim(): ClaimedStall | null {
    const stall = this.#armed;
    this.#armed = null;
    return stall;
  }

  /** Holds the commit that claimed `stall` here if `point` is where it was armed; answers once let go. */
  async hold(stall: ClaimedStall | null, point: StallPoint): Promise<void> {
    if (stall === null || stall.at !== point || stall.released || this.#opened) return;
    this.#held.add(stall);
    stall.reached();
    try {
      await stall.gate;
    } finally {
      this.#held.delete(stall);
    }
  }

  /** Lets every held commit go on and disarms any armed stall (the handle was killed). */
  openAll(): void {
    this.#opened = true;
    const armed = this.#armed;
    this.#armed = null;
    armed?.open();
    for (const stall of this.#held) stall.open();
  }
}
