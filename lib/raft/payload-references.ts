// Payload references from the logs of a node that is not open: what `seglog verify` and the
// payload store's collector must know.
//
// Owns: `listPayloadReferences`, `rebuildPayloadReferences` and `PayloadReference`. The records
// come from the source recovery's step 5 uses (group-references.ts): each group's reference
// checkpoint where it is believed, and a scan of the log past it (of all of it otherwise), from
// just after each group's purged id — and, for a node not reopened since a crash, what its node
// journal still holds of each group, as replay would leave it (journal-replay.ts `journalView`:
// the log's records below the first one replay replaces, then the journal's). Guarantees: streams (one chunk of records in memory at a
// time, plus the checkpoint's records); the node's LOCK is held for the scan (LOCKED while the
// node is open), each group's log opened only for its read; nothing is written (a damaged checkpoint is scanned around, not replaced); with
// `crossCheck`, the checkpoint's claims are compared with a scan of the records it covers and a
// disagreement is CORRUPT.

import * as path from 'node:path';
import { openSegmentedLog, type SegmentedLog, type SegmentedLogOptions } from '../../segments/index.js';
import { lockDirectory } from '../fs/lock.js';
import { corrupt, fromIo } from '../errors.js';
import { realFs } from '../fs/real.js';
import type { FileSystem } from '../fs/types.js';
import { decodeEntryNames, decodeOptionalLogId } from './codec.js';
import { GROUPS_DIR, LOG_DIR, NODE_JOURNAL_DIR, NODE_LOCK, isGroupDirName, readGroupFile } from './fs-layout.js';
import { peekGroupState } from './group-state.js';
import { journalView } from './journal-replay.js';
import { NodeJournal, type JournalOp } from './node-journal.js';
import { namingRecordsOf, planGroupReferences, scanNamingRecords, type ReferencePlan } from './group-references.js';
import type { NamingRecord } from './reference-checkpoint.js';
import { RAFT_DEFAULT_MAX_ENTRY_BYTES } from './node-options.js';
import { logIdEquals, nextIndex, type LogId } from './types.js';

/** One live log record naming a payload. */
export interface PayloadReference {
  group: string;
  logId: LogId;
  digest: string;
}

/**
 * Every payload reference held by the logs of the node in `dir` (which must not be open: its LOCK
 * is held for the scan; LOCKED otherwise): for each live record — after the purged id —
 * that names payloads, one reference per digest, group by group in index order. Streams: holds
 * one chunk of records at a time (and a group's checkpoint). `crossCheck`: each believed
 * checkpoint is compared with a scan of the records it covers (CORRUPT when they differ).
 */
export async function* listPayloadReferences(
  dir: string,
  options: { fs?: FileSystem; maxEntryBytes?: number; crossCheck?: boolean } = {},
): AsyncGenerator<PayloadReference> {
  const fs = options.fs ?? realFs;
  const groupsDir = path.join(dir, GROUPS_DIR);
  let names: string[];
  try {
    names = await fs.readdir(groupsDir);
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return;
    throw fromIo(err, 'list', groupsDir);
  }
  // The node's LOCK, for the whole scan: the group logs take none of their own (node.ts), so this
  // is what refuses a node that is open (LOCKED) and keeps it from being opened meanwhile.
  const lock = await lockDirectory(fs, dir, NODE_LOCK);
  let journal: NodeJournal | null = null;
  try {
    let pending = new Map<string, JournalOp[]>();
    if ((await fs.stat(path.join(dir, NODE_JOURNAL_DIR))) !== null) {
      const maxEntryBytes = options.maxEntryBytes ?? RAFT_DEFAULT_MAX_ENTRY_BYTES;
      ({ journal, pending } = await NodeJournal.open(dir, { fs, fdCache: undefined, inlineSyncBelowMs: 0, maxEntryBytes, knownDurable: false }));
    }
    yield* scanGroups(fs, groupsDir, names, options, journal, pending);
  } finally {
    await journal?.close(false).catch(() => undefined);
    await lock.unlock().catch(() => undefined);
    await lock.close().catch(() => undefined);
  }
}

async function* scanGroups(
  fs: FileSystem,
  groupsDir: string,
  names: string[],
  options: { maxEntryBytes?: number; crossCheck?: boolean },
  journal: NodeJournal | null,
  pending: Map<string, JournalOp[]>,
): AsyncGenerator<PayloadReference> {
  for (const name of names.sort()) {
    if (!isGroupDirName(name)) continue;
    const groupDir = path.join(groupsDir, name);
    const file = await readGroupFile(fs, groupDir);
    const group = file.id;
    // Read, not opened: a scan takes no cell lock and leaves nothing behind.
    const bytes = (await peekGroupState(fs, groupDir, file.stateCell)).purged;
    const purged: LogId | null = bytes === null ? null : decodeOptionalLogId(bytes);
    const log = await openSegmentedLog(path.join(groupDir, LOG_DIR), {
      fs,
      maxRecordBytes: options.maxEntryBytes ?? RAFT_DEFAULT_MAX_ENTRY_BYTES,
      ownerLocked: true,
    } as SegmentedLogOptions);
    try {
      const lo = Math.max(log.firstIndex, nextIndex(purged));
      const ops = pending.get(name) ?? [];
      const view = journal === null ? null : await journalView(group, log, purged, ops, journal);
      const plan = await planGroupReferences(fs, groupDir, log, lo);
      if (options.crossCheck === true) await crossCheck(group, plan, log, lo);
      if (view === null || !view.reset) {
        for await (const { logId, digests } of namingRecordsOf(plan, log)) {
          if (view !== null && logId.index >= view.keep) break;
          for (const digest of digests) yield { group, logId, digest };
        }
      }
      if (view !== null) {
        for await (const { index, record } of view.entries()) {
          if (index < lo) continue;
          const { logId, digests } = decodeEntryNames(record);
          for (const digest of digests) yield { group, logId, digest };
        }
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

/** CORRUPT unless the checkpoint's claims are exactly what a scan of the records it covers finds. */
async function crossCheck(group: string, plan: ReferencePlan, log: SegmentedLog, lo: number): Promise<void> {
  if (plan.checkpoint !== 'used') return;
  const scanned: NamingRecord[] = [];
  for await (const r of scanNamingRecords(log, lo)) {
    if (r.logId.index >= plan.scanFrom) break;
    scanned.push(r);
  }
  const differ = checkpointDisagreement(plan.claimed, scanned);
  if (differ !== null) throw corrupt(`raft group ${JSON.stringify(group)}: the reference checkpoint disagrees with the log: ${differ}`, { group });
}

/** Where two lists of naming records (in index order) first differ, or null. */
export function checkpointDisagreement(claimed: readonly NamingRecord[], scanned: readonly NamingRecord[]): string | null {
  for (let i = 0; i < Math.max(claimed.length, scanned.length); i++) {
    const c = claimed[i];
    const s = scanned[i];
    if (c === undefined) return `it misses record ${(s as NamingRecord).logId.index}, which names ${(s as NamingRecord).digests.join(', ')}`;
    if (s === undefined || c.logId.index < s.logId.index) return `it claims record ${c.logId.index} names ${c.digests.join(', ')}, which the log does not hold`;
    if (s.logId.index < c.logId.index) return `it misses record ${s.logId.index}, which names ${s.digests.join(', ')}`;
    if (!logIdEquals(c.logId, s.logId) || c.digests.length !== s.digests.length || c.digests.some((d, k) => d !== s.digests[k])) {
      return `record ${c.logId.index}: it claims ${c.digests.join(', ')}, the log holds ${s.digests.join(', ')}`;
    }
  }
  return null;
}
