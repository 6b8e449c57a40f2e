// The state behind the Raft snapshot memory benchmark (the target: "a 1 GiB snapshot streams through
// build, install and read with resident memory growing by < 64 MiB").
//
// Owns: the generated key-value state (which keys, how large each value is, what its bytes are),
// the commands that build it, the bench-only plugin that holds it, and the arithmetic of the
// measurement (`snapshotRssGrowth`). Why a plugin of its own: the shipped KV plugin
// (lib/raft/kv.ts) keeps every value in a Map, so with it a 1 GiB state is 1 GiB of heap on the
// leader, and an install restores it into a fresh plugin, another 1 GiB on the follower — the
// growth would be the state's, not the snapshot path's. `GeneratedKvPlugin` takes KV `set`
// commands (`encodeKvCommand`), checks every value against the generator, and keeps only the set
// of keys; its capture regenerates the values lazily and writes exactly the bytes (and even the
// chunks) the KV plugin writes for the same map; its restore parses that stream and checks every
// byte, keeping nothing but the keys. The benchmark builds its state with a compact command
// instead ("add the generated keys [from, from + count)", 9 bytes): applying 1 GiB of `set`
// commands allocates and frees several GiB of buffers, and the C allocator keeps much of that
// freed memory resident (measured: 188 MiB resident after 256 MiB of sets and a full collection,
// against 65 MiB when the allocator gives freed memory back) — memory the measured phases could
// then reuse without the RSS growing, which would hide growth. Guarantees: the state is a pure
// function of its keys; values are 64 KiB–1 MiB; nothing here holds more than one value at a time.

import { corrupt, invalid } from '../../lib/errors.js';
import { ChunkQueue } from '../../lib/raft/chunk-queue.js';
import { decodeKvCommand, encodeKvCommand, type KvReply } from '../../lib/raft/kv.js';
import type { PluginEntry, StateMachinePlugin } from '../../lib/raft/plugin.js';
import type { Entry } from '../../lib/raft/types.js';
import { payload } from '../rawfs.js';

const KIB = 1024;
const MIB = 1024 * 1024;

/** The smallest and the largest value of the generated state. */
export const SNAPSHOT_MIN_VALUE_BYTES = 64 * KIB;
export const SNAPSHOT_MAX_VALUE_BYTES = MIB;

/** Value bytes are windows into this pattern, after an 8-byte header naming the key. */
const PATTERN = payload(2 * MIB, 47);
const KEY_DIGITS = 8;
const KEY_RE = /^k(\d{8})$/;

/** The key of record `i`: `k` and 8 digits, so that ascending keys are ascending indices. */
export function snapshotKey(i: number): string {
  return `k${String(i).padStart(KEY_DIGITS, '0')}`;
}

/** The index of a generated key, or -1 for any other string. */
export function snapshotKeyIndex(key: string): number {
  const m = KEY_RE.exec(key);
  return m === null ? -1 : Number(m[1]);
}

/** A 32-bit integer hash (a finalizer of murmur3), so sizes look random but are reproducible. */
function mix32(i: number): number {
  let x = (i + 0x9e3779b9) >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b) >>> 0;
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35) >>> 0;
  return (x ^ (x >>> 16)) >>> 0;
}

/** The size of value `i`: in [64 KiB, 1 MiB], spread evenly. */
export function snapshotValueBytes(i: number): number {
  return SNAPSHOT_MIN_VALUE_BYTES + (mix32(i) % (SNAPSHOT_MAX_VALUE_BYTES - SNAPSHOT_MIN_VALUE_BYTES + 1));
}

function patternOffset(i: number): number {
  return (mix32(i ^ 0x5bd1e995) % MIB) & ~7;
}

