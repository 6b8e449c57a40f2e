// The Raft log store (openraft v2's RaftLogStorage, docs/contracts/raft-store.md) on a peer database: the part both peers
// share, over a small backend interface that each peer implements in one transaction per call.
//
// Owns: `PeerRaftLog` and the `RaftBackend` it drives. Guarantees: the rules of
// lib/raft/memory.ts, the reference store — entries validated, indices consecutive (the first
// append of a log that never held nor purged anything may start anywhere), truncate and purge with
// their edge cases, the purged id written in the same transaction that deletes the purged entries,
// getLogState falling back to the purged id — and the same entry encoding as seglog
// (lib/raft/codec.ts), so every store serialises the same bytes. The checks run against a copy of
// the log's bounds kept in memory and updated at call time, so calls take effect in call order
// even while earlier transactions are still being committed; `append` resolves, and `onFlushed`
// fires, once the backend's transaction is durable. This is a benchmark peer, not part of seglog.

import { closed, invalid } from '../../lib/errors.js';
import { decodeEntry, decodeOptionalLogId, decodeVote, encodeEntry, encodeOptionalLogId, encodeVote } from '../../lib/raft/codec.js';
import {
  validateEntry,
  validateLogId,
  validateOptionalLogId,
  validateRange,
  validateVote,
  type Entry,
  type LogId,
  type LogState,
  type RaftLogReader,
  type RaftLogStorage,
  type Vote,
} from '../../lib/raft/types.js';

/** What a peer stores for one group; every write method is one durable transaction. */
export interface RaftBackend {
  /** The stored bounds and cells: lowest and highest entry index (null when none). */
  load(): { lowest: number | null; highest: number | null; purged: Uint8Array | null; vote: Uint8Array | null; committed: Uint8Array | null };
  append(first: number, encoded: Uint8Array[]): Promise<void>;
  /** Deletes entries with index >= from. */
  truncate(from: number): Promise<void>;
  /** Records the purged id and deletes entries with index <= upto, in one transaction. */
  purge(purged: Uint8Array, upto: number): Promise<void>;
  saveVote(vote: Uint8Array): Promise<void>;
  saveCommitted(committed: Uint8Array): Promise<void>;
  /** Encoded entries of [start, end), in order, at most `maxEntries`, and past the first at most `maxBytes`. */
  read(start: number, end: number, maxEntries: number, maxBytes: number): Uint8Array[];
  close(): Promise<void>;
}

export const PEER_MAX_READ_ENTRIES = 1024;
export const PEER_MAX_READ_BYTES = 4 * 1024 * 1024;

interface Bounds {
  first: number;
  end: number;
  /** False for a log that never held nor purged anything: the next append may start anywhere. */
  pinned: boolean;
  purged: LogId | null;
  /** The last entry's id, kept so getLogState needs no read (null while stale or empty). */
  last: LogId | null;
  /** A truncation left entries whose last id is not known yet: read it when asked. */
  lastStale: boolean;
  closed: boolean;
}

class PeerRaftReader implements RaftLogReader {
  constructor(
    protected readonly backend: RaftBackend,
    protected readonly bounds: Bounds,
  ) {}

  protected check(): void {
    if (this.bounds.closed) throw closed('raft log store');
  }

  async tryGetLogEntries(start: number, end: number): Promise<Entry[]> {
    this.check();
    validateRange(start, end);
    const lo = Math.max(start, this.bounds.first);
    const hi = Math.min(end, this.bounds.end);
    if (lo >= hi) return [];
    return this.backend.read(lo, hi, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER).map(decodeEntry);
  }

  async limitedGetLogEntries(start: number, end: number): Promise<Entry[]> {
    this.check();
    validateRange(start, end);
    const lo = Math.max(start, this.bounds.first);
    const hi = Math.min(end, this.bounds.end);
    if (lo >= hi) return [];
    return this.backend.read(lo, hi, PEER_MAX_READ_ENTRIES, PEER_MAX_READ_BYTES).map(decodeEntry);
  }
}

export class PeerRaftLog extends PeerRaftReader implements RaftLogStorage {
  static open(backend: RaftBackend): PeerRaftLog {
    const s = backend.load();
    const purged = s.purged === null ? null : decodeOptionalLogId(s.purged);
    let bounds: Bounds;
    if (s.lowest !== null && s.highest !== null) {
      const last = decodeEntry(backend.read(s.highest, s.highest + 1, 1, 0)[0] as Uint8Array).logId;
      bounds = { first: s.lowest, end: s.highest + 1, pinned: true, purged, last, lastStale: false, closed: false };
    } else {
      const first = purged === null ? 0 : purged.index + 1;
      bounds = { first, end: first, pinned: purged !== null, purged, last: null, lastStale: false, closed: false };
    }
    const log = new PeerRaftLog(backend, bounds);
    log.#vote = s.vote === null ? null : decodeVote(s.vote);
    log.#committed = s.committed === null ? null : decodeOptionalLogId(s.committed);
    return log;
  }

