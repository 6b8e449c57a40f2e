// Where a group's payload references come from: its reference checkpoint (reference-checkpoint.ts)
// for the records it covers, and a scan of the log for the rest — the one source of recovery's
// step 5, of `listPayloadReferences` and of `seglog verify`.
//
// Owns: `liveRecordChunks` (the bounded reader of a log's live records), `planGroupReferences` (read the checkpoint, judge it against the log), `namingRecordsOf`
// (the naming records the plan vouches for, then those the scan reads), `scanNamingRecords` (a
// scan of every live record, which verify compares with the checkpoint) and
// `replaceStaleCheckpoint`. Guarantees: a checkpoint that is absent, fails its checks or is stale
// against the log is not believed — the whole live log is scanned instead (it is derived data);
// one that is believed yields exactly the naming records of [max(lo, from), upTo) and the scan
// covers [max(lo, upTo), end); each record is read in bounded chunks (liveRecordChunks).

import type { SegmentedLog } from '../../segments/index.js';
import { corrupt } from '../errors.js';
import type { FileSystem } from '../fs/types.js';
import { decodeEntryLogId, decodeEntryNames } from './codec.js';
import type { GroupNames } from './payload-names.js';
import { checkpointStaleness, readReferenceCheckpoint, writeReferenceCheckpoint, type NamingRecord } from './reference-checkpoint.js';
import type { LogId } from './types.js';

/** How a group's references were found at open: `used` (the checkpoint, and a scan past it) or a full scan. */
export type CheckpointUse = 'used' | 'absent' | 'damaged' | 'stale';

/** The plan of one group's reference read. */
export interface ReferencePlan {
  checkpoint: CheckpointUse;
  /** Why the checkpoint was not believed (damaged, stale), else null. */
  reason: string | null;
  /** The naming records the checkpoint vouches for, from the first live index on. */
  claimed: NamingRecord[];
  /** The log's records from this index on are read. */
  scanFrom: number;
  /** Records the scan read (counted as `namingRecordsOf` runs), and their bytes. */
  scanned: number;
  scannedBytes: number;
  /** The coverage of the checkpoint on disk that the log store must lower before a truncation cuts it. */
  durable: { from: number; upTo: number } | null;
}

const CHUNK_ENTRIES = 512;
const CHUNK_BYTES = 8 * 1024 * 1024;

/**
 * The live records of `log` from index `from` to its end, in chunks (one chunk in memory at a
 * time): the reader of step 5, of the offline reference scan and of verify's cross-check.
 */
export async function* liveRecordChunks(log: SegmentedLog, from: number): AsyncGenerator<Uint8Array[]> {
  for (let at = from; at < log.endIndex; ) {
    const recs = await log.read(at, CHUNK_ENTRIES, CHUNK_BYTES);
    if (recs.length === 0) break;
    yield recs;
    at += recs.length;
  }
}

/** The id of the record at `index` of `log` (which must hold it). */
export async function readRecordLogId(log: SegmentedLog, index: number): Promise<LogId> {
  const [rec] = await log.read(index, 1);
  if (rec === undefined) throw corrupt(`the log has no record ${index}`, { index });
  return decodeEntryLogId(rec);
}

/**
 * Reads the checkpoint of `groupDir` and judges it against `log`, whose live records start at
 * `lo`. `listed`: false when a listing of `groupDir` just showed no checkpoint file (no open is
 * tried then).
 */
export async function planGroupReferences(fs: FileSystem, groupDir: string, log: SegmentedLog, lo: number, listed = true): Promise<ReferencePlan> {
  const end = log.endIndex;
  const read: Awaited<ReturnType<typeof readReferenceCheckpoint>> = listed ? await readReferenceCheckpoint(fs, groupDir) : { kind: 'absent' };
  if (read.kind === 'absent') return fullScanPlan(lo, 'absent', null);
  if (read.kind === 'damaged') return fullScanPlan(lo, 'damaged', read.reason);
  const c = read.checkpoint;
  const stale = await checkpointStaleness(c, lo, end, (i) => readRecordLogId(log, i));
  if (stale !== null) return fullScanPlan(lo, 'stale', stale);
  const claimed = c.records.filter((r) => r.logId.index >= lo);
  // A checkpoint that covers nothing vouches for nothing: every live record is read (it may start
  // below `lo`'s old place, after a truncation of everything and an append at a lower index).
  const scanFrom = c.upTo > c.from ? Math.max(lo, c.upTo) : lo;
  return { checkpoint: 'used', reason: null, claimed, scanFrom, scanned: 0, scannedBytes: 0, durable: { from: c.from, upTo: c.upTo } };
}

/** The naming records of the plan: those it claims, then those a scan of the rest of the log finds. */
export async function* namingRecordsOf(plan: ReferencePlan, log: SegmentedLog): AsyncGenerator<NamingRecord> {
  yield* plan.claimed;
  for await (const recs of liveRecordChunks(log, plan.scanFrom)) {
    plan.scanned += recs.length;
    for (const rec of recs) {
      plan.scannedBytes += rec.length;
      const { logId, digests } = decodeEntryNames(rec);
      if (digests.length > 0) yield { logId, digests };
    }
  }
}

/** Every naming record of the live log [lo, end), by a scan (verify's cross-check). */
export async function* scanNamingRecords(log: SegmentedLog, lo: number): AsyncGenerator<NamingRecord> {
  yield* namingRecordsOf(fullScanPlan(lo, 'absent', null), log);
}

/** A plan that believes no checkpoint: every live record from `lo` on is read. */
function fullScanPlan(lo: number, checkpoint: CheckpointUse, reason: string | null): ReferencePlan {
  return { checkpoint, reason, claimed: [], scanFrom: lo, scanned: 0, scannedBytes: 0, durable: null };
}

/**
 * After a scan that did not believe the checkpoint on disk (damaged or stale): replaces it by
 * one of the whole live log (every record durable: the log was opened), so that it is never
 * believed later by accident; answers its coverage. An absent one stays absent until the log
 * store writes one.
 */
export async function replaceStaleCheckpoint(
  fs: FileSystem,
  groupDir: string,
  plan: ReferencePlan,
  lo: number,
  end: number,
  last: LogId | null,
  names: GroupNames,
): Promise<{ from: number; upTo: number } | null> {
  if (plan.checkpoint !== 'damaged' && plan.checkpoint !== 'stale') return plan.durable;
  const upTo = Math.max(lo, end);
  await writeReferenceCheckpoint(fs, groupDir, { from: lo, upTo, last: upTo > lo ? last : null, records: names.between(lo, upTo) });
  return { from: lo, upTo };
}
