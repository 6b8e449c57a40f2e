// The package as a user meets it: packed, installed into a scratch consumer project, used from there.
//
// `npm pack` makes the tarball a registry would serve; a consumer project installs it with
// `npm ci --offline`, its dependencies from tarballs packed out of this checkout's node_modules (the
// versions package-lock.json names), so nothing is fetched. From the consumer: every sub-command's
// `--help`, `--version`, a short real run of the tools, the README's library example compiled and
// run, and a strict type check of a consumer file with no tsconfig, with a tsconfig over the
// @types/node this package is built with, and over @types/node 20.10 (which lacks names newer
// typings have, such as NodeJS.NonSharedUint8Array). Takes a few seconds (no build: it packs dist/
// as `npm test` left it).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

interface Packed {
  filename: string;
  integrity: string;
  files: { path: string }[];
}

interface LockEntry {
  version?: string;
  dev?: boolean;
  optional?: boolean;
  [key: string]: unknown;
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(file: string, args: readonly string[], cwd: string): Promise<Run> {
  return exec(file, [...args], { cwd, maxBuffer: 16 << 20, env: { ...process.env, NO_COLOR: '1' } }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: typeof err.code === 'number' ? err.code : -1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' }),
  );
}

/** `npm pack` of `dirs` (relative to ROOT) into `into`, without lifecycle scripts. */
async function pack(dirs: readonly string[], into: string): Promise<Packed[]> {
  const r = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', into, ...dirs], ROOT);
  assert.equal(r.code, 0, `npm pack failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Packed[];
}

/** The block of TypeScript under the README's "Using it" heading, as written there. */
function readmeExample(readme: string): string {
  const at = readme.indexOf('## Using it');
  assert.ok(at >= 0, 'the README has a "Using it" section');
  const block = /```ts\n([\s\S]*?)```/.exec(readme.slice(at));
  assert.ok(block !== null, 'the "Using it" section holds a ts block');
  return block[1]!;
}

/** Every block of TypeScript in a Markdown text, in order. */
function tsBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** A consumer file that touches the public surface broadly, with no import of Node's own modules. */
const CONSUMER = `
import {
  CommitBatch, FenceTiming, MAX_BATCH_BYTES, SeglogError, isSeglogError, openFsHostStore, openPayloadStore, openRaftNode,
  verifyDataDirectory, type HostStore, type PayloadBody, type RaftLogStorage, type ScopeRef, type SyncPolicy, type VersionedHead,
} from 'seglog';
import { hostStoreConformance, raftStorageConformance } from 'seglog/conformance';

const policies: SyncPolicy[] = ['always', 'none', { everyBytes: 1 << 20 }, { everyMs: 5 }];
const scope: ScopeRef = { kind: 'session', name: 'consumer' };

export async function consume(dir: string): Promise<string> {
  const store: HostStore & { close(): Promise<void> } = await openFsHostStore(dir + '/host', { timing: FenceTiming.default() });
  const { token } = await store.acquireFence('exclusive');
  await store.commit(CommitBatch.tryNew('c-1', token, [{ scope, previous: null, next: 1, head: new Uint8Array([1]), append: [new Uint8Array([2])] }]));
  const head: VersionedHead | null = await store.loadHead(scope);
  await store.close();
  const payloads = await openPayloadStore(dir + '/payloads');
  const body: PayloadBody = (async function* () { yield new Uint8Array([7, 7, 7]); })();
  const info = await payloads.put(body);
  await payloads.close();
  const node = await openRaftNode(dir + '/raft');
  const group = await node.openGroup('g');
  const log: RaftLogStorage = group.log;
  const state = await log.getLogState();
  await node.close();
  const report = await verifyDataDirectory(dir);
  try {
    CommitBatch.tryNew('', 1, []);
  } catch (err) {
    if (!isSeglogError(err, 'INVALID') || !(err instanceof SeglogError)) throw err;
  }
  return [head?.version, info.size, state.lastLogId, report.clean, policies.length, MAX_BATCH_BYTES, typeof hostStoreConformance, typeof raftStorageConformance].join(' ');
}
`;

/** A consumer file that hands Node's streams to the package (needs @types/node). */
const NODE_STREAMS = `
import { Readable } from 'node:stream';
import { openPayloadStore, type PayloadBody } from 'seglog';

export async function putReadable(dir: string): Promise<number> {
  const store = await openPayloadStore(dir);
  const body: PayloadBody = Readable.from([Buffer.from('a Node Readable in binary mode')]);
  const info = await store.put(body);
  await store.put(process.stdin);
  await store.close();
  return info.size;
}
`;

/**
 * A value typed as Node's own NodeJS.ReadableStream (the shape put takes besides an async iterable of
 * bytes). Checked over the @types/node this package is built with only: under TypeScript 7's lib,
 * @types/node 20.10's Buffer is no Uint8Array at all.
 */
const NODE_STREAM_TYPED = `
import { Readable } from 'node:stream';
import { openPayloadStore } from 'seglog';

export async function putTypedStream(dir: string): Promise<number> {
  const store = await openPayloadStore(dir);
  const body: NodeJS.ReadableStream = Readable.from([Buffer.from('typed as NodeJS.ReadableStream')]);
  const info = await store.put(body);
  await store.close();
  return info.size;
}
`;

/** Type errors reported inside the consumer's files or inside the installed package (not @types/node's own). */
function errorsOfOurs(output: string): string[] {
  return output.split('\n').filter((l) => /error TS\d+/.test(l) && !/node_modules[/\\](@types[/\\]node|types-node-20\.10)[/\\]/.test(l));
}

test('the packed package installs offline into a consumer project; its commands, the README example and its types work there', async () => {
  const scratch = await mkdtemp(path.join(tmpdir(), 'seglog-package-'));
  try {
    const manifest = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string; dependencies: Record<string, string> };

    // --- the tarball holds what the commands load, and not the tests ---
    const [packed] = await pack(['.'], scratch);
    assert.ok(packed !== undefined);
    const files = new Set(packed.files.map((f) => f.path));
    for (const f of ['package.json', 'README.md', 'LICENSE', 'dist/bin/seglog.js', 'dist/bench/cli.js', 'dist/bench/harness/svg.js', 'dist/bench/stores/command.js', 'dist/lib/index.js', 'dist/lib/index.d.ts', 'dist/lib/conformance/index.d.ts', 'dist/lib/tools/cli.js', 'docs/usage.md', 'docs/contracts/host-store.md', 'docs/contracts/raft-store.md', 'docs/errors.md', 'lib/index.ts', 'bench/peers/package.json']) {
      assert.ok(files.has(f), `the tarball holds ${f}`);
    }
    assert.ok(![...files].some((f) => f.startsWith('dist/test/') || f.startsWith('test/')), 'the tarball holds no tests');

    // --- the runtime dependencies, packed from node_modules as package-lock.json pins them ---
    const lock = JSON.parse(await readFile(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
    // Optional ones (the native CRC-32's binary for each platform) are packed where this machine
    // installed them; the others keep their lock entries, which npm skips on this platform.
    const nonDev = Object.entries(lock.packages).filter(([key, entry]) => key !== '' && entry.dev !== true);
    const installed = await Promise.all(nonDev.map(([key]) => stat(path.join(ROOT, key)).then(() => true, () => false)));
    const runtime = nonDev.filter(([, entry], i) => entry.optional !== true || installed[i]);
    const skipped = nonDev.filter(([, entry], i) => entry.optional === true && !installed[i]);
    assert.ok(runtime.some(([key]) => key === 'node_modules/fs-native-extensions'), 'fs-native-extensions is a runtime dependency');
    const depsDir = path.join(scratch, 'deps');
    await mkdir(depsDir);
    const depTarballs = await pack(runtime.map(([key]) => `./${key}`), depsDir);
    assert.equal(depTarballs.length, runtime.length);

    // --- a consumer project whose lock file names those tarballs: `npm ci --offline` fetches nothing ---
    const consumer = path.join(scratch, 'consumer');
    await mkdir(consumer);
    const tarball = `file:../${packed.filename}`;
    const packages: Record<string, unknown> = {
      '': { name: 'consumer', version: '1.0.0', dependencies: { [manifest.name]: tarball } },
      [`node_modules/${manifest.name}`]: { ...lock.packages['']!, resolved: tarball, integrity: packed.integrity, devDependencies: undefined },
    };
    runtime.forEach(([key, entry], i) => {
      packages[key] = { ...entry, resolved: `file:../deps/${depTarballs[i]!.filename}`, integrity: depTarballs[i]!.integrity };
    });
    for (const [key, entry] of skipped) packages[key] = entry;
    await writeFile(path.join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module', dependencies: { [manifest.name]: tarball } }, null, 2));
    await writeFile(path.join(consumer, 'package-lock.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', lockfileVersion: 3, requires: true, packages }, null, 2));
    const install = await run('npm', ['ci', '--offline', '--no-audit', '--no-fund'], consumer);
    assert.equal(install.code, 0, `npm ci --offline in the consumer failed:\n${install.stderr}`);

    // --- every sub-command from the installed bin (run by this test's node) ---
    const bin = path.join(consumer, 'node_modules', '.bin', 'seglog');
    const seglog = (...args: string[]): Promise<Run> => run(process.execPath, [bin, ...args], consumer);
    // Independent runs go side by side (the test's time is mostly process starts).
    const data = path.join(consumer, 'demo-data');
    await copyFile(path.join(ROOT, 'bench', 'results', 'latest.json'), path.join(consumer, 'report.json'));
    const commands = ['demo', 'bench', 'crash', 'verify', 'inspect'];
    const [version, top, demo, crash, schema, render, ...helps] = await Promise.all([
      seglog('--version'),
      seglog('--help'),
      seglog('demo', '--dir', data, '--records', '20'),
      seglog('crash', 'cells', '--max-states', '10'),
      seglog('bench', 'schema'),
      seglog('bench', 'render', '--in', 'report.json', '--svg', 'chart.svg'),
      ...commands.map((command) => seglog(command, '--help')),
    ]);
    assert.equal(version!.code, 0);
    assert.equal(version!.stdout.trim(), manifest.version);
    assert.equal(top!.code, 0, top!.stderr);
    commands.forEach((command, i) => {
      const help = helps[i]!;
      assert.match(top!.stdout, new RegExp(`\\n  ${command} `), `seglog --help lists ${command}`);
      assert.equal(help.code, 0, `seglog ${command} --help: ${help.stderr}`);
      assert.match(help.stdout, new RegExp(`^usage: seglog ${command}`), `seglog ${command} --help prints its usage`);
      assert.equal(help.stderr, '');
    });
    assert.equal(demo!.code, 0, demo!.stderr);
    assert.match(demo!.stdout, /appended 20 durable records/);
    assert.equal(crash!.code, 0, crash!.stderr);
    assert.match(crash!.stdout, /no violation/);
    assert.equal(schema!.code, 0, schema!.stderr);
    assert.equal((JSON.parse(schema!.stdout) as { type: string }).type, 'object');
    assert.equal(render!.code, 0, render!.stderr);
    assert.match(await readFile(path.join(consumer, 'chart.svg'), 'utf8'), /^<svg/);
    const [verify, inspect] = await Promise.all([seglog('verify', data), seglog('inspect', data)]);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
    assert.match(verify.stdout, /\nclean$/m);
    assert.equal(inspect.code, 0, inspect.stderr);
    assert.doesNotMatch(inspect.stdout, /undefined/);

    // --- the library: the README's example, compiled strictly and run; a broad consumer file ---
    const example = readmeExample(await readFile(path.join(ROOT, 'README.md'), 'utf8'));
    await writeFile(path.join(consumer, 'readme.ts'), `${example}\nconsole.log(first, new TextDecoder().decode(record));\n`);
    await writeFile(path.join(consumer, 'consumer.ts'), CONSUMER);
    await writeFile(path.join(consumer, 'streams.ts'), NODE_STREAMS);
    await writeFile(path.join(consumer, 'streams-typed.ts'), NODE_STREAM_TYPED);
    // docs/usage.md's examples, each as a script of its own.
    const usage = tsBlocks(await readFile(path.join(ROOT, 'docs', 'usage.md'), 'utf8'));
    assert.ok(usage.length >= 2, 'docs/usage.md has its examples');
    const usageFiles = usage.map((_, i) => `usage-${i + 1}.ts`);
    for (const [i, block] of usage.entries()) await writeFile(path.join(consumer, usageFiles[i]!), `${block}\nexport {};\n`);

    // No tsconfig, no @types/node: TypeScript's defaults plus --strict (run beside the next check,
    // before @types/node is linked in).
    const bare = run(process.execPath, [TSC, '--noEmit', '--strict', 'readme.ts', 'consumer.ts', ...usageFiles], consumer);

    // A strict tsconfig (nodenext, no skipLibCheck) over @types/node as this package is built with.
    const typesDir = path.join(consumer, 'node_modules', '@types');
    await mkdir(typesDir, { recursive: true });
    await symlink(path.join(ROOT, 'node_modules', '@types', 'node'), path.join(typesDir, 'node'), 'dir');
    const tsconfig = {
      compilerOptions: {
        strict: true,
        noUncheckedIndexedAccess: true,
        exactOptionalPropertyTypes: true,
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
        lib: ['es2023'],
        types: ['node'],
        skipLibCheck: false,
        outDir: 'out',
      },
      files: ['readme.ts', 'consumer.ts', 'streams.ts', 'streams-typed.ts', ...usageFiles],
    };
    // Not named tsconfig.json, so that the runs without one never see it.
    await writeFile(path.join(consumer, 'tsconfig.strict.json'), JSON.stringify(tsconfig, null, 2));
    const oldTypes = { ...tsconfig, files: tsconfig.files.filter((f) => f !== 'streams-typed.ts') };
    await writeFile(path.join(consumer, 'tsconfig.old-types.json'), JSON.stringify(oldTypes, null, 2));
    const configured = await run(process.execPath, [TSC, '-p', 'tsconfig.strict.json'], consumer);
    const bareRun = await bare;
    assert.equal(bareRun.code, 0, `tsc without a tsconfig:\n${bareRun.stdout}${bareRun.stderr}`);
    assert.equal(configured.code, 0, `tsc -p (the package's @types/node):\n${configured.stdout}${configured.stderr}`);

    const usageDirs = usageFiles.map((f) => path.join(consumer, f.replace(/\.ts$/, '')));
    for (const d of usageDirs) await mkdir(d);
    const [ran, consumed, ...usageRuns] = await Promise.all([
      run(process.execPath, [path.join('out', 'readme.js')], consumer),
      run(process.execPath, ['--input-type=module', '-e', `import { consume } from './out/consumer.js'; console.log(await consume(${JSON.stringify(path.join(consumer, 'lib-data'))}));`], consumer),
      ...usageFiles.map((f, i) => run(process.execPath, [path.join(consumer, 'out', f.replace(/\.ts$/, '.js'))], usageDirs[i]!)),
    ]);
    assert.equal(ran!.code, 0, `the README example:\n${ran!.stderr}`);
    assert.equal(ran!.stdout.trim(), '0 hello');
    usageRuns.forEach((r, i) => assert.equal(r.code, 0, `docs/usage.md, example ${usageFiles[i]}:\n${r.stderr}`));
    assert.match(usageRuns[1]!.stdout, /^\d+ states checked, 0 violations$/m, "docs/usage.md's crash test runs clean");
    assert.equal(consumed!.code, 0, consumed!.stderr);
    assert.equal(consumed!.stdout.trim(), '1 3  true 4 8388608 function function');
    const after = await seglog('verify', path.join(consumer, 'data'));
    assert.equal(after.code, 0, after.stdout + after.stderr);

    // The same tsconfig over @types/node 20.10 (no NodeJS.NonSharedUint8Array). That version's own
    // files do not pass TypeScript 7's checks; none of the errors may be in the package or the consumer.
    await rm(path.join(typesDir, 'node'));
    await symlink(path.join(ROOT, 'node_modules', 'types-node-20.10'), path.join(typesDir, 'node'), 'dir');
    await writeFile(path.join(consumer, 'planted.ts'), 'export const planted: NodeJS.NonSharedUint8Array = new Uint8Array(1);\n');
    const [old, planted] = await Promise.all([
      run(process.execPath, [TSC, '-p', 'tsconfig.old-types.json', '--noEmit'], consumer),
      run(process.execPath, [TSC, '--noEmit', '--strict', '--types', 'node', '--module', 'nodenext', 'planted.ts'], consumer),
    ]);
    assert.deepEqual(errorsOfOurs(old.stdout + old.stderr), [], 'with @types/node 20.10, no type error in seglog or the consumer');
    assert.ok(old.code === 0 || /node_modules[/\\]types-node-20\.10[/\\].*error TS/.test(old.stdout), `tsc ran over @types/node 20.10:\n${old.stdout}${old.stderr}`);
    // The check can fail: a name that @types/node 20.10 lacks is reported as ours.
    assert.equal(errorsOfOurs(planted.stdout).length, 1, `a planted NodeJS.NonSharedUint8Array is reported:\n${planted.stdout}`);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
});
