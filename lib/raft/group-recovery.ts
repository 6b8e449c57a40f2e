// Opening one group of a Raft node: its stores, recovered in the order a consensus node's store
// must establish its state after a crash, one named function per step.
//
// Owns: `recoverGroup` and its five steps — `readSmallState` (1), `readLogState` (2, which
// finishes a purge whose purged id was durable before its entries were dropped),
// `loadStateMachine` (3), `reconcile` (4) and `verifyPayloadReferences` (5) — the `RaftGroup` and
// `GroupRecovery` shapes; step 5 reads the group's payload references from group-references.ts
// (its reference checkpoint, and the log past it). Guarantees:
// - each step runs only after the one before it succeeded, and sees its result;
// - after step 4 the state machine has applied exactly the committed entries the log still
//   holds (entries after the committed pointer are not applied); when the ones it needs were
//   purged, `behindLog` says a snapshot install must catch it up;
// - step 5 reads only the records past a believed reference checkpoint (all of them otherwise),
//   and fails the open with CORRUPT naming the group, the log id and the digest when a live
//   record names a payload the payload store does not hold, and counts every naming record in
//   the node's index of named digests;
// - a failed open closes whatever it opened and takes its names out of the index again.

import * as path from 'node:path';
import type { Cell, CellOptions } from '../../cells/index.js';
import { openSegmentedLog, type SegmentedLog, type SegmentedLogOptions } from '../../segments/index.js';
import { SeglogError, corrupt, fromIo } from '../errors.js';
import type { FsPayloadStore } from '../payloads/index.js';
import { decodeEntry, decodeEntryLogId, decodeOptionalLogId, decodeVote } from './codec.js';
import {
  COMMITTED_CELL,
  GROUP_CELL_OPTIONS,
  GROUP_MANIFEST_SLOT_BYTES,
  GROUP_STATE_MACHINE_MADE,
  LOG_DIR,
  PURGED_CELL,
  SM_DIR,
  STATE_CELL,
  VOTE_CELL,
  groupFlagsOf,
  rewriteGroupFile,
  type GroupFile,
} from './fs-layout.js';
import { NO_VOTE, STATE_MACHINE_FILES, groupDefiningFiles } from './group-create.js';
import { openGroupState } from './group-state.js';
import { listEntries, ownEntry } from '../fs/own-entry.js';
import type { DirEntry, FileSystem } from '../fs/types.js';
import { FsRaftLogStorage, JOURNALED_LOG_SYNC } from './fs-log.js';
import { replayJournal } from './journal-replay.js';
import type { JournalOp, NodeJournal } from './node-journal.js';
import { FsStateMachine, openFsStateMachine } from './fs-state-machine.js';
import type { KvPlugin } from './kv.js';
import type { NodeSettings } from './node-options.js';
import { namingRecordsOf, planGroupReferences, readRecordLogId, replaceStaleCheckpoint, type CheckpointUse, type ReferencePlan } from './group-references.js';
import { GroupNames, type PayloadNameIndex } from './payload-names.js';
import { REFS_FILE, ReferenceCheckpointer } from './reference-checkpoint.js';
import type { StateMachinePlugin } from './plugin.js';
import type { RecordPool } from './record-pool.js';
import { cloneOptionalLogId, compareLogId, logIdEquals, nextIndex, type LogId, type Vote } from './types.js';

export { liveRecordChunks } from './group-references.js';

const RECOVERY_CHUNK_ENTRIES = 512;
const RECOVERY_CHUNK_BYTES = 8 * 1024 * 1024;

/** One group of a node: its log store and its state machine. */
export interface RaftGroup<P extends StateMachinePlugin<unknown> = KvPlugin> {
  readonly id: string;
  readonly log: FsRaftLogStorage;
  readonly stateMachine: FsStateMachine<P>;
}

