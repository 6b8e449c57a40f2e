// The payload reference checkpoint of one group: which live records of its Raft log name payload
// digests, written beside the log so that opening the group reads only the records past it.
//
// Owns: the `refs.ckpt` file (format and checks below; docs/raft-store.md, "The reference
// checkpoint"), `readReferenceCheckpoint`, `writeReferenceCheckpoint`, `checkpointStaleness`
// (whether a decoded checkpoint may be believed against the log it describes), and
// `ReferenceCheckpointer`, the writer a group's log store drives. Guarantees:
// - a checkpoint says: "the records of the log with an index in [from, upTo) that name payloads
//   are exactly these (log id and digests), and the record at upTo − 1 has the id `last`"; it is
//   derived data, checksummed, and rebuilt by a scan whenever it is absent, damaged or stale;
// - only durable records are ever claimed (a checkpoint is captured once the records it covers
//   are durable), and a truncation that would cut claimed records issues only after a checkpoint
//   whose coverage ends at the cut is durable: in every state a crash leaves, the checkpoint on
//   disk claims records the log still holds, as they are, or is refused by the checks at open;
// - a file is replaced by writing a temporary file, syncing it, renaming it over the old one and
//   syncing the directory: a crash leaves the old checkpoint or the new one, whole.

import * as path from 'node:path';
import { crc32 } from 'node:zlib';
import type { SegmentedLog } from '../../segments/index.js';
import { corrupt, fromIo } from '../errors.js';
import type { FileHandle, FileSystem } from '../fs/types.js';
import { ByteReader, ByteWriter, readOptionalLogId, writeOptionalLogId } from './codec.js';
import { replaceFileDurably } from './fs-layout.js';
import type { GroupNames } from './payload-names.js';
import { cloneLogId, logIdEquals, type LogId } from './types.js';

/** The checkpoint file in a group directory, and the temporary file that replaces it. */
export const REFS_FILE = 'refs.ckpt';
export const REFS_TEMP = 'refs.ckpt.tmp';

const MAGIC = Buffer.from('SGLREFS1', 'latin1');
const VERSION = 1;
const DIGEST_PREFIX = 'sha256:';
const DIGEST_BYTES = 32;
/** A checkpoint file larger than this is not one (a record per entry of a 2^53-entry log would not fit anyway). */
const MAX_FILE_BYTES = 1024 * 1024 * 1024;

/** One record that names payloads. */
export interface NamingRecord {
  logId: LogId;
  digests: readonly string[];
}

/** A decoded checkpoint (see the module comment for what it claims). */
export interface ReferenceCheckpoint {
  from: number;
  upTo: number;
  /** The id of the record at upTo − 1; null when the covered range is empty. */
  last: LogId | null;
  records: NamingRecord[];
}

/** The checkpoint's bytes: magic, version, from, upTo, last, the records, CRC-32 (docs/raft-store.md). */
export function encodeReferenceCheckpoint(c: ReferenceCheckpoint): Uint8Array {
  const w = new ByteWriter(64 + c.records.length * (12 + DIGEST_BYTES));
  w.bytes(MAGIC).u8(VERSION).varint(c.from).varint(c.upTo);
  writeOptionalLogId(w, c.last);
  w.varint(c.records.length);
  for (const r of c.records) {
    w.varint(r.logId.leaderId.term).varint(r.logId.leaderId.nodeId).varint(r.logId.index).varint(r.digests.length);
    for (const d of r.digests) w.bytes(Buffer.from(d.slice(DIGEST_PREFIX.length), 'hex'));
  }
  const body = w.view();
  const out = new Uint8Array(body.length + 4);
  out.set(body);
  new DataView(out.buffer).setUint32(body.length, crc32(body), true);
  return out;
}

/** Decodes and checks a checkpoint's bytes; CORRUPT (naming `file`) on anything else. */
export function decodeReferenceCheckpoint(bytes: Uint8Array, file: string): ReferenceCheckpoint {
  if (bytes.length < MAGIC.length + 4 + 4) throw corrupt(`${file} is ${bytes.length} bytes: not a reference checkpoint`, { path: file });
  const body = bytes.subarray(0, bytes.length - 4);
  const sum = new DataView(bytes.buffer, bytes.byteOffset, bytes.length).getUint32(bytes.length - 4, true);
  if (sum !== crc32(body)) throw corrupt(`${file} fails its checksum`, { path: file });
  if (!Buffer.from(body.subarray(0, MAGIC.length)).equals(MAGIC)) throw corrupt(`${file} has a wrong magic number`, { path: file });
  const r = new ByteReader(body.subarray(MAGIC.length), file);
  if (r.u8() !== VERSION) r.fail('unknown version');
  const from = r.varint();
  const upTo = r.varint();
  const last = readOptionalLogId(r);
  if ((last === null) !== upTo <= from) r.fail('the last covered id does not match the covered range');
  if (last !== null && last.index !== upTo - 1) r.fail(`the last covered id has index ${last.index}, not ${upTo - 1}`);
  const count = r.count(4 + DIGEST_BYTES);
  const records: NamingRecord[] = [];
  let prev = from - 1;
  for (let i = 0; i < count; i++) {
    const term = r.varint();
    const nodeId = r.varint();
    const index = r.varint();
    if (index <= prev || index >= upTo) r.fail(`record index ${index} out of order or outside [${from}, ${upTo})`);
    prev = index;
    const n = r.count(DIGEST_BYTES);
    if (n === 0) r.fail('a record naming no payload');
    const digests: string[] = [];
    for (let k = 0; k < n; k++) digests.push(DIGEST_PREFIX + Buffer.from(r.view(DIGEST_BYTES)).toString('hex'));
    records.push({ logId: { leaderId: { term, nodeId }, index }, digests });
  }
  r.end();
  return { from, upTo, last, records };
}