/** The bytes of value `i` (a fresh array): its index and size, then a window of the pattern. */
export function snapshotValue(i: number): Uint8Array {
  const n = snapshotValueBytes(i);
  const out = new Uint8Array(n);
  const view = new DataView(out.buffer);
  view.setUint32(0, i, true);
  view.setUint32(4, n, true);
  const off = patternOffset(i);
  out.set(PATTERN.subarray(off + 8, off + n), 8);
  return out;
}

/** True when `bytes` is exactly value `i` (compared in place: no copy). */
export function isSnapshotValue(i: number, bytes: Uint8Array): boolean {
  const n = snapshotValueBytes(i);
  if (bytes.length !== n) return false;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== i || view.getUint32(4, true) !== n) return false;
  const off = patternOffset(i);
  return Buffer.from(bytes.buffer, bytes.byteOffset + 8, n - 8).equals(PATTERN.subarray(off + 8, off + n));
}

/** How many keys make a state of at least `targetBytes` of values, and their exact total. */
export function snapshotStatePlan(targetBytes: number): { keys: number; valueBytes: number } {
  let keys = 0;
  let valueBytes = 0;
  while (valueBytes < targetBytes) valueBytes += snapshotValueBytes(keys++);
  return { keys, valueBytes };
}

/** The KV command that sets generated key `i` to its value (what a real client would send). */
export function snapshotSetCommand(i: number): Uint8Array {
  return encodeKvCommand({ op: 'set', key: snapshotKey(i), value: snapshotValue(i) });
}

const OP_ADD_GENERATED = 0x47;

/** The compact command: add the generated keys [from, from + count) with their values. */
export function snapshotAddCommand(from: number, count: number): Uint8Array {
  const out = new Uint8Array(9);
  const view = new DataView(out.buffer);
  out[0] = OP_ADD_GENERATED;
  view.setUint32(1, from, true);
  view.setUint32(5, count, true);
  return out;
}

function decodeAddCommand(data: Uint8Array): { from: number; count: number } | null {
  if (data.length !== 9 || data[0] !== OP_ADD_GENERATED) return null;
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  return { from: view.getUint32(1, true), count: view.getUint32(5, true) };
}

/**
 * The batches of entries that build the state of `keys` keys (term 1, node 1, indices from 1):
 * each entry adds `keysPerEntry` keys (the last one fewer), `entriesPerBatch` entries per batch.
 */
