// The two-slot cell: one small durable value that is replaced atomically.
//
// Owns: `openCell` and the `Cell` it returns; `openOwnedCell`, the same Cell for an owner whose
// own lock excludes every other handle (no lock taken, no descriptor kept between calls);
// `peekCell`/`readCellFile`, the lock-free read of a cell file; `writeCellFile`, the write of a
// caller that is the file's only writer by other means.
// Guarantees:
// - `write` resolves only after the new value is durable (fdatasync of the cell file; on the
//   write that creates the file, also the directory sync that makes its name durable).
// - A crash at any moment leaves the old value or the new one, never a torn one: a write goes to
//   the slot that is NOT live, so the live slot is never touched.
// - Damage is told from a torn write: every 512-byte sector of a slot carries the stamp of the
//   write that put it there and its own checksum. A crash tears a write at sector boundaries, so a
//   torn slot is sectors that each check but carry two stamps; a sector that fails its own check
//   is damage, never a crash. When the damaged slot is (or may be) the newer one, open and every
//   read answer CORRUPT: the older value is never served in place of an acknowledged one
//   (./format.ts `decodeCell`; the argument in docs/crash-safety.md, two-slot cell).
// - The file exists only after its first value is durable in it (written to a temporary file,
//   synced, then renamed), so a missing file reads as "never written" (null) and an existing file
//   without a valid slot is corruption (CORRUPT), never a silent null.
// - One handle per cell: `openCell` takes an exclusive try-lock on the cell file (on its
//   temporary file while the cell was never written; the first write renames that very file into
//   place, lock and all), so a second handle — in this process or another — is refused with
//   LOCKED. Lock-free readers (`peekCell`) take no lock and are never refused.
// - Operations take effect in call order; `read` sees every write issued before it that
//   succeeded, costs no I/O (the value is kept in memory after open), and never returns a value
//   that is not durable: open syncs the file and its directory before it trusts what it read
//   (an earlier process may have died between a write and its sync).
// - A failed write or sync poisons the cell: every later write rejects with POISONED until the
//   cell is reopened (a failed fsync is not retryable: the kernel may have dropped the pages).
// - A file of the first format (before sector stamps) is read by that format's rule, and
//   converted by the first write: the live value into the other slot in this format, then a
//   filler over the old slot, both synced before the write resolves.
// The layout is in ./format.ts and docs/format.md (two-slot cell).

import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { closed, fromIo, invalid, isSeglogError, locked, notFound, poisoned, type SeglogError } from '../lib/errors.js';
import type { FileHandle, FileSystem } from '../lib/fs/types.js';
import { realFs } from '../lib/fs/real.js';
import { DEFAULT_SLOT_BYTES, cellValueCapacity, decodeCell, encodeNewCellFile, encodeSlot, slotBytesProblem, type CellState } from './format.js';

/** A durable value replaced atomically. See the module header for the guarantees. */
export interface Cell {
  /** The current value; null when the cell was never written. Waits for earlier writes. */
  read(): Promise<Uint8Array | null>;
  /** Replaces the value; durable and atomic (old or new, never torn) when it resolves. */
  write(value: Uint8Array): Promise<void>;
  /** Waits for earlier writes, then closes the file (releasing its lock). Idempotent. */
  close(): Promise<void>;
}

export interface CellOptions {
  /** The file-system layer (default: the real one). */
  fs?: FileSystem;
  /**
   * Bytes per slot (default 4096): 64 … 256, or a multiple of 512 up to 16 MiB. The value capacity
   * is `cellValueCapacity(slotBytes)` (3,984 bytes at the default). A file must be opened with the
   * slot size it was created with (INVALID otherwise).
   */
  slotBytes?: number;
}

/**
 * Test-only switches that plant a known durability mistake, so that the crash runner can prove
 * it catches each class. Never set outside tests; not exported from the package.
 * @internal
 */
