// The corruption sweep's subjects for the two stores built on the primitives: an fs host realm
// (FORMAT, stripe files, published notes, scope homes with row files and head blobs, the fence
// cell, the checkpoint cell) and a Raft node (group logs, the state cell, GROUP
// files, the applied journal, snapshots, the KV state, the node's payload store). Each writes a
// golden state through the store's API, closes it cleanly, and reads everything back as keys
// (test/support/sweep.ts, `Observed`).

import { ManualClock } from '../../lib/clock.js';
import { isSeglogError } from '../../lib/errors.js';
import { MemoryFs } from '../../lib/fs/memory.js';
import type { FileSystem } from '../../lib/fs/types.js';
import { CommitBatch, FenceTiming, openFsHostStore, type ScopeKind, type ScopeRef, type ScopeUpdate } from '../../lib/host/index.js';
import { encodeKvCommand } from '../../lib/raft/kv.js';
import { openRaftNode } from '../../lib/raft/node.js';
import type { Entry, LogId } from '../../lib/raft/types.js';
import { cellHints, digestOf, logFileHints, logFileKind, readPayload } from './sweep-stores.js';
import type { Observed, SweepSubject } from './sweep.js';

const te = new TextEncoder();

function u32(bytes: Uint8Array, at: number): number {
  return at + 4 <= bytes.length ? new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(at, true) : 0;
}

// ---------------------------------------------------------------------------------------------
// The fs host store.

const REALM = '/realm';
const timing = FenceTiming.tryNew(1000, 3000);
const KINDS: readonly ScopeKind[] = ['session', 'identity', 'mob', 'record'];

function realmOptions(fs: FileSystem, holderId: string) {
  return { fs, clock: new ManualClock(10_000_000), timing, holderId, bootId: () => 'boot-1', stripes: 2, stripeFileBytes: 64 * 1024, preallocBytes: 0, checkpointIn: 'thread' as const };
}

/** What the model knows of a scope: its version, head, first row index and rows from there. */
interface ScopeModel {
  scope: ScopeRef;
  version: number;
  commitId: string;
  head: Uint8Array;
  first: number;
  rows: Uint8Array[];
  deleted: boolean;
}

function row(n: number, size: number): Uint8Array {
  const b = new Uint8Array(size);
  for (let k = 0; k < size; k++) b[k] = (n * 17 + k) & 0xff;
  return b;
}

/**
 * The stripe frames of a `.wal` file (header, then frames of CRC, length, lsn, payload): the
 * header's fields and each frame's, walked by their lengths.
 */
function stripeHints(bytes: Uint8Array): number[] {
  const out = [0, 4, 6, 8, 16, 24, 32, 40, 60];
  let at = 64;
  while (at + 16 <= bytes.length) {
    const len = u32(bytes, at + 4);
    if (len === 0 || at + 16 + len > bytes.length) break;
    out.push(at, at + 4, at + 8, at + 16, at + 17, at + 16 + Math.floor(len / 2), at + 15 + len);
    at += 16 + len;
  }
  out.push(at);
  return out;
}

function hostFileKind(path: string): string | null {
  const rel = path.slice(REALM.length + 1);
  if (rel === 'FORMAT' || rel === 'checkpoint' || rel === 'fence/state' || rel === 'fence/lock') return rel;
  if (rel === 'checkpoint.lock' || /^stripes\/\d+\/(lock|gate)$/.test(rel)) return 'lock file';
  if (/^stripes\/\d+\/\d{16}\.wal$/.test(rel)) return 'stripe file';
  if (/^stripes\/\d+\/published$/.test(rel)) return 'published note';
  if (/^tables\/\d{16}\.tbl$/.test(rel)) return 'scope table';
  if (/^scopes\/.*\/state$/.test(rel)) return 'home state';
  if (/^scopes\/.*\/r-[0-9a-f]{16}$/.test(rel)) return 'row file';
  if (/^scopes\/.*\/h-[0-9a-f]{16}$/.test(rel)) return 'head blob';
  return null;
}

