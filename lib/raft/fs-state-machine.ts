// File-system Raft state machine: the durable machinery around an application plugin, for one group.
//
// Owns: `openFsStateMachine` and `FsStateMachine` — the applied position and stored membership,
// the applied journal (a segmented log of the entries applied after the current snapshot), and
// snapshots as files (`sm/snapshots/snap-<seq>.snap`, the stream format of
// lib/raft/snapshot-format.ts). Guarantees (argued in docs/raft-store.md, "Crash safety"):
// - The durable state is *current snapshot + journal*: `apply` resolves after the journal records
//   of its entries are durable, so a reopen rebuilds exactly the applied position, the
//   membership and the plugin state (snapshot restored, journal entries after it replayed).
// - A snapshot file is written to a temporary name, fdatasynced, renamed to `snap-<seq>.snap`
//   and the directory synced: the highest sequence number is the current snapshot, so the
//   rename is the commit point of a build and of an install. Sequence numbers are taken when a
//   builder captures its view (or when an install commits), so a newer state always has a higher
//   number: a build whose view is older than the current snapshot never becomes current.
// - `installSnapshot` verifies the whole stream (plugin name, metadata, checksum) by restoring it
//   into a fresh plugin before the rename; it refuses a snapshot ending before the applied
//   position, so every journaled entry is at or below an installed snapshot, and replay skips
//   journal entries at or below the current snapshot: the install needs no second commit point.
// - Snapshot bytes are streamed in and out in bounded chunks, never held whole.
// - A failed write or sync that leaves the disk state unknown poisons the state machine
//   (POISONED) until the node is reopened.
// - Its files are made at its first write (an apply, a snapshot build or receive), not with the
//   group: built whole under `sm.tmp/`, synced, renamed to `sm/`, the group directory synced,
//   and only then marked made in the GROUP file (`markMade`) and written; so every state a crash
//   leaves is "no files, nothing applied" or "whole files", and once marked, a missing file is
//   CORRUPT. A state machine whose `sm/` is absent and not marked made has applied nothing.

import { randomBytes } from 'node:crypto';
import * as path from 'node:path';

import type { FdCache, SegmentedLog, SegmentedLogOptions } from '../../segments/index.js';
import { openSegmentedLog } from '../../segments/index.js';
import { assert } from '../assert.js';
import { SeglogError, closed, corrupt, fromIo, invalid, poisoned } from '../errors.js';
import type { FileHandle, FileSystem } from '../fs/types.js';
import { decodeEntry, encodeEntry } from './codec.js';
import { GROUP_MANIFEST_SLOT_BYTES, JOURNAL_DIR, SM_TEMP, SNAPSHOTS_DIR, parseSnapshotFileName, parseSnapshotTempName, removeTree, snapshotFileName, snapshotTempName, writeFilesDurably } from './fs-layout.js';
import { DEFAULT_SEGMENT_BYTES, newLogFiles } from '../../segments/index.js';
import { ownEntry } from '../fs/own-entry.js';
import type { PluginReply, StateMachinePlugin, StateMachinePluginFactory } from './plugin.js';
import { BufferedFileWriter, FileStream, FsSnapshotSink } from './snapshot-files.js';
import { newPlugin, restoreSnapshot, snapshotIdFor, writeSnapshotStream } from './snapshot-format.js';
import { cloneLogId, cloneOptionalLogId, cloneSnapshotMeta, cloneStoredMembership, emptyStoredMembership, validateEntry, validateSnapshotMeta } from './types.js';
import type { Entry, LogId, RaftSnapshotBuilder, RaftStateMachine, Snapshot, SnapshotMeta, SnapshotSink, StoredMembership } from './types.js';

/** Journal records replayed per read at open. */
const REPLAY_CHUNK_ENTRIES = 256;
const REPLAY_CHUNK_BYTES = 8 * 1024 * 1024;

/** A stretch of the journal whose Raft indices are consecutive: journal `j + k` holds Raft index `r + k`. */
interface Run {
  j: number;
  r: number;
  n: number;
}

interface CurrentSnapshot {
  seq: number;
  meta: SnapshotMeta;
  file: string;
}

