// The manifest store: where the log's single commit point lives.
//
// Owns: reading and writing the manifest value through a two-slot checksummed cell (a write is
// durable when it resolves, and a reader sees the old value or the new one, never a torn one).
// The encoding of the value itself is in format.ts.

import type { FileSystem } from '../lib/fs/types.js';
import { cellValueCapacity, openCell, openOwnedCell, peekGrowingCell, type CellOptions, type GrowingSlots, type KnownDurable } from '../cells/index.js';

/** The cell operations the log needs (the shape of `openCell`'s Cell). */
export interface ManifestCell {
  read(): Promise<Uint8Array | null>;
  write(value: Uint8Array): Promise<void>;
  close(): Promise<void>;
}

/**
 * Slot size of the manifest cell (the file is two slots). A manifest of n segments takes
 * 24 + 16n bytes, so 8 KiB slots (7,984 bytes of value) hold 497 segments (31 GiB of live log at
 * the default segment size); near that the log stops rolling and lets its last segment grow
 * (structure.ts `canAddSegment`, writer.ts).
 */
export const MANIFEST_SLOT_BYTES = 8192;

/** Most bytes a manifest value may take. */
export const MANIFEST_CAPACITY = cellValueCapacity(MANIFEST_SLOT_BYTES);

/**
 * The manifest cell. `owned`: the log's owner holds a lock excluding every other handle (no cell
 * lock); its manifest then starts with slots of `firstSlotBytes` and grows, doubling, up to
 * MANIFEST_SLOT_BYTES as the log gains segments (GrowingSlots, cells/cell.ts: a small log's
 * manifest is a small file; an existing file is read with the slot size its length names).
 * `knownDurable`: its file is durable (no sync at open).
 */
export function openManifestCell(path: string, fs: FileSystem, owned = false, knownDurable = false, firstSlotBytes = MANIFEST_SLOT_BYTES): Promise<ManifestCell> {
  const durable = knownDurable ? { knownDurable: true } : {};
  if (!owned) return openCell(path, { fs, slotBytes: MANIFEST_SLOT_BYTES, ...durable });
  const options: CellOptions & GrowingSlots & KnownDurable = { fs, slotBytes: firstSlotBytes, growTo: MANIFEST_SLOT_BYTES, ...durable };
  return openOwnedCell(path, options);
}

/** The value of an owned log's manifest file (any slot size it grew through), without opening the log. */
export function peekManifest(path: string, fs: FileSystem): Promise<Uint8Array | null> {
  return peekGrowingCell(fs, path, MIN_MANIFEST_SLOT_BYTES, MANIFEST_SLOT_BYTES);
}

/** The smallest first slot size of an owned log's manifest (one 512-byte unit: 28 segments). */
export const MIN_MANIFEST_SLOT_BYTES = 512;
