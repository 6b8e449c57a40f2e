// Raft node: one directory holding a node's payload store and the stores of every Raft group it
// is a member of, opened together and recovered in the order of docs/contracts/raft-store.md, section 6.
//
// Owns: `openRaftNode` (docs/contracts/raft-store.md, section 6), the group registry (`openGroup`), the node-wide
// index of payload digests named by live log records (the payload store's `isNamed` hook), the
// per-group recovery report, and the rebuild of payload references from the logs
// (`listPayloadReferences`, `rebuildPayloadReferences`, for `seglog verify`). Guarantees:
// - A group id never becomes a path as is: a group lives in `groups/<sha256(id)>/`, with its id
//   in a checksummed GROUP file. A new group is built under a temporary name and renamed into
//   place (then the directory synced): a crash leaves it whole or absent; open removes leftovers.
// - Open runs, for every group, in this order: (1) the vote and committed cells; (2) the log's
//   state, finishing a purge whose purged id was durable before its entries were dropped; (3) the
//   newest snapshot and the applied journal (applied position, membership, plugin state); (4)
//   reconciliation: committed entries after the applied position are replayed from the log into
//   the state machine, entries after the committed pointer are not applied; (5) every live log
//   record that names a payload is checked against the payload store: a missing payload fails the
//   open with CORRUPT naming the group, the log id and the digest.
// - One open node per directory (LOCK, try-locked: LOCKED otherwise).

import { lockDirectory } from '../fs/lock.js';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';

import { openCell, type Cell } from '../../cells/index.js';
import { openSegmentedLog, type FdCache, type SegmentedLog } from '../../segments/index.js';
import type { Clock } from '../clock.js';
import { closed, corrupt, fromIo, invalid } from '../errors.js';
import { realFs } from '../fs/real.js';
import type { FileHandle, FileSystem } from '../fs/types.js';
import { openPayloadStore, type FsPayloadStore } from '../payloads/index.js';
import { decodeEntry, decodeEntryLogId, decodeEntryNames, decodeOptionalLogId, decodeVote } from './codec.js';
import {
  COMMITTED_CELL,
  GROUPS_DIR,
  GROUP_FILE,
  GROUP_TEMP_PREFIX,
  LOG_DIR,
  NODE_LOCK,
  PAYLOADS_DIR,
  PURGED_CELL,
  SM_DIR,
  SNAPSHOTS_DIR,
  VOTE_CELL,
  encodeGroupFile,
  groupDirName,
  isGroupDirName,
  readGroupFile,
  removeTree,
  validateGroupId,
  writeFileDurably,
} from './fs-layout.js';
import { FS_DEFAULT_MAX_READ_BYTES, FS_DEFAULT_MAX_READ_ENTRIES, FsRaftLogStorage, type RaftMistakes } from './fs-log.js';
import { FsStateMachine, openFsStateMachine } from './fs-state-machine.js';
import { kvPlugin, type KvPlugin } from './kv.js';
import { GroupNames, PayloadNameIndex } from './payload-names.js';
import { RecordPool } from './record-pool.js';
import type { StateMachinePlugin, StateMachinePluginFactory } from './plugin.js';
import { cloneOptionalLogId, compareLogId, logIdEquals, nextIndex, type LogId, type Vote } from './types.js';

/** Default segment size of a group's Raft log. */
export const RAFT_DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024;
/** Default segment size of a group's applied journal. */
export const RAFT_DEFAULT_JOURNAL_SEGMENT_BYTES = 16 * 1024 * 1024;
/** Default largest encoded entry: a 64 MiB KV value plus room for its key and header. */
export const RAFT_DEFAULT_MAX_ENTRY_BYTES = 64 * 1024 * 1024 + 64 * 1024;

const RECOVERY_CHUNK_ENTRIES = 512;
const RECOVERY_CHUNK_BYTES = 8 * 1024 * 1024;