export interface FsStateMachineOptions<P extends StateMachinePlugin<unknown>> {
  groupId: string;
  /** The group's `sm/` directory (holding `journal/` and `snapshots/`). */
  dir: string;
  fs: FileSystem;
  plugin: StateMachinePluginFactory<P>;
  segmentBytes?: number;
  fdCache?: FdCache;
  maxRecordBytes: number;
  /** Passed to the journal's segmented log (SegmentedLogOptions.inlineSyncBelowMs). */
  inlineSyncBelowMs?: number;
  /** The caller holds a lock excluding every other opener (the node's LOCK): the journal takes none. */
  ownerLocked?: boolean;
  /** Every file under `dir` is durable (the node's clean close was recorded): the journal's open syncs nothing it read. */
  knownDurable?: boolean;
  /**
   * How the files under `dir` came to be. Absent: they are there (CORRUPT otherwise: made by
   * the caller). Given: `made` says whether the group's GROUP file marks them made; unmarked,
   * an absent `dir` is a state machine that has applied nothing, made at its first write, and
   * `markMade` records them made (after they are durable, before anything is written to them).
   */
  lazy?: {
    made: boolean;
    markMade: () => Promise<void>;
    /** Whether `dir` exists, as a listing of its parent just showed (checked for links there); looked up when absent. */
    present?: boolean;
    /** Test-only (mistakes.markBeforeStateMachineFiles): mark first. */
    markFirst?: boolean;
  };
}

/** Opens (recovers) the state machine stored under `options.dir`. */
export async function openFsStateMachine<P extends StateMachinePlugin<unknown>>(options: FsStateMachineOptions<P>): Promise<FsStateMachine<P>> {
  const { fs, dir } = options;
  const snapDir = path.join(dir, SNAPSHOTS_DIR);
  const lazy = options.lazy;
  if (lazy !== undefined && !lazy.made) {
    // Never through a link: the directory is the group's own, or damage.
    const present = lazy.present ?? (await ownEntry(fs, dir, `raft group ${JSON.stringify(options.groupId)}:`)) !== null;
    if (!present) {
      return new FsStateMachine<P>(options, snapDir, null, newPlugin(options.plugin), null, 0);
    }
    // Made and renamed into place, but the crash came before the GROUP file said so: its files
    // are whole (the rename came after their syncs). Marked now, then opened as made — and one
    // missing now was lost, not yet to be made (the open of the journal would make it again empty).
    await lazy.markMade();
    for (const name of [path.join(JOURNAL_DIR, 'MANIFEST'), SNAPSHOTS_DIR]) {
      const p = path.join(dir, name);
      if ((await ownEntry(fs, p, `raft group ${JSON.stringify(options.groupId)}:`)) === null) {
        throw corrupt(`raft group ${JSON.stringify(options.groupId)}: ${p} is missing (its state machine directory was made whole)`, { group: options.groupId, path: p });
      }
    }
  }
  try {
    // Made with the group (group-create.ts); the mkdir only when it is not there (every reopen of
    // every group would otherwise pay a pool round trip that fails with EEXIST).
    if ((await fs.stat(snapDir))?.isDirectory !== true) await fs.mkdir(snapDir);
  } catch (err) {
    throw fromIo(err, 'create directory', snapDir);
  }
  let names: string[];
  try {
    names = await fs.readdir(snapDir);
  } catch (err) {
    throw fromIo(err, 'list', snapDir);
  }
  let maxSeq = -1;
  let currentSeq = -1;
  for (const n of names) {
    const s = parseSnapshotFileName(n) ?? parseSnapshotTempName(n);
    if (s !== null) maxSeq = Math.max(maxSeq, s);
    const snap = parseSnapshotFileName(n);
    if (snap !== null) currentSeq = Math.max(currentSeq, snap);
  }

  // The newest snapshot (recovery step 3, docs/contracts/raft-store.md): restored into a fresh plugin, checked end to end.
  let plugin: P;
  let current: CurrentSnapshot | null = null;
  if (currentSeq >= 0) {
    const file = path.join(snapDir, snapshotFileName(currentSeq));
    let handle: FileHandle;
    try {
      handle = await fs.open(file, 'read');
    } catch (err) {
      throw fromIo(err, 'open snapshot', file);
    }
    const stream = new FileStream(handle, await handle.size().catch((err: unknown) => Promise.reject(fromIo(err, 'stat', file))));
    try {
      const restored = await restoreSnapshot(options.plugin, stream, null);
      plugin = restored.plugin;
      current = { seq: currentSeq, meta: restored.meta, file };
    } catch (err) {
      if (err instanceof SeglogError && err.code === 'CORRUPT') {
        throw corrupt(`raft group ${JSON.stringify(options.groupId)}: snapshot ${file} is damaged: ${err.message}`, { group: options.groupId, file });
      }
      throw err;
    } finally {
      await stream.close();
    }
  } else {
    plugin = newPlugin(options.plugin);
  }
  // Every other snapshot file and every temporary one is garbage now (a newer one is durable).
  for (const n of names) {
    const snap = parseSnapshotFileName(n);
    if ((snap !== null && snap !== currentSeq) || parseSnapshotTempName(n) !== null) {
      await fs.unlink(path.join(snapDir, n)).catch(() => undefined);
    }
  }

  const journal = await openJournal(options, options.knownDurable === true);
  try {
    // The journal drops entries only once a snapshot holding them is durable (a build, an install,
    // a replay after either), and the current snapshot is only ever replaced by a newer one: a
    // journal that dropped entries beside no snapshot lost the snapshot holding them.
    if (current === null && journal.firstIndex > 0) {
      throw corrupt(`raft group ${JSON.stringify(options.groupId)}: the applied journal starts at ${journal.firstIndex} but ${snapDir} holds no snapshot`, {
        group: options.groupId,
        path: snapDir,
        journalFirst: journal.firstIndex,
      });
    }
    const sm = new FsStateMachine<P>(options, snapDir, journal, plugin, current, maxSeq + 1);
    await sm.replayJournal();
    return sm;
  } catch (err) {
    await journal.close().catch(() => undefined);
    throw err;
  }
}

