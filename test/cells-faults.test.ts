// Fault tests of the two-slot cell: EIO/ENOSPC on write, fsync, rename and directory sync, short
// writes, poisoning, and what a reopen sees afterwards (never a torn value).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openCell, cellTempPath } from '../cells/index.js';
import { isSeglogError } from '../lib/errors.js';
import { FaultyFs, type FaultRule } from '../lib/fs/faulty.js';
import { MemoryFs, type DiskImage } from '../lib/fs/memory.js';

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const text = (b: Uint8Array | null): string | null => (b === null ? null : new TextDecoder().decode(b));

async function rejectsWith(p: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isSeglogError(err), `expected a SeglogError, got ${String(err)}`);
    assert.equal(err.code, code);
    return true;
  });
}

async function reopenValue(image: DiskImage): Promise<string | null> {
  const cell = await openCell('/d/cell', { fs: new MemoryFs({ image }) });
  const value = text(await cell.read());
  await cell.close();
  return value;
}

/** A cell holding 'v1' then 'v2' (both acknowledged), on a FaultyFs over a MemoryFs. */
async function setup(): Promise<{ mem: MemoryFs; faulty: FaultyFs }> {
  const mem = new MemoryFs();
  await mem.mkdir('/d');
  await mem.syncDir('/');
  const faulty = new FaultyFs(mem);
  const cell = await openCell('/d/cell', { fs: faulty });
  await cell.write(bytes('v1'));
  await cell.write(bytes('v2'));
  await cell.close();
  return { mem, faulty };
}

const cases: { name: string; rule: FaultRule; code: string }[] = [
  { name: 'EIO on fdatasync', rule: { kind: 'datasync', path: 'cell' }, code: 'IO_ERROR' },
  { name: 'ENOSPC on write', rule: { kind: 'write', path: 'cell', error: 'ENOSPC' }, code: 'NO_SPACE' },
  { name: 'EIO on write', rule: { kind: 'write', path: 'cell' }, code: 'IO_ERROR' },
  { name: 'a short write (ENOSPC after 10 bytes)', rule: { kind: 'write', path: 'cell', shortWrite: 10 }, code: 'NO_SPACE' },
  { name: 'a short write (EIO after 600 bytes)', rule: { kind: 'write', path: 'cell', shortWrite: 600, error: 'EIO' }, code: 'IO_ERROR' },
];

for (const c of cases) {
  test(`${c.name}: the write rejects, the cell is poisoned until reopened, no value is torn`, async () => {
    const { mem, faulty } = await setup();
    const cell = await openCell('/d/cell', { fs: faulty });
    faulty.fail(c.rule);
    const big = 'x'.repeat(1000);
    await rejectsWith(cell.write(bytes(big)), c.code);
    await rejectsWith(cell.write(bytes('v4')), 'POISONED');
    assert.equal(text(await cell.read()), 'v2', 'read keeps the last acknowledged value');
    await cell.close();
    // What a restarted process sees (page cache kept) and what a power loss leaves (only synced).
    const afterKill = await reopenValue(mem.currentImage());
    assert.ok(afterKill === 'v2' || afterKill === big, `after a kill: ${afterKill}`);
    assert.equal(await reopenValue(mem.durableImage()), 'v2');
    // Reopening clears the poison.
    const again = await openCell('/d/cell', { fs: faulty });
    await again.write(bytes('v5'));
    assert.equal(text(await again.read()), 'v5');
    await again.close();
    assert.equal(await reopenValue(mem.durableImage()), 'v5');
  });
}

test('a failure of open or lock of a never-written cell: openCell rejects, holds nothing, and a later open works', async () => {
  for (const kind of ['open', 'lock'] as const) {
    const mem = new MemoryFs();
    await mem.mkdir('/d');
    await mem.syncDir('/');
    const faulty = new FaultyFs(mem);
    faulty.fail({ kind, nth: 1 });
    await rejectsWith(openCell('/d/cell', { fs: faulty }), 'IO_ERROR');
    const cell = await openCell('/d/cell', { fs: faulty });
    await cell.write(bytes('first'));
    await cell.close();
    assert.equal(await reopenValue(mem.durableImage()), 'first');
  }
});

