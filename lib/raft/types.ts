// Raft store types: the TypeScript shape of openraft 0.9's v2 storage traits (docs/contracts/raft-store.md).
//
// Owns: every Raft type of docs/contracts/raft-store.md, the orders on LeaderId, LogId and Vote, and the
// validators that every store runs on its inputs before it changes anything. Guarantees: a value
// that passes `validate…` has only safe non-negative integers where numbers are expected, well-formed
// digests, JSON-only membership node data and well-formed strings; anything else is refused with
// code INVALID and nothing is changed. The validators never mutate their input.

import { isIndex } from '../assert.js';
import { invalid } from '../errors.js';

/**
 * The identity of a leader: a term and the node elected in it. Ordered by `term`, then `nodeId`
 * (see {@link compareLeaderId}).
 */
export interface LeaderId {
  term: number;
  nodeId: number;
}

/**
 * The identity of one log entry: the leader that proposed it and its index. Ordered by `leaderId`,
 * then `index`; `null` (no entry) sorts below every id (see {@link compareLogId}).
 */
export interface LogId {
  leaderId: LeaderId;
  index: number;
}

/**
 * A node's vote: the leader it granted, and whether that leader was granted by a quorum
 * (`committed`). `saveVote` makes it durable before it resolves.
 */
export interface Vote {
  leaderId: LeaderId;
  committed: boolean;
}

/**
 * A cluster configuration. `configs` lists one or two (joint consensus) sets of voter ids;
 * `nodes` maps a node id (as a decimal string) to application data about that node. `nodes`
 * values must be JSON values (null, booleans, finite numbers, strings, arrays, plain objects):
 * stores keep them as JSON.
 */
export interface Membership {
  configs: number[][];
  nodes: Record<string, unknown>;
}

/** A membership and the id of the log entry that carried it (`null`: the initial, empty one). */
export interface StoredMembership {
  logId: LogId | null;
  membership: Membership;
}

/**
 * What a log entry carries. `blank` entries are written by a new leader; `normal` entries carry
 * application data for the state machine and may name payloads (content digests,
 * `'sha256:' + 64 lowercase hex`) that must be durable in the node's payload store before the
 * entry is appended (docs/contracts/raft-store.md, section 5); `membership` entries change the configuration.
 */
export type EntryPayload =
  | { type: 'blank' }
  | { type: 'normal'; data: Uint8Array; payloads?: string[] }
  | { type: 'membership'; membership: Membership };

/** One log entry. */
export interface Entry {
  logId: LogId;
  payload: EntryPayload;
}

/**
 * Where the log begins and ends. `lastLogId` is the id of the last entry, or `lastPurgedLogId`
 * when every entry was purged; both are `null` only for a log that never held anything.
 */
export interface LogState {
  lastPurgedLogId: LogId | null;
  lastLogId: LogId | null;
}

/** What a snapshot covers: the last applied log id, the membership in force then, and its id. */
export interface SnapshotMeta {
  lastLogId: LogId | null;
  lastMembership: StoredMembership;
  snapshotId: string;
}

/** A snapshot: its metadata and its bytes as a stream (never one buffer: it may exceed memory). */
export interface Snapshot {
  meta: SnapshotMeta;
  data: AsyncIterable<Uint8Array>;
}

/** Reads a log. Every range is `[start, end)`: `start` inclusive, `end` exclusive. */
export interface RaftLogReader {
  /**
   * The entries of `[start, end)` that the log holds, in index order. Entries that are missing
   * (purged, or past the end) are left out: the answer may be shorter than the range, or empty.
   * `start >= end` answers `[]`.
   */
  tryGetLogEntries(start: number, end: number): Promise<Entry[]>;
  /**
   * Like `tryGetLogEntries`, but the store may answer only a prefix of what the range holds, to
   * bound the size of the answer. It never answers `[]` when the range holds an entry.
   */
  limitedGetLogEntries(start: number, end: number): Promise<Entry[]>;
}

/**
 * The log store of one Raft group (openraft's `RaftLogStorage`). All write I/O (append, truncate,
 * purge, saveVote, saveCommitted) takes effect in call order.
 */
