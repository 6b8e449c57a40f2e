// Directory locks: one writer per directory, across handles and processes.
//
// Owns: `lockDirectory`. Guarantees: the answer is a handle holding an exclusive try-lock on
// `<dir>/<name>` (created when missing), or a typed error with nothing held: LOCKED when another
// open — in this process or another — holds it, IO_ERROR/NO_SPACE when the file system fails.
// It never waits for a lock (a blocking lock would sit in the libuv thread pool). The kernel drops
// the lock when the holding process dies, so a crash never leaves a directory locked.

import * as path from 'node:path';
import { fromIo, locked } from '../errors.js';
import type { FileHandle, FileSystem } from './types.js';

/** Takes the lock file `name` of `dir`; close the handle to release it. */
export async function lockDirectory(fs: FileSystem, dir: string, name: string): Promise<FileHandle> {
  const lockPath = path.join(dir, name);
  let lock: FileHandle;
  try {
    lock = await fs.open(lockPath, 'create');
  } catch (err) {
    throw fromIo(err, 'open lock file', lockPath);
  }
  let got: boolean;
  try {
    got = await lock.tryLock();
  } catch (err) {
    await lock.close().catch(() => undefined);
    throw fromIo(err, 'lock', lockPath);
  }
  if (!got) {
    await lock.close().catch(() => undefined);
    throw locked(dir);
  }
  return lock;
}