/** What opening a group found and did (the five recovery steps), for operators and tests. */
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
  /**
   * Where step 5 found the naming records: `used` — the group's reference checkpoint, and a scan
   * of the records past it; `absent`, `damaged`, `stale` — a scan of the whole live log (the
   * checkpoint was missing, failed its checks, or did not match the log; the last two replaced).
   */
  referenceCheckpoint: CheckpointUse;
  /** Log records step 5 read (the rest came from the checkpoint). */
  recordsScanned: number;
  /** Step 2: the group's writes the node journal held (replayed against its log), and the entries that took. */
  journalOps: number;
  journalEntriesStaged: number;
}

/** A group opened and recovered. */
export interface OpenGroup<P extends StateMachinePlugin<unknown>> {
  group: RaftGroup<P>;
  recovery: GroupRecovery;
}

/** What the node lends a group's open. */
export interface NodeParts<P extends StateMachinePlugin<unknown>> {
  settings: NodeSettings<P>;
  payloads: FsPayloadStore;
  /** The node-wide index of digests named by live records. */
  index: PayloadNameIndex;
  pool: RecordPool;
  /** Every file of the node is durable (the last close was clean, node.ts): open syncs nothing it reads. */
  knownDurable: boolean;
  /** The node journal (node-journal.ts). */
  journal: NodeJournal;
}

/** What a group's open has opened so far: closed again when a later step fails. */
interface Opened<P extends StateMachinePlugin<unknown>> {
  cells: Cell[];
  log: SegmentedLog | null;
  sm: FsStateMachine<P> | null;
  names: GroupNames;
}

/** What the first three steps of a group's recovery share: the node's settings, the group, and what it has opened so far (closed again if a later step fails). */
interface Recovering<P extends StateMachinePlugin<unknown>> {
  s: NodeSettings<P>;
  /** The cell options of the group's cells (KnownDurable when the node's files are). */
  cells: CellOptions;
  knownDurable: boolean;
  id: string;
  /** The group's GROUP file as read (or as its creation wrote it). */
  file: GroupFile;
  groupDir: string;
  /** The group directory's entries as its open listed them (checkDefiningFiles). */
  top: ReadonlyMap<string, DirEntry['kind']>;
  opened: Opened<P>;
  journal: NodeJournal;
  /** The group's writes the node journal still holds, in call order. */
  journalOps: readonly JournalOp[];
}

/**
 * Opens the group stored in `groupDir` (its GROUP file says `file`) and recovers it (steps 1–5,
 * in order); `journalOps`: its writes the node journal still holds (replayed in step 2).
 */
