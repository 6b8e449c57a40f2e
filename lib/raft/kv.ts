// Key-value plugin: the example state machine the package ships (a map from string keys to bytes).
//
// Owns: the KV command encoding (what a normal entry's `data` holds), the KV reply, and the KV
// snapshot format. Guarantees: `apply` is deterministic and never throws — a malformed command is
// answered `{ ok: false }` and changes nothing; a snapshot lists every key once in ascending order,
// so equal maps give equal bytes; `restore` streams, bounds every length it reads before it
// allocates, and refuses (CORRUPT) anything a capture could not have written.
//
// Command (a normal entry's data):
//   set     0x01, keyLength (varint), key (UTF-8), value (every remaining byte)
//   delete  0x02, keyLength (varint), key (UTF-8)
// Snapshot state (the plugin's part of a snapshot stream), repeated until the stream ends:
//   keyLength (varint), key (UTF-8), valueLength (varint), value

import { corrupt, invalid } from '../errors.js';
import { ByteReader, ByteWriter, copyBytes } from './codec.js';
import { ChunkQueue } from './chunk-queue.js';
import type { PluginEntry, StateMachinePlugin } from './plugin.js';
import { isWellFormed } from './types.js';
import { decodeUtf8Exact } from '../text.js';

/** The largest key, in UTF-8 bytes. */
export const MAX_KV_KEY_BYTES = 4096;
/** The largest value. */
export const MAX_KV_VALUE_BYTES = 64 * 1024 * 1024;
/** The snapshot format name the KV plugin records. */
export const KV_PLUGIN_NAME = 'seglog.kv/1';

const OP_SET = 0x01;
const OP_DELETE = 0x02;
const SNAPSHOT_CHUNK_BYTES = 64 * 1024;

const utf8Encoder = new TextEncoder();

/** A KV command: set a key to a value, or delete a key. */
export type KvCommand = { op: 'set'; key: string; value: Uint8Array } | { op: 'delete'; key: string };

/**
 * The reply to one applied command: the key's previous value (`null` when it had none), or, for
 * a command that is not a valid KV command, `ok: false` and the reason (nothing changed).
 */
export type KvReply = { ok: true; previous: Uint8Array | null } | { ok: false; reason: string };

function keyBytes(key: unknown): Uint8Array {
  if (typeof key !== 'string') throw invalid('a KV key must be a string');
  if (!isWellFormed(key)) throw invalid('a KV key must be well-formed UTF-16 (no lone surrogate)');
  const bytes = utf8Encoder.encode(key);
  if (bytes.length > MAX_KV_KEY_BYTES) throw invalid(`a KV key is at most ${MAX_KV_KEY_BYTES} UTF-8 bytes`);
  return bytes;
}

/** Encodes a command as a normal entry's data. INVALID for a bad key or a too-large value. */
export function encodeKvCommand(cmd: KvCommand): Uint8Array {
  const key = keyBytes(cmd.key);
  if (cmd.op === 'set') {
    if (!(cmd.value instanceof Uint8Array)) throw invalid('a KV value must be a Uint8Array');
    if (cmd.value.length > MAX_KV_VALUE_BYTES) throw invalid(`a KV value is at most ${MAX_KV_VALUE_BYTES} bytes`);
    return new ByteWriter(key.length + cmd.value.length + 12).u8(OP_SET).varint(key.length).bytes(key).bytes(cmd.value).finish();
  }
  if (cmd.op === 'delete') return new ByteWriter(key.length + 12).u8(OP_DELETE).varint(key.length).bytes(key).finish();
  throw invalid(`unknown KV op ${String((cmd as { op?: unknown }).op)}`);
}

/** Decodes a command; CORRUPT when `data` is not one (the plugin answers such data `ok: false`). */
export function decodeKvCommand(data: Uint8Array): KvCommand {
  const r = new ByteReader(data, 'KV command');
  const op = r.u8();
  const keyLength = r.varint();
  if (keyLength > MAX_KV_KEY_BYTES) r.fail(`key of ${keyLength} bytes exceeds ${MAX_KV_KEY_BYTES}`);
  let key: string;
  try {
    key = decodeUtf8Exact(r.view(keyLength));
  } catch (err) {
    if (err instanceof TypeError) return r.fail('key is not UTF-8');
    throw err;
  }
  if (op === OP_SET) {
    if (r.remaining > MAX_KV_VALUE_BYTES) r.fail(`value of ${r.remaining} bytes exceeds ${MAX_KV_VALUE_BYTES}`);
    return { op: 'set', key, value: r.bytes(r.remaining) };
  }
  if (op === OP_DELETE) {
    r.end();
    return { op: 'delete', key };
  }
  return r.fail(`unknown op ${op}`);
}