export interface CellMistakes {
  /** Write the live slot in place instead of the other one. */
  writeLiveSlot?: boolean;
  /** Resolve a write before its fdatasync. */
  ackBeforeSync?: boolean;
  /** Skip the directory sync after the rename that creates the file. */
  skipDirSync?: boolean;
}

/**
 * For an owner that knows the file, its directory entry and everything in it are durable already
 * (a Raft node that finds the mark of its own clean close, taken after every sync of that close):
 * open then skips the sync of what it read, which is only needed when an earlier process may have
 * been killed between a write and its sync. Not exported from the package.
 * @internal
 */
export interface KnownDurable {
  knownDurable?: boolean;
}

function knownDurable(options: CellOptions): boolean {
  return (options as KnownDurable).knownDurable === true;
}

/**
 * For an owned cell (openOwnedCell) whose values may outgrow the slot size it starts with: a new
 * file is made with `slotBytes`; an existing file is read with the slot size its length says
 * (two slots of a size a cell can have, at most `growTo`; any other length is judged with
 * `slotBytes`, and decodes as damage); a write whose value does not fit the file's slots
 * replaces the file whole with one of the smallest slot size, doubling from the current one up
 * to `growTo`, that holds it (through the synced temporary file of a first write, renamed into
 * place, the directory synced: a crash leaves the old file or the new one, each a whole cell).
 * Not exported from the package.
 * @internal
 */
export interface GrowingSlots {
  growTo?: number;
}

function growToOf(options: CellOptions, slotBytes: number): number {
  const growTo = (options as GrowingSlots).growTo;
  if (growTo === undefined) return slotBytes;
  const problem = slotBytesProblem(growTo);
  if (problem !== null || growTo < slotBytes) throw invalid(problem ?? `growTo (${growTo}) is below slotBytes (${slotBytes})`);
  return growTo;
}

/** The slot size of a file whose first bytes (up to 2 × growTo + 1) read `n` bytes long. */
function slotBytesOfLength(n: number, slotBytes: number, growTo: number): number {
  if (n % 2 !== 0) return slotBytes;
  const half = n / 2;
  return half <= growTo && slotBytesProblem(half) === null ? half : slotBytes;
}

/** The smallest slot size from `slotBytes` doubling up to `growTo` whose cell holds `length` bytes, or null. */
function grownSlotBytes(slotBytes: number, growTo: number, length: number): number | null {
  for (let s = slotBytes; s <= growTo; s *= 2) if (cellValueCapacity(s) >= length) return s;
  return cellValueCapacity(growTo) >= length ? growTo : null;
}

/** The temporary file a cell's first value is written to before it is renamed into place. */
export function cellTempPath(cellPath: string): string {
  return `${cellPath}.tmp`;
}

function checkOptions(cellPath: unknown, options: CellOptions): number {
  const slotBytes = options.slotBytes ?? DEFAULT_SLOT_BYTES;
  const problem = slotBytesProblem(slotBytes);
  if (problem !== null) throw invalid(problem);
  if (typeof cellPath !== 'string' || cellPath.length === 0) throw invalid('a cell needs a file path');
  return slotBytes;
}

function errnoOf(err: unknown): unknown {
  return (err as { code?: unknown } | null)?.code;
}

/** Reads the file through `handle`: its first 2 × slotBytes bytes and its size (capped one past that). */
async function readWhole(handle: FileHandle, slotBytes: number, buffer?: Uint8Array): Promise<{ bytes: Uint8Array; size: number }> {
  // One byte more than a cell holds: a longer file shows as one, without an fstat.
  const bytes = buffer ?? new Uint8Array(2 * slotBytes + 1);
  const n = await handle.read(bytes, 0);
  bytes.fill(0, n);
  // Longer than a cell: its exact size, for the message (or for a file of another slot size).
  const size = n === bytes.length ? await handle.size() : n;
  return { bytes, size };
}

