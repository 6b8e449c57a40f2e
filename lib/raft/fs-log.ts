// File-system Raft log store: one group's `RaftLogStorage` over a segmented log and three cells.
//
// Owns: `FsRaftLogStorage` — append (with the flush callback), truncate, purge, the vote and
// committed cells, bounded reads, readers, and the order in which a group's writes reach the disk.
// The log index of a record is the Raft index of its entry; the record is the encoded entry
// (lib/raft/codec.ts). Guarantees (argued in docs/raft-store.md, "Crash safety"):
// - Every write call is admitted to one queue per group and *issued* in call order; its checks
//   (index continuity, purged bounds) see the effect of every earlier call. Appends and
//   truncations issue at once when nothing is queued; `saveCommitted`, `saveVote` and `purge` are
//   barriers: they wait until every earlier write is durable, and hold every later one back until
//   their own cell write is durable. So a crash leaves the effect of a prefix of the calls.
// - `append` resolves once its entries are readable (staged in the group's segmented log);
//   `onFlushed` fires after the fdatasync that covers them, in call order (a sync never waits for
//   a later append). While another group of the node writes, that is the node journal's
//   (node-journal.ts: its group commit is shared by every group), the group's own log being
//   written at once and synced by the journal's checkpoints, and a truncation is journaled too
//   and reaches the group's log only once its record is durable (a barrier), so the group's files
//   never hold a cut replay would not make. A group writing alone syncs its own log instead (its
//   segmented log's group commit), after a barrier that makes every write it journaled durable in
//   its log and marks that in the journal (docs/raft-store.md, "The node journal").
// - An entry naming a payload digest is appended only if the payload is durable in the node's
//   payload store (docs/contracts/raft-store.md, section 5); otherwise the append rejects with PAYLOAD_MISSING and appends
//   nothing. The digests of live records are counted in the node's `PayloadNameIndex` (the
//   payload store's GC asks it) from before the presence check until the truncation or purge that
//   removes the record is durable.
// - `purge` makes the purged id durable (its cell) before any entry is deleted.
// - The group's payload reference checkpoint (reference-checkpoint.ts) hears of every append and
//   writes off the append path; a `truncate` cutting records it claims issues only once it is
//   lowered to the cut (durable); `close` leaves the checkpoint of the whole live log.
// - A failed write or sync of any part poisons the group's log store (POISONED) until the node
//   is reopened: the failing call, its callback and every queued call report the error. Reads go
//   on, except after a failure of the group's own log while the node journal held writes of the
//   group not yet flushed to it: that log rolled back to what it last synced, without appends
//   the journal acknowledged, so reads answer POISONED too (the reopen replays the journal).
// - Reads are bounded: `limitedGetLogEntries` by entries and bytes; `tryGetLogEntries` reads in
//   bounded chunks. No read answers an entry at or below the purged id.

import type { Cell } from '../../cells/index.js';
import type { SyncPolicy } from '../../segments/index.js';
import type { JournalMember, NodeJournal } from './node-journal.js';
import type { SegmentedLog } from '../../segments/index.js';
import { SeglogError, closed, corrupt, fromIo, invalid, poisoned } from '../errors.js';
import { decodeEntry, decodeEntryLogId, encodeEntryWith, encodeOptionalLogId, encodeVote } from './codec.js';
import { assert } from '../assert.js';
import { deferred, type Deferred } from '../deferred.js';
import type { RaftMistakes } from './mistakes.js';
import type { GroupNames, PayloadNameIndex } from './payload-names.js';
import type { RecordPool } from './record-pool.js';
import type { ReferenceCheckpointer } from './reference-checkpoint.js';
import { DEFAULT_MAX_READ_BYTES, DEFAULT_MAX_READ_ENTRIES, callBack, cloneLogId, cloneOptionalLogId, cloneVote, validateEntry, validateLogId, validateOptionalLogId, validateRange, validateVote } from './types.js';
import type { Entry, LogId, LogState, RaftLogReader, RaftLogStorage, Vote } from './types.js';

/**
 * The sync policy of a group's log while its writes are journaled: its appends are durable
 * through the node journal, so the log syncs on its own only once a MiB of records waits, besides
 * the journal's checkpoints and its structural changes. Not for durability (a checkpoint syncs
 * what it needs). It was chosen when the log kept every written append (records, op and handlers)
 * until a sync covered it (with a sync only at checkpoints, 64 appenders on one group spent a
 * quarter of the time collecting them); now a written append keeps only its durable promise
 * until then (segments/syncer.ts, and #watchLog below), and 'none' measured the same as this at
 * 64 and 256 groups (docs/raft-store.md, "What a journaled append keeps"). While the group
 * writes alone: 'always'.
 */
export const JOURNALED_LOG_SYNC: SyncPolicy = { everyBytes: 1 << 20 };

/**
 * Whether a group journals its writes: by whether other groups write (`auto`); for tests, always
 * one way, or the other way at every append (`alternate`: every switch, marks included, is met).
 */
export type JournalMode = 'auto' | 'journal' | 'direct' | 'alternate';

