// Tests of MemoryFs: POSIX-like behaviour, the page-cache/disk model, images, locks, sever, trace.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import fc from 'fast-check';
import { Content, MemoryFs, PAGE_BYTES } from '../lib/fs/memory.js';
import { realFs } from '../lib/fs/real.js';
import type { FileSystem } from '../lib/fs/types.js';

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s);
const text = (b: Uint8Array | undefined): string | undefined => (b === undefined ? undefined : new TextDecoder().decode(b));

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    return String((err as NodeJS.ErrnoException).code);
  }
  return 'ok';
}

async function readAll(fsys: FileSystem, p: string): Promise<string> {
  const h = await fsys.open(p, 'read');
  const out = new Uint8Array(await h.size());
  await h.read(out, 0);
  await h.close();
  return new TextDecoder().decode(out);
}

test('files and directories behave like POSIX ones', async () => {
  const m = new MemoryFs();
  await m.mkdir('/a/b/c');
  assert.deepEqual((await m.readdir('/a')).sort(), ['b']);
  assert.equal(await code(m.mkdir('/a/b')), 'ok', 'mkdir of an existing directory succeeds');
  const h = await m.open('/a/f', 'create');
  await h.write(bytes('hello world'), 0);
  await h.writev([bytes('HE'), bytes('LLO')], 0);
  assert.equal(await h.size(), 11);
  const into = new Uint8Array(20);
  assert.equal(await h.read(into, 6), 5);
  assert.equal(text(into.subarray(0, 5)), 'world');
  await h.write(bytes('!'), 20);
  assert.equal(await h.size(), 21);
  const gap = new Uint8Array(21);
  await h.read(gap, 0);
  assert.deepEqual([...gap.subarray(11, 20)], new Array(9).fill(0), 'a hole reads as zeros');
  await h.truncate(5);
  assert.equal(await readAll(m, '/a/f'), 'HELLO');
  await h.truncate(8);
  assert.deepEqual([...(await (async () => { const b = new Uint8Array(8); await h.read(b, 0); return b; })()).subarray(5)], [0, 0, 0]);
  await h.close();
  await h.close();

  assert.equal(await code(m.open('/a/missing', 'read')), 'ENOENT');
  assert.equal(await code(m.open('/a/missing', 'write')), 'ENOENT');
  assert.equal(await code(m.open('/a/f', 'create-exclusive')), 'EEXIST');
  assert.equal(await code(m.open('/a/b', 'create')), 'EISDIR');
  assert.equal(await code(m.open('/nope/x', 'create')), 'ENOENT');
  assert.equal(await code(m.open('/a/f/x', 'create')), 'ENOTDIR');
  assert.equal(await code(m.mkdir('/a/f')), 'EEXIST');
  assert.equal(await code(m.unlink('/a/b')), 'EISDIR');
  assert.equal(await code(m.rmdir('/a/f')), 'ENOTDIR');
  assert.equal(await code(m.rmdir('/a/b')), 'ENOTEMPTY');
  assert.equal(await code(m.readdir('/a/f')), 'ENOTDIR');
  assert.equal(await code(m.syncDir('/a/f')), 'ENOTDIR');
  assert.equal(await code(m.link('/a/b', '/a/l')), 'EPERM');
  assert.equal(await code(m.link('/a/f', '/a/f')), 'EEXIST');
  assert.equal(await code(m.rename('/a', '/a/b/c/x')), 'EINVAL');
  assert.equal(await m.stat('/a/zz'), null);
  assert.deepEqual(await m.stat('/a/f'), { size: 8, isDirectory: false });
  assert.deepEqual(await m.stat('/a/b'), { size: 0, isDirectory: true });

  const ro = await m.open('/a/f', 'read');
  assert.equal(await code(ro.write(bytes('x'), 0)), 'EBADF');
  assert.equal(await code(ro.truncate(0)), 'EBADF');
  await ro.close();
  assert.equal(await code(ro.read(new Uint8Array(1), 0)), 'EBADF');

  await m.link('/a/f', '/a/g');
  await m.rename('/a/g', '/a/b/g');
  await m.unlink('/a/f');
  assert.equal(await readAll(m, '/a/b/g'), 'HELLO\0\0\0');
  await m.rmdir('/a/b/c');
  assert.deepEqual(await m.readdir('/a/b'), ['g']);
});

