// A realm's scope table on disk: reading one lock-free (`ScopeTable`) and writing the next one
// (`TableWriter`, the checkpointer's side).
//
// Owns: the I/O of `tables/<seq>.tbl` (the bytes are format-table.ts). Guarantees:
// - A table is trusted only as the checkpoint cell names it: its size and its footer's CRC must be
//   what the cell says, its header, index and every block it reads must pass their CRCs, each
//   block must hold the entries the index says, starting at the key the index says. Anything else
//   is CORRUPT naming the file and the offset. A table is never modified once the cell names it.
// - Lookups and scans read only the blocks they need (an index of one item per ~16 KiB block is
//   what stays in memory, plus a few decoded blocks).
// - A handle keeps a table's descriptor while any read of it runs (`use`), so a newer round that
//   removes the file never breaks a read under way (an unlinked file stays readable).
// - A writer appends entries in strictly increasing key order (asserted), and `finish` makes the
//   whole file durable (fdatasync) before it answers the reference the checkpoint cell will hold.

import * as path from 'node:path';
import { crc32 } from '../../checksum.js';
import { assert } from '../../assert.js';
import { corrupt } from '../../errors.js';
import type { FileHandle, FileSystem } from '../../fs/types.js';
import type { ScopeKind } from '../types.js';
import { StripeGone } from './stripe-files.js';
import {
  compareKeys,
  decodeBlock,
  decodeIndex,
  decodeTableFooter,
  decodeTableHeader,
  encodeIndex,
  encodeTableFooter,
  encodeTableHeader,
  footerCrcOf,
  KIND_CODE,
  sameBytes,
  TABLE_BLOCK_BYTES,
  TABLE_FOOTER_BYTES,
  tableFileName,
  tableHeaderBytes,
  TABLES_DIR,
  type BlockRef,
  type TableEntry,
  type TableRef,
} from './format.js';

/** A block of a run a scan read: its bytes, or its entries when the cache had them. */
interface RunBlock {
  index: number;
  bytes: Uint8Array | null;
  entries: TableEntry[] | null;
}

/** Decoded blocks a table keeps (about 16 KiB of file each). */
const CACHED_BLOCKS = 16;
/** A scan reads this much of consecutive blocks at once (into one buffer it reuses). */
const SCAN_READ_BYTES = 128 * 1024;

export function tablePath(realm: string, seq: number): string {
  return path.join(realm, TABLES_DIR, tableFileName(seq));
}

async function readExactly(h: FileHandle, file: string, length: number, at: number): Promise<Uint8Array> {
  // Not zero-filled: the read must fill every byte, or the table is refused.
  const b = Buffer.allocUnsafeSlow(length);
  const n = await h.read(b, at);
  if (n !== length) throw corrupt(`scope table ${file} is shorter than its footer says (${n} of ${length} bytes at offset ${at})`, { file, offset: at });
  return b;
}

/** One table, open for reading (see the module header). */
export class ScopeTable {
  readonly file: string;
  readonly ref: TableRef;
  /** Per stripe: the round that wrote the table had read every record below this lsn. */
  readonly cut: readonly number[];
  readonly blocks: readonly BlockRef[];
  /** Entries in all (tombstones and homed scopes included), and the live ones among them. */
  readonly entries: number;
  readonly live: number;
  readonly #h: FileHandle;
  readonly #cache = new Map<number, TableEntry[]>();
  #users = 0;
  /** A scan buffer no scan holds now (see `scan`). */
  #spare: Uint8Array | null = null;
  #retired = false;
  #closed: Promise<void> | null = null;

  private constructor(file: string, ref: TableRef, cut: number[], blocks: BlockRef[], entries: number, live: number, h: FileHandle) {
    this.file = file;
    this.ref = ref;
    this.cut = cut;
    this.blocks = blocks;
    this.entries = entries;
    this.live = live;
    this.#h = h;
  }

