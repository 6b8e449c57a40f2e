// Offline check of a two-slot cell file (cells/, docs/format.md (two-slot cell)).
//
// Owns: `checkCellFile`, `looksLikeCell`. Uses the cell's own decoder (cells/format.ts
// `decodeCell`), so it answers exactly what an open answers. What it covers, byte by byte: every
// sector of both slots is under its own checksum; a file the open refuses (no valid slot, a damaged
// newer slot, a wrong size) is an error; a damaged older slot, a slot torn by a crash, and a file of
// the first format with an unreadable slot are warnings (the value a reader gets is intact).

import { CELL_MAGIC, CELL_MAGIC_V1, MAX_SLOT_BYTES, decodeCell, decodeSlot, describeSlot, slotBytesProblem, type CellState, type SlotView } from '../../../cells/format.js';
import { messageOf, preview, type VerifyContext } from './context.js';

export interface CellResult {
  /** The live value, or null when the cell has none that a reader would accept. */
  readonly value: Uint8Array | null;
  /** The live slot's stamp (of a first-format file: its sequence); 0 when none. */
  readonly sequence: number;
  /** The live slot (null when none). */
  readonly slot: 0 | 1 | null;
  /** How each slot decoded (empty when the file could not be read as two slots). */
  readonly slots: readonly string[];
}

function magicAt(head: Uint8Array, at: number): number | null {
  if (head.length < at + 8) return null;
  return new DataView(head.buffer, head.byteOffset + at, 8).getUint32(0, true);
}

/** True when the file's first bytes carry a cell slot's magic (or it is named *.cell). */
export function looksLikeCell(name: string, head: Uint8Array): boolean {
  if (name.endsWith('.cell')) return true;
  const magic = magicAt(head, 0);
  return magic === CELL_MAGIC || magic === CELL_MAGIC_V1;
}

function slotBytesFromHeader(bytes: Uint8Array, at: number): number | null {
  const magic = magicAt(bytes, at);
  if (magic !== CELL_MAGIC && magic !== CELL_MAGIC_V1) return null;
  return new DataView(bytes.buffer, bytes.byteOffset + at, 8).getUint32(4, true);
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
    const second = bytes.length >= 128 ? slotBytesFromHeader(bytes, bytes.length / 2) : null;
    if (second !== null) candidates.push(second);
    slot = candidates.find((c): c is number => c !== null && slotBytesProblem(c) === null && 2 * c === bytes.length);
    if (slot === undefined) {
      ctx.error(path, `${role}: ${bytes.length} bytes is not two slots of a size a cell can have`);
      ctx.describe({ kind: 'cell', path, role, bytes: bytes.length, state: 'unreadable' });
      return none;
    }
  }
  const padded = new Uint8Array(2 * slot);
  padded.set(bytes.subarray(0, Math.min(bytes.length, 2 * slot)));
  let state: CellState;
  try {
    state = decodeCell(padded, bytes.length, slot, path);
  } catch (err) {
    ctx.error(path, `${role}: ${messageOf(err)} (${(err as { code?: string }).code ?? 'CORRUPT'} at open: the value is not served)`, 0);
    const views = [decodeSlot(padded, 0, slot), decodeSlot(padded, 1, slot)].map(describeSlot);
    describeCell(ctx, path, role, slot, null, null, views);
    return none;
  }
  const live = state.live;
  const standby = (live.slot === 0 ? 1 : 0) as 0 | 1;
  const other = state.standby;
  const at = standby * slot;
  if (other.kind === 'torn') {
    ctx.warning(path, `${role}: slot ${standby} is ${describeSlot(other)}: a write that was never acknowledged; the cell reads slot ${live.slot} (stamp ${live.stamp}) and its next write replaces slot ${standby}`, at);
  } else if (other.kind === 'damaged' && live.format === 2) {
    ctx.warning(
      path,
      `${role}: slot ${standby}, older than the live slot ${live.slot} (stamp ${live.stamp}), is ${describeSlot(other)}; the value is intact and the next write replaces slot ${standby}`,
      at,
    );
  } else if (other.kind === 'damaged' && other.reason !== 'all zeros') {
    ctx.warning(
      path,
      `${role}: a cell of the first format whose slot ${standby} is ${describeSlot(other)} — a write torn by a crash, or damage, which that format cannot tell apart; ` +
        `the cell reads slot ${live.slot} (sequence ${live.stamp}) and its owner's next write converts the file`,
      at,
    );
  } else if (other.kind === 'damaged' && live.format === 1 && live.stamp !== 1) {
    ctx.warning(path, `${role}: slot ${standby} is empty although the live slot ${live.slot} has sequence ${live.stamp} (every earlier write went there): damaged`, at);
  }
  const slots = live.slot === 0 ? [describeLive(state), describeSlot(other)] : [describeSlot(other), describeLive(state)];
  describeCell(ctx, path, role, slot, state, live, slots);
  return { value: live.value, sequence: live.stamp, slot: live.slot, slots };
}

function describeLive(state: CellState): string {
  const l = state.live;
  return l.format === 1 ? `first format, sequence ${l.stamp}, ${l.value.length} bytes (live)` : `whole, stamp ${l.stamp}, ${l.value.length} bytes (live)`;
}

function describeCellFile(
  ctx: VerifyContext,
  path: string,
  role: string,
  slotBytes: number,
  state: CellState | null,
  live: CellState['live'] | null,
  slots?: readonly string[],
): void {
  const standby: SlotView | null = state?.standby ?? null;
  ctx.describe({
    kind: 'cell',
    path,
    role,
    slotBytes,
    format: live?.format ?? null,
    live: live === null ? null : live.slot,
    sequence: live?.stamp ?? null,
    valueBytes: live?.value.length ?? null,
    value: live === null ? null : preview(live.value),
    standby: standby === null ? null : describeSlot(standby),
    ...(slots === undefined ? {} : { slots }),
  });
}
