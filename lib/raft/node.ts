// Raft node: one directory holding a node's payload store and the stores of every Raft group it
// is a member of, opened together, each group recovered in a consensus node's recovery order.
//
// Owns: `openRaftNode` (docs/contracts/raft-store.md, node recovery), the node and its group registry (`openGroup`,
// `groupIds`), the node-wide index of payload digests named by live log records (the payload
// store's `isNamed` hook), the node journal's lifetime (opened before the groups recover, their
// records handed to each group's replay, a checkpoint after recovery, drained at a clean close:
// node-journal.ts) and the per-group recovery report. Its rooms: node-options.ts (options
// and defaults), group-create.ts (a new group's directory), group-recovery.ts (opening one group:
// the five recovery steps, one function each), payload-references.ts (the offline scan of the
// references the logs hold, for `seglog verify`). Guarantees:
// - A group id never becomes a path as is: a group lives in `groups/<sha256(id)>/`, with its id
//   in a checksummed GROUP file. A new group is built under a temporary name and renamed into
//   place (then the directory synced): a crash leaves it whole or absent; open removes leftovers
//   (never through a symbolic link). A node or group directory that lost one of its defining
//   files or directories is CORRUPT naming it, never a store made again over the rest.
// - Open runs, for every group, in this order: (1) the vote and committed pointer (its state cell); (2) the log's
//   state, finishing a purge whose purged id was durable before its entries were dropped; (3) the
//   newest snapshot and the applied journal (applied position, membership, plugin state); (4)
//   reconciliation: committed entries after the applied position are replayed from the log into
//   the state machine, entries after the committed pointer are not applied; (5) every live log
//   record that names a payload is checked against the payload store: a missing payload fails the
//   open with CORRUPT naming the group, the log id and the digest.
// - One open node per directory (LOCK, try-locked: LOCKED otherwise).
// - A close with no failure leaves the clean-close mark (CLEAN), after every sync of the close;
//   the next open unlinks it first, and while it found one, opens every file without the syncs
//   of what it reads (nothing was written since everything was durable).

import { lockDirectory } from '../fs/lock.js';
import { makeDirectories } from '../fs/make-dirs.js';
import { listEntries, ownEntry } from '../fs/own-entry.js';
import * as path from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';

import { closed, corrupt, fromIo } from '../errors.js';
import type { DirEntry, FileHandle, FileSystem } from '../fs/types.js';
import { openPayloadStore, type FsPayloadStore, type PayloadStoreOptions } from '../payloads/index.js';
import { CLEAN_MARK, GROUPS_DIR, GROUP_TEMP_PREFIX, NODE_JOURNAL_DIR, NODE_LOCK, PAYLOADS_DIR, groupDirName, isGroupDirName, readGroupFile, removeTree, validateGroupId } from './fs-layout.js';
import { NodeJournal, type JournalOp } from './node-journal.js';
import { createGroupDir } from './group-create.js';
import { recoverGroup, type GroupRecovery, type NodeParts, type OpenGroup, type RaftGroup } from './group-recovery.js';
import type { KvPlugin } from './kv.js';
import { parseNodeOptions, type NodeSettings, type RaftNodeOptions } from './node-options.js';
import { PayloadNameIndex } from './payload-names.js';
import { RecordPool } from './record-pool.js';
import type { StateMachinePlugin } from './plugin.js';

export { RAFT_DEFAULT_SEGMENT_BYTES, RAFT_DEFAULT_JOURNAL_SEGMENT_BYTES, RAFT_DEFAULT_MAX_ENTRY_BYTES, type RaftNodeOptions } from './node-options.js';
export type { GroupRecovery, RaftGroup } from './group-recovery.js';
export { listPayloadReferences, rebuildPayloadReferences, type PayloadReference } from './payload-references.js';

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

/**
 * Opens (creating it when `dir` holds none) the node stored in `dir`: its payload store and every
 * group, each recovered in order (see the module header). Rejects with LOCKED when the node is
 * open elsewhere, CORRUPT when a store is damaged or a log record names a payload the payload
 * store does not hold, INVALID for bad options.
 */