  /** Opens the table `ref` names (ENOENT passes through: the caller tells a newer round from a loss). */
  static async open(fs: FileSystem, realm: string, ref: TableRef, stripes: number, realmTag: Uint8Array): Promise<ScopeTable> {
    const file = tablePath(realm, ref.seq);
    const h = await fs.open(file, 'read');
    try {
      const size = await h.size();
      if (size !== ref.bytes) throw corrupt(`scope table ${file} holds ${size} bytes; the checkpoint names ${ref.bytes}`, { file, offset: Math.min(size, ref.bytes) });
      const footerAt = size - TABLE_FOOTER_BYTES;
      const fb = await readExactly(h, file, TABLE_FOOTER_BYTES, footerAt);
      if (footerCrcOf(fb) !== ref.footerCrc) throw corrupt(`scope table ${file}: the footer is not the one the checkpoint names`, { file, offset: footerAt });
      const footer = decodeTableFooter(fb, file, footerAt);
      if (footer.seq !== ref.seq || footer.fileBytes !== size) throw corrupt(`scope table ${file}: the footer names another table`, { file, offset: footerAt });
      const headerBytes = tableHeaderBytes(stripes);
      if (footer.indexOffset < headerBytes) throw corrupt(`scope table ${file}: the index overlaps the header`, { file, offset: footerAt });
      const header = decodeTableHeader(await readExactly(h, file, headerBytes, 0), stripes, file);
      if (header.seq !== ref.seq || !sameBytes(header.realmTag, realmTag.subarray(0, 8))) throw corrupt(`scope table ${file} belongs to another table or realm`, { file, offset: 0 });
      const ib = await readExactly(h, file, footer.indexLength, footer.indexOffset);
      if (crc32(ib) !== footer.indexCrc) throw corrupt(`scope table ${file}: the index fails its checksum`, { file, offset: footer.indexOffset });
      const blocks = decodeIndex(ib, headerBytes, footer.indexOffset, file, footer.indexOffset);
      let entries = 0;
      for (const k of blocks) entries += k.entries;
      if (entries !== footer.entries || footer.live > entries) throw corrupt(`scope table ${file}: the index and the footer disagree on the entries`, { file, offset: footerAt });
      return new ScopeTable(file, ref, header.cut, blocks, entries, footer.live, h);
    } catch (err) {
      await h.close().catch(() => undefined);
      throw err;
    }
  }

