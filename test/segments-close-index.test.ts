// The active segment's index at close: written when the session changed the log, left as it is
// when the log was opened known durable with that index exact and nothing changed since (a
// node reopened and closed again without writes writes nothing per group log). The checks read
// the recording layer's trace: which index writes a close makes, and that every reopen's floor
// still holds the acknowledged records.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { MemoryFs } from '../lib/fs/memory.js';
import { openSegmentedLog, type SegmentedLogOptions } from '../segments/index.js';

const DIR = '/log';
const enc = new TextEncoder();

function open(fs: MemoryFs, knownDurable: boolean) {
  return openSegmentedLog(DIR, { fs, ownerLocked: true, knownDurable } as SegmentedLogOptions);
}

/** Index-file writes and truncations recorded since trace position `from`. */
function indexWrites(fs: MemoryFs, from: number): number {
  return (fs.trace ?? []).slice(from).filter((e) => e.path.endsWith('.idx') && (e.kind === 'write' || e.kind === 'truncate' || e.kind === 'writev')).length;
}

test('a close that changed nothing leaves a durable exact index as it is; any change writes it again', async () => {
  const fs = new MemoryFs();
  let log = await open(fs, false);
  await log.append([enc.encode('a'), enc.encode('bb'), enc.encode('ccc')]);
  let from = fs.trace?.length ?? 0;
  await log.close();
  assert.ok(indexWrites(fs, from) > 0, 'the first close writes the active segment index');

  // Reopened known durable, read, closed: no index write.
  log = await open(fs, true);
  assert.deepEqual((await log.read(0, 10)).map((r) => new TextDecoder().decode(r)), ['a', 'bb', 'ccc']);
  from = fs.trace?.length ?? 0;
  await log.close();
  assert.equal(indexWrites(fs, from), 0, 'nothing changed: the index on disk is the one the close would write');

  // Not known durable (an open after a crash): the index read may be in the page cache only.
  log = await open(fs, false);
  from = fs.trace?.length ?? 0;
  await log.close();
  assert.ok(indexWrites(fs, from) > 0, 'an open not known durable writes (and syncs) it at close');

  // A truncation and an append of the same size (the same count and end): written again.
  log = await open(fs, true);
  await log.truncateAfter(2);
  await log.append([enc.encode('ddd')]);
  from = fs.trace?.length ?? 0;
  await log.close();
  assert.ok(indexWrites(fs, from) > 0, 'a changed log writes its index at close');
  log = await open(fs, true);
  assert.deepEqual((await log.read(0, 10)).map((r) => new TextDecoder().decode(r)), ['a', 'bb', 'ddd']);
  await log.close();
});
