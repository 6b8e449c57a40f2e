// Snapshot stream format: the bytes of a snapshot, as built, stored, sent and installed.
//
// Owns: the framing of a snapshot's bytes around the plugin's state stream, `restoreSnapshot` (a
// stream read back into a fresh plugin, checked end to end: the memory and the file-system state
// machines both restore through it) and `snapshotIdFor`. The same bytes are the
// snapshot file of a durable store and the `data` stream a leader sends, so a receiver can check
// everything it installs. Guarantees: the writer and the reader stream (neither holds more than
// one frame, at most MAX_SNAPSHOT_FRAME_BYTES); the reader refuses, with CORRUPT, a stream whose
// magic, header, framing or checksum is wrong, or that is cut short or extended — and it checks
// the checksum only at the end, so a consumer must drain the body (or call `finish`) before it
// trusts what it read.
//
// Layout:
//   magic        8 bytes  "SGLSNAP" 0x01
//   headerLength u32 LE   (≤ MAX_SNAPSHOT_HEADER_BYTES)
//   header       plugin name (varint length + UTF-8), lastLogId (opt LogId),
//                lastMembership (StoredMembership), snapshotId (varint length + UTF-8)
//   frames       u32 LE length (1..MAX_SNAPSHOT_FRAME_BYTES), then that many bytes of plugin state
//   end          u32 LE 0
//   trailer      u32 LE CRC-32 (zlib) of every byte before it

import { crc32 } from 'node:zlib';

import { corrupt, invalid, type SeglogError } from '../errors.js';
import { ChunkQueue } from './chunk-queue.js';
import { ByteReader, ByteWriter, readOptionalLogId, readStoredMembership, writeOptionalLogId, writeStoredMembership } from './codec.js';
import type { StateMachinePlugin, StateMachinePluginFactory } from './plugin.js';
import { isWellFormed, type LogId, type SnapshotMeta } from './types.js';
import { decodeUtf8Exact } from '../text.js';

/** The largest frame of plugin state; larger chunks are split. */
export const MAX_SNAPSHOT_FRAME_BYTES = 16 * 1024 * 1024;
/** The largest header (metadata and plugin name). */
export const MAX_SNAPSHOT_HEADER_BYTES = 4 * 1024 * 1024;

const MAGIC = new Uint8Array([0x53, 0x47, 0x4c, 0x53, 0x4e, 0x41, 0x50, 0x01]); // "SGLSNAP\x01"
const utf8Encoder = new TextEncoder();

/** What a snapshot stream says about itself. */
export interface SnapshotHeader {
  /** The name of the state-machine plugin whose state the frames hold. */
  plugin: string;
  meta: SnapshotMeta;
}

function u32(n: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n, true);
  return b;
}

/** Encodes a (validated) header. */
export function encodeSnapshotHeader(h: SnapshotHeader): Uint8Array {
  const name = utf8Encoder.encode(h.plugin);
  const id = utf8Encoder.encode(h.meta.snapshotId);
  const w = new ByteWriter(128).varint(name.length).bytes(name);
  writeOptionalLogId(w, h.meta.lastLogId);
  writeStoredMembership(w, h.meta.lastMembership);
  w.varint(id.length).bytes(id);
  return w.finish();
}

function decodeSnapshotHeader(bytes: Uint8Array): SnapshotHeader {
  const r = new ByteReader(bytes, 'snapshot header');
  const text = (n: number): string => {
    try {
      return decodeUtf8Exact(r.view(n));
    } catch (err) {
      if (err instanceof TypeError) return r.fail('a name is not UTF-8');
      throw err;
    }
  };
  const plugin = text(r.varint());
  const lastLogId = readOptionalLogId(r);
  const lastMembership = readStoredMembership(r);
  const snapshotId = text(r.varint());
  r.end();
  return { plugin, meta: { lastLogId, lastMembership, snapshotId } };
}

/**
 * Frames a plugin's state stream into snapshot bytes. Streams: it holds one chunk of `body` at a
 * time (chunks larger than a frame are cut into frames without copying).
 */
