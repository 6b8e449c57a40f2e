// The host store conformance suite can fail: each deliberately broken store in
// test/support/host-mutant-run.ts breaks one obligation, and the rows that observe that obligation
// must fail against it. Each mutant runs in a child process (the suite registers node:test tests).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { MUTANTS, type Mutant } from './support/host-mutant-run.js';

const runner = fileURLToPath(new URL('./support/host-mutant-run.js', import.meta.url));

/** For each mutant, the rows (title prefixes) that must fail. */
const MUST_FAIL: Record<Mutant, string[]> = {
  'no-fence-at-commit': ['stale fence: a superseded writer', 'takeover with a commit in flight'],
  'split-batch': ['kill during a batch', 'takeover with a commit in flight', 'stalled commit'],
  'js-name-order': ['listings page every visible scope once'],
  'next-on-full-page': ['listings page every visible scope once'],
  'exclusive-is-takeover': ['fence: tokens grow', 'stale fence: an exclusive acquire waits out'],
  'global-commit-lock': ['stalled commit'],
  'renew-needs-live-lease': ['stale fence: the current holder renews'],
  'retry-acts-again': ['retry: a commit id sent again acts once'],
  'ignore-previous': ['same version twice'],
  'row-index-from-zero': ['rows keep stable indices', 'rows load in commit order'],
};

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function childEnv(mutant: Mutant): NodeJS.ProcessEnv {
  // Under `node --test`, NODE_TEST_CONTEXT would make the child report to this runner instead of stdout.
  const env: NodeJS.ProcessEnv = { ...process.env, SEGLOG_HOST_MUTANT: mutant };
  delete env['NODE_TEST_CONTEXT'];
  return env;
}

function failedRows(mutant: Mutant): Promise<string[]> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      // Only the rows that must fail run: the others cost time and prove nothing here.
      ['--test', '--test-reporter=tap', ...MUST_FAIL[mutant].map((prefix) => `--test-name-pattern=^${escapeRegExp(prefix)}`), runner],
      { env: childEnv(mutant), maxBuffer: 64 * 1024 * 1024 },
      (error, stdout) => {
        const failed = [...stdout.matchAll(/^ {4}not ok \d+ - (.*)$/gm)].map((m) => m[1] as string);
        const passed = [...stdout.matchAll(/^ {4}ok \d+ - (.*)$/gm)].length;
        if (failed.length + passed === 0) reject(new Error(`mutant ${mutant} ran no rows: ${String(error)}\n${stdout.slice(0, 2000)}`));
        else resolve(failed);
      },
    );
  });
}

test('the conformance suite catches every mutant of the reference store', async () => {
  const results = new Map<Mutant, string[]>();
  // Two at a time: the machine has two cores.
  const queue = [...MUTANTS];
  await Promise.all(
    [0, 1].map(async () => {
      for (let m = queue.shift(); m !== undefined; m = queue.shift()) results.set(m, await failedRows(m));
    }),
  );
  for (const mutant of MUTANTS) {
    const failed = results.get(mutant) ?? [];
    for (const prefix of MUST_FAIL[mutant]) {
      assert.ok(
        failed.some((title) => title.startsWith(prefix)),
        `mutant ${mutant}: the row "${prefix}…" passed; failed rows: ${JSON.stringify(failed)}`,
      );
    }
  }
});
