// The state one open segmented log shares between its rooms (segments/README.md).
//
// Owns: `LogState`: the settings, the physical state (the segment list as the last committed
// manifest names it, plus written-but-unsynced records in the active segment), the logical state
// callers see (first and end index, which run ahead of the physical state by the queued
// operations), the poison, the active segment's file lease and the counters. Every room reads
// it; each field says which rooms change it. Nothing else lives here: what only one room needs
// is that room's own.

import type { SeglogError } from '../lib/errors.js';
import type { FileHandle, FileSystem } from '../lib/fs/types.js';
import { InlineSyncPolicy } from '../lib/fs/inline-sync.js';
import type { FdCache } from './fd-cache.js';
import type { ManifestCell } from './manifest.js';
import type { SegmentMistakes } from './mistakes.js';
import type { LogConfig } from './options.js';
import type { Segment } from './segment.js';
import { SyncSchedule } from './sync-policy.js';
import type { SegmentedLogStats } from './types.js';

export class LogState {
  readonly dir: string;
  readonly fs: FileSystem;
  readonly fdCache: FdCache;
  readonly segmentBytes: number;
  readonly maxRecordBytes: number;
  /** The sync policy's decisions; replaced whole by `setSyncPolicy` (log.ts). */
  schedule: SyncSchedule;
  readonly recycle: boolean;
  /** Every file of the log was durable at open (LogConfig.knownDurable): recovery syncs nothing it read. */
  readonly knownDurable: boolean;
  /** Test-only planted mistakes (mistakes.ts); empty in every real use. */
  readonly mistakes: SegmentMistakes;
  readonly cell: ManifestCell;
  /**
   * This log's identity among the writers of the thread (lib/fs/inline-sync.ts keys its record of
   * queued work by it): the log object callers hold.
   */
  readonly owner: object;
  /** Where a lone append's sync waits (from `inlineSyncBelowMs`). */
  readonly syncs: InlineSyncPolicy;
  /** Where a lone group's write waits (from `inlineSyncBelowMs`). */
  readonly writes: InlineSyncPolicy;

  // Physical state: changed by recovery and by a structural change's install (structure.ts), and
  // by a group write or a failed sync's rollback for the active segment's table.
  segments: Segment[] = [];
  active!: Segment;
  physFirst = 0;
  /** Generation of the last committed manifest (structure.ts `commit` alone advances it). */
  generation = 0;

  // Logical state: changed by the calls as they are admitted (log.ts), and rolled back to the
  // physical state when a write fails (queue.ts) or a sync fails (syncer.ts).
  first = 0;
  end = 0;

  /** Set once a sync (or a cut after a failed write, or a structural change) failed (syncer.ts). */
  poison: SeglogError | null = null;
  closing: Promise<void> | null = null;
  /** The writer loop, while it runs (log.ts). */
  pump: Promise<void> | null = null;
  /** The active segment's handle, held while writes or syncs are outstanding (writer.ts takes it). */
  lease: { handle: FileHandle; release: () => void; segment: Segment } | null = null;
  /** Clock of the sealed-table LRU (table-cache.ts). */
  useTick = 0;
  readonly stats: SegmentedLogStats = { segments: 0, indexRebuilds: 0, groupWrites: 0, syncs: 0, rolls: 0, recoveryScanBytes: 0, recycled: 0 };

  constructor(dir: string, config: LogConfig, cell: ManifestCell, owner: object) {
    this.dir = dir;
    this.fs = config.fs;
    this.fdCache = config.fdCache;
    this.segmentBytes = config.segmentBytes;
    this.maxRecordBytes = config.maxRecordBytes;
    this.schedule = new SyncSchedule(config.policy);
    this.recycle = config.recycle;
    this.knownDurable = config.knownDurable;
    this.mistakes = config.mistakes;
    this.cell = cell;
    this.owner = owner;
    this.syncs = new InlineSyncPolicy(config.inlineBelowMs);
    this.writes = new InlineSyncPolicy(config.inlineBelowMs);
  }

  /** The physical end: just after the active segment's last live record. */
  physEnd(): number {
    return this.active.base + this.active.count;
  }

  releaseLease(): void {
    if (this.lease !== null) {
      this.lease.release();
      this.lease = null;
    }
  }
}
