// The `seglog crash` command as the crash tests drive it: a run that must fail (a planted mistake),
// and the replay of the reproducer it prints, which must show the crash state and the violation.
//
// Owns: `expectCrashCliFailure`, `expectReplayViolation`. Test support only.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const exec = promisify(execFile);
const BIN = fileURLToPath(new URL('../../bin/seglog.js', import.meta.url));

/** Runs `seglog crash <args>`, which must exit 1; answers its stdout and the reproducer it printed. */
export async function expectCrashCliFailure(args: string[]): Promise<{ stdout: string; reproducer: string }> {
  const failing = await exec(process.execPath, [BIN, 'crash', ...args]).then(
    () => assert.fail('a planted mistake exited 0'),
    (err: { code: number; stdout: string }) => err,
  );
  assert.equal(failing.code, 1);
  const reproducer = /--replay '([^']+)'/.exec(failing.stdout)?.[1];
  assert.ok(reproducer !== undefined, failing.stdout);
  return { stdout: failing.stdout, reproducer };
}

/** Replays `reproducer`, which must exit 1 naming the crash state's operations and the violation. */
export async function expectReplayViolation(reproducer: string): Promise<void> {
  const replay = await exec(process.execPath, [BIN, 'crash', '--replay', reproducer]).then(
    () => assert.fail('the replay of a violation exited 0'),
    (err: { code: number; stdout: string }) => err,
  );
  assert.equal(replay.code, 1);
  assert.match(replay.stdout, /kept|dropped|torn/);
  assert.match(replay.stdout, /VIOLATION/);
}
