// Reference in-memory Raft group: a log store and a plugin state machine that follow every rule.
//
// Owns: `MemoryRaftDisk` (what survives a close: the "durable" state) and `openMemoryRaftGroup`,
// which opens a log store and a state machine over it. It exists to validate the conformance suite
// and to serve as a test double; the file-system store follows the same rules and the same
// state-machine design (snapshot + applied journal). Guarantees:
// - every write takes effect synchronously when it is called (before the first await), so write
//   I/O takes effect in call order; everything written is "durable" at once (there is no crash);
// - values are stored encoded (lib/raft/codec.ts) and decoded on every read, so callers never share
//   memory with the store, and the codec is exercised on every path;
// - a close and a reopen of the same disk give back exactly what was written: vote, committed,
//   purged id, entries, current snapshot, applied position, membership and plugin state (the state
//   is rebuilt from the snapshot and the journal of entries applied after it).

import { closed, corrupt, invalid, locked, SeglogError } from '../errors.js';
import {
  copyBytes,
  decodeEntry,
  decodeOptionalLogId,
  decodeVote,
  encodeEntry,
  encodeOptionalLogId,
  encodeVote,
} from './codec.js';
import type { PluginReply, StateMachinePlugin, StateMachinePluginFactory } from './plugin.js';
import { restoreSnapshot, snapshotIdFor, writeSnapshotStream } from './snapshot-format.js';
import { DEFAULT_MAX_READ_BYTES, DEFAULT_MAX_READ_ENTRIES, callBack, cloneLogId, cloneOptionalLogId, cloneSnapshotMeta, cloneStoredMembership, compareLogId, emptyStoredMembership, validateEntry, validateLogId, validateOptionalLogId, validateRange, validateSnapshotMeta, validateVote } from './types.js';
import type { Entry, LogId, LogState, RaftLogReader, RaftLogStorage, RaftSnapshotBuilder, RaftStateMachine, Snapshot, SnapshotMeta, SnapshotSink, StoredMembership, Vote } from './types.js';

export { DEFAULT_MAX_READ_BYTES, DEFAULT_MAX_READ_ENTRIES } from './types.js';

interface StoredSnapshot {
  meta: SnapshotMeta;
  /** The snapshot stream's bytes, as built or received (never mutated). */
  chunks: Uint8Array[];
}

interface DiskState {
  opened: boolean;
  /** Index of records[0]; when the log is empty, the index the next entry must take (if `pinned`). */
  first: number;
  /** False for an empty log with no purged id: the next append may start at any index. */
  pinned: boolean;
  records: Uint8Array[];
  purged: Uint8Array | null;
  vote: Uint8Array | null;
  committed: Uint8Array | null;
  snapshot: StoredSnapshot | null;
  /** Encoded entries applied after the current snapshot, in order. */
  journal: Uint8Array[];
  snapshotSeq: number;
}

const disks = new WeakMap<MemoryRaftDisk, DiskState>();

/**
 * The state of one in-memory Raft group that outlives its handles: open a group on it, close it,
 * open it again and everything written is there. One open handle at a time (LOCKED otherwise).
 */
export class MemoryRaftDisk {
  constructor() {
    disks.set(this, {
      opened: false,
      first: 0,
      pinned: false,
      records: [],
      purged: null,
      vote: null,
      committed: null,
      snapshot: null,
      journal: [],
      snapshotSeq: 0,
    });
  }
}

function diskState(disk: MemoryRaftDisk): DiskState {
  const s = disks.get(disk);
  if (s === undefined) throw invalid('not a MemoryRaftDisk');
  return s;
}

/** Options of {@link openMemoryRaftGroup}. */
export interface MemoryRaftGroupOptions<P extends StateMachinePlugin<unknown>> {
  /** Makes a fresh plugin instance (e.g. `kvPlugin`). */
  plugin: StateMachinePluginFactory<P>;
  /** Cap on the entries of one `limitedGetLogEntries` (default 1024). */
  maxReadEntries?: number;
  /** Cap on the encoded bytes of one `limitedGetLogEntries`, past its first entry (default 4 MiB). */
  maxReadBytes?: number;
}