export function* snapshotStateBatches(keys: number, keysPerEntry: number, entriesPerBatch: number): Generator<Entry[]> {
  let batch: Entry[] = [];
  let index = 1;
  for (let from = 0; from < keys; from += keysPerEntry) {
    const data = snapshotAddCommand(from, Math.min(keysPerEntry, keys - from));
    batch.push({ logId: { leaderId: { term: 1, nodeId: 1 }, index: index++ }, payload: { type: 'normal', data } });
    if (batch.length === entriesPerBatch) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}

const utf8 = new TextEncoder();

function varintBytes(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return out;
}

/**
 * The generated KV state as a plugin that holds only its keys (see the module header). Its replies
 * are the KV plugin's; a command that is neither the compact one nor a `set`/`delete` of a
 * generated key (with its generated value) is answered `ok: false` and changes nothing.
 */
export class GeneratedKvPlugin implements StateMachinePlugin<KvReply> {
  readonly name = 'bench.generated-kv/1';
  readonly #keys = new Set<number>();
  /** Value bytes checked by `restore` (what an install verified). */
  restoredValueBytes = 0;

  get size(): number {
    return this.#keys.size;
  }

  apply(entry: PluginEntry): KvReply {
    const add = decodeAddCommand(entry.data);
    if (add !== null) {
      if (add.from + add.count > 10 ** KEY_DIGITS) return { ok: false, reason: 'beyond the generated keys' };
      for (let i = add.from; i < add.from + add.count; i++) this.#keys.add(i);
      return { ok: true, previous: null };
    }
    let cmd;
    try {
      cmd = decodeKvCommand(entry.data);
    } catch (err) {
      return { ok: false, reason: err instanceof Error ? err.message : String(err) };
    }
    const i = snapshotKeyIndex(cmd.key);
    if (i < 0) return { ok: false, reason: `${JSON.stringify(cmd.key)} is not a generated key` };
    if (cmd.op === 'set' && !isSnapshotValue(i, cmd.value)) return { ok: false, reason: `the value of ${cmd.key} is not the generated one` };
    const previous = this.#keys.has(i) ? snapshotValue(i) : null;
    if (cmd.op === 'set') this.#keys.add(i);
    else this.#keys.delete(i);
    return { ok: true, previous };
  }

  capture(): AsyncIterable<Uint8Array> {
    // The frozen view: the keys now, ascending (the KV plugin's order: keys compare as strings, and
    // zero-padded keys compare as their indices).
    const view = [...this.#keys].sort((a, b) => a - b);
    return (async function* () {
      for (const i of view) {
        // Every value is ≥ 64 KiB, so the KV plugin writes each record as a header chunk and then
        // the value as a chunk of its own: the same here.
        const k = utf8.encode(snapshotKey(i));
        yield new Uint8Array([...varintBytes(k.length), ...k, ...varintBytes(snapshotValueBytes(i))]);
        yield snapshotValue(i);
      }
    })();
  }

  async restore(chunks: AsyncIterable<Uint8Array>): Promise<void> {
    if (this.#keys.size !== 0) throw invalid('restore needs a fresh plugin');
    const q = new ChunkQueue(chunks, 'generated KV snapshot');
    let previous = -1;
    for (;;) {
      const keyLength = await q.varint();
      if (keyLength === null) break;
      if (keyLength !== KEY_DIGITS + 1) throw corrupt(`generated KV snapshot: a key of ${keyLength} bytes`);
      const kb = await q.take(keyLength);
      const i = kb === null ? -1 : snapshotKeyIndex(new TextDecoder().decode(kb));
      if (i <= previous) throw corrupt('generated KV snapshot: a key out of order, or not a generated one');
      const valueLength = await q.varint();
      if (valueLength !== snapshotValueBytes(i)) throw corrupt(`generated KV snapshot: ${snapshotKey(i)} has ${valueLength} bytes`);
      const value = await q.take(valueLength);
      if (value === null || !isSnapshotValue(i, value)) throw corrupt(`generated KV snapshot: the value of ${snapshotKey(i)} is damaged`);
      this.#keys.add(i);
      this.restoredValueBytes += valueLength;
      previous = i;
    }
  }
}

export function generatedKvPlugin(): GeneratedKvPlugin {
  return new GeneratedKvPlugin();
}

/** What one run of the snapshot measurement answers (bench/stores/child.ts). */
export interface SnapshotRssResult {
  keys: number;
  /** Value bytes of the state. */
  stateBytes: number;
  /** Bytes of the snapshot stream (as read back from the built snapshot). */
  snapshotBytes: number;
  /** Applying the entries that build the state (untimed for the target: set-up). */
  applyMs: number;
  /** getSnapshotBuilder + buildSnapshot + reading its stream to the end. */
  buildMs: number;
  /** The leader's current snapshot streamed into beginReceivingSnapshot's sink, then installSnapshot. */
  installMs: number;
  /** The follower's getCurrentSnapshot read to the end. */
  readMs: number;
  baseRssBytes: number;
  peakBuildRssBytes: number;
  peakInstallRssBytes: number;
  peakReadRssBytes: number;
}

/** The growth one run reports: the highest peak of the three phases over the baseline, in bytes. */
export function snapshotRssGrowth(r: Pick<SnapshotRssResult, 'baseRssBytes' | 'peakBuildRssBytes' | 'peakInstallRssBytes' | 'peakReadRssBytes'>): number {
  return Math.max(r.peakBuildRssBytes, r.peakInstallRssBytes, r.peakReadRssBytes) - r.baseRssBytes;
}