export interface RaftLogStorage extends RaftLogReader {
  /** The last purged id and the last log id; the latter falls back to the former when empty. */
  getLogState(): Promise<LogState>;
  /** A reader over the same log; it sees entries appended after it was created. */
  getLogReader(): Promise<RaftLogReader>;
  /** Stores the vote; durable before the promise resolves. */
  saveVote(vote: Vote): Promise<void>;
  /** The last vote saved, or `null` when none ever was. */
  readVote(): Promise<Vote | null>;
  /** Stores the committed log id; durable before the promise resolves. */
  saveCommitted(committed: LogId | null): Promise<void>;
  /** The last committed id saved, or `null`. */
  readCommitted(): Promise<LogId | null>;
  /**
   * Appends entries at the end of the log: their indices must be consecutive and continue the last
   * entry, or the last purged id when the log is empty; a log that never held nor purged anything
   * takes its first entry at any index. Anything else is INVALID and appends nothing. When the
   * promise resolves the entries are readable, by this store and every reader. `onFlushed` is
   * called exactly once: with `null` once the entries are on disk, or with an Error when that
   * failed. It may be called before or after the promise resolves, and it is never held back until
   * a later append. When the promise rejects, nothing was appended and `onFlushed` is not called.
   */
  append(entries: Entry[], onFlushed: (err: Error | null) => void): Promise<void>;
  /**
   * Deletes `[logId.index, +inf)`. Past the end it does nothing; at or below the last purged index
   * it is INVALID (purged entries cannot come back). The leader id of `logId` is not checked.
   */
  truncate(logId: LogId): Promise<void>;
  /**
   * Deletes `(-inf, logId.index]` and remembers `logId` as the last purged id (durably, before any
   * entry is deleted). Past the last entry is fine: the log is then empty and continues right after
   * `logId`. At or below the last purged index it does nothing (the purged id never goes back).
   * Short of the first entry of a log that began at an arbitrary index it is INVALID (a hole).
   */
  purge(logId: LogId): Promise<void>;
}

/** Builds a snapshot of a state machine. */
export interface RaftSnapshotBuilder {
  /**
   * Writes the snapshot (durably, for a durable store), makes it the current one unless a newer
   * one is current already, and answers it. The state it covers is the state machine's when the
   * builder was obtained, however many entries were applied since.
   */
  buildSnapshot(): Promise<Snapshot>;
}

/**
 * Receives the bytes of a snapshot sent by a leader (from `beginReceivingSnapshot`), chunk by
 * chunk, in order; `installSnapshot` then installs it. A sink is used for one install at most.
 */
export interface SnapshotSink {
  /** Stores one chunk; the sink keeps no reference to `chunk` after the promise resolves. */
  write(chunk: Uint8Array): Promise<void>;
}

/**
 * The state machine of one Raft group (openraft's `RaftStateMachine`). `R` is the reply of one
 * applied entry.
 */
export interface RaftStateMachine<R = unknown> {
  /** The last applied log id and the last applied membership. */
  appliedState(): Promise<[LogId | null, StoredMembership]>;
  /** Applies entries (strictly after the applied position, in index order); one reply each. */
  apply(entries: Entry[]): Promise<R[]>;
  /** A builder whose snapshot covers the state as it is at this call. */
  getSnapshotBuilder(): Promise<RaftSnapshotBuilder>;
  /** A sink for a snapshot streamed from a leader. */
  beginReceivingSnapshot(): Promise<SnapshotSink>;
  /**
   * Replaces the state with the snapshot received in `sink`, makes it the current snapshot and
   * deletes every other one. The bytes must be a snapshot whose embedded metadata equals `meta`
   * (INVALID otherwise; CORRUPT when they fail their checks), and the snapshot must not end before
   * the applied position (INVALID): an applied entry is never applied again.
   */
  installSnapshot(meta: SnapshotMeta, sink: SnapshotSink): Promise<void>;
  /** The current snapshot (last built or installed), or `null`. */
  getCurrentSnapshot(): Promise<Snapshot | null>;
}

// ---------------------------------------------------------------------------------------------
// Orders

