// Replay of the node journal into one group's log at open: the group's own files are made to hold
// what the journaled writes of the group, applied in order, leave.
//
// Owns: `journalView` and `replayJournal` — from the group's ops that the journal still holds (node-journal.ts, in
// call order), the state they establish from the lowest index they touch (`planJournalState`),
// and the smallest change that makes the group's log hold exactly that: keep the longest matching
// prefix, cut the rest, stage what follows from the journal. Guarantees (the argument is
// docs/raft-store.md, "The node journal"):
// - what the journal's ops say is the group's state from `start` on; below it the group's files
//   are as the last checkpoint left them (durable: the checkpoint synced them), above the purged
//   id only: a group log that ends below `start`, or starts above it while holding entries, lost
//   what a checkpoint made durable: CORRUPT, never a log with a hole;
// - a record the group's log holds and the journal's state has at the same index must equal it
//   byte for byte to be kept; the first one that differs (or is missing) is where the log is cut
//   and the journal's entries staged; the log ends where the journal's state ends (entries past
//   it were never durable: the journal's durable prefix ends before their records);
// - entries at or below the purged id are never written back;
// - memory: one journal record's entries and one chunk of the log's records at a time.

import type { SegmentedLog } from '../../segments/index.js';
import { corrupt } from '../errors.js';
import type { JournalOp, NodeJournal } from './node-journal.js';
import { nextIndex, type LogId } from './types.js';

const COMPARE_CHUNK_ENTRIES = 512;
const COMPARE_CHUNK_BYTES = 8 * 1024 * 1024;
/** Replayed entries staged at once (at most, and at most COMPARE_CHUNK_BYTES of them). */
const STAGE_BATCH = 256;

/** A run of entries of the journal's state: `count` entries from `first`, in the append record at `at`. */
interface Run {
  first: number;
  count: number;
  at: number;
}

/** What a group's journaled ops establish. */
export interface JournalState {
  /** The lowest index the ops determine: the log holds exactly `runs` from here to `end`. */
  start: number;
  /** Where the log ends after the ops. */
  end: number;
  /** An append started the log afresh at `start` (a log that held nothing takes its first entry at any index). */
  fresh: boolean;
  /** The entries of [start, end), in order (each run a piece of one append record). */
  runs: Run[];
}

/** Applies the ops to an abstract log: which entries they leave from the lowest index they touch. */
export function planJournalState(ops: readonly JournalOp[]): JournalState {
  let runs: Run[] = [];
  let start = Infinity;
  let end = -1;
  let fresh = false;
  const cut = (i: number): void => {
    while (runs.length > 0 && (runs[runs.length - 1] as Run).first >= i) runs.pop();
    const last = runs[runs.length - 1];
    if (last !== undefined && last.first + last.count > i) last.count = i - last.first;
  };
  for (const op of ops) {
    if (op.kind === 'flushed') throw new RangeError('planJournalState takes the ops after the last flushed mark');
    if (op.kind === 'truncate') {
      cut(op.index);
      start = Math.min(start, op.index);
      end = Math.min(end === -1 ? op.index : end, op.index);
      continue;
    }
    if (end !== -1 && op.first !== end) {
      // Not where the log ended: the log was empty (never written, or purged past its end) and
      // took this entry at its own index; nothing below it is part of the log any more.
      runs = [];
      start = op.first;
      fresh = true;
    } else {
      cut(op.first);
      start = Math.min(start, op.first);
    }
    runs.push({ first: op.first, count: op.count, at: op.at });
    end = op.first + op.count;
  }
  return { start, end: Math.max(end, start), fresh, runs };
}

/**
 * What a group's log shows once the journal's ops are replayed, found without changing it: the
 * log's records in [`keepFrom`, `keep`) stay (none when `reset`), and the journal's entries of
 * [`keep`, `end`) follow. What replay (below) makes the log hold, and what the offline readers
 * (payload-references.ts) read of a node that was not reopened since a crash.
 */
export interface JournalView {
  /** The log is emptied and begins again at `keep`. */
  reset: boolean;
  /** Records of the log below this index are kept (from the log's first live one). */
  keep: number;
  /** Where the log ends. */
  end: number;
  /** The journal's entries of [keep, end), in index order, each in its own buffer. */
  entries(): AsyncGenerator<{ index: number; record: Uint8Array }>;
}