/** Default cap on the entries one `limitedGetLogEntries` answers (the same as the memory store's). */
export const FS_DEFAULT_MAX_READ_ENTRIES = DEFAULT_MAX_READ_ENTRIES;
/** Default cap on the record bytes one `limitedGetLogEntries` answers past its first entry. */
export const FS_DEFAULT_MAX_READ_BYTES = DEFAULT_MAX_READ_BYTES;
/** Chunk size of `tryGetLogEntries` reads. */
const READ_CHUNK_ENTRIES = 1024;
const READ_CHUNK_BYTES = 8 * 1024 * 1024;

/** What a group hands its log store at open (after recovery). */
export interface FsLogParts {
  groupId: string;
  log: SegmentedLog;
  voteCell: Cell;
  committedCell: Cell;
  purgedCell: Cell;
  vote: Vote | null;
  committed: LogId | null;
  purged: LogId | null;
  names: GroupNames;
  index: PayloadNameIndex;
  /** True when the payload is durable in the node's payload store. */
  payloadPresent: (digest: string) => Promise<boolean>;
  maxReadEntries: number;
  maxReadBytes: number;
  maxRecordBytes: number;
  /** Recycled buffers for large records (shared by the node's groups). */
  pool: RecordPool;
  mistakes?: RaftMistakes;
  /** The group's reference checkpoint writer (docs/raft-store.md, "The reference checkpoint"). */
  references: ReferenceCheckpointer;
  /** The node journal, through which the group's appends and truncations become durable. */
  journal: NodeJournal;
  /** The group's key in the journal: the SHA-256 of its id (its directory name, as bytes). */
  journalKey: Uint8Array;
  /** Test-only: `journal` or `direct` always (default `auto`). */
  journalMode?: JournalMode;
}

/** The segmented log's internal policy switches (segments/log.ts). */
interface SwitchableLog extends SegmentedLog {
  setSyncPolicy(policy: SyncPolicy): void;
  setWriteBehind(bytes: number): void;
}

/**
 * While the group's writes are journaled, its log holds appends back until this many bytes of
 * them wait (or a sync or a structural change needs them): one write of the group's file carries
 * many appends (with 64 groups appending, a write per group per batch cost a sixth of the time).
 */
const JOURNALED_WRITE_BEHIND = 64 * 1024;

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

/**
 * A queued write. Runs when every earlier one was issued; answers a promise when later ones must
 * wait for it (a barrier, or an append still checking its payloads), nothing otherwise.
 */
type Op = () => Promise<void> | void;

/** What `SegmentedLog.stage` answers: the first index, and the promise of the sync that covers the records. */
type StagedAppend = ReturnType<SegmentedLog['stage']>;

const resolved: Promise<void> = Promise.resolve();

/** The log store of one group on the file system. Made by `openRaftNode(...).openGroup(id)`. */
export class FsRaftLogStorage implements RaftLogStorage, JournalMember {
  readonly groupId: string;
  readonly #log: SegmentedLog;
  readonly #voteCell: Cell;
  readonly #committedCell: Cell;
  readonly #purgedCell: Cell;
  readonly #names: GroupNames;
  readonly #index: PayloadNameIndex;
  readonly #payloadPresent: (digest: string) => Promise<boolean>;
  readonly #maxReadEntries: number;
  readonly #maxReadBytes: number;
  readonly #maxRecordBytes: number;
  /** Buffers of large records, recycled once durable and no read is in flight. */
  readonly #pool: RecordPool;
  /** The encoder's allocator: one function for the store's life, not a closure per append. */
  readonly #acquire = (bytes: number): Uint8Array => this.#pool.acquire(bytes);
  readonly #mistakes: RaftMistakes;
  readonly #refs: ReferenceCheckpointer;
  readonly #journal: NodeJournal;
  readonly #key: Uint8Array;
  /** The last journaled truncation's cut of the group's log (settles, never rejects). */
  #pendingCut: Promise<void> = resolved;
  readonly #journalMode: JournalMode;
  /** How the writes issued now become durable: through the node journal, or by the group's own log's syncs. */
  #mode: 'journal' | 'direct' = 'journal';
  /** The mode once every queued switch ran. */
  #queuedMode: 'journal' | 'direct' = 'journal';
  /** The journal may hold writes of this group that no flushed mark covers. */
  #journaledSinceFlush = false;

  #vote: Vote | null;
  #committed: LogId | null;
  /** The purged id, once its cell write is durable. Reads never answer an entry at or below it. */
  #purged: LogId | null;
  /** The last entry's id: undefined when it must be read from the log. */
  #lastId: LogId | null | undefined = undefined;
  /** Bumped at every issued write: a computed `#lastId` is cached only if nothing was issued meanwhile. */
  #version = 0;