/** Where the next write goes (the part of a CellState a writer keeps). */
interface Position {
  liveSlot: 0 | 1;
  liveStamp: number;
  nextStamp: number;
  prepare: CellState['prepare'];
}

function positionOf(state: CellState): Position {
  return { liveSlot: state.live.slot, liveStamp: state.live.stamp, nextStamp: state.nextStamp, prepare: state.prepare };
}

/**
 * Writes `value` into the slot that is not live, after what the file needs first (a conversion
 * from the first format, or a filler over a standby slot that is neither whole nor torn), each
 * write followed by `sync`. Answers the new position. `inPlace`: the planted mistake of writing
 * the live slot.
 */
async function writeNext(handle: FileHandle, slotBytes: number, at: Position, value: Uint8Array, sync: () => Promise<void>, inPlace = false): Promise<Position> {
  const standby: 0 | 1 = at.liveSlot === 0 ? 1 : 0;
  if (at.prepare === 'convert') {
    // The new value into the standby slot, then a filler (stamped between the two) over the
    // first-format slot: once both are durable the file is all of this format.
    await handle.write(encodeSlot(slotBytes, standby, at.nextStamp + 1, value), standby * slotBytes);
    await sync();
    await handle.write(encodeSlot(slotBytes, at.liveSlot, at.nextStamp, null), at.liveSlot * slotBytes);
    await sync();
    return { liveSlot: standby, liveStamp: at.nextStamp + 1, nextStamp: at.nextStamp + 2, prepare: null };
  }
  if (at.prepare === 'fill') {
    // A filler stamped just below the live slot: a crash inside it leaves sectors stamped below
    // the live one (read as an older slot); after it, a crash inside the value's write leaves a
    // slot torn between two stamps, which reads as torn, not as damage.
    await handle.write(encodeSlot(slotBytes, standby, at.liveStamp - 1, null), standby * slotBytes);
    await sync();
  }
  const target = inPlace ? at.liveSlot : standby;
  await handle.write(encodeSlot(slotBytes, target, at.nextStamp, value), target * slotBytes);
  await sync();
  return { liveSlot: target, liveStamp: at.nextStamp, nextStamp: at.nextStamp + 1, prepare: null };
}

/**
 * Opens the cell stored in the file `cellPath` (which need not exist yet; its directory must) and
 * takes its lock. Rejects with LOCKED when another handle holds it, CORRUPT when the file exists
 * but is not one that writes and crashes leave (no valid slot, or a damaged newer slot), and
 * INVALID when it was created with another slot size.
 */
export async function openCell(cellPath: string, options: CellOptions = {}): Promise<Cell> {
  const slotBytes = checkOptions(cellPath, options);
  const fs = options.fs ?? realFs;
  const mistakes = (options as { mistakes?: CellMistakes }).mistakes ?? {};
  // Twice at most: a first write by another handle may rename the file into place between our
  // two looks (then the second finds it, locked).
  for (let attempt = 0; ; attempt++) {
    const handle = await openExisting(fs, cellPath);
    if (handle === null) {
      const creating = await openForCreation(fs, cellPath);
      if (creating !== null) return new FileCell(fs, cellPath, slotBytes, creating, null, mistakes);
      if (attempt > 0) throw locked(cellPath);
      continue;
    }
    try {
      if (!(await handle.tryLock())) throw locked(cellPath);
      const { bytes, size } = await readWhole(handle, slotBytes);
      const state = decodeCell(bytes, size, slotBytes, cellPath);
      // What we just read may not be durable yet: a process killed after a write and before its
      // fdatasync, or after the creating rename and before the directory sync, leaves it in the
      // page cache only. Make it durable before anyone acts on it (or writes the other slot),
      // unless the owner knows it is (KnownDurable).
      if (!knownDurable(options)) {
        await handle.datasync();
        await fs.syncDir(path.dirname(cellPath));
      }
      return new FileCell(fs, cellPath, slotBytes, handle, state, mistakes);
    } catch (err) {
      await handle.close().catch(() => undefined);
      throw fromIo(err, 'read cell', cellPath);
    }
  }
}

