// State-machine plugin: the application's logic, run by the store's durable machinery.
//
// Owns: the interface between a Raft state machine's machinery (applied position, stored
// membership, the applied journal, snapshots as streams or files — lib/raft/memory.ts and the fs
// store) and the application's state. The machinery handles blank and membership entries itself
// and hands the plugin each normal entry. Guarantees the machinery gives a plugin: `apply` is
// called once per normal entry, in log order, never concurrently with another call on the same
// instance; `capture` is never called in the middle of an `apply`; `restore` is called only on a
// fresh instance, which is discarded if it throws.

import type { LogId } from './types.js';

/** A normal entry as the plugin sees it. */
export interface PluginEntry {
  logId: LogId;
  /** The application's command bytes. The plugin must copy what it keeps. */
  data: Uint8Array;
  /** Payload digests the entry names (see docs/contracts/raft-store.md, section 5); empty when none. */
  payloads: readonly string[];
}

/**
 * The application's state and logic, one instance per state.
 *
 * Rules a plugin must follow, and why:
 * - `apply` is synchronous and deterministic, and has no effect outside the instance: the reply is
 *   its only output. The machinery replays entries through `apply` to rebuild the state after a
 *   restart (from the snapshot plus the applied journal), so an entry applied twice must be as if
 *   applied once from the same prior state; and `capture` must see a state between two entries.
 * - A command it cannot understand gets a reply that says so (it must not throw): a committed
 *   entry is in every replica's log, and a throw would stop every replica at the same entry.
 *   A throw is taken as a fault of the machine: the state machine refuses further work.
 * - `capture` takes a frozen view synchronously (e.g. a shallow copy of a map whose values are
 *   never mutated) and answers a stream that serializes that view lazily, so building a snapshot
 *   runs while `apply` goes on and still sees one consistent state.
 * - `restore` reads the stream incrementally (it may be larger than memory in bytes, though the
 *   resulting state is the plugin's own business) and must consume it to the end.
 */
export interface StateMachinePlugin<R> {
  /**
   * A stable name for the snapshot format, e.g. `'seglog.kv/1'`. Every snapshot records it, and a
   * snapshot written under another name is refused (INVALID).
   */
  readonly name: string;
  /** Applies one normal entry and answers its reply. */
  apply(entry: PluginEntry): R;
  /** A frozen view of the state now, serialized lazily as a stream (iterated at most once). */
  capture(): AsyncIterable<Uint8Array>;
  /** Loads the state of a snapshot stream into this fresh, empty instance. CORRUPT on bad bytes. */
  restore(chunks: AsyncIterable<Uint8Array>): Promise<void>;
}

/** Makes a fresh, empty plugin instance. A state machine calls it at open and for every restore. */
export type StateMachinePluginFactory<P extends StateMachinePlugin<unknown>> = () => P;

/** The reply type of a plugin. */
export type PluginReply<P> = P extends StateMachinePlugin<infer R> ? R : never;