  /** Runs `fn` while the table's descriptor is kept open (a retired table closes after the last use). */
  async use<T>(fn: () => Promise<T>): Promise<T> {
    // A reader that held on to a table a newer checkpoint retired: like a stripe file gone, the
    // caller moves to the newer checkpoint and reads again.
    if (this.#closed !== null) throw new StripeGone(this.file);
    this.#users++;
    try {
      return await fn();
    } finally {
      this.#users--;
      if (this.#retired && this.#users === 0) void this.#close();
    }
  }

  /** No new use will start: closes the descriptor once the uses under way end. */
  retire(): Promise<void> {
    this.#retired = true;
    if (this.#users === 0) return this.#close();
    return Promise.resolve();
  }

  #close(): Promise<void> {
    if (this.#closed === null) this.#closed = this.#h.close().catch(() => undefined);
    return this.#closed;
  }

  /** The entry of the scope, or null when the table holds none. */
  find(kind: ScopeKind, nameBytes: Uint8Array): Promise<TableEntry | null> {
    return this.use(async () => {
      const code = KIND_CODE[kind];
      const i = this.#blockOf(code, nameBytes);
      if (i < 0) return null;
      const entries = await this.#block(i);
      let lo = 0;
      let hi = entries.length - 1;
      while (lo <= hi) {
        const mid = (lo + hi) >>> 1;
        const c = entries[mid]!.compareTo(code, nameBytes);
        if (c === 0) return entries[mid]!;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
      }
      return null;
    });
  }

  /**
   * The entries of `kind` whose names sort after `after` (every one when null), in order, handed to
   * `each` one at a time until it answers false. Consecutive blocks are read together.
   */
  scan(kind: ScopeKind, after: Uint8Array | null, each: (e: TableEntry) => boolean | Promise<boolean>): Promise<void> {
    let afterBuf = after === null ? null : Buffer.from(after.buffer, after.byteOffset, after.byteLength);
    // The table's spare read buffer, when no other scan holds it: a listing's pages reuse one
    // buffer instead of a fresh 128 KiB allocation each (fresh pages fault in on every first touch).
    let reuse: Uint8Array | null = this.#spare;
    this.#spare = null;
    return this.use(async () => {
      const code = KIND_CODE[kind];
      let i = after === null ? this.#firstBlockOfKind(code) : Math.max(0, this.#blockOf(code, after));
      for (; i < this.blocks.length && this.blocks[i]!.kind <= code; ) {
        // Not kept: a listing reads forward. Every run is read into the one buffer this scan
        // holds (the table's spare when free), so a listing leaves no trail of read buffers.
        const run = await this.#blocksFrom(i, reuse);
        reuse = run.buffer;
        for (const block of run.blocks) {
          // Decoded only once the scan reaches it: a page that ends early leaves the rest of the run undecoded.
          const entries = this.#entriesOf(block, false);
          // An indexed loop: an array's iterator costs a call per entry in code not yet optimised.
          for (let n = 0; n < entries.length; n++) {
            const e = entries[n]!;
            const k = e.kindCode;
            if (k < code) continue;
            if (k > code) return;
            // Keys only grow: once past `after`, no entry needs the comparison.
            if (afterBuf !== null) {
              if (e.compareTo(code, afterBuf) <= 0) continue;
              afterBuf = null;
            }
            // Most answers come at once (a small scope's entry): no turn of the event loop for those.
            const more = each(e);
            if (!(more === true || (more !== false && (await more)))) return;
          }
        }
        i += run.blocks.length;
      }
    }).finally(() => {
      // Every entry the scan handed out was used by now (`each` was awaited): the buffer is free.
      if (reuse !== null && (this.#spare === null || this.#spare.length < reuse.length)) this.#spare = reuse;
    });
  }

  /** Every entry in key order (the checkpointer's merge and the offline check). */
  async forEach(each: (e: TableEntry) => void | Promise<void>): Promise<void> {
    await this.use(async () => {
      for (let i = 0; i < this.blocks.length; ) {
        const run = await this.#blocksFrom(i, null);
        for (const block of run.blocks) {
          for (const e of this.#entriesOf(block, false)) {
            const done = each(e);
            if (done !== undefined) await done;
          }
        }
        i += run.blocks.length;
      }
    });
  }

  /** The last block whose first key is at or below the key (-1: the key sorts before every block). */
  #blockOf(code: number, nameBytes: Uint8Array): number {
    let lo = 0;
    let hi = this.blocks.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const k = this.blocks[mid]!;
      if (compareKeys(k.kind, k.firstName, code, nameBytes) <= 0) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  }

  /** The first block that may hold an entry of kind `code` (the one before the first that starts with it). */
  #firstBlockOfKind(code: number): number {
    let i = 0;
    while (i < this.blocks.length && this.blocks[i]!.kind < code) i++;
    return Math.max(0, i - 1);
  }

  async #block(i: number): Promise<TableEntry[]> {
    const hit = this.#cache.get(i);
    if (hit !== undefined) {
      this.#cache.delete(i);
      this.#cache.set(i, hit);
      return hit;
    }
    const k = this.blocks[i]!;
    return this.#decode(i, await readExactly(this.#h, this.file, k.length, k.offset), true);
  }

  /**
   * Blocks from `i` on, read in one go up to SCAN_READ_BYTES (at least one block), not decoded yet
   * (`#entriesOf` decodes one: entries are views into the buffer, valid until the caller reads
   * into it again); `into` is a buffer to read into when large enough. A cached block is answered
   * as its entries, alone. Answers the blocks and the buffer read into.
   */
  async #blocksFrom(i: number, into: Uint8Array | null): Promise<{ blocks: RunBlock[]; buffer: Uint8Array | null }> {
    const hit = this.#cache.get(i);
    if (hit !== undefined) return { blocks: [{ index: i, bytes: null, entries: hit }], buffer: into };
    let j = i;
    let bytes = 0;
    while (j < this.blocks.length && (j === i || bytes + this.blocks[j]!.length <= SCAN_READ_BYTES) && !this.#cache.has(j)) bytes += this.blocks[j++]!.length;
    const start = this.blocks[i]!.offset;
    const buf = into !== null && into.length >= bytes ? into : Buffer.allocUnsafeSlow(Math.max(bytes, SCAN_READ_BYTES));
    // On the calling thread: a table a round wrote or a load read is in the page cache, and on a
    // busy machine the pool's two hand-offs cost more than the copy of a run (a cold open + list:
    // 0.83x the time with these reads on the pool at 10,000 scopes, 0.67x at 100,000, paired;
    // docs/host-store.md). A table not in the page cache blocks the event loop for its reads.
    const n = await this.#h.read(buf.subarray(0, bytes), start, 'inline');
    if (n !== bytes) throw corrupt(`scope table ${this.file} is shorter than its index says (${n} of ${bytes} bytes at offset ${start})`, { file: this.file, offset: start });
    const out: RunBlock[] = [];
    for (let m = i; m < j; m++) {
      const k = this.blocks[m]!;
      out.push({ index: m, bytes: buf.subarray(k.offset - start, k.offset - start + k.length), entries: null });
    }
    return { blocks: out, buffer: buf };
  }

  /** A block of a run, decoded (and checked) now if it was not. */
  #entriesOf(block: RunBlock, keep: boolean): TableEntry[] {
    return block.entries ?? this.#decode(block.index, block.bytes!, keep);
  }

  #decode(i: number, bytes: Uint8Array, keep: boolean): TableEntry[] {
    const k = this.blocks[i]!;
    if (crc32(bytes) !== k.crc) throw corrupt(`scope table ${this.file}: block at offset ${k.offset} fails its checksum`, { file: this.file, offset: k.offset });
    const entries = decodeBlock(bytes, this.file, k.offset);
    const first = entries[0];
    if (entries.length !== k.entries || first === undefined || first.compareTo(k.kind, k.firstName) !== 0) {
      throw corrupt(`scope table ${this.file}: block at offset ${k.offset} is not the one its index names`, { file: this.file, offset: k.offset });
    }
    const next = this.blocks[i + 1];
    const last = entries[entries.length - 1]!;
    if (next !== undefined && last.compareTo(next.kind, next.firstName) >= 0) {
      throw corrupt(`scope table ${this.file}: block at offset ${k.offset} reaches past the next block's first key`, { file: this.file, offset: k.offset });
    }
    if (keep) {
      this.#cache.set(i, entries);
      if (this.#cache.size > CACHED_BLOCKS) this.#cache.delete(this.#cache.keys().next().value as number);
    }
    return entries;
  }
}

/** Writes a new table, entry by entry in key order (see the module header). */
export class TableWriter {
  readonly file: string;
  readonly #fs: FileSystem;
  readonly #h: FileHandle;
  readonly #seq: number;
  #at: number;
  /** Chunks not written yet, and their bytes. */
  #pending: Uint8Array[] = [];
  #pendingBytes = 0;
  #writtenTo: number;
  /** The block being filled. */
  #block: Uint8Array[] = [];
  #blockBytes = 0;
  #blockCrc = 0;
  #blockFirst: { kind: number; name: Uint8Array } | null = null;
  readonly #index: BlockRef[] = [];
  #entries = 0;
  #live = 0;
  #last: { kind: number; name: Uint8Array } | null = null;

