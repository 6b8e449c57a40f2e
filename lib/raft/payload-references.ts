// Payload references from the logs of a node that is not open: what `seglog verify` and the
// payload store's collector must know.
//
// Owns: `listPayloadReferences`, `rebuildPayloadReferences` and `PayloadReference`. The records
// are read by `liveRecordChunks` (group-recovery.ts), the reader recovery's payload check uses,
// from just after each group's purged id. Guarantees: streams (one chunk of records in memory at
// a time); each group's log is opened, and so locked, only for its scan.

import * as path from 'node:path';
import { peekCell } from '../../cells/index.js';
import { openSegmentedLog } from '../../segments/index.js';
import { fromIo } from '../errors.js';
import { realFs } from '../fs/real.js';
import type { FileSystem } from '../fs/types.js';
import { decodeEntryNames, decodeOptionalLogId } from './codec.js';
import { GROUPS_DIR, LOG_DIR, PURGED_CELL, isGroupDirName, readGroupFile } from './fs-layout.js';
import { liveRecordChunks } from './group-recovery.js';
import { RAFT_DEFAULT_MAX_ENTRY_BYTES } from './node-options.js';
import { nextIndex, type LogId } from './types.js';

/** One live log record naming a payload. */
export interface PayloadReference {
  group: string;
  logId: LogId;
  digest: string;
}

/**
 * Every payload reference held by the logs of the node in `dir` (which must not be open: each
 * group's log is opened, and locked, for the scan): for each live record — after the purged id —
 * that names payloads, one reference per digest, group by group in index order. Streams: holds
 * one chunk of records at a time.
 */
export async function* listPayloadReferences(dir: string, options: { fs?: FileSystem; maxEntryBytes?: number } = {}): AsyncGenerator<PayloadReference> {
  const fs = options.fs ?? realFs;
  const groupsDir = path.join(dir, GROUPS_DIR);
  let names: string[];
  try {
    names = await fs.readdir(groupsDir);
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return;
    throw fromIo(err, 'list', groupsDir);
  }
  for (const name of names.sort()) {
    if (!isGroupDirName(name)) continue;
    const groupDir = path.join(groupsDir, name);
    const group = await readGroupFile(fs, groupDir);
    // Read, not opened: a scan takes no cell lock and leaves nothing behind.
    const bytes = await peekCell(fs, path.join(groupDir, PURGED_CELL));
    const purged: LogId | null = bytes === null ? null : decodeOptionalLogId(bytes);
    const log = await openSegmentedLog(path.join(groupDir, LOG_DIR), { fs, maxRecordBytes: options.maxEntryBytes ?? RAFT_DEFAULT_MAX_ENTRY_BYTES });
    try {
      for await (const recs of liveRecordChunks(log, Math.max(log.firstIndex, nextIndex(purged)))) {
        for (const rec of recs) {
          const { logId, digests } = decodeEntryNames(rec);
          for (const digest of digests) yield { group, logId, digest };
        }
      }
    } finally {
      await log.close();
    }
  }
}

/**
 * The payload references of the node's logs, gathered by digest: what the payload store's
 * collector must keep (see {@link listPayloadReferences}; memory: one entry per reference).
 */
export async function rebuildPayloadReferences(dir: string, options: { fs?: FileSystem } = {}): Promise<Map<string, { group: string; logId: LogId }[]>> {
  const out = new Map<string, { group: string; logId: LogId }[]>();
  for await (const ref of listPayloadReferences(dir, options)) {
    let list = out.get(ref.digest);
    if (list === undefined) out.set(ref.digest, (list = []));
    list.push({ group: ref.group, logId: ref.logId });
  }
  return out;
}
