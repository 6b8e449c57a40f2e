// The two-slot cell: one small durable value that is replaced atomically.
//
// Owns: `openCell` and the `Cell` it returns. Guarantees:
// - `write` resolves only after the new value is durable (fdatasync of the cell file; on the
//   write that creates the file, also the directory sync that makes its name durable).
// - A crash at any moment leaves the old value or the new one, never a torn one: a write goes to
//   the slot that is NOT live, so the live slot is never touched; a torn slot fails its CRC and
//   the read falls back to the other.
// - The file exists only after its first value is durable in it (written to a temporary file,
//   synced, then renamed), so a missing file reads as "never written" (null) and an existing file
//   without a valid slot is corruption (CORRUPT), never a silent null.
// - Operations take effect in call order; `read` sees every write issued before it that
//   succeeded, costs no I/O (the value is kept in memory after open), and never returns a value
//   that is not durable: open syncs the file and its directory before it trusts what it read
//   (an earlier process may have died between a write and its sync).
// - A failed write or sync poisons the cell: every later write rejects with POISONED until the
//   cell is reopened (a failed fsync is not retryable: the kernel may have dropped the pages).
// The layout is in ./format.ts and docs/format.md (two-slot cell); the crash argument in
// docs/crash-safety.md (two-slot cell). The cell takes no lock: its owner (a log, a store) holds the lock of
// the directory it lives in.

import * as path from 'node:path';
import { closed, fromIo, invalid, notFound, poisoned, corrupt, type SeglogError } from '../lib/errors.js';
import type { FileHandle, FileSystem } from '../lib/fs/types.js';
import { realFs } from '../lib/fs/real.js';
import {
  DEFAULT_SLOT_BYTES,
  MAX_SLOT_BYTES,
  MIN_SLOT_BYTES,
  cellValueCapacity,
  chooseLive,
  decodeSlot,
  encodeSlot,
} from './format.js';

/** A durable value replaced atomically. See the module header for the guarantees. */
export interface Cell {
  /** The current value; null when the cell was never written. Waits for earlier writes. */
  read(): Promise<Uint8Array | null>;
  /** Replaces the value; durable and atomic (old or new, never torn) when it resolves. */
  write(value: Uint8Array): Promise<void>;
  /** Waits for earlier writes, then closes the file. Idempotent. */
  close(): Promise<void>;
}

export interface CellOptions {
  /** The file-system layer (default: the real one). */
  fs?: FileSystem;
  /**
   * Bytes per slot (default 4096); the value capacity is slotBytes - 24. A file must be opened
   * with the slot size it was created with (INVALID otherwise).
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

/** The temporary file a cell's first value is written to before it is renamed into place. */
export function cellTempPath(cellPath: string): string {
  return `${cellPath}.tmp`;
}

/**
 * Opens the cell stored in the file `cellPath` (which need not exist yet; its directory must).
 * Rejects with CORRUPT when the file exists without a valid slot or with two slots that no
 * sequence of writes produces, and INVALID when it was created with another slot size.
 */
export async function openCell(cellPath: string, options: CellOptions = {}): Promise<Cell> {
  const slotBytes = options.slotBytes ?? DEFAULT_SLOT_BYTES;
  if (!Number.isSafeInteger(slotBytes) || slotBytes < MIN_SLOT_BYTES || slotBytes > MAX_SLOT_BYTES) {
    throw invalid(`slotBytes must be an integer in [${MIN_SLOT_BYTES}, ${MAX_SLOT_BYTES}], got ${String(slotBytes)}`);
  }
  if (typeof cellPath !== 'string' || cellPath.length === 0) throw invalid('a cell needs a file path');
  const fs = options.fs ?? realFs;
  const mistakes = (options as { mistakes?: CellMistakes }).mistakes ?? {};

  let handle: FileHandle;
  try {
    handle = await fs.open(cellPath, 'write');
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'ENOENT') throw fromIo(err, 'open cell', cellPath);
    const dir = path.dirname(cellPath);
    const st = await fs.stat(dir).catch((e: unknown) => {
      throw fromIo(e, 'stat directory of cell', dir);
    });
    if (st === null || !st.isDirectory) throw notFound(`directory of cell ${cellPath} does not exist`, { path: dir });
    return new FileCell(fs, cellPath, slotBytes, null, null, mistakes);
  }