export async function openRaftNode<P extends StateMachinePlugin<unknown> = KvPlugin>(dir: string, options: RaftNodeOptions<P> = {}): Promise<RaftNode<P>> {
  const settings = parseNodeOptions(dir, options);
  const fs = settings.fs;
  // One turn of the event loop first: an open after a clean close may make every file-system
  // call on the calling thread (lib/fs/real.ts), and a loop of opens would never let I/O run.
  await nextTurn();
  try {
    const created = await makeDirectories(fs, dir);
    // A directory this open made is an entry of its parent: durable only after the parent's sync.
    for (const d of created) await fs.syncDir(path.dirname(d));
  } catch (err) {
    throw fromIo(err, 'create node directory', dir);
  }
  const lock = await lockDirectory(fs, dir, NODE_LOCK);
  let node: Node<P> | null = null;
  let journalOpened: NodeJournal | null = null;
  try {
    const index = new PayloadNameIndex();
    const knownDurable = await takeCleanMark(fs, dir, settings.mistakes?.keepCleanMark === true);
    await prepareNodeLayout(fs, dir);
    // Opened (made, for a new node) before any group can be: a node that holds groups holds its journal.
    await checkJournalPresent(fs, dir, knownDurable);
    const { journal, pending } = await NodeJournal.open(dir, {
      fs,
      fdCache: settings.fdCache,
      inlineSyncBelowMs: settings.inlineSyncBelowMs,
      maxEntryBytes: settings.maxEntryBytes,
      knownDurable,
      dropBeforeGroupSync: settings.mistakes?.dropJournalBeforeGroupSync === true,
      ...(settings.journalCheckpointBytes !== undefined ? { checkpointBytes: settings.journalCheckpointBytes } : {}),
      ...(settings.journalIdleCheckpointMs !== undefined ? { idleCheckpointMs: settings.journalIdleCheckpointMs } : {}),
      ...(options.clock !== undefined ? { clock: options.clock } : {}),
    });
    journalOpened = journal;
    const payloads = await openPayloadStore(path.join(dir, PAYLOADS_DIR), {
      fs,
      clock: options.clock,
      graceMs: options.payloads?.graceMs,
      chunkBytes: options.payloads?.chunkBytes,
      verifyDigestOnGet: options.payloads?.verifyDigestOnGet,
      isNamed: (digest) => index.isNamed(digest),
      ...(knownDurable ? { knownDurable: true } : {}),
    } as PayloadStoreOptions);
    node = new Node(dir, settings, lock, payloads, index, knownDurable, journal);
    await node.recover(pending);
    return node;
  } catch (err) {
    if (node !== null) await node.close().catch(() => undefined);
    else {
      await journalOpened?.close(false).catch(() => undefined);
      await lock.close().catch(() => undefined);
    }
    throw err;
  }
}

/**
 * Consumes the mark of the last session's clean close (fs-layout.ts CLEAN_MARK): answers whether
 * it was there, so that every file of the node is known durable. It is unlinked before anything
 * else is read or written, so that any later change of this session — and a kill in it — leaves
 * no mark behind: the next open then syncs what it reads, as after any crash. The unlink needs no
 * directory sync: within one boot every later open sees it; after a power loss that undoes it,
 * what an open reads is what the disk holds, durable by definition (docs/raft-store.md, "Clean
 * close"). `keep`: the planted mistake of leaving the mark.
 */
async function takeCleanMark(fs: FileSystem, dir: string, keep: boolean): Promise<boolean> {
  const mark = path.join(dir, CLEAN_MARK);
  try {
    if (keep) return (await fs.stat(mark)) !== null; // mistakes.keepCleanMark
    await fs.unlink(mark);
    return true;
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return false;
    throw fromIo(err, 'remove the clean-close mark', mark);
  }
}

/**
 * A node that holds a group holds its journal (made at the open that made `groups/`, before any
 * group): one without it lost the only durable copy of its groups' latest writes — CORRUPT, never
 * a journal made again empty — unless the last close was clean (every group's files durable: what
 * an earlier version of this store, which had no journal, leaves; the journal is then made).
 */
async function checkJournalPresent(fs: FileSystem, dir: string, knownDurable: boolean): Promise<void> {
  const journalDir = path.join(dir, NODE_JOURNAL_DIR);
  const journal = await ownEntry(fs, journalDir, 'raft node journal');
  if (journal !== null) {
    if (!journal.isDirectory) throw corrupt(`raft node ${dir}: ${NODE_JOURNAL_DIR} is not a directory`, { path: journalDir });
    return;
  }
  if (knownDurable) return;
  let names: string[];
  try {
    names = await fs.readdir(path.join(dir, GROUPS_DIR));
  } catch (err) {
    throw fromIo(err, 'list', path.join(dir, GROUPS_DIR));
  }
  if (names.some((n) => isGroupDirName(n))) {
    throw corrupt(`raft node ${dir} holds ${GROUPS_DIR}/ but no ${NODE_JOURNAL_DIR}/ (and was not closed cleanly): its groups' latest writes are lost`, { path: journalDir });
  }
}

