// The replay model of the crash engine: what is durable and what is not, at each point of a trace.
//
// Owns: `ReplayModel`, which walks a MemoryFs trace from its initial image and keeps, per file,
// the durable bytes and the unsynced writes/truncates since its last sync, and per directory the
// durable entries and the unsynced entry changes since its last syncDir (docs/crash-testing.md, "The model": a file sync
// covers only that file's data, a directory sync only that directory's entries; a rename is an
// unlink of the old name plus a link of the new one). It builds the disk image of any choice of
// unsynced units to keep, with at most one write torn at a 512-byte sector boundary.
// Guarantees: durable versions are never mutated once made (a sync replaces them), so a state
// built at one point never changes later; units have stable ids derived from the trace.

import { Content, loadImage, walkImage, type DiskImage, type TraceEntry } from '../fs/memory.js';

export const SECTOR_BYTES = 512;

/** One unsynced operation that a crash may keep or lose. */
export type Unit = FileUnit | EntryUnit;

export function isFileUnit(u: Unit): u is FileUnit {
  return u.kind === 'write' || u.kind === 'truncate';
}

export interface FileUnit {
  readonly kind: 'write' | 'truncate';
  /** Stable id: the trace index of the call. */
  readonly uid: string;
  readonly entry: number;
  readonly inode: number;
  readonly path: string;
  readonly offset: number;
  readonly data: Uint8Array;
  readonly size: number;
  /** The file's size (in the page cache) just before this call. */
  readonly sizeBefore: number;
}

export interface EntryUnit {
  readonly kind: 'link' | 'unlink';
  /** Stable id: the trace index, plus '.k' for the k-th change of a call that made several. */
  readonly uid: string;
  readonly entry: number;
  readonly dir: number;
  readonly name: string;
  readonly inode: number | null;
  /** The path this change names (the new name for a link, the removed one for an unlink). */
  readonly path: string;
  readonly call: TraceEntry['kind'];
}

/** A torn write: the first `sectors` sectors it touches landed; `extend`: the size grew anyway. */
export interface Tear {
  readonly unit: FileUnit;
  readonly sectors: number;
  readonly extend: boolean;
}

interface FileState {
  durable: Content;
  pending: FileUnit[];
  size: number;
}

interface DirState {
  durable: ReadonlyMap<string, number>;
  pending: EntryUnit[];
}

/** Sectors a write touches (at least 1 for a non-empty write). */
export function sectorsOf(unit: FileUnit): number {
  if (unit.data.length === 0) return 0;
  return Math.ceil((unit.offset + unit.data.length) / SECTOR_BYTES) - Math.floor(unit.offset / SECTOR_BYTES);
}

const durableBytes = new WeakMap<Content, Uint8Array>();

function bytesOfDurable(content: Content): Uint8Array {
  let bytes = durableBytes.get(content);
  if (bytes === undefined) {
    bytes = content.toBytes();
    durableBytes.set(content, bytes);
  }
  return bytes;
}

function applyFileUnit(content: Content, unit: FileUnit): void {
  if (unit.kind === 'write') content.write(unit.data, unit.offset);
  else content.truncate(unit.size);
}

function applyTear(content: Content, tear: Tear): void {
  const { unit } = tear;
  const end = unit.offset + unit.data.length;
  const landedEnd = Math.min(end, (Math.floor(unit.offset / SECTOR_BYTES) + tear.sectors) * SECTOR_BYTES);
  if (landedEnd > unit.offset) content.write(unit.data.subarray(0, landedEnd - unit.offset), unit.offset);
  if (tear.extend && content.size < end) content.truncate(end);
}

/** Replays a trace; at any point, lists the unsynced units and builds crash images. */
export class ReplayModel {
  readonly #files = new Map<number, FileState>();
  readonly #dirs = new Map<number, DirState>();
  /** Entries replayed so far (the crash point). */
  point = 0;
  /** Bumped by every sync that made something durable: equal epochs mean equal durable states. */
  epoch = 0;
  /** Markers replayed so far. */
  readonly marks: TraceEntry[] = [];
  readonly #trace: readonly TraceEntry[];

  constructor(initial: DiskImage | undefined, trace: readonly TraceEntry[]) {
    this.#trace = trace;
    const loaded = loadImage(initial);
    for (const [id, entries] of loaded.dirs) this.#dirs.set(id, { durable: entries, pending: [] });
    for (const [id, bytes] of loaded.files) {
      this.#files.set(id, { durable: Content.fromBytes(bytes), pending: [], size: bytes.length });
    }
  }

  get length(): number {
    return this.#trace.length;
  }

