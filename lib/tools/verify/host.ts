// Offline check of a realm of the file-system host store (lib/host/fs/, docs/format-host.md).
//
// Owns: `isHostRealmDirectory`, `checkHostRealm`. Uses the host store's own decoders
// (lib/host/fs/format.ts), its record shape (`recOf`) and its visibility rule (`View`), and never
// opens the store (its open recovers: it rescans, syncs and rewrites notes). What it covers:
// - FORMAT, `checkpoint` and `fence/state`: two-slot cells (./cell.ts, both slots) whose values
//   decode; tokens only grow (no token in a stripe is above the fence state's highest).
// - Each stripe, as the store reads it: the file the checkpoint names (header: CRC, stripe, seq,
//   realm), the frames before the checkpoint position (never read again: a damaged one is a
//   warning), then every frame from the checkpoint on (length, lsn chain, CRC seeded with the
//   file's salt, payload decoding) following SEALs into the next files (their headers must name
//   the next lsn), up to the first frame that does not validate; the published note must pass its
//   CRC and lie on that chain (records it names are acknowledged: a chain that ends before it is an
//   error; records past it, or a note behind the checkpoint, are what a crash leaves: warnings);
//   what follows the last frame, and a sealed file's bytes after its SEAL, must be zeros (else a
//   warning: a tail torn by a crash, as for a segmented log); files before the checkpoint's are
//   leftovers (warning), files after the chain's last are leftovers of a roll (warning) unless
//   they hold a record (error: the SEAL leading to them is lost).
// - Each scope home: the cell decodes (8 KiB slots), names the scope whose digest is its
//   directory's, its cut is no later than the stripes' ends; every row file it names has a valid
//   header and exactly `count` frames (index and CRC seeded with the file's gen) ending at the end
//   offset it names; bytes after that must be whole frames (never read: a warning otherwise);
//   the head blob matches the length and CRC in the cell; unnamed files are leftovers (warning).
// - The realm as a whole: every record between the checkpoint and the stripes' ends must be able
//   to become visible over the homes (a record that builds on a version neither a home nor a record
//   holds is acknowledged data lost: error); every record before the checkpoint still on disk must
//   be reflected in its scopes' homes (error otherwise: a home went back).
// Severity follows the rest of verify: an error is damage a store cannot read past or lost
// acknowledged data; a warning is what a crash can leave or bytes no reader ever reads.
// Memory: one window (256 KiB, or one frame) per file read, plus one small object per record still
// on disk in the checkpoints' files and after, and per home (the store's own view holds as much).

import * as path from 'node:path';
import { crc32 } from 'node:zlib';
import { DEFAULT_SLOT_BYTES } from '../../../cells/format.js';
import { cellTempPath, peekCell } from '../../../cells/index.js';
import type { FileHandle } from '../../fs/types.js';
import { scopeKey } from '../../host/names.js';
import { MAX_ROW_BYTES, type ScopeKind } from '../../host/types.js';
import {
  CHECKPOINT_FILE as CHECKPOINT,
  CHECKPOINT_LOCK_FILE as CHECKPOINT_LOCK,
  FENCE_DIR as FENCE,
  FENCE_LOCK_FILE as FENCE_LOCK,
  FENCE_STATE_FILE as FENCE_STATE,
  FORMAT_FILE as FORMAT,
  HOME_STATE_FILE as HOME_STATE,
  PUBLISHED_FILE as PUBLISHED,
  SCOPES_DIR as SCOPES,
  STRIPE_GATE_FILE as STRIPE_GATE,
  STRIPE_LOCK_FILE as STRIPE_LOCK,
  STRIPES_DIR as STRIPES,
  TABLES_DIR as TABLES,
} from '../../host/fs/format.js';
import {
  checkFrame,
  checkRowHeader,
  decodeBatchPayload,
  decodeCheckpoint,
  decodeFenceState,
  decodeFormat,
  decodeHome,
  decodePublished,
  decodeStripeHeader,
  FRAME_HEADER_BYTES,
  headFileName,
  HOME_SLOT_BYTES,
  MAX_PAYLOAD_BYTES,
  parseScopeLeaf,
  parseStripeFileName,
  parseTableFileName,
  PUBLISHED_BYTES,
  REC_BATCH,
  REC_FENCE,
  REC_SEAL,
  ROW_FRAME_HEADER_BYTES,
  ROW_HEADER_BYTES,
  rowFileName,
  rowSalt,
  sameBytes,
  scopeDigest,
  STRIPE_HEADER_BYTES,
  stripeFileName,
  u32,
  u64,
  type CheckpointValue,
  type FenceState,
  type HomeValue,
  type Position,
  type Published,
  type RealmFormat,
  type StripeHeader,
} from '../../host/fs/format.js';
import { recOf } from '../../host/fs/stripe-scan.js';
import { ScopeTable, tablePath } from '../../host/fs/table.js';
import { DEAD, PENDING, View, type Rec } from '../../host/fs/view.js';
import { checkCellFile } from './cell.js';
import { checkEmpty } from './log.js';
import { VerifyError, messageOf, type VerifyContext } from './context.js';

const WINDOW = 256 * 1024;
const ZEROS = Buffer.alloc(WINDOW);

/** True when `names` (a directory's entries) look like a host store realm's. */
export function isHostRealmDirectory(names: readonly string[]): boolean {
  const has = (n: string): boolean => names.includes(n);
  if (has(FORMAT)) return has(STRIPES) || has(FENCE) || has(SCOPES) || has(CHECKPOINT);
  return has(STRIPES) && (has(FENCE) || has(CHECKPOINT));
}

const tmpName = (n: string): string => path.basename(cellTempPath(n));

/** Reads a file through one window (or one larger read for a long frame). */
class WindowReader {
  readonly #h: FileHandle;
  readonly size: number;
  #buf = new Uint8Array(0);
  #at = -1;
  #len = 0;

  constructor(h: FileHandle, size: number) {
    this.#h = h;
    this.size = size;
  }

