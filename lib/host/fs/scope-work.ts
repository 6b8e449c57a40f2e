// What a checkpoint round does to one scope: the scope's state moved forward by the records the
// round applies, kept in memory while the scope is small (it goes to the next scope table inline)
// or in the scope's home once it outgrows the table.
//
// Owns: `ScopeWork` (one per scope a round touches) and the rule that moves a scope from the table
// to a home: once its entry — name, commit id, head and rows — would pass INLINE_SCOPE_BYTES, its
// rows go to a home (home.ts) and stay there while the scope lives; a deleted scope's home is
// given up (the round removes it after its checkpoint cell) and its tombstone goes back to the
// table. Guarantees: the parts of an update apply in the one order every load uses (truncate,
// drop, append, head: view.ts `applyUpdate`), so the state a round writes is the state loads showed;
// memory per small scope is bounded by INLINE_SCOPE_BYTES plus the rows of one update.

import type { FileSystem } from '../../fs/types.js';
import type { ScopeKind } from '../types.js';
import { encodeEntry, entryBytes, INLINE_SCOPE_BYTES, KIND_CODE, type TableEntry } from './format.js';
import { DirSyncs, HomeBuilder, type HomeCell } from './home.js';

/** An update's parts, as a round reads them from its record. */
export interface UpdateParts {
  previous: number | null;
  next: number;
  del: boolean;
  truncateAfter?: number;
  dropBefore?: number;
}

/** A small scope's state in memory. */
class InlineState {
  version: number;
  commitId: string;
  deleted: boolean;
  first: number;
  head: Uint8Array;
  rows: Uint8Array[];
  #rowBytes: number;

  constructor(ent: TableEntry | null) {
    this.version = ent?.version ?? 0;
    this.commitId = ent?.commitId ?? '';
    this.deleted = ent?.deleted ?? false;
    this.first = ent?.first ?? 0;
    this.head = ent?.copyHead() ?? new Uint8Array(0);
    this.rows = ent === null ? [] : ent.copyRows();
    this.#rowBytes = 0;
    for (const r of this.rows) this.#rowBytes += 4 + r.length;
    if (ent?.deleted === true) this.first = ent.end;
  }

  get end(): number {
    return this.first + this.rows.length;
  }

  /** The bytes the entry would take, with `nameBytes` and `extra` more bytes of rows. */
  bytes(nameBytes: number, extra = 0): number {
    return entryBytes(nameBytes, Buffer.byteLength(this.commitId), this.head.length, []) + this.#rowBytes + extra;
  }

  apply(u: UpdateParts, commitId: string, rows: readonly Uint8Array[], head: Uint8Array | null): void {
    if (u.previous === null) {
      this.deleted = false;
      this.first = 0;
      this.rows = [];
      this.#rowBytes = 0;
      this.head = new Uint8Array(0);
    }
    if (u.del) {
      this.deleted = true;
      this.first = this.end;
      this.rows = [];
      this.#rowBytes = 0;
      this.head = new Uint8Array(0);
    } else {
      if (u.truncateAfter !== undefined && u.truncateAfter < this.end) {
        const keep = Math.max(u.truncateAfter, this.first) - this.first;
        for (const r of this.rows.splice(keep)) this.#rowBytes -= 4 + r.length;
      }
      if (u.dropBefore !== undefined && u.dropBefore > this.first) {
        const to = Math.min(u.dropBefore, this.end);
        for (const r of this.rows.splice(0, to - this.first)) this.#rowBytes -= 4 + r.length;
        this.first = to;
      }
      for (const r of rows) {
        this.rows.push(r);
        this.#rowBytes += 4 + r.length;
      }
      if (head !== null) this.head = head;
    }
    this.version = u.next;
    this.commitId = commitId;
  }
}

/** What a round writes for one scope in the next table. */
export interface TableRow {
  kind: number;
  nameBytes: Uint8Array;
  raw: Uint8Array;
  live: boolean;
}

