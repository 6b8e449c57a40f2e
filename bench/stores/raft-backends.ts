// The Raft log peers' storage: one better-sqlite3 database or one LMDB environment per node, with
// the groups of the node inside it.
//
// Owns: `openSqliteRaftNode` and `openLmdbRaftNode`, each answering `{ openGroup(id), close() }`
// whose groups are PeerRaftLog stores (./raft-peer.ts). Guarantees:
// - SQLite: WAL, `synchronous=FULL`; a table per group whose `idx` is the rowid (the fastest shape
//   SQLite offers for an append-only log) and a row per group for vote, committed and the purged
//   id; every write call is one transaction (append: one transaction for the whole batch of
//   entries), durable when it returns. better-sqlite3 is synchronous, so appends never overlap.
// - LMDB: one environment, sync on (`overlappingSync: false`: the sync happens inside the commit);
//   keys are the group number (4 bytes) and the index (8 bytes, big-endian); every write call is
//   one `transaction`, and lmdb-js commits the transactions queued in one event turn together,
//   with one sync (its group commit: what lets 64 appends in flight share a sync).
// These are benchmark peers, not part of seglog.

import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { PeerRaftLog, type RaftBackend } from './raft-peer.js';
import type { LmdbDatabase, LmdbModule, LmdbRoot, SqliteConstructor, SqliteDatabase, SqliteStatement } from './peers.js';

export interface PeerRaftNode {
  openGroup(id: string): Promise<PeerRaftLog>;
  close(): Promise<void>;
}

// ---- SQLite ----

export async function openSqliteRaftNode(Sqlite: SqliteConstructor, dir: string): Promise<PeerRaftNode> {
  mkdirSync(dir, { recursive: true });
  const db: SqliteDatabase = new Sqlite(path.join(dir, 'node.sqlite'), { timeout: 10_000 });
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(`
    CREATE TABLE IF NOT EXISTS groups (gid INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
    CREATE TABLE IF NOT EXISTS cells (gid INTEGER NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (gid, key)) WITHOUT ROWID;
  `);
  const findGroup = db.prepare('SELECT gid FROM groups WHERE name = ?');
  const addGroup = db.prepare('INSERT INTO groups (name) VALUES (?)');
  const getCell = db.prepare('SELECT value FROM cells WHERE gid = ? AND key = ?');
  const setCell = db.prepare('INSERT INTO cells (gid, key, value) VALUES (?, ?, ?) ON CONFLICT (gid, key) DO UPDATE SET value = excluded.value');
  const open = new Set<PeerRaftLog>();
  return {
    async openGroup(id: string): Promise<PeerRaftLog> {
      let row = findGroup.get(id) as { gid: number } | undefined;
      if (row === undefined) {
        db.transaction(() => addGroup.run(id)).immediate();
        row = findGroup.get(id) as { gid: number };
      }
      const gid = row.gid;
      const table = `log_${gid}`;
      db.exec(`CREATE TABLE IF NOT EXISTS ${table} (idx INTEGER PRIMARY KEY, entry BLOB NOT NULL)`);
      const s: Record<'insert' | 'truncate' | 'purge' | 'range' | 'lowest' | 'highest', SqliteStatement> = {
        insert: db.prepare(`INSERT INTO ${table} (idx, entry) VALUES (?, ?)`),
        truncate: db.prepare(`DELETE FROM ${table} WHERE idx >= ?`),
        purge: db.prepare(`DELETE FROM ${table} WHERE idx <= ?`),
        range: db.prepare(`SELECT entry FROM ${table} WHERE idx >= ? AND idx < ? ORDER BY idx LIMIT ?`),
        // Two queries: SQLite answers a lone min() or max() from the index, but scans the whole
        // table for both in one query.
        lowest: db.prepare(`SELECT idx FROM ${table} ORDER BY idx ASC LIMIT 1`),
        highest: db.prepare(`SELECT idx FROM ${table} ORDER BY idx DESC LIMIT 1`),
      };
      const cell = (key: string): Uint8Array | null => (getCell.get(gid, key) as { value: Buffer } | undefined)?.value ?? null;
      const appendTx = db.transaction((first: number, encoded: Uint8Array[]) => {
        encoded.forEach((e, i) => s.insert.run(first + i, e));
      });
      const purgeTx = db.transaction((purged: Uint8Array, upto: number) => {
        setCell.run(gid, 'purged', purged);
        s.purge.run(upto);
      });
      const backend: RaftBackend = {
        load() {
          const lowest = (s.lowest.get() as { idx: number } | undefined)?.idx ?? null;
          const highest = (s.highest.get() as { idx: number } | undefined)?.idx ?? null;
          return { lowest, highest, purged: cell('purged'), vote: cell('vote'), committed: cell('committed') };
        },
        async append(first, encoded) {
          appendTx.immediate(first, encoded);
        },
        async truncate(from) {
          db.transaction(() => s.truncate.run(from)).immediate();
        },
        async purge(purged, upto) {
          purgeTx.immediate(purged, upto);
        },
        async saveVote(vote) {
          db.transaction(() => setCell.run(gid, 'vote', vote)).immediate();
        },
        async saveCommitted(committed) {
          db.transaction(() => setCell.run(gid, 'committed', committed)).immediate();
        },
        read(start, end, maxEntries, maxBytes) {
          const out: Uint8Array[] = [];
          let bytes = 0;
          // A bounded page at a time: a large range never comes back as one array.
          let at = start;
          while (at < end && out.length < maxEntries) {
            const page = s.range.all(at, end, Math.min(256, maxEntries - out.length)) as { entry: Buffer }[];
            if (page.length === 0) break;
            for (const { entry } of page) {
              if (out.length > 0 && bytes + entry.length > maxBytes) return out;
              bytes += entry.length;
              out.push(entry);
            }
            at += page.length;
          }
          return out;
        },
        async close() {},
      };
      const log = PeerRaftLog.open(backend);
      open.add(log);
      return log;
    },
    async close() {
      for (const log of open) await log.close();
      if (db.open) db.close();
    },
  };
}