export interface RaftNodeOptions<P extends StateMachinePlugin<unknown> = KvPlugin> {
  /** The file-system layer (default: the real one). */
  fs?: FileSystem;
  /** Monotonic milliseconds for the payload store's grace period (default: the machine's clock). */
  clock?: Clock;
  /** The state-machine plugin of every group (default: the key-value plugin). */
  plugin?: StateMachinePluginFactory<P>;
  /** Segment size of each group's Raft log (default 64 MiB). */
  segmentBytes?: number;
  /** Segment size of each group's applied journal (default 16 MiB). */
  journalSegmentBytes?: number;
  /** Open-file cache shared by the segmented logs (default: the process-wide one). */
  fdCache?: FdCache;
  /** Cap on the entries of one `limitedGetLogEntries` (default 1024). */
  maxReadEntries?: number;
  /** Cap on the bytes of one `limitedGetLogEntries`, past its first entry (default 4 MiB). */
  maxReadBytes?: number;
  /** Largest encoded entry accepted (default 64 MiB + 64 KiB); larger is TOO_LARGE. */
  maxEntryBytes?: number;
  /** Options of the payload store (`openPayloadStore`): grace period and chunk size. */
  payloads?: { graceMs?: number; chunkBytes?: number };
  /**
   * A lone append's sync (the only write this thread's stores have in hand) waits on the calling
   * thread, blocking the event loop for the sync, while that log's recent syncs took less than
   * this on average (ms; default 1; 0: every sync and large write waits on libuv's pool); so does
   * the write of a lone group of appends of at most 4 MiB, while that log's group writes took
   * less. See `SegmentedLogOptions.inlineSyncBelowMs`.
   */
  inlineSyncBelowMs?: number;
}

/** One group of a node: its log store and its state machine. */
export interface RaftGroup<P extends StateMachinePlugin<unknown> = KvPlugin> {
  readonly id: string;
  readonly log: FsRaftLogStorage;
  readonly stateMachine: FsStateMachine<P>;
}

/** What opening a group found and did (recovery, docs/contracts/raft-store.md), for operators and tests. */
export interface GroupRecovery {
  group: string;
  vote: Vote | null;
  committed: LogId | null;
  lastPurgedLogId: LogId | null;
  lastLogId: LogId | null;
  /** The current snapshot's last log id (null: no snapshot, or one of nothing). */
  snapshotLastLogId: LogId | null;
  /** The applied position after reconciliation. */
  applied: LogId | null;
  /** A purge whose purged id was durable but whose entries were not yet dropped was finished. */
  finishedPurge: boolean;
  /** Committed entries re-applied from the log to the state machine. */
  replayed: number;
  /**
   * True when committed entries after the applied position are no longer in the log (purged):
   * the state machine can only catch up by a snapshot install, which the engine will do.
   */
  behindLog: boolean;
  /** Live log records that name payloads, and the distinct digests checked present. */
  namingRecords: number;
  payloadsChecked: number;
}

/** A node: its payload store and its groups. */
export interface RaftNode<P extends StateMachinePlugin<unknown> = KvPlugin> {
  readonly dir: string;
  readonly payloads: FsPayloadStore;
  /** The group's stores; creates the group when it does not exist. The same objects each time. */
  openGroup(id: string): Promise<RaftGroup<P>>;
  /** The ids of every group the node holds. */
  groupIds(): string[];
  /** What recovery found in each group opened at open (groups created later are not listed). */
  readonly recovery: ReadonlyMap<string, GroupRecovery>;
  /** True when a live (durable or staged) log record of any group names the digest. */
  isNamed(digest: string): boolean;
  /** Closes every group (pending flushes complete first), the payload store, and the lock. */
  close(): Promise<void>;
}

interface Settings<P extends StateMachinePlugin<unknown>> {
  fs: FileSystem;
  plugin: StateMachinePluginFactory<P>;
  segmentBytes: number;
  journalSegmentBytes: number;
  fdCache: FdCache | undefined;
  maxReadEntries: number;
  maxReadBytes: number;
  maxEntryBytes: number;
  inlineSyncBelowMs: number;
  mistakes: RaftMistakes | undefined;
}

function nonNegativeMs(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw invalid(`${what} must be a non-negative number`);
  return v;
}

function positiveInt(v: unknown, what: string, min = 1): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) throw invalid(`${what} must be an integer of at least ${min}`);
  return v;
}

/**
 * Opens (creating it when `dir` holds none) the node stored in `dir`: its payload store and every
 * group, each recovered in the contract's order (see the module header). Rejects with LOCKED when
 * the node is open elsewhere, CORRUPT when a store is damaged or a log record names a payload the
 * payload store does not hold, INVALID for bad options.
 */
