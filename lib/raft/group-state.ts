// A group's small state — its vote, its committed pointer and its purged id — in either of the
// two layouts a group directory may have, as the three cells its log store writes.
//
// Owns: `openGroupState` (the three values as the group holds them, and a `Cell` for each, over
// one STATE_CELL or over the three cells of a group an earlier version made), the state cell's
// value (`encodeGroupState`, `decodeGroupState`) and `peekGroupState` (the values read without
// opening anything for writing: offline scans). Guarantees:
// - The state cell holds the three values together, and each write of one of them writes the cell
//   whole, the other two as last written: a cell write is atomic (cells/cell.ts), so a crash
//   leaves the values of a prefix of the writes in the order they were issued — what three cells
//   written one at a time in call order leave.
// - The cell writes one at a time, in the order the writes were issued (the cell's own queue), and
//   a write composes the values as issued before it, so a later write never undoes an earlier one
//   still in flight. A failed write poisons the cell (or found it closed): no later write reaches
//   the disk, so none carries the failed write's value there either.
// - A state cell or a cell of the older layout that holds no value, or one that does not decode,
//   is CORRUPT naming its file; one missing is CORRUPT before this module is reached (the
//   defining-file check of group-recovery.ts).

import * as path from 'node:path';
import { openOwnedCell, peekGrowingCell, type Cell, type CellOptions } from '../../cells/index.js';
import { closed, corrupt, invalid } from '../errors.js';
import type { FileSystem } from '../fs/types.js';
import { COMMITTED_CELL, GROUP_CELL_MAX_SLOT_BYTES, GROUP_CELL_SLOT_BYTES, PURGED_CELL, STATE_CELL, VOTE_CELL } from './fs-layout.js';

/** The version byte the state cell's value starts with. */
const STATE_VALUE_VERSION = 1;
/** The longest value one field may hold (a length byte; an encoded vote or log id takes at most 32). */
const MAX_FIELD_BYTES = 255;

/** The three values, encoded as the log store writes them (codec.ts: a vote, or empty before the first; two optional log ids). */
export interface GroupStateBytes {
  vote: Uint8Array;
  committed: Uint8Array;
  purged: Uint8Array;
}

/**
 * The state cell's value: u8 version (1), then for the vote, the committed pointer and the purged
 * id in this order, u8 length and the bytes. The cell checksums it; nothing else does.
 */
export function encodeGroupState(s: GroupStateBytes): Uint8Array {
  const fields = [s.vote, s.committed, s.purged];
  const out = new Uint8Array(1 + fields.reduce((n, f) => n + 1 + f.length, 0));
  out[0] = STATE_VALUE_VERSION;
  let at = 1;
  for (const f of fields) {
    if (f.length > MAX_FIELD_BYTES) throw invalid(`a group state field holds at most ${MAX_FIELD_BYTES} bytes, not ${f.length}`);
    out[at] = f.length;
    out.set(f, at + 1);
    at += 1 + f.length;
  }
  return out;
}

/** Decodes the state cell's value; CORRUPT naming `file` unless it is exactly one. */
export function decodeGroupState(bytes: Uint8Array, file: string): GroupStateBytes {
  const bad = (why: string): Error => corrupt(`group state ${file}: ${why}`, { path: file });
  if (bytes.length < 1 || bytes[0] !== STATE_VALUE_VERSION) throw bad(`unknown value version ${bytes[0] ?? 'none'}`);
  const fields: Uint8Array[] = [];
  let at = 1;
  for (let k = 0; k < 3; k++) {
    if (at >= bytes.length) throw bad('the value ends early');
    const n = bytes[at]!;
    if (at + 1 + n > bytes.length) throw bad('a field runs past the value');
    fields.push(bytes.slice(at + 1, at + 1 + n));
    at += 1 + n;
  }
  if (at !== bytes.length) throw bad('bytes follow the last field');
  return { vote: fields[0]!, committed: fields[1]!, purged: fields[2]! };
}

/** What `openGroupState` answers: the values as the group holds them, and the cells that write them. */
export interface OpenGroupState {
  values: GroupStateBytes;
  vote: Cell;
  committed: Cell;
  purged: Cell;
  /** The files opened (one or three), for a failed open to close: closing any closes its file. */
  opened: Cell[];
}

/** The value of a cell the group's creation wrote: one without a value lost it (CORRUPT). */
async function readDefinedCell(cell: Cell, file: string, id: string): Promise<Uint8Array> {
  const bytes = await cell.read();
  if (bytes === null) throw corrupt(`raft group ${JSON.stringify(id)}: cell ${file} holds no value`, { group: id, path: file });
  return bytes;
}

