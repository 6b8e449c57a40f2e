// MemoryFs: an in-memory FileSystem that models the page cache versus the disk, and records.
//
// Owns: `MemoryFs` (a process's view of a simulated machine), the disk image format (`DiskImage`),
// the trace format (`TraceEntry`), and `Content`, the copy-on-write page store of a file.
// Guarantees:
// - Per file: the current bytes (what reads see) and the durable bytes (as of its last
//   `datasync`/`sync`). Per directory: the current entries and the durable ones (as of its last
//   `syncDir`). A file sync never makes its own directory entry durable; a directory sync never
//   makes a file's data durable. `currentImage()` is what a restarted process would see after a
//   kill (the page cache survives), `durableImage()` what survives a power loss with nothing
//   unsynced kept; lib/crash builds every state in between from the trace.
// - Every call is recorded, in the order it ran, in `trace` (kind, path, inode, offset, length,
//   a private copy of written bytes, the directory entries it changed), along with the markers a
//   workload inserts with `mark()` (acknowledgements). Calls take effect when they are made (the
//   returned promise only reports it), so the trace order is the call order.
// - Locks belong to an open handle (flock semantics): a second handle on one file, in this or
//   another process view, cannot take it; `close` and `sever` release it.
// - `sever()` models killing the process: every later call through this view or its handles
//   rejects with code 'ESEVERED' (closing an already-dead handle resolves), its locks are released,
//   nothing it issues later changes the disk. `newProcess()` is a fresh process on the same machine.
// - Cheap: file bytes live in 4 KiB pages shared copy-on-write between the current and durable
//   versions, so a write copies at most the pages it touches and a sync copies no bytes.
// Paths are '/'-separated; a relative path is taken relative to '/'.

import * as posix from 'node:path/posix';
import type { DirEntry, EntryStat, FileHandle, FileStat, FileSystem, OpenMode } from './types.js';

// ---------------------------------------------------------------------------------------------
// Content: a file's bytes in copy-on-write pages.

export const PAGE_BYTES = 4096;

let nextContentId = 1;

/**
 * A file's bytes. Pages are shared between a Content and its clones; a Content writes only pages
 * it owns and copies any other page first. Bytes at or past `size` are always zero.
 */
export class Content {
  #size: number;
  /** undefined: a page of zeros. A page may be shorter than PAGE_BYTES (rest reads as zeros). */
  #pages: (Uint8Array | undefined)[];
  /** owner[i] === #id: page i is this Content's own and may be written in place. */
  #owner: number[];
  #id: number;

  private constructor(size: number, pages: (Uint8Array | undefined)[]) {
    this.#size = size;
    this.#pages = pages;
    this.#owner = [];
    this.#id = nextContentId++;
  }

  static empty(): Content {
    return new Content(0, []);
  }

  /** Wraps `bytes` without copying them; they are never written (pages are copied first). */
  static fromBytes(bytes: Uint8Array): Content {
    const pages: Uint8Array[] = [];
    for (let at = 0; at < bytes.length; at += PAGE_BYTES) pages.push(bytes.subarray(at, at + PAGE_BYTES));
    return new Content(bytes.length, pages);
  }

  get size(): number {
    return this.#size;
  }