  /** `length` bytes at `at` (the caller keeps `at + length <= size`); a view valid until the next call. */
  async bytes(at: number, length: number): Promise<Uint8Array> {
    if (this.#at >= 0 && at >= this.#at && at + length <= this.#at + this.#len) return this.#buf.subarray(at - this.#at, at - this.#at + length);
    const want = Math.max(length, Math.min(WINDOW, this.size - at));
    if (this.#buf.length < want) this.#buf = new Uint8Array(want);
    const n = await this.#h.read(this.#buf.subarray(0, want), at);
    this.#at = at;
    this.#len = n;
    if (n < length) throw new Error(`read ${n} of ${length} bytes at offset ${at}: the file is shorter than its size`);
    return this.#buf.subarray(0, length);
  }

  /** The first non-zero byte in [from, to), or -1. */
  async firstNonZero(from: number, to: number): Promise<number> {
    for (let at = from; at < to; ) {
      const n = Math.min(WINDOW, to - at);
      const b = await this.bytes(at, n);
      if (!ZEROS.subarray(0, n).equals(b)) {
        for (let i = 0; i < n; i++) if (b[i] !== 0) return at + i;
      }
      at += n;
    }
    return -1;
  }
}

async function withFile<T>(ctx: VerifyContext, file: string, what: string, fn: (r: WindowReader) => Promise<T>): Promise<T | null> {
  let h: FileHandle;
  try {
    h = await ctx.fs.open(file, 'read');
  } catch (err) {
    if (err instanceof VerifyError) throw err;
    ctx.error(file, `cannot open ${what}: ${messageOf(err)}`);
    return null;
  }
  try {
    const r = new WindowReader(h, await h.size());
    ctx.sawFile(r.size);
    return await fn(r);
  } catch (err) {
    if (err instanceof VerifyError) throw err;
    ctx.error(file, `cannot read ${what}: ${messageOf(err)}`);
    return null;
  } finally {
    await h.close().catch(() => undefined);
  }
}

async function listDir(ctx: VerifyContext, dir: string): Promise<string[] | null> {
  try {
    return (await ctx.fs.readdir(dir)).sort();
  } catch (err) {
    if (err instanceof VerifyError) throw err;
    if ((err as { code?: unknown }).code === 'ENOENT') return null;
    ctx.error(dir, `cannot list: ${messageOf(err)}`);
    return null;
  }
}

async function isDirectory(ctx: VerifyContext, p: string): Promise<boolean> {
  return (await ctx.fs.stat(p))?.isDirectory === true;
}

async function sawLeftover(ctx: VerifyContext, file: string, message: string): Promise<void> {
  ctx.sawFile((await ctx.fs.stat(file))?.size ?? 0);
  ctx.warning(file, message);
}

function posText(p: { seq: number; offset: number; lsn: number }): string {
  return `file ${p.seq} offset ${p.offset} lsn ${p.lsn}`;
}

// ---------------------------------------------------------------------------------------------
// Stripes

/** Where a scan of one stripe stopped, and why. */
interface ScanStop {
  file: string;
  offset: number;
  reason: string;
}

interface StripeReport {
  index: number;
  files: { name: string; bytes: number; role: string }[];
  checkpoint: Position | null;
  published: (Position & { boot: string }) | null;
  end: Position | null;
  stop: ScanStop | null;
  batches: number;
  fences: number;
  seals: number;
  voids: number;
  pastNote: number;
}

interface StripeResult {
  report: StripeReport;
  /** Batch records from the checkpoint on (void ones left out), in stripe order. */
  recs: Rec[];
  /** Batch records before the checkpoint position still on disk (void ones left out). */
  prefix: Rec[];
  /** The valid end (null when the stripe could not be read from its checkpoint). */
  end: Position | null;
}

interface RealmInfo {
  dir: string;
  format: RealmFormat;
  checkpoint: CheckpointValue | null;
  /** The highest token anything on disk carries, and where. */
  maxToken: { token: number; where: string; offset?: number };
}

function noteToken(realm: RealmInfo, token: number, where: string, offset?: number): void {
  if (token > realm.maxToken.token) realm.maxToken = offset === undefined ? { token, where } : { token, where, offset };
}

interface FileScan {
  offset: number;
  lsn: number;
  fence: number;
  /** 'limit' (reached the limit offset), 'seal' (after a SEAL frame), 'end' (the file ends), or why a frame failed. */
  stop: string;
}

/**
 * Walks the frames of one stripe file from `from` as the store's scan does (stripe.ts `scan`):
 * up to `limit` (an offset), a SEAL, the file's end, or the first frame that does not validate.
 */
async function scanFrames(
  r: WindowReader,
  from: { offset: number; lsn: number; fence: number },
  salt: number,
  limit: number | null,
  on: { boundary?: (offset: number, lsn: number, fence: number) => void; batch: (offset: number, lsn: number, fence: number, payload: Uint8Array) => void; fence: (offset: number, token: number) => void },
): Promise<FileScan> {
  let { offset, lsn, fence } = from;
  for (;;) {
    on.boundary?.(offset, lsn, fence);
    if (limit !== null && offset >= limit) return { offset, lsn, fence, stop: 'limit' };
    if (offset + FRAME_HEADER_BYTES > r.size) return { offset, lsn, fence, stop: offset === r.size ? 'end' : 'short' };
    const head = await r.bytes(offset, FRAME_HEADER_BYTES);
    const len = u32(head, 4);
    if (len < 1 || len > MAX_PAYLOAD_BYTES) return { offset, lsn, fence, stop: 'length' };
    if (offset + FRAME_HEADER_BYTES + len > r.size) return { offset, lsn, fence, stop: u64(head, 8) === lsn ? 'short' : 'lsn' };
    const frame = await r.bytes(offset, FRAME_HEADER_BYTES + len);
    const check = checkFrame(frame, 0, lsn, salt);
    if (check !== 'ok') return { offset, lsn, fence, stop: check };
    const type = frame[FRAME_HEADER_BYTES];
    if (type === REC_BATCH) {
      on.batch(offset, lsn, fence, frame.subarray(FRAME_HEADER_BYTES));
    } else if (type === REC_FENCE && len === 9) {
      const token = u64(frame, FRAME_HEADER_BYTES + 1);
      on.fence(offset, token);
      fence = Math.max(fence, token);
    } else if (type === REC_SEAL && len === 1) {
      return { offset: offset + FRAME_HEADER_BYTES + 1, lsn: lsn + 1, fence, stop: 'seal' };
    } else {
      return { offset, lsn, fence, stop: `type ${String(type)}` };
    }
    offset += FRAME_HEADER_BYTES + len;
    lsn++;
  }
}

/** Reads a stripe file's header; null when it does not decode (short, torn, foreign). */
async function readStripeHeader(r: WindowReader): Promise<StripeHeader | null> {
  if (r.size < STRIPE_HEADER_BYTES) return null;
  return decodeStripeHeader(await r.bytes(0, STRIPE_HEADER_BYTES));
}

function headerProblem(h: StripeHeader | null, stripe: number, seq: number, tag: Uint8Array): string | null {
  if (h === null) return 'no valid header (magic, version, CRC)';
  if (h.stripe !== stripe) return `its header names stripe ${h.stripe}`;
  if (h.seq !== seq) return `its header names file ${h.seq}`;
  if (!sameBytes(h.realmTag, tag)) return 'its header names another realm';
  return null;
}

async function checkStripe(ctx: VerifyContext, realm: RealmInfo, k: number): Promise<StripeResult | null> {
  const dir = path.join(realm.dir, STRIPES, String(k));
  const names = await listDir(ctx, dir);
  if (names === null) {
    ctx.error(dir, `host stripe ${k}: the directory is missing (the store's open fails)`);
    return null;
  }
  const tag = realm.format.realmId.subarray(0, 8);
  const report: StripeReport = { index: k, files: [], checkpoint: null, published: null, end: null, stop: null, batches: 0, fences: 0, seals: 0, voids: 0, pastNote: 0 };
  const result: StripeResult = { report, recs: [], prefix: [], end: null };
  const files = new Map<number, string>();
  for (const n of names) {
    const p = path.join(dir, n);
    const seq = parseStripeFileName(n);
    if (seq !== null) files.set(seq, n);
    else if (n === STRIPE_LOCK || n === STRIPE_GATE) await checkEmpty(ctx, p, `host stripe ${k} ${n}`);
    else if (n !== PUBLISHED) ctx.unknown.push(p);
  }

  // The published note: 64 bytes, rewritten in place (never synced).
  let note: Published | null = null;
  const notePath = path.join(dir, PUBLISHED);
  if (!names.includes(PUBLISHED)) {
    ctx.error(notePath, `host stripe ${k}: the published note is missing (every open and load of the store fails)`);
  } else {
    const bytes = await ctx.readBounded(notePath, 1 << 20, 'published note');
    if (bytes !== null) {
      ctx.sawFile(bytes.length);
      note = bytes.length >= PUBLISHED_BYTES ? decodePublished(bytes.subarray(0, PUBLISHED_BYTES)) : null;
      if (note === null) {
        ctx.error(
          notePath,
          `host stripe ${k}: the published note fails its check (magic, version, CRC or range): loads fail with CORRUPT (an open after a reboot rescans the stripe and rewrites it)`,
          0,
        );
      } else {
        report.published = { seq: note.seq, offset: note.offset, lsn: note.lsn, fence: note.fence, boot: Buffer.from(note.boot).toString('hex') };
        noteToken(realm, note.fence, notePath, 48);
        if (bytes.length > PUBLISHED_BYTES) ctx.warning(notePath, `host stripe ${k}: the published note is ${bytes.length} bytes; bytes past ${PUBLISHED_BYTES} are never read`, PUBLISHED_BYTES);
      }
    }
  }

  const ck = realm.checkpoint?.positions[k] ?? null;
  report.checkpoint = ck;
  const seqs = [...files.keys()].sort((a, b) => a - b);
  if (ck === null) {
    // No checkpoint to start from: check each file's header only.
    for (const seq of seqs) {
      const file = path.join(dir, files.get(seq)!);
      await withFile(ctx, file, 'stripe file', async (r) => {
        const problem = headerProblem(await readStripeHeader(r), k, seq, tag);
        if (problem !== null) ctx.error(file, `host stripe ${k}: ${problem}`, 0);
        report.files.push({ name: files.get(seq)!, bytes: r.size, role: 'unchecked (no checkpoint)' });
      });
    }
    return result;
  }

  // Files before the checkpoint's: no reader goes there (the next checkpoint round removes them).
  for (const seq of seqs) {
    if (seq >= ck.seq) break;
    const file = path.join(dir, files.get(seq)!);
    const size = (await ctx.fs.stat(file))?.size ?? 0;
    report.files.push({ name: files.get(seq)!, bytes: size, role: 'leftover' });
    await sawLeftover(ctx, file, `host stripe ${k}: file before the checkpoint's (${ck.seq}): wholly in the homes, never read; the next checkpoint round removes it`);
  }

  const firstFile = path.join(dir, stripeFileName(ck.seq));
  if (!files.has(ck.seq)) {
    ctx.error(firstFile, `host stripe ${k}: the checkpoint starts in this file, which is missing (the store's open fails)`);
    for (const seq of seqs) if (seq > ck.seq) await sawLeftover(ctx, path.join(dir, files.get(seq)!), `host stripe ${k}: file after a missing one (not checked)`);
    return result;
  }
  if (ck.offset < STRIPE_HEADER_BYTES) {
    ctx.error(path.join(realm.dir, CHECKPOINT), `host checkpoint: stripe ${k}'s position ${ck.offset} lies inside the file header`);
    return result;
  }

  // The scan from the checkpoint, file by file, as the store's locked scan reads it.
  const at = { seq: ck.seq, offset: ck.offset, lsn: ck.lsn, fence: ck.fence, salt: 0, lastSeq: ck.seq };
  const found: { end: Position | null; stop: ScanStop | null; reachedNote: boolean } = { end: null, stop: null, reachedNote: false };
  for (let first = true; ; first = false) {
    const name = stripeFileName(at.seq);
    const file = path.join(dir, name);
    const next = await withFile(ctx, file, 'stripe file', async (r): Promise<boolean> => {
      report.files.push({ name, bytes: r.size, role: first ? 'checkpoint' : 'live' });
      if (first) {
        const header = await readStripeHeader(r);
        const problem = headerProblem(header, k, at.seq, tag);
        if (problem !== null || header === null) {
          ctx.error(file, `host stripe ${k}: the checkpoint's file has ${problem ?? 'no header'} (the store's open fails)`, 0);
          return false;
        }
        noteToken(realm, header.fence, file, 32);
        at.salt = header.salt;
        await checkPrefix(ctx, realm, r, file, k, at.seq, header, ck, result.prefix);
      }
      const seq = at.seq;
      const scan = await scanFrames(r, at, at.salt, null, {
        boundary: (offset, lsn, fence) => {
          if (note !== null && seq === note.seq && offset === note.offset && lsn === note.lsn) {
            found.reachedNote = true;
            if (fence !== note.fence) ctx.error(notePath, `host stripe ${k}: the published note says fence ${note.fence}, the records up to it say ${fence}`, 48);
          }
        },
        batch: (offset, lsn, fence, payload) => {
          report.batches++;
          const b = decodeBatchPayload(payload, `${file}@${offset}`);
          noteToken(realm, b.token, file, offset + FRAME_HEADER_BYTES + 1);
          if (b.token >= fence) result.recs.push(recOf(k, seq, offset, lsn, fence, b));
          else report.voids++;
        },
        fence: (offset, token) => {
          report.fences++;
          noteToken(realm, token, file, offset + FRAME_HEADER_BYTES + 1);
        },
      }).catch((err: unknown) => {
        if (err instanceof VerifyError) throw err;
        // A frame under its CRC whose batch does not decode: the store's scan throws CORRUPT there.
        ctx.error(file, `host stripe ${k}: ${messageOf(err)} (every scan of the store fails there)`);
        return null;
      });
      if (scan === null) return false;
      at.lastSeq = seq;
      if (scan.stop === 'seal') {
        report.seals++;
        // A sealed file: nothing but zero-filled space after the SEAL (never read).
        const nz = await r.firstNonZero(scan.offset, r.size);
        if (nz >= 0) ctx.warning(file, `host stripe ${k}: ${r.size - scan.offset} byte(s) after the SEAL of a sealed file are not zero (never read: damage or a leftover)`, nz);
        const nextFile = path.join(dir, stripeFileName(seq + 1));
        const exists = files.has(seq + 1);
        const nextHeader = exists ? await peekHeader(ctx, nextFile) : null;
        const problem = !exists
          ? 'it is missing'
          : (headerProblem(nextHeader, k, seq + 1, tag) ??
            (nextHeader!.firstLsn !== scan.lsn ? `its header names first lsn ${nextHeader!.firstLsn}, the SEAL before it ${scan.lsn - 1}` : null));
        if (problem === null) {
          noteToken(realm, nextHeader!.fence, nextFile, 32);
          Object.assign(at, { seq: seq + 1, offset: STRIPE_HEADER_BYTES, lsn: scan.lsn, fence: Math.max(scan.fence, nextHeader!.fence), salt: nextHeader!.salt });
          return true;
        }
        found.end = { seq, offset: scan.offset, lsn: scan.lsn, fence: scan.fence };
        found.stop = { file: exists ? nextFile : file, offset: exists ? 0 : scan.offset, reason: `the SEAL at the end of file ${seq} leads to file ${seq + 1}, but ${problem}` };
        return false;
      }
      const end = { seq, offset: scan.offset, lsn: scan.lsn, fence: scan.fence };
      found.end = end;
      if (scan.stop !== 'end') found.stop = { file, offset: scan.offset, reason: `the frame there fails its ${scan.stop} check` };
      // Past the last valid frame: zero-filled space (anything else is a torn tail: never
      // acknowledged unless the note says otherwise; the next writer overwrites it).
      const nz = await r.firstNonZero(scan.offset, r.size);
      if (nz >= 0) {
        ctx.warning(
          file,
          `host stripe ${k}: ${r.size - scan.offset} byte(s) after the last valid record (${posText(end)}${scan.stop === 'end' ? '' : `: ${scan.stop}`}) are not zero — ` +
            'a tail torn by a crash, the rest of a failed write, or damage; the next writer of the stripe overwrites it',
          nz,
        );
      }
      return false;
    });
    if (next !== true) break;
  }
  const { end, stop } = found;
  report.end = end;
  report.stop = stop;
  result.end = end;
  ctx.counts.hostRecords += report.batches + report.fences + report.seals;
  if (end === null) return result;

  // Files past the chain's last: a roll whose SEAL never became durable (the next roll re-creates
  // the file). One that holds a record means the SEAL leading to it was lost.
  for (const s of seqs) {
    if (s <= at.lastSeq) continue;
    const file = path.join(dir, files.get(s)!);
    const holds = await withFile(ctx, file, 'stripe file', async (r) => {
      report.files.push({ name: files.get(s)!, bytes: r.size, role: 'unreachable' });
      const h = await readStripeHeader(r);
      if (h === null || r.size < STRIPE_HEADER_BYTES + FRAME_HEADER_BYTES + 1) return false;
      const len = u32(await r.bytes(STRIPE_HEADER_BYTES, FRAME_HEADER_BYTES), 4);
      if (len < 1 || len > MAX_PAYLOAD_BYTES || STRIPE_HEADER_BYTES + FRAME_HEADER_BYTES + len > r.size) return false;
      return checkFrame(await r.bytes(STRIPE_HEADER_BYTES, FRAME_HEADER_BYTES + len), 0, h.firstLsn, h.salt) === 'ok';
    });
    if (holds === true) ctx.error(file, `host stripe ${k}: file past the stripe's last (${at.lastSeq}) holds a record, but no SEAL leads to it: records were lost`, STRIPE_HEADER_BYTES);
    else if (holds === false) ctx.warning(file, `host stripe ${k}: file past the stripe's last (${at.lastSeq}), empty of records: a roll whose SEAL never became durable (the next roll re-creates it)`);
  }

  // The published note must lie on the chain: the records it names are acknowledged.
  if (note !== null) {
    if (note.lsn < ck.lsn) {
      ctx.warning(notePath, `host stripe ${k}: the published note (${posText(note)}) is behind the checkpoint (lsn ${ck.lsn}): it lost rewrites in a crash; the next open of a new boot rescans and rewrites it`, 0);
    } else if (!found.reachedNote) {
      const where = stop === null ? `the stripe ends at ${posText(end)}` : `the records end at ${posText(end)}: ${stop.reason}`;
      ctx.error(
        stop === null ? notePath : stop.file,
        `host stripe ${k}: the published note names ${posText(note)}, but ${where} — published (acknowledged) records are damaged or missing; loads fail with CORRUPT`,
        stop === null ? 0 : stop.offset,
      );
    } else if (end.lsn > note.lsn) {
      report.pastNote = end.lsn - note.lsn;
      ctx.warning(
        path.join(dir, stripeFileName(end.seq)),
        `host stripe ${k}: ${end.lsn - note.lsn} valid record(s) past the published note (${posText(note)}): a writer stopped before publishing them, or the note lost its rewrite in a crash; the first load, writer, acquire or open that finds their writer gone adopts them`,
      );
    }
  }
  if (report.voids > 0) {
    ctx.warning(dir, `host stripe ${k}: ${report.voids} batch record(s) with a token below a FENCE record before them (void: never visible; a commit checks the token, so only a bug writes them)`);
  }
  return result;
}

/** The frames before the checkpoint position in its file: applied to the homes, never read again. */
async function checkPrefix(
  ctx: VerifyContext,
  realm: RealmInfo,
  r: WindowReader,
  file: string,
  k: number,
  seq: number,
  header: StripeHeader,
  ck: Position,
  into: Rec[],
): Promise<void> {
  const prefix = await scanFrames(r, { offset: STRIPE_HEADER_BYTES, lsn: header.firstLsn, fence: header.fence }, header.salt, ck.offset, {
    batch: (offset, lsn, fence, payload) => {
      try {
        const b = decodeBatchPayload(payload, `${file}@${offset}`);
        noteToken(realm, b.token, file, offset + FRAME_HEADER_BYTES + 1);
        if (b.token >= fence) into.push(recOf(k, seq, offset, lsn, fence, b));
      } catch {
        // A frame under its CRC that does not decode, before the checkpoint: never read.
      }
    },
    fence: (offset, token) => noteToken(realm, token, file, offset + FRAME_HEADER_BYTES + 1),
  });
  if (prefix.stop !== 'limit' || prefix.offset !== ck.offset || prefix.lsn !== ck.lsn || prefix.fence !== ck.fence) {
    ctx.warning(
      file,
      `host stripe ${k}: the frames before the checkpoint position (${posText(ck)}) do not lead to it ` +
        `(${prefix.stop === 'limit' ? `they reach offset ${prefix.offset} lsn ${prefix.lsn} fence ${prefix.fence}` : `at offset ${prefix.offset}: ${prefix.stop}`}): ` +
        'damage in records the homes already hold; no reader reads them again',
      prefix.offset,
    );
  }
}

async function peekHeader(ctx: VerifyContext, file: string): Promise<StripeHeader | null> {
  let h: FileHandle;
  try {
    h = await ctx.fs.open(file, 'read');
  } catch (err) {
    if (err instanceof VerifyError) throw err;
    return null;
  }
  try {
    const b = new Uint8Array(STRIPE_HEADER_BYTES);
    const n = await h.read(b, 0);
    return n === STRIPE_HEADER_BYTES ? decodeStripeHeader(b) : null;
  } finally {
    await h.close().catch(() => undefined);
  }
}

// ---------------------------------------------------------------------------------------------
// Homes

interface HomeResult {
  dir: string;
  kind: ScopeKind;
  digest: string;
  /** The home value (null: no readable value). */
  value: HomeValue | null;
  /** The value is this directory's scope (its name hashes to the directory's digest). */
  placed: boolean;
  /** The home has a state cell that could not be read (a reader fails). */
  unreadable: boolean;
  sequence: number;
}

async function checkHomes(ctx: VerifyContext, realm: RealmInfo): Promise<HomeResult[]> {
  const root = path.join(realm.dir, SCOPES);
  const out: HomeResult[] = [];
  const fanouts = await listDir(ctx, root);
  if (fanouts === null) return out;
  for (const hh of fanouts) {
    const sub = path.join(root, hh);
    if (!/^[0-9a-f]{2}$/.test(hh) || !(await isDirectory(ctx, sub))) {
      ctx.unknown.push(sub);
      continue;
    }
    for (const leaf of (await listDir(ctx, sub)) ?? []) {
      const dir = path.join(sub, leaf);
      const parsed = parseScopeLeaf(leaf);
      if (parsed === null || !(await isDirectory(ctx, dir))) {
        ctx.unknown.push(dir);
        continue;
      }
      const home = await checkHome(ctx, realm, dir, parsed.kind, parsed.digest);
      if (parsed.digest.slice(0, 2) !== hh) {
        ctx.error(dir, `host home: in fan-out directory ${hh}, but its digest starts with ${parsed.digest.slice(0, 2)}: the store never finds it (the scope's checkpointed state is lost)`);
        home.placed = false;
      }
      out.push(home);
    }
  }
  return out;
}

async function checkHome(ctx: VerifyContext, realm: RealmInfo, dir: string, kind: ScopeKind, digest: string): Promise<HomeResult> {
  const result: HomeResult = { dir, kind, digest, value: null, placed: true, unreadable: false, sequence: 0 };
  ctx.counts.hostHomes++;
  const names = (await listDir(ctx, dir)) ?? [];
  const statePath = path.join(dir, HOME_STATE);
  const named = new Set<string>([HOME_STATE]);
  if (names.includes(tmpName(HOME_STATE))) {
    named.add(tmpName(HOME_STATE));
    await sawLeftover(ctx, path.join(dir, tmpName(HOME_STATE)), 'host home: leftover of a first cell write that did not complete (never read)');
  }
  if (names.includes(HOME_STATE)) {
    const cell = await checkCellFile(ctx, statePath, HOME_SLOT_BYTES, 'host home state', { describe: false });
    result.sequence = cell.sequence;
    if (cell.value === null) result.unreadable = true;
    else {
      try {
        result.value = decodeHome(cell.value, statePath);
      } catch (err) {
        ctx.error(statePath, `host home: ${messageOf(err)} (every load of the scope fails)`);
        result.unreadable = true;
      }
    }
  }
  const home = result.value;
  if (home !== null) {
    if (home.kind !== kind || scopeDigest(home.kind, home.name) !== digest) {
      ctx.error(statePath, `host home: holds ${home.kind} scope ${JSON.stringify(home.name)}, whose digest is not the directory's (the store refuses it: CORRUPT)`);
      result.placed = false;
    }
    if (home.cut.length !== realm.format.stripes) {
      ctx.error(statePath, `host home: its cut names ${home.cut.length} stripes, the realm has ${realm.format.stripes}`);
    }
    if (home.head !== null && crc32(home.head) !== home.headCrc) {
      ctx.error(statePath, 'host home: the inline head does not match the CRC the cell keeps for it');
    }
    if (home.headGen !== null) {
      const name = headFileName(home.headGen);
      named.add(name);
      const file = path.join(dir, name);
      if (!names.includes(name)) ctx.error(file, `host home: the head blob the cell names is missing (loads of ${JSON.stringify(home.name)} fail)`);
      else {
        await withFile(ctx, file, 'head blob', async (r) => {
          if (r.size < home.headLength) {
            ctx.error(file, `host home: the head blob is ${r.size} bytes, the cell names ${home.headLength} (loads fail)`);
            return;
          }
          const crc = await crcOf(r, 0, home.headLength);
          if (crc !== home.headCrc) ctx.error(file, 'host home: the head blob fails the CRC its cell keeps (loads fail)');
          if (r.size > home.headLength) ctx.warning(file, `host home: ${r.size - home.headLength} byte(s) past the head's length (never read)`, home.headLength);
        });
      }
    }
    for (let i = 0; i < home.rowFiles.length; i++) {
      const ref = home.rowFiles[i]!;
      const name = rowFileName(ref.gen);
      named.add(name);
      const file = path.join(dir, name);
      ctx.counts.hostRowFiles++;
      if (!names.includes(name)) {
        ctx.error(file, `host home: row file ${name} (rows ${ref.start}…${ref.start + ref.count - 1}) named by the cell is missing (reads of those rows fail)`);
        continue;
      }
      await checkRowFile(ctx, file, ref, home.first);
    }
  }
  for (const n of names) {
    if (named.has(n)) continue;
    const p = path.join(dir, n);
    if (/^[rh]-[0-9a-f]{16}$/.test(n)) {
      await sawLeftover(
        ctx,
        p,
        home === null
          ? 'host home: file of a home whose first cell write never completed (never read; the next checkpoint round that writes this home starts again)'
          : 'host home: file the cell does not name (a round cut short, or what a newer value replaced): never read; a later round removes it',
      );
    } else ctx.unknown.push(p);
  }
  return result;
}

async function crcOf(r: WindowReader, from: number, to: number): Promise<number> {
  let crc = 0;
  for (let at = from; at < to; ) {
    const n = Math.min(WINDOW, to - at);
    crc = crc32(await r.bytes(at, n), crc);
    at += n;
  }
  return crc;
}

/** Checks a row file against the reference its home cell holds. */
async function checkRowFile(ctx: VerifyContext, file: string, ref: HomeValue['rowFiles'][number], first: number): Promise<void> {
  await withFile(ctx, file, 'row file', async (r) => {
    if (r.size < ROW_HEADER_BYTES || !checkRowHeader(await r.bytes(0, ROW_HEADER_BYTES), ref.gen, ref.start)) {
      ctx.error(file, `host home: the row file's header fails its check (magic, version, CRC, gen, start ${ref.start}): reads of its rows fail`, 0);
      return;
    }
    const salt = rowSalt(ref.gen);
    let at = ROW_HEADER_BYTES;
    let k = 0;
    // The rows the cell names: each frame's length, index and CRC (rows below the home's first
    // are dropped: a reader reads only their length, to find the frames after them).
    for (; k < ref.count; k++) {
      const index = ref.start + k;
      if (at + ROW_FRAME_HEADER_BYTES > ref.endOffset || at + ROW_FRAME_HEADER_BYTES > r.size) {
        ctx.error(file, `host home: row ${index} at offset ${at} lies past the end offset the cell names (${ref.endOffset}) or the file's end (${r.size}): reads fail`, at);
        return;
      }
      const len = u32(await r.bytes(at, ROW_FRAME_HEADER_BYTES), 4);
      if (len > MAX_ROW_BYTES || at + ROW_FRAME_HEADER_BYTES + len > ref.endOffset || at + ROW_FRAME_HEADER_BYTES + len > r.size) {
        ctx.error(file, `host home: row ${index} at offset ${at} has length ${len}, past the end offset the cell names (${ref.endOffset}): reads fail`, at);
        return;
      }
      const frame = await r.bytes(at, ROW_FRAME_HEADER_BYTES + len);
      if (u64(frame, 8) !== index || crc32(frame.subarray(4), salt) !== u32(frame, 0)) {
        if (index < first) {
          ctx.warning(file, `host home: dropped row ${index} at offset ${at} fails its check (index or CRC): never read (below the first row ${first})`, at);
        } else {
          ctx.error(file, `host home: row ${index} at offset ${at} fails its check (index or CRC): reads of it fail`, at);
        }
      }
      at += ROW_FRAME_HEADER_BYTES + len;
    }
    ctx.counts.hostRows += Math.max(0, ref.start + ref.count - Math.max(first, ref.start));
    if (at !== ref.endOffset) {
      ctx.error(file, `host home: the ${ref.count} rows end at offset ${at}, the cell names ${ref.endOffset}: reads fail`, at);
      return;
    }
    // Past the end offset: frames a truncation cut away or a round cut short wrote (never read),
    // which are still whole frames continuing the indices; a row file has no zero-filled space.
    while (at < r.size) {
      const index = ref.start + k;
      let ok = at + ROW_FRAME_HEADER_BYTES <= r.size;
      let len = 0;
      if (ok) {
        len = u32(await r.bytes(at, ROW_FRAME_HEADER_BYTES), 4);
        ok = len <= MAX_ROW_BYTES && at + ROW_FRAME_HEADER_BYTES + len <= r.size;
      }
      if (ok) {
        const frame = await r.bytes(at, ROW_FRAME_HEADER_BYTES + len);
        ok = u64(frame, 8) === index && crc32(frame.subarray(4), salt) === u32(frame, 0);
      }
      if (!ok) {
        ctx.warning(file, `host home: ${r.size - at} byte(s) past the end offset the cell names (${ref.endOffset}) are not whole row frames (never read: a round cut short, or damage)`, at);
        return;
      }
      at += ROW_FRAME_HEADER_BYTES + len;
      k++;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// The scope table

interface TableResult {
  /** The table the checkpoint names (null: none yet, or it could not be read). */
  file: string | null;
  cut: number[] | null;
  entries: number;
  live: number;
  /** The bases of the scopes whose whole state the table holds (head bytes not kept: only their length). */
  bases: Map<string, HomeValue>;
  /** The scopes the table names homed, with the version it names. */
  homed: Map<string, { kind: ScopeKind; name: string; version: number }>;
}

/**
 * The table the checkpoint names, read as the store reads it (size and footer as the cell names
 * them, header, index, every block's CRC and entries; tables/ itself must exist); other table
 * files are leftovers of rounds cut short or tables a newer one replaced (warnings).
 */
async function checkTable(ctx: VerifyContext, realm: RealmInfo): Promise<TableResult> {
  const out: TableResult = { file: null, cut: null, entries: 0, live: 0, bases: new Map(), homed: new Map() };
  const dir = path.join(realm.dir, TABLES);
  const names = await listDir(ctx, dir);
  if (names === null) {
    ctx.error(dir, 'host realm: the tables directory is missing (made with the realm): the store\'s open fails');
    return out;
  }
  const ref = realm.checkpoint?.table ?? null;
  for (const n of names) {
    const seq = parseTableFileName(n);
    if (seq === null) ctx.unknown.push(path.join(dir, n));
    else if (seq !== ref?.seq) await sawLeftover(ctx, path.join(dir, n), 'host scope table the checkpoint does not name (replaced by a newer one, or written by a round cut short): never read; the next round removes it');
  }
  if (ref === null) return out;
  const file = tablePath(realm.dir, ref.seq);
  out.file = file;
  let t: ScopeTable;
  try {
    t = await ScopeTable.open(ctx.fs, realm.dir, ref, realm.format.stripes, realm.format.realmId);
  } catch (err) {
    if (err instanceof VerifyError) throw err;
    const missing = (err as { code?: unknown }).code === 'ENOENT';
    ctx.error(file, missing ? 'host realm: the scope table the checkpoint names is missing: every checkpointed scope is lost (the store\'s open fails)' : `host realm: ${messageOf(err)} (the store's open fails)`);
    return out;
  }
  out.cut = [...t.cut];
  out.entries = t.entries;
  out.live = t.live;
  try {
    await t.forEach((e) => {
      const key = scopeKey({ kind: e.kind, name: e.name });
      if (e.homed) {
        out.homed.set(key, { kind: e.kind, name: e.name, version: e.version });
        return;
      }
      out.bases.set(key, {
        kind: e.kind,
        name: e.name,
        version: e.version,
        commitId: e.commitId,
        deleted: e.deleted,
        cut: [...t.cut],
        first: e.first,
        end: e.end,
        headLength: e.head.length,
        headCrc: 0,
        head: new Uint8Array(0),
        headGen: null,
        rowFiles: [],
      });
      for (const row of e.rows) if (row.length > MAX_ROW_BYTES) ctx.error(file, `host scope table: a row of ${e.kind} ${JSON.stringify(e.name)} is ${row.length} bytes, above the limit`);
    });
  } catch (err) {
    if (err instanceof VerifyError) throw err;
    ctx.error(file, `host realm: ${messageOf(err)} (loads of the scopes it holds fail)`);
  } finally {
    await t.retire();
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The realm

/** Checks the host store realm in `dir`; answers the entry names it accounted for. */
export async function checkHostRealm(ctx: VerifyContext, dir: string, names: readonly string[]): Promise<Set<string>> {
  const claimed = new Set<string>([FORMAT, tmpName(FORMAT), CHECKPOINT, tmpName(CHECKPOINT), CHECKPOINT_LOCK, FENCE, STRIPES, SCOPES, TABLES]);
  ctx.counts.hostRealms++;
  for (const n of [tmpName(FORMAT), tmpName(CHECKPOINT)]) {
    if (names.includes(n)) await sawLeftover(ctx, path.join(dir, n), 'host realm: leftover of a first cell write that did not complete (never read; removed or replaced by the next write)');
  }
  if (names.includes(CHECKPOINT_LOCK)) await checkEmpty(ctx, path.join(dir, CHECKPOINT_LOCK), 'host checkpoint.lock');
  if (!names.includes(FORMAT)) {
    await checkUnformedRealm(ctx, dir, names);
    return claimed;
  }

  const formatPath = path.join(dir, FORMAT);
  const formatCell = await checkCellFile(ctx, formatPath, DEFAULT_SLOT_BYTES, 'host FORMAT', { describe: false });
  if (formatCell.value === null) return claimed;
  let format: RealmFormat;
  try {
    format = decodeFormat(formatCell.value, formatPath);
  } catch (err) {
    ctx.error(formatPath, `host realm: ${messageOf(err)} (the store's open fails)`);
    return claimed;
  }
  const realm: RealmInfo = { dir, format, checkpoint: null, maxToken: { token: 0, where: '' } };

  // The fence: its lock file (made once, at creation) and its state cell.
  const fenceDir = path.join(dir, FENCE);
  const fenceNames = (await listDir(ctx, fenceDir)) ?? [];
  const fenceLock = path.join(fenceDir, FENCE_LOCK);
  if (fenceNames.includes(FENCE_LOCK)) await checkEmpty(ctx, fenceLock, 'host fence/lock');
  else ctx.error(fenceLock, 'host realm: fence/lock is missing (made once when the realm was created): every acquire and renew fails');
  let fence: FenceState | null = null;
  const fenceStatePath = path.join(fenceDir, FENCE_STATE);
  let fenceCell: { sequence: number; slot: 0 | 1 | null } | null = null;
  if (fenceNames.includes(FENCE_STATE)) {
    const cell = await checkCellFile(ctx, fenceStatePath, DEFAULT_SLOT_BYTES, 'host fence/state', { describe: false });
    fenceCell = cell;
    if (cell.value !== null) {
      try {
        fence = decodeFenceState(cell.value, fenceStatePath);
      } catch (err) {
        ctx.error(fenceStatePath, `host realm: ${messageOf(err)} (every acquire and renew fails)`);
      }
    }
  }
  if (fenceNames.includes(tmpName(FENCE_STATE))) await sawLeftover(ctx, path.join(fenceDir, tmpName(FENCE_STATE)), 'host fence: leftover of a first cell write that did not complete (never read)');
  for (const n of fenceNames) if (n !== FENCE_LOCK && n !== FENCE_STATE && n !== tmpName(FENCE_STATE)) ctx.unknown.push(path.join(fenceDir, n));

  // The checkpoint.
  const checkpointPath = path.join(dir, CHECKPOINT);
  let checkpointCell: { sequence: number; slot: 0 | 1 | null } | null = null;
  if (!names.includes(CHECKPOINT)) ctx.error(checkpointPath, 'host realm: the checkpoint cell is missing (the store\'s open fails)');
  else {
    const cell = await checkCellFile(ctx, checkpointPath, DEFAULT_SLOT_BYTES, 'host checkpoint', { describe: false });
    checkpointCell = cell;
    if (cell.value !== null) {
      try {
        realm.checkpoint = decodeCheckpoint(cell.value, format.stripes, checkpointPath);
        for (let k = 0; k < realm.checkpoint.positions.length; k++) noteToken(realm, realm.checkpoint.positions[k]!.fence, checkpointPath);
      } catch (err) {
        ctx.error(checkpointPath, `host realm: ${messageOf(err)} (the store's open fails)`);
      }
    }
  }

  // The stripes.
  const stripes: (StripeResult | null)[] = [];
  const stripesDir = path.join(dir, STRIPES);
  const stripeNames = await listDir(ctx, stripesDir);
  if (stripeNames === null) ctx.error(stripesDir, 'host realm: the stripes directory is missing (the store\'s open fails)');
  else {
    for (const n of stripeNames) if (!/^(0|[1-9]\d*)$/.test(n) || Number(n) >= format.stripes) ctx.unknown.push(path.join(stripesDir, n));
    for (let k = 0; k < format.stripes; k++) {
      const s = await checkStripe(ctx, realm, k);
      ctx.counts.hostStripeFiles += s?.report.files.length ?? 0;
      stripes.push(s);
    }
  }

  // The scope table, then the homes (a home counts only where the table names its scope homed).
  const table = await checkTable(ctx, realm);
  const allHomes = await checkHomes(ctx, realm);
  const homes: HomeResult[] = [];
  for (const h of allHomes) {
    const named = h.value !== null && table.homed.has(scopeKey({ kind: h.value.kind, name: h.value.name }));
    if (named || h.unreadable || h.value === null) homes.push(h);
    else {
      await sawLeftover(
        ctx,
        path.join(h.dir, HOME_STATE),
        `host home of ${h.value.kind} ${JSON.stringify(h.value.name)}: the scope table does not name it (a round that moved the scope to a home was cut short, or a deleted scope's home not removed yet): never read; a round that moves the scope to a home again writes over it`,
      );
    }
  }
  for (const [key, t] of table.homed) {
    const h = homes.find((x) => x.value !== null && scopeKey({ kind: x.value.kind, name: x.value.name }) === key);
    if (h === undefined) {
      if (homes.some((x) => x.unreadable && x.kind === t.kind && x.digest === scopeDigest(t.kind, t.name))) continue;
      ctx.error(table.file ?? path.join(dir, TABLES), `host realm: the scope table names ${t.kind} ${JSON.stringify(t.name)} as homed, but its home is missing: the scope's state is lost (loads answer CORRUPT)`);
    } else if (h.value!.version < t.version) {
      ctx.error(path.join(h.dir, HOME_STATE), `host home of ${t.kind} ${JSON.stringify(t.name)}: at version ${h.value!.version}, below the ${t.version} the scope table names: the home went back (loads answer CORRUPT)`);
    }
  }

  // Tokens only grow: nothing on disk carries a token above the highest the fence state issued.
  const highest = fence?.highest ?? 0;
  if (realm.maxToken.token > highest && !(fenceNames.includes(FENCE_STATE) && fence === null)) {
    ctx.error(
      fenceStatePath,
      `host realm: the fence state's highest token is ${fence === null ? 'absent (0)' : highest}, but ${realm.maxToken.where}` +
        `${realm.maxToken.offset === undefined ? '' : ` @${realm.maxToken.offset}`} carries token ${realm.maxToken.token}: ` +
        'the fence state went back (its newest slot damaged or lost), so the next acquire would issue a token already in use',
    );
  }

  // Each home's cut: the round that wrote it had read every stripe that far, so the stripes reach it.
  for (const h of homes) {
    if (h.value === null) continue;
    for (let j = 0; j < h.value.cut.length && j < stripes.length; j++) {
      const end = stripes[j]?.end;
      if (end !== null && end !== undefined && h.value.cut[j]! > end.lsn) {
        ctx.error(
          path.join(h.dir, HOME_STATE),
          `host home of ${h.value.kind} ${JSON.stringify(h.value.name)}: written by a checkpoint round that had read stripe ${j} up to lsn ${h.value.cut[j]}, ` +
            `but the stripe's records end at lsn ${end.lsn}: records it had read (durable and published then) are gone`,
        );
      }
    }
  }

  if (table.cut !== null) {
    for (let j = 0; j < table.cut.length && j < stripes.length; j++) {
      const end = stripes[j]?.end;
      if (end !== null && end !== undefined && table.cut[j]! > end.lsn) {
        ctx.error(
          table.file!,
          `host scope table: written by a checkpoint round that had read stripe ${j} up to lsn ${table.cut[j]}, but the stripe's records end at lsn ${end.lsn}: records it had read (durable and published then) are gone`,
        );
      }
    }
  }

  // The records over the bases (the table's entries, the homes of homed scopes): the store's own visibility rule.
  const byKey = new Map<string, HomeResult>();
  for (const [key, value] of table.bases) byKey.set(key, { dir: table.file!, kind: value.kind, digest: '', value, placed: true, unreadable: false, sequence: 0 });
  const unreadableDigests = new Set<string>();
  for (const h of homes) {
    if (h.unreadable) unreadableDigests.add(`${h.kind}:${h.digest}`);
    if (h.value !== null && h.placed) byKey.set(scopeKey({ kind: h.value.kind, name: h.value.name }), h);
  }
  const view = new View(format.stripes);
  for (const s of stripes) for (const rec of s?.recs ?? []) view.add(rec);
  const unreadable = (kind: ScopeKind, name: string): boolean => unreadableDigests.size > 0 && unreadableDigests.has(`${kind}:${scopeDigest(kind, name)}`);
  for (const e of view.scopes.values()) view.setHome(e, byKey.get(e.key)?.value ?? null);
  const complete = stripes.every((s) => s !== null && s.end !== null) && realm.checkpoint !== null;
  // A record that can never become visible: it builds on a version that neither its scope's home
  // nor any record holds (a root), or on such a record (counted with it).
  let roots = 0;
  let after = 0;
  let dead = 0;
  for (const list of view.byStripe) {
    for (const rec of list) {
      const v = view.verdict(rec);
      if (v === DEAD) dead++;
      if (v !== PENDING || !complete || rec.updates.some((u) => unreadable(u.kind, u.name))) continue;
      const root = rec.updates.find((u) => {
        const e = view.scopes.get(u.key)!;
        const previous = u.previous ?? 0;
        return previous > view.state(e).version && !e.slots.has(previous);
      });
      if (root === undefined) {
        after++;
        continue;
      }
      roots++;
      if (roots > 20) continue;
      const e = view.scopes.get(root.key)!;
      ctx.error(
        path.join(dir, STRIPES, String(rec.stripe), stripeFileName(rec.seq)),
        `host realm: batch ${JSON.stringify(rec.commitId)} (stripe ${rec.stripe}, lsn ${rec.lsn}) builds on version ${root.previous ?? 0} of ${root.kind} ${JSON.stringify(root.name)}, ` +
          `which neither its home (${e.home === null || e.home === undefined ? 'none' : `version ${e.home.version}`}) nor any record holds: it can never become visible — ` +
          'acknowledged data lost (a home went back, or a record is gone)',
        rec.offset,
      );
    }
  }
  if (roots > 20 || after > 0) {
    ctx.error(dir, `host realm: ${roots > 20 ? `${roots - 20} more batch record(s) like these, and ` : ''}${after} batch record(s) built on them can never become visible either`);
  }
  if (view.anomalies > 0 || dead > 0) {
    ctx.warning(dir, `host realm: ${view.anomalies} version(s) with two candidate batches, ${dead} batch record(s) that never show (only a bug writes them; every load resolves them the same way)`);
  }

  // Records before the checkpoint still on disk are in the homes (when no version has two
  // candidates, every such record was applied: the checkpoint passes a record only then).
  const prefixSlots = new Map<string, Rec>();
  let prefixAnomaly = false;
  for (const s of stripes) {
    for (const rec of s?.prefix ?? []) {
      for (const u of rec.updates) {
        const slot = `${u.key}\u0000${u.next}`;
        const other = prefixSlots.get(slot) ?? view.scopes.get(u.key)?.slots.get(u.next)?.[0];
        if (other !== undefined && other !== rec && (other.commitId !== rec.commitId || other.token !== rec.token)) prefixAnomaly = true;
        prefixSlots.set(slot, rec);
      }
    }
  }
  if (!prefixAnomaly && view.anomalies === 0) {
    const reported = new Set<string>();
    for (const s of stripes) {
      for (const rec of s?.prefix ?? []) {
        for (const u of rec.updates) {
          if (reported.has(u.key) || unreadable(u.kind, u.name)) continue;
          const h = byKey.get(u.key)?.value ?? null;
          const version = h?.version ?? 0;
          if (version >= u.next) continue;
          reported.add(u.key);
          ctx.error(
            h === null ? (table.file ?? path.join(dir, TABLES)) : table.bases.has(u.key) ? table.file! : path.join(byKey.get(u.key)!.dir, HOME_STATE),
            `host realm: batch ${JSON.stringify(rec.commitId)} (stripe ${rec.stripe}, lsn ${rec.lsn}) made version ${u.next} of ${u.kind} ${JSON.stringify(u.name)} and lies before ` +
              `the checkpoint (so it was applied to the homes), but the scope's home is ${h === null ? 'missing' : `at version ${version}`}: committed versions are lost (a home went back)`,
          );
        }
      }
    }
  }

  // What inspect shows.
  for (const h of byKey.values()) {
    const v = h.value!;
    const e = view.entry(scopeKey({ kind: v.kind, name: v.name }), v.kind, v.name);
    if (e.home === undefined) view.setHome(e, v);
  }
  const recordsOf = new Map<string, number>();
  for (const list of view.byStripe) for (const rec of list) for (const u of rec.updates) recordsOf.set(u.key, (recordsOf.get(u.key) ?? 0) + 1);
  const scopes = [...view.scopes.values()]
    .map((e) => {
      const st = view.state(e);
      const home = e.home ?? null;
      const records = recordsOf.get(e.key) ?? 0;
      const src = st.head;
      const headBytes = src === null ? 0 : 'home' in src ? (home?.headLength ?? 0) : (src.u.head?.[1] ?? 0);
      return {
        kind: e.kind,
        name: e.name,
        exists: st.exists,
        deleted: st.deleted,
        version: st.version,
        commitId: st.commitId,
        first: st.first,
        end: st.end,
        rows: st.exists ? st.end - st.first : 0,
        headBytes,
        home: home === null || table.bases.has(e.key) ? null : { version: home.version, rowFiles: home.rowFiles.length, headInBlob: home.headGen !== null, deleted: home.deleted },
        inTable: table.bases.has(e.key),
        records,
      };
    })
    .sort((a, b) => (a.kind === b.kind ? Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)) : a.kind < b.kind ? -1 : 1));
  ctx.describe({
    kind: 'host-realm',
    path: dir,
    stripes: format.stripes,
    realmId: Buffer.from(format.realmId).toString('hex'),
    fence:
      fence === null
        ? null
        : { highest: fence.highest, holderToken: fence.holderToken, holder: fence.holder, leaseEnd: fence.leaseEnd, boot: Buffer.from(fence.boot).toString('hex'), cellSequence: fenceCell?.sequence ?? null },
    checkpoint: realm.checkpoint === null ? null : { round: realm.checkpoint.round, cellSequence: checkpointCell?.sequence ?? null },
    table: table.file === null ? null : { file: table.file, entries: table.entries, live: table.live, homed: table.homed.size },
    stripeReports: stripes.map((s, k) => s?.report ?? { index: k, state: 'unreadable' }),
    homes: homes.length,
    scopes,
  });
  return claimed;
}

/**
 * A realm directory without FORMAT: a creation that crashed (the next open creates it again) when
 * it holds only what a creation writes before FORMAT, each part as creation leaves it; anything
 * more is a realm that lost its FORMAT, which open refuses (lib/host/fs/realm-create.ts): an error.
 */
async function checkUnformedRealm(ctx: VerifyContext, dir: string, names: readonly string[]): Promise<void> {
  const leftover = 'host realm without FORMAT: leftover of a creation that crashed (the next open creates the realm again over it)';
  const lost = 'host realm without FORMAT, but a creation never writes this: the realm lost its FORMAT (open answers UNAVAILABLE with a CORRUPT cause)';
  const creation = new Set([CHECKPOINT, FENCE, STRIPES, SCOPES, TABLES, path.basename(cellTempPath(path.join(dir, CHECKPOINT))), path.basename(cellTempPath(path.join(dir, FORMAT)))]);
  for (const n of names) if (!creation.has(n)) ctx.error(path.join(dir, n), lost);
  if (names.includes(CHECKPOINT)) {
    const file = path.join(dir, CHECKPOINT);
    try {
      const value = await peekCell(ctx.fs, file);
      const round = value !== null && value.length >= 16 ? Number(new DataView(value.buffer, value.byteOffset + 8, 8).getBigUint64(0, true)) : 0;
      if (round !== 0) ctx.error(file, `host realm without FORMAT, but its checkpoint is at round ${round}: the realm lost its FORMAT (open answers UNAVAILABLE with a CORRUPT cause)`);
    } catch (err) {
      if (err instanceof VerifyError) throw err;
      ctx.error(file, `host realm without FORMAT: checkpoint: ${messageOf(err)}`);
    }
  }
  const walk = async (p: string): Promise<void> => {
    const st = await ctx.fs.stat(p);
    if (st === null) return;
    if (!st.isDirectory) {
      if (path.basename(p) === 'state' && path.basename(path.dirname(p)) === FENCE) {
        ctx.error(p, 'host realm without FORMAT, but it holds a fence state (a token was issued): the realm lost its FORMAT (open answers UNAVAILABLE with a CORRUPT cause)');
        return;
      }
      const seq = parseStripeFileName(path.basename(p));
      if (seq !== null && seq !== 0) {
        ctx.error(p, 'host realm without FORMAT, but it holds a stripe file beyond the first: the realm lost its FORMAT (open answers UNAVAILABLE with a CORRUPT cause)');
        return;
      }
      if (seq !== null && st.size > STRIPE_HEADER_BYTES) {
        const data = await withFile(ctx, p, 'stripe file', async (r) => (await r.firstNonZero(STRIPE_HEADER_BYTES, r.size)) >= 0);
        if (data === true) {
          ctx.error(p, 'host realm without FORMAT, but this stripe file holds data: the next open would create the realm again over it', STRIPE_HEADER_BYTES);
          return;
        }
        if (data === false) ctx.warning(p, leftover);
        return;
      }
      await sawLeftover(ctx, p, leftover);
      return;
    }
    for (const n of (await listDir(ctx, p)) ?? []) await walk(path.join(p, n));
  };
  for (const n of [CHECKPOINT, FENCE, STRIPES]) if (names.includes(n)) await walk(path.join(dir, n));
  const scopes = (await listDir(ctx, path.join(dir, SCOPES))) ?? [];
  if (scopes.length > 0) ctx.error(path.join(dir, SCOPES), 'host realm without FORMAT, but it holds scope homes: the next open would create the realm again over them');
  const tables = (await listDir(ctx, path.join(dir, TABLES))) ?? [];
  if (tables.length > 0) ctx.error(path.join(dir, TABLES), 'host realm without FORMAT, but it holds scope tables: the open refuses it (UNAVAILABLE with a CORRUPT cause)');
  ctx.describe({ kind: 'host-realm', path: dir, state: 'no FORMAT' });
}
