// What every offline checker of `seglog verify` / `seglog inspect` shares.
//
// Owns: `Finding` (an error or a warning at a path and offset), `VerifyContext` (the read-only file
// system, the findings, the byte ranges no check covers, and what each checker describes for
// inspect), and `ReadOnlyFs`, the FileSystem wrapper that makes "verify never writes" a property of
// the code instead of a promise: every call that could change a disk (an open for writing, a write,
// a truncate, a sync, a directory change, a lock) throws before it reaches the layer below.
// Guarantees: reads are bounded (`readBounded` refuses a file longer than the caller's bound before
// it allocates); a checker reports what it finds and goes on, it never throws at the first problem.

import type { EntryStat, FileHandle, FileStat, FileSystem, OpenMode, SyncWhere } from '../../fs/types.js';

/**
 * An `error` is damage a store cannot read past (its open or a read fails with CORRUPT, or
 * acknowledged data is lost or wrong). A `warning` is damage or a leftover the store tolerates:
 * what a crash can leave (a torn standby cell slot, a torn tail after the last durable record, a
 * leftover temporary file), or derived data that is rebuilt (an index file); it may also be a
 * flipped byte that happens to look like one of those.
 */
export type Severity = 'error' | 'warning';

export interface Finding {
  readonly severity: Severity;
  readonly path: string;
  /** Byte offset in the file, when the finding is about one place in it. */
  readonly offset?: number;
  readonly message: string;
}

/** A byte range of a file that no check covers, and why a change there cannot matter. */
export interface UncheckedRange {
  readonly path: string;
  readonly from: number;
  readonly to: number;
  readonly why: string;
}

/** What a checker found a file or directory to be, for `seglog inspect` (JSON-able). */
export interface Described {
  readonly kind: string;
  readonly path: string;
  readonly [key: string]: unknown;
}

export class VerifyError extends Error {}

/** A FileSystem that only reads: anything else throws a VerifyError (a bug in verify). */
export class ReadOnlyFs implements FileSystem {
  readonly #inner: FileSystem;

  constructor(inner: FileSystem) {
    this.#inner = inner;
  }

  #refuse(what: string, p: string): never {
    throw new VerifyError(`seglog verify refused to ${what} ${p}: it never changes a data directory`);
  }

  async open(p: string, mode: OpenMode): Promise<FileHandle> {
    if (mode !== 'read') this.#refuse(`open (${mode})`, p);
    return new ReadOnlyHandle(await this.#inner.open(p, 'read'));
  }
  readdir(dir: string): Promise<string[]> {
    return this.#inner.readdir(dir);
  }
  stat(p: string): Promise<FileStat | null> {
    return this.#inner.stat(p);
  }
  lstat(p: string): Promise<EntryStat | null> {
    return this.#inner.lstat(p);
  }
  async mkdir(dir: string): Promise<void> {
    this.#refuse('create the directory', dir);
  }
  async rename(from: string): Promise<void> {
    this.#refuse('rename', from);
  }
  async link(from: string): Promise<void> {
    this.#refuse('link', from);
  }
  async unlink(p: string): Promise<void> {
    this.#refuse('unlink', p);
  }
  async rmdir(dir: string): Promise<void> {
    this.#refuse('remove the directory', dir);
  }
  async syncDir(dir: string): Promise<void> {
    this.#refuse('sync the directory', dir);
  }
}

class ReadOnlyHandle implements FileHandle {
  readonly #inner: FileHandle;
  readonly path: string;

  constructor(inner: FileHandle) {
    this.#inner = inner;
    this.path = inner.path;
  }
  read(into: Uint8Array, position: number, where?: SyncWhere): Promise<number> {
    return this.#inner.read(into, position, where);
  }
  readv(into: readonly Uint8Array[], position: number): Promise<number> {
    return this.#inner.readv(into, position);
  }
  size(): Promise<number> {
    return this.#inner.size();
  }
  close(): Promise<void> {
    return this.#inner.close();
  }
  #refuse(what: string): never {
    throw new VerifyError(`seglog verify refused to ${what} ${this.path}: it never changes a data directory`);
  }
  async write(): Promise<void> {
    this.#refuse('write');
  }
  async writev(): Promise<void> {
    this.#refuse('write');
  }
  async datasync(): Promise<void> {
    this.#refuse('sync');
  }
  async sync(): Promise<void> {
    this.#refuse('sync');
  }
  async truncate(): Promise<void> {
    this.#refuse('truncate');
  }
  async tryLock(): Promise<boolean> {
    this.#refuse('lock');
  }
  async unlock(): Promise<void> {
    this.#refuse('unlock');
  }
}

