// Which file-system calls of this thread are in flight: for failure reports of tests (a writer
// that stops making progress says which call it waits on).
//
// Owns: `traceFsCalls()`. Wraps the callback functions of `node:fs` that the real file-system layer
// uses (and re-syncs the ESM bindings), so every call is recorded until its callback runs;
// `pending()` lists those that have not settled, oldest first, with their age. Test support only.

import { createRequire, syncBuiltinESMExports } from 'node:module';

const require = createRequire(import.meta.url);

export function traceFsCalls(): { pending(): string[] } {
  const fs = require('node:fs') as Record<string, unknown>;
  const inFlight = new Map<number, { what: string; since: number }>();
  let next = 0;
  for (const name of ['open', 'close', 'read', 'write', 'writev', 'fdatasync', 'fsync', 'ftruncate', 'fstat', 'readdir', 'rename', 'unlink', 'mkdir']) {
    const original = fs[name] as (...args: unknown[]) => unknown;
    fs[name] = (...args: unknown[]) => {
      const cb = args[args.length - 1];
      if (typeof cb !== 'function') return original(...args);
      const id = next++;
      const first = args[0];
      inFlight.set(id, { what: `${name}(${typeof first === 'string' || typeof first === 'number' ? String(first) : '?'})`, since: performance.now() });
      args[args.length - 1] = (...res: unknown[]) => {
        inFlight.delete(id);
        (cb as (...r: unknown[]) => void)(...res);
      };
      return original(...args);
    };
  }
  syncBuiltinESMExports();
  return {
    pending: () => {
      const now = performance.now();
      return [...inFlight.values()].map((c) => `${Math.round(now - c.since)} ms: ${c.what}`);
    },
  };
}