/** An open Raft group: its log store, its state machine, and `close` (idempotent). */
export interface MemoryRaftGroup<P extends StateMachinePlugin<unknown>> {
  log: MemoryRaftLogStorage;
  stateMachine: PluginStateMachine<P>;
  close(): Promise<void>;
}

/**
 * Opens the group stored on `disk`: the log store, and the state machine rebuilt from the current
 * snapshot and the applied journal. LOCKED while another handle has it open.
 */
export async function openMemoryRaftGroup<P extends StateMachinePlugin<unknown>>(
  disk: MemoryRaftDisk,
  options: MemoryRaftGroupOptions<P>,
): Promise<MemoryRaftGroup<P>> {
  const state = diskState(disk);
  if (typeof options?.plugin !== 'function') throw invalid('options.plugin must be a plugin factory');
  const maxReadEntries = options.maxReadEntries ?? DEFAULT_MAX_READ_ENTRIES;
  const maxReadBytes = options.maxReadBytes ?? DEFAULT_MAX_READ_BYTES;
  if (!Number.isSafeInteger(maxReadEntries) || maxReadEntries < 1) throw invalid('maxReadEntries must be a positive integer');
  if (!Number.isSafeInteger(maxReadBytes) || maxReadBytes < 0) throw invalid('maxReadBytes must be a non-negative integer');
  if (state.opened) throw locked('memory raft disk');
  state.opened = true;
  try {
    const handle = { closed: false };
    const log = new MemoryRaftLogStorage(state, handle, maxReadEntries, maxReadBytes);
    const stateMachine = await PluginStateMachine.open(state, handle, options.plugin);
    return {
      log,
      stateMachine,
      async close() {
        if (handle.closed) return;
        handle.closed = true;
        state.opened = false;
      },
    };
  } catch (err) {
    state.opened = false;
    throw err;
  }
}

interface Handle {
  closed: boolean;
}

// ---------------------------------------------------------------------------------------------
// Log

class MemoryLogReader implements RaftLogReader {
  constructor(
    protected readonly state: DiskState,
    protected readonly handle: Handle,
    protected readonly maxReadEntries: number,
    protected readonly maxReadBytes: number,
  ) {}

  protected check(): void {
    if (this.handle.closed) throw closed('raft log store');
  }

  /** The indices of `[start, end)` that the log holds, as offsets into `records`. */
  private span(start: number, end: number): [number, number] {
    const s = this.state;
    const lo = Math.max(start, s.first) - s.first;
    const hi = Math.min(end, s.first + s.records.length) - s.first;
    return [lo, Math.max(lo, hi)];
  }

  async tryGetLogEntries(start: number, end: number): Promise<Entry[]> {
    this.check();
    validateRange(start, end);
    const [lo, hi] = this.span(start, end);
    return this.state.records.slice(lo, hi).map(decodeEntry);
  }

  async limitedGetLogEntries(start: number, end: number): Promise<Entry[]> {
    this.check();
    validateRange(start, end);
    const [lo, hi] = this.span(start, end);
    const out: Entry[] = [];
    let bytes = 0;
    for (let i = lo; i < hi && out.length < this.maxReadEntries; i++) {
      const rec = this.state.records[i] as Uint8Array;
      if (out.length > 0 && bytes + rec.length > this.maxReadBytes) break;
      bytes += rec.length;
      out.push(decodeEntry(rec));
    }
    return out;
  }
}

/**
 * The in-memory log store. See {@link RaftLogStorage} for the contract of every method. Made by
 * {@link openMemoryRaftGroup}; never constructed directly.
 */