export async function openRaftNode<P extends StateMachinePlugin<unknown> = KvPlugin>(dir: string, options: RaftNodeOptions<P> = {}): Promise<RaftNode<P>> {
  if (typeof dir !== 'string' || dir.length === 0) throw invalid('a raft node needs a directory');
  if (options.plugin !== undefined && typeof options.plugin !== 'function') throw invalid('options.plugin must be a plugin factory');
  const settings: Settings<P> = {
    fs: options.fs ?? realFs,
    plugin: options.plugin ?? (kvPlugin as unknown as StateMachinePluginFactory<P>),
    segmentBytes: positiveInt(options.segmentBytes ?? RAFT_DEFAULT_SEGMENT_BYTES, 'segmentBytes'),
    journalSegmentBytes: positiveInt(options.journalSegmentBytes ?? RAFT_DEFAULT_JOURNAL_SEGMENT_BYTES, 'journalSegmentBytes'),
    fdCache: options.fdCache,
    maxReadEntries: positiveInt(options.maxReadEntries ?? FS_DEFAULT_MAX_READ_ENTRIES, 'maxReadEntries'),
    maxReadBytes: positiveInt(options.maxReadBytes ?? FS_DEFAULT_MAX_READ_BYTES, 'maxReadBytes', 0),
    maxEntryBytes: positiveInt(options.maxEntryBytes ?? RAFT_DEFAULT_MAX_ENTRY_BYTES, 'maxEntryBytes'),
    inlineSyncBelowMs: nonNegativeMs(options.inlineSyncBelowMs ?? 1, 'inlineSyncBelowMs'),
    // Test-only planted mistakes (lib/crash/workloads/raft.ts); not part of the options' type.
    mistakes: (options as { mistakes?: RaftMistakes }).mistakes,
  };
  const fs = settings.fs;
  const created: string[] = [];
  try {
    for (let d = path.resolve(dir); (await fs.stat(d)) === null; d = path.dirname(d)) {
      created.push(d);
      if (path.dirname(d) === d) break;
    }
    await fs.mkdir(dir);
    // A directory this open made is an entry of its parent: durable only after the parent's sync.
    for (const d of created) await fs.syncDir(path.dirname(d));
  } catch (err) {
    throw fromIo(err, 'create node directory', dir);
  }
  const lock = await lockDirectory(fs, dir, NODE_LOCK);
  let node: Node<P> | null = null;
  try {
    const index = new PayloadNameIndex();
    const payloads = await openPayloadStore(path.join(dir, PAYLOADS_DIR), {
      fs,
      clock: options.clock,
      graceMs: options.payloads?.graceMs,
      chunkBytes: options.payloads?.chunkBytes,
      isNamed: (digest) => index.isNamed(digest),
    });
    node = new Node(dir, settings, lock, payloads, index);
    await node.recover();
    return node;
  } catch (err) {
    if (node !== null) await node.close().catch(() => undefined);
    else await lock.close().catch(() => undefined);
    throw err;
  }
}

class Node<P extends StateMachinePlugin<unknown>> implements RaftNode<P> {
  readonly dir: string;
  readonly payloads: FsPayloadStore;
  readonly recovery = new Map<string, GroupRecovery>();
  readonly #settings: Settings<P>;
  readonly #lock: FileHandle;
  readonly #index: PayloadNameIndex;
  readonly #groupsDir: string;
  readonly #groups = new Map<string, Promise<OpenGroup<P>>>();
  /** Buffers of large encoded records, shared by the groups (at most 32 MiB idle per node). */
  readonly #pool = new RecordPool();
  #closing: Promise<void> | null = null;

  constructor(dir: string, settings: Settings<P>, lock: FileHandle, payloads: FsPayloadStore, index: PayloadNameIndex) {
    this.dir = dir;
    this.#settings = settings;
    this.#lock = lock;
    this.payloads = payloads;
    this.#index = index;
    this.#groupsDir = path.join(dir, GROUPS_DIR);
  }

  isNamed(digest: string): boolean {
    return this.#index.isNamed(digest);
  }

