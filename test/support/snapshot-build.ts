// A private copy of the compiled package for tests that spawn writer processes.
//
// Owns: `snapshotBuild(root, writer, probes)`. Copies dist/ (lib, cells, segments, test/support)
// into `root` and answers the path of `writer` (a file under test/support/) there, so that writers
// load modules that no concurrent rebuild of dist/ rewrites under them (a rebuild rewrites files in
// place). A copy caught mid-rebuild fails to load (the `probes`, paths under dist/, are imported
// in a throwaway process to find out) and is made again.

import { spawn } from 'node:child_process';
import { cp, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The compiled package (dist/), two levels up from dist/test/support/. */
const DIST = fileURLToPath(new URL('../..', import.meta.url));

export async function snapshotBuild(root: string, writer: string, probes: readonly string[]): Promise<string> {
  for (let attempt = 0; ; attempt++) {
    const dir = join(root, `dist-${attempt}`);
    for (const part of ['lib', 'cells', 'segments', 'test/support']) await cp(join(DIST, part), join(dir, part), { recursive: true });
    await symlink(join(DIST, '..', 'node_modules'), join(dir, 'node_modules'), 'dir');
    // The copy has no package.json above it: without this one, Node before 20.19 (no module
    // syntax detection) would load its .js files as CommonJS.
    await writeFile(join(dir, 'package.json'), '{ "type": "module" }\n');
    const loads = await new Promise<boolean>((resolve) => {
      const code = probes.map((p) => `await import(${JSON.stringify(join(dir, p))});`).join(' ');
      spawn(process.execPath, ['--input-type=module', '-e', code], { stdio: 'ignore' }).on('exit', (c) => resolve(c === 0));
    });
    if (loads) return join(dir, 'test', 'support', writer);
    if (attempt >= 5) throw new Error('could not snapshot a loadable build of the package');
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}
