// Raft node layout: the names of every file and directory of a node on disk, and the few small
// helpers the node and its groups share to create, identify and remove them.
//
// Owns: the node's directory layout (documented in docs/raft-store.md, "Layout"), the encoding of
// a group's GROUP file (the group id and its flags, checksummed; the first format, without flags,
// still read; the flags also say which of the two layouts of a group's small state it has), the mapping from a group id to its directory
// name (a SHA-256, so that a group id never becomes a path as is), the snapshot file names, and a
// recursive removal through the FileSystem interface. Guarantees: a group directory's name is a
// function of its id alone; a GROUP file that does not decode to exactly the id its directory
// name hashes, or that carries a flag this version does not know, is CORRUPT; a GROUP file is
// replaced only whole (temporary file, sync, rename, directory sync); nothing here holds more than one small file in memory.

import * as crypto from 'node:crypto';
import { createHash } from 'node:crypto';
import * as path from 'node:path';
import { crc32 } from 'node:zlib';

import { corrupt, fromIo, invalid } from '../errors.js';
import type { FileHandle, FileSystem } from '../fs/types.js';
import { removeOwnTree } from '../fs/own-entry.js';
import { isWellFormed } from './types.js';
import { decodeUtf8Exact } from '../text.js';

/** The node's lock file (try-locked for the node's lifetime). */
export const NODE_LOCK = 'LOCK';
/**
 * The mark of a clean close: created (empty) by a node's close after every group and the payload
 * store closed with no failure, so after every sync of that close; unlinked by the next open
 * before it reads or writes anything else. Its presence tells that open that every file of the
 * node is durable (docs/raft-store.md, "Clean close").
 */
export const CLEAN_MARK = 'CLEAN';
/** The node's payload store directory. */
export const PAYLOADS_DIR = 'payloads';
/** The directory holding one directory per group. */
export const GROUPS_DIR = 'groups';
/**
 * The node journal (node-journal.ts): the segmented log through which every group's appends and
 * truncations become durable. Made before `groups/` when a node is created.
 */
export const NODE_JOURNAL_DIR = 'journal';
/** A group directory being created: renamed into place when complete, removed at open otherwise. */
export const GROUP_TEMP_PREFIX = 'tmp-';

/** Inside a group directory. */
export const GROUP_FILE = 'GROUP';
/**
 * The group's vote, committed pointer and purged id, in one cell (group-state.ts): every group
 * made since the GROUP_STATE_CELL flag exists. A group made before it keeps the three cells below.
 */
export const STATE_CELL = 'state.cell';
export const VOTE_CELL = 'vote.cell';
export const COMMITTED_CELL = 'committed.cell';
export const PURGED_CELL = 'purged.cell';
export const LOG_DIR = 'log';
export const SM_DIR = 'sm';
/**
 * The state machine's directory while its first write makes it: renamed to `sm/` when whole. A
 * leftover (a making cut short) is removed by the next making; nothing in it was acknowledged.
 */
export const SM_TEMP = 'sm.tmp';
export const JOURNAL_DIR = 'journal';
export const SNAPSHOTS_DIR = 'snapshots';

/**
 * Slot sizes of a group's small files. The vote, committed and purged cells are made with 256-byte
 * slots (the whole cell is one 512-byte sector; a vote or a log id takes well under the 228 bytes
 * a slot holds) and grow, doubling, up to 4096 (the slot size of the groups an earlier version
 * made: read as they are). The two logs' manifests start at 512 bytes (28 segments) and grow to
 * 8192 (segments/manifest.ts).
 */
export const GROUP_CELL_SLOT_BYTES = 256;
export const GROUP_CELL_MAX_SLOT_BYTES = 4096;
export const GROUP_MANIFEST_SLOT_BYTES = 512;
/** The cell options of a group's cells (GrowingSlots, cells/cell.ts). */
export const GROUP_CELL_OPTIONS = { slotBytes: GROUP_CELL_SLOT_BYTES, growTo: GROUP_CELL_MAX_SLOT_BYTES } as const;

/** The largest group id, in UTF-8 bytes. */
export const MAX_GROUP_ID_BYTES = 512;