test('rename replaces its target; rename onto another name of the same file does nothing', async () => {
  const m = new MemoryFs();
  const write = async (p: string, s: string): Promise<void> => {
    const h = await m.open(p, 'create');
    await h.truncate(0);
    await h.write(bytes(s), 0);
    await h.close();
  };
  await write('/x', 'new');
  await write('/y', 'old');
  await m.rename('/x', '/y');
  assert.equal(await readAll(m, '/y'), 'new');
  assert.deepEqual(await m.readdir('/'), ['y']);
  await m.link('/y', '/z');
  await m.rename('/y', '/z');
  assert.deepEqual((await m.readdir('/')).sort(), ['y', 'z']);
  await m.mkdir('/d1');
  await m.mkdir('/d2');
  await write('/d2/f', 'x');
  assert.equal(await code(m.rename('/d1', '/d2')), 'ENOTEMPTY');
  assert.equal(await code(m.rename('/y', '/d1')), 'EISDIR');
  assert.equal(await code(m.rename('/d1', '/y')), 'ENOTDIR');
});

test('a written file is durable only after its sync, and its name only after the directory sync', async () => {
  const m = new MemoryFs();
  await m.mkdir('/d');
  assert.deepEqual(m.durableImage(), { dirs: [], files: {} }, 'mkdir is not durable before syncDir of /');
  await m.syncDir('/');
  const h = await m.open('/d/f', 'create');
  await h.write(bytes('v1'), 0);
  assert.deepEqual(m.durableImage(), { dirs: ['/d'], files: {} });
  assert.equal(text(m.currentImage().files['/d/f']), 'v1');
  await h.datasync();
  assert.deepEqual(Object.keys(m.durableImage().files), [], 'the data is durable, the name is not');
  await m.syncDir('/d');
  assert.equal(text(m.durableImage().files['/d/f']), 'v1');
  await h.write(bytes('V2'), 0);
  assert.equal(text(m.durableImage().files['/d/f']), 'v1', 'an unsynced overwrite is not durable');
  await m.syncDir('/d');
  assert.equal(text(m.durableImage().files['/d/f']), 'v1', 'a directory sync does not sync file data');
  await h.sync();
  assert.equal(text(m.durableImage().files['/d/f']), 'V2');
  await h.truncate(1);
  assert.equal(text(m.durableImage().files['/d/f']), 'V2');
  await h.datasync();
  assert.equal(text(m.durableImage().files['/d/f']), 'V');
  await h.close();

  // A rename across directories needs both directory syncs.
  await m.mkdir('/e');
  await m.syncDir('/');
  await m.rename('/d/f', '/e/f');
  await m.syncDir('/e');
  const img = m.durableImage();
  assert.equal(text(img.files['/e/f']), 'V');
  assert.equal(text(img.files['/d/f']), 'V', 'the old name is still durable: /d was not synced');
  assert.equal(img.files['/e/f'], img.files['/d/f'], 'the two names are one file (one object)');
  await m.syncDir('/d');
  assert.deepEqual(Object.keys(m.durableImage().files), ['/e/f']);
  await m.unlink('/e/f');
  assert.deepEqual(Object.keys(m.durableImage().files), ['/e/f']);
  await m.syncDir('/e');
  assert.deepEqual(Object.keys(m.durableImage().files), []);
});

test('an unlinked file keeps its handles; a sync through them still reaches a durable name', async () => {
  const m = new MemoryFs({ image: { files: { '/f': bytes('aaaa') } } });
  const h = await m.open('/f', 'write');
  await m.unlink('/f');
  await h.write(bytes('bb'), 0);
  await h.datasync();
  assert.equal(text(m.durableImage().files['/f']), 'bbaa', 'the unlink is not durable yet');
  assert.equal(m.currentImage().files['/f'], undefined);
  await h.close();
});