// ---- LMDB ----

function logKey(gid: number, index: number): Buffer {
  const k = Buffer.allocUnsafe(12);
  k.writeUInt32BE(gid, 0);
  k.writeBigUInt64BE(BigInt(index), 4);
  return k;
}

function cellKey(gid: number, name: string): Buffer {
  const n = Buffer.from(name, 'utf8');
  const k = Buffer.allocUnsafe(4 + n.length);
  k.writeUInt32BE(gid, 0);
  n.copy(k, 4);
  return k;
}

async function durable(root: LmdbRoot, fn: () => void): Promise<void> {
  const p = root.transaction(fn);
  await p;
  if (p.flushed !== undefined) await p.flushed;
}

export async function openLmdbRaftNode(lmdb: LmdbModule, dir: string): Promise<PeerRaftNode> {
  mkdirSync(dir, { recursive: true });
  const root = lmdb.open({ path: dir, maxDbs: 8, overlappingSync: false, cache: false, compression: false });
  const groups: LmdbDatabase = root.openDB({ name: 'groups', encoding: 'binary', keyEncoding: 'binary' });
  const logs: LmdbDatabase = root.openDB({ name: 'log', encoding: 'binary', keyEncoding: 'binary' });
  const cells: LmdbDatabase = root.openDB({ name: 'cells', encoding: 'binary', keyEncoding: 'binary' });
  const open = new Set<PeerRaftLog>();
  return {
    async openGroup(id: string): Promise<PeerRaftLog> {
      const name = Buffer.from(id, 'utf8');
      let stored = groups.get(name);
      if (stored === undefined) {
        await durable(root, () => {
          const count = [...groups.getKeys({})].length;
          const b = Buffer.allocUnsafe(4);
          b.writeUInt32BE(count + 1, 0);
          groups.putSync(name, b);
        });
        stored = groups.get(name) as Buffer;
      }
      const gid = stored.readUInt32BE(0);
      const lo = logKey(gid, 0);
      const hi = logKey(gid + 1, 0);
      const indexOf = (k: Buffer): number => Number(k.readBigUInt64BE(4));
      const cell = (key: string): Uint8Array | null => cells.get(cellKey(gid, key)) ?? null;
      const backend: RaftBackend = {
        load() {
          const first = [...logs.getKeys({ start: lo, end: hi, limit: 1 })][0];
          // Reverse ranges exclude their end: the bare 4-byte group prefix sorts below every key of the group.
          const last = [...logs.getKeys({ start: hi, end: lo.subarray(0, 4), limit: 1, reverse: true })][0];
          return {
            lowest: first === undefined ? null : indexOf(first),
            highest: last === undefined ? null : indexOf(last),
            purged: cell('purged'),
            vote: cell('vote'),
            committed: cell('committed'),
          };
        },
        append(first, encoded) {
          return durable(root, () => {
            encoded.forEach((e, i) => logs.putSync(logKey(gid, first + i), e));
          });
        },
        truncate(from) {
          return durable(root, () => {
            for (const k of [...logs.getKeys({ start: logKey(gid, from), end: hi })]) logs.removeSync(k);
          });
        },
        purge(purged, upto) {
          return durable(root, () => {
            cells.putSync(cellKey(gid, 'purged'), purged);
            for (const k of [...logs.getKeys({ start: lo, end: logKey(gid, upto + 1) })]) logs.removeSync(k);
          });
        },
        saveVote(vote) {
          return durable(root, () => cells.putSync(cellKey(gid, 'vote'), vote));
        },
        saveCommitted(committed) {
          return durable(root, () => cells.putSync(cellKey(gid, 'committed'), committed));
        },
        read(start, end, maxEntries, maxBytes) {
          const out: Uint8Array[] = [];
          let bytes = 0;
          for (const { value } of logs.getRange({ start: logKey(gid, start), end: logKey(gid, end) })) {
            if (out.length >= maxEntries || (out.length > 0 && bytes + value.length > maxBytes)) break;
            bytes += value.length;
            out.push(new Uint8Array(value));
          }
          return out;
        },
        async close() {},
      };
      const log = PeerRaftLog.open(backend);
      open.add(log);
      return log;
    },
    async close() {
      for (const log of open) await log.close();
      await root.close();
    },
  };
}
