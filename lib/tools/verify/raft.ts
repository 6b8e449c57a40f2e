// Offline checks of Raft data (lib/raft/): snapshot files, and groups as lib/raft/fs-layout.ts
// lays them out (a directory with `GROUP`, `log/`, `state.cell` — or, in a group an earlier
// version made, `vote.cell`, `committed.cell`, `purged.cell` — and once its state machine was
// first written `sm/journal/`, `sm/snapshots/`). Every file a
// group holds from its creation on must be there, the state machine's once the GROUP file says
// they were made, and a journal that dropped entries (or a purged log) needs a snapshot beside
// it: errors otherwise, as open answers CORRUPT rather than serve a state that went back.
//
// Owns: `isSnapshotFile` + `checkSnapshotFile` (the stream format of lib/raft/snapshot-format.ts,
// read with its own streaming reader: magic, header, frames, end marker, CRC), and
// `isRaftGroupDirectory` + `checkRaftGroup`: on top of the primitive checks of its log and cells,
// every live log record must decode as an entry (lib/raft/codec.ts) whose index is the record's,
// with terms that never go down; the vote, committed and purged id must decode (from the state
// cell, or from their three cells); and every
// payload an entry names must be in a payload store of the node (a store found beside the group
// or above it); the GROUP file is read with the store's own reader (read-only calls only); the
// payload reference checkpoint is checked against the records (raft-references.ts).
// The journal (`sm/journal/`) is checked as a log by the walk, snapshot files by their format.
// EXTENSION POINT: written while the file-system Raft store was landing; its owner adds what the
// layout gains (e.g. journal record decoding) here.

import * as path from 'node:path';
import { decodeEntry, decodeOptionalLogId, decodeVote } from '../../raft/codec.js';
import { readSnapshotStream } from '../../raft/snapshot-format.js';
import { GROUP_FILE_TEMP, LOG_DIR, SM_TEMP, parseSnapshotFileName, readGroupFile } from '../../raft/fs-layout.js';
import { NO_VOTE, STATE_MACHINE_FILES, groupDefiningFiles } from '../../raft/group-create.js';
import { decodeGroupState } from '../../raft/group-state.js';
import { decodeManifest } from '../../../segments/format.js';
import { peekManifest } from '../../../segments/manifest.js';
import { checkCellFile } from './cell.js';
import { checkSegmentedLog } from './log.js';
import { ReferenceCheckpointCheck } from './raft-references.js';
import { REFS_FILE, REFS_TEMP } from '../../raft/reference-checkpoint.js';
import { VerifyError, messageOf, type VerifyContext } from './context.js';

const SNAPSHOT_MAGIC = [0x53, 0x47, 0x4c, 0x53, 0x4e, 0x41, 0x50, 0x01];

/** A snapshot file by its name (`*.snap`) or its magic. */
export function isSnapshotFile(name: string, head: Uint8Array): boolean {
  return name.endsWith('.snap') || (head.length >= 8 && SNAPSHOT_MAGIC.every((b, i) => head[i] === b));
}

/** Streams a snapshot file through the snapshot reader; reports what fails. */
export async function checkSnapshotFile(ctx: VerifyContext, file: string): Promise<void> {
  const h = await ctx.fs.open(file, 'read');
  try {
    const size = await h.size();
    ctx.sawFile(size);
    async function* chunks(): AsyncGenerator<Uint8Array> {
      for (let at = 0; at < size; ) {
        const buf = new Uint8Array(Math.min(1 << 20, size - at));
        const n = await h.read(buf, at);
        if (n === 0) return;
        yield buf.subarray(0, n);
        at += n;
      }
    }
    try {
      const reader = await readSnapshotStream(chunks());
      const { leftover } = await reader.finish();
      ctx.describe({
        kind: 'raft-snapshot',
        path: file,
        plugin: reader.header.plugin,
        snapshotId: reader.header.meta.snapshotId,
        lastLogId: reader.header.meta.lastLogId,
        stateBytes: leftover,
      });
    } catch (err) {
      if (err instanceof VerifyError) throw err;
      ctx.error(file, `raft snapshot: ${messageOf(err)}`);
    }
  } finally {
    await h.close().catch(() => undefined);
  }
}

/** A group directory: its GROUP file, or (that file lost) its log beside one of its cells. */
export function isRaftGroupDirectory(names: readonly string[]): boolean {
  return names.includes('GROUP') || (names.includes('log') && GROUP_CELLS.some((c) => names.includes(c)));
}

