// The peers `seglog bench stores` measures seglog against, loaded from bench/peers on demand.
//
// Owns: `loadPeers` and the few typings of better-sqlite3 and lmdb that the peer stores use.
// Guarantees: the peers are never dependencies of seglog: they live in bench/peers (its own
// package.json and package-lock.json; `npm run bench:peers` installs them there) and are loaded
// with `createRequire` rooted in that directory, so nothing in the package resolves them; when
// they are missing, `loadPeers` answers why and how to install them instead of throwing.

import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// ---- better-sqlite3 (version 12), the parts used ----

export interface SqliteStatement {
  run(...params: unknown[]): { changes: number };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
}

export interface SqliteTransaction<A extends unknown[], R> {
  (...args: A): R;
  immediate(...args: A): R;
}

export interface SqliteDatabase {
  pragma(source: string, options?: { simple?: boolean }): unknown;
  exec(sql: string): void;
  prepare(sql: string): SqliteStatement;
  transaction<A extends unknown[], R>(fn: (...args: A) => R): SqliteTransaction<A, R>;
  close(): void;
  readonly open: boolean;
}

export type SqliteConstructor = new (file: string, options?: { timeout?: number }) => SqliteDatabase;

// ---- lmdb (lmdb-js 3), the parts used ----

export type LmdbKey = Buffer | string | number | (string | number)[];

export interface LmdbDatabase {
  get(key: LmdbKey): Buffer | undefined;
  putSync(key: LmdbKey, value: Uint8Array): boolean;
  removeSync(key: LmdbKey): boolean;
  getRange(options: { start?: LmdbKey; end?: LmdbKey; limit?: number; reverse?: boolean }): Iterable<{ key: Buffer; value: Buffer }>;
  getKeys(options: { start?: LmdbKey; end?: LmdbKey; limit?: number; reverse?: boolean }): Iterable<Buffer>;
}

export interface LmdbRoot extends LmdbDatabase {
  openDB(options: { name: string; encoding?: 'binary'; keyEncoding?: 'binary' | 'uint32' | 'ordered-binary' }): LmdbDatabase;
  /** With `separateFlushed`, the promise resolves at commit and carries `flushed` (durable). */
  transaction<R>(fn: () => R): Promise<R> & { flushed?: Promise<unknown> };
  /** Starts a fresh read snapshot (sees commits made since, also by other handles or processes). */
  resetReadTxn(): void;
  close(): Promise<void>;
}

export interface LmdbModule {
  open(options: {
    path: string;
    encoding?: 'binary';
    keyEncoding?: 'binary';
    maxDbs?: number;
    separateFlushed?: boolean;
    overlappingSync?: boolean;
    noSync?: boolean;
    cache?: boolean;
    compression?: boolean;
  }): LmdbRoot;
}

export interface Peers {
  dir: string;
  Sqlite: SqliteConstructor;
  lmdb: LmdbModule;
  versions: { betterSqlite3: string; lmdb: string; sqlite: string };
}

/** Where the peers are installed: bench/peers in the source tree (found from this module upward). */
export function peersDir(): string {
  let at = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const candidate = path.join(at, 'bench', 'peers');
    if (existsSync(path.join(candidate, 'package.json'))) return candidate;
    at = path.dirname(at);
  }
  return path.resolve('bench', 'peers');
}

export const INSTALL_HINT = `install them with \`npm --prefix ${path.relative(process.cwd(), peersDir()) || '.'} ci\` (in a clone: \`npm run bench:peers\`; better-sqlite3 builds from source: about 2 minutes)`;

function versionOf(dir: string, name: string): string {
  const text = readFileSync(path.join(dir, 'node_modules', name, 'package.json'), 'utf8');
  return (JSON.parse(text) as { version: string }).version;
}

/** Loads better-sqlite3 and lmdb from bench/peers; answers why not when they are not installed. */
export function loadPeers(dir = peersDir()): { ok: true; peers: Peers } | { ok: false; missing: string } {
  const manifest = path.join(dir, 'package.json');
  if (!existsSync(manifest)) return { ok: false, missing: `no ${manifest}` };
  const require = createRequire(manifest);
  try {
    const Sqlite = require('better-sqlite3') as SqliteConstructor;
    const lmdb = require('lmdb') as LmdbModule;
    const probe = new Sqlite(':memory:');
    const sqliteVersion = String((probe.prepare('select sqlite_version() as v').get() as { v: string }).v);
    probe.close();
    return {
      ok: true,
      peers: { dir, Sqlite, lmdb, versions: { betterSqlite3: versionOf(dir, 'better-sqlite3'), lmdb: versionOf(dir, 'lmdb'), sqlite: sqliteVersion } },
    };
  } catch (err) {
    return { ok: false, missing: `the peers are not installed in ${dir} (${err instanceof Error ? err.message.split('\n')[0] : String(err)}): ${INSTALL_HINT}` };
  }
}