/**
 * Creates the clean-close mark (no sync: see takeCleanMark). Called once every group and the
 * payload store closed with no failure, every sync of theirs done.
 */
async function putCleanMark(fs: FileSystem, dir: string): Promise<void> {
  const h = await fs.open(path.join(dir, CLEAN_MARK), 'create');
  await h.close();
}

/**
 * The node's own directories, checked before anything in them is opened: `groups/` is made
 * (and the node directory synced) before the payload store, so a node directory that holds a
 * payload store but no `groups/`, or groups but no payload store, lost a defining directory:
 * CORRUPT naming it (never a new, empty node over what is left). Neither may be a link.
 */
async function prepareNodeLayout(fs: FileSystem, dir: string): Promise<void> {
  const groupsDir = path.join(dir, GROUPS_DIR);
  const payloadsDir = path.join(dir, PAYLOADS_DIR);
  const groups = await ownEntry(fs, groupsDir, 'raft node groups directory');
  const payloads = await ownEntry(fs, payloadsDir, 'raft node payload store directory');
  if (groups === null) {
    if (payloads !== null) throw corrupt(`raft node ${dir} holds a payload store but no ${GROUPS_DIR}/ directory`, { path: groupsDir });
    try {
      await fs.mkdir(groupsDir);
      await fs.syncDir(dir);
    } catch (err) {
      throw fromIo(err, 'create groups directory', groupsDir);
    }
    return;
  }
  if (!groups.isDirectory) throw corrupt(`raft node ${dir}: ${GROUPS_DIR} is not a directory`, { path: groupsDir });
  if (payloads !== null) return;
  let names: string[];
  try {
    names = await fs.readdir(groupsDir);
  } catch (err) {
    throw fromIo(err, 'list', groupsDir);
  }
  if (names.some((n) => isGroupDirName(n))) throw corrupt(`raft node ${dir} holds groups but no ${PAYLOADS_DIR}/ payload store`, { path: payloadsDir });
}

/**
 * Groups recovered at once by a node's open: enough to keep the libuv pool and the disk busy
 * with the small reads and syncs of a group's open, few enough that a thousand groups do not
 * queue a thousand opens (each holds a few descriptors only while it runs).
 */
const RECOVERY_CONCURRENCY = 16;

class Node<P extends StateMachinePlugin<unknown>> implements RaftNode<P> {
  readonly dir: string;
  readonly payloads: FsPayloadStore;
  readonly recovery = new Map<string, GroupRecovery>();
  readonly #settings: NodeSettings<P>;
  readonly #lock: FileHandle;
  readonly #index: PayloadNameIndex;
  readonly #groupsDir: string;
  readonly #groups = new Map<string, Promise<OpenGroup<P>>>();
  /** What a group's open borrows from the node (its settings, payload store, index and pool). */
  readonly #parts: NodeParts<P>;
  readonly #journal: NodeJournal;
  #closing: Promise<void> | null = null;
  /** Every group's recovery succeeded (a node whose open failed never marks its close clean). */
  #recovered = false;

  constructor(dir: string, settings: NodeSettings<P>, lock: FileHandle, payloads: FsPayloadStore, index: PayloadNameIndex, knownDurable: boolean, journal: NodeJournal) {
    this.dir = dir;
    this.#settings = settings;
    this.#lock = lock;
    this.payloads = payloads;
    this.#index = index;
    this.#groupsDir = path.join(dir, GROUPS_DIR);
    // Buffers of large encoded records, shared by the groups (at most 32 MiB idle per node).
    this.#journal = journal;
    this.#parts = { settings, payloads, index, pool: new RecordPool(), knownDurable, journal };
  }

  isNamed(digest: string): boolean {
    return this.#index.isNamed(digest);
  }

