// The scopes' homes: each scope's own directory, where the checkpointer keeps what the stripes
// hold no longer.
//
// Owns: reading a home lock-free (its cell, its row files, its head blob) and writing one (the
// checkpointer's side: `HomeWriter`). A scope's home is `scopes/<2 hex>/<kind letter><sha-256 hex>/`
// (the name never becomes a path) holding `state` (a two-slot cell: version, commit id, first/end,
// the head inline or the name of a head blob, the list of row files) and append-only files:
// `r-<gen>` row files (frames with the row's index and a salted CRC) and `h-<gen>` head blobs.
// Guarantees:
// - Bytes a cell ever named are never rewritten: a row file only grows past the end its newest
//   cell names, and after a truncation the rows go to a new file. So a reader holding any cell
//   value reads exactly that value's rows, or finds a file gone (ENOENT: it reads the cell again).
// - The cell is the commit point of a home change: row files and blobs are fdatasynced (and new
//   names directory-synced) before the cell write, and files are removed only after it.
// - Readers take no lock and trust nothing unchecked: every row frame's CRC and index, and the head
//   blob's CRC (kept in the cell), are verified on read.

import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { cellValueCapacity, readCellFile, writeCellFile, type CellState } from '../../../cells/index.js';
import { assert } from '../../assert.js';
import { corrupt } from '../../errors.js';
import type { FileHandle, FileSystem } from '../../fs/types.js';
import type { ScopeKind } from '../types.js';
import {
  checkRowHeader,
  decodeHome,
  encodeHome,
  encodeRowHeader,
  headFileName,
  HOME_SLOT_BYTES,
  HOME_STATE_FILE,
  INLINE_HEAD_BYTES,
  MAX_ROW_FILES,
  ROW_FRAME_HEADER_BYTES,
  ROW_HEADER_BYTES,
  rowFileName,
  rowSalt,
  scopeDirName,
  SCOPES_DIR,
  u32,
  u64,
  writeRowFrame,
  type HomeValue,
  type RowFileRef,
} from './format.js';

/** Row files the checkpointer keeps open at most (over every home it builds), process-wide. */
const OPEN_ROW_FILES = 256;
let openRowFiles = 0;

/** A row file takes no more rows once it is this large. */
export const ROW_FILE_BYTES = 64 * 1024 * 1024;
const READ_WINDOW = 256 * 1024;

export function scopeDirOf(realm: string, kind: ScopeKind, digest: string): string {
  const { fanout, leaf } = scopeDirName(kind, digest);
  return path.join(realm, SCOPES_DIR, fanout, leaf);
}

function newGen(): string {
  return randomBytes(8).toString('hex');
}

/** Directories a checkpoint round created entries in; each is synced once, at the end of the round. */
export class DirSyncs {
  readonly #fs: FileSystem;
  readonly #dirs = new Set<string>();

  constructor(fs: FileSystem) {
    this.#fs = fs;
  }

  add(dir: string): void {
    this.#dirs.add(dir);
  }

  /** Syncs every directory added (deepest first: a child's entry before its parent's is fine). */
  async flush(): Promise<void> {
    const dirs = [...this.#dirs].sort((a, b) => b.length - a.length);
    this.#dirs.clear();
    for (const d of dirs) await this.#fs.syncDir(d);
  }
}

/** A home cell's value with the state of its cell file (what its next write needs). */
export interface HomeCell {
  value: HomeValue;
  cell: CellState;
}

/**
 * Reads a home cell without a lock: null when the scope has no home. A writer may replace the
 * cell while it is read; a read that meets the write is read again (cells/ `readCellFile`), and a
 * damaged newer slot is CORRUPT, never the older value.
 */
export async function readHomeCell(fs: FileSystem, dir: string): Promise<HomeCell | null> {
  const file = path.join(dir, HOME_STATE_FILE);
  const cell = await readCellFile(fs, file, HOME_SLOT_BYTES);
  return cell === null ? null : { value: decodeHome(cell.live.value, file), cell };
}

export async function readHome(fs: FileSystem, dir: string): Promise<HomeValue | null> {
  return (await readHomeCell(fs, dir))?.value ?? null;
}

/**
 * Writes a home cell the way cells/ writes a cell (docs/format.md, "Two-slot cell"), through
 * `writeCellFile`: it skips the open-time sync and the lock of `openCell`, because the
 * checkpointer holds the realm's checkpoint lock (it is the only writer of homes) and its own
 * fdatasync covers whatever an earlier writer left unsynced in the file.
 */
async function writeHomeCell(fs: FileSystem, dir: string, value: Uint8Array, prior: CellState | null): Promise<void> {
  await writeCellFile(fs, path.join(dir, HOME_STATE_FILE), HOME_SLOT_BYTES, prior, value);
}

/** Reads the head a home holds (inline or from its blob, checked against its CRC). */
export async function readHomeHead(fs: FileSystem, dir: string, home: HomeValue): Promise<Uint8Array> {
  if (home.head !== null) return home.head.slice();
  const file = path.join(dir, headFileName(home.headGen!));
  const h = await fs.open(file, 'read');
  try {
    const b = new Uint8Array(home.headLength);
    const n = await h.read(b, 0);
    if (n !== home.headLength || crc32(b) !== home.headCrc) throw corrupt(`head blob ${file} fails its check`, { file });
    return b;
  } finally {
    await h.close().catch(() => undefined);
  }
}

/** Frame offsets of one row file, as far as they were read (files only grow past their cells). */
interface OffsetTable {
  starts: number[];
  /** Offset just after the last frame in `starts`. */
  end: number;
}

/** Reads rows from homes; keeps each row file's frame offsets (a handle-wide cache). */
export class HomeRows {
  readonly #fs: FileSystem;
  readonly #tables = new Map<string, OffsetTable>();

