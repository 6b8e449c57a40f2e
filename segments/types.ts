// The public shapes of a segmented log: what `openSegmentedLog` answers and what it counts.
//
// Owns: `SegmentedLog` and `SegmentedLogStats` (docs/usage.md, the segmented log). The behaviour behind
// them is argued in docs/crash-safety.md (segmented log); the rooms that implement it are listed
// in segments/README.md.

export interface SegmentedLogStats {
  /** Live segments. */
  segments: number;
  /** Sealed-segment indexes rebuilt by a scan (missing or failing their checksum). */
  indexRebuilds: number;
  /** Group writes (one writev each). */
  groupWrites: number;
  /** fdatasyncs of segment data. */
  syncs: number;
  /** Segments sealed by a roll. */
  rolls: number;
  /** Bytes of the last segment that open validated by a scan (past what its index claimed). */
  recoveryScanBytes: number;
  /** New segments made out of the file of a dropped one (instead of a fresh file). */
  recycled: number;
}

/** A segmented log; see segments/log.ts and docs/usage.md. */
export interface SegmentedLog {
  /** First record not dropped. */
  readonly firstIndex: number;
  /** Index the next appended record takes. */
  readonly endIndex: number;
  /** Appends records; answers the index of the first. Durable on resolve under the default policy. */
  append(records: Uint8Array[]): Promise<number>;
  /**
   * Assigns indices now and makes the records readable at once; `durable` settles after the sync
   * that covers them (rejecting if their write or sync failed: the records then vanish). The
   * caller must not modify the records' bytes until `durable` settles. A `durable` the caller
   * drops is never reported as an unhandled rejection: a failure also poisons the log (every
   * later call is POISONED).
   */
  stage(records: Uint8Array[]): { first: number; durable: Promise<void> };
  /**
   * At most `limit` records from `from` and, past the first, at most `maxBytes` bytes of record
   * data (default: no byte bound). `from` below `firstIndex` is INVALID; at or past the end, [].
   */
  read(from: number, limit: number, maxBytes?: number): Promise<Uint8Array[]>;
  /** Removes [index, end); a no-op at or past the end; INVALID below `firstIndex`. */
  truncateAfter(index: number): Promise<void>;
  /** Removes [first, index); past the end it removes every record and first becomes end. */
  dropBefore(index: number): Promise<void>;
  /** Durably empties the log so that first = end = nextIndex. */
  reset(nextIndex: number): Promise<void>;
  /** Makes everything issued before it durable. */
  sync(): Promise<void>;
  /** Waits for in-flight work, syncs, releases files and the directory lock. Idempotent. */
  close(): Promise<void>;
  stats(): SegmentedLogStats;
}