function sign(n: number): -1 | 0 | 1 {
  return n < 0 ? -1 : n > 0 ? 1 : 0;
}

/** Orders leader ids by term, then node id. */
export function compareLeaderId(a: LeaderId, b: LeaderId): -1 | 0 | 1 {
  return sign(a.term - b.term) || sign(a.nodeId - b.nodeId);
}

/** Orders log ids by leader id, then index; `null` is below every id. */
export function compareLogId(a: LogId | null, b: LogId | null): -1 | 0 | 1 {
  if (a === null) return b === null ? 0 : -1;
  if (b === null) return 1;
  return compareLeaderId(a.leaderId, b.leaderId) || sign(a.index - b.index);
}

/** Orders votes by leader id, then `committed` (a committed vote is above an uncommitted one). */
export function compareVote(a: Vote, b: Vote): -1 | 0 | 1 {
  return compareLeaderId(a.leaderId, b.leaderId) || sign(Number(a.committed) - Number(b.committed));
}

/** True when two log ids are the same id (both `null`, or equal leader and index). */
export function logIdEquals(a: LogId | null, b: LogId | null): boolean {
  return compareLogId(a, b) === 0;
}

/** The index after `logId`: 0 for `null` (openraft's `next_index`). */
export function nextIndex(logId: LogId | null): number {
  return logId === null ? 0 : logId.index + 1;
}

/** Builds a log id. */
export function logId(term: number, nodeId: number, index: number): LogId {
  return { leaderId: { term, nodeId }, index };
}

/** The empty membership: no voters, no nodes. */
export function emptyMembership(): Membership {
  return { configs: [], nodes: {} };
}

/** The initial stored membership: no log id, the empty membership. */
export function emptyStoredMembership(): StoredMembership {
  return { logId: null, membership: emptyMembership() };
}

// ---------------------------------------------------------------------------------------------
// Validation: every check throws INVALID naming what was wrong. Called before any change.

/** The largest UTF-8 size of a snapshot id. */
/**
 * Calls a store user's callback (`append`'s `onFlushed`); a throw is the caller's bug, re-raised
 * outside the store (in a microtask) so that it never unwinds the store's own bookkeeping.
 */
export function callBack(fn: (err: Error | null) => void, err: Error | null): void {
  try {
    fn(err);
  } catch (thrown) {
    queueMicrotask(() => {
      throw thrown;
    });
  }
}

/** Default cap on the entries one `limitedGetLogEntries` answers (both log stores). */
export const DEFAULT_MAX_READ_ENTRIES = 1024;
/** Default cap on the encoded bytes one `limitedGetLogEntries` answers past its first entry (both log stores). */
export const DEFAULT_MAX_READ_BYTES = 4 * 1024 * 1024;

export const MAX_SNAPSHOT_ID_BYTES = 1024;
/** The most voter sets a membership may list (openraft uses one, or two during a joint change). */
export const MAX_MEMBERSHIP_CONFIGS = 1024;
/** The deepest nesting of a membership's node data. */
export const MAX_NODE_DATA_DEPTH = 64;

const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

/** True for a payload digest: `'sha256:'` followed by 64 lowercase hex digits. */
export function isDigest(s: unknown): s is string {
  return typeof s === 'string' && DIGEST_RE.test(s);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto: unknown = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** Throws INVALID unless `n` is a safe non-negative integer. */
export function validateNumber(n: unknown, what: string): asserts n is number {
  if (!isIndex(n)) throw invalid(`${what} must be a safe non-negative integer, got ${describe(n)}`, { what, value: describe(n) });
}

function describe(v: unknown): string {
  if (typeof v === 'number') return String(v);
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? v.slice(0, 40) + '…' : v);
  return v === null ? 'null' : typeof v;
}

/** Throws INVALID unless `x` is a LeaderId. */
export function validateLeaderId(x: unknown, what = 'leaderId'): asserts x is LeaderId {
  if (typeof x !== 'object' || x === null) throw invalid(`${what} must be an object`, { what });
  const l = x as Partial<LeaderId>;
  validateNumber(l.term, `${what}.term`);
  validateNumber(l.nodeId, `${what}.nodeId`);
}

