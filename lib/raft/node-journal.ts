// The node journal: one segmented log per node through which the appends and truncations of every
// group become durable, so that concurrent groups share one writev and one fdatasync.
//
// Owns: `NodeJournal` — the `journal/` directory of a node (a segmented log, owner-locked by the
// node's LOCK), staging a group's append or truncation as one record (journal-format.ts), the
// checkpoint that lets records go, and the scan at open that hands each group the records it may
// not yet hold (`JournalOp`, replayed by journal-replay.ts). Each group keeps its own segmented
// log (the design card's shape), written at once but synced only by a checkpoint (or a
// structural change of its own). Guarantees (docs/raft-store.md, "The node journal"):
// - a record is durable when the journal's group commit syncs it: records of all groups staged
//   while one sync runs go out together in the next writev and fdatasync;
// - records are staged in the order the groups issue their writes, so each group's records are in
//   its call order, and a crash keeps a prefix of the journal: for each group a prefix of its
//   journaled writes;
// - a checkpoint drops records only once every group that staged them made them durable in its
//   own files: it captures the journal's end, waits until the journal is durable to it, flushes
//   each group that wrote since the last checkpoint (its pending cut issued, its log synced), and
//   only then drops the records before that end (the drop is the journal's manifest write). A
//   crash anywhere in it leaves the old first index, from which replay is still right;
// - a failed flush or sync stops every later checkpoint from dropping anything until the node is
//   reopened (the failed group's records may exist nowhere else);
// - memory: what groups have written and not yet synced is bounded by the checkpoint threshold
//   (CHECKPOINT_BYTES of records start one), plus what arrives while one runs.

import * as path from 'node:path';
import { openSegmentedLog, type SegmentedLog, type SegmentedLogOptions } from '../../segments/index.js';
import { assert } from '../assert.js';
import { corrupt, type SeglogError } from '../errors.js';
import type { FileSystem } from '../fs/types.js';
import { monotonicClock, type Clock } from '../clock.js';
import type { FdCache } from '../../segments/index.js';
import { JOURNAL_APPEND, JOURNAL_HEADER_BYTES, JOURNAL_TRUNCATE, decodeJournalEntries, decodeJournalHeader, encodeJournalAppend, encodeJournalFlushed, encodeJournalTruncate } from './journal-format.js';
import { NODE_JOURNAL_DIR } from './fs-layout.js';

const MiB = 1 << 20;
/** Records staged since the last checkpoint that start the next one. */
export const CHECKPOINT_BYTES = 16 * MiB;
/** A checkpoint also runs this long after a write when no threshold started one (idle groups). */
export const IDLE_CHECKPOINT_MS = 1000;
/** The journal's segment size: a checkpoint drops whole segments, so the journal holds about two. */
export const NODE_JOURNAL_SEGMENT_BYTES = 32 * MiB;
/**
 * An append's entries are split into records of about this many bytes at most: one record per
 * batch in the journal's writev, and replay holds one record's entries at a time. A crash may keep
 * the first records of an unacknowledged append only: a prefix of its entries, as a group's own
 * log may keep of an unsynced append.
 */
const RECORD_BYTES = 8 * MiB;
/** Records read at once by the scan at open. */
const SCAN_CHUNK_RECORDS = 1024;
const SCAN_CHUNK_BYTES = 8 * MiB;

/** A group as a checkpoint sees it. */
export interface JournalMember {
  /**
   * Makes every journaled write of the group issued so far durable in its own files: waits for a
   * truncation whose record is staged to reach the group's log, then syncs the log. A closed
   * group answers when its close did (which syncs).
   */
  flushToFiles(): Promise<void>;
}

/** A journaled write of one group, as the scan at open found it (the entries stay in the journal). */
export type JournalOp =
  | { kind: 'append'; at: number; first: number; count: number }
  | { kind: 'truncate'; at: number; index: number }
  | { kind: 'flushed'; at: number };

/**
 * How long after another group's last write a group still counts it as active: while another is,
 * a group journals its writes (they share the journal's syncs); alone, it writes and syncs its own
 * log (a sync of the journal would buy it nothing, and its records would be written twice).
 */
export const OTHERS_ACTIVE_MS = 5;

