// Offline check of a Raft group's payload reference checkpoint (lib/raft/reference-checkpoint.ts)
// against its log: the cross-check `seglog verify` runs beside the group's other checks.
//
// Owns: `ReferenceCheckpointCheck`. Fed the group's live log records by the segmented-log check
// (which reads every record anyway), it reports as errors: a checkpoint file that fails its
// checks (open does not believe it and rebuilds it by a scan: derived data, but damage all the
// same), one open would find stale against the log (no sequence of calls and crashes leaves one),
// and one whose claims differ from the records it covers. A leftover temporary file is fine
// (the next checkpoint write replaces it). Read-only: it never opens the log.

import * as path from 'node:path';
import { decodeEntryNames } from '../../raft/codec.js';
import { checkpointDisagreement } from '../../raft/payload-references.js';
import { REFS_FILE, checkpointStaleness, readReferenceCheckpoint, type NamingRecord, type ReferenceCheckpoint } from '../../raft/reference-checkpoint.js';
import type { LogId } from '../../raft/types.js';
import { VerifyError, messageOf, type VerifyContext } from './context.js';

/** One group's checkpoint check: `start`, then `onRecord` for each live record, then `finish`. */
export class ReferenceCheckpointCheck {
  readonly #ctx: VerifyContext;
  readonly #file: string;
  #checkpoint: ReferenceCheckpoint | null = null;
  readonly #scanned: NamingRecord[] = [];
  #lastId: LogId | null = null;

  constructor(ctx: VerifyContext, groupDir: string) {
    this.#ctx = ctx;
    this.#file = path.join(groupDir, REFS_FILE);
  }

  /** Reads the checkpoint (a missing one is fine: open scans the whole log). */
  async start(): Promise<void> {
    let read;
    try {
      read = await readReferenceCheckpoint(this.#ctx.fs, path.dirname(this.#file));
    } catch (err) {
      if (err instanceof VerifyError) throw err;
      this.#ctx.error(this.#file, `raft reference checkpoint: ${messageOf(err)}`);
      return;
    }
    if (read.kind === 'damaged') {
      this.#ctx.error(this.#file, `raft reference checkpoint is damaged (${read.reason}); open does not believe it and rebuilds it by a scan of the log`);
    } else if (read.kind === 'ok') {
      this.#checkpoint = read.checkpoint;
      this.#ctx.sawFile((await this.#ctx.fs.stat(this.#file))?.size ?? 0);
    }
  }

  /** A live record of the log, in index order. */
  onRecord(index: number, record: Uint8Array): void {
    const c = this.#checkpoint;
    if (c === null || index >= c.upTo || c.upTo <= c.from) return; // past it, or it covers nothing
    const { logId, digests } = decodeEntryNames(record);
    if (index === c.upTo - 1) this.#lastId = logId;
    if (digests.length > 0) this.#scanned.push({ logId, digests });
  }

  /** Compares the checkpoint with the records seen; `lo` is the first live index (after the purged id), `end` the log's end. */
  async finish(lo: number, end: number): Promise<void> {
    const c = this.#checkpoint;
    if (c === null) return;
    const stale = await checkpointStaleness(c, lo, end, async (index) => {
      if (index !== c.upTo - 1 || this.#lastId === null) throw new Error(`record ${index} was not read`);
      return this.#lastId;
    }).catch((err: unknown) => `its last covered record cannot be read (${messageOf(err)})`);
    if (stale !== null) {
      this.#ctx.error(this.#file, `raft reference checkpoint disagrees with the log: ${stale}; open does not believe it and rebuilds it by a scan`);
      return;
    }
    const claimed = c.records.filter((r) => r.logId.index >= lo);
    const scanned = this.#scanned.filter((r) => r.logId.index >= lo);
    const differ = checkpointDisagreement(claimed, scanned);
    if (differ !== null) this.#ctx.error(this.#file, `raft reference checkpoint disagrees with the log: ${differ}`);
  }
}