function hostHints(path: string, bytes: Uint8Array): number[] {
  const kind = hostFileKind(path);
  if (kind === 'FORMAT' || kind === 'checkpoint' || kind === 'fence/state') return cellHints(bytes.length, 4096);
  if (kind === 'home state') return cellHints(bytes.length, 8192);
  if (kind === 'stripe file') return stripeHints(bytes);
  if (kind === 'published note') return [0, 4, 8, 16, 24, 32, 40, 48, 56, 60];
  return [0, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 64, bytes.length - 8, bytes.length - 4];
}

/** Throws unless what the golden image reads back is what the model says was committed. */
function checkHostModel(models: readonly ScopeModel[], got: Observed): void {
  const want: Observed = new Map();
  for (const m of models) {
    if (m.deleted) continue;
    const key = `${m.scope.kind}/${m.scope.name}`;
    const head = `v${m.version} ${m.commitId} ${digestOf(m.head)}`;
    want.set(`head ${key}`, head);
    want.set(`listed ${key}`, head);
    if (m.first > 0) want.set(`below first ${key}`, 'INVALID');
    m.rows.forEach((r, k) => want.set(`row ${key}#${m.first + k}`, digestOf(r)));
  }
  want.set('next token', 'above every token issued');
  const a = [...want].sort().join('\n');
  const b = [...got].sort().join('\n');
  if (a !== b) throw new Error(`host-fs: the golden realm reads back other than the model:\n${b}\nmodel:\n${a}`);
}

