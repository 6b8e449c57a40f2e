// The file-system layer: the only way seglog touches a disk.
//
// Owns: the `FileSystem` and `FileHandle` interfaces. Every write path of every store goes through
// them, so that a test can put a layer underneath that fails chosen calls (lib/fs/faulty.ts) or
// records every call and builds the disk states a crash may leave (lib/fs/memory.ts).
//
// Contract of every implementation:
// - Errors are Node-style: an Error with an errno `code` ('ENOENT', 'EEXIST', 'EIO', 'ENOSPC',
//   ...). Layers above translate them into SeglogErrors (lib/errors.ts `fromIo`).
// - `write`/`writev` write every byte or throw; a short write is retried inside the layer, so a
//   caller never sees one. A throw may leave any prefix of the bytes written.
// - Nothing is durable until synced: file contents by `datasync`/`sync` of that file, directory
//   entries (create, rename, link, unlink, mkdir, rmdir) by `syncDir` of the directory holding them.
// - Paths are absolute or relative to the process's working directory, '/'-separated.

/** How `open` treats a missing or existing file. */
export type OpenMode =
  /** Read only; the file must exist. */
  | 'read'
  /** Read and write; the file must exist. */
  | 'write'
  /** Read and write; created empty when missing, kept as it is when present. */
  | 'create'
  /** Read and write; must not exist (O_EXCL): 'EEXIST' when it does. */
  | 'create-exclusive';

export interface FileStat {
  size: number;
  isDirectory: boolean;
}

/** One entry of a directory listing (FileSystem.readdirEntries). */
export interface DirEntry {
  name: string;
  kind: 'file' | 'directory' | 'symlink' | 'other';
}

/** What `lstat` answers: the entry itself, never what a symbolic link points to. */
export interface EntryStat extends FileStat {
  /** True when the entry is a symbolic link (then `isDirectory` is false, `size` the link's). */
  isSymbolicLink: boolean;
}

/**
 * Which thread waits for a sync or a large write. 'pool' (the default): one of libuv's pool
 * threads, so the event loop goes on meanwhile. 'inline': the calling thread, which blocks for the
 * call's duration. An inline call saves the two thread hand-offs of a pool call (the request to a
 * pool thread, the answer back to the loop); on a virtual machine an idle CPU woken for each costs
 * more than a fast disk's sync or a megabyte's copy into the page cache (docs/host-store.md,
 * "Where a group's sync waits"; docs/crash-safety.md, segmented log, "Where steps 1 and 2 wait"). File
 * systems without threads ignore it.
 */
export type SyncWhere = 'pool' | 'inline';

/** An open file. Positions are byte offsets; there is no implicit file position. */
export interface FileHandle {
  readonly path: string;
  /**
   * Reads up to `into.length` bytes at `position`; answers how many were read (fewer at the end).
   * `where` says which thread waits for the copy (see SyncWhere; a small read is made on the
   * calling thread whatever it says); it changes nothing of what is read.
   */
  read(into: Uint8Array, position: number, where?: SyncWhere): Promise<number>;
  /**
   * Fills the buffers back to back from `position`, as one call where the platform allows (on
   * the pool); answers how many bytes were read in all (fewer only at the end of the file). What
   * `read` into one buffer as long as all of them would read, without the buffer.
   */
  readv(into: readonly Uint8Array[], position: number): Promise<number>;
  /** Writes all of `data` at `position`. */
  write(data: Uint8Array, position: number): Promise<void>;
  /**
   * Writes the chunks back to back from `position`, as one call where the platform allows.
   * `where` says which thread waits for the copy (see SyncWhere); it changes nothing of what is
   * written.
   */
  writev(chunks: readonly Uint8Array[], position: number, where?: SyncWhere): Promise<void>;
  /**
   * fdatasync: the file's data, and the metadata needed to read it back, are durable. `where`
   * says which thread waits for the disk (see SyncWhere); it changes nothing of what is durable.
   */
  datasync(where?: SyncWhere): Promise<void>;
  /** fsync: like datasync, plus the rest of the file's metadata. */
  sync(): Promise<void>;
  /** Sets the file's length (cuts or extends with zeros). Durable only after a sync. */
  truncate(size: number): Promise<void>;
  /** The file's current length. */
  size(): Promise<number>;
  /**
   * Tries to take an exclusive advisory lock on this open file description. Never waits: answers
   * false when another open (in this process or another) holds it. Released by `unlock`, by
   * `close`, and by the kernel when the process dies.
   */
  tryLock(): Promise<boolean>;
  unlock(): Promise<void>;
  /** Closes the handle; releases its lock. Idempotent. */
  close(): Promise<void>;
}

export interface FileSystem {
  open(path: string, mode: OpenMode): Promise<FileHandle>;
  /** Names in a directory ('.' and '..' excluded), in no particular order. 'ENOENT' when missing. */
  readdir(dir: string): Promise<string[]>;
  /**
   * Like `readdir`, with each entry's kind as the directory itself records it (a symbolic link is
   * reported as one, never followed): one call where a `readdir` and an `lstat` per entry would
   * be many. Optional: a caller falls back to `lstat` on a layer without it.
   */
  readdirEntries?(dir: string): Promise<DirEntry[]>;
  /** Creates a directory and any missing parents; succeeds when it exists. */
  mkdir(dir: string): Promise<void>;
  /** Atomically replaces `to` with `from` (POSIX rename). */
  rename(from: string, to: string): Promise<void>;
  /** Adds a second name for a file; 'EEXIST' when `to` exists (rename without overwriting). */
  link(from: string, to: string): Promise<void>;
  unlink(path: string): Promise<void>;
  /** Removes an empty directory. */
  rmdir(dir: string): Promise<void>;
  /** The entry's size and kind, or null when it does not exist (a symbolic link is followed). */
  stat(path: string): Promise<FileStat | null>;
  /**
   * The entry itself, or null when it does not exist: a symbolic link is reported as one, never
   * followed. Stores call it before they list or remove what they expect to be their own
   * leftovers, so that a link planted inside a store directory never leads them outside it.
   */
  lstat(path: string): Promise<EntryStat | null>;
  /** fsync of a directory: its entries' creations, renames and removals so far are durable. */
  syncDir(dir: string): Promise<void>;
}