const resolved: Promise<void> = Promise.resolve();

/**
 * Group flushes a checkpoint keeps in flight at once. Each is an `fdatasync` on libuv's pool (four
 * threads by default), which serves its requests in the order they came: with every dirty group's
 * sync queued at once (64 of them, 256), the journal's own group-commit sync, issued meanwhile,
 * waited behind all of them, and every append in flight with it (the appends' p99 was the
 * checkpoint's length). Two leave the pool room for the journal's sync; the checkpoint, off the
 * append path, takes longer.
 */
export const CHECKPOINT_FLUSHES_IN_FLIGHT = 2;

/**
 * Flushes every member, at most CHECKPOINT_FLUSHES_IN_FLIGHT at once; rejects with the first
 * failure once the flushes under way have ended (no new one starts after a failure: the
 * checkpoint drops nothing then, so the others' records stay in the journal).
 */
async function flushMembers(members: readonly JournalMember[]): Promise<void> {
  let next = 0;
  const failures: unknown[] = [];
  const worker = async (): Promise<void> => {
    while (failures.length === 0 && next < members.length) {
      const member = members[next++]!;
      try {
        await member.flushToFiles();
      } catch (err) {
        failures.push(err);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(CHECKPOINT_FLUSHES_IN_FLIGHT, members.length) }, worker));
  if (failures.length > 0) throw failures[0];
}

export interface NodeJournalOptions {
  fs: FileSystem;
  fdCache: FdCache | undefined;
  inlineSyncBelowMs: number;
  /** Test-only: the records that start a checkpoint (default CHECKPOINT_BYTES). */
  checkpointBytes?: number;
  /** Test-only: the idle checkpoint's delay (default IDLE_CHECKPOINT_MS; 0: no idle checkpoint). */
  idleCheckpointMs?: number;
  /** Where "lately" is measured for `othersActive` (default: the machine's monotonic clock). */
  clock?: Clock;
  /** The largest encoded entry a group takes: one always fits in one record. */
  maxEntryBytes: number;
  knownDurable: boolean;
  /** Test-only: drop records before the groups holding them synced (mistakes.ts). */
  dropBeforeGroupSync?: boolean;
}

export class NodeJournal {
  readonly dir: string;
  readonly #log: SegmentedLog;
  readonly #dropBeforeGroupSync: boolean;
  /** An append's entries go into records of at most this many bytes (one entry each when larger). */
  readonly #recordBytes: number;
  readonly #checkpointBytes: number;
  readonly #idleCheckpointMs: number;
  readonly #clock: Clock;
  /** Groups that staged a record since the last checkpoint captured its members. */
  #dirty = new Set<JournalMember>();
  #bytesSince = 0;
  /** The durable promise of the last record staged (settles in journal order: covers every earlier one). */
  #lastDurable: Promise<void> = resolved;
  #round: Promise<void> | null = null;
  #again = false;
  #timer: NodeJS.Timeout | null = null;
  /** A checkpoint failed: nothing is dropped again until the node is reopened. */
  #stuck: SeglogError | Error | null = null;
  #closed = false;
  /** The last two groups that issued a write, and when (othersActive). */
  #lastActive: JournalMember | null = null;
  #lastActiveAt = 0;
  #prevActive: JournalMember | null = null;
  #prevActiveAt = 0;

  private constructor(dir: string, log: SegmentedLog, dropBeforeGroupSync: boolean, recordBytes: number, checkpointBytes: number, idleCheckpointMs: number, clock: Clock) {
    this.dir = dir;
    this.#checkpointBytes = checkpointBytes;
    this.#idleCheckpointMs = idleCheckpointMs;
    this.#clock = clock;
    this.#log = log;
    this.#dropBeforeGroupSync = dropBeforeGroupSync;
    this.#recordBytes = recordBytes;
  }

