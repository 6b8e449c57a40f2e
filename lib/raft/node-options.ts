// The options of a Raft node: their public shape, their defaults, and their checking.
//
// Owns: `RaftNodeOptions`, the node's defaults (`RAFT_DEFAULT_*`), and `parseNodeOptions`, which
// turns what a caller passed into the `NodeSettings` every group of the node is opened with, or
// rejects it with INVALID before anything touches the disk.

import type { FdCache } from '../../segments/index.js';
import type { Clock } from '../clock.js';
import { invalid } from '../errors.js';
import { realFs } from '../fs/real.js';
import type { FileSystem } from '../fs/types.js';
import { FS_DEFAULT_MAX_READ_BYTES, FS_DEFAULT_MAX_READ_ENTRIES } from './fs-log.js';
import type { RaftMistakes } from './mistakes.js';
import { kvPlugin, type KvPlugin } from './kv.js';
import type { StateMachinePlugin, StateMachinePluginFactory } from './plugin.js';

/** Default segment size of a group's Raft log. */
export const RAFT_DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024;
/** Default segment size of a group's applied journal. */
export const RAFT_DEFAULT_JOURNAL_SEGMENT_BYTES = 16 * 1024 * 1024;
/** Default largest encoded entry: a 64 MiB KV value plus room for its key and header. */
export const RAFT_DEFAULT_MAX_ENTRY_BYTES = 64 * 1024 * 1024 + 64 * 1024;

export interface RaftNodeOptions<P extends StateMachinePlugin<unknown> = KvPlugin> {
  /** The file-system layer (default: the real one). */
  fs?: FileSystem;
  /**
   * Monotonic milliseconds for the payload store's grace period and the node journal's window of
   * "another group wrote lately" (default: the machine's clock).
   */
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
  /** Options of the payload store (`openPayloadStore`): grace period, chunk size, whether a get checks the whole digest. */
  payloads?: { graceMs?: number; chunkBytes?: number; verifyDigestOnGet?: boolean };
  /**
   * A lone append's sync (the only write this thread's stores have in hand) waits on the calling
   * thread, blocking the event loop for the sync, while that log's recent syncs took less than
   * this on average (ms; default 1; 0: every sync and large write waits on libuv's pool); so does
   * the write of a lone group of appends of at most 4 MiB, while that log's group writes took
   * less. See `SegmentedLogOptions.inlineSyncBelowMs`.
   */
  inlineSyncBelowMs?: number;
}

/** What every group of a node is opened with, checked. */
export interface NodeSettings<P extends StateMachinePlugin<unknown>> {
  fs: FileSystem;
  plugin: StateMachinePluginFactory<P>;
  segmentBytes: number;
  journalSegmentBytes: number;
  fdCache: FdCache | undefined;
  maxReadEntries: number;
  maxReadBytes: number;
  maxEntryBytes: number;
  inlineSyncBelowMs: number;
  /** Test-only planted mistakes (mistakes.ts); not part of the options' type. */
  mistakes: RaftMistakes | undefined;
  /**
   * Test-only: the node journal's checkpoint threshold (node-journal.ts), so that the crash tests
   * see checkpoints within a few writes; not part of the options' type.
   */
  journalCheckpointBytes: number | undefined;
  /**
   * Test-only: the node journal's idle checkpoint delay (ms; 0: none, for a test that drives time
   * itself, whose runs must not depend on when a timer fires); not part of the options' type.
   */
  journalIdleCheckpointMs: number | undefined;
  /** Test-only: groups always journal their writes, or never (fs-log.ts JournalMode; default auto). */
  journalMode: 'auto' | 'journal' | 'direct' | 'alternate' | undefined;
  /**
   * Test-only: the live record bytes a group may leave to the next open's scan instead of writing
   * its first reference checkpoint at close (reference-checkpoint.ts; 0: always write one).
   */
  referenceScanAllowanceBytes: number | undefined;
}

function nonNegativeMs(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw invalid(`${what} must be a non-negative number`);
  return v;
}

function positiveInt(v: unknown, what: string, min = 1): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) throw invalid(`${what} must be an integer of at least ${min}`);
  return v;
}

/** Checks `options` (INVALID on the first bad one) and fills in the defaults. */
export function parseNodeOptions<P extends StateMachinePlugin<unknown>>(dir: string, options: RaftNodeOptions<P>): NodeSettings<P> {
  if (typeof dir !== 'string' || dir.length === 0) throw invalid('a raft node needs a directory');
  if (options.plugin !== undefined && typeof options.plugin !== 'function') throw invalid('options.plugin must be a plugin factory');
  return {
    fs: options.fs ?? realFs,
    plugin: options.plugin ?? (kvPlugin as unknown as StateMachinePluginFactory<P>),
    segmentBytes: positiveInt(options.segmentBytes ?? RAFT_DEFAULT_SEGMENT_BYTES, 'segmentBytes'),
    journalSegmentBytes: positiveInt(options.journalSegmentBytes ?? RAFT_DEFAULT_JOURNAL_SEGMENT_BYTES, 'journalSegmentBytes'),
    fdCache: options.fdCache,
    maxReadEntries: positiveInt(options.maxReadEntries ?? FS_DEFAULT_MAX_READ_ENTRIES, 'maxReadEntries'),
    maxReadBytes: positiveInt(options.maxReadBytes ?? FS_DEFAULT_MAX_READ_BYTES, 'maxReadBytes', 0),
    maxEntryBytes: positiveInt(options.maxEntryBytes ?? RAFT_DEFAULT_MAX_ENTRY_BYTES, 'maxEntryBytes'),
    inlineSyncBelowMs: nonNegativeMs(options.inlineSyncBelowMs ?? 1, 'inlineSyncBelowMs'),
    mistakes: (options as { mistakes?: RaftMistakes }).mistakes,
    journalCheckpointBytes: (options as { journalCheckpointBytes?: number }).journalCheckpointBytes,
    journalIdleCheckpointMs: (options as { journalIdleCheckpointMs?: number }).journalIdleCheckpointMs,
    journalMode: (options as { journalMode?: 'auto' | 'journal' | 'direct' | 'alternate' }).journalMode,
    referenceScanAllowanceBytes: (options as { referenceScanAllowanceBytes?: number }).referenceScanAllowanceBytes,
  };
}