/**
 * For a cell file that does not exist: opens and locks its temporary file, which the first write
 * fills and renames into place. Answers null when the cell file appeared meanwhile (another
 * handle's first write), so that the caller opens that instead; LOCKED when another handle holds
 * the temporary file (a never-written cell open elsewhere).
 */
async function openForCreation(fs: FileSystem, cellPath: string): Promise<FileHandle | null> {
  const temp = cellTempPath(cellPath);
  let handle: FileHandle;
  try {
    handle = await fs.open(temp, 'create');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') {
      throw notFound(`directory of cell ${cellPath} does not exist`, { path: path.dirname(cellPath) });
    }
    throw fromIo(err, 'open cell', temp);
  }
  try {
    if (!(await handle.tryLock())) throw locked(cellPath);
    // Under the lock, the temporary name cannot be renamed by anyone else; if the cell file exists
    // now, it was renamed from an earlier temporary file, and this one must not be used.
    const st = await fs.stat(cellPath);
    if (st !== null) {
      await handle.close();
      return null;
    }
    return handle;
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw fromIo(err, 'open cell', cellPath);
  }
}

class FileCell implements Cell {
  readonly #fs: FileSystem;
  readonly #path: string;
  readonly #slotBytes: number;
  readonly #capacity: number;
  readonly #mistakes: CellMistakes;
  /** The locked handle: on the cell file, or on its temporary file until the first write. */
  #handle: FileHandle | null;
  #created: boolean;
  #value: Uint8Array | null;
  #at: Position | null;
  /** Reads and writes in call order. */
  readonly #ops = new SerialOps();
  #closing: Promise<void> | null = null;
  #poison: SeglogError | null = null;

  constructor(fs: FileSystem, cellPath: string, slotBytes: number, handle: FileHandle, state: CellState | null, mistakes: CellMistakes) {
    this.#fs = fs;
    this.#path = cellPath;
    this.#slotBytes = slotBytes;
    this.#capacity = cellValueCapacity(slotBytes);
    this.#mistakes = mistakes;
    this.#handle = handle;
    this.#created = state !== null;
    this.#value = state?.live.value ?? null;
    this.#at = state === null ? null : positionOf(state);
  }

  read(): Promise<Uint8Array | null> {
    if (this.#closing !== null) return Promise.reject(closed(`cell ${this.#path}`));
    return this.#ops.run(async () => (this.#value === null ? null : this.#value.slice()));
  }

  write(value: Uint8Array): Promise<void> {
    if (this.#closing !== null) return Promise.reject(closed(`cell ${this.#path}`));
    if (!(value instanceof Uint8Array)) return Promise.reject(invalid('a cell value must be a Uint8Array'));
    if (value.length > this.#capacity) {
      return Promise.reject(
        invalid(`cell value of ${value.length} bytes exceeds the capacity of ${this.#capacity}`, {
          path: this.#path,
          length: value.length,
          capacity: this.#capacity,
        }),
      );
    }
    const copy = value.slice();
    return this.#ops.run(() => this.#write(copy));
  }

  close(): Promise<void> {
    if (this.#closing === null) {
      this.#closing = this.#ops.idle.then(async () => {
        const handle = this.#handle;
        this.#handle = null;
        // A never-written cell leaves its (empty) temporary file: removing it could pull the
        // name from under a handle another opener holds on it and is about to lock.
        if (handle !== null) await handle.close().catch(() => undefined);
      });
    }
    return this.#closing;
  }