/** Opens the applied journal under `options.dir` (the group's files: no lock of its own when the node holds one). */
function openJournal<P extends StateMachinePlugin<unknown>>(options: FsStateMachineOptions<P>, knownDurable: boolean): Promise<SegmentedLog> {
  return openSegmentedLog(path.join(options.dir, JOURNAL_DIR), {
    fs: options.fs,
    segmentBytes: options.segmentBytes,
    fdCache: options.fdCache,
    maxRecordBytes: options.maxRecordBytes,
    ...(options.inlineSyncBelowMs !== undefined ? { inlineSyncBelowMs: options.inlineSyncBelowMs } : {}),
    ...(options.ownerLocked === true ? { ownerLocked: true } : {}),
    ...(knownDurable ? { knownDurable: true } : {}),
    ...(options.ownerLocked === true ? { manifestSlotBytes: GROUP_MANIFEST_SLOT_BYTES } : {}),
  } as SegmentedLogOptions);
}

/**
 * The state machine of one group on the file system. See {@link RaftStateMachine} for the
 * contract of every method and the module header for what is durable when.
 */
export class FsStateMachine<P extends StateMachinePlugin<unknown>> implements RaftStateMachine<PluginReply<P> | null> {
  readonly groupId: string;
  readonly #fs: FileSystem;
  readonly #factory: StateMachinePluginFactory<P>;
  readonly #options: FsStateMachineOptions<P>;
  readonly #snapDir: string;
  /** Null until the state machine's files are made (its first write: `#made`). */
  #journal: SegmentedLog | null;
  #making: Promise<SegmentedLog> | null = null;
  readonly #maxRecordBytes: number;
  #plugin: P;
  #applied: LogId | null = null;
  #membership: StoredMembership = emptyStoredMembership();
  #current: CurrentSnapshot | null;
  #nextSeq: number;
  #runs: Run[] = [];
  #broken: SeglogError | null = null;
  #closing: Promise<void> | null = null;
  /** Set while an install commits (and while calls queued behind it run): later calls wait. */
  #gate: Promise<void> | null = null;
  readonly #sinks = new Set<FsSnapshotSink>();
  readonly #streams = new Set<FileStream>();
  readonly #building = new Set<Promise<unknown>>();

