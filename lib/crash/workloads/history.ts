// The history of a workload whose steps take effect one after another, and what a crash may leave.
//
// Owns: `StepHistory`. `states[k]` is the store's content after step k (`states[0]` before any);
// the run marks `ack` k in the trace once step k resolved (`history.ack(fs, k)`). A step that a
// killed process never finished is simply never acknowledged, and the next process's first step
// ("observe": what it found at open) is. At a crash point the steps that may have taken effect
// are `acked .. inFlight`: `acked` is the last step acknowledged before the crash, `inFlight` the
// step of the first acknowledgement after it (every step in between was issued and may have
// landed, in whole or — as the store's contract allows — in part), or the last step.
// Guarantees: the window is derived from the trace alone, with no extra markers (a marker per
// step start would double the crash points without changing any disk).

import type { MemoryFs, TraceEntry } from '../../fs/memory.js';
import type { CrashState } from '../explore.js';

export const ACK = 'ack';

export class StepHistory<C> {
  readonly states: C[];
  readonly labels: string[];
  #nextAck: Int32Array | null = null;
  #trace: readonly TraceEntry[] | null = null;

  constructor(initial: C, label = 'initial state') {
    this.states = [initial];
    this.labels = [label];
  }

  /** The last step so far. */
  get last(): number {
    return this.states.length - 1;
  }

  get current(): C {
    return this.states[this.states.length - 1]!;
  }

  /** Records step `last + 1`, leading to `next`; answers its number. */
  push(label: string, next: C): number {
    this.states.push(next);
    this.labels.push(label);
    return this.states.length - 1;
  }

  /** Marks step `step` acknowledged (call it only after the step's promise resolved). */
  ack(fs: MemoryFs, step: number): void {
    fs.mark(ACK, step);
  }

  /**
   * The steps that may have taken effect at this crash: from the last one acknowledged before
   * it to the first one acknowledged after it. `trace` is the whole recorded run.
   */
  window(state: CrashState, trace: readonly TraceEntry[]): { acked: number; inFlight: number } {
    let acked = 0;
    for (const m of state.acknowledged) if (m.label === ACK) acked = Math.max(acked, m.detail as number);
    if (this.#trace !== trace || this.#nextAck === null) {
      // nextAck[p]: the step of the first ack marker at or after trace position p (-1: none).
      const next = new Int32Array(trace.length + 1).fill(-1);
      for (let p = trace.length - 1; p >= 0; p--) {
        const e = trace[p]!;
        next[p] = e.kind === 'mark' && e.label === ACK ? (e.detail as number) : next[p + 1]!;
      }
      this.#nextAck = next;
      this.#trace = trace;
    }
    const after = this.#nextAck[state.point] ?? -1;
    return { acked, inFlight: after < 0 ? this.last : Math.max(acked, after) };
  }

  /** A readable account of the window, for a reproducer's explanation. */
  explain(state: CrashState, trace: readonly TraceEntry[]): string {
    const { acked, inFlight } = this.window(state, trace);
    const lines = [`acknowledged through step ${acked} (${this.labels[acked] ?? '?'})`];
    if (inFlight > acked) {
      const pending = [];
      for (let k = acked + 1; k <= inFlight; k++) pending.push(`step ${k} (${this.labels[k] ?? '?'})`);
      lines.push(`issued, not acknowledged: ${pending.join(', ')}`);
    } else {
      lines.push('nothing was in flight');
    }
    return lines.join('\n');
  }
}