test('an image loads as a durable disk; its bytes are never written; hard links are shared objects', async () => {
  const shared = bytes('linked');
  const image = { dirs: ['/empty'], files: { '/a/x': bytes('x-content'), '/a/y': shared, '/b/y2': shared } };
  const m = new MemoryFs({ image });
  assert.deepEqual(m.durableImage(), { dirs: ['/a', '/b', '/empty'], files: image.files });
  const h = await m.open('/a/y', 'write');
  await h.write(bytes('LINK'), 0);
  await h.close();
  assert.equal(text(shared), 'linked', 'the image is untouched');
  assert.equal(await readAll(m, '/b/y2'), 'LINKed', 'both names are one file');
  const cur = m.currentImage();
  assert.equal(cur.files['/a/y'], cur.files['/b/y2']);
  assert.equal(text(m.durableImage().files['/b/y2']), 'linked');
  assert.deepEqual(new MemoryFs({ image: cur }).currentImage(), cur, 'an image round-trips');
});

test('locks: one holder per file across handles and processes; released by close, unlock and sever', async () => {
  const m = new MemoryFs();
  const a = await m.open('/lock', 'create');
  const b = await m.open('/lock', 'create');
  assert.equal(await a.tryLock(), true);
  assert.equal(await a.tryLock(), true, 'the holder may take it again');
  assert.equal(await b.tryLock(), false);
  await a.unlock();
  assert.equal(await b.tryLock(), true);
  await b.close();
  assert.equal(await a.tryLock(), true);
  const other = m.newProcess();
  const c = await other.open('/lock', 'write');
  assert.equal(await c.tryLock(), false);
  m.sever();
  assert.equal(await c.tryLock(), true, 'a killed process drops its locks');
  await c.close();
});

test('sever: every later call rejects with ESEVERED and changes nothing; another process goes on', async () => {
  const m = new MemoryFs();
  const h = await m.open('/f', 'create');
  await h.write(bytes('before'), 0);
  m.sever();
  assert.equal(m.severed, true);
  assert.equal(await code(h.write(bytes('after!'), 0)), 'ESEVERED');
  assert.equal(await code(h.datasync()), 'ESEVERED');
  assert.equal(await code(h.read(new Uint8Array(1), 0)), 'ESEVERED');
  assert.equal(await code(m.open('/g', 'create')), 'ESEVERED');
  assert.equal(await code(m.unlink('/f')), 'ESEVERED');
  assert.equal(await code(m.syncDir('/')), 'ESEVERED');
  assert.equal(await code(h.close()), 'ok', 'closing a dead handle resolves');
  assert.equal(text(m.currentImage().files['/f']), 'before');
  assert.deepEqual(Object.keys(m.currentImage().files), ['/f']);
  const next = m.newProcess();
  assert.equal(await readAll(next, '/f'), 'before', 'the page cache survives a process kill');
  assert.deepEqual(m.durableImage().files, {}, 'but nothing was synced');
  assert.ok(m.trace.some((e) => e.kind === 'sever'));
});