  groupIds(): string[] {
    return [...this.#groups.keys()];
  }

  /**
   * Opens every group under groups/, each recovered in order; removes unfinished creations.
   * Groups share nothing a recovery writes but the node's index of named digests (counts, in any
   * order), so up to RECOVERY_CONCURRENCY of them recover at once, each through its five steps in
   * order; the registry and `recovery` list them in directory-name order all the same. The first
   * failure stops the others from starting; the open fails with it, and node.close() closes every
   * group that did open. `pending`: each group's writes the node journal holds (by directory
   * name), replayed in its step 2; a checkpoint then makes them durable in the groups' files.
   */
  async recover(pending: Map<string, JournalOp[]>): Promise<void> {
    const fs = this.#settings.fs;
    let entries: DirEntry[];
    try {
      // With their kinds, in one listing: no lstat per group to tell a link.
      entries = await listEntries(fs, this.#groupsDir);
    } catch (err) {
      throw fromIo(err, 'open groups directory', this.#groupsDir);
    }
    const groupNames: string[] = [];
    for (const { name, kind } of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const groupDir = path.join(this.#groupsDir, name);
      // Never through a link: a group directory or a leftover is this node's own, or damage.
      if (kind === 'symlink') {
        throw corrupt(`raft group directory ${groupDir} is a symbolic link: a store never writes one, and never follows or removes one`, { path: groupDir });
      }
      if (name.startsWith(GROUP_TEMP_PREFIX)) {
        // A creation that did not reach its rename: nothing in it was ever acknowledged.
        await removeTree(fs, groupDir);
        continue;
      }
      if (isGroupDirName(name)) groupNames.push(name);
    }
    const opened: (readonly [string, Promise<OpenGroup<P>>] | undefined)[] = new Array(groupNames.length);
    let next = 0;
    let failed = false;
    const worker = async (): Promise<void> => {
      while (!failed && next < groupNames.length) {
        const at = next++;
        const groupDir = path.join(this.#groupsDir, groupNames[at] as string);
        try {
          const file = await readGroupFile(fs, groupDir);
          const id = file.id;
          const opening = recoverGroup(this.#parts, file, groupDir, pending.get(groupNames[at] as string));
          opened[at] = [id, opening];
          await opening;
        } catch (err) {
          failed = true;
          throw err;
        }
      }
    };
    const workers = Array.from({ length: Math.min(RECOVERY_CONCURRENCY, groupNames.length) }, worker);
    const settled = await Promise.allSettled(workers);
    // In directory-name order, whether or not the open failed (close() closes what is listed).
    for (const entry of opened) if (entry !== undefined) this.#groups.set(entry[0], entry[1]);
    const failure = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failure !== undefined) throw failure.reason;
    const known = new Set(groupNames);
    for (const key of pending.keys()) {
      // A group's directory is made (and renamed into place) before its first write is issued.
      if (!known.has(key)) throw corrupt(`raft node ${this.dir}: the node journal holds writes of group ${key}, which has no directory`, { group: key });
    }
    for (const [id, opening] of this.#groups) {
      const g = await opening;
      this.recovery.set(id, g.recovery);
      // What replay kept or staged may be in the page cache only: a checkpoint syncs it before the records go.
      if (g.recovery.journalOps > 0) this.#journal.markDirty(g.group.log);
    }
    if (this.#journal.heldRecords > 0) await this.#journal.checkpoint();
    this.#recovered = true;
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

  /** Builds the group's directory (committed by a rename), then opens it. */
  async #createGroup(id: string): Promise<OpenGroup<P>> {
    const groupDir = await createGroupDir(this.#settings, this.#groupsDir, id);
    // Every file and directory of the new group was synced before its rename, and the rename
    // before this: its open need not sync what it reads.
    return recoverGroup({ ...this.#parts, knownDurable: true }, { id, version: 2, stateMachineMade: false, stateCell: true }, groupDir);
  }

  close(): Promise<void> {
    if (this.#closing === null) {
      this.#closing = (async () => {
        let failure: unknown = null;
        const keep = (err: unknown): void => {
          failure ??= err;
        };
        // Clean: the open recovered every group, and nothing of this session failed a write or
        // a sync (a poisoned store closes quietly; its files may not be durable).
        let clean = this.#recovered;
        for (const opening of this.#groups.values()) {
          const g = await opening.catch(() => null);
          if (g === null) {
            clean = false;
            continue;
          }
          await g.group.log.close().catch(keep);
          await g.group.stateMachine.close().catch(keep);
          if (g.group.log.isPoisoned || g.group.stateMachine.isPoisoned) clean = false;
        }
        // Every group closed with no failure: each close synced its log, so the journal's records can go.
        await this.#journal.close(clean && failure === null).catch((err: unknown) => {
          keep(err);
          clean = false;
        });
        await this.payloads.close().catch(keep);
        if (clean && failure === null && this.payloads.closedClean) {
          // After every sync of this close: the next open need not sync what it reads.
          await putCleanMark(this.#settings.fs, this.dir).catch(() => undefined);
        }
        await this.#lock.unlock().catch(() => undefined);
        await this.#lock.close().catch(() => undefined);
        if (failure !== null) throw failure;
      })();
    }
    return this.#closing;
  }
}

/** The path of a group's directory under a node directory (for tools and tests). */
export function groupDirectory(nodeDir: string, id: string): string {
  validateGroupId(id);
  return path.join(nodeDir, GROUPS_DIR, groupDirName(id));
}
