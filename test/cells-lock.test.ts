// One handle per cell: `openCell` takes the cell file's lock (its temporary file's while the cell
// was never written), so a second handle — in this process or another — is refused with LOCKED
// and cannot lose an acknowledged write; closing the first lets the next open in; lock-free
// readers are never refused.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { openCell, type Cell } from '../cells/index.js';
import { isSeglogError } from '../lib/errors.js';
import { MemoryFs } from '../lib/fs/memory.js';
import { peekCell } from '../lib/host/fs/realm.js';

const te = new TextEncoder();
const text = (b: Uint8Array | null): string | null => (b === null ? null : Buffer.from(b).toString());

async function rejectsLocked(p: Promise<Cell>, what: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isSeglogError(err, 'LOCKED'), `${what}: expected LOCKED, got ${String(err)}`);
    return true;
  });
}

test('a second handle on a cell in this process is LOCKED, written or not; closing the first lets it in', async () => {
  const m = new MemoryFs({ image: { dirs: ['/d'], files: {} }, trace: false });
  // Never written: the first handle holds the cell's temporary file.
  const first = await openCell('/d/c', { fs: m });
  await rejectsLocked(openCell('/d/c', { fs: m }), 'a never-written cell');
  await rejectsLocked(openCell('/d/c', { fs: m.newProcess() }), 'a never-written cell, another process view');
  await first.write(te.encode('one'));
  await rejectsLocked(openCell('/d/c', { fs: m }), 'after its first write');
  await first.write(te.encode('two'));
  await rejectsLocked(openCell('/d/c', { fs: m.newProcess() }), 'another process view');
  await first.close();
  const second = await openCell('/d/c', { fs: m });
  assert.equal(text(await second.read()), 'two');
  await second.write(te.encode('three'));
  await second.close();
  const third = await openCell('/d/c', { fs: m });
  assert.equal(text(await third.read()), 'three');
  await third.close();
});

test('two handles cannot lose an acknowledged write: the second never opens', async () => {
  const m = new MemoryFs({ image: { dirs: ['/d'], files: {} }, trace: false });
  const setup = await openCell('/d/c', { fs: m });
  await setup.write(te.encode('v0'));
  await setup.close();
  const a = await openCell('/d/c', { fs: m });
  let b: Cell | null = null;
  try {
    b = await openCell('/d/c', { fs: m });
  } catch (err) {
    assert.ok(isSeglogError(err, 'LOCKED'), String(err));
  }
  if (b !== null) {
    // What two unlocked handles do: each writes from its own idea of the live slot.
    await a.write(te.encode('a1'));
    await a.write(te.encode('a2'));
    await b.write(te.encode('b1 (acknowledged)'));
    await b.close();
  }
  await a.close();
  const again = await openCell('/d/c', { fs: m });
  const value = text(await again.read());
  await again.close();
  assert.equal(b, null, `a second handle opened; the cell then reads ${JSON.stringify(value)} although "b1 (acknowledged)" was the last write acknowledged`);
});

test('a lock-free reader is not refused while a handle holds the cell', async () => {
  const m = new MemoryFs({ image: { dirs: ['/d'], files: {} }, trace: false });
  const cell = await openCell('/d/c', { fs: m });
  assert.equal(await peekCell(m, '/d/c'), null);
  await cell.write(te.encode('held'));
  assert.equal(text(await peekCell(m, '/d/c')), 'held');
  await cell.close();
});

test('a cell held by another process is LOCKED here; its lock goes with the process', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seglog-cell-lock-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const module = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'cells', 'index.js');
  for (const written of [false, true]) {
    const file = path.join(dir, written ? 'written' : 'never-written');
    if (written) {
      const c = await openCell(file);
      await c.write(te.encode('x'));
      await c.close();
    }
    // The child opens the cell, says so, and waits on stdin; killing it releases the lock.
    const child = spawn(
      process.execPath,
      ['--input-type=module', '-e', `const { openCell } = await import(${JSON.stringify(module)}); await openCell(${JSON.stringify(file)}); process.stdout.write('open\\n'); process.stdin.resume();`],
      { stdio: ['pipe', 'pipe', 'inherit'] },
    );
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => (d.toString().includes('open') ? resolve() : undefined));
      child.on('exit', (code) => reject(new Error(`child exited (${code}) before opening`)));
    });
    try {
      await rejectsLocked(openCell(file), written ? 'held by another process' : 'never written, held by another process');
    } finally {
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    }
    const mine = await openCell(file);
    await mine.write(te.encode('mine'));
    await mine.close();
  }
});