test('the trace records every call in order with inodes, private data copies and markers', async () => {
  const m = new MemoryFs();
  const data = bytes('abc');
  const h = await m.open('/f', 'create');
  await h.write(data, 3);
  data[0] = 0x7a;
  const at = m.mark('ack', { n: 1 });
  await h.datasync();
  await m.rename('/f', '/g');
  await m.syncDir('/');
  await code(m.open('/nope', 'read'));
  const kinds = m.trace.map((e) => e.kind);
  assert.deepEqual(kinds, ['open', 'write', 'mark', 'datasync', 'rename', 'syncDir', 'open']);
  assert.equal(at, 2);
  const [open, write, mark, sync, rename, syncDir, failed] = m.trace;
  assert.ok(open && write && mark && sync && rename && syncDir && failed);
  assert.equal(open.changes?.length, 1, 'the create changed one entry');
  assert.equal(write.inode, open.inode);
  assert.equal(write.offset, 3);
  assert.equal(write.length, 3);
  assert.equal(text(write.data), 'abc', 'the trace keeps the bytes as written');
  assert.deepEqual([mark.label, mark.detail], ['ack', { n: 1 }]);
  assert.deepEqual(rename.changes?.map((c) => c.inode), [null, open.inode], 'a rename is an unlink plus a link');
  assert.equal(syncDir.inode, 0);
  assert.equal(failed.error, 'ENOENT');
  assert.deepEqual(m.trace.map((e) => e.index), [0, 1, 2, 3, 4, 5, 6]);
  const quiet = new MemoryFs({ trace: false });
  const q = await quiet.open('/f', 'create');
  await q.write(data, 0);
  assert.equal(quiet.trace.length, 0);
  assert.equal(quiet.mark('x'), -1);
});

test('Content: copy-on-write pages match a plain byte array under random writes, truncates and clones', () => {
  type Op = { kind: 'write'; offset: number; data: Uint8Array } | { kind: 'truncate'; size: number } | { kind: 'clone' };
  const op = fc.oneof(
    fc.record({ kind: fc.constant('write' as const), offset: fc.nat(3 * PAGE_BYTES), data: fc.uint8Array({ minLength: 0, maxLength: 2 * PAGE_BYTES + 10 }) }),
    fc.record({ kind: fc.constant('truncate' as const), size: fc.nat(4 * PAGE_BYTES) }),
    fc.record({ kind: fc.constant('clone' as const) }),
  );
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 2 * PAGE_BYTES + 100 }), fc.array(op, { maxLength: 30 }), (initial, ops: Op[]) => {
      let model = Uint8Array.from(initial);
      let content = Content.fromBytes(initial);
      const snapshots: [Content, Uint8Array][] = [];
      const frozen = Uint8Array.from(initial);
      for (const o of ops) {
        if (o.kind === 'write') {
          const end = o.offset + o.data.length;
          if (end > model.length && o.data.length > 0) {
            const grown = new Uint8Array(end);
            grown.set(model);
            model = grown;
          }
          if (o.data.length > 0) model.set(o.data, o.offset);
          content.write(o.data, o.offset);
        } else if (o.kind === 'truncate') {
          const next = new Uint8Array(o.size);
          next.set(model.subarray(0, Math.min(o.size, model.length)));
          model = next;
          content.truncate(o.size);
        } else {
          const copy = content.clone();
          snapshots.push([content, model.slice()]);
          content = copy;
        }
        assert.equal(content.size, model.length);
      }
      assert.deepEqual(content.toBytes(), model);
      const tail = new Uint8Array(17);
      const n = content.read(tail, Math.max(0, model.length - 5));
      assert.equal(n, Math.min(17, model.length - Math.max(0, model.length - 5)));
      for (const [snap, bytesThen] of snapshots) assert.deepEqual(snap.toBytes(), bytesThen, 'a cloned version never changes');
      assert.deepEqual(initial, frozen, 'the wrapped bytes are never written');
    }),
    { numRuns: 300 },
  );
});