  try {
    const size = await handle.size();
    const bytes = new Uint8Array(2 * slotBytes);
    await handle.read(bytes, 0);
    const a = decodeSlot(bytes, 0, slotBytes);
    const b = decodeSlot(bytes, slotBytes, slotBytes);
    const written = a.valid ? undefined : a.writtenSlotBytes;
    if (written !== undefined && size === 2 * written) {
      throw invalid(`cell ${cellPath} was created with slotBytes ${written}, opened with ${slotBytes}`, {
        path: cellPath,
        slotBytes: written,
      });
    }
    const live = chooseLive(a, b, cellPath);
    if (live === null) {
      throw corrupt(`cell ${cellPath} has no valid slot (${a.valid ? '' : a.reason}; ${b.valid ? '' : b.reason})`, {
        path: cellPath,
      });
    }
    if (size !== 2 * slotBytes) {
      throw corrupt(`cell ${cellPath} is ${size} bytes, expected ${2 * slotBytes}`, { path: cellPath, size });
    }
    // What we just read may not be durable yet: a process killed after a write and before its
    // fdatasync, or after the creating rename and before the directory sync, leaves it in the
    // page cache only. Make it durable before anyone acts on it (or writes the other slot).
    await handle.datasync();
    await fs.syncDir(path.dirname(cellPath));
    return new FileCell(fs, cellPath, slotBytes, handle, live, mistakes);
  } catch (err) {
    await handle.close().catch(() => undefined);
    throw fromIo(err, 'read cell', cellPath);
  }
}

class FileCell implements Cell {
  readonly #fs: FileSystem;
  readonly #path: string;
  readonly #slotBytes: number;
  readonly #capacity: number;
  readonly #mistakes: CellMistakes;
  /** Open on the cell file; null until the first write creates it. */
  #handle: FileHandle | null;
  #value: Uint8Array | null;
  /** Sequence of the live slot; 0 when never written. */
  #sequence: number;
  #liveSlot: 0 | 1;
  /** The tail of the call-order queue; never rejects. */
  #tail: Promise<void> = Promise.resolve();
  #closing: Promise<void> | null = null;
  #poison: SeglogError | null = null;

  constructor(
    fs: FileSystem,
    cellPath: string,
    slotBytes: number,
    handle: FileHandle | null,
    live: { slot: 0 | 1; sequence: number; value: Uint8Array } | null,
    mistakes: CellMistakes,
  ) {
    this.#fs = fs;
    this.#path = cellPath;
    this.#slotBytes = slotBytes;
    this.#capacity = cellValueCapacity(slotBytes);
    this.#mistakes = mistakes;
    this.#handle = handle;
    this.#value = live?.value ?? null;
    this.#sequence = live?.sequence ?? 0;
    this.#liveSlot = live?.slot ?? 1;
  }

  read(): Promise<Uint8Array | null> {
    if (this.#closing !== null) return Promise.reject(closed(`cell ${this.#path}`));
    return this.#enqueue(async () => (this.#value === null ? null : this.#value.slice()));
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
    return this.#enqueue(() => this.#write(copy));
  }

  close(): Promise<void> {
    if (this.#closing === null) {
      this.#closing = this.#tail.then(async () => {
        const handle = this.#handle;
        this.#handle = null;
        if (handle !== null) await handle.close().catch(() => undefined);
      });
    }
    return this.#closing;
  }

  #enqueue<T>(op: () => Promise<T>): Promise<T> {
    const run = this.#tail.then(op);
    this.#tail = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  async #write(value: Uint8Array): Promise<void> {
    if (this.#poison !== null) throw poisoned(`cell ${this.#path}`, this.#poison);
    const sequence = this.#sequence + 1;
    const record = encodeSlot(this.#slotBytes, sequence, value);
    try {
      if (this.#handle === null) {
        await this.#create(record);
        this.#liveSlot = 0;
      } else {
        const slot: 0 | 1 = this.#mistakes.writeLiveSlot === true ? this.#liveSlot : this.#liveSlot === 0 ? 1 : 0;
        await this.#handle.write(record, slot * this.#slotBytes);
        if (this.#mistakes.ackBeforeSync === true) {
          void this.#handle.datasync().catch(() => undefined);
        } else {
          await this.#handle.datasync();
        }
        this.#liveSlot = slot;
      }
    } catch (err) {
      const error = fromIo(err, 'write cell', this.#path);
      this.#poison = error;
      throw error;
    }
    this.#sequence = sequence;
    this.#value = value;
  }

  /** The first write: the whole file is built under a temporary name, synced, then renamed. */
  async #create(record: Uint8Array): Promise<void> {
    const fs = this.#fs;
    const temp = cellTempPath(this.#path);
    const file = new Uint8Array(2 * this.#slotBytes);
    file.set(record, 0);
    const tempHandle = await fs.open(temp, 'create');
    try {
      await tempHandle.truncate(0);
      await tempHandle.write(file, 0);
      if (this.#mistakes.ackBeforeSync !== true) await tempHandle.datasync();
    } finally {
      await tempHandle.close();
    }
    await fs.rename(temp, this.#path);
    if (this.#mistakes.skipDirSync !== true) await fs.syncDir(path.dirname(this.#path));
    this.#handle = await fs.open(this.#path, 'write');
  }
}