  #vote: Vote | null = null;
  #committed: LogId | null = null;
  /** A failed write leaves the bounds unknown: every later call fails. */
  #broken: unknown = null;

  protected override check(): void {
    super.check();
    if (this.#broken !== null) throw this.#broken;
  }

  /** Settles after the last write issued so far (whatever its outcome). */
  #tail: Promise<void> = Promise.resolve();

  async #durably(p: Promise<void>): Promise<void> {
    this.#tail = p.then(
      () => undefined,
      () => undefined,
    );
    try {
      await p;
    } catch (err) {
      this.#broken ??= err;
      throw err;
    }
  }

  async getLogState(): Promise<LogState> {
    this.check();
    const b = this.bounds;
    while (b.lastStale) {
      const tail = this.#tail;
      await tail;
      if (b.lastStale && tail === this.#tail) {
        b.last = decodeEntry(this.backend.read(b.end - 1, b.end, 1, 0)[0] as Uint8Array).logId;
        b.lastStale = false;
      }
    }
    return { lastPurgedLogId: b.purged, lastLogId: b.end > b.first ? b.last : b.purged };
  }

  async getLogReader(): Promise<RaftLogReader> {
    this.check();
    return new PeerRaftReader(this.backend, this.bounds);
  }

  async saveVote(vote: Vote): Promise<void> {
    this.check();
    validateVote(vote);
    const bytes = encodeVote(vote);
    this.#vote = decodeVote(bytes);
    await this.#durably(this.backend.saveVote(bytes));
  }

  async readVote(): Promise<Vote | null> {
    this.check();
    return this.#vote === null ? null : decodeVote(encodeVote(this.#vote));
  }

  async saveCommitted(committed: LogId | null): Promise<void> {
    this.check();
    validateOptionalLogId(committed, 'committed');
    const bytes = encodeOptionalLogId(committed);
    this.#committed = decodeOptionalLogId(bytes);
    await this.#durably(this.backend.saveCommitted(bytes));
  }

  async readCommitted(): Promise<LogId | null> {
    this.check();
    return this.#committed === null ? null : decodeOptionalLogId(encodeOptionalLogId(this.#committed));
  }

  async append(entries: Entry[], onFlushed: (err: Error | null) => void): Promise<void> {
    this.check();
    if (typeof onFlushed !== 'function') throw invalid('onFlushed must be a function');
    if (!Array.isArray(entries)) throw invalid('entries must be an array');
    entries.forEach((e, i) => validateEntry(e, `entries[${i}]`));
    const b = this.bounds;
    const head = entries[0];
    if (head === undefined) {
      onFlushed(null);
      return;
    }
    const expected = b.pinned ? b.end : head.logId.index;
    entries.forEach((e, i) => {
      if (e.logId.index !== expected + i) throw invalid(`entries[${i}] has index ${e.logId.index} where the log needs ${expected + i}`);
    });
    const encoded = entries.map(encodeEntry);
    if (!b.pinned) {
      b.first = expected;
      b.pinned = true;
    }
    b.end = expected + entries.length;
    b.lastStale = false;
    b.last = decodeEntry(encoded[encoded.length - 1] as Uint8Array).logId;
    try {
      await this.#durably(this.backend.append(expected, encoded));
    } catch (err) {
      onFlushed(err instanceof Error ? err : new Error(String(err)));
      throw err;
    }
    onFlushed(null);
  }

  async truncate(logId: LogId): Promise<void> {
    this.check();
    validateLogId(logId);
    const b = this.bounds;
    if (b.purged !== null && logId.index <= b.purged.index) {
      throw invalid(`cannot truncate at ${logId.index}: entries up to ${b.purged.index} are purged`);
    }
    if (logId.index >= b.end) return;
    const from = Math.max(b.first, logId.index);
    b.end = from;
    b.last = null;
    // The new last entry's id is read from storage when next asked for (once this write is done).
    b.lastStale = b.end > b.first;
    if (b.end === b.first && b.purged === null) {
      b.pinned = false; // an empty log that never purged starts anywhere
      b.first = 0;
      b.end = 0;
    }
    await this.#durably(this.backend.truncate(from));
  }

  async purge(logId: LogId): Promise<void> {
    this.check();
    validateLogId(logId);
    const b = this.bounds;
    if (b.purged !== null && logId.index <= b.purged.index) return;
    if (b.end > b.first && logId.index + 1 < b.first) {
      throw invalid(`cannot purge at ${logId.index}: the log starts at ${b.first}, so that would leave a hole`);
    }
    const bytes = encodeOptionalLogId(logId);
    b.purged = decodeOptionalLogId(bytes);
    b.first = Math.max(b.first, logId.index + 1);
    if (b.end <= b.first) {
      b.end = b.first;
      b.last = null;
      b.lastStale = false;
    }
    b.pinned = true;
    await this.#durably(this.backend.purge(bytes, logId.index));
  }

  async close(): Promise<void> {
    if (this.bounds.closed) return;
    this.bounds.closed = true;
    await this.backend.close();
  }
}