/** The GROUP file of the first format: magic, length, id, CRC (every file of the group made at its creation). */
const GROUP_MAGIC_V1 = Buffer.from('SGLGROUP', 'latin1');
/** The GROUP file of the current format: magic, flags, length, id, CRC. */
const GROUP_MAGIC_V2 = Buffer.from('SGLGRP02', 'latin1');
const GROUP_MAGIC_BYTES = 8;
/**
 * GROUP flag: the group's state machine files (`sm/journal/`, `sm/snapshots/`) were made and are
 * durable, so a missing one was lost (CORRUPT). Unset, `sm/` may be absent: the state machine
 * has applied nothing and holds no snapshot (it is made at its first write, fs-state-machine.ts).
 */
export const GROUP_STATE_MACHINE_MADE = 1;
/**
 * GROUP flag: the group's vote, committed pointer and purged id are one cell, STATE_CELL (set on
 * every group made since it exists, never changed). Unset: three cells, VOTE_CELL, COMMITTED_CELL
 * and PURGED_CELL (the layout of the groups an earlier version made, read and written as it is).
 * A version that does not know the flag refuses the GROUP file (CORRUPT, "unknown flags"), so no
 * earlier version opens a group whose state it would not find.
 */
export const GROUP_STATE_CELL = 2;
const GROUP_KNOWN_FLAGS = GROUP_STATE_MACHINE_MADE | GROUP_STATE_CELL;
/** The temporary name of a GROUP file being replaced (a leftover is replaced at the next write). */
export const GROUP_FILE_TEMP = 'GROUP.tmp';

/** What a GROUP file says: the group id, and whether its state machine's files were made. */
export interface GroupFile {
  id: string;
  /** 1: the first format (every file made with the group), 2: the current one. */
  version: 1 | 2;
  /** The state machine's files exist (always true of version 1). */
  stateMachineMade: boolean;
  /** The vote, committed pointer and purged id are one cell, STATE_CELL (GROUP_STATE_CELL; never true of version 1). */
  stateCell: boolean;
}

/** The flags a GROUP file of version 2 holds for `file` (what a rewrite must keep). */
export function groupFlagsOf(file: GroupFile): number {
  return (file.stateMachineMade ? GROUP_STATE_MACHINE_MADE : 0) | (file.stateCell ? GROUP_STATE_CELL : 0);
}

/** Throws INVALID unless `id` is a group id: 1..512 UTF-8 bytes of well-formed text. */
export function validateGroupId(id: unknown): asserts id is string {
  if (typeof id !== 'string' || id.length === 0) throw invalid('a group id must be a non-empty string');
  if (!isWellFormed(id)) throw invalid('a group id must be well-formed UTF-16 (no lone surrogate)');
  if (Buffer.byteLength(id, 'utf8') > MAX_GROUP_ID_BYTES) throw invalid(`a group id is at most ${MAX_GROUP_ID_BYTES} UTF-8 bytes`);
}

/** The directory name of a group: the SHA-256 of its id's UTF-8 bytes, 64 lowercase hex digits. */
export function groupDirName(id: string): string {
  // The one-shot form where this Node has it (20.12 on): no Hash object per group an open checks.
  return oneShotHash !== undefined ? oneShotHash('sha256', id, 'hex') : createHash('sha256').update(id, 'utf8').digest('hex');
}
const oneShotHash = (crypto as { hash?: (algorithm: string, data: string, encoding: 'hex') => string }).hash;

/** True for a name `groupDirName` can answer. */
export function isGroupDirName(name: string): boolean {
  return /^[0-9a-f]{64}$/.test(name);
}

/**
 * GROUP file bytes (version 2): magic "SGLGRP02", u8 flags, u32 LE length, the id's UTF-8, u32 LE
 * CRC-32 of all before.
 */