/** One scope a round touches (see the module header). */
export class ScopeWork {
  readonly kind: ScopeKind;
  readonly name: string;
  readonly nameBytes: Uint8Array;
  readonly #fs: FileSystem;
  readonly #realm: string;
  /** The scope's digest (its home's directory name), computed only when a home is needed. */
  readonly #digest: () => string;
  readonly #dirs: DirSyncs;
  #inline: InlineState | null;
  #home: HomeBuilder | null;
  /** The version the scope's base had (the table's entry, or its home's value). */
  readonly baseVersion: number;
  constructor(fs: FileSystem, realm: string, scope: { kind: ScopeKind; name: string }, nameBytes: Uint8Array, digest: () => string, dirs: DirSyncs, ent: TableEntry | null, home: HomeCell | null) {
    this.kind = scope.kind;
    this.name = scope.name;
    this.nameBytes = nameBytes;
    this.#fs = fs;
    this.#realm = realm;
    this.#digest = digest;
    this.#dirs = dirs;
    if (home !== null) {
      this.#inline = null;
      this.#home = new HomeBuilder(fs, realm, scope.kind, scope.name, digest(), home, dirs);
      this.baseVersion = home.value.version;
    } else {
      this.#inline = new InlineState(ent);
      this.#home = null;
      this.baseVersion = ent?.version ?? 0;
    }
  }

  get version(): number {
    return this.#inline !== null ? this.#inline.version : this.#home!.version;
  }

  /** Rows buffered for the home, not written yet. */
  get pending(): number {
    return this.#home?.pending ?? 0;
  }

  /** The work has a home (it started with one, or the scope outgrew the table this round). */
  get homed(): boolean {
    return this.#home !== null;
  }

  /** Applies an update without I/O when it can (answers false, having changed nothing, when `apply` must run). */
  applySync(u: UpdateParts, commitId: string, rows: readonly Uint8Array[], head: Uint8Array | null): boolean {
    const inline = this.#inline;
    if (inline === null) return this.#home!.applySync(u, commitId, rows, head);
    let extra = head?.length ?? 0;
    for (const r of rows) extra += 4 + r.length;
    if (inline.bytes(this.nameBytes.length, extra) > INLINE_SCOPE_BYTES) return false;
    inline.apply(u, commitId, rows, head);
    return true;
  }

  async apply(u: UpdateParts, commitId: string, rows: readonly Uint8Array[], head: Uint8Array | null): Promise<void> {
    const inline = this.#inline;
    if (inline === null) return this.#home!.apply(u, commitId, rows, head);
    inline.apply(u, commitId, rows, head);
    if (!inline.deleted && inline.bytes(this.nameBytes.length) > INLINE_SCOPE_BYTES) {
      // Outgrown: from now on the scope's rows are in its home. A home directory a round cut short
      // left (no table names it) is written over: its first cell write replaces any cell file
      // there (temporary file, rename), and the files the new cell does not name are removed.
      const b = new HomeBuilder(this.#fs, this.#realm, this.kind, this.name, this.#digest(), null, this.#dirs);
      await b.seed(inline);
      this.#home = b;
      this.#inline = null;
    }
  }

  async flush(): Promise<void> {
    await this.#home?.flush();
  }

  /**
   * Makes the scope's home durable when it keeps one (its cell the commit point, as home.ts says)
   * and answers the scope's row of the next table; `giveUp` is set when a deleted scope's home
   * must be removed once the checkpoint cell no longer needs it.
   */
  async finish(cut: number[]): Promise<{ row: TableRow; giveUp: boolean }> {
    const home = this.#home;
    const code = KIND_CODE[this.kind];
    if (home === null) {
      const s = this.#inline!;
      const raw = encodeEntry({
        kind: this.kind,
        nameBytes: this.nameBytes,
        deleted: s.deleted,
        homed: false,
        version: s.version,
        commitId: s.commitId,
        first: s.first,
        end: s.end,
        head: s.deleted ? new Uint8Array(0) : s.head,
        rows: s.deleted ? [] : s.rows,
      });
      return { row: { kind: code, nameBytes: this.nameBytes, raw, live: !s.deleted }, giveUp: false };
    }
    if (home.deleted) {
      // A tombstone goes back to the table: it needs a name, a version and a commit id, not a directory.
      await home.close();
      const end = home.endIndex;
      const raw = encodeEntry({ kind: this.kind, nameBytes: this.nameBytes, deleted: true, homed: false, version: home.version, commitId: home.commitId, first: end, end, head: new Uint8Array(0), rows: [] });
      return { row: { kind: code, nameBytes: this.nameBytes, raw, live: false }, giveUp: true };
    }
    const changed = home.version !== this.baseVersion || home.old === null;
    const value = changed ? await home.finish(cut) : (await home.close(), home.old!);
    const raw = encodeEntry({ kind: this.kind, nameBytes: this.nameBytes, deleted: false, homed: true, version: value.version, commitId: value.commitId, first: 0, end: 0, head: new Uint8Array(0), rows: [] });
    return { row: { kind: code, nameBytes: this.nameBytes, raw, live: true }, giveUp: false };
  }

  async close(): Promise<void> {
    await this.#home?.close();
  }
}