  /** Replays the next trace entry. */
  step(): TraceEntry {
    const entry = this.#trace[this.point];
    if (entry === undefined) throw new RangeError('the trace is replayed to its end');
    this.point++;
    if (entry.error !== undefined) return entry;
    switch (entry.kind) {
      case 'mark':
        this.marks.push(entry);
        break;
      case 'write':
      case 'writev': {
        const file = this.#file(entry.inode);
        const data = entry.data;
        if (data === undefined) throw new Error(`trace entry ${entry.index} has no data: record with trace on`);
        if (data.length === 0) break;
        file.pending.push({
          kind: 'write',
          uid: String(entry.index),
          entry: entry.index,
          inode: entry.inode ?? -1,
          path: entry.path,
          offset: entry.offset ?? 0,
          data,
          size: 0,
          sizeBefore: file.size,
        });
        file.size = Math.max(file.size, (entry.offset ?? 0) + data.length);
        break;
      }
      case 'truncate': {
        const file = this.#file(entry.inode);
        file.pending.push({
          kind: 'truncate',
          uid: String(entry.index),
          entry: entry.index,
          inode: entry.inode ?? -1,
          path: entry.path,
          offset: 0,
          data: new Uint8Array(0),
          size: entry.size ?? 0,
          sizeBefore: file.size,
        });
        file.size = entry.size ?? 0;
        break;
      }
      case 'datasync':
      case 'sync': {
        const file = this.#file(entry.inode);
        if (file.pending.length > 0) {
          const next = file.durable.clone();
          for (const unit of file.pending) applyFileUnit(next, unit);
          file.durable = next;
          file.pending = [];
          this.epoch++;
        }
        break;
      }
      case 'syncDir': {
        const dir = this.#dirs.get(entry.inode ?? -1);
        if (dir !== undefined && dir.pending.length > 0) {
          const next = new Map(dir.durable);
          for (const unit of dir.pending) applyEntryUnit(next, unit);
          dir.durable = next;
          dir.pending = [];
          this.epoch++;
        }
        break;
      }
      default:
        break;
    }
    const changes = entry.changes ?? [];
    changes.forEach((change, k) => {
      if (change.inode !== null) {
        if (change.isDir === true) {
          if (!this.#dirs.has(change.inode)) this.#dirs.set(change.inode, { durable: new Map(), pending: [] });
        } else if (!this.#files.has(change.inode)) {
          this.#files.set(change.inode, { durable: Content.empty(), pending: [], size: 0 });
        }
      }
      const dir = this.#dirs.get(change.dir);
      if (dir === undefined) throw new Error(`trace entry ${entry.index} changes unknown directory ${change.dir}`);
      const path =
        entry.kind === 'mkdir'
          ? pathOfMkdirChange(entry.path, changes.length, k)
          : change.inode !== null && entry.to !== undefined
            ? entry.to
            : entry.path;
      dir.pending.push({
        kind: change.inode === null ? 'unlink' : 'link',
        uid: changes.length === 1 ? String(entry.index) : `${entry.index}.${k}`,
        entry: entry.index,
        dir: change.dir,
        name: change.name,
        inode: change.inode,
        path,
        call: entry.kind,
      });
    });
    return entry;
  }

  #file(inode: number | undefined): FileState {
    const file = this.#files.get(inode ?? -1);
    if (file === undefined) throw new Error(`trace names unknown file inode ${String(inode)}`);
    return file;
  }

  /** Every unsynced unit now, in trace order. */
  pending(): Unit[] {
    const units: Unit[] = [];
    for (const f of this.#files.values()) units.push(...f.pending);
    for (const d of this.#dirs.values()) units.push(...d.pending);
    units.sort((a, b) => a.entry - b.entry || (a.uid < b.uid ? -1 : a.uid > b.uid ? 1 : 0));
    return units;
  }

  /**
   * The disk after a crash now that kept exactly `kept` of the unsynced units (the rest lost),
   * with `tear` (a unit in `kept`) landed only in part.
   */
  image(kept: ReadonlySet<Unit>, tear?: Tear): DiskImage {
    return walkImage(
      (id) => {
        const dir = this.#dirs.get(id);
        if (dir === undefined) return undefined;
        let map: Map<string, number> | undefined;
        for (const unit of dir.pending) {
          if (!kept.has(unit)) continue;
          map ??= new Map(dir.durable);
          applyEntryUnit(map, unit);
        }
        return map ?? dir.durable;
      },
      (id) => this.#dirs.has(id),
      (id) => {
        const file = this.#files.get(id);
        if (file === undefined) return new Uint8Array(0);
        let content: Content | undefined;
        for (const unit of file.pending) {
          const torn = tear !== undefined && tear.unit === unit;
          if (!kept.has(unit) && !torn) continue;
          content ??= file.durable.clone();
          if (torn) applyTear(content, tear);
          else applyFileUnit(content, unit);
        }
        return content === undefined ? bytesOfDurable(file.durable) : content.toBytes();
      },
    );
  }
}

function applyEntryUnit(map: Map<string, number>, unit: EntryUnit): void {
  if (unit.inode === null) map.delete(unit.name);
  else map.set(unit.name, unit.inode);
}

/** mkdir -p records one change per created directory, outermost first; name the k-th one. */
function pathOfMkdirChange(full: string, count: number, k: number): string {
  const parts = full.split('/');
  return parts.slice(0, parts.length - (count - 1 - k)).join('/') || '/';
}