/** The view of `log` (its purge finished) after the group's journaled `ops`; null when there are none. */
export async function journalView(group: string, log: SegmentedLog, purged: LogId | null, ops: readonly JournalOp[], journal: NodeJournal): Promise<JournalView | null> {
  // Every journaled write of the group before its last flushed mark is in its log, durably.
  let from = ops.length;
  while (from > 0 && (ops[from - 1] as JournalOp).kind !== 'flushed') from--;
  if (from === ops.length) return null;
  const state = planJournalState(ops.slice(from));
  const lo = Math.max(state.start, nextIndex(purged));
  const end = Math.max(state.end, lo);
  const name = JSON.stringify(group);
  let keep = lo;
  let reset = false;
  if (log.endIndex < lo || log.firstIndex > lo || (state.fresh && log.firstIndex !== lo)) {
    if (log.endIndex !== log.firstIndex && !(state.fresh && lo === state.start)) {
      throw corrupt(
        `raft group ${name}: its log holds [${log.firstIndex}, ${log.endIndex}) where the node journal continues it from ${lo}: entries a checkpoint made durable are gone`,
        { group, first: log.firstIndex, end: log.endIndex, journal: lo },
      );
    }
    reset = true;
  } else {
    keep = await matchingPrefix(group, log, state.runs, lo, Math.min(log.endIndex, end), journal);
  }
  const entries = async function* (): AsyncGenerator<{ index: number; record: Uint8Array }> {
    let expected = keep;
    for (const run of state.runs) {
      if (run.first + run.count <= keep) continue;
      if (run.first > expected) throw corrupt(`raft group ${name}: the node journal leaves a hole at ${expected}`, { group, index: expected });
      const records = await journal.readAppend(run.at);
      if (records.length < run.count) throw corrupt(`raft group ${name}: node journal record ${run.at} holds ${records.length} entries, not ${run.count}`, { group });
      // Copies: a staged record must stay as it is until the log's sync, whatever the reader does with its buffers.
      for (let i = expected - run.first; i < run.count; i++) yield { index: expected++, record: Uint8Array.prototype.slice.call(records[i] as Uint8Array) };
    }
    if (expected !== end) throw corrupt(`raft group ${name}: the node journal ends its entries at ${expected}, not ${end}`, { group });
  };
  return { reset, keep, end, entries };
}

/**
 * Makes `log` (a group's log, after its purge was finished) hold what the group's journaled ops
 * establish (its `journalView`). Answers how many entries were staged and whether the log was
 * cut; the staged entries are durable at the node's next checkpoint (the journal keeps them
 * until then).
 */
export async function replayJournal(
  group: string,
  log: SegmentedLog,
  purged: LogId | null,
  ops: readonly JournalOp[],
  journal: NodeJournal,
): Promise<{ staged: number; cut: boolean }> {
  const view = await journalView(group, log, purged, ops, journal);
  if (view === null) return { staged: 0, cut: false };
  let cut = false;
  if (view.reset) {
    cut = log.endIndex !== log.firstIndex;
    await log.reset(view.keep);
  }
  if (log.endIndex > view.keep) {
    await log.truncateAfter(view.keep);
    cut = true;
  }
  let staged = 0;
  let batch: Uint8Array[] = [];
  let batchBytes = 0;
  const flush = (): void => {
    if (batch.length === 0) return;
    const { first, durable } = log.stage(batch);
    durable.catch(() => undefined); // a failure poisons the log: the node's checkpoint reports it
    if (first !== view.keep + staged) throw corrupt(`raft group ${JSON.stringify(group)}: replay staged at ${first}, expected ${view.keep + staged}`, { group });
    staged += batch.length;
    batch = [];
    batchBytes = 0;
  };
  for await (const { record } of view.entries()) {
    batch.push(record);
    batchBytes += record.length;
    if (batch.length >= STAGE_BATCH || batchBytes >= COMPARE_CHUNK_BYTES) flush();
  }
  flush();
  return { staged, cut };
}

/**
 * The first index in [lo, upTo) where the log's record differs from the journal's state (or
 * upTo when none does): how much of the log replay keeps.
 */
async function matchingPrefix(group: string, log: SegmentedLog, runs: readonly Run[], lo: number, upTo: number, journal: NodeJournal): Promise<number> {
  let k = lo;
  for (const run of runs) {
    if (k >= upTo) break;
    if (run.first + run.count <= k) continue;
    if (run.first > k) throw corrupt(`raft group ${JSON.stringify(group)}: the node journal leaves a hole at ${k}`, { group, index: k });
    const entries = await journal.readAppend(run.at);
    const stop = Math.min(run.first + run.count, upTo);
    while (k < stop) {
      const recs = await log.read(k, Math.min(stop - k, COMPARE_CHUNK_ENTRIES), COMPARE_CHUNK_BYTES);
      if (recs.length === 0) return k;
      for (const rec of recs) {
        const e = entries[k - run.first];
        if (e === undefined || Buffer.compare(rec, e) !== 0) return k;
        k++;
      }
    }
  }
  return k;
}