const STATE_CELL = 'state.cell';
const GROUP_CELLS = [STATE_CELL, 'vote.cell', 'committed.cell', 'purged.cell'];

/** The vote cell's value: empty before the first vote (lib/raft/group-create.ts), else a vote. */
function decodeVoteCell(bytes: Uint8Array): unknown {
  return bytes.length === NO_VOTE.length ? null : decodeVote(bytes);
}

/**
 * Every file a group holds from its creation on (`groupDefiningFiles` of its layout), and its state
 * machine's (STATE_MACHINE_FILES) once the GROUP file says they were made (or cannot say): one missing is
 * an error, since open answers CORRUPT rather than make it again empty (a log without its
 * entries, a vote, a committed or a purged id gone back, a state machine gone back to nothing).
 * The GROUP file is reported where it is read; a missing log directory shows as its MANIFEST's.
 */
async function checkDefiningFiles(ctx: VerifyContext, dir: string, stateMachineMade: boolean, stateCell: boolean): Promise<void> {
  for (const name of groupDefiningFiles(stateCell)) {
    if (name === 'GROUP' || name === LOG_DIR) continue;
    const file = path.join(dir, name);
    if ((await ctx.fs.stat(file)) === null) ctx.error(file, `raft group: ${name} is missing; every group holds it from its creation on (CORRUPT at open)`);
  }
  if (!stateMachineMade) return;
  for (const name of STATE_MACHINE_FILES) {
    const file = path.join(dir, name);
    if ((await ctx.fs.stat(file)) === null) ctx.error(file, `raft group: ${name} is missing; the GROUP file says the state machine's files were made (CORRUPT at open)`);
  }
}

/**
 * The applied journal drops entries only once a snapshot holding them is durable, and the current
 * snapshot is only ever replaced by a newer one: a journal that starts after 0 beside no snapshot
 * lost the snapshot (CORRUPT at open). A purged id beside no snapshot means the entries the
 * purge removed are held by nothing on this node: an error too (the engine purges only what a
 * snapshot holds).
 */
async function checkSnapshotPresence(ctx: VerifyContext, dir: string, purged: unknown): Promise<void> {
  const snapDir = path.join(dir, 'sm', 'snapshots');
  const names = (await ctx.fs.stat(snapDir)) === null ? [] : await ctx.fs.readdir(snapDir);
  if (names.some((n) => parseSnapshotFileName(n) !== null)) return;
  const manifestPath = path.join(dir, 'sm', 'journal', 'MANIFEST');
  let journalFirst = 0;
  try {
    const value = await peekManifest(manifestPath, ctx.fs);
    if (value !== null) journalFirst = decodeManifest(value, manifestPath).firstIndex;
  } catch (err) {
    if (err instanceof VerifyError) throw err;
    return; // the journal's own check (the walk) reports a damaged manifest
  }
  if (journalFirst > 0) {
    ctx.error(snapDir, `raft group: the applied journal starts at ${journalFirst} but there is no snapshot holding the entries before it (CORRUPT at open)`);
  } else if (purged !== null && purged !== undefined) {
    ctx.error(snapDir, `raft group: the log was purged (${JSON.stringify(purged)}) but there is no snapshot holding the purged entries`);
  }
}