export function encodeGroupFile(id: string, flags = 0): Uint8Array {
  if ((flags & ~GROUP_KNOWN_FLAGS) !== 0) throw new RangeError(`unknown GROUP flags ${flags}`);
  const body = Buffer.from(id, 'utf8');
  const out = Buffer.alloc(GROUP_MAGIC_BYTES + 1 + 4 + body.length + 4);
  GROUP_MAGIC_V2.copy(out, 0);
  out.writeUInt8(flags, GROUP_MAGIC_BYTES);
  out.writeUInt32LE(body.length, GROUP_MAGIC_BYTES + 1);
  body.copy(out, GROUP_MAGIC_BYTES + 5);
  out.writeUInt32LE(crc32(out.subarray(0, out.length - 4)), out.length - 4);
  return out;
}

/** Reads and checks the GROUP file of the group directory `dir` (either version). */
export async function readGroupFile(fs: FileSystem, dir: string): Promise<GroupFile> {
  const file = path.join(dir, GROUP_FILE);
  let h: FileHandle;
  try {
    h = await fs.open(file, 'read');
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') throw corrupt(`group directory ${dir} has no ${GROUP_FILE} file`, { path: dir });
    throw fromIo(err, 'open', file);
  }
  try {
    // One read of one byte more than the longest GROUP file: its length is what the read answers.
    const max = GROUP_MAGIC_BYTES + 9 + MAX_GROUP_ID_BYTES;
    const whole = Buffer.alloc(max + 1);
    const size = await h.read(whole, 0);
    if (size < GROUP_MAGIC_BYTES + 8 || size > max) throw corrupt(`${file} is ${size > max ? `longer than ${max} bytes` : `${size} bytes`}: not a group file`, { path: file });
    const b = whole.subarray(0, size);
    const magic = b.subarray(0, GROUP_MAGIC_BYTES);
    const version = magic.equals(GROUP_MAGIC_V2) ? 2 : magic.equals(GROUP_MAGIC_V1) ? 1 : 0;
    if (version === 0) throw corrupt(`${file} has a wrong magic number`, { path: file });
    // The CRC first: a flipped flag or length byte is damage, not a format question.
    if (b.readUInt32LE(size - 4) !== crc32(b.subarray(0, size - 4))) throw corrupt(`${file} fails its checksum`, { path: file });
    const flags = version === 2 ? b.readUInt8(GROUP_MAGIC_BYTES) : GROUP_STATE_MACHINE_MADE;
    if ((flags & ~GROUP_KNOWN_FLAGS) !== 0) throw corrupt(`${file} has unknown flags ${flags} (written by a newer version?)`, { path: file, flags });
    const at = version === 2 ? GROUP_MAGIC_BYTES + 1 : GROUP_MAGIC_BYTES;
    const len = b.readUInt32LE(at);
    if (at + 4 + len + 4 !== size) throw corrupt(`${file}: length ${len} does not match its size`, { path: file });
    let id: string;
    try {
      id = decodeUtf8Exact(b.subarray(at + 4, size - 4));
    } catch {
      throw corrupt(`${file}: the group id is not UTF-8`, { path: file });
    }
    if (groupDirName(id) !== path.basename(dir)) {
      throw corrupt(`${file} names group ${JSON.stringify(id)}, whose directory is not ${path.basename(dir)}`, { path: file });
    }
    return { id, version, stateMachineMade: (flags & GROUP_STATE_MACHINE_MADE) !== 0, stateCell: (flags & GROUP_STATE_CELL) !== 0 };
  } catch (err) {
    throw fromIo(err, 'read', file);
  } finally {
    await h.close().catch(() => undefined);
  }
}

/** Replaces the GROUP file of the group directory `dir` durably (replaceFileDurably). */
export function rewriteGroupFile(fs: FileSystem, dir: string, id: string, flags: number): Promise<void> {
  return replaceFileDurably(fs, dir, GROUP_FILE, GROUP_FILE_TEMP, encodeGroupFile(id, flags));
}

/**
 * Replaces `dir/name` by `bytes` durably: `dir/tempName` (a leftover of an earlier replacement
 * cut short is removed first: never renamed, so never the file) written and synced, renamed
 * over it, the directory synced. A crash leaves the old file or the new one, whole.
 */