  readonly #ops: Op[] = [];
  #draining = false;
  #idle: (() => void)[] = [];
  /** Settles (never rejects) when every log operation issued so far is durable or failed. */
  #logTail: Promise<void> = resolved;
  /** The last log operation issued (its own promise: durable of an append, or a structural change). */
  #lastLogOp: Promise<void> = resolved;
  /** `#lastLogOp` has settled (its handler in #trackLog ran): a write issued now need not wait for it. */
  #lastLogOpSettled = true;
  /** `#logTail` has settled: the next tracked operation is the whole tail by itself. */
  #logTailSettled = true;
  #poison: SeglogError | null = null;
  #closing: Promise<void> | null = null;
  /** The newest append staged in the group's log, until it or a later one is watched and settles (#watchLog). */
  #newestStaged: StagedAppend | null = null;
  /** The staged append whose durable promise is watched for a failure of the group's log (#watchLog). */
  #watched: StagedAppend | null = null;
  /** Set when the group's log lost appends the journal may have acknowledged: reads refuse (#checkReadable). */
  #logBehindJournal: SeglogError | null = null;

  /** @internal: made by the node. */
  constructor(parts: FsLogParts) {
    this.groupId = parts.groupId;
    this.#log = parts.log;
    this.#voteCell = parts.voteCell;
    this.#committedCell = parts.committedCell;
    this.#purgedCell = parts.purgedCell;
    this.#vote = parts.vote;
    this.#committed = parts.committed;
    this.#purged = parts.purged;
    this.#names = parts.names;
    this.#index = parts.index;
    this.#payloadPresent = parts.payloadPresent;
    this.#maxReadEntries = parts.maxReadEntries;
    this.#maxReadBytes = parts.maxReadBytes;
    this.#maxRecordBytes = parts.maxRecordBytes;
    this.#mistakes = parts.mistakes ?? {};
    this.#pool = parts.pool;
    this.#refs = parts.references;
    this.#journal = parts.journal;
    this.#key = parts.journalKey;
    this.#journalMode = parts.journalMode ?? 'auto';
    assert(typeof (parts.log as Partial<SwitchableLog>).setSyncPolicy === 'function', 'a group log can change its sync policy');
    (parts.log as SwitchableLog).setWriteBehind(JOURNALED_WRITE_BEHIND);
    const readLogId = async (index: number): Promise<LogId> => decodeEntryLogId((await this.#read(index, 1))[0] as Uint8Array);
    this.#refs.attach({ log: this.#log, names: this.#names, low: () => this.#low(), readLogId }, (err) => this.#setPoison(err));
  }

  // -------------------------------------------------------------------------------------------
  // The write queue

  #checkOpen(): void {
    if (this.#closing !== null) throw closed(`raft log of group ${JSON.stringify(this.groupId)}`);
  }

  #poisoned(): SeglogError {
    return poisoned(`raft log of group ${JSON.stringify(this.groupId)}`, this.#poison);
  }

  #enqueue(op: Op): void {
    this.#ops.push(op);
    if (!this.#draining) this.#drain();
  }

  /** Issues queued operations in order; stops at one that answers a promise until it settles. */
  #drain(): void {
    this.#draining = true;
    while (this.#ops.length > 0) {
      const op = this.#ops.shift() as Op;
      let wait: Promise<void> | void;
      try {
        wait = op();
      } catch (err) {
        // Every op settles its own caller; a throw here is a bug: refuse further writes.
        this.#setPoison(err);
        continue;
      }
      if (wait !== undefined) {
        void wait.then(
          () => this.#drain(),
          () => this.#drain(),
        );
        return;
      }
    }
    this.#draining = false;
    const idle = this.#idle;
    this.#idle = [];
    for (const f of idle) f();
  }

  /**
   * Watches the group's log for a failed write or sync, which rejects every staged append of the
   * log not yet durable (the log rolls back to what it last synced): the group is then poisoned at
   * once, before a read could answer the log without entries its journal holds. One handler is
   * enough while it sits on the newest staged append (a failure rejects that one with the rest);
   * when its sync succeeds it moves to the newest append staged since, if any. A journaled group
   * log is synced only by the journal's checkpoint, so a handler per append kept every append's
   * closures and records alive until then (16 MiB of records), copied by each young collection.
   */
  #watchLog(staged: StagedAppend): void {
    this.#newestStaged = staged;
    if (this.#watched === null) this.#watch(staged);
  }

  #watch(staged: StagedAppend): void {
    this.#watched = staged;
    staged.durable.then(
      () => {
        this.#watched = null;
        const newest = this.#newestStaged;
        if (newest === staged) this.#newestStaged = null;
        else if (newest !== null) this.#watch(newest);
      },
      (err: unknown) => {
        this.#watched = null;
        this.#newestStaged = null;
        // The log lost a staged append from its view (it rolled back to what it last synced):
        // when the journal may have acknowledged it, the log no longer shows the group's
        // acknowledged state, and reads must not answer from it until a reopen replays the journal.
        if (this.#journaledSinceFlush) this.#logBehindJournal ??= this.#storeError(err);
        this.#setPoison(err);
      },
    );
  }

  /**
   * Reads answer from the group's log, except once it lost appends its journal may have
   * acknowledged (#watch): POISONED then, until the node is reopened. Other failures leave reads
   * going (the log shows what was acknowledged: a direct group's failed append was not).
   */
  #checkReadable(): void {
    this.#checkOpen();
    if (this.#logBehindJournal !== null) {
      throw poisoned(`raft log of group ${JSON.stringify(this.groupId)} (its own log failed while the node journal held its writes; reopen the node to replay them)`, this.#logBehindJournal);
    }
  }

  /** A failure as this store reports it: a SeglogError as it is, anything else as a write's IO_ERROR. */
  #storeError(err: unknown): SeglogError {
    return err instanceof SeglogError ? err : fromIo(err, 'write', `raft group ${this.groupId}`);
  }