export async function* writeSnapshotStream(header: SnapshotHeader, body: AsyncIterable<Uint8Array>): AsyncGenerator<Uint8Array> {
  const headerBytes = encodeSnapshotHeader(header);
  if (headerBytes.length > MAX_SNAPSHOT_HEADER_BYTES) {
    throw corrupt(`snapshot header of ${headerBytes.length} bytes exceeds ${MAX_SNAPSHOT_HEADER_BYTES}`);
  }
  const head = new ByteWriter(headerBytes.length + 12).bytes(MAGIC).bytes(u32(headerBytes.length)).bytes(headerBytes).finish();
  let crc = crc32(head);
  yield head;
  for await (const chunk of body) {
    for (let at = 0; at < chunk.length; at += MAX_SNAPSHOT_FRAME_BYTES) {
      const part = chunk.subarray(at, Math.min(chunk.length, at + MAX_SNAPSHOT_FRAME_BYTES));
      const len = u32(part.length);
      crc = crc32(part, crc32(len, crc));
      yield len;
      yield part;
    }
  }
  const end = u32(0);
  crc = crc32(end, crc);
  yield end;
  yield u32(crc);
}

/** A snapshot stream being read: its header, then its body, then `finish`. */
export interface SnapshotStreamReader {
  readonly header: SnapshotHeader;
  /** The plugin state, frame by frame (each a fresh copy). Iterate it at most once. */
  readonly body: AsyncIterable<Uint8Array>;
  /**
   * Reads whatever of the body was not consumed, then checks the end marker, the checksum and that
   * nothing follows. Resolves only for an intact stream; CORRUPT otherwise. `leftover` is the
   * number of body bytes the consumer did not read.
   */
  finish(): Promise<{ leftover: number }>;
}

/** Opens a snapshot stream: reads and checks the header; the body follows lazily. */
export async function readSnapshotStream(source: AsyncIterable<Uint8Array>): Promise<SnapshotStreamReader> {
  const q = new ChunkQueue(source, 'snapshot stream');
  const cut = (where: string): never => {
    throw corrupt(`snapshot stream ends inside its ${where}`);
  };
  const magic = (await q.take(MAGIC.length)) ?? cut('magic');
  if (!magic.every((b, i) => b === MAGIC[i])) throw corrupt('snapshot stream has a wrong magic number');
  const lenBytes = (await q.take(4)) ?? cut('header length');
  const headerLength = new DataView(lenBytes.buffer).getUint32(0, true);
  if (headerLength > MAX_SNAPSHOT_HEADER_BYTES) throw corrupt(`snapshot header length ${headerLength} exceeds ${MAX_SNAPSHOT_HEADER_BYTES}`);
  const headerBytes = (await q.take(headerLength)) ?? cut('header');
  const header = decodeSnapshotHeader(headerBytes);
  let crc = crc32(headerBytes, crc32(lenBytes, crc32(magic)));

  let bodyEnded = false;
  let bodyStarted = false;
  let leftover = 0;

  /** The next frame, or null at the end marker (which is then checked along with the trailer). */
  const nextFrame = async (): Promise<Uint8Array | null> => {
    const len = (await q.take(4)) ?? cut('frames');
    const n = new DataView(len.buffer).getUint32(0, true);
    crc = crc32(len, crc);
    if (n === 0) {
      const trailer = (await q.take(4)) ?? cut('trailer');
      const stored = new DataView(trailer.buffer).getUint32(0, true);
      if (stored !== crc) throw corrupt('snapshot stream fails its checksum');
      if (!(await q.atEnd())) throw corrupt('snapshot stream has bytes after its trailer');
      bodyEnded = true;
      return null;
    }
    if (n > MAX_SNAPSHOT_FRAME_BYTES) throw corrupt(`snapshot frame length ${n} exceeds ${MAX_SNAPSHOT_FRAME_BYTES}`);
    const frame = (await q.take(n)) ?? cut('frames');
    crc = crc32(frame, crc);
    return frame;
  };

  const body: AsyncIterable<Uint8Array> = {
    [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
      if (bodyStarted) throw new TypeError('a snapshot body can be iterated once');
      bodyStarted = true;
      return {
        async next(): Promise<IteratorResult<Uint8Array>> {
          if (bodyEnded) return { done: true, value: undefined };
          const frame = await nextFrame();
          return frame === null ? { done: true, value: undefined } : { done: false, value: frame };
        },
        async return(): Promise<IteratorResult<Uint8Array>> {
          // The consumer stopped early: `finish` drains and checks the rest.
          return { done: true, value: undefined };
        },
      };
    },
  };

  return {
    header,
    body,
    async finish() {
      try {
        bodyStarted = true;
        while (!bodyEnded) {
          const frame = await nextFrame();
          if (frame !== null) leftover += frame.length;
        }
        return { leftover };
      } finally {
        await q.close();
      }
    },
  };
}

