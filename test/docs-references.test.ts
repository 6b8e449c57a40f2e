// The package's text refers only to what the package carries: every relative link in its Markdown
// resolves to a file of the repository, and no document, comment, help text or saved report points
// at a file outside it (the contracts are in docs/contracts/) or speaks of issue numbers instead of
// saying what a thing is.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Files of the source tree (not node_modules, dist, the peers' install or git's own). */
async function files(dir: string, keep: (name: string) => boolean, out: string[] = []): Promise<string[]> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (['node_modules', 'dist', '.git'].includes(entry.name)) continue;
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) await files(p, keep, out);
    else if (keep(entry.name)) out.push(p);
  }
  return out;
}

/** References that do not resolve for a reader of the package, and words that name no thing. */
const FOREIGN = [
  /API\.md/,
  /\.\.\/shared\//,
  /shared\/(seeds|spec)/,
  /[Ss]eed 00[0-9]/,
  /seed `00[0-9]`/,
  /§/,
  /LESSONS\.md|STYLE\.md/,
  /\b[Ii]ssues? #?\d/,
  /issue-\d/,
  /once the store lands/,
];

test('every relative link in the Markdown files resolves to a file of the repository', async () => {
  const broken: string[] = [];
  for (const file of await files(ROOT, (n) => n.endsWith('.md'))) {
    const text = await readFile(file, 'utf8');
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!.split('#')[0]!;
      if (target === '' || /^[a-z]+:/.test(target)) continue; // an anchor, or a URL
      if (!existsSync(path.resolve(path.dirname(file), target))) broken.push(`${path.relative(ROOT, file)}: ${m[1]}`);
    }
  }
  assert.deepEqual(broken, []);
});

test('no document, comment, help text or saved report refers outside the package or to issue numbers', async () => {
  const keep = (n: string): boolean => /\.(md|ts|json)$/.test(n) && n !== 'package-lock.json';
  const found: string[] = [];
  for (const file of await files(ROOT, keep)) {
    const rel = path.relative(ROOT, file);
    if (rel === path.join('test', 'docs-references.test.ts')) continue; // the patterns themselves
    const lines = (await readFile(file, 'utf8')).split('\n');
    lines.forEach((line, i) => {
      if (FOREIGN.some((re) => re.test(line))) found.push(`${rel}:${i + 1}: ${line.trim().slice(0, 120)}`);
    });
  }
  assert.deepEqual(found, [], `references to sweep (docs/contracts/ holds the contracts):\n${found.join('\n')}`);
});