  constructor(fs: FileSystem) {
    this.#fs = fs;
  }

  /** Rows [from, to) of the home (which must cover them), in order. */
  async read(dir: string, home: HomeValue, from: number, to: number, out: { index: number; data: Uint8Array }[]): Promise<void> {
    if (home.inlineRows !== undefined) {
      // A small scope's base from its table entry: its rows are in memory, checked with its block.
      for (let i = from; i < to; i++) out.push({ index: i, data: home.inlineRows[i - home.first]! });
      return;
    }
    let i = from;
    for (const ref of home.rowFiles) {
      if (i >= to) break;
      const fileEnd = ref.start + ref.count;
      if (fileEnd <= i) continue;
      const file = path.join(dir, rowFileName(ref.gen));
      const h = await this.#fs.open(file, 'read');
      try {
        const table = await this.#table(h, file, ref, Math.min(to, fileEnd) - ref.start);
        const salt = rowSalt(ref.gen);
        while (i < to && i < fileEnd) {
          const k = i - ref.start;
          const start = table.starts[k]!;
          const stop = k + 1 < table.starts.length ? table.starts[k + 1]! : table.end;
          const b = new Uint8Array(stop - start);
          const n = await h.read(b, start);
          if (n !== b.length || u64(b, 8) !== i || u32(b, 4) !== b.length - ROW_FRAME_HEADER_BYTES) {
            throw corrupt(`row file ${file}: frame of row ${i} fails its check`, { file, index: i });
          }
          if (crc32(b.subarray(4), salt) !== u32(b, 0)) throw corrupt(`row file ${file}: row ${i} fails its checksum`, { file, index: i });
          out.push({ index: i, data: b.subarray(ROW_FRAME_HEADER_BYTES) });
          i++;
        }
      } finally {
        await h.close().catch(() => undefined);
      }
    }
    if (i < to) throw corrupt(`home ${dir}: row files end at ${i}, before ${to}`, { dir, file: path.join(dir, 'state'), index: i });
  }

