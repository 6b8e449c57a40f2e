// Offline check of a two-slot cell file (cells/, docs/format.md (two-slot cell)).
//
// Owns: `checkCellFile`, `looksLikeCell`. Uses the cell's own decoders (cells/format.ts). What it
// covers, byte by byte: every byte of a valid slot (header, value and the zeros after it) is under
// its CRC; an empty slot must be all zeros; an invalid slot is reported.

import { MAX_SLOT_BYTES, MIN_SLOT_BYTES, CELL_MAGIC, chooseLive, decodeSlot, type SlotState } from '../../../cells/format.js';
import { messageOf, preview, type VerifyContext } from './context.js';

export interface CellResult {
  /** The live value, or null when the cell has none that a reader would accept. */
  readonly value: Uint8Array | null;
  readonly sequence: number;
  /** The live slot (null when none). */
  readonly slot: 0 | 1 | null;
  /** How each slot decoded (empty when the file could not be read as two slots). */
  readonly slots: readonly string[];
}

/** True when the file's first bytes carry a cell slot's magic (or it is named *.cell). */
export function looksLikeCell(name: string, head: Uint8Array): boolean {
  if (name.endsWith('.cell')) return true;
  if (head.length < 8) return false;
  const magic = (head[0]! | (head[1]! << 8) | (head[2]! << 16)) + head[3]! * 0x1000000;
  return magic === CELL_MAGIC;
}

function slotBytesFromHeader(bytes: Uint8Array, at: number): number | null {
  if (bytes.length < at + 8) return null;
  const v = new DataView(bytes.buffer, bytes.byteOffset + at, 8);
  if (v.getUint32(0, true) !== CELL_MAGIC) return null;
  return v.getUint32(4, true);
}

/**
 * Checks the cell file `path`. `slotBytes`: the size its owner opens it with (else inferred from
 * the file). Answers the value a reader gets (null when none) for owners that decode it further.
 */
export async function checkCellFile(
  ctx: VerifyContext,
  path: string,
  slotBytes?: number,
  role = 'cell',
  options: { describe?: boolean } = {},
): Promise<CellResult> {
  const none: CellResult = { value: null, sequence: 0, slot: null, slots: [] };
  const describeCell = options.describe === false ? () => undefined : describeCellFile;
  const bytes = await ctx.readBounded(path, 2 * MAX_SLOT_BYTES, role);
  if (bytes === null) return none;
  ctx.sawFile(bytes.length);
  ctx.counts.cells++;
  let slot = slotBytes;
  if (slot === undefined) {
    const candidates = [slotBytesFromHeader(bytes, 0), bytes.length / 2];
    const second = bytes.length >= 2 * MIN_SLOT_BYTES ? slotBytesFromHeader(bytes, bytes.length / 2) : null;
    if (second !== null) candidates.push(second);
    slot = candidates.find((c): c is number => c !== null && Number.isSafeInteger(c) && c >= MIN_SLOT_BYTES && c <= MAX_SLOT_BYTES && 2 * c === bytes.length);
    if (slot === undefined) {
      ctx.error(path, `${role}: ${bytes.length} bytes is not two slots of a size a cell can have`);
      ctx.describe({ kind: 'cell', path, role, bytes: bytes.length, state: 'unreadable' });
      return none;
    }
  }
  if (bytes.length !== 2 * slot) {
    ctx.error(path, `${role}: the file is ${bytes.length} bytes, a cell of ${slot}-byte slots is ${2 * slot} (CORRUPT at open)`);
    return none;
  }
  const states: [SlotState, SlotState] = [decodeSlot(bytes, 0, slot), decodeSlot(bytes, slot, slot)];
  let live: { slot: 0 | 1; sequence: number; value: Uint8Array } | null;
  try {
    live = chooseLive(states[0], states[1], path);
  } catch (err) {
    ctx.error(path, `${role}: ${messageOf(err)}`);
    describeCell(ctx, path, role, slot, states, null);
    return none;
  }
  if (live === null) {
    ctx.error(path, `${role}: no valid slot (slot 0: ${reasonOf(states[0])}; slot 1: ${reasonOf(states[1])}): the value is lost (CORRUPT at open)`, 0);
    describeCell(ctx, path, role, slot, states, null);
    return none;
  }
  const standby = live.slot === 0 ? 1 : 0;
  const other = states[standby];
  if (!other.valid) {
    if (other.reason === 'empty') {
      if (live.sequence !== 1) {
        ctx.warning(path, `${role}: slot ${standby} is empty although the live slot ${live.slot} has sequence ${live.sequence} (every earlier write went there): damaged`, standby * slot);
      }
    } else {
      ctx.warning(
        path,
        `${role}: slot ${standby} is invalid (${other.reason}) — a write torn by a crash, or damage; the cell reads slot ${live.slot} ` +
          `(sequence ${live.sequence}) and its next write replaces slot ${standby}`,
        standby * slot,
      );
    }
  }
  describeCell(ctx, path, role, slot, states, live);
  return { value: live.value, sequence: live.sequence, slot: live.slot, slots: states.map((s) => reasonOf(s)) };
}

function reasonOf(s: SlotState): string {
  return s.valid ? `valid, sequence ${s.sequence}` : s.reason;
}

function describeCellFile(
  ctx: VerifyContext,
  path: string,
  role: string,
  slotBytes: number,
  states: readonly SlotState[],
  live: { slot: 0 | 1; sequence: number; value: Uint8Array } | null,
): void {
  ctx.describe({
    kind: 'cell',
    path,
    role,
    slotBytes,
    live: live === null ? null : live.slot,
    sequence: live?.sequence ?? null,
    valueBytes: live?.value.length ?? null,
    value: live === null ? null : preview(live.value),
    slots: states.map((s) => reasonOf(s)),
  });
}