/** What a group directory's checkpoint file holds. */
export type CheckpointRead = { kind: 'absent' } | { kind: 'damaged'; reason: string } | { kind: 'ok'; checkpoint: ReferenceCheckpoint };

/** Reads and decodes the checkpoint of the group directory `groupDir`. */
export async function readReferenceCheckpoint(fs: FileSystem, groupDir: string): Promise<CheckpointRead> {
  const file = path.join(groupDir, REFS_FILE);
  let h: FileHandle;
  try {
    h = await fs.open(file, 'read');
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return { kind: 'absent' };
    throw fromIo(err, 'open', file);
  }
  let bytes: Uint8Array;
  try {
    const size = await h.size();
    if (size > MAX_FILE_BYTES) return { kind: 'damaged', reason: `${file} is ${size} bytes, more than a checkpoint may be` };
    bytes = new Uint8Array(size);
    const n = await h.read(bytes, 0);
    if (n !== size) return { kind: 'damaged', reason: `${file} ends early` };
  } catch (err) {
    throw fromIo(err, 'read', file);
  } finally {
    await h.close().catch(() => undefined);
  }
  try {
    return { kind: 'ok', checkpoint: decodeReferenceCheckpoint(bytes, file) };
  } catch (err) {
    return { kind: 'damaged', reason: err instanceof Error ? err.message : String(err) };
  }
}

/** Replaces the group's checkpoint durably: temporary file, datasync, rename, directory sync. */
export function writeReferenceCheckpoint(fs: FileSystem, groupDir: string, c: ReferenceCheckpoint): Promise<void> {
  return replaceFileDurably(fs, groupDir, REFS_FILE, REFS_TEMP, encodeReferenceCheckpoint(c));
}

/**
 * Why the checkpoint `c` may not be believed for the log whose live records are [lo, end), or
 * null when it may: it must not reach past the log's end (it would claim records that are gone),
 * must not start after `lo` while covering anything (records before it would be unknown), and
 * the record at upTo − 1, when live, must have the id it names (`readLogId`).
 */
export async function checkpointStaleness(c: ReferenceCheckpoint, lo: number, end: number, readLogId: (index: number) => Promise<LogId>): Promise<string | null> {
  if (c.upTo <= c.from) return null; // claims nothing
  if (c.upTo > end) return `it covers the log up to ${c.upTo}, past its end ${end}`;
  if (c.from > lo && c.upTo > lo) return `it starts at ${c.from}, after the first live record ${lo}`;
  if (c.upTo - 1 >= lo && c.last !== null) {
    const at = await readLogId(c.upTo - 1);
    if (!logIdEquals(at, c.last)) return `the record at ${c.upTo - 1} has another log id than the one it names`;
  }
  return null;
}

/** The coverage of the checkpoint on disk (or of one being written, once it may be). */
interface Coverage {
  from: number;
  upTo: number;
}

/** What the log store lends its checkpointer. */
export interface CheckpointHost {
  log: SegmentedLog;
  names: GroupNames;
  /** The first live index (after the purged id, once durable). */
  low(): number;
  /** The id of the live record at `index`. */
  readLogId(index: number): Promise<LogId>;
}

/**
 * The live record bytes a group may leave to be scanned at the next open instead of writing its
 * first checkpoint at close: a small group (a queue that holds a few entries) is then one file
 * and four system calls lighter, and its close makes no temporary file, sync, rename and
 * directory sync; its open reads those few records (from the log's last segment, which its
 * first read reads anyway) instead of the checkpoint file. Once a checkpoint exists it is kept
 * up to date as before.
 */
export const REFERENCE_SCAN_ALLOWANCE_BYTES = 64 * 1024;

/**
 * Writes one group's checkpoint off the append path: after every `everyBytes` of appended
 * records (once they are durable), when a truncation would cut claimed records (before it is
 * issued), and at close — unless no checkpoint exists yet and the live records not covered come
 * to at most `scanAllowance` bytes (REFERENCE_SCAN_ALLOWANCE_BYTES). One write at a time; a
 * failed one rejects whatever waits on it (the log store poisons itself).
 */
export class ReferenceCheckpointer {
  readonly #fs: FileSystem;
  readonly #groupDir: string;
  readonly #everyBytes: number;
  #host: CheckpointHost | null = null;
  /** The coverage of the checkpoint on disk (null: none to respect). */
  #durable: Coverage | null;
  #inFlight: Promise<void> | null = null;
  #bytesSince = 0;
  #failure: ((err: unknown) => void) | null = null;
  /** Test-only: skip the lowering before a truncation (the crash tests must catch it). */
  readonly #skipLowering: boolean;
  /** Bytes of live records no checkpoint covers (an over-estimate: a truncation does not lower it). */
  #uncovered: number;
  readonly #scanAllowance: number;