  /** The offset table of `ref`'s file, holding at least `need` frames. */
  async #table(h: FileHandle, file: string, ref: RowFileRef, need: number): Promise<OffsetTable> {
    const key = file;
    let t = this.#tables.get(key);
    if (t === undefined) {
      const header = new Uint8Array(ROW_HEADER_BYTES);
      await h.read(header, 0);
      if (!checkRowHeader(header, ref.gen, ref.start)) throw corrupt(`row file ${file} has no valid header`, { file });
      t = { starts: [], end: ROW_HEADER_BYTES };
      this.#tables.set(key, t);
      if (this.#tables.size > 64) this.#tables.delete(this.#tables.keys().next().value as string);
    }
    const buf = new Uint8Array(Math.min(READ_WINDOW, Math.max(ROW_FRAME_HEADER_BYTES, ref.endOffset - t.end)));
    while (t.starts.length < need) {
      if (t.end >= ref.endOffset) throw corrupt(`row file ${file} holds fewer rows than its cell names`, { file });
      const n = await h.read(buf, t.end);
      let at = 0;
      let progressed = false;
      while (t.starts.length < need && at + ROW_FRAME_HEADER_BYTES <= n) {
        const len = u32(buf, at + 4);
        const frame = ROW_FRAME_HEADER_BYTES + len;
        if (t.end + frame > ref.endOffset) throw corrupt(`row file ${file}: a frame crosses the end its cell names`, { file });
        if (at + frame > n && at > 0) break; // read again from this frame
        t.starts.push(t.end);
        t.end += frame;
        at += frame;
        progressed = true;
        if (at > n) break;
      }
      if (!progressed) throw corrupt(`row file ${file} is cut short`, { file });
    }
    return t;
  }
}

/**
 * The checkpointer's side of one home: it starts from the home's value (or none), takes the parts
 * of the records it applies in version order (`create`, `delete`, `truncate`, `drop`, `append`,
 * `head`), buffering appended rows, and `finish` makes the new value durable with the cell as the
 * commit point (rows and blobs synced, new names directory-synced, then the cell, then removal of
 * what the cell no longer names). The caller holds the realm's checkpoint lock: it is the only
 * writer of any home. Memory: the rows buffered (`pending`); `flush` writes them out.
 */
export class HomeBuilder {
  readonly #fs: FileSystem;
  readonly realm: string;
  readonly dir: string;
  readonly kind: ScopeKind;
  readonly name: string;
  readonly old: HomeValue | null;
  version: number;
  commitId: string;
  #deleted: boolean;
  #first: number;
  #end: number;
  #files: RowFileRef[];
  #newHead: Uint8Array | null = null;
  #headCleared = false;
  /** The file appends go to (the last one, unless sealed), with frames not written yet. */
  #open: { ref: RowFileRef; frames: Uint8Array[]; bytes: number; writtenTo: number; salt?: number } | null = null;
  /** Open handles of row files written this round, by gen (a cache: at most OPEN_ROW_FILES in all builders). */
  readonly #handles = new Map<string, FileHandle>();
  /** Row files written this round (synced at finish). */
  readonly #dirty = new Set<string>();
  #created = false;
  #dirReady = false;
  /** Bytes of rows buffered, not written yet. */
  pending = 0;

  readonly #prior: CellState | null;
  readonly #dirs: DirSyncs;

  constructor(fs: FileSystem, realm: string, kind: ScopeKind, name: string, digest: string, old: HomeCell | null, dirs: DirSyncs) {
    this.#fs = fs;
    this.#dirs = dirs;
    this.#prior = old?.cell ?? null;
    this.realm = realm;
    this.dir = scopeDirOf(realm, kind, digest);
    this.kind = kind;
    this.name = name;
    const v = old?.value ?? null;
    this.old = v;
    this.version = v?.version ?? 0;
    this.commitId = v?.commitId ?? '';
    this.#deleted = v?.deleted ?? false;
    this.#first = v?.first ?? 0;
    this.#end = v?.end ?? 0;
    this.#files = v === null ? [] : v.rowFiles.map((r) => ({ ...r }));
  }

  /**
   * Makes the home's directory. Its name (and a new fan-out directory's) is made durable by
   * `DirSyncs.flush`, once per directory for the whole round, before the checkpoint cell is written.
   */
  async #ensureDir(): Promise<void> {
    if (this.#dirReady) return;
    const fs = this.#fs;
    const fanout = path.dirname(this.dir);
    if ((await fs.stat(this.dir)) === null) {
      const fanoutNew = (await fs.stat(fanout)) === null;
      await fs.mkdir(this.dir);
      if (fanoutNew) this.#dirs.add(path.join(this.realm, SCOPES_DIR));
      this.#dirs.add(fanout);
    } else if (this.old === null) {
      // A home new to the table whose directory exists: a round that failed or was cut short made
      // it, and nothing says its name (or its fan-out's) ever became durable. Sync them as if new.
      this.#dirs.add(path.join(this.realm, SCOPES_DIR));
      this.#dirs.add(fanout);
    }
    this.#dirReady = true;
  }