test('differential: MemoryFs answers like the real file system for random file operations', async (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'seglog-fsdiff-'));
  t.after(() => fs.rmSync(root, { recursive: true, force: true }));
  const names = ['a', 'b', 'd/c'];
  const op = fc.oneof(
    fc.record({ k: fc.constant('write' as const), f: fc.constantFrom(...names), at: fc.nat(9000), len: fc.nat(5000), fill: fc.nat(255) }),
    fc.record({ k: fc.constant('truncate' as const), f: fc.constantFrom(...names), size: fc.nat(9000) }),
    fc.record({ k: fc.constant('rename' as const), f: fc.constantFrom(...names), g: fc.constantFrom(...names) }),
    fc.record({ k: fc.constant('link' as const), f: fc.constantFrom(...names), g: fc.constantFrom(...names) }),
    fc.record({ k: fc.constant('unlink' as const), f: fc.constantFrom(...names) }),
    fc.record({ k: fc.constant('excl' as const), f: fc.constantFrom(...names) }),
  );
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(op, { maxLength: 25 }), async (ops) => {
      const realRoot = path.join(root, String(run++));
      fs.mkdirSync(path.join(realRoot, 'd'), { recursive: true });
      const mem = new MemoryFs({ trace: false });
      await mem.mkdir('/d');
      const sides: [FileSystem, string][] = [
        [realFs, realRoot],
        [mem, ''],
      ];
      for (const o of ops) {
        const results: string[] = [];
        for (const [fsys, base] of sides) {
          const p = (n: string): string => `${base}/${n}`;
          const outcome = await (async (): Promise<string> => {
            try {
              if (o.k === 'write') {
                const h = await fsys.open(p(o.f), 'create');
                await h.write(new Uint8Array(o.len).fill(o.fill), o.at);
                await h.close();
              } else if (o.k === 'truncate') {
                const h = await fsys.open(p(o.f), 'write');
                await h.truncate(o.size);
                await h.close();
              } else if (o.k === 'rename') await fsys.rename(p(o.f), p(o.g));
              else if (o.k === 'link') await fsys.link(p(o.f), p(o.g));
              else if (o.k === 'unlink') await fsys.unlink(p(o.f));
              else {
                const h = await fsys.open(p(o.f), 'create-exclusive');
                await h.close();
              }
              return 'ok';
            } catch (err) {
              return String((err as NodeJS.ErrnoException).code);
            }
          })();
          const contents: string[] = [];
          for (const n of names) {
            const st = await fsys.stat(p(n));
            if (st === null) contents.push(`${n}:-`);
            else {
              const h = await fsys.open(p(n), 'read');
              const buf = new Uint8Array(st.size);
              await h.read(buf, 0);
              await h.close();
              let sum = 0;
              for (const byte of buf) sum = (sum * 31 + byte) >>> 0;
              contents.push(`${n}:${st.size}:${sum}`);
            }
          }
          results.push(`${outcome} ${contents.join(' ')}`);
        }
        assert.equal(results[1], results[0], `after ${JSON.stringify(o)}`);
      }
    }),
    { numRuns: 40 },
  );
});

test('readv fills its buffers as one read into a buffer as long as all of them would, on both layers, at and past the end of the file', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seglog-readv-'));
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 3 * PAGE_BYTES + 17 }),
        fc.array(fc.integer({ min: 0, max: PAGE_BYTES + 5 }), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 0, max: 3 * PAGE_BYTES + 40 }),
        async (fileBytes, lengths, position) => {
          const content = new Uint8Array(fileBytes);
          for (let i = 0; i < fileBytes; i++) content[i] = (i * 31 + 7) & 0xff;
          const mem = new MemoryFs({ trace: false });
          const layers: [string, FileSystem, string][] = [
            ['memory', mem, '/f'],
            ['real', realFs, path.join(dir, 'f')],
          ];
          for (const [name, layer, file] of layers) {
            const h = await layer.open(file, 'create');
            try {
              await h.truncate(0);
              if (fileBytes > 0) await h.write(content, 0);
              const total = lengths.reduce((a, b) => a + b, 0);
              const whole = new Uint8Array(total);
              const wholeRead = await h.read(whole, position);
              const pieces = lengths.map((n) => new Uint8Array(n).fill(0xee));
              const got = await h.readv(pieces, position);
              assert.equal(got, wholeRead, `${name}: bytes read`);
              assert.equal(got, Math.max(0, Math.min(total, fileBytes - position)), `${name}: bytes read`);
              const joined = new Uint8Array(total);
              let at = 0;
              for (const p of pieces) {
                joined.set(p, at);
                at += p.length;
              }
              assert.deepEqual(joined.subarray(0, got), content.subarray(position, position + got), `${name}: bytes`);
            } finally {
              await h.close();
            }
          }
        },
      ),
      { numRuns: 60 },
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