/** Throws INVALID unless `x` is a LogId. */
export function validateLogId(x: unknown, what = 'logId'): asserts x is LogId {
  if (typeof x !== 'object' || x === null) throw invalid(`${what} must be an object`, { what });
  const l = x as Partial<LogId>;
  validateLeaderId(l.leaderId, `${what}.leaderId`);
  validateNumber(l.index, `${what}.index`);
}

/** Throws INVALID unless `x` is a LogId or null. */
export function validateOptionalLogId(x: unknown, what = 'logId'): asserts x is LogId | null {
  if (x !== null) validateLogId(x, what);
}

/** Throws INVALID unless `x` is a Vote. */
export function validateVote(x: unknown, what = 'vote'): asserts x is Vote {
  if (typeof x !== 'object' || x === null) throw invalid(`${what} must be an object`, { what });
  const v = x as Partial<Vote>;
  validateLeaderId(v.leaderId, `${what}.leaderId`);
  if (typeof v.committed !== 'boolean') throw invalid(`${what}.committed must be a boolean`, { what });
}

function validateJsonValue(v: unknown, what: string, depth: number): void {
  if (depth > MAX_NODE_DATA_DEPTH) throw invalid(`${what} nests deeper than ${MAX_NODE_DATA_DEPTH}`, { what });
  if (v === null || typeof v === 'boolean' || typeof v === 'string') {
    if (typeof v === 'string') validateWellFormed(v, what);
    return;
  }
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) throw invalid(`${what} must be a finite number`, { what });
    if (Object.is(v, -0)) throw invalid(`${what} must not be -0 (JSON cannot keep it)`, { what });
    return;
  }
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      if (!(i in v)) throw invalid(`${what}[${i}] is a hole`, { what });
      validateJsonValue(v[i], `${what}[${i}]`, depth + 1);
    }
    return;
  }
  if (isPlainObject(v)) {
    for (const key of Object.keys(v)) {
      validateWellFormed(key, `${what} key`);
      validateJsonValue(v[key], `${what}.${key}`, depth + 1);
    }
    return;
  }
  throw invalid(`${what} must be a JSON value (null, boolean, number, string, array, plain object)`, { what });
}

function validateWellFormed(s: string, what: string): void {
  // A lone surrogate does not survive UTF-8: refuse it rather than store a different string.
  if (!isWellFormed(s)) throw invalid(`${what} is not well-formed UTF-16 (lone surrogate)`, { what });
}

/** True unless `s` holds a lone surrogate (String.prototype.isWellFormed is newer than Node 20.0). */
export function isWellFormed(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (!(d >= 0xdc00 && d <= 0xdfff)) return false;
      i++;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      return false;
    }
  }
  return true;
}

/** Throws INVALID unless `x` is a Membership (voter ids safe integers; node data JSON). */
export function validateMembership(x: unknown, what = 'membership'): asserts x is Membership {
  if (typeof x !== 'object' || x === null) throw invalid(`${what} must be an object`, { what });
  const m = x as Partial<Membership>;
  if (!Array.isArray(m.configs)) throw invalid(`${what}.configs must be an array`, { what });
  if (m.configs.length > MAX_MEMBERSHIP_CONFIGS) throw invalid(`${what}.configs lists more than ${MAX_MEMBERSHIP_CONFIGS} sets`, { what });
  for (let i = 0; i < m.configs.length; i++) {
    const config: unknown = m.configs[i];
    if (!Array.isArray(config)) throw invalid(`${what}.configs[${i}] must be an array`, { what });
    for (let j = 0; j < config.length; j++) validateNumber(config[j], `${what}.configs[${i}][${j}]`);
  }
  if (!isPlainObject(m.nodes)) throw invalid(`${what}.nodes must be a plain object`, { what });
  validateJsonValue(m.nodes, `${what}.nodes`, 0);
}

/** Throws INVALID unless `x` is a StoredMembership. */
export function validateStoredMembership(x: unknown, what = 'storedMembership'): asserts x is StoredMembership {
  if (typeof x !== 'object' || x === null) throw invalid(`${what} must be an object`, { what });
  const s = x as Partial<StoredMembership>;
  validateOptionalLogId(s.logId, `${what}.logId`);
  validateMembership(s.membership, `${what}.membership`);
}