  /**
   * Opens (creating it when absent) the journal of the node in `nodeDir`, and scans the records it
   * still holds: each group's ops, by the group's key (directory name), in journal order.
   */
  static async open(nodeDir: string, o: NodeJournalOptions): Promise<{ journal: NodeJournal; pending: Map<string, JournalOp[]> }> {
    const dir = path.join(nodeDir, NODE_JOURNAL_DIR);
    const log = await openSegmentedLog(dir, {
      fs: o.fs,
      ...(o.fdCache !== undefined ? { fdCache: o.fdCache } : {}),
      segmentBytes: NODE_JOURNAL_SEGMENT_BYTES,
      maxRecordBytes: o.maxEntryBytes + JOURNAL_HEADER_BYTES + 4,
      inlineSyncBelowMs: o.inlineSyncBelowMs,
      // The node's LOCK excludes every other opener (node.ts).
      ownerLocked: true,
      knownDurable: o.knownDurable,
    } as SegmentedLogOptions);
    try {
      const pending = await scan(log);
      const journal = new NodeJournal(
        dir,
        log,
        o.dropBeforeGroupSync === true,
        Math.min(o.maxEntryBytes, RECORD_BYTES),
        o.checkpointBytes ?? CHECKPOINT_BYTES,
        o.idleCheckpointMs ?? IDLE_CHECKPOINT_MS,
        o.clock ?? monotonicClock,
      );
      return { journal, pending };
    } catch (err) {
      await log.close().catch(() => undefined);
      throw err;
    }
  }

  /** Records the journal holds (staged or durable, not yet dropped by a checkpoint). */
  get heldRecords(): number {
    return this.#log.endIndex - this.#log.firstIndex;
  }

  /** The entries of the append record at journal index `at` (for replay). */
  async readAppend(at: number): Promise<Uint8Array[]> {
    const [rec] = await this.#log.read(at, 1);
    if (rec === undefined) throw corrupt(`node journal record ${at} cannot be read`, { record: at });
    return decodeJournalEntries(rec, at);
  }