export class MemoryRaftLogStorage extends MemoryLogReader implements RaftLogStorage {
  private purgedId(): LogId | null {
    return this.state.purged === null ? null : decodeOptionalLogId(this.state.purged);
  }

  async getLogState(): Promise<LogState> {
    this.check();
    const s = this.state;
    const lastPurgedLogId = this.purgedId();
    const last = s.records[s.records.length - 1];
    return { lastPurgedLogId, lastLogId: last === undefined ? cloneOptionalLogId(lastPurgedLogId) : decodeEntry(last).logId };
  }

  async getLogReader(): Promise<RaftLogReader> {
    this.check();
    return new MemoryLogReader(this.state, this.handle, this.maxReadEntries, this.maxReadBytes);
  }

  async saveVote(vote: Vote): Promise<void> {
    this.check();
    validateVote(vote);
    this.state.vote = encodeVote(vote);
  }

  async readVote(): Promise<Vote | null> {
    this.check();
    return this.state.vote === null ? null : decodeVote(this.state.vote);
  }

  async saveCommitted(committed: LogId | null): Promise<void> {
    this.check();
    validateOptionalLogId(committed, 'committed');
    this.state.committed = encodeOptionalLogId(committed);
  }

  async readCommitted(): Promise<LogId | null> {
    this.check();
    return this.state.committed === null ? null : decodeOptionalLogId(this.state.committed);
  }

  async append(entries: Entry[], onFlushed: (err: Error | null) => void): Promise<void> {
    this.check();
    if (typeof onFlushed !== 'function') throw invalid('onFlushed must be a function');
    if (!Array.isArray(entries)) throw invalid('entries must be an array');
    entries.forEach((e, i) => validateEntry(e, `entries[${i}]`));
    const s = this.state;
    const first = entries[0];
    if (first !== undefined) {
      const expected = s.pinned ? s.first + s.records.length : first.logId.index;
      entries.forEach((e, i) => {
        if (e.logId.index !== expected + i) {
          throw invalid(`entries[${i}] has index ${e.logId.index} where the log needs ${expected + i} (no holes, no overwrites: truncate first)`, {
            index: e.logId.index,
            expected: expected + i,
          });
        }
      });
      const encoded = entries.map(encodeEntry);
      if (!s.pinned) {
        s.first = first.logId.index;
        s.pinned = true;
      }
      s.records.push(...encoded);
    }
    // Everything in memory is as durable as it gets: the flush is done now, before the promise
    // resolves, and never waits for another append.
    callBack(onFlushed, null);
  }

  async truncate(logId: LogId): Promise<void> {
    this.check();
    validateLogId(logId);
    const s = this.state;
    const purged = this.purgedId();
    if (purged !== null && logId.index <= purged.index) {
      throw invalid(`cannot truncate at ${logId.index}: entries up to ${purged.index} are purged`, { index: logId.index, purged: purged.index });
    }
    if (logId.index >= s.first + s.records.length) return;
    const keep = Math.max(0, logId.index - s.first);
    s.records.length = keep;
    if (keep === 0 && purged === null) s.pinned = false; // an empty log that never purged starts anywhere
  }

  async purge(logId: LogId): Promise<void> {
    this.check();
    validateLogId(logId);
    const s = this.state;
    const purged = this.purgedId();
    if (purged !== null && logId.index <= purged.index) return; // the purged id never goes back
    if (s.records.length > 0 && logId.index + 1 < s.first) {
      // Possible only in a log whose first append came at an arbitrary index: the purged id would
      // not touch the first entry, and (purged, first) would be a hole.
      throw invalid(`cannot purge at ${logId.index}: the log starts at ${s.first}, so that would leave a hole`, { index: logId.index, first: s.first });
    }
    // The purged id is recorded before any entry goes (the fs store's order; trivial here).
    s.purged = encodeOptionalLogId(logId);
    const drop = Math.min(s.records.length, Math.max(0, logId.index + 1 - s.first));
    s.records.splice(0, drop);
    s.first = s.records.length === 0 ? logId.index + 1 : s.first + drop;
    s.pinned = true;
  }
}