export function hostSubject(): SweepSubject {
  const models: ScopeModel[] = [];
  let lastToken = 0;
  return {
    store: 'host-fs',
    errors: 'host',
    async build() {
      const fs = new MemoryFs({ trace: false });
      const store = await openFsHostStore(REALM, realmOptions(fs, 'a'));
      await store.acquireFence('takeover');
      const { token } = await store.acquireFence('takeover');
      lastToken = token;
      let commit = 0;
      const apply = async (updates: { m: ScopeModel; u: Omit<ScopeUpdate, 'scope' | 'previous' | 'next'> }[]): Promise<void> => {
        const id = `commit-${++commit}`;
        const batch = updates.map(({ m, u }) => ({ ...u, scope: m.scope, previous: m.version === 0 ? null : m.version, next: m.version + 1 }));
        await store.commit(CommitBatch.tryNew(id, token, batch));
        for (const { m, u } of updates) {
          m.version++;
          m.commitId = id;
          // The parts take effect in this order: truncateAfter, dropBefore, append, head.
          if (u.truncateAfter !== undefined) m.rows.length = Math.max(0, Math.min(m.rows.length, u.truncateAfter - m.first));
          if (u.dropBefore !== undefined && u.dropBefore > m.first) {
            const end = m.first + m.rows.length;
            m.rows.splice(0, Math.min(u.dropBefore, end) - m.first);
            m.first = Math.min(u.dropBefore, end);
          }
          if (u.append !== undefined) m.rows.push(...u.append);
          if (u.head !== undefined) m.head = u.head;
          if (u.delete === true) m.deleted = true;
        }
      };
      const make = (kind: ScopeKind, name: string): ScopeModel => {
        const m: ScopeModel = { scope: { kind, name }, version: 0, commitId: '', head: new Uint8Array(), first: 0, rows: [], deleted: false };
        models.push(m);
        return m;
      };
      const alpha = make('session', 'alpha');
      const bob = make('identity', 'bob');
      const crew = make('mob', 'crew');
      const big = make('record', 'big');
      const gone = make('session', 'gone');
      await apply([
        { m: alpha, u: { head: te.encode('alpha 1'), append: [row(1, 40), row(2, 50), row(3, 60)] } },
        { m: bob, u: { head: te.encode('bob 1'), append: [row(4, 300)] } },
        { m: gone, u: { head: te.encode('gone 1'), append: [row(5, 10)] } },
      ]);
      await apply([{ m: crew, u: { head: te.encode('crew 1') } }, { m: big, u: { head: row(6, 3000), append: [row(7, 9000), row(8, 9000)] } }]);
      await store.checkpoint();
      await apply([{ m: alpha, u: { head: te.encode('alpha 2'), truncateAfter: 2, append: [row(9, 70)] } }, { m: gone, u: { delete: true } }]);
      await apply([{ m: bob, u: { append: [row(10, 20), row(11, 20)], dropBefore: 1 } }]);
      for (let n = 0; n < 5; n++) await apply([{ m: big, u: { head: row(20 + n, 2500), append: [row(30 + n, 9000)] } }]);
      await store.checkpoint();
      await apply([{ m: alpha, u: { head: te.encode('alpha 3'), append: [row(40, 33)] } }, { m: crew, u: { head: te.encode('crew 2'), append: [row(41, 5)] } }]);
      await apply([{ m: bob, u: { head: te.encode('bob 2'), dropBefore: 2 } }]);
      await store.close();
      const image = fs.currentImage();
      const acknowledged = await this.observe(new MemoryFs({ image, trace: false }));
      checkHostModel(models, acknowledged);
      return { image, acknowledged };
    },
    fileKind: hostFileKind,
    hints: hostHints,
    async observe(fs: FileSystem) {
      const out: Observed = new Map();
      const store = await openFsHostStore(REALM, realmOptions(fs, 'b'));
      try {
        for (const kind of KINDS) {
          let after: string | null = null;
          for (let page = 0; page < 100; page++) {
            const got = await store.listHeads(kind, after, 2);
            for (const h of got.heads) out.set(`listed ${kind}/${h.name}`, `v${h.head.version} ${h.head.commitId} ${digestOf(h.head.head)}`);
            if (got.next === null) break;
            after = got.next;
          }
        }
        for (const m of models) {
          const key = `${m.scope.kind}/${m.scope.name}`;
          const head = await store.loadHead(m.scope);
          if (head !== null) out.set(`head ${key}`, `v${head.version} ${head.commitId} ${digestOf(head.head)}`);
          if (m.first > 0) {
            // A row below the first visible one must stay unreadable (a dropBefore undone shows here).
            const below = await store.readRows(m.scope, m.first - 1, 1).then(
              (rows) => `served ${rows.length} rows`,
              (err: unknown) => (isSeglogError(err, 'INVALID') ? 'INVALID' : Promise.reject(err)),
            );
            out.set(`below first ${key}`, below);
          }
          const rows = await store.readRows(m.scope, m.first, 10_000);
          rows.forEach((r, k) => out.set(`row ${key}#${r.index}`, `${k + m.first === r.index ? '' : `at ${k} `}${digestOf(r.data)}`));
        }
        const grant = await store.acquireFence('takeover');
        out.set('next token', grant.token > lastToken ? 'above every token issued' : `re-issued ${grant.token} (issued up to ${lastToken})`);
      } finally {
        await store.close();
      }
      return out;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The Raft node.

const NODE = '/node';

function nodeOptions(fs: FileSystem) {
  return { fs, clock: new ManualClock(), payloads: { graceMs: 0, chunkBytes: 256 }, segmentBytes: 1024, journalSegmentBytes: 1024 };
}

function lid(term: number, index: number): LogId {
  return { leaderId: { term, nodeId: 1 }, index };
}

function kvEntry(term: number, index: number, payloads?: string[]): Entry {
  const data = encodeKvCommand({ op: 'set', key: `k${index % 7}`, value: te.encode(`value ${index} ${'v'.repeat(index % 40)}`) });
  return { logId: lid(term, index), payload: payloads === undefined ? { type: 'normal', data } : { type: 'normal', data, payloads } };
}

function appendAll(log: { append(entries: Entry[], onFlushed: (err: Error | null) => void): Promise<void> }, entries: Entry[]): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    log.append(entries, (err) => (err === null ? resolve() : reject(err))).catch(reject);
  });
}

function logIdText(id: LogId | null): string {
  return id === null ? 'none' : `${id.leaderId.term}.${id.leaderId.nodeId}/${id.index}`;
}