export async function recoverGroup<P extends StateMachinePlugin<unknown>>(
  node: NodeParts<P>,
  file: GroupFile,
  groupDir: string,
  journalOps: readonly JournalOp[] = [],
): Promise<OpenGroup<P>> {
  const s = node.settings;
  const id = file.id;
  const opened: Opened<P> = { cells: [], log: null, sm: null, names: new GroupNames() };
  try {
    const top = await checkDefiningFiles(s.fs, id, groupDir, file);
    const g: Recovering<P> = {
      s,
      cells: { fs: s.fs, ...GROUP_CELL_OPTIONS, ...(node.knownDurable ? { knownDurable: true } : {}) },
      knownDurable: node.knownDurable,
      id,
      file,
      groupDir,
      top,
      opened,
      journal: node.journal,
      journalOps,
    };
    const small = await readSmallState(g);
    const { vote, committed } = small;
    const logState = await readLogState(g, small.purged);
    const log = logState.log;
    const { sm, snapshotLastLogId } = await loadStateMachine(g);
    const { applied, replayed, behindLog } = await reconcile(id, log, sm, committed, logState.lo, logState.lastLogId);
    const checked = await verifyPayloadReferences(node, id, groupDir, log, logState.lo, logState.lastLogId, opened.names, top.has(REFS_FILE));

    const payloads = node.payloads;
    const logStore = new FsRaftLogStorage({
      groupId: id,
      log,
      voteCell: small.cells.vote,
      committedCell: small.cells.committed,
      purgedCell: small.cells.purged,
      vote,
      committed,
      purged: logState.purged,
      names: opened.names,
      index: node.index,
      payloadPresent: async (digest) => (await payloads.stat(digest)) !== null,
      maxReadEntries: s.maxReadEntries,
      maxReadBytes: s.maxReadBytes,
      maxRecordBytes: s.maxEntryBytes,
      pool: node.pool,
      mistakes: s.mistakes,
      references: new ReferenceCheckpointer(s.fs, groupDir, s.segmentBytes, checked.plan.durable, {
        skipLowering: s.mistakes?.truncateKeepsCheckpoint === true,
        uncoveredBytes: checked.plan.scannedBytes,
        ...(s.referenceScanAllowanceBytes !== undefined ? { scanAllowance: s.referenceScanAllowanceBytes } : {}),
      }),
      journal: node.journal,
      journalKey: Buffer.from(path.basename(groupDir), 'hex'),
      ...(s.journalMode !== undefined ? { journalMode: s.journalMode } : {}),
    });
    const recovery: GroupRecovery = {
      group: id,
      vote,
      committed,
      lastPurgedLogId: cloneOptionalLogId(logState.purged),
      lastLogId: logState.lastLogId,
      snapshotLastLogId,
      applied,
      finishedPurge: logState.finishedPurge,
      replayed,
      behindLog,
      namingRecords: checked.namingRecords,
      payloadsChecked: checked.payloadsChecked,
      referenceCheckpoint: checked.plan.checkpoint,
      recordsScanned: checked.plan.scanned,
      journalOps: journalOps.length,
      journalEntriesStaged: logState.journalEntriesStaged,
    };
    return { group: { id, log: logStore, stateMachine: sm }, recovery };
  } catch (err) {
    for (const digests of opened.names.takeAll()) node.index.remove(digests);
    if (opened.sm !== null) await opened.sm.close().catch(() => undefined);
    if (opened.log !== null) await opened.log.close().catch(() => undefined);
    for (const c of opened.cells) await c.close().catch(() => undefined);
    throw err;
  }
}

/**
 * Before step 1: every file a group holds from its creation on (group-create.ts, for the layout
 * its GROUP file names) must be there, as itself (not a link), and its state machine's files once
 * its GROUP file says they were made.
 * A missing one was lost, and opening on would create it again empty — a log without its
 * entries, a vote or a purged id gone back, a state machine gone back to nothing: CORRUPT naming it.
 */
async function checkDefiningFiles(fs: FileSystem, id: string, groupDir: string, file: GroupFile): Promise<ReadonlyMap<string, DirEntry['kind']>> {
  // The group directory's own entries in one listing (with their kinds: a link is never
  // followed); the deeper ones one lstat each.
  let top: Map<string, DirEntry['kind']>;
  try {
    top = new Map((await listEntries(fs, groupDir)).map((e) => [e.name, e.kind]));
  } catch (err) {
    throw fromIo(err, 'list', groupDir);
  }
  const what = `raft group ${JSON.stringify(id)}:`;
  const linked = (file: string): SeglogError => corrupt(`${what} ${file} is a symbolic link: a store never writes one, and never follows or removes one`, { path: file });
  if (top.get(SM_DIR) === 'symlink') throw linked(path.join(groupDir, SM_DIR));
  const defining = groupDefiningFiles(file.stateCell);
  for (const name of file.stateMachineMade ? [...defining, ...STATE_MACHINE_FILES] : defining) {
    const entry = path.join(groupDir, name);
    let present: boolean;
    if (name.includes(path.sep)) {
      present = (await ownEntry(fs, entry, what)) !== null;
    } else {
      const kind = top.get(name);
      if (kind === 'symlink') throw linked(entry);
      present = kind !== undefined;
    }
    if (!present) {
      const since = defining.includes(name) ? 'every group holds it from its creation on' : 'its GROUP file says the state machine files were made';
      throw corrupt(`raft group ${JSON.stringify(id)}: ${entry} is missing (${since})`, { group: id, path: entry });
    }
  }
  return top;
}