// ---------------------------------------------------------------------------------------------
// State machine

class MemorySink implements SnapshotSink {
  readonly chunks: Uint8Array[] = [];
  used = false;

  constructor(private readonly handle: Handle) {}

  async write(chunk: Uint8Array): Promise<void> {
    if (this.handle.closed) throw closed('raft state machine');
    if (this.used) throw invalid('this snapshot sink was installed already');
    if (!(chunk instanceof Uint8Array)) throw invalid('a snapshot chunk must be a Uint8Array');
    if (chunk.length > 0) this.chunks.push(copyBytes(chunk));
  }
}

async function* replay(chunks: readonly Uint8Array[]): AsyncGenerator<Uint8Array> {
  for (const c of chunks) yield copyBytes(c);
}


/**
 * The state machine: the durable machinery (applied position, stored membership, the applied
 * journal, the current snapshot) around an application plugin. Blank and membership entries reply
 * `null`; normal entries reply what the plugin answers. Made by {@link openMemoryRaftGroup}.
 */
export class PluginStateMachine<P extends StateMachinePlugin<unknown>> implements RaftStateMachine<PluginReply<P> | null> {
  private applied: LogId | null = null;
  private membership: StoredMembership = emptyStoredMembership();
  private broken: SeglogError | null = null;
  private readonly sinks = new WeakSet<MemorySink>();

  private constructor(
    private readonly state: DiskState,
    private readonly handle: Handle,
    private readonly factory: StateMachinePluginFactory<P>,
    private current: P,
  ) {}

  /** Rebuilds the state: the current snapshot, then every journaled entry after it. */
  static async open<P extends StateMachinePlugin<unknown>>(state: DiskState, handle: Handle, factory: StateMachinePluginFactory<P>): Promise<PluginStateMachine<P>> {
    const snap = state.snapshot;
    const sm = new PluginStateMachine(state, handle, factory, snap === null ? factory() : (await restoreSnapshot(factory, replay(snap.chunks), snap.meta)).plugin);
    if (snap !== null) {
      sm.applied = cloneOptionalLogId(snap.meta.lastLogId);
      sm.membership = cloneStoredMembership(snap.meta.lastMembership);
    }
    for (const rec of state.journal) {
      const entry = decodeEntry(rec);
      if (sm.applied !== null && entry.logId.index <= sm.applied.index) {
        throw corrupt(`applied journal holds index ${entry.logId.index}, not after the applied ${sm.applied.index}`);
      }
      sm.applyOne(entry);
    }
    return sm;
  }

  /** The plugin instance that holds the current state (replaced by every install). */
  get plugin(): P {
    return this.current;
  }

  private check(): void {
    if (this.handle.closed) throw closed('raft state machine');
    if (this.broken !== null) throw this.broken;
  }

  async appliedState(): Promise<[LogId | null, StoredMembership]> {
    this.check();
    return [cloneOptionalLogId(this.applied), cloneStoredMembership(this.membership)];
  }

  private applyOne(entry: Entry): PluginReply<P> | null {
    const p = entry.payload;
    let reply: PluginReply<P> | null = null;
    if (p.type === 'normal') {
      try {
        reply = this.current.apply({ logId: cloneLogId(entry.logId), data: p.data, payloads: p.payloads ?? [] }) as PluginReply<P>;
      } catch (err) {
        this.broken = new SeglogError('POISONED', `state machine plugin ${this.current.name} threw at ${entry.logId.index}; reopen`, { cause: err });
        throw this.broken;
      }
    } else if (p.type === 'membership') {
      this.membership = { logId: cloneLogId(entry.logId), membership: p.membership };
    }
    this.applied = cloneLogId(entry.logId);
    return reply;
  }