/**
 * Opens the small state of group `id` in `groupDir`: its STATE_CELL when `stateCell` (the GROUP
 * file says so), else its three cells, each read. `options`: the cells' options (fs,
 * GROUP_CELL_OPTIONS, KnownDurable). On failure nothing it opened stays open.
 */
export async function openGroupState(groupDir: string, id: string, stateCell: boolean, options: CellOptions): Promise<OpenGroupState> {
  const opened: Cell[] = [];
  try {
    if (stateCell) {
      const file = path.join(groupDir, STATE_CELL);
      const cell = await openOwnedCell(file, options);
      opened.push(cell);
      const value = await readDefinedCell(cell, file, id);
      const values = decodeGroupState(value, file);
      const shared = new SharedStateCell(cell, file, value);
      return { values, vote: shared.field('vote'), committed: shared.field('committed'), purged: shared.field('purged'), opened };
    }
    const cells: Cell[] = [];
    const values: Uint8Array[] = [];
    for (const name of [VOTE_CELL, COMMITTED_CELL, PURGED_CELL]) {
      const file = path.join(groupDir, name);
      const cell = await openOwnedCell(file, options);
      opened.push(cell);
      cells.push(cell);
      values.push(await readDefinedCell(cell, file, id));
    }
    return { values: { vote: values[0]!, committed: values[1]!, purged: values[2]! }, vote: cells[0]!, committed: cells[1]!, purged: cells[2]!, opened };
  } catch (err) {
    for (const c of opened) await c.close().catch(() => undefined);
    throw err;
  }
}

/**
 * The three values read without opening a cell for writing (an offline scan: no lock taken,
 * nothing left behind); null for a cell of the older layout that holds no value. CORRUPT when
 * the state cell holds none or does not decode.
 */
export async function peekGroupState(fs: FileSystem, groupDir: string, stateCell: boolean): Promise<{ vote: Uint8Array | null; committed: Uint8Array | null; purged: Uint8Array | null }> {
  const peek = (name: string): Promise<Uint8Array | null> => peekGrowingCell(fs, path.join(groupDir, name), GROUP_CELL_SLOT_BYTES, GROUP_CELL_MAX_SLOT_BYTES);
  if (stateCell) {
    const file = path.join(groupDir, STATE_CELL);
    const bytes = await peek(STATE_CELL);
    if (bytes === null) throw corrupt(`group state ${file} holds no value`, { path: file });
    return decodeGroupState(bytes, file);
  }
  return { vote: await peek(VOTE_CELL), committed: await peek(COMMITTED_CELL), purged: await peek(PURGED_CELL) };
}

/** One state cell shared by the three values' writers (see the module header). */
class SharedStateCell {
  readonly cell: Cell;
  readonly file: string;
  /**
   * The value as last written (issued), encoded: what the next write keeps of the other two. One
   * array, not three (a thousand open groups keep one each).
   */
  #value: Uint8Array;
  closed = false;

  constructor(cell: Cell, file: string, value: Uint8Array) {
    this.cell = cell;
    this.file = file;
    this.#value = value;
  }

  get values(): GroupStateBytes {
    return decodeGroupState(this.#value, this.file);
  }

  field(key: keyof GroupStateBytes): Cell {
    return new StateFieldCell(this, key);
  }

  write(key: keyof GroupStateBytes, value: Uint8Array): Promise<void> {
    if (this.closed) return Promise.reject(closed(`group state ${this.file}`));
    if (!(value instanceof Uint8Array)) return Promise.reject(invalid('a cell value must be a Uint8Array'));
    let bytes: Uint8Array;
    try {
      bytes = encodeGroupState({ ...decodeGroupState(this.#value, this.file), [key]: value });
    } catch (err) {
      return Promise.reject(err);
    }
    // Composed now, in issue order: a write issued while this one is queued keeps its value.
    this.#value = bytes;
    return this.cell.write(bytes);
  }
}

/** A `Cell` for one value: `read` answers it as last written, `write` writes the cell whole, `close` closes the shared file. */
class StateFieldCell implements Cell {
  readonly #shared: SharedStateCell;
  readonly #key: keyof GroupStateBytes;

  constructor(shared: SharedStateCell, key: keyof GroupStateBytes) {
    this.#shared = shared;
    this.#key = key;
  }

  async read(): Promise<Uint8Array | null> {
    if (this.#shared.closed) throw closed(`group state ${this.#shared.file}`);
    return this.#shared.values[this.#key];
  }

  write(value: Uint8Array): Promise<void> {
    return this.#shared.write(this.#key, value);
  }

  close(): Promise<void> {
    this.#shared.closed = true;
    return this.#shared.cell.close();
  }
}