  async #write(value: Uint8Array): Promise<void> {
    if (this.#poison !== null) throw poisoned(`cell ${this.#path}`, this.#poison);
    const handle = this.#handle!;
    const sync =
      this.#mistakes.ackBeforeSync === true
        ? async (): Promise<void> => void handle.datasync().catch(() => undefined)
        : () => handle.datasync();
    try {
      if (!this.#created) {
        this.#created = true;
        this.#at = { liveSlot: 0, liveStamp: 2, nextStamp: 3, prepare: null };
        await this.#create(handle, value);
      } else {
        this.#at = await writeNext(handle, this.#slotBytes, this.#at!, value, sync, this.#mistakes.writeLiveSlot === true);
      }
    } catch (err) {
      const error = fromIo(err, 'write cell', this.#path);
      this.#poison = error;
      throw error;
    }
    this.#value = value;
  }

  /**
   * The first write: the whole file built in the (locked) temporary file, synced, renamed into
   * place, then reopened by its own name (so that every later call names the cell file) and locked
   * again. Between the close of the first handle and the lock of the second another opener may
   * take the lock: the value is durable all the same, and this cell then refuses later writes.
   */
  async #create(handle: FileHandle, value: Uint8Array): Promise<void> {
    const fs = this.#fs;
    await handle.truncate(0);
    await handle.write(encodeNewCellFile(this.#slotBytes, value), 0);
    if (this.#mistakes.ackBeforeSync !== true) await handle.datasync();
    await fs.rename(cellTempPath(this.#path), this.#path);
    if (this.#mistakes.skipDirSync !== true) await fs.syncDir(path.dirname(this.#path));
    const reopened = await fs.open(this.#path, 'write');
    this.#handle = null;
    await handle.close().catch(() => undefined);
    let held = false;
    try {
      held = await reopened.tryLock();
    } finally {
      if (held) this.#handle = reopened;
      else await reopened.close().catch(() => undefined);
    }
    if (!held) this.#poison = locked(this.#path);
  }
}

// ---------------------------------------------------------------------------------------------
// A cell whose owner excludes every other writer by a lock of its own (a Raft node's LOCK): the
// same Cell, holding no descriptor between calls.

/** The cell file opened for writing; null when it does not exist. */
async function openExisting(fs: FileSystem, cellPath: string): Promise<FileHandle | null> {
  try {
    return await fs.open(cellPath, 'write');
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw fromIo(err, 'open cell', cellPath);
    return null;
  }
}

/**
 * Opens the cell file `cellPath` for an owner that holds a lock excluding every other handle on
 * it (so this one takes none): a `Cell` with the guarantees of `openCell` except the lock, that
 * keeps no file open between calls (each write opens, writes, syncs and closes the file) and
 * leaves no temporary file until its first write. Open syncs an existing file and its directory
 * before it trusts what it read, as `openCell` does; CORRUPT, INVALID as there.
 * @internal
 */
export async function openOwnedCell(cellPath: string, options: CellOptions = {}): Promise<Cell> {
  const created = checkOptions(cellPath, options);
  const growTo = growToOf(options, created);
  const fs = options.fs ?? realFs;
  const handle = await openExisting(fs, cellPath);
  if (handle === null) {
    if ((await fs.stat(path.dirname(cellPath)).catch(() => null))?.isDirectory !== true) {
      throw notFound(`directory of cell ${cellPath} does not exist`, { path: path.dirname(cellPath) });
    }
    return new OwnedCell(fs, cellPath, created, growTo, null);
  }
  try {
    // With GrowingSlots the file's length names its slot size: read with the size it was made
    // with (one read, a small buffer, for a file that never grew); a longer file is read again
    // whole with the size its length names.
    let read = await readWhole(handle, created);
    let slotBytes = created;
    if ((options as GrowingSlots).growTo !== undefined && read.size !== 2 * created) {
      slotBytes = slotBytesOfLength(read.size, created, growTo);
      if (slotBytes !== created) read = await readWhole(handle, slotBytes);
    }
    const { bytes, size } = read;
    const state = decodeCell(bytes, size, slotBytes, cellPath);
    // As in openCell: what was read may be in the page cache only; make it durable first
    // (unless the owner knows it is: KnownDurable).
    if (!knownDurable(options)) {
      await handle.datasync();
      await fs.syncDir(path.dirname(cellPath));
    }
    return new OwnedCell(fs, cellPath, slotBytes, growTo, state);
  } catch (err) {
    throw fromIo(err, 'read cell', cellPath);
  } finally {
    await handle.close().catch(() => undefined);
  }
}

class OwnedCell implements Cell {
  readonly #fs: FileSystem;
  readonly #path: string;
  /** The slot size of the file (it grows with GrowingSlots, up to #growTo). */
  #slotBytes: number;
  readonly #growTo: number;
  readonly #capacity: number;
  #state: CellState | null;
  readonly #ops = new SerialOps();
  #closing: Promise<void> | null = null;
  #poison: SeglogError | null = null;

  constructor(fs: FileSystem, cellPath: string, slotBytes: number, growTo: number, state: CellState | null) {
    this.#fs = fs;
    this.#path = cellPath;
    this.#slotBytes = slotBytes;
    this.#growTo = growTo;
    this.#capacity = cellValueCapacity(growTo);
    this.#state = state;
  }

  read(): Promise<Uint8Array | null> {
    if (this.#closing !== null) return Promise.reject(closed(`cell ${this.#path}`));
    return this.#ops.run(async () => this.#state?.live.value?.slice() ?? null);
  }

  write(value: Uint8Array): Promise<void> {
    if (this.#closing !== null) return Promise.reject(closed(`cell ${this.#path}`));
    if (!(value instanceof Uint8Array)) return Promise.reject(invalid('a cell value must be a Uint8Array'));
    if (value.length > this.#capacity) {
      return Promise.reject(
        invalid(`cell value of ${value.length} bytes exceeds the capacity of ${this.#capacity}`, { path: this.#path, length: value.length, capacity: this.#capacity }),
      );
    }
    const copy = value.slice();
    return this.#ops.run(async () => {
      if (this.#poison !== null) throw poisoned(`cell ${this.#path}`, this.#poison);
      try {
        if (copy.length > cellValueCapacity(this.#slotBytes)) {
          // GrowingSlots: the file replaced whole by one of larger slots (a first write's protocol).
          const grown = grownSlotBytes(this.#slotBytes, this.#growTo, copy.length) as number;
          this.#state = await writeCellFile(this.#fs, this.#path, grown, null, copy);
          this.#slotBytes = grown;
        } else {
          this.#state = await writeCellFile(this.#fs, this.#path, this.#slotBytes, this.#state, copy);
        }
      } catch (err) {
        const error = fromIo(err, 'write cell', this.#path);
        this.#poison = error;
        throw error;
      }
    });
  }

  close(): Promise<void> {
    this.#closing ??= this.#ops.idle;
    return this.#closing;
  }
}

// ---------------------------------------------------------------------------------------------
// Lock-free access, for owners that guarantee a single writer by other means.

/** Buffers for lock-free reads (a host listing reads thousands of cells); decoding copies what it keeps. */
const buffers = new Map<number, Uint8Array[]>();

/**
 * Reads the cell file `file` without a lock or a handle kept: its state, or null when the file does
 * not exist. A writer may be replacing the standby slot while it is read (a live process, not a
 * crash): a read that meets such a write sees a slot torn or half-copied and is read again, up to
 * `attempts` times; damage that stays is CORRUPT. Never syncs: what it answers may be in the page
 * cache only (a caller that acts on it durably syncs first, or is the next writer).
 */
export async function readCellFile(fs: FileSystem, file: string, slotBytes: number = DEFAULT_SLOT_BYTES, attempts = 5): Promise<CellState | null> {
  const problem = slotBytesProblem(slotBytes);
  if (problem !== null) throw invalid(problem);
  for (let attempt = 1; ; attempt++) {
    let h: FileHandle;
    try {
      h = await fs.open(file, 'read');
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return null;
      throw fromIo(err, 'open cell', file);
    }
    const pool = buffers.get(slotBytes) ?? [];
    buffers.set(slotBytes, pool);
    const buffer = pool.pop() ?? new Uint8Array(2 * slotBytes + 1);
    try {
      let read: { bytes: Uint8Array; size: number };
      try {
        read = await readWhole(h, slotBytes, buffer);
      } finally {
        await h.close().catch(() => undefined);
      }
      return decodeCell(read.bytes, read.size, slotBytes, file);
    } catch (err) {
      if (attempt >= attempts || !isSeglogError(err, 'CORRUPT')) throw fromIo(err, 'read cell', file);
      await sleep(attempt);
    } finally {
      if (pool.length < 32) pool.push(buffer);
    }
  }
}

/** The value of the cell file `file`, read lock-free (see `readCellFile`); null when it does not exist. */
export async function peekCell(fs: FileSystem, file: string, slotBytes: number = DEFAULT_SLOT_BYTES): Promise<Uint8Array | null> {
  return (await readCellFile(fs, file, slotBytes))?.live.value ?? null;
}

/**
 * `peekCell` of an owned cell with GrowingSlots (created with `slotBytes`, grown up to `growTo`):
 * read with the slot size the file's length names. @internal
 */
export async function peekGrowingCell(fs: FileSystem, file: string, slotBytes: number, growTo: number): Promise<Uint8Array | null> {
  const st = await fs.stat(file).catch((err: unknown) => Promise.reject(fromIo(err, 'stat cell', file)));
  if (st === null) return null;
  return peekCell(fs, file, slotBytesOfLength(st.size, slotBytes, growTo));
}

/**
 * Writes `value` into the cell file `file`, whose state the caller read (`readCellFile`) and whose
 * only writer it is by other means (a lock of its own); `prior` null: the file does not exist.
 * The same protocol as a `Cell` write — the standby slot, then fdatasync; a first value through a
 * synced temporary file, renamed into place and made durable by a directory sync — without the
 * open-time sync: the caller's own fdatasync covers whatever an earlier writer left unsynced in
 * the file. Answers the file's new state.
 */
export async function writeCellFile(fs: FileSystem, file: string, slotBytes: number, prior: CellState | null, value: Uint8Array): Promise<CellState> {
  if (value.length > cellValueCapacity(slotBytes)) throw invalid(`cell value of ${value.length} bytes exceeds the capacity of ${cellValueCapacity(slotBytes)}`, { path: file });
  if (prior === null) {
    const temp = cellTempPath(file);
    const h = await fs.open(temp, 'create');
    try {
      await h.truncate(0);
      await h.write(encodeNewCellFile(slotBytes, value), 0);
      await h.datasync();
    } finally {
      await h.close();
    }
    await fs.rename(temp, file);
    await fs.syncDir(path.dirname(file));
    return stateAfter({ liveSlot: 0, liveStamp: 2, nextStamp: 3, prepare: null }, value);
  }
  const h = await fs.open(file, 'write');
  try {
    const at = await writeNext(h, slotBytes, positionOf(prior), value, () => h.datasync());
    return stateAfter(at, value);
  } finally {
    await h.close();
  }
}

function stateAfter(at: Position, value: Uint8Array): CellState {
  return {
    live: { slot: at.liveSlot, stamp: at.liveStamp, value, format: 2 },
    // The slot written before: whole, stamped below the live one (its exact content is not needed
    // by a writer, which only needs to know that it is clean).
    standby: { kind: 'whole', stamp: at.liveStamp - 1, value: null },
    nextStamp: at.nextStamp,
    prepare: null,
  };
}

/** A cell's operations in call order: each starts once the one before it settled (either way). */
class SerialOps {
  #tail: Promise<void> = Promise.resolve();

  run<T>(op: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(op);
    this.#tail = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /** Settles once every operation queued so far has. */
  get idle(): Promise<void> {
    return this.#tail;
  }
}