  /**
   * Starts a home for a scope that so far lived in the scope table (it outgrew it): the builder
   * was made with no old value (and the cell state of whatever a round cut short left in the
   * directory); this takes the scope's state, its rows written to a new row file.
   */
  async seed(state: { version: number; commitId: string; first: number; head: Uint8Array; rows: readonly Uint8Array[] }): Promise<void> {
    assert(this.old === null && this.#end === 0 && this.#files.length === 0, 'a home is seeded only when it is new');
    this.#first = state.first;
    this.#end = state.first;
    for (const row of state.rows) await this.#append(row);
    this.#newHead = state.head;
    this.#headCleared = false;
    this.version = state.version;
    this.commitId = state.commitId;
  }

  /** The index the next row would take. */
  get endIndex(): number {
    return this.#end;
  }

  /** Whether the home ends deleted (a tombstone). */
  get deleted(): boolean {
    return this.#deleted;
  }

  /** The parts of one update, in the order truncate, drop, append, head; then its version. */
  async apply(
    u: { previous: number | null; next: number; del: boolean; truncateAfter?: number; dropBefore?: number },
    commitId: string,
    rows: readonly Uint8Array[],
    head: Uint8Array | null,
  ): Promise<void> {
    if (u.previous === null) {
      this.#deleted = false;
      this.#first = 0;
      this.#end = 0;
      this.#files = [];
      await this.#closeOpen();
    }
    if (u.del) {
      this.#deleted = true;
      this.#first = this.#end;
      this.#files = [];
      await this.#closeOpen();
      this.#headCleared = true;
      this.#newHead = null;
    } else {
      if (u.truncateAfter !== undefined && u.truncateAfter < this.#end) {
        this.#end = Math.max(u.truncateAfter, this.#first);
        await this.#closeOpen();
        this.#files = (await this.#cut(this.#files, this.#end)).filter((r) => r.start + r.count > this.#first);
      }
      if (u.dropBefore !== undefined && u.dropBefore > this.#first) {
        this.#first = Math.min(u.dropBefore, this.#end);
        this.#files = this.#files.filter((r) => r.start + r.count > this.#first);
        if (this.#files.length === 0) await this.#closeOpen();
      }
      for (const row of rows) await this.#append(row);
      if (head !== null) {
        this.#newHead = head;
        this.#headCleared = false;
      }
    }
    this.version = u.next;
    this.commitId = commitId;
  }

  async #append(row: Uint8Array): Promise<void> {
    const frameBytes = ROW_FRAME_HEADER_BYTES + row.length;
    if (!this.#canTake(frameBytes)) {
      await this.#startFile();
    }
    this.#frame(row);
    if (this.#open!.bytes >= 1 << 20) await this.flush();
  }

  /** Whether the rows can go to the open file (or the last one, opened without I/O): no new file needed. */
  #canTake(bytes: number): boolean {
    if (this.#open !== null) return this.#open.ref.count === 0 || this.#open.ref.endOffset + bytes <= ROW_FILE_BYTES;
    const last = this.#files[this.#files.length - 1];
    if (last === undefined || last.sealed || last.start + last.count !== this.#end || last.endOffset + bytes > ROW_FILE_BYTES) return false;
    this.#open = { ref: last, frames: [], bytes: 0, writtenTo: last.endOffset };
    return true;
  }

  /** Buffers one row's frame in the open file. */
  #frame(row: Uint8Array): void {
    const o = this.#open!;
    const frameBytes = ROW_FRAME_HEADER_BYTES + row.length;
    const frame = new Uint8Array(frameBytes);
    writeRowFrame(frame, 0, this.#end, row, o.salt ?? (o.salt = rowSalt(o.ref.gen)));
    o.frames.push(frame);
    o.bytes += frameBytes;
    this.pending += frameBytes;
    o.ref.endOffset += frameBytes;
    o.ref.count++;
    this.#end++;
  }

  /**
   * The common case of `apply` without any I/O (appends to the file already in use, a head, a
   * drop that leaves rows): answers false, having changed nothing, when `apply` must run instead.
   */
  applySync(
    u: { previous: number | null; next: number; del: boolean; truncateAfter?: number; dropBefore?: number },
    commitId: string,
    rows: readonly Uint8Array[],
    head: Uint8Array | null,
  ): boolean {
    if (u.previous === null || u.del || (u.truncateAfter !== undefined && u.truncateAfter < this.#end)) return false;
    let first = this.#first;
    let files = this.#files;
    if (u.dropBefore !== undefined && u.dropBefore > first) {
      first = Math.min(u.dropBefore, this.#end);
      files = files.filter((r) => r.start + r.count > first);
      if (files.length === 0 && (this.#open !== null || rows.length > 0)) return false;
    }
    let bytes = 0;
    for (const r of rows) bytes += ROW_FRAME_HEADER_BYTES + r.length;
    if (rows.length > 0) {
      const saved = { files: this.#files };
      this.#files = files;
      const ok = this.#canTake(bytes);
      this.#files = saved.files;
      if (!ok) return false;
    }
    this.#first = first;
    this.#files = files;
    for (const row of rows) this.#frame(row);
    if (head !== null) {
      this.#newHead = head;
      this.#headCleared = false;
    }
    this.version = u.next;
    this.commitId = commitId;
    return true;
  }

  async #startFile(): Promise<void> {
    await this.#closeOpen();
    await this.#ensureDir();
    const gen = newGen();
    const ref: RowFileRef = { gen, start: this.#end, count: 0, endOffset: ROW_HEADER_BYTES, sealed: false };
    const h = await this.#fs.open(path.join(this.dir, rowFileName(gen)), 'create');
    this.#keep(gen, h);
    this.#dirty.add(gen);
    await h.truncate(0);
    await h.write(encodeRowHeader(gen, this.#end), 0);
    this.#created = true;
    this.#files.push(ref);
    this.#open = { ref, frames: [], bytes: 0, writtenTo: ROW_HEADER_BYTES };
  }

  /** Writes the buffered rows out (one write per file). */
  async flush(): Promise<void> {
    const o = this.#open;
    if (o === null || o.frames.length === 0) return;
    await this.#ensureDir();
    let h = this.#handles.get(o.ref.gen);
    if (h === undefined) {
      h = await this.#fs.open(path.join(this.dir, rowFileName(o.ref.gen)), 'write');
      this.#keep(o.ref.gen, h);
    }
    await h.writev(o.frames, o.writtenTo);
    this.#dirty.add(o.ref.gen);
    if (openRowFiles > OPEN_ROW_FILES) await this.close();
    o.writtenTo += o.bytes;
    this.pending -= o.bytes;
    o.frames = [];
    o.bytes = 0;
  }

  async #closeOpen(): Promise<void> {
    await this.flush();
    this.#open = null;
  }

  /** Makes the new value durable (its cell the commit point) and answers it. */
  async finish(cut: number[]): Promise<HomeValue> {
    const fs = this.#fs;
    await this.#closeOpen();
    await this.#ensureDir();
    if (this.#files.length > MAX_ROW_FILES) throw corrupt(`home ${this.dir} would need more than ${MAX_ROW_FILES} row files`, { dir: this.dir, file: path.join(this.dir, 'state') });
    // The head: none (deleted or cleared), the new one, or the old one kept.
    let headValue: { head: Uint8Array | null; headGen: string | null; headLength: number; headCrc: number };
    const newHead = this.#deleted || this.#headCleared ? null : this.#newHead;
    if (this.#deleted || this.#headCleared) headValue = { head: new Uint8Array(0), headGen: null, headLength: 0, headCrc: crc32(new Uint8Array(0)) };
    else if (newHead !== null) headValue = { head: newHead, headGen: null, headLength: newHead.length, headCrc: crc32(newHead) };
    else if (this.old !== null && !this.old.deleted) {
      headValue = { head: this.old.head, headGen: this.old.headGen, headLength: this.old.headLength, headCrc: this.old.headCrc };
    } else {
      throw corrupt(`home ${this.dir}: a scope without a head`, { dir: this.dir, file: path.join(this.dir, 'state') });
    }
    // An inline head goes to a blob file when it is a new head longer than INLINE_HEAD_BYTES, or
    // when the whole value would not fit the cell (a long name, a long commit id and many row
    // files next to a head near INLINE_HEAD_BYTES).
    const inline = headValue.head;
    if (inline !== null && inline.length > 0) {
      const rowFiles = this.#deleted ? 0 : this.#files.length;
      const bytes = 48 + 8 * cut.length + Buffer.byteLength(this.name) + Buffer.byteLength(this.commitId) + inline.length + 32 * rowFiles;
      if ((inline === newHead && inline.length > INLINE_HEAD_BYTES) || bytes > cellValueCapacity(HOME_SLOT_BYTES)) {
        const gen = newGen();
        const h = await fs.open(path.join(this.dir, headFileName(gen)), 'create');
        try {
          await h.truncate(0);
          await h.write(inline, 0);
          await h.datasync();
        } finally {
          await h.close();
        }
        this.#created = true;
        headValue = { head: null, headGen: gen, headLength: inline.length, headCrc: crc32(inline) };
      }
    }
    try {
      // Every file written is synced, also one a truncation cut away before any cell named it (it
      // is removed below; syncing it keeps "every write synced before the acknowledgement" simple).
      for (const gen of this.#dirty) {
        let h = this.#handles.get(gen);
        if (h === undefined) {
          h = await fs.open(path.join(this.dir, rowFileName(gen)), 'write');
          this.#keep(gen, h);
        }
        await h.datasync();
      }
    } finally {
      await this.close();
    }
    // A new home's own entries too (its cell may be a leftover whose name was never synced).
    if (this.#created || this.old === null) await fs.syncDir(this.dir);
    const value: HomeValue = {
      kind: this.kind,
      name: this.name,
      version: this.version,
      commitId: this.commitId,
      deleted: this.#deleted,
      cut,
      first: this.#first,
      end: this.#end,
      ...headValue,
      rowFiles: this.#deleted ? [] : this.#files,
    };
    await writeHomeCell(fs, this.dir, encodeHome(value), this.#prior);
    // Remove what the new value no longer names: the files dropped, the blob replaced, and (when
    // this round made files) anything an earlier round cut short left behind.
    if (this.#created) await sweep(fs, this.dir, value);
    else if (this.old !== null) {
      const kept = new Set(value.rowFiles.map((r) => r.gen));
      for (const r of this.old.rowFiles) if (!kept.has(r.gen)) await fs.unlink(path.join(this.dir, rowFileName(r.gen))).catch(() => undefined);
      if (this.old.headGen !== null && this.old.headGen !== value.headGen) await fs.unlink(path.join(this.dir, headFileName(this.old.headGen))).catch(() => undefined);
    }
    return value;
  }

  #keep(gen: string, h: FileHandle): void {
    this.#handles.set(gen, h);
    openRowFiles++;
  }

  /** Closes the row files this builder holds open. */
  async close(): Promise<void> {
    const handles = [...this.#handles.values()];
    this.#handles.clear();
    openRowFiles -= handles.length;
    for (const h of handles) await h.close().catch(() => undefined);
  }

  /** The row files after cutting at `end`: files wholly at or past it go; the one across it shrinks. */
  async #cut(files: RowFileRef[], end: number): Promise<RowFileRef[]> {
    const out: RowFileRef[] = [];
    for (const r of files) {
      if (r.start >= end) continue;
      if (r.start + r.count <= end) {
        out.push(r);
        continue;
      }
      // Shrink: the new end offset is where frame (end - start) begins.
      const keep = end - r.start;
      const offset = await this.#frameOffset(r, keep);
      out.push({ gen: r.gen, start: r.start, count: keep, endOffset: offset, sealed: true });
    }
    return out;
  }

  /** The offset at which frame `k` of row file `r` starts (k ≤ count). */
  async #frameOffset(r: RowFileRef, k: number): Promise<number> {
    const file = path.join(this.dir, rowFileName(r.gen));
    const h = await this.#fs.open(file, 'read');
    try {
      let at = ROW_HEADER_BYTES;
      const hdr = new Uint8Array(ROW_FRAME_HEADER_BYTES);
      for (let i = 0; i < k; i++) {
        const n = await h.read(hdr, at);
        if (n !== ROW_FRAME_HEADER_BYTES) throw corrupt(`row file ${file} is cut short`, { file });
        at += ROW_FRAME_HEADER_BYTES + u32(hdr, 4);
      }
      return at;
    } finally {
      await h.close().catch(() => undefined);
    }
  }
}

/** Removes files of the home's directory its cell no longer names (after the cell was written). */
async function sweep(fs: FileSystem, dir: string, home: HomeValue): Promise<void> {
  const keep = new Set<string>([HOME_STATE_FILE]);
  for (const r of home.rowFiles) keep.add(rowFileName(r.gen));
  if (home.headGen !== null) keep.add(headFileName(home.headGen));
  await unlinkWhere(fs, dir, (n) => !keep.has(n) && (n.startsWith('r-') || n.startsWith('h-')));
}

/**
 * Unlinks the entries of `dir` that `pick` chooses (a directory that cannot be listed: nothing).
 * Removal is garbage collection: a failed unlink leaves a file no reader reads.
 */
export async function unlinkWhere(fs: FileSystem, dir: string, pick: (name: string) => boolean): Promise<void> {
  let names: string[];
  try {
    names = await fs.readdir(dir);
  } catch {
    return;
  }
  for (const n of names) if (pick(n)) await fs.unlink(path.join(dir, n)).catch(() => undefined);
}
