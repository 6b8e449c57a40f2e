// Offline checks of Raft data (lib/raft/): snapshot files, and groups as lib/raft/fs-layout.ts
// lays them out (a directory with `GROUP`, `log/`, `vote.cell`, `committed.cell`, `purged.cell`,
// `sm/journal/`, `sm/snapshots/`).
//
// Owns: `isSnapshotFile` + `checkSnapshotFile` (the stream format of lib/raft/snapshot-format.ts,
// read with its own streaming reader: magic, header, frames, end marker, CRC), and
// `isRaftGroupDirectory` + `checkRaftGroup`: on top of the primitive checks of its log and cells,
// every live log record must decode as an entry (lib/raft/codec.ts) whose index is the record's,
// with terms that never go down; the vote, committed and purged cells must decode; and every
// payload an entry names must be in a payload store of the node (a store found beside the group
// or above it); the GROUP file is read with the store's own reader (read-only calls only); the
// payload reference checkpoint is checked against the records (raft-references.ts).
// The journal (`sm/journal/`) is checked as a log by the walk, snapshot files by their format.
// EXTENSION POINT: written while the file-system Raft store was landing; its owner adds what the
// layout gains (e.g. journal record decoding) here.

import * as path from 'node:path';
import { decodeEntry, decodeOptionalLogId, decodeVote } from '../../raft/codec.js';
import { readSnapshotStream } from '../../raft/snapshot-format.js';
import { readGroupFile } from '../../raft/fs-layout.js';
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

export function isRaftGroupDirectory(names: readonly string[]): boolean {
  return names.includes('log') && names.includes('vote.cell');
}

/** Checks a Raft group directory; answers the entry names it accounted for (the rest is walked). */
export async function checkRaftGroup(ctx: VerifyContext, dir: string, names: readonly string[]): Promise<Set<string>> {
  const claimed = new Set<string>(['GROUP', 'log', 'vote.cell', 'committed.cell', 'purged.cell', REFS_FILE, REFS_TEMP]);
  ctx.counts.raftGroups++;
  let id: string | null = null;
  if (!names.includes('GROUP')) {
    ctx.error(path.join(dir, 'GROUP'), 'raft group: the GROUP file is missing (CORRUPT at open)');
  } else {
    ctx.sawFile((await ctx.fs.stat(path.join(dir, 'GROUP')))?.size ?? 0);
    try {
      id = await readGroupFile(ctx.fs, dir);
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
  const vote = await decodeCell('vote.cell', decodeVote);
  const committed = await decodeCell('committed.cell', decodeOptionalLogId);
  const purged = await decodeCell('purged.cell', decodeOptionalLogId);

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
  ctx.describe({ kind: 'raft-group', path: dir, id, vote, committed, purged, log, entries, payloadsNamed: digests.size });
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