  groupIds(): string[] {
    return [...this.#groups.keys()];
  }

  /** Opens every group under groups/, in the contract's recovery order each; removes unfinished creations. */
  async recover(): Promise<void> {
    const fs = this.#settings.fs;
    let names: string[];
    try {
      await fs.mkdir(this.#groupsDir);
      await fs.syncDir(this.dir);
      names = await fs.readdir(this.#groupsDir);
    } catch (err) {
      throw fromIo(err, 'open groups directory', this.#groupsDir);
    }
    for (const name of names.sort()) {
      const groupDir = path.join(this.#groupsDir, name);
      if (name.startsWith(GROUP_TEMP_PREFIX)) {
        // A creation that did not reach its rename: nothing in it was ever acknowledged.
        await removeTree(fs, groupDir);
        continue;
      }
      if (!isGroupDirName(name)) continue;
      const id = await readGroupFile(fs, groupDir);
      const opening = this.#openGroupDir(id, groupDir);
      this.#groups.set(id, opening);
      const group = await opening;
      this.recovery.set(id, group.recovery);
    }
  }

  openGroup(id: string): Promise<RaftGroup<P>> {
    try {
      validateGroupId(id);
      if (this.#closing !== null) throw closed(`raft node ${this.dir}`);
    } catch (err) {
      return Promise.reject(err);
    }
    let opening = this.#groups.get(id);
    if (opening === undefined) {
      opening = this.#createGroup(id);
      this.#groups.set(id, opening);
      opening.catch(() => {
        if (this.#groups.get(id) === opening) this.#groups.delete(id);
      });
    }
    return opening.then((g) => g.group);
  }

  /** Builds the group under a temporary name, then renames it into place (the commit point). */
  async #createGroup(id: string): Promise<OpenGroup<P>> {
    const fs = this.#settings.fs;
    const final = path.join(this.#groupsDir, groupDirName(id));
    if ((await fs.stat(final).catch((err: unknown) => Promise.reject(fromIo(err, 'stat', final)))) !== null) {
      throw corrupt(`group directory ${final} exists but was not recovered at open`, { group: id, path: final });
    }
    const temp = path.join(this.#groupsDir, `${GROUP_TEMP_PREFIX}${randomBytes(8).toString('hex')}`);
    try {
      await fs.mkdir(path.join(temp, SM_DIR, SNAPSHOTS_DIR));
      await writeFileDurably(fs, path.join(temp, GROUP_FILE), encodeGroupFile(id));
      await fs.syncDir(path.join(temp, SM_DIR));
      await fs.syncDir(temp);
      await fs.rename(temp, final);
      await fs.syncDir(this.#groupsDir);
    } catch (err) {
      await removeTree(fs, temp).catch(() => undefined);
      throw fromIo(err, 'create group', final);
    }
    return this.#openGroupDir(id, final);
  }

  /** Opens one group directory and recovers it (docs/contracts/raft-store.md, section 6, steps 1–5). */
  async #openGroupDir(id: string, groupDir: string): Promise<OpenGroup<P>> {
    const s = this.#settings;
    const fs = s.fs;
    const cells: Cell[] = [];
    let log: SegmentedLog | null = null;
    let sm: FsStateMachine<P> | null = null;
    const names = new GroupNames();
    try {
      // 1. The vote and the committed pointer.
      const voteCell = await openCell(path.join(groupDir, VOTE_CELL), { fs });
      cells.push(voteCell);
      const committedCell = await openCell(path.join(groupDir, COMMITTED_CELL), { fs });
      cells.push(committedCell);
      const voteBytes = await voteCell.read();
      const committedBytes = await committedCell.read();
      const vote = voteBytes === null ? null : decodeVote(voteBytes);
      const committed = committedBytes === null ? null : decodeOptionalLogId(committedBytes);

      // 2. The log's end and its purged prefix.
      const purgedCell = await openCell(path.join(groupDir, PURGED_CELL), { fs });
      cells.push(purgedCell);
      const purgedBytes = await purgedCell.read();
      const purged = purgedBytes === null ? null : decodeOptionalLogId(purgedBytes);
      log = await openSegmentedLog(path.join(groupDir, LOG_DIR), {
        fs,
        segmentBytes: s.segmentBytes,
        fdCache: s.fdCache,
        maxRecordBytes: s.maxEntryBytes,
        inlineSyncBelowMs: s.inlineSyncBelowMs,
      });
      const finishedPurge = await finishPurge(id, log, purged);
      const lo = Math.max(log.firstIndex, nextIndex(purged));
      let lastLogId = cloneOptionalLogId(purged);
      if (log.endIndex > lo) {
        const [rec] = await log.read(log.endIndex - 1, 1);
        lastLogId = decodeEntryLogId(rec as Uint8Array);
        if (lastLogId.index !== log.endIndex - 1) {
          throw corrupt(`raft group ${JSON.stringify(id)}: record ${log.endIndex - 1} holds the entry of index ${lastLogId.index}`, { group: id });
        }
      }

      // 3. The newest snapshot and the applied position.
      sm = await openFsStateMachine<P>({
        groupId: id,
        dir: path.join(groupDir, SM_DIR),
        fs,
        plugin: s.plugin,
        segmentBytes: s.journalSegmentBytes,
        fdCache: s.fdCache,
        maxRecordBytes: s.maxEntryBytes,
        inlineSyncBelowMs: s.inlineSyncBelowMs,
      });
      const snapshotLastLogId = sm.currentSnapshotMeta()?.lastLogId ?? null;

      // 4. Reconcile: committed entries after the applied position are replayed; entries after
      // the committed pointer are left alone (not applied, not treated as committed).
      let [applied] = await sm.appliedState();
      let replayed = 0;
      let behindLog = false;
      if (committed !== null && compareLogId(applied, committed) < 0 && nextIndex(applied) <= committed.index) {
        const from = nextIndex(applied);
        if (from < lo) {
          behindLog = true;
        } else {
          const stop = Math.min(committed.index + 1, log.endIndex);
          if (committed.index < log.endIndex) {
            const [rec] = await log.read(committed.index, 1);
            const atCommitted = decodeEntryLogId(rec as Uint8Array);
            if (!logIdEquals(atCommitted, committed)) {
              throw corrupt(
                `raft group ${JSON.stringify(id)}: the committed id (${fmt(committed)}) differs from the log's entry at its index (${fmt(atCommitted)})`,
                { group: id, committed: fmt(committed), logId: fmt(atCommitted) },
              );
            }
          }
          for (let at = from; at < stop; ) {
            const recs = await log.read(at, Math.min(stop - at, RECOVERY_CHUNK_ENTRIES), RECOVERY_CHUNK_BYTES);
            if (recs.length === 0) break;
            const entries = recs.map((r, k) => {
              const e = decodeEntry(r);
              if (e.logId.index !== at + k) throw corrupt(`raft group ${JSON.stringify(id)}: record ${at + k} holds the entry of index ${e.logId.index}`);
              return e;
            });
            await sm.apply(entries);
            replayed += entries.length;
            at += entries.length;
          }
          [applied] = await sm.appliedState();
        }
      }

      // 5. Every live record that names a payload: the payload must be present.
      const present = new Map<string, boolean>();
      let namingRecords = 0;
      for (let at = lo; at < log.endIndex; ) {
        const recs = await log.read(at, RECOVERY_CHUNK_ENTRIES, RECOVERY_CHUNK_BYTES);
        if (recs.length === 0) break;
        for (const rec of recs) {
          const { logId, digests } = decodeEntryNames(rec);
          if (digests.length > 0) {
            for (const digest of digests) {
              let ok = present.get(digest);
              if (ok === undefined) {
                ok = (await this.payloads.stat(digest)) !== null;
                present.set(digest, ok);
              }
              if (!ok) {
                throw corrupt(`raft group ${JSON.stringify(id)}: log entry ${fmt(logId)} names payload ${digest}, which the payload store does not hold`, {
                  group: id,
                  logId: fmt(logId),
                  index: logId.index,
                  term: logId.leaderId.term,
                  digest,
                });
              }
            }
            names.push(logId.index, digests);
            this.#index.add(digests);
            namingRecords++;
          }
        }
        at += recs.length;
      }

      const payloads = this.payloads;
      const logStore = new FsRaftLogStorage({
        groupId: id,
        log,
        voteCell,
        committedCell,
        purgedCell,
        vote,
        committed,
        purged,
        names,
        index: this.#index,
        payloadPresent: async (digest) => (await payloads.stat(digest)) !== null,
        maxReadEntries: s.maxReadEntries,
        maxReadBytes: s.maxReadBytes,
        maxRecordBytes: s.maxEntryBytes,
        pool: this.#pool,
        mistakes: s.mistakes,
      });
      const recovery: GroupRecovery = {
        group: id,
        vote,
        committed,
        lastPurgedLogId: cloneOptionalLogId(purged),
        lastLogId,
        snapshotLastLogId,
        applied,
        finishedPurge,
        replayed,
        behindLog,
        namingRecords,
        payloadsChecked: present.size,
      };
      return { group: { id, log: logStore, stateMachine: sm }, recovery };
    } catch (err) {
      for (const digests of names.takeAll()) this.#index.remove(digests);
      if (sm !== null) await sm.close().catch(() => undefined);
      if (log !== null) await log.close().catch(() => undefined);
      for (const c of cells) await c.close().catch(() => undefined);
      throw err;
    }
  }

  close(): Promise<void> {
    if (this.#closing === null) {
      this.#closing = (async () => {
        let failure: unknown = null;
        const keep = (err: unknown): void => {
          failure ??= err;
        };
        for (const opening of this.#groups.values()) {
          const g = await opening.catch(() => null);
          if (g === null) continue;
          await g.group.log.close().catch(keep);
          await g.group.stateMachine.close().catch(keep);
        }
        await this.payloads.close().catch(keep);
        await this.#lock.unlock().catch(() => undefined);
        await this.#lock.close().catch(() => undefined);
        if (failure !== null) throw failure;
      })();
    }
    return this.#closing;
  }
}

interface OpenGroup<P extends StateMachinePlugin<unknown>> {
  group: RaftGroup<P>;
  recovery: GroupRecovery;
}

function fmt(l: LogId): string {
  return `${l.leaderId.term}-${l.leaderId.nodeId}-${l.index}`;
}

/**
 * Finishes a purge whose purged id reached its cell before the crash but whose entries were not
 * yet dropped (the purged id is written first). Answers whether there was one. A log that starts
 * after the purged id + 1 has a hole no sequence of calls makes: CORRUPT.
 */
async function finishPurge(id: string, log: SegmentedLog, purged: LogId | null): Promise<boolean> {
  if (purged === null) return false;
  const next = purged.index + 1;
  if (log.endIndex <= log.firstIndex) {
    if (log.firstIndex === next) return false;
    await log.reset(next);
    return true;
  }
  if (log.firstIndex > next) {
    throw corrupt(`raft group ${JSON.stringify(id)}: the log starts at ${log.firstIndex}, after the purged index ${purged.index} + 1`, {
      group: id,
      first: log.firstIndex,
      purged: purged.index,
    });
  }
  if (log.firstIndex === next) return false;
  if (next >= log.endIndex) await log.reset(next);
  else await log.dropBefore(next);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Payload references from the logs (for `seglog verify`)

/** One live log record naming a payload. */
export interface PayloadReference {
  group: string;
  logId: LogId;
  digest: string;
}

/**
 * Every payload reference held by the logs of the node in `dir` (which must not be open: each
 * group's log is opened, and locked, for the scan): for each live record — after the purged id —
 * that names payloads, one reference per digest, group by group in index order. Streams: holds
 * one chunk of records at a time.
 */
export async function* listPayloadReferences(dir: string, options: { fs?: FileSystem; maxEntryBytes?: number } = {}): AsyncGenerator<PayloadReference> {
  const fs = options.fs ?? realFs;
  const groupsDir = path.join(dir, GROUPS_DIR);
  let names: string[];
  try {
    names = await fs.readdir(groupsDir);
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return;
    throw fromIo(err, 'list', groupsDir);
  }
  for (const name of names.sort()) {
    if (!isGroupDirName(name)) continue;
    const groupDir = path.join(groupsDir, name);
    const group = await readGroupFile(fs, groupDir);
    const cell = await openCell(path.join(groupDir, PURGED_CELL), { fs });
    let purged: LogId | null;
    try {
      const bytes = await cell.read();
      purged = bytes === null ? null : decodeOptionalLogId(bytes);
    } finally {
      await cell.close();
    }
    const log = await openSegmentedLog(path.join(groupDir, LOG_DIR), { fs, maxRecordBytes: options.maxEntryBytes ?? RAFT_DEFAULT_MAX_ENTRY_BYTES });
    try {
      for (let at = Math.max(log.firstIndex, nextIndex(purged)); at < log.endIndex; ) {
        const recs = await log.read(at, RECOVERY_CHUNK_ENTRIES, RECOVERY_CHUNK_BYTES);
        if (recs.length === 0) break;
        for (const rec of recs) {
          const { logId, digests } = decodeEntryNames(rec);
          for (const digest of digests) yield { group, logId, digest };
        }
        at += recs.length;
      }
    } finally {
      await log.close();
    }
  }
}

/**
 * The payload references of the node's logs, gathered by digest: what the payload store's
 * collector must keep (see {@link listPayloadReferences}; memory: one entry per reference).
 */
export async function rebuildPayloadReferences(dir: string, options: { fs?: FileSystem } = {}): Promise<Map<string, { group: string; logId: LogId }[]>> {
  const out = new Map<string, { group: string; logId: LogId }[]>();
  for await (const ref of listPayloadReferences(dir, options)) {
    let list = out.get(ref.digest);
    if (list === undefined) out.set(ref.digest, (list = []));
    list.push({ group: ref.group, logId: ref.logId });
  }
  return out;
}

/** The path of a group's directory under a node directory (for tools and tests). */
export function groupDirectory(nodeDir: string, id: string): string {
  validateGroupId(id);
  return path.join(nodeDir, GROUPS_DIR, groupDirName(id));
}
