// Every error code is documented, and SeglogError keeps the shape callers rely on.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { ERROR_CODES, SeglogError, fromIo, isSeglogError } from '../lib/errors.js';

const docsPath = fileURLToPath(new URL('../../docs/errors.md', import.meta.url));

test('docs/errors.md has a section for every code, and no section for a code that does not exist', async () => {
  const text = await readFile(docsPath, 'utf8');
  const documented = [...text.matchAll(/^## `([A-Z_]+)`/gm)].map((m) => m[1]);
  assert.deepEqual([...documented].sort(), [...ERROR_CODES].sort());
});

test('a SeglogError starts its message with its code and keeps cause and details', () => {
  const cause = new Error('disk on fire');
  const err = new SeglogError('IO_ERROR', 'write /x', { cause, details: { path: '/x' } });
  assert.ok(err instanceof Error);
  assert.equal(err.code, 'IO_ERROR');
  assert.match(err.message, /^IO_ERROR: /);
  assert.equal(err.cause, cause);
  assert.equal(err.details['path'], '/x');
  assert.ok(isSeglogError(err, 'IO_ERROR'));
  assert.ok(!isSeglogError(err, 'CORRUPT'));
  assert.ok(!isSeglogError(cause));
});

test('fromIo maps ENOSPC and EDQUOT to NO_SPACE, other errnos to IO_ERROR, and passes SeglogErrors through', () => {
  const errno = (code: string): Error => Object.assign(new Error(code), { code });
  assert.equal(fromIo(errno('ENOSPC'), 'write', '/a').code, 'NO_SPACE');
  assert.equal(fromIo(errno('EDQUOT'), 'write', '/a').code, 'NO_SPACE');
  assert.equal(fromIo(errno('EIO'), 'write', '/a').code, 'IO_ERROR');
  assert.equal(fromIo(errno('EIO'), 'write', '/a').details['errno'], 'EIO');
  const own = new SeglogError('CORRUPT', 'bad frame');
  assert.equal(fromIo(own, 'read', '/a'), own);
});