/**
 * A fresh plugin from `factory`; INVALID unless its name is a non-empty well-formed string (every
 * snapshot records the name, and one that does not survive UTF-8 would never match again).
 */
export function newPlugin<P extends StateMachinePlugin<unknown>>(factory: StateMachinePluginFactory<P>): P {
  const plugin = factory();
  if (typeof plugin?.name !== 'string' || plugin.name.length === 0 || !isWellFormed(plugin.name)) {
    throw invalid(`a state machine plugin needs a non-empty, well-formed name, got ${JSON.stringify(plugin?.name)}`);
  }
  return plugin;
}

/**
 * Reads a snapshot stream into a fresh plugin: checks the plugin name and the embedded metadata
 * against `expect` when given, restores, and checks the end marker, the checksum and that the
 * plugin read everything (CORRUPT) before answering. A name or metadata that differs is INVALID
 * only once the whole stream has passed its checksum (read through, not restored); a stream that
 * fails it is CORRUPT, so damage to the header is never reported as another plugin's snapshot.
 */
export async function restoreSnapshot<P extends StateMachinePlugin<unknown>>(
  factory: StateMachinePluginFactory<P>,
  source: AsyncIterable<Uint8Array>,
  expect: SnapshotMeta | null,
): Promise<{ plugin: P; meta: SnapshotMeta }> {
  const plugin = newPlugin(factory);
  const reader = await readSnapshotStream(source);
  let mismatch: SeglogError | null = null;
  if (reader.header.plugin !== plugin.name) {
    mismatch = invalid(`snapshot was written by plugin ${JSON.stringify(reader.header.plugin)}, this state machine runs ${JSON.stringify(plugin.name)}`);
  } else if (expect !== null) {
    const want = encodeSnapshotHeader({ plugin: plugin.name, meta: expect });
    const got = encodeSnapshotHeader(reader.header);
    if (Buffer.compare(want, got) !== 0) mismatch = invalid('snapshot bytes carry other metadata than the meta given to installSnapshot');
  }
  if (mismatch !== null) {
    // A name or metadata that differs may be a damaged header: the checksum, at the stream's end,
    // says which. Damage is CORRUPT; only an intact stream of another plugin (or meta) is INVALID.
    await reader.finish();
    throw mismatch;
  }
  try {
    await plugin.restore(reader.body);
  } catch (err) {
    // A restore that failed on damaged framing reports the framing; anything else passes through.
    await reader.finish();
    throw err;
  }
  const { leftover } = await reader.finish();
  if (leftover > 0) throw corrupt(`plugin ${plugin.name} left ${leftover} snapshot bytes unread`);
  return { plugin, meta: reader.header.meta };
}

/** The id of the snapshot of sequence number `seq` ending at `lastLogId`. */
export function snapshotIdFor(lastLogId: LogId | null, seq: number): string {
  const at = lastLogId === null ? 'none' : `${lastLogId.leaderId.term}-${lastLogId.leaderId.nodeId}-${lastLogId.index}`;
  return `${at}-${seq}`;
}