export interface VerifyCounts {
  files: number;
  bytes: number;
  cells: number;
  logs: number;
  segments: number;
  records: number;
  indexes: number;
  payloads: number;
  payloadBytes: number;
  refFiles: number;
  raftGroups: number;
  hostRealms: number;
  hostStripeFiles: number;
  /** Stripe records (batches, fences, seals) from the checkpoints on. */
  hostRecords: number;
  hostHomes: number;
  hostRowFiles: number;
  /** Live rows in the homes' row files. */
  hostRows: number;
  [key: string]: number;
}

export class VerifyContext {
  readonly fs: FileSystem;
  readonly findings: Finding[] = [];
  readonly unchecked: UncheckedRange[] = [];
  readonly described: Described[] = [];
  /** Files no checker recognised (listed, not checked). */
  readonly unknown: string[] = [];
  readonly counts: VerifyCounts = {
    files: 0,
    bytes: 0,
    cells: 0,
    logs: 0,
    segments: 0,
    records: 0,
    indexes: 0,
    payloads: 0,
    payloadBytes: 0,
    refFiles: 0,
    raftGroups: 0,
    hostRealms: 0,
    hostStripeFiles: 0,
    hostRecords: 0,
    hostHomes: 0,
    hostRowFiles: 0,
    hostRows: 0,
  };
  /** How many records of each log inspect prints (0: none). */
  readonly recordPreview: number;
  /** Payload stores found, by directory (for cross-store checks such as Raft → payload references). */
  readonly payloadStores = new Map<string, Set<string>>();
  /** Checks to run once the whole tree is walked (cross-store references). */
  readonly deferred: (() => Promise<void>)[] = [];

  constructor(fs: FileSystem, options: { recordPreview?: number } = {}) {
    this.fs = new ReadOnlyFs(fs);
    this.recordPreview = options.recordPreview ?? 0;
  }

  error(path: string, message: string, offset?: number): void {
    this.findings.push(offset === undefined ? { severity: 'error', path, message } : { severity: 'error', path, offset, message });
  }

  warning(path: string, message: string, offset?: number): void {
    this.findings.push(offset === undefined ? { severity: 'warning', path, message } : { severity: 'warning', path, offset, message });
  }

  ignore(path: string, from: number, to: number, why: string): void {
    if (to > from) this.unchecked.push({ path, from, to, why });
  }

  describe(d: Described): void {
    this.described.push(d);
  }

  /** Counts a file as seen (once per file). */
  sawFile(bytes: number): void {
    this.counts.files++;
    this.counts.bytes += bytes;
  }

  /** Reads a whole file of at most `bound` bytes; null (with an error finding) when it is longer or unreadable. */
  async readBounded(path: string, bound: number, what: string): Promise<Uint8Array | null> {
    let h: FileHandle;
    try {
      h = await this.fs.open(path, 'read');
    } catch (err) {
      this.error(path, `cannot open ${what}: ${messageOf(err)}`);
      return null;
    }
    try {
      const size = await h.size();
      if (size > bound) {
        this.error(path, `${what} is ${size} bytes, more than the ${bound} its format allows`);
        return null;
      }
      const bytes = new Uint8Array(size);
      const n = await h.read(bytes, 0);
      return n === size ? bytes : bytes.subarray(0, n);
    } catch (err) {
      if (err instanceof VerifyError) throw err;
      this.error(path, `cannot read ${what}: ${messageOf(err)}`);
      return null;
    } finally {
      await h.close().catch(() => undefined);
    }
  }
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Offset details of a SeglogError, when it has them. */
export function offsetOf(err: unknown): number | undefined {
  const d = (err as { details?: { offset?: unknown } } | null)?.details;
  return typeof d?.offset === 'number' ? d.offset : undefined;
}

/** A short readable preview of bytes: UTF-8 text when it is printable, else hex. */
export function preview(bytes: Uint8Array, max = 48): string {
  const head = bytes.subarray(0, max);
  const text = Buffer.from(head).toString('utf8');
  const printable = /^[\x20-\x7e\u00a0-\uffff\t\n]*$/.test(text) && !text.includes('\ufffd');
  const body = printable ? JSON.stringify(text) : Buffer.from(head).toString('hex');
  return bytes.length > max ? `${body}… (${bytes.length} bytes)` : body;
}