  /** @internal: use openFsStateMachine. */
  constructor(options: FsStateMachineOptions<P>, snapDir: string, journal: SegmentedLog | null, plugin: P, current: CurrentSnapshot | null, nextSeq: number) {
    this.groupId = options.groupId;
    this.#options = options;
    this.#fs = options.fs;
    this.#factory = options.plugin;
    this.#snapDir = snapDir;
    this.#journal = journal;
    this.#maxRecordBytes = options.maxRecordBytes;
    this.#plugin = plugin;
    this.#current = current;
    this.#nextSeq = nextSeq;
    if (current !== null) {
      this.#applied = cloneOptionalLogId(current.meta.lastLogId);
      this.#membership = cloneStoredMembership(current.meta.lastMembership);
    }
  }

  /** The plugin instance holding the current state (replaced by every install). */
  get plugin(): P {
    return this.#plugin;
  }

  /**
   * The applied journal, its files made first when they are not yet (one making at a time; a
   * failure poisons: the files may be half made, and the GROUP file may say either).
   */
  #made(): SegmentedLog | Promise<SegmentedLog> {
    if (this.#journal !== null) return this.#journal;
    this.#making ??= this.#makeFiles().then(
      (journal) => {
        this.#journal = journal;
        return journal;
      },
      (err: unknown) => {
        throw this.#poison(err);
      },
    );
    return this.#making;
  }

  /** The applied journal of a state machine whose files are made (asserted). */
  #madeJournal(): SegmentedLog {
    const j = this.#journal;
    assert(j !== null, 'the journal is used only once the state machine files are made');
    return j;
  }

  /**
   * Makes `sm/`: `sm.tmp/` built whole (the journal's first segment and manifest, the snapshots
   * directory), every file and directory synced, renamed to `sm/`, the group directory synced;
   * then the GROUP file marks it made. Only then is anything written to it.
   */
  async #makeFiles(): Promise<SegmentedLog> {
    const o = this.#options;
    const lazy = o.lazy;
    // The files are those of an owner-locked log (no LOCK file): made only for the node's groups.
    assert(lazy !== undefined && o.ownerLocked === true, 'a state machine without files makes them only as an owner-locked group');
    const fs = this.#fs;
    const groupDir = path.dirname(o.dir);
    const temp = path.join(groupDir, SM_TEMP);
    // mistakes.markBeforeStateMachineFiles: the crash tests must catch a mark that precedes the files.
    if (lazy.markFirst === true) await lazy.markMade();
    // A making cut short by a crash: never renamed, nothing in it ever acknowledged.
    await removeTree(fs, temp);
    const tempJournal = path.join(temp, JOURNAL_DIR);
    try {
      await fs.mkdir(tempJournal);
      await fs.mkdir(path.join(temp, SNAPSHOTS_DIR));
    } catch (err) {
      throw fromIo(err, 'create directory', temp);
    }
    const files = newLogFiles(0, o.segmentBytes ?? DEFAULT_SEGMENT_BYTES, GROUP_MANIFEST_SLOT_BYTES).map((f) => ({ file: path.join(tempJournal, f.name), bytes: f.bytes }));
    await writeFilesDurably(fs, files, [temp, tempJournal]);
    try {
      await fs.rename(temp, o.dir);
    } catch (err) {
      throw fromIo(err, 'rename', o.dir);
    }
    try {
      await fs.syncDir(groupDir);
    } catch (err) {
      throw fromIo(err, 'sync directory', groupDir);
    }
    if (lazy.markFirst !== true) await lazy.markMade();
    return openJournal(o, true);
  }

  /** @internal Replays the journal after the current snapshot (open only). */
  async replayJournal(): Promise<void> {
    const j = this.#madeJournal();
    const skipThrough = this.#current?.meta.lastLogId?.index ?? -1;
    let at = j.firstIndex;
    let cut = at;
    while (at < j.endIndex) {
      const recs = await j.read(at, REPLAY_CHUNK_ENTRIES, REPLAY_CHUNK_BYTES);
      if (recs.length === 0) break;
      for (const rec of recs) {
        const entry = decodeEntry(rec);
        const index = entry.logId.index;
        const last = this.#runs[this.#runs.length - 1];
        if (last !== undefined && index <= last.r + last.n - 1) {
          throw corrupt(`raft group ${JSON.stringify(this.groupId)}: applied journal holds index ${index} after ${last.r + last.n - 1}`, {
            group: this.groupId,
            index,
          });
        }
        this.#pushRun(at, index);
        if (index <= skipThrough) cut = at + 1;
        else this.#applyOne(entry);
        at++;
      }
    }
    // Entries the current snapshot covers are left by an interrupted build or install: drop them.
    if (cut > j.firstIndex) {
      await j.dropBefore(cut);
      this.#trimRuns(cut);
    }
  }

  #pushRun(j: number, r: number): void {
    const last = this.#runs[this.#runs.length - 1];
    if (last !== undefined && last.j + last.n === j && last.r + last.n === r) last.n++;
    else this.#runs.push({ j, r, n: 1 });
  }

  /** The first journal index whose entry is after Raft index `through`. */
  #journalCut(through: number): number {
    for (const run of this.#runs) {
      if (run.r + run.n - 1 <= through) continue;
      if (run.r > through) return run.j;
      return run.j + (through - run.r + 1);
    }
    return this.#madeJournal().endIndex;
  }

  #trimRuns(cut: number): void {
    while (this.#runs.length > 0) {
      const run = this.#runs[0] as Run;
      if (run.j + run.n <= cut) {
        this.#runs.shift();
        continue;
      }
      if (run.j < cut) {
        const k = cut - run.j;
        run.j += k;
        run.r += k;
        run.n -= k;
      }
      break;
    }
  }

  #check(): void {
    if (this.#closing !== null) throw closed(`raft state machine of group ${JSON.stringify(this.groupId)}`);
    if (this.#broken !== null) throw this.#broken;
  }

  #poison(err: unknown): SeglogError {
    if (this.#broken === null) {
      this.#broken = poisoned(`raft state machine of group ${JSON.stringify(this.groupId)}`, err);
    }
    return err instanceof SeglogError ? err : fromIo(err, 'write', `raft state machine of group ${this.groupId}`);
  }

  /** Runs `fn` now, or, while an install commits, after it (and after calls queued before). */
  #gated<T>(fn: () => T | Promise<T>): T | Promise<T> {
    if (this.#gate === null) return fn();
    return this.#enqueueGated(fn);
  }

  #enqueueGated<T>(fn: () => T | Promise<T>): Promise<T> {
    const prev = this.#gate ?? Promise.resolve();
    const run = prev.then(fn);
    const next = run.then(
      () => undefined,
      () => undefined,
    );
    this.#gate = next;
    void next.then(() => {
      if (this.#gate === next) this.#gate = null;
    });
    return run;
  }

  async appliedState(): Promise<[LogId | null, StoredMembership]> {
    this.#check();
    return [cloneOptionalLogId(this.#applied), cloneStoredMembership(this.#membership)];
  }

  #applyOne(entry: Entry): PluginReply<P> | null {
    const p = entry.payload;
    let reply: PluginReply<P> | null = null;
    if (p.type === 'normal') {
      try {
        reply = this.#plugin.apply({ logId: cloneLogId(entry.logId), data: p.data, payloads: p.payloads ?? [] }) as PluginReply<P>;
      } catch (err) {
        this.#broken = new SeglogError('POISONED', `state machine plugin ${this.#plugin.name} threw at ${entry.logId.index}; reopen`, { cause: err });
        throw this.#broken;
      }
    } else if (p.type === 'membership') {
      this.#membership = { logId: cloneLogId(entry.logId), membership: p.membership };
    }
    this.#applied = cloneLogId(entry.logId);
    return reply;
  }

  async apply(entries: Entry[]): Promise<(PluginReply<P> | null)[]> {
    this.#check();
    if (!Array.isArray(entries)) throw invalid('entries must be an array');
    entries.forEach((e, i) => validateEntry(e, `entries[${i}]`));
    if (this.#journal === null) this.#checkOrder(entries);
    const records = entries.map(encodeEntry);
    records.forEach((r, i) => {
      // Refused before anything is applied: the journal could not take it.
      if (r.length > this.#maxRecordBytes) {
        throw new SeglogError('TOO_LARGE', `entries[${i}] encodes to ${r.length} bytes, above the limit of ${this.#maxRecordBytes}`, {
          details: { length: r.length, max: this.#maxRecordBytes },
        });
      }
    });
    if (this.#journal === null && records.length > 0) {
      // The first write makes the files; later calls queue behind it (the gate), in call order.
      return this.#enqueueGated(async () => {
        await this.#made();
        return this.#applyNow(records);
      });
    }
    return this.#gated(() => this.#applyNow(records));
  }

  /** INVALID unless the entries' indices are each after the one before, the first after the applied one. */
  #checkOrder(entries: readonly Entry[]): void {
    let prev = this.#applied;
    entries.forEach((e, i) => {
      if (prev !== null && e.logId.index <= prev.index) {
        throw invalid(`entries[${i}] has index ${e.logId.index}, not after ${prev.index} (an entry is applied once)`, { index: e.logId.index });
      }
      prev = e.logId;
    });
  }

  #applyNow(records: Uint8Array[]): Promise<(PluginReply<P> | null)[]> {
    this.#check();
    const decoded = records.map(decodeEntry); // the state never shares memory with the caller
    this.#checkOrder(decoded);
    const replies: (PluginReply<P> | null)[] = [];
    let applied = 0;
    let failure: unknown = null;
    for (const e of decoded) {
      try {
        replies.push(this.#applyOne(e));
      } catch (err) {
        failure = err;
        break;
      }
      applied++;
    }
    // Journal what was applied (and only that): a reopen replays exactly these.
    let durable: Promise<void> = Promise.resolve();
    if (applied > 0) {
      let staged: { first: number; durable: Promise<void> };
      try {
        staged = this.#madeJournal().stage(records.slice(0, applied));
      } catch (err) {
        throw this.#poison(err);
      }
      for (let k = 0; k < applied; k++) this.#pushRun(staged.first + k, (decoded[k] as Entry).logId.index);
      durable = staged.durable;
    }
    if (failure !== null) {
      durable.catch(() => undefined);
      throw failure;
    }
    return durable.then(
      () => replies,
      (err: unknown) => {
        throw this.#poison(err);
      },
    );
  }

  async getSnapshotBuilder(): Promise<RaftSnapshotBuilder> {
    this.#check();
    return this.#gated(() => this.#capture());
  }

  #capture(): RaftSnapshotBuilder {
    this.#check();
    // The view is taken now, synchronously: applies that follow do not leak into it. Its sequence
    // number is taken now too, so that a later view (a newer state) always has a higher one.
    const lastLogId = cloneOptionalLogId(this.#applied);
    const lastMembership = cloneStoredMembership(this.#membership);
    const pluginName = this.#plugin.name;
    const view = this.#plugin.capture();
    const seq = this.#nextSeq++;
    let used = false;
    return {
      buildSnapshot: async (): Promise<Snapshot> => {
        if (used) throw invalid('a snapshot builder builds one snapshot');
        used = true;
        this.#check();
        const run = this.#build(seq, { lastLogId, lastMembership, snapshotId: snapshotIdFor(lastLogId, seq) }, pluginName, view);
        this.#building.add(run);
        try {
          return await run;
        } finally {
          this.#building.delete(run);
        }
      },
    };
  }

  async #build(seq: number, meta: SnapshotMeta, pluginName: string, view: AsyncIterable<Uint8Array>): Promise<Snapshot> {
    const fs = this.#fs;
    await this.#made();
    const temp = path.join(this.#snapDir, snapshotTempName(seq, randomBytes(8).toString('hex')));
    const file = path.join(this.#snapDir, snapshotFileName(seq));
    let handle: FileHandle;
    try {
      handle = await fs.open(temp, 'create-exclusive');
    } catch (err) {
      throw fromIo(err, 'create snapshot', temp);
    }
    try {
      const writer = new BufferedFileWriter(handle);
      for await (const chunk of writeSnapshotStream({ plugin: pluginName, meta }, view)) await writer.write(chunk);
      await writer.flush();
      try {
        await handle.datasync();
      } catch (err) {
        throw fromIo(err, 'sync snapshot', temp);
      }
    } catch (err) {
      await handle.close().catch(() => undefined);
      await fs.unlink(temp).catch(() => undefined);
      throw err;
    }
    await handle.close().catch(() => undefined);
    try {
      await fs.rename(temp, file);
    } catch (err) {
      await fs.unlink(temp).catch(() => undefined);
      throw fromIo(err, 'rename snapshot', file);
    }
    try {
      await fs.syncDir(this.#snapDir);
    } catch (err) {
      // The rename may or may not be durable: the current snapshot is not known any more.
      throw this.#poison(fromIo(err, 'sync directory', this.#snapDir));
    }
    // The stream handed back reads through a handle opened now, so it outlives a deletion.
    const data = await this.#openStream(file);
    const current = this.#current;
    if (current === null || seq > current.seq) {
      this.#current = { seq, meta: cloneSnapshotMeta(meta), file };
      await this.#dropJournalThrough(meta.lastLogId);
      await this.#removeSnapshotsBelow(seq);
    } else {
      // A newer snapshot became current while this one was written: this one is not kept.
      await fs.unlink(file).catch(() => undefined);
    }
    return { meta: cloneSnapshotMeta(meta), data };
  }

  /** Drops the journal entries a current snapshot covers (no longer needed to rebuild the state). */
  async #dropJournalThrough(lastLogId: LogId | null): Promise<void> {
    if (lastLogId === null) return;
    const journal = this.#madeJournal();
    const cut = this.#journalCut(lastLogId.index);
    if (cut <= journal.firstIndex) return;
    this.#trimRuns(cut);
    try {
      await journal.dropBefore(cut);
    } catch (err) {
      throw this.#poison(err);
    }
  }

  /** Unlinks snapshot files older than `seq` (no directory sync: open removes any that come back). */
  async #removeSnapshotsBelow(seq: number): Promise<void> {
    let names: string[];
    try {
      names = await this.#fs.readdir(this.#snapDir);
    } catch {
      return;
    }
    for (const n of names) {
      const s = parseSnapshotFileName(n);
      if (s !== null && s < seq) await this.#fs.unlink(path.join(this.#snapDir, n)).catch(() => undefined);
    }
  }

  async #openStream(file: string): Promise<FileStream> {
    let handle: FileHandle;
    try {
      handle = await this.#fs.open(file, 'read');
    } catch (err) {
      throw fromIo(err, 'open snapshot', file);
    }
    let size: number;
    try {
      size = await handle.size();
    } catch (err) {
      await handle.close().catch(() => undefined);
      throw fromIo(err, 'stat snapshot', file);
    }
    const stream = new FileStream(handle, size, { onClose: (s) => this.#streams.delete(s) });
    this.#streams.add(stream);
    return stream;
  }

  async beginReceivingSnapshot(): Promise<SnapshotSink> {
    this.#check();
    await this.#made();
    this.#check(); // a close that began meanwhile discards no sink made after it
    const temp = path.join(this.#snapDir, snapshotTempName(this.#nextSeq, randomBytes(8).toString('hex')));
    let handle: FileHandle;
    try {
      handle = await this.#fs.open(temp, 'create-exclusive');
    } catch (err) {
      throw fromIo(err, 'create snapshot', temp);
    }
    const sink = new FsSnapshotSink(temp, handle, new BufferedFileWriter(handle), () => this.#closing !== null);
    this.#sinks.add(sink);
    return sink;
  }

  async #discardSink(sink: FsSnapshotSink): Promise<void> {
    this.#sinks.delete(sink);
    await sink.handle.close().catch(() => undefined);
    await this.#fs.unlink(sink.file).catch(() => undefined);
  }

  #behind(meta: SnapshotMeta): SeglogError | null {
    const applied = this.#applied;
    if (applied !== null && (meta.lastLogId === null || meta.lastLogId.index < applied.index)) {
      // A snapshot behind the applied position would replay applied entries (openraft never sends
      // one). Refusing it keeps every journaled entry at or below the installed snapshot, which is
      // what makes the install's rename its only commit point.
      return invalid(`snapshot ends at ${meta.lastLogId?.index ?? 'nothing'}, behind the applied ${applied.index}`);
    }
    return null;
  }

  async installSnapshot(meta: SnapshotMeta, sink: SnapshotSink): Promise<void> {
    this.#check();
    validateSnapshotMeta(meta);
    if (!(sink instanceof FsSnapshotSink) || !this.#sinks.has(sink)) throw invalid('installSnapshot needs a sink from this state machine');
    if (sink.used) throw invalid('this snapshot sink was installed already');
    const behind = this.#behind(meta);
    if (behind !== null) throw behind;
    sink.used = true;
    const want = cloneSnapshotMeta(meta);
    let plugin: P;
    try {
      const size = await sink.finish();
      // Verify everything (and build the new state) before anything changes.
      const stream = new FileStream(sink.handle, size, { closeHandle: false });
      ({ plugin } = await restoreSnapshot(this.#factory, stream, want));
      try {
        await sink.handle.datasync();
      } catch (err) {
        throw fromIo(err, 'sync snapshot', sink.file);
      }
    } catch (err) {
      await this.#discardSink(sink);
      throw err;
    }
    this.#sinks.delete(sink);
    await sink.handle.close().catch(() => undefined);
    return this.#enqueueGated(() => this.#commitInstall(want, plugin, sink.file));
  }

  async #commitInstall(meta: SnapshotMeta, plugin: P, temp: string): Promise<void> {
    try {
      this.#check();
      const behind = this.#behind(meta); // applies may have run while the stream was verified
      if (behind !== null) throw behind;
    } catch (err) {
      await this.#fs.unlink(temp).catch(() => undefined);
      throw err;
    }
    const seq = this.#nextSeq++;
    const file = path.join(this.#snapDir, snapshotFileName(seq));
    try {
      await this.#fs.rename(temp, file);
    } catch (err) {
      await this.#fs.unlink(temp).catch(() => undefined);
      throw fromIo(err, 'rename snapshot', file);
    }
    try {
      await this.#fs.syncDir(this.#snapDir);
    } catch (err) {
      throw this.#poison(fromIo(err, 'sync directory', this.#snapDir));
    }
    // Committed: the state is the snapshot's.
    this.#plugin = plugin;
    this.#applied = cloneOptionalLogId(meta.lastLogId);
    this.#membership = cloneStoredMembership(meta.lastMembership);
    this.#current = { seq, meta, file };
    // Every journaled entry is at or below the snapshot (the behind check): all of it goes.
    const journal = this.#madeJournal();
    const end = journal.endIndex;
    this.#runs = [];
    if (end > journal.firstIndex) {
      try {
        await journal.dropBefore(end);
      } catch (err) {
        throw this.#poison(err);
      }
    }
    await this.#removeSnapshotsBelow(seq);
  }

  async getCurrentSnapshot(): Promise<Snapshot | null> {
    this.#check();
    const current = this.#current;
    if (current === null) return null;
    const data = await this.#openStream(current.file);
    return { meta: cloneSnapshotMeta(current.meta), data };
  }

  /** The current snapshot's metadata, or null (no I/O). */
  currentSnapshotMeta(): SnapshotMeta | null {
    return this.#current === null ? null : cloneSnapshotMeta(this.#current.meta);
  }

  /** True once a write failed (or the plugin threw); every later call rejects with POISONED. */
  get isPoisoned(): boolean {
    return this.#broken !== null;
  }

  /**
   * Waits for builds and installs in progress, discards sinks never installed, ends open snapshot
   * streams, and closes the journal (its pending appends become durable first). Idempotent.
   */
  close(): Promise<void> {
    if (this.#closing === null) {
      this.#closing = (async () => {
        await Promise.allSettled([...this.#building]);
        while (this.#gate !== null) await this.#gate;
        for (const sink of [...this.#sinks]) await this.#discardSink(sink);
        for (const s of [...this.#streams]) await s.close();
        await this.#making?.catch(() => undefined);
        await this.#journal?.close().catch((err: unknown) => {
          if (this.#broken === null) throw err;
        });
      })();
    }
    return this.#closing;
  }
}
