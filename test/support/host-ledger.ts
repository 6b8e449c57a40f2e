// A checker of host-store writers' acknowledgement ledgers, for tests that kill, race or cut off
// writers: what a realm shows must agree with what its writers were told.
//
// Owns: `LedgerLine`, `LedgerCheck` and `spawnLedgerWriter`. The writers commit batches whose rows
// are named after the batch (`rowText` of ./host-kill-scopes.ts) and write ledger lines:
// {t:'acquired', token, at}, {t:'begin', id, scopes, at, token?} before a commit is sent, {t:'ack', id}
// after it answered Ok, {t:'fail', id, code} after a refusal. Times are CLOCK_MONOTONIC µs, which
// every process on the machine shares. `LedgerCheck.check` requires, of a realm:
// - every acknowledged batch shows (a ledger may miss an acknowledgement, never invent one);
// - no batch shows in part: its rows are all there in each scope it wrote, or in none;
// - nothing shows that was never issued, and nothing that showed before is gone or reordered;
// - no batch of a writer shows whose commit began after another writer's acquire of a higher
//   token had answered (fencing);
// - every load agrees: a second handle, the same handle after the next acquire, and a reopen.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { HostStore } from '../../lib/host/types.js';
import { rowText, SCOPES } from './host-kill-scopes.js';

export interface LedgerLine {
  t: string;
  [key: string]: unknown;
}

/** A writer process and its ledger (fd 3). */
export interface LedgerWriter {
  holder: string;
  pid: number | undefined;
  ledger: LedgerLine[];
  /** Its modules are loaded. */
  started: Promise<void>;
  /** It holds the fence (or exited). */
  acquired: Promise<void>;
  exited: Promise<void>;
  stderr: () => string;
  /** SIGKILL; false when it had exited already. */
  kill(): boolean;
}

export function spawnLedgerWriter(script: string, args: readonly string[], holder: string): LedgerWriter {
  const child = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'ignore', 'pipe', 'pipe'] });
  const ledger: LedgerLine[] = [];
  let onStart!: () => void;
  let onAcquired!: () => void;
  const started = new Promise<void>((r) => (onStart = r));
  const acquired = new Promise<void>((r) => (onAcquired = r));
  let buffered = '';
  const stream = child.stdio[3] as NodeJS.ReadableStream;
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    buffered += chunk;
    for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (line.length === 0) continue;
      const entry = JSON.parse(line) as LedgerLine;
      ledger.push(entry);
      if (entry.t === 'start') onStart();
      if (entry.t === 'acquired') onAcquired();
    }
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (s: string) => (stderr += s));
  let alive = true;
  const closed = new Promise<void>((r) => stream.on('close', () => r()));
  const exited = new Promise<void>((r) =>
    child.on('exit', () => {
      alive = false;
      onStart();
      onAcquired();
      r();
    }),
  ).then(() => closed);
  return {
    holder,
    pid: child.pid,
    ledger,
    started,
    acquired,
    exited,
    stderr: () => stderr,
    kill: () => alive && child.kill('SIGKILL'),
  };
}

interface Begun {
  scopes: string[];
  at: number;
  holder: string;
  /** The batch's fence token (when the line names it; else the writer's last acquired). */
  token: number | undefined;
}

type Closable = HostStore & { close(): Promise<void> };

/** What one realm has shown and what its writers' ledgers say, across rounds. */
export class LedgerCheck {
  readonly begun = new Map<string, Begun>();
  readonly acked = new Set<string>();
  readonly acquires: { holder: string; token: number; at: number }[] = [];
  readonly tokens = new Map<string, number>();
  /** Answers each writer got, by code ('ok' for acknowledgements). */
  readonly answers = new Map<string, number>();
  visible = new Map<string, string[]>(SCOPES.map((s) => [s.name, []]));

  /** Takes in a writer's ledger; fails on an answer no writer may get. */
  absorb(holder: string, ledger: readonly LedgerLine[], allowed: readonly string[] = ['FENCED_OUT', 'CONFLICT', 'UNAVAILABLE', 'INDETERMINATE']): void {
    for (const e of ledger) {
      if (e.t === 'begin') this.begun.set(e['id'] as string, { scopes: e['scopes'] as string[], at: e['at'] as number, holder, token: (e['token'] as number | undefined) ?? this.tokens.get(holder) });
      if (e.t === 'ack') {
        this.acked.add(e['id'] as string);
        this.count('ok');
      }
      if (e.t === 'acquired') {
        this.acquires.push({ holder, token: e['token'] as number, at: e['at'] as number });
        this.tokens.set(holder, e['token'] as number);
      }
      if (e.t === 'fail') {
        const code = e['code'] as string;
        this.count(code);
        if (!allowed.includes(code)) throw new Error(`writer ${holder}: commit ${String(e['id'])} answered ${code}`);
      }
    }
  }

