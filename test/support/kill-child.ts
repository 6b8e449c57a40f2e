// The writer side of the kill harness (./kill-harness.ts): argument parsing and the ledger.
//
// Owns: `writerArgs()` and `ledger(entry)`. A ledger line is one synchronous write of a JSON line
// to file descriptor 3 (a pipe to the harness): small enough to be atomic, and in the kernel
// before `ledger` returns, so an acknowledgement logged is never lost by a SIGKILL that follows.

import { writeSync } from 'node:fs';
import { seededRandom } from '../../lib/crash/determinism.js';

const LEDGER_FD = 3;

export interface WriterArgs {
  readonly dir: string;
  readonly seed: number;
  readonly life: number;
  /** Seeded by (seed, life): every life makes other choices. */
  readonly random: () => number;
}

export function writerArgs(): WriterArgs {
  const [dir, seed, life] = process.argv.slice(2);
  if (dir === undefined || seed === undefined || life === undefined) throw new Error('usage: <writer> <dir> <seed> <life>');
  // Every module is loaded: from here on a kill can land inside the store's open (its recovery).
  ledger({ t: 'start' });
  return { dir, seed: Number(seed), life: Number(life), random: seededRandom(Number(seed) * 7919 + Number(life)) };
}

export function ledger(entry: { t: string; [key: string]: unknown }): void {
  writeSync(LEDGER_FD, JSON.stringify(entry) + '\n');
}

/**
 * Runs the writer's loop; any error ends the process with a message (the harness reports it). A
 * writer never outlives its harness: a ledger write to a parent that died fails (EPIPE) and ends
 * it, and it ends itself after 60 s whatever happens (the harness kills it within milliseconds).
 */
export function runWriter(main: () => Promise<void>): void {
  setTimeout(() => {
    process.stderr.write('writer was not killed within 60 s\n');
    process.exit(5);
  }, 60_000).unref();
  main().then(
    () => {
      process.stderr.write('writer returned: writers run until killed\n');
      process.exit(3);
    },
    (err: unknown) => {
      process.stderr.write(`writer failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(4);
    },
  );
}