  private constructor(fs: FileSystem, file: string, h: FileHandle, seq: number, header: Uint8Array) {
    this.#fs = fs;
    this.file = file;
    this.#h = h;
    this.#seq = seq;
    this.#pending.push(header);
    this.#pendingBytes = header.length;
    this.#at = header.length;
    this.#writtenTo = 0;
  }

  static async create(fs: FileSystem, realm: string, seq: number, cut: readonly number[], realmTag: Uint8Array): Promise<TableWriter> {
    const file = tablePath(realm, seq);
    const h = await fs.open(file, 'create');
    try {
      await h.truncate(0);
    } catch (err) {
      await h.close().catch(() => undefined);
      throw err;
    }
    return new TableWriter(fs, file, h, seq, encodeTableHeader({ seq, realmTag, cut: [...cut] }));
  }

  /** Adds one entry (its encoded bytes); keys must strictly increase. */
  async add(kind: number, name: Uint8Array, raw: Uint8Array, live: boolean): Promise<void> {
    const last = this.#last;
    assert(last === null || compareKeys(last.kind, last.name, kind, name) < 0, 'scope table entries are added in key order');
    this.#last = { kind, name };
    if (this.#blockFirst === null) this.#blockFirst = { kind, name: Uint8Array.from(name) };
    this.#block.push(raw);
    this.#blockBytes += raw.length;
    this.#blockCrc = crc32(raw, this.#blockCrc);
    this.#entries++;
    if (live) this.#live++;
    if (this.#blockBytes >= TABLE_BLOCK_BYTES) await this.#sealBlock();
  }

  async #sealBlock(): Promise<void> {
    if (this.#blockFirst === null) return;
    this.#index.push({ offset: this.#at, length: this.#blockBytes, crc: this.#blockCrc, entries: this.#block.length, kind: this.#blockFirst.kind, firstName: this.#blockFirst.name });
    this.#at += this.#blockBytes;
    for (const b of this.#block) this.#pending.push(b);
    this.#pendingBytes += this.#blockBytes;
    this.#block = [];
    this.#blockBytes = 0;
    this.#blockCrc = 0;
    this.#blockFirst = null;
    if (this.#pendingBytes >= 1 << 20) await this.#flush();
  }

  async #flush(): Promise<void> {
    if (this.#pending.length === 0) return;
    await this.#h.writev(this.#pending, this.#writtenTo);
    this.#writtenTo += this.#pendingBytes;
    this.#pending = [];
    this.#pendingBytes = 0;
  }

  /** Writes the index and the footer, syncs the file and closes it; answers what the checkpoint cell will name. */
  async finish(): Promise<TableRef> {
    await this.#sealBlock();
    const index = encodeIndex(this.#index);
    const indexOffset = this.#at;
    const fileBytes = indexOffset + index.length + TABLE_FOOTER_BYTES;
    const footer = encodeTableFooter({ seq: this.#seq, indexOffset, indexLength: index.length, indexCrc: crc32(index), entries: this.#entries, live: this.#live, fileBytes });
    this.#pending.push(index, footer);
    this.#pendingBytes += index.length + footer.length;
    try {
      await this.#flush();
      assert(this.#writtenTo === fileBytes, 'a scope table is written whole');
      await this.#h.datasync();
    } finally {
      await this.#h.close();
    }
    return { seq: this.#seq, bytes: fileBytes, footerCrc: footerCrcOf(footer) };
  }

  /** Gives up: closes and removes the file (a round that failed). */
  async abort(): Promise<void> {
    await this.#h.close().catch(() => undefined);
    await this.#fs.unlink(this.file).catch(() => undefined);
  }
}