function raftFileKind(path: string): string | null {
  const rel = path.slice(NODE.length + 1);
  if (rel === 'LOCK') return 'LOCK';
  if (rel.startsWith('payloads/')) {
    if (rel.startsWith('payloads/blobs/')) return 'payload blob';
    if (rel.startsWith('payloads/refs/')) return 'payload refcount';
    if (rel === 'payloads/FORMAT' || rel === 'payloads/CLOCK' || rel === 'payloads/LOCK') return `payload ${rel.slice(9)}`;
    return null;
  }
  const m = /^groups\/[0-9a-f]{64}\/(.*)$/.exec(rel);
  if (m === null) return null;
  const inner = m[1]!;
  if (inner === 'GROUP' || inner === 'state.cell' || inner === 'vote.cell' || inner === 'committed.cell' || inner === 'purged.cell') return inner;
  if (inner.endsWith('.cell.tmp')) return 'cell leftover (.tmp)';
  if (inner.startsWith('log/')) return logFileKind(path) === null ? null : `group log ${logFileKind(path)}`;
  if (inner.startsWith('sm/journal/')) return logFileKind(path) === null ? null : `journal ${logFileKind(path)}`;
  if (inner.startsWith('sm/snapshots/')) return 'snapshot';
  if (inner.startsWith('sm/')) return `sm ${inner.slice(3)}`;
  return null;
}

function raftHints(path: string, bytes: Uint8Array): number[] {
  const kind = raftFileKind(path) ?? '';
  if (kind.endsWith('.cell') || kind === 'payload CLOCK') return cellHints(bytes.length, kind === 'payload CLOCK' ? 64 : bytes.length / 2);
  if (kind.startsWith('group log') || kind.startsWith('journal')) return logFileHints(path, bytes);
  if (kind === 'snapshot') {
    // Magic (8), header length (4), the header (plugin name: a varint length, then its bytes;
    // the metadata), the frames (a u32 length each), the end marker and the CRC.
    const header = u32(bytes, 8);
    const out = [0, 7, 8, 12, 13, 14, 16, 20, 24, 12 + header - 1, 12 + header, 12 + header + 4, bytes.length - 8, bytes.length - 4];
    return out;
  }
  return [0, 8, 12, 16, 24, 32, 40, 48, 72, 76, 80, bytes.length - 4];
}

const GROUPS = ['g1', 'g2'];