/**
 * Step 1: the vote and the committed pointer, read with the purged id beside them (one state
 * cell, or the three cells of a group an earlier version made: group-state.ts); the purged id is
 * step 2's.
 */
async function readSmallState<P extends StateMachinePlugin<unknown>>(
  g: Recovering<P>,
): Promise<{ cells: { vote: Cell; committed: Cell; purged: Cell }; vote: Vote | null; committed: LogId | null; purged: LogId | null }> {
  const state = await openGroupState(g.groupDir, g.id, g.file.stateCell, g.cells);
  g.opened.cells.push(...state.opened);
  const { values } = state;
  // A document that passed its cell's checks but does not decode: CORRUPT naming the file it is in.
  const decoded = <T>(cell: string, what: string, decode: () => T): T => {
    try {
      return decode();
    } catch (err) {
      const file = path.join(g.groupDir, g.file.stateCell ? STATE_CELL : cell);
      throw corrupt(`raft group ${JSON.stringify(g.id)}: the ${what} in ${file} does not decode: ${(err as Error).message}`, { group: g.id, path: file });
    }
  };
  const vote = decoded(VOTE_CELL, 'vote', () => (values.vote.length === NO_VOTE.length ? null : decodeVote(values.vote)));
  const committed = decoded(COMMITTED_CELL, 'committed id', () => decodeOptionalLogId(values.committed));
  const purged = decoded(PURGED_CELL, 'purged id', () => decodeOptionalLogId(values.purged));
  return { cells: state, vote, committed, purged };
}

/**
 * Step 2: the log's end and its purged prefix. Finishes an interrupted purge, replays what the
 * node journal holds of the group (journal-replay.ts); answers the first live index (`lo`, just
 * after the purged id) and the last entry's id.
 */