/** Throws INVALID unless `x` is an Entry. */
export function validateEntry(x: unknown, what = 'entry'): asserts x is Entry {
  if (typeof x !== 'object' || x === null) throw invalid(`${what} must be an object`, { what });
  const e = x as Partial<Entry>;
  validateLogId(e.logId, `${what}.logId`);
  const p = e.payload as Partial<EntryPayload> | undefined | null;
  if (typeof p !== 'object' || p === null) throw invalid(`${what}.payload must be an object`, { what });
  switch (p.type) {
    case 'blank':
      return;
    case 'normal': {
      const n = p as Partial<Extract<EntryPayload, { type: 'normal' }>>;
      if (!(n.data instanceof Uint8Array)) throw invalid(`${what}.payload.data must be a Uint8Array`, { what });
      if (n.payloads !== undefined) {
        if (!Array.isArray(n.payloads)) throw invalid(`${what}.payload.payloads must be an array`, { what });
        for (let i = 0; i < n.payloads.length; i++) {
          if (!isDigest(n.payloads[i])) {
            throw invalid(`${what}.payload.payloads[${i}] must be 'sha256:' + 64 lowercase hex digits`, { what });
          }
        }
      }
      return;
    }
    case 'membership':
      validateMembership((p as { membership?: unknown }).membership, `${what}.payload.membership`);
      return;
    default:
      throw invalid(`${what}.payload.type must be 'blank', 'normal' or 'membership'`, { what });
  }
}

/** Throws INVALID unless `x` is a SnapshotMeta. */
export function validateSnapshotMeta(x: unknown, what = 'snapshotMeta'): asserts x is SnapshotMeta {
  if (typeof x !== 'object' || x === null) throw invalid(`${what} must be an object`, { what });
  const m = x as Partial<SnapshotMeta>;
  validateOptionalLogId(m.lastLogId, `${what}.lastLogId`);
  validateStoredMembership(m.lastMembership, `${what}.lastMembership`);
  if (typeof m.snapshotId !== 'string') throw invalid(`${what}.snapshotId must be a string`, { what });
  validateWellFormed(m.snapshotId, `${what}.snapshotId`);
  if (Buffer.byteLength(m.snapshotId, 'utf8') > MAX_SNAPSHOT_ID_BYTES) {
    throw invalid(`${what}.snapshotId is longer than ${MAX_SNAPSHOT_ID_BYTES} UTF-8 bytes`, { what });
  }
}

/**
 * Throws INVALID unless `start` and `end` are safe non-negative integers (a read range). A range
 * with `start >= end` is valid and empty.
 */
export function validateRange(start: unknown, end: unknown): asserts start is number {
  validateNumber(start, 'start');
  validateNumber(end, 'end');
}

// ---------------------------------------------------------------------------------------------
// Copies: stores hand out and keep their own copies, so a caller's later mutation changes nothing.

export function cloneLogId(l: LogId): LogId {
  return { leaderId: { term: l.leaderId.term, nodeId: l.leaderId.nodeId }, index: l.index };
}

export function cloneOptionalLogId(l: LogId | null): LogId | null {
  return l === null ? null : cloneLogId(l);
}

export function cloneVote(v: Vote): Vote {
  return { leaderId: { term: v.leaderId.term, nodeId: v.leaderId.nodeId }, committed: v.committed };
}

export function cloneMembership(m: Membership): Membership {
  return { configs: m.configs.map((c) => [...c]), nodes: JSON.parse(JSON.stringify(m.nodes)) as Record<string, unknown> };
}

export function cloneStoredMembership(s: StoredMembership): StoredMembership {
  return { logId: cloneOptionalLogId(s.logId), membership: cloneMembership(s.membership) };
}

export function cloneSnapshotMeta(m: SnapshotMeta): SnapshotMeta {
  return { lastLogId: cloneOptionalLogId(m.lastLogId), lastMembership: cloneStoredMembership(m.lastMembership), snapshotId: m.snapshotId };
}