  /** A version that shares every page; from now on neither this nor the clone writes them in place. */
  clone(): Content {
    this.#id = nextContentId++;
    return new Content(this.#size, this.#pages.slice());
  }

  #writablePage(index: number, wholePage: boolean): Uint8Array {
    const page = this.#pages[index];
    if (page !== undefined && this.#owner[index] === this.#id) return page;
    const own = new Uint8Array(PAGE_BYTES);
    if (page !== undefined && !wholePage) own.set(page);
    this.#pages[index] = own;
    this.#owner[index] = this.#id;
    return own;
  }

  write(data: Uint8Array, offset: number): void {
    if (data.length === 0) return; // like pwrite: writing nothing does not extend the file
    const end = offset + data.length;
    let from = 0;
    for (let index = Math.floor(offset / PAGE_BYTES); index * PAGE_BYTES < end; index++) {
      const pageStart = index * PAGE_BYTES;
      const lo = Math.max(offset, pageStart) - pageStart;
      const hi = Math.min(end, pageStart + PAGE_BYTES) - pageStart;
      const page = this.#writablePage(index, lo === 0 && hi === PAGE_BYTES);
      page.set(data.subarray(from, from + (hi - lo)), lo);
      from += hi - lo;
    }
    if (end > this.#size) this.#size = end;
  }

  truncate(size: number): void {
    if (size < this.#size) {
      const keep = Math.ceil(size / PAGE_BYTES);
      this.#pages.length = Math.min(this.#pages.length, keep);
      if (this.#owner.length > keep) this.#owner.length = keep;
      const tail = size % PAGE_BYTES;
      const last = this.#pages[keep - 1];
      if (tail !== 0 && last !== undefined && last.length > tail) this.#writablePage(keep - 1, false).fill(0, tail);
    }
    this.#size = size;
  }

  /** Copies up to `into.length` bytes from `position`; answers how many (fewer at the end). */
  read(into: Uint8Array, position: number): number {
    const n = Math.max(0, Math.min(into.length, this.#size - position));
    let done = 0;
    while (done < n) {
      const at = position + done;
      const index = Math.floor(at / PAGE_BYTES);
      const within = at - index * PAGE_BYTES;
      const count = Math.min(n - done, PAGE_BYTES - within);
      const page = this.#pages[index];
      const available = page === undefined ? 0 : Math.max(0, Math.min(count, page.length - within));
      if (page !== undefined && available > 0) into.set(page.subarray(within, within + available), done);
      if (available < count) into.fill(0, done + available, done + count);
      done += count;
    }
    return n;
  }

  /** A fresh copy of all the bytes. */
  toBytes(): Uint8Array {
    const out = new Uint8Array(this.#size);
    this.read(out, 0);
    return out;
  }
}

// ---------------------------------------------------------------------------------------------
// Images and traces.

/**
 * A disk's content. `files` maps absolute paths to bytes; the same Uint8Array object under two
 * paths is one file with two names (a hard link). `dirs` lists directories other than '/' (on
 * input it may be omitted: the parents of every file are implied). Images are read, never written.
 */
export interface DiskImage {
  readonly dirs?: readonly string[];
  readonly files: Readonly<Record<string, Uint8Array>>;
}

/** Every kind of call a FileSystem or FileHandle takes, named as the trace and FaultyFs name them. */
export type FsCallKind =
  | 'open'
  | 'close'
  | 'read'
  | 'write'
  | 'writev'
  | 'datasync'
  | 'sync'
  | 'truncate'
  | 'size'
  | 'lock'
  | 'unlock'
  | 'readdir'
  | 'mkdir'
  | 'rename'
  | 'link'
  | 'unlink'
  | 'rmdir'
  | 'stat'
  | 'lstat'
  | 'syncDir';

/** One change to one directory's entries: `name` now names `inode`, or (inode null) nothing. */
export interface EntryChange {
  readonly dir: number;
  readonly name: string;
  readonly inode: number | null;
  /** For a link: whether the linked inode is a directory (lets a replay create it). */
  readonly isDir?: boolean;
}

/** One recorded call or marker. Fields not meaningful for a kind are absent. */
export interface TraceEntry {
  /** Position in the trace. */
  readonly index: number;
  readonly kind: FsCallKind | 'mark' | 'sever';
  /** Which process view made the call (0 for the first). */
  readonly process: number;
  /** The path the call named (for a handle call, the path it was opened with; '' for a mark). */
  readonly path: string;
  /** rename/link: the destination. */
  readonly to?: string;
  /** The file or directory acted on. For syncDir: the directory. */
  readonly inode?: number;
  readonly mode?: OpenMode;
  /** read/write/writev: byte offset and length. */
  readonly offset?: number;
  readonly length?: number;
  /** write/writev: a private copy of the bytes written (writev: the chunks joined). */
  readonly data?: Uint8Array;
  /** truncate: the new size. */
  readonly size?: number;
  /** Directory entries the call changed (open that created, mkdir, rename, link, unlink, rmdir). */
  readonly changes?: readonly EntryChange[];
  /** lock: whether it was taken. */
  readonly locked?: boolean;
  /** mark: the label and the workload's data. */
  readonly label?: string;
  readonly detail?: unknown;
  /** The errno of a call that failed (it changed nothing). */
  readonly error?: string;
}

// ---------------------------------------------------------------------------------------------
// The machine: inodes shared by every process view.

interface FileNode {
  readonly kind: 'file';
  readonly id: number;
  current: Content;
  durable: Content;
  dirty: boolean;
}

interface DirNode {
  readonly kind: 'dir';
  readonly id: number;
  current: Map<string, number>;
  durable: Map<string, number>;
  dirty: boolean;
  /** The directory holding it now (root: itself). */
  parent: number;
}

type Node = FileNode | DirNode;

export const ROOT_INODE = 0;

/** Normalizes a path the way every MemoryFs call does: absolute, no '.', '..' or trailing '/'. */
export function normalizePath(p: string): string {
  return posix.resolve('/', p);
}

/**
 * The inodes an image loads as, numbered deterministically (root 0, then directories, then files,
 * each in path order) so that a replay of a trace finds the inode numbers the run used.
 */
export function loadImage(image: DiskImage | undefined): {
  dirs: Map<number, Map<string, number>>;
  files: Map<number, Uint8Array>;
  dirParents: Map<number, number>;
  nextInode: number;
} {
  const dirPaths = new Set<string>();
  const addDirWithParents = (p: string): void => {
    for (let d = p; d !== '/' && !dirPaths.has(d); d = posix.dirname(d)) dirPaths.add(d);
  };
  for (const d of image?.dirs ?? []) addDirWithParents(normalizePath(d));
  const filePaths = Object.keys(image?.files ?? {}).map((p) => [normalizePath(p), p] as const);
  for (const [abs] of filePaths) addDirWithParents(posix.dirname(abs));
  filePaths.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));

  const ids = new Map<string, number>([['/', ROOT_INODE]]);
  const dirs = new Map<number, Map<string, number>>([[ROOT_INODE, new Map()]]);
  const dirParents = new Map<number, number>([[ROOT_INODE, ROOT_INODE]]);
  let next = ROOT_INODE + 1;
  for (const d of [...dirPaths].sort()) {
    ids.set(d, next);
    dirs.set(next, new Map());
    next++;
  }
  for (const d of [...dirPaths].sort()) {
    const parent = ids.get(posix.dirname(d)) ?? ROOT_INODE;
    dirs.get(parent)?.set(posix.basename(d), ids.get(d) ?? -1);
    dirParents.set(ids.get(d) ?? -1, parent);
  }
  const files = new Map<number, Uint8Array>();
  const byObject = new Map<Uint8Array, number>();
  for (const [abs, key] of filePaths) {
    if (dirPaths.has(abs)) throw new Error(`image: ${abs} is both a file and a directory`);
    const bytes = image?.files[key];
    if (!(bytes instanceof Uint8Array)) throw new TypeError(`image: ${abs} is not a Uint8Array`);
    let id = byObject.get(bytes);
    if (id === undefined) {
      id = next++;
      byObject.set(bytes, id);
      files.set(id, bytes);
    }
    dirs.get(ids.get(posix.dirname(abs)) ?? ROOT_INODE)?.set(posix.basename(abs), id);
  }
  return { dirs, files, dirParents, nextInode: next };
}

/**
 * Walks a directory tree from the root and lists it as an image. `entriesOf` gives a directory's
 * entries, `bytesOf` a file's bytes (called once per file, so hard links share one object).
 * Unreachable inodes are left out; a cycle (impossible in a real tree) is cut.
 */
export function walkImage(
  entriesOf: (dir: number) => ReadonlyMap<string, number> | undefined,
  isDir: (inode: number) => boolean,
  bytesOf: (file: number) => Uint8Array,
): DiskImage {
  const dirs: string[] = [];
  const files: Record<string, Uint8Array> = {};
  const seenFiles = new Map<number, Uint8Array>();
  const seenDirs = new Set<number>([ROOT_INODE]);
  const visit = (dir: number, prefix: string): void => {
    const entries = entriesOf(dir);
    if (entries === undefined) return;
    for (const name of [...entries.keys()].sort()) {
      const inode = entries.get(name) ?? -1;
      const full = prefix + name;
      if (isDir(inode)) {
        if (seenDirs.has(inode)) continue;
        seenDirs.add(inode);
        dirs.push(full);
        visit(inode, full + '/');
      } else {
        let bytes = seenFiles.get(inode);
        if (bytes === undefined) {
          bytes = bytesOf(inode);
          seenFiles.set(inode, bytes);
        }
        files[full] = bytes;
      }
    }
  };
  visit(ROOT_INODE, '/');
  return { dirs, files };
}

class Machine {
  readonly nodes = new Map<number, Node>();
  nextInode: number;
  readonly trace: TraceEntry[] | null;
  /** inode → the handle holding its lock. */
  readonly locks = new Map<number, object>();
  readonly initial: DiskImage;
  processes = 0;

  constructor(image: DiskImage | undefined, record: boolean) {
    this.initial = image ?? { dirs: [], files: {} };
    const loaded = loadImage(image);
    for (const [id, entries] of loaded.dirs) {
      this.nodes.set(id, {
        kind: 'dir',
        id,
        current: entries,
        durable: new Map(entries),
        dirty: false,
        parent: loaded.dirParents.get(id) ?? ROOT_INODE,
      });
    }
    for (const [id, bytes] of loaded.files) {
      const durable = Content.fromBytes(bytes);
      this.nodes.set(id, { kind: 'file', id, durable, current: durable.clone(), dirty: false });
    }
    this.nextInode = loaded.nextInode;
    this.trace = record ? [] : null;
  }

  record(entry: Omit<TraceEntry, 'index'>): number {
    if (this.trace === null) return -1;
    const index = this.trace.length;
    this.trace.push({ index, ...entry });
    return index;
  }

  dir(id: number): DirNode {
    const node = this.nodes.get(id);
    if (node === undefined || node.kind !== 'dir') throw new Error(`inode ${id} is not a directory`);
    return node;
  }

  image(which: 'current' | 'durable'): DiskImage {
    return walkImage(
      (id) => {
        const node = this.nodes.get(id);
        return node?.kind === 'dir' ? node[which] : undefined;
      },
      (id) => this.nodes.get(id)?.kind === 'dir',
      (id) => {
        const node = this.nodes.get(id);
        return node?.kind === 'file' ? node[which].toBytes() : new Uint8Array(0);
      },
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Errors.

const MESSAGES: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EEXIST: 'file already exists',
  EISDIR: 'illegal operation on a directory',
  ENOTDIR: 'not a directory',
  ENOTEMPTY: 'directory not empty',
  EBADF: 'bad file descriptor',
  EINVAL: 'invalid argument',
  EPERM: 'operation not permitted',
  ESEVERED: 'the process was killed (sever)',
  EIO: 'i/o error',
  ENOSPC: 'no space left on device',
  EDQUOT: 'disk quota exceeded',
};

/** A Node-style errno error (its type spelled out, so that the published types need no @types/node). */
export function errnoError(code: string, syscall: string, p: string, note?: string): Error & { code: string; syscall: string; path: string } {
  const err: NodeJS.ErrnoException = new Error(
    `${code}: ${MESSAGES[code] ?? 'error'}, ${syscall} '${p}'${note === undefined ? '' : ` (${note})`}`,
  );
  err.code = code;
  err.syscall = syscall;
  err.path = p;
  return err as Error & { code: string; syscall: string; path: string };
}

// ---------------------------------------------------------------------------------------------
// MemoryFs.

export interface MemoryFsOptions {
  /** The disk to start from (default: empty, only '/'). Its bytes are never written. */
  image?: DiskImage;
  /** Record the trace (default true). Off, writes skip the private copy of their bytes. */
  trace?: boolean;
}

const SHARE = Symbol('share a machine');

/** A simulated machine's file system, as one process sees it. See the module header. */
export class MemoryFs implements FileSystem {
  readonly #machine: Machine;
  readonly #process: number;
  #severed = false;
  readonly #handles = new Set<MemoryHandle>();

  constructor(options: MemoryFsOptions = {}) {
    const shared = (options as { [SHARE]?: Machine })[SHARE];
    this.#machine = shared ?? new Machine(options.image, options.trace ?? true);
    this.#process = this.#machine.processes++;
  }

  /** Another process on the same machine: same files, same page cache, its own handles. */
  newProcess(): MemoryFs {
    return new MemoryFs({ [SHARE]: this.#machine } as MemoryFsOptions);
  }

  /** Every call and marker so far, in order (empty when recording is off). */
  get trace(): readonly TraceEntry[] {
    return this.#machine.trace ?? [];
  }

  /** The image the machine started from (what a replay of `trace` starts from). */
  get initialImage(): DiskImage {
    return this.#machine.initial;
  }

  /** Inserts a marker in the trace (for example "append 17 acknowledged"); answers its index. */
  mark(label: string, data?: unknown): number {
    return this.#machine.record({ kind: 'mark', process: this.#process, path: '', label, detail: data });
  }

  /** Kills this process view: every later call rejects with 'ESEVERED'; its locks are released. */
  sever(): void {
    if (this.#severed) return;
    this.#severed = true;
    for (const handle of this.#handles) handle.die();
    this.#handles.clear();
    this.#machine.record({ kind: 'sever', process: this.#process, path: '' });
  }

  get severed(): boolean {
    return this.#severed;
  }

  /** Everything written so far, synced or not: what a process started after a kill sees. */
  currentImage(): DiskImage {
    return this.#machine.image('current');
  }

  /** Only what was synced: what a power loss that kept nothing unsynced leaves. */
  durableImage(): DiskImage {
    return this.#machine.image('durable');
  }

  #live(syscall: string, p: string): void {
    if (this.#severed) throw errnoError('ESEVERED', syscall, p);
  }

  #fail(kind: FsCallKind, p: string, err: NodeJS.ErrnoException, extra: Partial<TraceEntry> = {}): never {
    this.#machine.record({ kind, process: this.#process, path: p, ...extra, error: String(err.code) });
    throw err;
  }

  /** Looks a normalized path up in the current tree. */
  #lookup(abs: string, syscall: string): Node | undefined {
    const m = this.#machine;
    let node: Node = m.dir(ROOT_INODE);
    if (abs === '/') return node;
    for (const part of abs.slice(1).split('/')) {
      if (node.kind !== 'dir') throw errnoError('ENOTDIR', syscall, abs);
      const id = node.current.get(part);
      if (id === undefined) return undefined;
      const next = m.nodes.get(id);
      if (next === undefined) return undefined;
      node = next;
    }
    return node;
  }

  /** The directory that holds `abs` and the entry name; ENOENT/ENOTDIR when the parent is missing. */
  #parentOf(abs: string, syscall: string): { dir: DirNode; name: string } {
    if (abs === '/') throw errnoError('EPERM', syscall, abs);
    const parent = this.#lookup(posix.dirname(abs), syscall);
    if (parent === undefined) throw errnoError('ENOENT', syscall, abs);
    if (parent.kind !== 'dir') throw errnoError('ENOTDIR', syscall, abs);
    return { dir: parent, name: posix.basename(abs) };
  }

  #change(dir: DirNode, name: string, inode: number | null, isDir?: boolean): EntryChange {
    if (inode === null) dir.current.delete(name);
    else dir.current.set(name, inode);
    dir.dirty = true;
    return isDir === undefined ? { dir: dir.id, name, inode } : { dir: dir.id, name, inode, isDir };
  }

  async open(p: string, mode: OpenMode): Promise<FileHandle> {
    const abs = normalizePath(p);
    this.#live('open', abs);
    const m = this.#machine;
    try {
      const { dir, name } = this.#parentOf(abs, 'open');
      const existingId = dir.current.get(name);
      let node = existingId === undefined ? undefined : m.nodes.get(existingId);
      let changes: EntryChange[] | undefined;
      if (node === undefined) {
        if (mode === 'read' || mode === 'write') throw errnoError('ENOENT', 'open', abs);
        const id = m.nextInode++;
        const fresh: FileNode = { kind: 'file', id, current: Content.empty(), durable: Content.empty(), dirty: false };
        m.nodes.set(id, fresh);
        changes = [this.#change(dir, name, id, false)];
        node = fresh;
      } else if (mode === 'create-exclusive') {
        throw errnoError('EEXIST', 'open', abs);
      }
      if (node.kind === 'dir') throw errnoError('EISDIR', 'open', abs);
      m.record({
        kind: 'open',
        process: this.#process,
        path: abs,
        inode: node.id,
        mode,
        ...(changes === undefined ? {} : { changes }),
      });
      const handle = new MemoryHandle(
        { machine: m, process: this.#process, forget: (h) => this.#handles.delete(h) },
        abs,
        node,
        mode !== 'read',
      );
      this.#handles.add(handle);
      return handle;
    } catch (err) {
      return this.#fail('open', abs, err as NodeJS.ErrnoException, { mode });
    }
  }

  async readdir(p: string): Promise<string[]> {
    return (await this.readdirEntries(p)).map((e) => e.name);
  }

  async readdirEntries(p: string): Promise<DirEntry[]> {
    const abs = normalizePath(p);
    this.#live('scandir', abs);
    try {
      const node = this.#lookup(abs, 'scandir');
      if (node === undefined) throw errnoError('ENOENT', 'scandir', abs);
      if (node.kind !== 'dir') throw errnoError('ENOTDIR', 'scandir', abs);
      this.#machine.record({ kind: 'readdir', process: this.#process, path: abs, inode: node.id });
      return [...node.current].map(([name, id]) => ({ name, kind: this.#machine.nodes.get(id)?.kind === 'dir' ? 'directory' : 'file' }));
    } catch (err) {
      return this.#fail('readdir', abs, err as NodeJS.ErrnoException);
    }
  }

  async mkdir(p: string): Promise<void> {
    const abs = normalizePath(p);
    this.#live('mkdir', abs);
    const m = this.#machine;
    try {
      const changes: EntryChange[] = [];
      let dir = m.dir(ROOT_INODE);
      let at = '';
      for (const part of abs === '/' ? [] : abs.slice(1).split('/')) {
        at += '/' + part;
        const id = dir.current.get(part);
        const node = id === undefined ? undefined : m.nodes.get(id);
        if (node === undefined) {
          const fresh: DirNode = {
            kind: 'dir',
            id: m.nextInode++,
            current: new Map(),
            durable: new Map(),
            dirty: false,
            parent: dir.id,
          };
          m.nodes.set(fresh.id, fresh);
          changes.push(this.#change(dir, part, fresh.id, true));
          dir = fresh;
        } else if (node.kind === 'dir') {
          dir = node;
        } else {
          throw errnoError(at === abs ? 'EEXIST' : 'ENOTDIR', 'mkdir', abs);
        }
      }
      m.record({ kind: 'mkdir', process: this.#process, path: abs, inode: dir.id, ...(changes.length > 0 ? { changes } : {}) });
    } catch (err) {
      this.#fail('mkdir', abs, err as NodeJS.ErrnoException);
    }
  }

  async rename(from: string, to: string): Promise<void> {
    const src = normalizePath(from);
    const dst = normalizePath(to);
    this.#live('rename', src);
    const m = this.#machine;
    try {
      const a = this.#parentOf(src, 'rename');
      const b = this.#parentOf(dst, 'rename');
      const id = a.dir.current.get(a.name);
      const node = id === undefined ? undefined : m.nodes.get(id);
      if (node === undefined) throw errnoError('ENOENT', 'rename', src);
      const targetId = b.dir.current.get(b.name);
      const target = targetId === undefined ? undefined : m.nodes.get(targetId);
      if (targetId === node.id) {
        // POSIX: renaming a name onto another name of the same file does nothing.
        m.record({ kind: 'rename', process: this.#process, path: src, to: dst, inode: node.id });
        return;
      }
      if (target !== undefined) {
        if (node.kind === 'file' && target.kind === 'dir') throw errnoError('EISDIR', 'rename', dst);
        if (node.kind === 'dir' && target.kind === 'file') throw errnoError('ENOTDIR', 'rename', dst);
        if (target.kind === 'dir' && target.current.size > 0) throw errnoError('ENOTEMPTY', 'rename', dst);
      }
      if (node.kind === 'dir') {
        for (let d: DirNode = b.dir; ; d = m.dir(d.parent)) {
          if (d.id === node.id) throw errnoError('EINVAL', 'rename', src, 'a directory cannot move into itself');
          if (d.id === ROOT_INODE) break;
        }
        node.parent = b.dir.id;
      }
      // A rename is an unlink of the old name plus a link of the new one (which replaces the
      // target atomically); each is a change of its directory, durable by that directory's sync.
      const changes = [this.#change(a.dir, a.name, null), this.#change(b.dir, b.name, node.id, node.kind === 'dir')];
      m.record({ kind: 'rename', process: this.#process, path: src, to: dst, inode: node.id, changes });
    } catch (err) {
      this.#fail('rename', src, err as NodeJS.ErrnoException, { to: dst });
    }
  }

  async link(from: string, to: string): Promise<void> {
    const src = normalizePath(from);
    const dst = normalizePath(to);
    this.#live('link', src);
    const m = this.#machine;
    try {
      const node = this.#lookup(src, 'link');
      if (node === undefined) throw errnoError('ENOENT', 'link', src);
      if (node.kind === 'dir') throw errnoError('EPERM', 'link', src);
      const b = this.#parentOf(dst, 'link');
      if (b.dir.current.has(b.name)) throw errnoError('EEXIST', 'link', dst);
      const changes = [this.#change(b.dir, b.name, node.id, false)];
      m.record({ kind: 'link', process: this.#process, path: src, to: dst, inode: node.id, changes });
    } catch (err) {
      this.#fail('link', src, err as NodeJS.ErrnoException, { to: dst });
    }
  }

  async unlink(p: string): Promise<void> {
    const abs = normalizePath(p);
    this.#live('unlink', abs);
    try {
      const { dir, name } = this.#parentOf(abs, 'unlink');
      const id = dir.current.get(name);
      const node = id === undefined ? undefined : this.#machine.nodes.get(id);
      if (node === undefined) throw errnoError('ENOENT', 'unlink', abs);
      if (node.kind === 'dir') throw errnoError('EISDIR', 'unlink', abs);
      const changes = [this.#change(dir, name, null)];
      this.#machine.record({ kind: 'unlink', process: this.#process, path: abs, inode: node.id, changes });
    } catch (err) {
      this.#fail('unlink', abs, err as NodeJS.ErrnoException);
    }
  }

  async rmdir(p: string): Promise<void> {
    const abs = normalizePath(p);
    this.#live('rmdir', abs);
    try {
      const { dir, name } = this.#parentOf(abs, 'rmdir');
      const id = dir.current.get(name);
      const node = id === undefined ? undefined : this.#machine.nodes.get(id);
      if (node === undefined) throw errnoError('ENOENT', 'rmdir', abs);
      if (node.kind !== 'dir') throw errnoError('ENOTDIR', 'rmdir', abs);
      if (node.current.size > 0) throw errnoError('ENOTEMPTY', 'rmdir', abs);
      const changes = [this.#change(dir, name, null)];
      this.#machine.record({ kind: 'rmdir', process: this.#process, path: abs, inode: node.id, changes });
    } catch (err) {
      this.#fail('rmdir', abs, err as NodeJS.ErrnoException);
    }
  }

  async stat(p: string): Promise<FileStat | null> {
    const abs = normalizePath(p);
    this.#live('stat', abs);
    try {
      const node = this.#lookup(abs, 'stat');
      this.#machine.record({ kind: 'stat', process: this.#process, path: abs, ...(node === undefined ? {} : { inode: node.id }) });
      if (node === undefined) return null;
      return node.kind === 'dir' ? { size: 0, isDirectory: true } : { size: node.current.size, isDirectory: false };
    } catch (err) {
      return this.#fail('stat', abs, err as NodeJS.ErrnoException);
    }
  }

  /** As `stat`: this file system has no symbolic links, so every entry is itself. */
  async lstat(p: string): Promise<EntryStat | null> {
    const abs = normalizePath(p);
    this.#live('lstat', abs);
    try {
      const node = this.#lookup(abs, 'lstat');
      this.#machine.record({ kind: 'lstat', process: this.#process, path: abs, ...(node === undefined ? {} : { inode: node.id }) });
      if (node === undefined) return null;
      return node.kind === 'dir' ? { size: 0, isDirectory: true, isSymbolicLink: false } : { size: node.current.size, isDirectory: false, isSymbolicLink: false };
    } catch (err) {
      return this.#fail('lstat', abs, err as NodeJS.ErrnoException);
    }
  }

  async syncDir(p: string): Promise<void> {
    const abs = normalizePath(p);
    this.#live('fsync', abs);
    try {
      const node = this.#lookup(abs, 'open');
      if (node === undefined) throw errnoError('ENOENT', 'open', abs);
      if (node.kind !== 'dir') throw errnoError('ENOTDIR', 'open', abs);
      if (node.dirty) {
        node.durable = new Map(node.current);
        node.dirty = false;
      }
      this.#machine.record({ kind: 'syncDir', process: this.#process, path: abs, inode: node.id });
    } catch (err) {
      this.#fail('syncDir', abs, err as NodeJS.ErrnoException);
    }
  }
}

/** What a handle needs from the process view that opened it. */
interface HandleContext {
  readonly machine: Machine;
  readonly process: number;
  forget(handle: MemoryHandle): void;
}

class MemoryHandle implements FileHandle {
  readonly path: string;
  readonly #fs: HandleContext;
  readonly #node: FileNode;
  readonly #writable: boolean;
  #closed = false;
  #dead = false;

  constructor(fs: HandleContext, p: string, node: FileNode, writable: boolean) {
    this.#fs = fs;
    this.path = p;
    this.#node = node;
    this.#writable = writable;
  }

  /** The process died: the handle is gone and its lock released. */
  die(): void {
    this.#dead = true;
    this.#closed = true;
    this.#release();
  }

  #release(): void {
    const locks = this.#fs.machine.locks;
    if (locks.get(this.#node.id) === this) locks.delete(this.#node.id);
  }

  #check(syscall: string, write = false): void {
    if (this.#dead) throw errnoError('ESEVERED', syscall, this.path);
    if (this.#closed) throw errnoError('EBADF', syscall, this.path);
    if (write && !this.#writable) throw errnoError('EBADF', syscall, this.path, 'opened read-only');
  }

  #record(kind: FsCallKind, extra: Partial<TraceEntry> = {}): void {
    this.#fs.machine.record({ kind, process: this.#fs.process, path: this.path, inode: this.#node.id, ...extra });
  }

  #guard<T>(kind: FsCallKind, syscall: string, write: boolean, body: () => T): T {
    try {
      this.#check(syscall, write);
    } catch (err) {
      this.#record(kind, { error: String((err as NodeJS.ErrnoException).code) });
      throw err;
    }
    return body();
  }

  async read(into: Uint8Array, position: number): Promise<number> {
    return this.#guard('read', 'read', false, () => {
      this.#record('read', { offset: position, length: into.length });
      return this.#node.current.read(into, position);
    });
  }

  async readv(into: readonly Uint8Array[], position: number): Promise<number> {
    let length = 0;
    for (const b of into) length += b.length;
    return this.#guard('read', 'readv', false, () => {
      this.#record('read', { offset: position, length });
      let done = 0;
      for (const b of into) {
        const n = this.#node.current.read(b, position + done);
        done += n;
        if (n < b.length) break;
      }
      return done;
    });
  }

  async write(data: Uint8Array, position: number): Promise<void> {
    this.#guard('write', 'write', true, () => this.#write('write', data, position));
  }

  async writev(chunks: readonly Uint8Array[], position: number): Promise<void> {
    this.#guard('writev', 'writev', true, () => {
      let total = 0;
      for (const c of chunks) total += c.length;
      const joined = new Uint8Array(total);
      let at = 0;
      for (const c of chunks) {
        joined.set(c, at);
        at += c.length;
      }
      this.#write('writev', joined, position, true);
    });
  }

  #write(kind: 'write' | 'writev', data: Uint8Array, position: number, owned = false): void {
    if (!Number.isSafeInteger(position) || position < 0) throw errnoError('EINVAL', kind, this.path);
    const recording = this.#fs.machine.trace !== null;
    const bytes = recording && !owned ? data.slice() : data;
    this.#record(kind, { offset: position, length: data.length, ...(recording ? { data: bytes } : {}) });
    this.#node.current.write(bytes, position);
    this.#node.dirty = true;
  }

  async datasync(): Promise<void> {
    this.#guard('datasync', 'fdatasync', false, () => this.#sync('datasync'));
  }

  async sync(): Promise<void> {
    this.#guard('sync', 'fsync', false, () => this.#sync('sync'));
  }

  #sync(kind: 'datasync' | 'sync'): void {
    const node = this.#node;
    if (node.dirty) {
      node.durable = node.current;
      node.current = node.current.clone();
      node.dirty = false;
    }
    this.#record(kind);
  }

  async truncate(size: number): Promise<void> {
    this.#guard('truncate', 'ftruncate', true, () => {
      if (!Number.isSafeInteger(size) || size < 0) throw errnoError('EINVAL', 'ftruncate', this.path);
      this.#record('truncate', { size });
      this.#node.current.truncate(size);
      this.#node.dirty = true;
    });
  }

  async size(): Promise<number> {
    return this.#guard('size', 'fstat', false, () => {
      this.#record('size');
      return this.#node.current.size;
    });
  }

  async tryLock(): Promise<boolean> {
    return this.#guard('lock', 'flock', false, () => {
      const locks = this.#fs.machine.locks;
      const holder = locks.get(this.#node.id);
      const locked = holder === undefined || holder === this;
      if (locked) locks.set(this.#node.id, this);
      this.#record('lock', { locked });
      return locked;
    });
  }

  async unlock(): Promise<void> {
    this.#guard('unlock', 'flock', false, () => {
      this.#release();
      this.#record('unlock');
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#release();
    this.#fs.forget(this);
    this.#record('close');
  }
}