for (const kind of ['truncate', 'write', 'datasync', 'rename', 'syncDir'] as const) {
  test(`a failure of ${kind} during the first write: rejects, poisons, and leaves no half-made cell`, async () => {
    const mem = new MemoryFs();
    await mem.mkdir('/d');
    await mem.syncDir('/');
    const faulty = new FaultyFs(mem);
    const cell = await openCell('/d/cell', { fs: faulty });
    faulty.fail({ kind, nth: 1 });
    await rejectsWith(cell.write(bytes('first')), 'IO_ERROR');
    await rejectsWith(cell.write(bytes('second')), 'POISONED');
    assert.equal(await cell.read(), null);
    await cell.close();
    for (const image of [mem.currentImage(), mem.durableImage()]) {
      const value = await reopenValue(image);
      assert.ok(value === null || value === 'first', `reopened as ${value}`);
    }
    const again = await openCell('/d/cell', { fs: faulty });
    await again.write(bytes('retry'));
    await again.close();
    assert.equal(await reopenValue(mem.durableImage()), 'retry');
    assert.equal(mem.currentImage().files[cellTempPath('/d/cell')], undefined);
  });
}

test('a failed open or read of an existing cell is a typed error', async () => {
  const { faulty } = await setup();
  faulty.fail({ kind: 'open', path: 'cell' });
  await rejectsWith(openCell('/d/cell', { fs: faulty }), 'IO_ERROR');
  faulty.fail({ kind: 'read', path: 'cell' });
  await rejectsWith(openCell('/d/cell', { fs: faulty }), 'IO_ERROR');
  faulty.fail({ kind: 'datasync', path: 'cell' });
  await rejectsWith(openCell('/d/cell', { fs: faulty }), 'IO_ERROR');
  faulty.fail({ kind: 'stat' });
  await rejectsWith(openCell('/d/missing', { fs: faulty }), 'IO_ERROR');
});

test('open makes what it read durable: a restarted process never acts on a value a power loss undoes', async () => {
  for (const at of ['datasync', 'syncDir'] as const) {
    const mem = new MemoryFs();
    await mem.mkdir('/d');
    await mem.syncDir('/');
    const faulty = new FaultyFs(mem);
    const cell = await openCell('/d/cell', { fs: faulty });
    if (at === 'datasync') await cell.write(bytes('v1'));
    const pause = faulty.pause(at);
    const w = cell.write(bytes('v2'));
    await pause.reached;
    await faulty.sever();
    await rejectsWith(w, 'IO_ERROR');
    assert.notEqual(await reopenValue(mem.durableImage()), 'v2', `killed before ${at}: v2 is not durable`);
    const restarted = await openCell('/d/cell', { fs: mem.newProcess() });
    assert.equal(text(await restarted.read()), 'v2', 'the page cache still holds v2');
    assert.equal(await reopenValue(mem.durableImage()), 'v2', 'and open made it durable before answering');
    await restarted.close();
  }
});

test('a stalled fdatasync holds the write (and later reads) until it completes', async () => {
  const { faulty } = await setup();
  const cell = await openCell('/d/cell', { fs: faulty });
  const pause = faulty.pause('datasync', 'cell');
  let written = false;
  const w = cell.write(bytes('v3')).then(() => {
    written = true;
  });
  await pause.reached;
  const r = cell.read();
  await new Promise((res) => setImmediate(res));
  assert.equal(written, false);
  pause.release();
  await w;
  assert.equal(text(await r), 'v3');
  await cell.close();
});

test('a process killed during a write leaves the old value or the new one', async () => {
  for (const at of ['write', 'datasync'] as const) {
    const { mem, faulty } = await setup();
    const cell = await openCell('/d/cell', { fs: faulty });
    const pause = faulty.pause(at, 'cell');
    const w = cell.write(bytes('v3'));
    await pause.reached;
    await faulty.sever();
    await rejectsWith(w, 'IO_ERROR');
    const value = await reopenValue(mem.currentImage());
    assert.equal(value, at === 'write' ? 'v2' : 'v3', `killed at ${at}`);
    assert.equal(await reopenValue(mem.durableImage()), 'v2');
  }
});
