// The import graph: dependencies point one way, from the tools down to the base utilities.
//
// Parses the import statements (static `import`/`export ... from`, side-effect `import '...'`,
// dynamic `import('...')`, and `new URL('...', import.meta.url)` loads) of every .ts file under
// lib/, segments/, cells/, bench/ and bin/, and fails when one runs from a lower layer to a higher
// one. The layers, lowest first (docs/layers.md says what each holds):
//   0 base      the files directly under lib/ (errors, assert, clock, deferred): leaf helpers
//   1 fs        lib/fs/
//   2 primitive cells/, segments/
//   3 store     lib/host/, lib/raft/, lib/payloads/, lib/conformance/
//   4 tool      lib/tools/, lib/crash/, bench/, bin/
//   5 entry     lib/index.ts, the package's face: it re-exports every layer, and nothing in the
//               package imports it
// An import within a layer is allowed. A file in no layer fails the test (a new directory must be
// given one here).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const SCANNED = ['lib', 'segments', 'cells', 'bench', 'bin'];

const LAYERS: readonly { name: string; rank: number; holds: (file: string) => boolean }[] = [
  { name: 'entry', rank: 5, holds: (f) => f === 'lib/index.ts' },
  { name: 'base', rank: 0, holds: (f) => /^lib\/[^/]+\.ts$/.test(f) },
  { name: 'fs', rank: 1, holds: (f) => f.startsWith('lib/fs/') },
  { name: 'primitive', rank: 2, holds: (f) => f.startsWith('cells/') || f.startsWith('segments/') },
  { name: 'store', rank: 3, holds: (f) => ['lib/host/', 'lib/raft/', 'lib/payloads/', 'lib/conformance/'].some((d) => f.startsWith(d)) },
  { name: 'tool', rank: 4, holds: (f) => ['lib/tools/', 'lib/crash/', 'bench/', 'bin/'].some((d) => f.startsWith(d)) },
];

function layerOf(file: string): { name: string; rank: number } | null {
  return LAYERS.find((l) => l.holds(file)) ?? null;
}

const STATIC = /^(?:import|export)\b[^;]*?\bfrom\s*['"]([^'"]+)['"]/gm;
const BARE = /^import\s*['"]([^'"]+)['"]/gm;
const DYNAMIC = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;
const URL_LOAD = /\bnew URL\(\s*['"]([^'"]+)['"]\s*,\s*import\.meta\.url\s*\)/g;

/** The relative specifiers `source` imports (comment lines are skipped for the in-code forms). */
export function importSpecifiers(source: string): string[] {
  const out: string[] = [];
  for (const re of [STATIC, BARE]) for (const m of source.matchAll(re)) out.push(m[1]!);
  const code = source
    .split('\n')
    .filter((line) => !/^\s*(\/\/|\*|\/\*)/.test(line))
    .join('\n');
  for (const re of [DYNAMIC, URL_LOAD]) for (const m of code.matchAll(re)) out.push(m[1]!);
  return out.filter((s) => s.startsWith('.'));
}

interface Violation {
  from: string;
  to: string;
  why: string;
}

/** Every import of `files` (path relative to the root → source) that breaks the layering. */
export function layerViolations(files: ReadonlyMap<string, string>): Violation[] {
  const out: Violation[] = [];
  for (const [file, source] of files) {
    const from = layerOf(file);
    if (from === null) {
      out.push({ from: file, to: '', why: `${file} is in no layer (give its directory one in test/import-graph.test.ts)` });
      continue;
    }
    for (const spec of importSpecifiers(source)) {
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)).replace(/\.js$/, '.ts');
      const to = layerOf(target);
      if (to === null) {
        if (SCANNED.some((d) => target.startsWith(d + '/'))) out.push({ from: file, to: target, why: `${target} is in no layer` });
        continue;
      }
      if (to.rank > from.rank) out.push({ from: file, to: target, why: `${file} (${from.name}) imports ${target} (${to.name}), a higher layer` });
    }
  }
  return out;
}

function sourceFiles(): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (rel: string): void => {
    for (const e of readdirSync(path.join(ROOT, rel), { withFileTypes: true })) {
      const p = `${rel}/${e.name}`;
      if (e.isDirectory()) {
        if (e.name !== 'node_modules') walk(p);
      } else if (e.name.endsWith('.ts')) files.set(p, readFileSync(path.join(ROOT, p), 'utf8'));
    }
  };
  for (const d of SCANNED) walk(d);
  return files;
}

test('import graph: no import runs from a lower layer to a higher one', () => {
  const files = sourceFiles();
  assert.ok(files.size > 100, `found ${files.size} source files under ${ROOT}`);
  assert.ok(files.has('segments/log.ts') && files.has('lib/raft/node.ts') && files.has('bin/seglog.ts'));
  let edges = 0;
  for (const source of files.values()) edges += importSpecifiers(source).length;
  assert.ok(edges > 300, `parsed ${edges} relative imports`);
  const violations = layerViolations(files);
  assert.deepEqual(
    violations.map((v) => v.why),
    [],
  );
});

test('import graph: the check catches an upward import, a file in no layer, and every import form', () => {
  const planted = new Map<string, string>([
    ['lib/fs/bad.ts', "import { openSegmentedLog } from '../../segments/index.js';\n"],
    ['segments/bad.ts', "import type {\n  RaftNode,\n} from '../lib/raft/node.js';\nexport { x } from '../lib/crash/index.js';\n"],
    ['cells/bad.ts', "const m = await import('../lib/host/index.js');\n// await import('../bin/seglog.js') in a comment is no import\n"],
    ['lib/errors2.ts', "import '../lib/fs/real.js';\nconst u = new URL('./fs/memory.js', import.meta.url);\n"],
    ['lib/raft/ok.ts', "import { openCell } from '../../cells/index.js';\nimport { realFs } from '../fs/real.js';\nimport { x } from './node.js';\n"],
    ['lib/index.ts', "export * from './tools/verify.js';\n"],
    ['bin/bad.ts', "import { x } from '../lib/index.js';\n"],
    ['lib/newplace/x.ts', "import { x } from '../errors.js';\n"],
  ]);
  const found = layerViolations(planted).map((v) => `${v.from} -> ${v.to}`);
  assert.deepEqual(found, [
    'lib/fs/bad.ts -> segments/index.ts',
    'segments/bad.ts -> lib/raft/node.ts',
    'segments/bad.ts -> lib/crash/index.ts',
    'cells/bad.ts -> lib/host/index.ts',
    'lib/errors2.ts -> lib/fs/real.ts',
    'lib/errors2.ts -> lib/fs/memory.ts',
    'bin/bad.ts -> lib/index.ts',
    'lib/newplace/x.ts -> ',
  ]);
});