export function raftSubject(): SweepSubject {
  let digest = '';
  return {
    store: 'raft-node',
    errors: 'seglog',
    async build() {
      const fs = new MemoryFs({ trace: false });
      const node = await openRaftNode(NODE, nodeOptions(fs));
      const payload = new Uint8Array(600).map((_, k) => (k * 11) & 0xff);
      digest = (
        await node.payloads.put(
          (async function* () {
            yield payload;
          })(),
        )
      ).digest;
      const g1 = await node.openGroup('g1');
      const first: Entry[] = [];
      for (let i = 1; i <= 30; i++) {
        const term = i <= 10 ? 1 : i <= 20 ? 2 : 3;
        // A blank entry (a new leader's first) and a membership change among the commands.
        if (i === 11) first.push({ logId: lid(term, i), payload: { type: 'blank' } });
        else if (i === 14) first.push({ logId: lid(term, i), payload: { type: 'membership', membership: { configs: [[1, 2]], nodes: { '1': {}, '2': {} } } } });
        else first.push(kvEntry(term, i, i === 22 ? [digest] : undefined));
      }
      for (let i = 0; i < first.length; i += 5) await appendAll(g1.log, first.slice(i, i + 5));
      await g1.log.saveVote({ leaderId: { term: 3, nodeId: 1 }, committed: true });
      await g1.log.truncate(lid(3, 28)); // removes [28, ∞)
      await appendAll(g1.log, [kvEntry(4, 28), kvEntry(4, 29), kvEntry(4, 30), kvEntry(4, 31)]);
      await g1.log.saveVote({ leaderId: { term: 4, nodeId: 1 }, committed: true });
      await g1.log.saveCommitted(lid(3, 16));
      await g1.stateMachine.apply(await g1.log.tryGetLogEntries(1, 17));
      await (await g1.stateMachine.getSnapshotBuilder()).buildSnapshot();
      await g1.log.saveCommitted(lid(4, 29));
      await g1.stateMachine.apply(await g1.log.tryGetLogEntries(17, 30));
      await g1.log.purge(lid(2, 12));
      const g2 = await node.openGroup('g2');
      await appendAll(g2.log, [kvEntry(1, 1), kvEntry(1, 2), kvEntry(1, 3)]);
      await g2.log.saveVote({ leaderId: { term: 1, nodeId: 1 }, committed: false });
      await node.close();
      const image = fs.currentImage();
      const acknowledged = await this.observe(new MemoryFs({ image, trace: false }));
      const want: [string, string][] = [
        ['g1 purged', '2.1/12'],
        ['g1 last', '4.1/31'],
        ['g1 vote', '4.1 committed'],
        ['g1 committed', '4.1/29'],
        ['g2 last', '1.1/3'],
        ['g2 vote', '1.1 not committed'],
      ];
      for (const [k, v] of want) if (acknowledged.get(k) !== v) throw new Error(`raft-node: the golden node reads back ${k} = ${acknowledged.get(k)}, not ${v}`);
      for (let i = 13; i <= 31; i++) if (!acknowledged.has(`g1 entry ${i}`)) throw new Error(`raft-node: the golden node lacks entry ${i}`);
      if (!(acknowledged.get('g1 applied') ?? '').startsWith('4.1/29 ') || !acknowledged.has('g1 snapshot') || !acknowledged.has('payload')) throw new Error('raft-node: the golden node lacks its applied state, snapshot or payload');
      return { image, acknowledged };
    },
    fileKind: raftFileKind,
    hints: raftHints,
    async observe(fs: FileSystem) {
      const out: Observed = new Map();
      const node = await openRaftNode(NODE, nodeOptions(fs));
      try {
        out.set('groups', node.groupIds().sort().join(','));
        for (const id of GROUPS) {
          const g = await node.openGroup(id);
          const state = await g.log.getLogState();
          out.set(`${id} purged`, logIdText(state.lastPurgedLogId));
          out.set(`${id} last`, logIdText(state.lastLogId));
          const vote = await g.log.readVote();
          out.set(`${id} vote`, vote === null ? 'none' : `${vote.leaderId.term}.${vote.leaderId.nodeId} ${vote.committed ? 'committed' : 'not committed'}`);
          out.set(`${id} committed`, logIdText(await g.log.readCommitted()));
          const from = state.lastPurgedLogId === null ? 0 : state.lastPurgedLogId.index + 1;
          const to = state.lastLogId === null ? from : state.lastLogId.index + 1;
          for (const e of await g.log.tryGetLogEntries(from, to)) {
            const p = e.payload;
            const body = p.type === 'normal' ? `${digestOf(p.data)} ${(p.payloads ?? []).join(',')}` : p.type === 'membership' ? JSON.stringify(p.membership) : p.type;
            out.set(`${id} entry ${e.logId.index}`, `${logIdText(e.logId)} ${body}`);
          }
          const [applied, membership] = await g.stateMachine.appliedState();
          out.set(`${id} applied`, `${logIdText(applied)} ${JSON.stringify(membership)}`);
          const kv = g.stateMachine.plugin;
          for (const key of kv.keys().sort()) out.set(`${id} kv ${key}`, digestOf(kv.get(key)!));
          const snap = await g.stateMachine.getCurrentSnapshot();
          if (snap !== null) {
            const parts: Uint8Array[] = [];
            for await (const c of snap.data) parts.push(c);
            out.set(`${id} snapshot`, `${logIdText(snap.meta.lastLogId)} ${snap.meta.snapshotId} ${digestOf(Buffer.concat(parts))}`);
          }
        }
        const info = await node.payloads.stat(digest);
        if (info !== null) out.set('payload', `${info.size} ${digestOf(await readPayload(node.payloads.get(digest)))}`);
        const refs = await node.payloads.refs(digest);
        if (refs.length > 0) out.set('payload refs', refs.join(','));
      } finally {
        await node.close();
      }
      return out;
    },
  };
}