  count(what: string): void {
    this.answers.set(what, (this.answers.get(what) ?? 0) + 1);
  }

  /**
   * Every scope's batches in order, checking each batch's rows are whole and (unless `heads` is
   * false: commits may still land between the two reads) that its head is the last one's.
   */
  async observe(store: HostStore, options: { heads?: boolean } = {}): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    const dec = new TextDecoder();
    for (const s of SCOPES) {
      const head = options.heads === false ? undefined : await store.loadHead(s);
      const rows = (await store.readRows(s, 0, 1_000_000)).map((r) => dec.decode(r.data));
      const ids: string[] = [];
      for (let i = 0; i < rows.length; ) {
        const [id, scope, k, n] = rows[i]!.split('|');
        assert.equal(scope, s.name, `row ${i} of ${s.name} names scope ${scope}`);
        assert.equal(k, '0', `${s.name}: batch ${id}'s rows start at row ${i} with part ${k}: shown in part`);
        const count = Number(n);
        for (let j = 0; j < count; j++) assert.equal(rows[i + j], rowText(id!, s.name, j, count), `${s.name}: batch ${id} shows in part (row ${i + j})`);
        assert.ok(!ids.includes(id!), `${s.name}: batch ${id} shows twice`);
        ids.push(id!);
        i += count;
      }
      if (head === undefined) {
        // not checked
      } else if (ids.length === 0) assert.equal(head, null, `${s.name}: a head without rows`);
      else {
        assert.equal(head?.commitId, ids[ids.length - 1], `${s.name}: the head's commit id is not the last batch's`);
        assert.equal(head?.version, ids.length, `${s.name}: the version is not the number of batches`);
        assert.equal(dec.decode(head?.head), ids[ids.length - 1]);
      }
      out.set(s.name, ids);
    }
    return out;
  }

  /**
   * Checks the realm (see the module header). `open` opens a new handle (a new process's view);
   * with `acquire`, the checker takes the fence over between two loads, which must agree.
   */
  async check(open: (holder: string) => Promise<Closable>, options: { acquire?: boolean } = {}): Promise<void> {
    const store = await open('checker');
    const seen = await this.observe(store);
    const other = await open('checker-2');
    assert.deepEqual(await this.observe(other), seen, 'a second handle shows the same');
    if (options.acquire === true) {
      await other.acquireFence('takeover');
      assert.deepEqual(await this.observe(store), seen, 'a load after the next acquire shows the same');
    }
    await other.close();
    await store.close();
    const reopened = await open('checker-3');
    assert.deepEqual(await this.observe(reopened), seen, 'a reopen shows the same');
    await reopened.close();
    const where = new Map<string, Set<string>>();
    for (const [scope, ids] of seen) {
      const before = this.visible.get(scope)!;
      assert.deepEqual(ids.slice(0, before.length), before, `${scope}: what showed before is gone or reordered`);
      for (const id of ids) {
        if (!where.has(id)) where.set(id, new Set());
        where.get(id)!.add(scope);
      }
    }
    for (const [id, scopes] of where) {
      const b = this.begun.get(id);
      assert.ok(b !== undefined, `batch ${id} shows but was never issued`);
      assert.deepEqual([...scopes].sort(), [...b.scopes].sort(), `batch ${id} shows in ${[...scopes].join(',')} of ${b.scopes.join(',')}: in part`);
      // Fencing: no acquire of a higher token had answered before this commit began.
      const token = b.token;
      assert.ok(token !== undefined, `batch ${id} of ${b.holder}, which never acquired, shows`);
      const superseding = this.acquires.find((a) => a.token > token && a.at < b.at);
      assert.ok(superseding === undefined, `batch ${id} of ${b.holder} (token ${token}) began after ${superseding?.holder}'s acquire of token ${superseding?.token} and shows`);
    }
    for (const id of this.acked) assert.ok(where.has(id), `acknowledged batch ${id} does not show`);
    this.visible = seen;
  }

  /** Batch-scope pairs showing. */
  shown(): number {
    return [...this.visible.values()].reduce((n, ids) => n + ids.length, 0);
  }
}