  /**
   * `uncoveredBytes`: the bytes of the live records the open read past the checkpoint it
   * believed (all of them without one).
   */
  constructor(
    fs: FileSystem,
    groupDir: string,
    everyBytes: number,
    durable: Coverage | null,
    options: { skipLowering?: boolean; uncoveredBytes?: number; scanAllowance?: number } = {},
  ) {
    this.#fs = fs;
    this.#groupDir = groupDir;
    this.#everyBytes = everyBytes;
    this.#durable = durable;
    this.#skipLowering = options.skipLowering === true;
    this.#uncovered = options.uncoveredBytes ?? 0;
    this.#scanAllowance = options.scanAllowance ?? REFERENCE_SCAN_ALLOWANCE_BYTES;
  }

  /** Connects the log store (at its construction); `onFailure` hears a failed background write. */
  attach(host: CheckpointHost, onFailure: (err: unknown) => void): void {
    this.#host = host;
    this.#failure = onFailure;
  }

  #hostOf(): CheckpointHost {
    if (this.#host === null) throw new Error('reference checkpointer used before attach');
    return this.#host;
  }

  /**
   * Records `end`, `last` staged with `bytes` of records; once `everyBytes` accumulated and no
   * write is in flight, a checkpoint of [low, end) is written after `makeDurable()` resolves (it
   * never holds the append up). `makeDurable` is called only then: it may sync (the group's log
   * is synced by the node journal's checkpoints otherwise, fs-log.ts).
   */
  appended(bytes: number, end: number, last: LogId, makeDurable: () => Promise<void>): void {
    this.#uncovered += bytes;
    this.#bytesSince += bytes;
    if (this.#bytesSince < this.#everyBytes || this.#inFlight !== null) return;
    this.#bytesSince = 0;
    const lastId = cloneLogId(last);
    this.#run(async () => {
      await makeDurable();
      await this.#write(end, lastId);
    });
  }

  #run(job: () => Promise<void>): Promise<void> {
    const p = job();
    const tracked = p.finally(() => {
      if (this.#inFlight === tracked) this.#inFlight = null;
    });
    this.#inFlight = tracked;
    tracked.catch((err: unknown) => this.#failure?.(err));
    return tracked;
  }

  /** Captures the live naming records below `upTo` (all durable) and writes them as the checkpoint. */
  async #write(upTo: number, last: LogId | null): Promise<void> {
    const host = this.#hostOf();
    const from = host.low();
    const records = upTo > from ? host.names.between(from, upTo) : [];
    const coverage = { from, upTo };
    // Believed as soon as the rename may land: a truncation arriving meanwhile waits for this write.
    const previous = this.#durable;
    this.#durable = previous === null || previous.upTo <= upTo ? coverage : previous;
    await writeReferenceCheckpoint(this.#fs, this.#groupDir, { from, upTo: Math.max(from, upTo), last: upTo > from ? last : null, records });
    this.#durable = coverage;
  }

  /**
   * Before a truncation at `at` is issued: null when the checkpoint on disk claims nothing at or
   * after `at` and no write is in flight; otherwise a promise that settles once the checkpoint on
   * disk ends at `at` at most (a write of [low, at), durable, when it must be lowered).
   */
  beforeTruncate(at: number): Promise<void> | null {
    // mistakes.truncateKeepsCheckpoint: `#skipLowering` leaves the claims of the cut records on disk.
    if (this.#inFlight === null && (this.#durable === null || this.#durable.upTo <= at || this.#skipLowering)) return null;
    const previous = this.#inFlight ?? Promise.resolve();
    return this.#run(async () => {
      await previous.catch(() => undefined);
      const d = this.#durable;
      if (d === null || d.upTo <= at || this.#skipLowering) return;
      const host = this.#hostOf();
      const lo = host.low();
      const upTo = Math.min(at, d.upTo);
      await this.#write(upTo, upTo > lo ? await host.readLogId(upTo - 1) : null);
    });
  }

  /** Settles when no write is in flight (never rejects). */
  async settled(): Promise<void> {
    while (this.#inFlight !== null) await this.#inFlight.catch(() => undefined);
  }

  /**
   * At close, every write durable: the checkpoint of the whole live log, unless the one on disk
   * already is. `last` is the last record's id (null: no live record).
   */
  async close(last: LogId | null): Promise<void> {
    await this.settled();
    const host = this.#hostOf();
    const lo = host.low();
    const end = host.log.endIndex;
    const d = this.#durable;
    if (d !== null && d.from === lo && d.upTo === end) return;
    // No checkpoint, and no live record or only a few: the next open scans them (a small group
    // stays one file lighter, and its close writes nothing here).
    if (d === null && (end <= lo || this.#uncovered <= this.#scanAllowance)) return;
    await this.#write(end, end > lo ? last : null);
  }
}