export async function replaceFileDurably(fs: FileSystem, dir: string, name: string, tempName: string, bytes: Uint8Array): Promise<void> {
  const temp = path.join(dir, tempName);
  const file = path.join(dir, name);
  await fs.unlink(temp).catch((err: unknown) => ((err as { code?: unknown }).code === 'ENOENT' ? undefined : Promise.reject(fromIo(err, 'remove', temp))));
  await writeFileDurably(fs, temp, bytes);
  await fs.rename(temp, file).catch((err: unknown) => Promise.reject(fromIo(err, 'rename', file)));
  await fs.syncDir(dir).catch((err: unknown) => Promise.reject(fromIo(err, 'sync directory', dir)));
}

/** Writes a small file completely and makes its bytes durable (its name is the caller's business). */
export function writeFileDurably(fs: FileSystem, file: string, bytes: Uint8Array): Promise<void> {
  return writeFilesDurably(fs, [{ file, bytes }], []);
}

/**
 * Creates and writes every file of `files` (none may exist), then syncs all of them and every
 * directory of `dirs` at once, and answers when all are durable (their names are the caller's
 * business). Syncs made together let the file system commit them together: made one after
 * another, the syncs of a group's creation were its whole cost. Every sync has settled and every
 * handle is closed before it answers, after a failure too (the first failure is thrown), so a
 * caller may remove what it wrote at once.
 */
export async function writeFilesDurably(fs: FileSystem, files: readonly { file: string; bytes: Uint8Array }[], dirs: readonly string[]): Promise<void> {
  const handles: FileHandle[] = [];
  try {
    for (const f of files) {
      const h = await fs.open(f.file, 'create-exclusive').catch((err: unknown) => Promise.reject(fromIo(err, 'create', f.file)));
      handles.push(h);
      await h.write(f.bytes, 0).catch((err: unknown) => Promise.reject(fromIo(err, 'write', f.file)));
    }
    const syncs = await Promise.allSettled([
      ...handles.map((h, i) => h.datasync().catch((err: unknown) => Promise.reject(fromIo(err, 'sync', files[i]!.file)))),
      ...dirs.map((d) => fs.syncDir(d).catch((err: unknown) => Promise.reject(fromIo(err, 'sync directory', d)))),
    ]);
    const failed = syncs.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
  } finally {
    for (const h of handles) await h.close().catch(() => undefined);
  }
}

/**
 * Removes a directory and everything under it, through the FileSystem interface (no directory
 * sync: callers remove only what no durable state refers to). Missing entries are fine. A
 * symbolic link anywhere in it is CORRUPT, with nothing removed (lib/fs/own-entry.ts).
 */
export async function removeTree(fs: FileSystem, target: string): Promise<void> {
  await removeOwnTree(fs, target, 'raft node leftover');
}

// ---------------------------------------------------------------------------------------------
// Snapshot files: `snap-<seq>.snap` (current = highest seq), `tmp-<seq>-<random>.part` while
// being built or received. `seq` is 16 lowercase hex digits, so names sort by sequence.

const SNAP_RE = /^snap-([0-9a-f]{16})\.snap$/;
const TEMP_RE = /^tmp-([0-9a-f]{16})-[0-9a-f]{16}\.part$/;

export function snapshotFileName(seq: number): string {
  return `snap-${seq.toString(16).padStart(16, '0')}.snap`;
}

export function snapshotTempName(seq: number, random: string): string {
  return `tmp-${seq.toString(16).padStart(16, '0')}-${random}.part`;
}

/** The sequence number of a snapshot file name, or null for any other name. */
export function parseSnapshotFileName(name: string): number | null {
  const m = SNAP_RE.exec(name);
  if (m === null) return null;
  const seq = Number.parseInt(m[1] as string, 16);
  return Number.isSafeInteger(seq) ? seq : null;
}

/** The sequence number of a temporary snapshot file name, or null. */
export function parseSnapshotTempName(name: string): number | null {
  const m = TEMP_RE.exec(name);
  if (m === null) return null;
  const seq = Number.parseInt(m[1] as string, 16);
  return Number.isSafeInteger(seq) ? seq : null;
}