/** Checks a Raft group directory; answers the entry names it accounted for (the rest is walked). */
export async function checkRaftGroup(ctx: VerifyContext, dir: string, names: readonly string[]): Promise<Set<string>> {
  // The temporary names (a GROUP file's replacement, the state machine's making) hold nothing
  // acknowledged: leftovers of a crash, replaced by the next write.
  const claimed = new Set<string>(['GROUP', 'log', ...GROUP_CELLS, REFS_FILE, REFS_TEMP, GROUP_FILE_TEMP, SM_TEMP]);
  ctx.counts.raftGroups++;
  let id: string | null = null;
  // Unknown (no readable GROUP file): every file is expected, as of a group of the first format,
  // and the small state's layout is the one the directory shows.
  let stateMachineMade = true;
  let stateCell = names.includes(STATE_CELL);
  if (!names.includes('GROUP')) {
    ctx.error(path.join(dir, 'GROUP'), 'raft group: the GROUP file is missing (CORRUPT at open)');
  } else {
    ctx.sawFile((await ctx.fs.stat(path.join(dir, 'GROUP')))?.size ?? 0);
    try {
      const file = await readGroupFile(ctx.fs, dir);
      id = file.id;
      stateMachineMade = file.stateMachineMade;
      stateCell = file.stateCell;
    } catch (err) {
      if (err instanceof VerifyError) throw err;
      ctx.error(path.join(dir, 'GROUP'), `raft group: ${messageOf(err)}`, 0);
    }
  }
  const decodeCell = async (name: string, decode: (b: Uint8Array) => unknown): Promise<unknown> => {
    if (!names.includes(name)) return undefined;
    const cell = await checkCellFile(ctx, path.join(dir, name), undefined, `raft ${name}`);
    if (cell.value === null) return null;
    try {
      return decode(cell.value);
    } catch (err) {
      ctx.error(path.join(dir, name), `raft ${name}: ${messageOf(err)}`);
      return null;
    }
  };
  await checkDefiningFiles(ctx, dir, stateMachineMade, stateCell);
  let vote: unknown;
  let committed: unknown;
  let purged: unknown;
  if (stateCell) {
    // One cell, three values: each decoded on its own, so that one bad value is reported as itself.
    const file = path.join(dir, STATE_CELL);
    const state = await decodeCell(STATE_CELL, (b) => decodeGroupState(b, file));
    const field = (bytes: Uint8Array, what: string, decode: (b: Uint8Array) => unknown): unknown => {
      try {
        return decode(bytes);
      } catch (err) {
        ctx.error(file, `raft ${STATE_CELL}: the ${what}: ${messageOf(err)}`);
        return null;
      }
    };
    if (state !== null && state !== undefined) {
      const s = state as ReturnType<typeof decodeGroupState>;
      vote = field(s.vote, 'vote', decodeVoteCell);
      committed = field(s.committed, 'committed pointer', decodeOptionalLogId);
      purged = field(s.purged, 'purged id', decodeOptionalLogId);
    } else {
      vote = committed = purged = state;
    }
  } else {
    vote = await decodeCell('vote.cell', decodeVoteCell);
    committed = await decodeCell('committed.cell', decodeOptionalLogId);
    purged = await decodeCell('purged.cell', decodeOptionalLogId);
  }
  await checkSnapshotPresence(ctx, dir, purged);
  if (!names.includes('log')) {
    ctx.describe({ kind: 'raft-group', path: dir, id, vote, committed, purged, log: null, entries: 0, payloadsNamed: 0, stateMachineFiles: stateMachineMade });
    return claimed;
  }

  const logDir = path.join(dir, 'log');
  const digests = new Set<string>();
  let lastTerm = -1;
  let entries = 0;
  const refs = new ReferenceCheckpointCheck(ctx, dir);
  await refs.start();
  const log = await checkSegmentedLog(ctx, logDir, await ctx.fs.readdir(logDir), {
    role: 'raft log',
    onRecord: (index, record) => {
      refs.onRecord(index, record);
      const entry = decodeEntry(record);
      entries++;
      if (entry.logId.index !== index) throw new Error(`entry says index ${entry.logId.index}`);
      if (entry.logId.leaderId.term < lastTerm) throw new Error(`term ${entry.logId.leaderId.term} after term ${lastTerm}`);
      lastTerm = entry.logId.leaderId.term;
      if (entry.payload.type === 'normal') for (const d of entry.payload.payloads ?? []) digests.add(d);
    },
  });
  if (log !== null) {
    const p = purged as { index: number } | null | undefined;
    await refs.finish(Math.max(log.firstIndex, p === null || p === undefined ? 0 : p.index + 1), log.endIndex);
  }
  ctx.describe({ kind: 'raft-group', path: dir, id, vote, committed, purged, log, entries, payloadsNamed: digests.size, stateMachineFiles: stateMachineMade });
  if (digests.size > 0) {
    ctx.deferred.push(async () => {
      // The node's payload store: one whose parent directory is the group's or an ancestor's.
      const stores = [...ctx.payloadStores.entries()].filter(([storeDir]) => isWithin(dir, path.dirname(storeDir)));
      if (stores.length === 0) {
        ctx.error(logDir, `raft log names ${digests.size} payload(s) but no payload store of the node was found`);
        return;
      }
      for (const d of digests) {
        if (!stores.some(([, held]) => held.has(d))) ctx.error(logDir, `raft log names payload ${d}, which no payload store of the node holds (the ordering rule: openRaftNode fails with CORRUPT)`);
      }
    });
  }
  return claimed;
}

function isWithin(p: string, ancestor: string): boolean {
  const rel = path.relative(ancestor, p);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}