  /** A failure of a write path: the group's log store refuses writes until it is reopened. */
  #setPoison(err: unknown): void {
    if (this.#poison !== null) return;
    this.#poison = this.#storeError(err);
    this.#lastId = undefined;
    this.#version++;
  }

  /** Records a log operation; the tail settles when it does, and a failure poisons. */
  #trackLog(p: Promise<void>): void {
    this.#lastLogOp = p;
    this.#lastLogOpSettled = false;
    // When the tail had settled, this operation is the tail by itself (no chain to build: a group
    // with one append at a time, the common case, allocates no Promise.all per append).
    const alone = this.#logTailSettled;
    this.#logTailSettled = false;
    const done = (): void => {
      if (this.#lastLogOp === p) this.#lastLogOpSettled = true;
      if (alone && this.#logTail === settled) this.#logTailSettled = true;
    };
    const settled: Promise<void> = p.then(done, (err: unknown) => {
      this.#setPoison(err);
      done();
    });
    if (alone) {
      this.#logTail = settled;
      return;
    }
    // Log operations complete in issue order; chaining keeps that true of the tail even if a
    // caller's handler is slow.
    const tail: Promise<void> = Promise.all([this.#logTail, settled]).then(() => {
      if (this.#logTail === tail) this.#logTailSettled = true;
    });
    this.#logTail = tail;
  }

  /** Settles when every write issued so far is durable (or failed: check `#poison` after). */
  #earlierDurable(): Promise<void> {
    // Cell writes (vote, committed, purged) are barriers that the queue holds later writes for,
    // so the log's tail is the only thing still in flight.
    return this.#logTail;
  }

  // -------------------------------------------------------------------------------------------
  // append

  append(entries: Entry[], onFlushed: (err: Error | null) => void): Promise<void> {
    // Not an async function: its answer is the queued write's own promise, with no second promise
    // (and two more turns of the microtask queue) wrapped around it; a refusal is a rejection all the same.
    try {
      return this.#append(entries, onFlushed);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  #append(entries: Entry[], onFlushed: (err: Error | null) => void): Promise<void> {
    this.#checkOpen();
    if (typeof onFlushed !== 'function') throw invalid('onFlushed must be a function');
    if (!Array.isArray(entries)) throw invalid('entries must be an array');
    // Indexed loops, and no digest set for entries that name no payload: this runs once per
    // append of every group, and its garbage is what the collector spends its time on when
    // hundreds of groups append at once.
    const n = entries.length;
    for (let i = 0; i < n; i++) validateEntry(entries[i], `entries[${i}]`);
    for (let i = 0; i < n; i++) {
      const p = (entries[i] as Entry).payload;
      if (p.type === 'normal' && p.data.length > this.#maxRecordBytes) {
        throw new SeglogError('TOO_LARGE', `entries[${i}] holds ${p.data.length} bytes of data, above the limit of ${this.#maxRecordBytes}`, {
          details: { length: p.data.length, max: this.#maxRecordBytes },
        });
      }
    }
    // Encoded now: the caller may reuse its buffers once the call returns.
    const records: Uint8Array[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const r = encodeEntryWith(entries[i] as Entry, this.#acquire);
      if (r.length > this.#maxRecordBytes) {
        throw new SeglogError('TOO_LARGE', `entries[${i}] encodes to ${r.length} bytes, above the limit of ${this.#maxRecordBytes}`, {
          details: { length: r.length, max: this.#maxRecordBytes },
        });
      }
      records[i] = r;
    }
    const ids: LogId[] = new Array(n);
    const named: (string[] | null)[] = new Array(n);
    let names = false;
    for (let i = 0; i < n; i++) {
      const e = entries[i] as Entry;
      ids[i] = cloneLogId(e.logId);
      const p = e.payload;
      const list = p.type === 'normal' && p.payloads !== undefined && p.payloads.length > 0 ? [...p.payloads] : null;
      named[i] = list;
      if (list !== null) names = true;
    }
    const digests = names ? [...new Set(named.flatMap((x) => x ?? []))] : [];
    const d = deferred<void>();
    this.#journal.noteActive(this);
    this.#chooseMode();

    if (digests.length === 0) {
      this.#enqueue(() => this.#issueAppend(records, ids, named, onFlushed, d));
      return d.promise;
    }
    // The ordering rule (docs/contracts/raft-store.md, section 5): the payloads must be durable here before the record is accepted. The digests
    // are counted as named before the check, so that a collection running meanwhile either sees
    // them named or runs before the check, which then finds the payload gone.
    this.#index.add(digests);
    const check = Promise.all(digests.map(async (digest) => ((await this.#payloadPresent(digest)) ? null : digest)));
    check.catch(() => undefined);
    this.#enqueue(async () => {
      try {
        let missing: (string | null)[];
        try {
          missing = await check;
        } catch (err) {
          d.reject(fromIo(err, 'check payloads of an append to', `raft group ${this.groupId}`));
          return;
        }
        const absent = missing.find((m) => m !== null);
        if (absent !== undefined && absent !== null) {
          const at = named.findIndex((n) => n?.includes(absent) === true);
          const id = ids[at] as LogId;
          d.reject(
            new SeglogError('PAYLOAD_MISSING', `entry ${id.index} names payload ${absent}, which is not durable in this node's payload store`, {
              details: { group: this.groupId, index: id.index, term: id.leaderId.term, digest: absent },
            }),
          );
          return;
        }
        this.#issueAppend(records, ids, named, onFlushed, d);
      } finally {
        this.#index.remove(digests);
      }
    });
    return d.promise;
  }

  // -------------------------------------------------------------------------------------------
  // Journaled or direct

  /**
   * Queues a switch when the group should now write the other way: through the journal while
   * another group writes (they share its syncs), by its own log's syncs when alone.
   */
  #chooseMode(): void {
    const m = this.#journalMode;
    const other = this.#queuedMode === 'journal' ? 'direct' : 'journal';
    const want = m === 'alternate' ? other : m !== 'auto' ? m : this.#journal.othersActive(this) ? 'journal' : 'direct';
    if (want === this.#queuedMode) return;
    this.#queuedMode = want;
    this.#enqueue(want === 'direct' ? () => this.#toDirect() : () => this.#toJournal());
  }

  /**
   * A barrier: every earlier write durable, every journaled one in the group's log durably (its
   * last cut issued, the log synced) and the journal's flushed mark durable — so that replay
   * never applies those records over what the group writes from now on — then the log syncs
   * every append itself.
   */
  async #toDirect(): Promise<void> {
    if (this.#poison !== null) return;
    await this.#earlierDurable();
    await this.#pendingCut;
    if (this.#poison !== null) return;
    if (this.#journaledSinceFlush) {
      try {
        await this.#log.sync();
        await this.#journal.flushed(this, this.#key);
      } catch (err) {
        this.#setPoison(err);
        return;
      }
      this.#journaledSinceFlush = false;
    }
    (this.#log as SwitchableLog).setWriteBehind(0);
    (this.#log as SwitchableLog).setSyncPolicy('always');
    this.#mode = 'direct';
  }

  /**
   * A barrier: every earlier write durable by the log's own syncs (so the journal's records from
   * now on continue a durable log: replay's start rule, journal-replay.ts), then the log syncs
   * lazily and the journal makes the writes durable.
   */
  async #toJournal(): Promise<void> {
    if (this.#poison !== null) return;
    await this.#earlierDurable();
    if (this.#poison !== null) return;
    (this.#log as SwitchableLog).setSyncPolicy(JOURNALED_LOG_SYNC);
    (this.#log as SwitchableLog).setWriteBehind(JOURNALED_WRITE_BEHIND);
    this.#mode = 'journal';
  }

  #issueAppend(records: Uint8Array[], ids: LogId[], named: (string[] | null)[], onFlushed: (err: Error | null) => void, d: Deferred<void>): void {
    if (this.#poison !== null) {
      d.reject(this.#poisoned());
      return;
    }
    const log = this.#log;
    const first = ids[0];
    if (first === undefined) {
      // An empty append: its callback says that everything issued before it is on disk.
      // Attached to the last issued log operation itself, so that it fires after that one's
      // callback and before any later append's (callbacks come in call order).
      this.#lastLogOp.then(
        () => callBack(onFlushed, null),
        (err: unknown) => callBack(onFlushed, asError(err)),
      );
      d.resolve();
      return;
    }
    const pinned = log.endIndex > log.firstIndex || this.#purged !== null;
    const expected = pinned ? log.endIndex : first.index;
    for (let i = 0; i < ids.length; i++) {
      const index = (ids[i] as LogId).index;
      if (index !== expected + i) {
        d.reject(
          invalid(`entries[${i}] has index ${index} where the log needs ${expected + i} (no holes, no overwrites: truncate first)`, {
            index,
            expected: expected + i,
          }),
        );
        return;
      }
    }
    if (!Number.isSafeInteger(expected + ids.length)) {
      d.reject(invalid('log index would pass 2^53'));
      return;
    }
    this.#version++;
    if (expected !== log.endIndex) {
      // A log that never held nor purged an entry takes its first one at any index.
      this.#trackLog(log.reset(expected));
    }
    let staged: StagedAppend;
    try {
      staged = log.stage(records);
    } catch (err) {
      this.#setPoison(err);
      d.reject(err);
      return;
    }
    if (staged.first !== expected) {
      this.#setPoison(corrupt(`raft group ${this.groupId}: staged at ${staged.first}, expected ${expected}`));
      d.reject(this.#poisoned());
      return;
    }
    assert(log.endIndex === expected + records.length, 'the log ends just after the entries staged (contiguous indices)');
    for (let i = 0; i < named.length; i++) {
      const digests = named[i];
      if (digests !== null && digests !== undefined) {
        this.#names.push(ids[i] as LogId, digests);
        this.#index.add(digests);
      }
    }
    let durable: Promise<void>;
    let inFiles: () => Promise<void>;
    if (this.#mode === 'direct') {
      // The log's own group commit: durable after the sync that covers it, which follows every
      // earlier change of the log.
      durable = staged.durable;
      inFiles = () => staged.durable;
    } else {
      let journaled: Promise<void>;
      try {
        journaled = this.#journal.append(this, this.#key, expected, records);
      } catch (err) {
        // Staged in the group's log but never to be durable: nothing of this group may be acknowledged after it.
        this.#setPoison(err);
        d.reject(err);
        return;
      }
      this.#journaledSinceFlush = true;
      // Durable once its journal record is, and every write issued before it (a reset of this call
      // included: the journal's records settle in order, structural changes of the log do not).
      // (When the last operation settled already, it settled well: a failure would have poisoned
      // the log, and this call would have been refused above.)
      const journalDurable = this.#lastLogOpSettled ? journaled : Promise.all([journaled, this.#lastLogOp]).then(() => undefined);
      durable = journalDurable;
      // The reference checkpoint claims only what the group's own files hold durably (synced, when
      // it is about to write: once in its everyBytes), and what replay keeps (journal-durable).
      inFiles = () => Promise.all([journalDurable, log.sync()]).then(() => undefined);
    }
    this.#lastId = ids[ids.length - 1] as LogId;
    this.#refs.appended(records.reduce((n, r) => n + r.length, 0), log.endIndex, this.#lastId, inFiles);
    const early = this.#mistakes.flushBeforeSync === true; // mistakes.flushBeforeSync
    if (early) callBack(onFlushed, null);
    durable.then(
      () => {
        if (!early) callBack(onFlushed, null);
      },
      (err: unknown) => {
        this.#setPoison(err);
        if (!early) callBack(onFlushed, asError(err));
      },
    );
    // The records' buffers are the group's log's until its sync: pooled ones (large records) go
    // back to the pool then. Small ones are Node's slab slices, for the collector.
    if (records.some((r) => this.#pool.pools(r))) {
      staged.durable.then(
        () => {
          for (const r of records) this.#pool.release(r);
        },
        (err: unknown) => this.#setPoison(err),
      );
    }
    this.#watchLog(staged);
    this.#trackLog(durable);
    d.resolve();
  }

  // -------------------------------------------------------------------------------------------
  // truncate, purge

  truncate(logId: LogId): Promise<void> {
    try {
      this.#checkOpen();
      validateLogId(logId);
    } catch (err) {
      return Promise.reject(err);
    }
    const index = logId.index;
    const d = deferred<void>();
    this.#enqueue(() => {
      if (this.#poison !== null) return d.reject(this.#poisoned());
      const purged = this.#purged;
      if (purged !== null && index <= purged.index) {
        return d.reject(invalid(`cannot truncate at ${index}: entries up to ${purged.index} are purged`, { index, purged: purged.index }));
      }
      const log = this.#log;
      if (index >= log.endIndex) return d.resolve();
      const at = Math.max(index, log.firstIndex);
      const cut = (): Promise<void> | void => {
        const removed = this.#names.takeFrom(at);
        this.#version++;
        this.#lastId = undefined;
        if (this.#mode === 'direct') {
          // The log's own cut: a manifest commit behind the earlier appends there.
          this.#removeNamesWhenDurable(log.truncateAfter(at), removed, d);
          return;
        }
        this.#journaledSinceFlush = true;
        let journaled: Promise<void>;
        try {
          journaled = this.#journal.truncate(this, this.#key, at);
        } catch (err) {
          this.#setPoison(err);
          return d.reject(err);
        }
        // A barrier: the cut reaches the group's log once its record is durable (so the group's
        // files never hold a truncation a crash could take back), and later writes wait for it.
        const change = journaled.then(() => {
          const p = log.truncateAfter(at);
          this.#version++;
          this.#lastId = undefined;
          return p;
        });
        this.#pendingCut = change.catch(() => undefined);
        this.#removeNamesWhenDurable(change, removed, d);
        return this.#pendingCut;
      };
      // A reference checkpoint claiming records at or after the cut is lowered durably first (a
      // barrier only then): a crash never leaves it claiming records the truncation replaced.
      const lowering = this.#refs.beforeTruncate(at);
      if (lowering === null) return cut();
      return lowering.then(
        () => (this.#poison !== null ? d.reject(this.#poisoned()) : cut()),
        (err: unknown) => {
          this.#setPoison(err);
          d.reject(err);
        },
      );
    });
    return d.promise;
  }

  /**
   * Tracks `change`, a removal of log records; once it is durable — only then may the payloads
   * the removed records named be collected — takes their names out of the node's index and
   * resolves `d` (or rejects it with the change's error).
   */
  #removeNamesWhenDurable(change: Promise<void>, removed: readonly (readonly string[])[], d: Deferred<void>): void {
    this.#trackLog(change);
    change.then(
      () => {
        for (const digests of removed) this.#index.remove(digests);
        d.resolve();
      },
      (err: unknown) => d.reject(err),
    );
  }

  purge(logId: LogId): Promise<void> {
    try {
      this.#checkOpen();
      validateLogId(logId);
    } catch (err) {
      return Promise.reject(err);
    }
    const id = cloneLogId(logId);
    const index = id.index;
    const d = deferred<void>();
    this.#enqueue(async () => {
      if (this.#poison !== null) return d.reject(this.#poisoned());
      const purged = this.#purged;
      if (purged !== null && index <= purged.index) return d.resolve(); // the purged id never goes back
      const log = this.#log;
      if (log.endIndex > log.firstIndex && index + 1 < log.firstIndex) {
        // Only in a log whose first append came at an arbitrary index: (purged, first) would be a hole.
        return d.reject(invalid(`cannot purge at ${index}: the log starts at ${log.firstIndex}, so that would leave a hole`, { index, first: log.firstIndex }));
      }
      // A barrier: every earlier write durable, then the purged id durable, before any entry goes.
      await this.#earlierDurable();
      if (this.#poison !== null) return d.reject(this.#poisoned());
      // mistakes.dropBeforePurgedId: the entries go before the purged id is durable.
      if (this.#mistakes.dropBeforePurgedId === true && index + 1 <= log.endIndex && log.endIndex > log.firstIndex) await log.dropBefore(index + 1);
      try {
        await this.#purgedCell.write(encodeOptionalLogId(id));
      } catch (err) {
        this.#setPoison(err);
        return d.reject(err);
      }
      this.#purged = id;
      this.#version++;
      this.#lastId = undefined;
      const removed = this.#names.takeThrough(index);
      const next = index + 1;
      let p: Promise<void>;
      if (log.endIndex <= log.firstIndex) p = log.firstIndex === next ? resolved : log.reset(next);
      else if (next > log.endIndex) p = log.reset(next);
      else p = log.dropBefore(next);
      this.#removeNamesWhenDurable(p, removed, d);
      // Later writes may issue now: the segmented log orders them after the drop.
      return undefined;
    });
    return d.promise;
  }

  // -------------------------------------------------------------------------------------------
  // vote, committed

  saveVote(vote: Vote): Promise<void> {
    try {
      this.#checkOpen();
      validateVote(vote);
    } catch (err) {
      return Promise.reject(err);
    }
    const v = cloneVote(vote);
    return this.#writeCellInOrder(this.#voteCell, encodeVote(v), this.#mistakes.voteNotBarrier === true, () => {
      this.#vote = v;
    });
  }

  async readVote(): Promise<Vote | null> {
    this.#checkOpen();
    return this.#vote === null ? null : cloneVote(this.#vote);
  }

  saveCommitted(committed: LogId | null): Promise<void> {
    try {
      this.#checkOpen();
      validateOptionalLogId(committed, 'committed');
    } catch (err) {
      return Promise.reject(err);
    }
    const c = cloneOptionalLogId(committed);
    return this.#writeCellInOrder(this.#committedCell, encodeOptionalLogId(c), this.#mistakes.committedBeforeLog === true, () => {
      this.#committed = c;
    });
  }

  /**
   * Writes a cell as a barrier: after every earlier write of the group is durable (a vote never
   * lands before the entries it was cast after; a committed id never points past the durable
   * log), and before every later one, which the queue holds until this write is durable (a crash
   * never keeps a later append without it). `skipWait` is a planted mistake for the crash tests.
   */
  #writeCellInOrder(cell: Cell, bytes: Uint8Array, skipWait: boolean, adopt: () => void): Promise<void> {
    const d = deferred<void>();
    this.#enqueue(async () => {
      if (this.#poison !== null) return d.reject(this.#poisoned());
      if (!skipWait) await this.#earlierDurable();
      if (this.#poison !== null) return d.reject(this.#poisoned());
      try {
        await cell.write(bytes);
      } catch (err) {
        this.#setPoison(err);
        return d.reject(err);
      }
      adopt();
      d.resolve();
      return undefined;
    });
    return d.promise;
  }

  async readCommitted(): Promise<LogId | null> {
    this.#checkOpen();
    return cloneOptionalLogId(this.#committed);
  }

  /**
   * For the node journal's checkpoint (JournalMember): every write of this group journaled so far
   * made durable in the group's own log — its last truncation's cut issued, then the log synced.
   * A closing group answers with its close (which syncs the log); a failed sync poisons the group.
   */
  async flushToFiles(): Promise<void> {
    if (this.#closing !== null) return this.#closing;
    await this.#pendingCut;
    if (this.#poison !== null) throw this.#poisoned();
    try {
      await this.#log.sync();
    } catch (err) {
      this.#setPoison(err);
      throw err;
    }
  }

  // -------------------------------------------------------------------------------------------
  // Reading

  /** The first index a read may answer: past the purged id and the log's first record. */
  #low(): number {
    return Math.max(this.#log.firstIndex, this.#purged === null ? 0 : this.#purged.index + 1);
  }

  /** Every read of the segmented log goes through here (the record pool must know about it). */
  async #read(from: number, limit: number, maxBytes?: number): Promise<Uint8Array[]> {
    this.#pool.readStarted();
    try {
      return await this.#log.read(from, limit, maxBytes);
    } finally {
      this.#pool.readEnded();
    }
  }

  #decode(record: Uint8Array, index: number): Entry {
    const e = decodeEntry(record);
    if (e.logId.index !== index) {
      throw corrupt(`raft group ${this.groupId}: record ${index} holds the entry of index ${e.logId.index}`, { group: this.groupId, index });
    }
    return e;
  }

  async getLogState(): Promise<LogState> {
    this.#checkReadable();
    const purged = cloneOptionalLogId(this.#purged);
    if (this.#lastId !== undefined) return { lastPurgedLogId: purged, lastLogId: cloneOptionalLogId(this.#lastId ?? purged) };
    // The last record is read from the log; a write issued meanwhile (a truncate, a purge) makes
    // the answer stale, so it is read again (a few times at most: then the answer of the last
    // read is as good as any, since the call overlapped writes).
    for (let attempt = 0; ; attempt++) {
      const version = this.#version;
      const lo = this.#low();
      const end = this.#log.endIndex;
      let last: LogId | null = cloneOptionalLogId(this.#purged);
      if (end > lo) {
        let rec: Uint8Array | undefined;
        try {
          rec = (await this.#read(end - 1, 1))[0];
        } catch (err) {
          if (!(err instanceof SeglogError && err.code === 'INVALID' && version !== this.#version && attempt < 8)) throw err;
          continue; // purged meanwhile
        }
        if (rec === undefined) {
          if (version !== this.#version && attempt < 8) continue;
          throw corrupt(`raft group ${this.groupId}: record ${end - 1} cannot be read`);
        }
        last = decodeEntryLogId(rec);
        if (last.index !== end - 1) throw corrupt(`raft group ${this.groupId}: record ${end - 1} holds the entry of index ${last.index}`);
      }
      if (version === this.#version) this.#lastId = end > lo ? last : null; // cached; null: "no entry above the purged id"
      if (version === this.#version || attempt >= 8) return { lastPurgedLogId: cloneOptionalLogId(this.#purged), lastLogId: last };
    }
  }

  async getLogReader(): Promise<RaftLogReader> {
    this.#checkReadable();
    return {
      tryGetLogEntries: (start, end) => this.tryGetLogEntries(start, end),
      limitedGetLogEntries: (start, end) => this.limitedGetLogEntries(start, end),
    };
  }

  async tryGetLogEntries(start: number, end: number): Promise<Entry[]> {
    this.#checkReadable();
    validateRange(start, end);
    const out: Entry[] = [];
    let from = Math.max(start, this.#low());
    while (from < end) {
      const stop = Math.min(end, this.#log.endIndex);
      if (from >= stop || from < this.#low()) break;
      let recs: Uint8Array[];
      try {
        recs = await this.#read(from, Math.min(stop - from, READ_CHUNK_ENTRIES), READ_CHUNK_BYTES);
      } catch (err) {
        // Purged while reading: what follows is not contiguous with what was read.
        if (err instanceof SeglogError && err.code === 'INVALID') break;
        throw err;
      }
      if (recs.length === 0) break;
      for (const r of recs) out.push(this.#decode(r, from++));
    }
    return out;
  }

  async limitedGetLogEntries(start: number, end: number): Promise<Entry[]> {
    this.#checkReadable();
    validateRange(start, end);
    const from = Math.max(start, this.#low());
    const stop = Math.min(end, this.#log.endIndex);
    if (from >= stop) return [];
    let recs: Uint8Array[];
    try {
      recs = await this.#read(from, Math.min(stop - from, this.#maxReadEntries), this.#maxReadBytes);
    } catch (err) {
      if (err instanceof SeglogError && err.code === 'INVALID' && from < this.#low()) return this.limitedGetLogEntries(start, end);
      throw err;
    }
    return recs.map((r, i) => this.#decode(r, from + i));
  }

  // -------------------------------------------------------------------------------------------
  // Lifecycle

  /** The id of the last live record (null: none), with nothing in flight (close). */
  async #lastLive(): Promise<LogId | null> {
    const lo = this.#low();
    const end = this.#log.endIndex;
    if (end <= lo) return null;
    return decodeEntryLogId((await this.#read(end - 1, 1))[0] as Uint8Array);
  }

  /** True once a write failed; every later write rejects with POISONED. */
  get isPoisoned(): boolean {
    return this.#poison !== null;
  }

  /**
   * Waits for every queued write to issue and every issued one to be durable (flush callbacks
   * fire), then closes the segmented log and the cells. Idempotent.
   */
  close(): Promise<void> {
    if (this.#closing === null) {
      this.#closing = (async () => {
        if (this.#draining || this.#ops.length > 0) await new Promise<void>((r) => this.#idle.push(r));
        await this.#earlierDurable();
        let failure: unknown = null;
        await this.#refs.settled();
        if (this.#poison === null) {
          // Every write durable: the reference checkpoint of the whole live log (if it changed).
          await this.#refs.close(await this.#lastLive()).catch((err: unknown) => {
            failure ??= err;
          });
        }
        await this.#log.close().catch((err: unknown) => {
          failure ??= err;
        });
        for (const cell of [this.#voteCell, this.#committedCell, this.#purgedCell]) {
          await cell.close().catch((err: unknown) => {
            failure ??= err;
          });
        }
        if (failure !== null && this.#poison === null) throw failure;
      })();
    }
    return this.#closing;
  }
}