async function readLogState<P extends StateMachinePlugin<unknown>>(
  g: Recovering<P>,
  purged: LogId | null,
): Promise<{ purged: LogId | null; log: SegmentedLog; finishedPurge: boolean; lo: number; lastLogId: LogId | null; journalEntriesStaged: number }> {
  const { s, id, groupDir, opened } = g;
  const log = await openSegmentedLog(path.join(groupDir, LOG_DIR), {
    fs: s.fs,
    segmentBytes: s.segmentBytes,
    fdCache: s.fdCache,
    maxRecordBytes: s.maxEntryBytes,
    inlineSyncBelowMs: s.inlineSyncBelowMs,
    // A group starts journaling its writes (fs-log.ts switches it when it writes alone).
    sync: JOURNALED_LOG_SYNC,
    // The node's LOCK excludes every other opener (node.ts): the log takes no lock of its own.
    ownerLocked: true,
    knownDurable: g.knownDurable,
    manifestSlotBytes: GROUP_MANIFEST_SLOT_BYTES,
  } as SegmentedLogOptions);
  opened.log = log;
  const finishedPurge = await finishPurge(id, log, purged);
  const replayed = await replayJournal(id, log, purged, g.journalOps, g.journal);
  const lo = Math.max(log.firstIndex, nextIndex(purged));
  let lastLogId = cloneOptionalLogId(purged);
  if (log.endIndex > lo) {
    const [rec] = await log.read(log.endIndex - 1, 1);
    lastLogId = decodeEntryLogId(rec as Uint8Array);
    if (lastLogId.index !== log.endIndex - 1) {
      throw corrupt(`raft group ${JSON.stringify(id)}: record ${log.endIndex - 1} holds the entry of index ${lastLogId.index}`, { group: id });
    }
  }
  return { purged, log, finishedPurge, lo, lastLogId, journalEntriesStaged: replayed.staged };
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

/** Step 3: the newest snapshot and the applied position (the state machine's own recovery). */
async function loadStateMachine<P extends StateMachinePlugin<unknown>>(
  g: Recovering<P>,
): Promise<{ sm: FsStateMachine<P>; snapshotLastLogId: LogId | null }> {
  const { s, id, groupDir, opened } = g;
  // The flags a rewrite keeps (the layout of the group's small state), as a number: the closure
  // below keeps nothing of the recovery's context.
  const flags = groupFlagsOf(g.file);
  const sm = await openFsStateMachine<P>({
    groupId: id,
    dir: path.join(groupDir, SM_DIR),
    fs: s.fs,
    plugin: s.plugin,
    segmentBytes: s.journalSegmentBytes,
    fdCache: s.fdCache,
    maxRecordBytes: s.maxEntryBytes,
    inlineSyncBelowMs: s.inlineSyncBelowMs,
    ownerLocked: true,
    knownDurable: g.knownDurable,
    lazy: {
      made: g.file.stateMachineMade,
      present: g.top.has(SM_DIR),
      // Kept by the state machine for as long as the group is open: it names only what it
      // needs (not the recovery's context, which holds the directory listing and the journal's
      // replayed writes of the group; a thousand open groups kept those, heap snapshot).
      markMade: () => rewriteGroupFile(s.fs, groupDir, id, flags | GROUP_STATE_MACHINE_MADE),
      ...(s.mistakes?.markBeforeStateMachineFiles === true ? { markFirst: true } : {}),
    },
  });
  opened.sm = sm;
  return { sm, snapshotLastLogId: sm.currentSnapshotMeta()?.lastLogId ?? null };
}

/**
 * Step 4: reconcile. Committed entries after the applied position are replayed from the log;
 * entries after the committed pointer are left alone (not applied, not treated as committed).
 */
async function reconcile<P extends StateMachinePlugin<unknown>>(
  id: string,
  log: SegmentedLog,
  sm: FsStateMachine<P>,
  committed: LogId | null,
  lo: number,
  lastLogId: LogId | null,
): Promise<{ applied: LogId | null; replayed: number; behindLog: boolean }> {
  let [applied] = await sm.appliedState();
  let replayed = 0;
  if (committed === null || compareLogId(applied, committed) >= 0 || nextIndex(applied) > committed.index) {
    return { applied, replayed, behindLog: false };
  }
  const from = nextIndex(applied);
  if (from < lo) return { applied, replayed, behindLog: true };
  const stop = Math.min(committed.index + 1, log.endIndex);
  if (committed.index < log.endIndex) {
    // The log's last entry was read by step 2: when the committed pointer names its index (a
    // node stopped once its last entry was committed), its id is that one, not read again.
    const atCommitted = lastLogId?.index === committed.index ? lastLogId : await readRecordLogId(log, committed.index);
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
  return { applied, replayed, behindLog: false };
}

/**
 * Step 5: every live record that names a payload: the payload must be present. The records come
 * from the group's reference checkpoint where it is believed, and from a scan of the rest of the
 * log (group-references.ts); a damaged or stale checkpoint is replaced. Each naming record is
 * counted in the group's names and the node's index.
 */
async function verifyPayloadReferences<P extends StateMachinePlugin<unknown>>(
  node: NodeParts<P>,
  id: string,
  groupDir: string,
  log: SegmentedLog,
  lo: number,
  last: LogId | null,
  names: GroupNames,
  checkpointListed: boolean,
): Promise<{ namingRecords: number; payloadsChecked: number; plan: ReferencePlan }> {
  const present = new Map<string, boolean>();
  let namingRecords = 0;
  const plan = await planGroupReferences(node.settings.fs, groupDir, log, lo, checkpointListed);
  for await (const { logId, digests } of namingRecordsOf(plan, log)) {
    for (const digest of digests) {
      let ok = present.get(digest);
      if (ok === undefined) {
        ok = (await node.payloads.stat(digest)) !== null;
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
    names.push(logId, digests);
    node.index.add(digests);
    namingRecords++;
  }
  plan.durable = await replaceStaleCheckpoint(node.settings.fs, groupDir, plan, lo, log.endIndex, last, names);
  return { namingRecords, payloadsChecked: present.size, plan };
}

export function fmt(l: LogId): string {
  return `${l.leaderId.term}-${l.leaderId.nodeId}-${l.index}`;
}