  async apply(entries: Entry[]): Promise<(PluginReply<P> | null)[]> {
    this.check();
    if (!Array.isArray(entries)) throw invalid('entries must be an array');
    entries.forEach((e, i) => validateEntry(e, `entries[${i}]`));
    let prev = this.applied;
    entries.forEach((e, i) => {
      if (prev !== null && e.logId.index <= prev.index) {
        throw invalid(`entries[${i}] has index ${e.logId.index}, not after ${prev.index} (an entry is applied once)`, { index: e.logId.index });
      }
      prev = e.logId;
    });
    const replies: (PluginReply<P> | null)[] = [];
    for (const e of entries) {
      const rec = encodeEntry(e);
      // Apply a decoded copy: the state never shares memory with the caller's entry.
      replies.push(this.applyOne(decodeEntry(rec)));
      this.state.journal.push(rec);
    }
    return replies;
  }

  async getSnapshotBuilder(): Promise<RaftSnapshotBuilder> {
    this.check();
    // The view is taken now, synchronously: applies that follow do not leak into it.
    const lastLogId = cloneOptionalLogId(this.applied);
    const lastMembership = cloneStoredMembership(this.membership);
    const pluginName = this.current.name;
    const view = this.current.capture();
    let used = false;
    return {
      buildSnapshot: async (): Promise<Snapshot> => {
        if (used) throw invalid('a snapshot builder builds one snapshot');
        used = true;
        this.check();
        const meta: SnapshotMeta = { lastLogId, lastMembership, snapshotId: snapshotIdFor(lastLogId, this.state.snapshotSeq++) };
        const chunks: Uint8Array[] = [];
        for await (const c of writeSnapshotStream({ plugin: pluginName, meta }, view)) chunks.push(copyBytes(c));
        this.check();
        const current = this.state.snapshot;
        if (current === null || compareLogId(current.meta.lastLogId, lastLogId) <= 0) {
          this.state.snapshot = { meta: cloneSnapshotMeta(meta), chunks };
          // The journal keeps only what the new snapshot does not cover.
          this.state.journal = this.state.journal.filter((rec) => lastLogId === null || decodeEntry(rec).logId.index > lastLogId.index);
        }
        return { meta: cloneSnapshotMeta(meta), data: replay(chunks) };
      },
    };
  }

  async beginReceivingSnapshot(): Promise<SnapshotSink> {
    this.check();
    const sink = new MemorySink(this.handle);
    this.sinks.add(sink);
    return sink;
  }

  async installSnapshot(meta: SnapshotMeta, sink: SnapshotSink): Promise<void> {
    this.check();
    validateSnapshotMeta(meta);
    if (!(sink instanceof MemorySink) || !this.sinks.has(sink)) throw invalid('installSnapshot needs a sink from this state machine');
    if (sink.used) throw invalid('this snapshot sink was installed already');
    if (this.applied !== null && (meta.lastLogId === null || meta.lastLogId.index < this.applied.index)) {
      // A snapshot behind the applied position would replay applied entries (openraft never sends
      // one: it ignores snapshots at or below its committed id). Refusing it also keeps every
      // journaled entry at or below the installed snapshot, which makes the install crash-safe.
      throw invalid(`snapshot ends at ${meta.lastLogId?.index ?? 'nothing'}, behind the applied ${this.applied.index}`);
    }
    sink.used = true;
    const { plugin } = await restoreSnapshot(this.factory, replay(sink.chunks), meta);
    this.check();
    this.state.snapshot = { meta: cloneSnapshotMeta(meta), chunks: sink.chunks };
    this.state.journal = [];
    this.current = plugin;
    this.applied = cloneOptionalLogId(meta.lastLogId);
    this.membership = cloneStoredMembership(meta.lastMembership);
  }

  async getCurrentSnapshot(): Promise<Snapshot | null> {
    this.check();
    const snap = this.state.snapshot;
    return snap === null ? null : { meta: cloneSnapshotMeta(snap.meta), data: replay(snap.chunks) };
  }
}