/** The key-value map. Values handed out are copies; values kept are never mutated. */
export class KvPlugin implements StateMachinePlugin<KvReply> {
  readonly name = KV_PLUGIN_NAME;
  private readonly map = new Map<string, Uint8Array>();

  apply(entry: PluginEntry): KvReply {
    let cmd: KvCommand;
    try {
      cmd = decodeKvCommand(entry.data);
    } catch (err) {
      return { ok: false, reason: err instanceof Error ? err.message : String(err) };
    }
    const previous = this.map.get(cmd.key) ?? null;
    if (cmd.op === 'set') this.map.set(cmd.key, cmd.value); // decode copied the value
    else this.map.delete(cmd.key);
    return { ok: true, previous: previous === null ? null : copyBytes(previous) };
  }

  /** The value of `key` (a copy), or null. */
  get(key: string): Uint8Array | null {
    const v = this.map.get(key);
    return v === undefined ? null : copyBytes(v);
  }

  /** How many keys the map holds. */
  get size(): number {
    return this.map.size;
  }

  /** The keys in ascending order. */
  keys(): string[] {
    return [...this.map.keys()].sort(compareKeys);
  }

  capture(): AsyncIterable<Uint8Array> {
    // The frozen view: a shallow copy (values are never mutated in place), sorted now.
    const view = [...this.map.entries()].sort((a, b) => compareKeys(a[0], b[0]));
    return (async function* () {
      let w = new ByteWriter(SNAPSHOT_CHUNK_BYTES);
      let size = 0;
      for (const [key, value] of view) {
        const k = utf8Encoder.encode(key);
        w.varint(k.length).bytes(k).varint(value.length);
        size += k.length + 16;
        if (value.length >= SNAPSHOT_CHUNK_BYTES) {
          // A large value goes out as its own chunk rather than through the writer's buffer.
          yield w.finish();
          yield copyBytes(value);
          w = new ByteWriter(SNAPSHOT_CHUNK_BYTES);
          size = 0;
          continue;
        }
        w.bytes(value);
        size += value.length;
        if (size >= SNAPSHOT_CHUNK_BYTES) {
          yield w.finish();
          w = new ByteWriter(SNAPSHOT_CHUNK_BYTES);
          size = 0;
        }
      }
      if (size > 0) yield w.finish();
    })();
  }

  async restore(chunks: AsyncIterable<Uint8Array>): Promise<void> {
    if (this.map.size !== 0) throw invalid('restore needs a fresh KV plugin');
    const q = new ChunkQueue(chunks, 'KV snapshot');
    let previousKey: string | null = null;
    for (;;) {
      const keyLength = await q.varint();
      if (keyLength === null) break;
      if (keyLength > MAX_KV_KEY_BYTES) throw corrupt(`KV snapshot: key of ${keyLength} bytes exceeds ${MAX_KV_KEY_BYTES}`);
      const kb = await q.take(keyLength);
      if (kb === null) throw corrupt('KV snapshot ends inside a key');
      let key: string;
      try {
        key = decodeUtf8Exact(kb);
      } catch {
        throw corrupt('KV snapshot: a key is not UTF-8');
      }
      if (previousKey !== null && compareKeys(previousKey, key) >= 0) throw corrupt('KV snapshot: keys are not in strictly ascending order');
      const valueLength = await q.varint();
      if (valueLength === null) throw corrupt('KV snapshot ends before a value');
      if (valueLength > MAX_KV_VALUE_BYTES) throw corrupt(`KV snapshot: value of ${valueLength} bytes exceeds ${MAX_KV_VALUE_BYTES}`);
      const value = await q.take(valueLength);
      if (value === null) throw corrupt('KV snapshot ends inside a value');
      this.map.set(key, value);
      previousKey = key;
    }
  }
}

function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The KV plugin factory, for a state machine's `plugin` option. */
export function kvPlugin(): KvPlugin {
  return new KvPlugin();
}