  /**
   * Stages `member`'s append of `entries` (the first at Raft index `first`); answers the promise
   * of its durability. Throws (POISONED, CLOSED) when the journal takes no records.
   */
  append(member: JournalMember, key: Uint8Array, first: number, entries: readonly Uint8Array[]): Promise<void> {
    let bytes = 0;
    for (const e of entries) bytes += 4 + e.length;
    if (bytes <= this.#recordBytes) return this.#stage(member, encodeJournalAppend(key, first, entries));
    const staged: Promise<void>[] = [];
    for (let i = 0; i < entries.length; ) {
      let j = i;
      let size = 0;
      while (j < entries.length && (j === i || size + 4 + (entries[j] as Uint8Array).length <= this.#recordBytes)) size += 4 + (entries[j++] as Uint8Array).length;
      staged.push(this.#stage(member, encodeJournalAppend(key, first + i, entries.slice(i, j))));
      i = j;
    }
    return Promise.all(staged).then(() => undefined);
  }

  /** Stages `member`'s truncation at `index` (every entry from it on goes). */
  truncate(member: JournalMember, key: Uint8Array, index: number): Promise<void> {
    return this.#stage(member, encodeJournalTruncate(key, index));
  }

  #stage(member: JournalMember, rec: Uint8Array): Promise<void> {
    assert(!this.#closed, 'no record is staged after the journal closed');
    const { durable } = this.#log.stage([rec]);
    durable.catch(() => undefined);
    this.#lastDurable = durable;
    this.#dirty.add(member);
    this.#bytesSince += rec.length;
    if (this.#bytesSince >= this.#checkpointBytes) this.#start();
    else this.#armTimer();
    return durable;
  }

  /**
   * Stages the mark that every write `member` journaled so far is durable in its own log (the
   * group made sure of it first): replay ignores the group's records before it.
   */
  flushed(member: JournalMember, key: Uint8Array): Promise<void> {
    return this.#stage(member, encodeJournalFlushed(key));
  }

  /** A group issues a write now (whether or not it journals it). */
  noteActive(member: JournalMember): void {
    if (member !== this.#lastActive) {
      this.#prevActive = this.#lastActive;
      this.#prevActiveAt = this.#lastActiveAt;
      this.#lastActive = member;
    }
    this.#lastActiveAt = this.#clock.now();
  }

  /** Whether a group other than `member` issued a write in the last OTHERS_ACTIVE_MS. */
  othersActive(member: JournalMember): boolean {
    const since = this.#clock.now() - OTHERS_ACTIVE_MS;
    return (this.#lastActive !== null && this.#lastActive !== member && this.#lastActiveAt >= since) || (this.#prevActive !== null && this.#prevActive !== member && this.#prevActiveAt >= since);
  }

  /** Adds a group whose log recovery changed (replay) to the next checkpoint. */
  markDirty(member: JournalMember): void {
    this.#dirty.add(member);
  }

  #armTimer(): void {
    if (this.#timer !== null || this.#closed || this.#idleCheckpointMs === 0) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#start();
    }, this.#idleCheckpointMs);
    this.#timer.unref();
  }

  /** Starts a checkpoint now, or right after the one running. */
  #start(): void {
    if (this.#round !== null) {
      this.#again = true;
      return;
    }
    const round = this.#checkpoint();
    this.#round = round;
    void round
      .catch(() => undefined)
      .finally(() => {
        this.#round = null;
        if (this.#again && !this.#closed) {
          this.#again = false;
          this.#start();
        }
      });
  }

  /**
   * One checkpoint: every record staged before it starts is made durable in its group's files,
   * then dropped. Rejects (and sets the journal stuck) when a flush or a sync fails.
   */
  async #checkpoint(): Promise<void> {
    if (this.#stuck !== null) throw this.#stuck;
    const end = this.#log.endIndex;
    const members = [...this.#dirty];
    const durable = this.#lastDurable;
    this.#dirty = new Set();
    this.#bytesSince = 0;
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    if (end === this.#log.firstIndex && members.length === 0) return;
    try {
      // mistakes.dropBeforeGroupSync: the records go while the groups' files may not hold them.
      if (this.#dropBeforeGroupSync) await this.#log.dropBefore(end);
      // Every record before `end` durable in the journal: a group never syncs into its files a
      // write whose record a crash could still take away (a flushed group is never ahead of
      // what replay establishes: docs/raft-store.md).
      await durable;
      await flushMembers(members);
      await this.#log.dropBefore(end);
    } catch (err) {
      this.#stuck ??= err instanceof Error ? err : new Error(String(err));
      throw err;
    }
  }

  /** Runs a checkpoint now (after the one running, if any) and waits for it; rejects if it fails. */
  async checkpoint(): Promise<void> {
    while (this.#round !== null) await this.#round.catch(() => undefined);
    this.#start();
    await this.#round;
  }

  /**
   * Closes the journal. `drain`: every group closed with no failure (each close synced its log),
   * so the records it holds are in the groups' files: they are dropped first, and the next open
   * replays nothing. Otherwise they stay for the next open to replay.
   */
  async close(drain: boolean): Promise<void> {
    this.#closed = true;
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    while (this.#round !== null) await this.#round.catch(() => undefined);
    let failure: unknown = null;
    if (drain && this.#stuck === null) {
      try {
        await this.#lastDurable;
        this.#dirty.clear();
        await this.#log.dropBefore(this.#log.endIndex);
      } catch (err) {
        failure = err;
      }
    }
    await this.#log.close().catch((err: unknown) => {
      failure ??= err;
    });
    if (failure !== null) throw failure;
  }
}

/** Every record from the journal's first index on, grouped by group key, in journal order. */
async function scan(log: SegmentedLog): Promise<Map<string, JournalOp[]>> {
  const pending = new Map<string, JournalOp[]>();
  for (let at = log.firstIndex; at < log.endIndex; ) {
    const recs = await log.read(at, Math.min(SCAN_CHUNK_RECORDS, log.endIndex - at), SCAN_CHUNK_BYTES);
    if (recs.length === 0) throw corrupt(`node journal record ${at} cannot be read`, { record: at });
    for (const rec of recs) {
      const h = decodeJournalHeader(rec, at);
      let ops = pending.get(h.key);
      if (ops === undefined) pending.set(h.key, (ops = []));
      ops.push(
        h.kind === JOURNAL_APPEND ? { kind: 'append', at, first: h.index, count: h.count } : h.kind === JOURNAL_TRUNCATE ? { kind: 'truncate', at, index: h.index } : { kind: 'flushed', at },
      );
      at++;
    }
  }
  return pending;
}
