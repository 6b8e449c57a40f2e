// Offline check of a payload store directory (lib/payloads/, docs/payloads.md).
//
// Owns: `checkPayloadStore`, `isPayloadStoreDirectory`. Uses the store's own decoders
// (lib/payloads/format.ts) and never opens the store (its open removes temporary files and
// syncs). Covers every byte: FORMAT (magic, version, CRC), the CLOCK cell (./cell.ts; its value
// one u64), each blob (header CRC and fields, the exact length, every chunk's CRC seeded with the
// blob's salt and chunk index, and the SHA-256 of the whole payload against the file name, streamed
// one chunk at a time), each refcount file (length, CRC, holders) and that every payload with
// holders has its bytes. Leftover temporary files are warnings (the next open removes them).

import * as path from 'node:path';
import { createHash } from 'node:crypto';
import {
  BLOB_HEADER_BYTES,
  BLOBS,
  CHUNK_CRC_BYTES,
  CLOCK_NAME as CLOCK,
  CLOCK_SLOT_BYTES,
  FORMAT_BYTES,
  FORMAT_NAME as FORMAT,
  LOCK_NAME as LOCK,
  MAX_REFS_BODY_BYTES,
  REFS,
  REFS_HEADER_BYTES,
  TMP,
  checkFormat,
  chunkCount,
  chunkCrc,
  decodeBlobHeader,
  decodeRefs,
  fanoutOf,
  isFanoutName,
  isHexName,
  DIGEST_PREFIX,
  HELD_SUFFIX,
} from '../../payloads/format.js';
import { cellTempPath } from '../../../cells/index.js';
import { checkCellFile } from './cell.js';
import { checkEmpty } from './log.js';
import { VerifyError, messageOf, type VerifyContext } from './context.js';

const MAX_READ = 1 << 20;

export function isPayloadStoreDirectory(names: readonly string[]): boolean {
  return names.includes(FORMAT) && (names.includes(BLOBS) || names.includes(REFS) || names.includes(TMP));
}

/** Checks the payload store in `dir`; answers the entry names it accounted for. */
export async function checkPayloadStore(ctx: VerifyContext, dir: string, names: readonly string[]): Promise<Set<string>> {
  const claimed = new Set<string>([LOCK, FORMAT, CLOCK, path.basename(cellTempPath(path.join(dir, CLOCK))), BLOBS, REFS, TMP]);
  const digests = new Set<string>();
  ctx.payloadStores.set(dir, digests);
  if (names.includes(LOCK)) await checkEmpty(ctx, path.join(dir, LOCK), 'LOCK');

  const formatPath = path.join(dir, FORMAT);
  const format = await ctx.readBounded(formatPath, FORMAT_BYTES, 'format marker');
  if (format !== null) {
    ctx.sawFile(format.length);
    try {
      checkFormat(format, format.length, formatPath);
    } catch (err) {
      ctx.error(formatPath, messageOf(err), 0);
    }
  }

  const clockPath = path.join(dir, CLOCK);
  let clock: number | null = null;
  if (!names.includes(CLOCK)) {
    ctx.error(clockPath, 'payload store: the CLOCK cell is missing (CORRUPT at open)');
  } else {
    const cell = await checkCellFile(ctx, clockPath, CLOCK_SLOT_BYTES, 'payload store CLOCK');
    if (cell.value !== null) {
      if (cell.value.length !== 8) ctx.error(clockPath, `payload store CLOCK holds ${cell.value.length} bytes, not one u64 (CORRUPT at open)`);
      else {
        const v = new DataView(cell.value.buffer, cell.value.byteOffset, 8).getBigUint64(0, true);
        if (v > BigInt(Number.MAX_SAFE_INTEGER)) ctx.error(clockPath, 'payload store CLOCK is out of range (CORRUPT at open)');
        else clock = Number(v);
      }
    }
  }
  if (names.includes(path.basename(cellTempPath(clockPath)))) {
    const p = cellTempPath(clockPath);
    ctx.sawFile((await ctx.fs.stat(p))?.size ?? 0);
    ctx.warning(p, 'payload store: leftover of a creation that died (removed at the next open)');
  }

  // Temporary files: writers that died; the next open removes them.
  for (const n of await listDir(ctx, path.join(dir, TMP))) {
    const p = path.join(dir, TMP, n);
    ctx.sawFile((await ctx.fs.stat(p))?.size ?? 0);
    ctx.warning(p, 'payload store: temporary file of an interrupted put or reference change (removed at the next open)');
  }

  const payloads: { digest: string; size: number; holders: number }[] = [];
  for await (const { hex, file } of fanoutFiles(ctx, path.join(dir, BLOBS))) {
    const size = await checkBlob(ctx, file, hex);
    digests.add(DIGEST_PREFIX + hex);
    payloads.push({ digest: DIGEST_PREFIX + hex, size, holders: 0 });
  }

  const holders = new Map<string, number>();
  // A refcount file's marker: made after the file, removed before it (docs/payloads.md, "The marker").
  const onMarker = (marked: string, marker: string, beside: boolean): void => {
    if (!beside) ctx.error(path.join(path.dirname(marker), marked), `refcount file missing beside its marker ${marker}: the payload's holders were lost (CORRUPT when read)`);
  };
  for await (const { hex, file } of fanoutFiles(ctx, path.join(dir, REFS), onMarker)) {
    ctx.counts.refFiles++;
    const bytes = await ctx.readBounded(file, REFS_HEADER_BYTES + MAX_REFS_BODY_BYTES + 4, 'refcount file');
    if (bytes === null) continue;
    ctx.sawFile(bytes.length);
    try {
      const list = decodeRefs(bytes, hex, file);
      holders.set(DIGEST_PREFIX + hex, list.length);
      if (!digests.has(DIGEST_PREFIX + hex)) {
        ctx.error(file, `payload ${DIGEST_PREFIX}${hex} has ${list.length} holder(s) but no bytes`);
      }
    } catch (err) {
      ctx.error(file, messageOf(err));
    }
  }
  for (const p of payloads) p.holders = holders.get(p.digest) ?? 0;
  ctx.describe({ kind: 'payloads', path: dir, storeTimeMs: clock, payloads });
  for (const n of names) if (!claimed.has(n)) ctx.unknown.push(path.join(dir, n));
  return claimed;
}

/**
 * The files `<root>/<hh>/<64 hex>` (blobs or refcount files), in name order, one fan-out directory
 * listed at a time; a misnamed entry is noted as unknown and passed over.
 */
async function* fanoutFiles(
  ctx: VerifyContext,
  root: string,
  onMarker?: (marked: string, marker: string, beside: boolean) => void,
): AsyncGenerator<{ hex: string; file: string }> {
  for (const hh of (await listDir(ctx, root)).sort()) {
    const sub = path.join(root, hh);
    if (!isFanoutName(hh)) {
      ctx.unknown.push(sub);
      continue;
    }
    const entries = await listDir(ctx, sub);
    for (const hex of entries.sort()) {
      const file = path.join(sub, hex);
      const marked = onMarker !== undefined && hex.endsWith(HELD_SUFFIX) ? hex.slice(0, -HELD_SUFFIX.length) : null;
      if (marked !== null && isHexName(marked) && fanoutOf(marked) === hh) {
        onMarker?.(marked, file, entries.includes(marked));
        continue;
      }
      if (!isHexName(hex) || fanoutOf(hex) !== hh) {
        ctx.unknown.push(file);
        continue;
      }
      yield { hex, file };
    }
  }
}

async function listDir(ctx: VerifyContext, dir: string): Promise<string[]> {
  try {
    return await ctx.fs.readdir(dir);
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') {
      ctx.error(dir, 'payload store: directory missing (CORRUPT at open)');
      return [];
    }
    throw err;
  }
}

/** Checks one blob, streaming; answers its payload size (0 when unreadable). */
async function checkBlob(ctx: VerifyContext, file: string, hex: string): Promise<number> {
  const h = await ctx.fs.open(file, 'read');
  try {
    const fileBytes = await h.size();
    ctx.sawFile(fileBytes);
    const headBytes = new Uint8Array(BLOB_HEADER_BYTES);
    const n = await h.read(headBytes, 0);
    let header;
    try {
      header = decodeBlobHeader(headBytes.subarray(0, n), fileBytes, hex, file);
    } catch (err) {
      ctx.error(file, messageOf(err), 0);
      return 0;
    }
    ctx.counts.payloads++;
    const chunks = chunkCount(header.size, header.chunkBytes);
    const hash = createHash('sha256');
    const frameBytes = header.chunkBytes + CHUNK_CRC_BYTES;
    const perRead = Math.max(1, Math.floor(MAX_READ / frameBytes));
    const buf = new Uint8Array(perRead * frameBytes);
    let at = BLOB_HEADER_BYTES;
    for (let i = 0; i < chunks; ) {
      const batch = Math.min(perRead, chunks - i);
      const lastLen = header.size - (chunks - 1) * header.chunkBytes;
      const want = (batch - (i + batch === chunks ? 1 : 0)) * frameBytes + (i + batch === chunks ? lastLen + CHUNK_CRC_BYTES : 0);
      const got = await h.read(buf.subarray(0, want), at);
      if (got !== want) {
        ctx.error(file, `payload blob ends early at ${at + got}`, at + got);
        return 0;
      }
      let p = 0;
      for (let j = 0; j < batch; j++, i++) {
        const len = i === chunks - 1 ? lastLen : header.chunkBytes;
        const chunk = buf.subarray(p, p + len);
        const stored = new DataView(buf.buffer, buf.byteOffset + p + len, 4).getUint32(0, true);
        if (stored !== chunkCrc(header.salt, i, chunk)) {
          ctx.error(file, `payload blob chunk ${i} at offset ${at + p} fails its CRC`, at + p);
          return 0;
        }
        hash.update(chunk);
        p += len + CHUNK_CRC_BYTES;
      }
      at += p;
    }
    if (hash.digest('hex') !== hex) {
      ctx.error(file, 'payload blob bytes do not hash to its digest (every chunk checked: damage a CRC32 missed)');
      return 0;
    }
    ctx.counts.payloadBytes += header.size;
    return header.size;
  } catch (err) {
    if (err instanceof VerifyError) throw err;
    ctx.error(file, `cannot read payload blob: ${messageOf(err)}`);
    return 0;
  } finally {
    await h.close().catch(() => undefined);
  }
}
