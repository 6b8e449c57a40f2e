// The command line as a user meets it: every sub-command's flags parsed by one table-driven parser,
// `--help`, bad arguments, failures, `--version`, `verify`/`inspect` on a path that holds no store,
// and the small things a report shows (Raft cells in `inspect`, HELD's message, the progress bar, the
// chart's labels).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { chartOf } from '../bench/cli.js';
import { Progress } from '../bench/harness/progress.js';
import type { BenchReport } from '../bench/harness/report.js';
import { labelBox, overlapArea, placeLabels } from '../bench/harness/svg.js';
import { HostStoreError } from '../lib/host/errors.js';
import { openRaftNode } from '../lib/raft/node.js';
import { describeFailure, formatFlags, parseCommandLine, UsageError, type FlagTable } from '../lib/tools/cli.js';
import { SeglogError } from '../lib/errors.js';

const exec = promisify(execFile);
const BIN = fileURLToPath(new URL('../bin/seglog.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function seglog(...args: string[]): Promise<Run> {
  return exec(process.execPath, [BIN, ...args], { maxBuffer: 16 << 20 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: typeof err.code === 'number' ? err.code : -1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' }),
  );
}

const FLAGS = {
  dir: { type: 'string', value: 'D', help: 'a directory' },
  records: { type: 'integer', min: 1, help: 'how many (default 1000)' },
  scale: { type: 'number', above: 0, max: 100, help: 'a factor' },
  json: { type: 'boolean', help: 'as JSON' },
  only: { type: 'list', choices: ['a', 'b'], help: 'some of them' },
} as const satisfies FlagTable;

const ANY = { name: 'names', min: 0, max: Infinity };

function usageError(argv: string[], pattern: RegExp, rule = ANY): void {
  assert.throws(() => parseCommandLine(argv, FLAGS, rule), (err: unknown) => err instanceof UsageError && pattern.test(err.message) && !err.message.includes('\n'), argv.join(' '));
}

test('parseCommandLine: typed values, defaults left to the caller, positionals', () => {
  const line = parseCommandLine(['x', '--dir', '/d', '--records=7', '--scale', '0.5', '--json', '--only', 'b,a', 'y'], FLAGS, ANY);
  assert.equal(line.help, false);
  assert.deepEqual(line.values, { dir: '/d', records: 7, scale: 0.5, json: true, only: ['b', 'a'] });
  assert.deepEqual(line.positionals, ['x', 'y']);
  const empty = parseCommandLine([], FLAGS, ANY);
  assert.deepEqual(empty.values, { json: false });
  assert.deepEqual(parseCommandLine(['--', '--json'], FLAGS, ANY).positionals, ['--json']);
  assert.equal(parseCommandLine(['--dir=-x'], FLAGS, ANY).values.dir, '-x');
  assert.equal(parseCommandLine(['--records', 'abc', '--help'], FLAGS, ANY).help, true, '--help wins over a bad value');
  assert.equal(parseCommandLine(['-h'], FLAGS, ANY).help, true);
  assert.equal(parseCommandLine(['--debug'], FLAGS, ANY).help, false, '--debug is accepted by every table');
});

test('parseCommandLine: every bad argument is a one-line UsageError', () => {
  usageError(['--records', '-5'], /^--records takes an integer >= 1, got '-5'$/);
  usageError(['--records', 'abc'], /^--records takes an integer >= 1, got 'abc'$/);
  usageError(['--records', '1.5'], /got '1.5'/);
  usageError(['--records', ''], /got ''/);
  usageError(['--records', '0x10'], /got '0x10'/);
  usageError(['--records', '99999999999999999999'], /got '99999999999999999999'/);
  usageError(['--scale', '0'], /^--scale takes a number > 0 and <= 100, got '0'$/);
  usageError(['--scale', 'NaN'], /--scale takes a number/);
  usageError(['--dir'], /^--dir needs a value$/);
  usageError(['--dir', '--json'], /^--dir needs a value \(for a value that starts with '-', write --dir=--json\)$/);
  usageError(['--bogus'], /^unknown option '--bogus'$/);
  usageError(['-x'], /^unknown option '-x'$/);
  usageError(['--json=1'], /^--json takes no value, got '1'$/);
  usageError(['--dir', 'a', '--dir', 'b'], /^--dir given twice$/);
  usageError(['--only', 'a,c'], /^--only: unknown 'c' \(known: a, b\)$/);
  usageError(['--only', ','], /^--only takes a comma-separated list/);
  usageError(['x'], /^unexpected argument 'x'$/, { name: 'nothing', min: 0, max: 0 });
  usageError([], /^expected a directory$/, { name: 'a directory', min: 1, max: 1 });
  usageError(['a', 'b'], /^unexpected argument 'b' \(expected a directory\)$/, { name: 'a directory', min: 1, max: 1 });
});

test('formatFlags: one aligned line per flag (long help wrapped), the common flags last', () => {
  const text = formatFlags(FLAGS);
  const lines = text.split('\n');
  assert.match(lines[0]!, /^ {2}--dir D +a directory$/);
  assert.ok(lines.some((l) => /^ {2}--only IDS +some of them \(one or more of: a, b\)$/.test(l)));
  assert.match(lines.at(-2)!, /^ {2}-h, --help +print this usage and exit$/);
  assert.match(lines.at(-1)!, /^ {2}--debug +/);
  assert.ok(lines.every((l) => l.length <= 100));
});

test('describeFailure: a file error names its path; a SeglogError its code; never a stack', () => {
  const enoent = Object.assign(new Error("ENOENT: no such file or directory, open '/missing.json'"), { code: 'ENOENT', syscall: 'open', path: '/missing.json', errno: -2 });
  assert.equal(describeFailure(enoent), '/missing.json: no such file or directory (ENOENT, open)');
  assert.equal(describeFailure(new SeglogError('CORRUPT', 'bad checksum', { details: { path: '/d/x.seg' } })), 'CORRUPT: bad checksum (/d/x.seg)');
  assert.equal(describeFailure(new TypeError('x is not a function\n    at y')), 'TypeError: x is not a function');
});

test('every sub-command: --help exits 0 with its usage on stdout; a bad argument is one line, the synopsis, exit 2', async () => {
  for (const command of ['demo', 'bench', 'crash', 'verify', 'inspect']) {
    const help = await seglog(command, '--help');
    assert.equal(help.code, 0, `${command} --help`);
    assert.match(help.stdout, new RegExp(`^usage: seglog ${command}`));
    assert.match(help.stdout, /--debug/);
    assert.equal(help.stderr, '');
    const bad = await seglog(command, '--no-such-flag');
    assert.equal(bad.code, 2, `${command} --no-such-flag`);
    assert.equal(bad.stdout, '');
    const [first, blank, ...rest] = bad.stderr.trimEnd().split('\n');
    assert.equal(first, `seglog ${command}: unknown option '--no-such-flag'`);
    assert.equal(blank, '');
    assert.match(rest[0]!, new RegExp(`^usage: seglog ${command}`));
    assert.match(rest.at(-1)!, new RegExp(`^\\(\`seglog ${command} --help\` for the`));
    assert.doesNotMatch(bad.stderr, /\n\s+at /, 'no stack trace');
  }
  for (const [args, message] of [
    [['demo', '--records', '-5'], "seglog demo: --records takes an integer >= 1, got '-5'"],
    [['demo', '--records', 'abc'], "seglog demo: --records takes an integer >= 1, got 'abc'"],
    [['demo', '--dir'], 'seglog demo: --dir needs a value'],
    [['bench', 'fsync', '--rounds', '2'], "seglog bench: --rounds takes an integer >= 5, got '2'"],
    [['bench', 'nope'], "seglog bench: unknown command 'nope'"],
    [['crash', '--seed'], 'seglog crash: --seed needs a value'],
    [['crash', 'nope'], "seglog crash: unknown workload 'nope' (known: cells, segments, host, raft, payloads)"],
    [['verify'], 'seglog verify: expected a directory'],
    [['inspect', 'a', 'b'], "seglog inspect: unexpected argument 'b' (expected a directory)"],
  ] as const) {
    const r = await seglog(...args);
    assert.equal(r.code, 2, args.join(' '));
    assert.equal(r.stderr.split('\n')[0], message);
  }
  const top = await seglog();
  assert.equal(top.code, 2);
  assert.match(top.stderr, /^usage: seglog <command>/);
  const unknown = await seglog('nope');
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /^seglog: unknown command 'nope'/);
});

test('seglog --version prints the package version; seglog help <command> is <command> --help', async () => {
  const manifest = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
  const v = await seglog('--version');
  assert.equal(v.code, 0);
  assert.equal(v.stdout, `${manifest.version}\n`);
  const h = await seglog('help', 'verify');
  assert.equal(h.code, 0);
  assert.match(h.stdout, /^usage: seglog verify/);
});

test('failures: one line naming the path, exit 1, no stack trace unless --debug', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'seglog-cli-'));
  try {
    const render = await seglog('bench', 'render', '--in', path.join(dir, 'missing.json'));
    assert.equal(render.code, 1);
    assert.equal(render.stderr, `seglog bench: ${path.join(dir, 'missing.json')}: no such file or directory (ENOENT, open)\n`);
    const debug = await seglog('bench', 'render', '--in', path.join(dir, 'missing.json'), '--debug');
    assert.equal(debug.code, 1);
    assert.match(debug.stderr, /\n\s+at /, '--debug shows the stack');
    const fsync = await seglog('bench', 'fsync', '--dir', path.join(dir, 'nonexistent'));
    assert.equal(fsync.code, 1);
    assert.equal(fsync.stderr, `seglog bench: --dir ${path.join(dir, 'nonexistent')}: no such directory\n`);
    await writeFile(path.join(dir, 'not-json.json'), 'hello');
    const notJson = await seglog('bench', 'render', '--in', path.join(dir, 'not-json.json'));
    assert.equal(notJson.code, 1);
    assert.match(notJson.stderr, /^seglog bench render: .*not-json\.json is not JSON/);
    await writeFile(path.join(dir, 'a-file'), 'x');
    const demo = await seglog('demo', '--dir', path.join(dir, 'a-file', 'data'), '--records', '1');
    assert.equal(demo.code, 1);
    assert.equal(demo.stderr, `seglog demo: ${path.join(dir, 'a-file', 'data')}: not a directory (ENOTDIR, mkdir)\n`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('verify and inspect: a missing path is named; a directory with no seglog store says so; both exit 1', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'seglog-cli-'));
  try {
    const missing = path.join(dir, 'nonexistent');
    for (const command of ['verify', 'inspect']) {
      const r = await seglog(command, missing);
      assert.equal(r.code, 1, `${command} of a missing path`);
      assert.equal(r.stderr, `seglog ${command}: ${missing}: no such file or directory\n`);
      assert.equal(r.stdout, '');
    }
    const empty = path.join(dir, 'empty');
    await mkdir(empty);
    const other = path.join(dir, 'other');
    await mkdir(path.join(other, 'sub'), { recursive: true });
    await writeFile(path.join(other, 'notes.md'), '# not a store\n');
    await writeFile(path.join(other, 'sub', 'x.bin'), new Uint8Array(100));
    for (const command of ['verify', 'inspect']) {
      const e = await seglog(command, empty);
      assert.equal(e.code, 1);
      assert.equal(e.stderr, `seglog ${command}: no seglog store at ${empty} (it is empty)\n`);
      const o = await seglog(command, other, '--json');
      assert.equal(o.code, 1);
      assert.equal(o.stderr, `seglog ${command}: no seglog store at ${other} (2 file(s) of no seglog format)\n`);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('inspect: a Raft group whose purged (or committed) cell holds nothing yet says so, never "undefined"', async () => {
  const dir = await mkdtemp(path.join(tmpdir(), 'seglog-cli-'));
  try {
    const node = await openRaftNode(path.join(dir, 'raft'));
    const group = await node.openGroup('g');
    await group.log.saveVote({ leaderId: { term: 2, nodeId: 5 }, committed: false });
    await node.close();
    const r = await seglog('inspect', dir);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /undefined/);
    assert.match(r.stdout, /Raft group "g", vote term 2 for node 5 \(not committed\), committed none, purged none, 0 entries/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("HELD's message gives the remaining lease in whole milliseconds; the field keeps it exact", () => {
  const err = HostStoreError.held('writer-a', 29849.252000000095, 3);
  assert.equal(err.message, 'HELD: the fence is held by writer-a (token 3) for 29850 ms more');
  assert.equal(err.remaining, 29849.252000000095);
});

test('Progress: settled sections carry the bar to 100 %; the time left appears after 10 % and 3 s, at the measured pace', () => {
  let now = 0;
  const written: string[] = [];
  const bar = new Progress(1000, { isTTY: true, columns: 100, write: (s) => written.push(s) }, true, () => now);
  // A section planned at 200 units that advanced only 50 (one report for five repeats).
  now = 1000;
  bar.advance(50, 'section one');
  assert.match(bar.line(), /^\[#-+\] {3}5% 1s section one$/, 'no estimate before 10 %');
  bar.settle(200);
  assert.equal(bar.done, 200);
  assert.match(bar.line(), /^\[#####-+\] {2}20% 1s section one$/, 'no estimate before 3 s');
  now = 4000;
  bar.settle(100); // never back
  assert.equal(bar.done, 200);
  assert.match(bar.line(), /  20% 4s, ~16s left /, '800 units left at 20 ms per unit');
  bar.settle(1000);
  assert.match(bar.line(), /^\[#{24}\] 100% 4s /, 'no estimate at the end');
  bar.settle(5000);
  assert.equal(bar.done, 1000, 'never past the total');
  bar.finish();
  assert.equal(written.at(-1), '\r\x1b[K');
});

test('chart: no point label overlaps another label or a marker (the report behind docs/benchmarks.svg, and a crowded corner)', async () => {
  const report = JSON.parse(await readFile(path.join(ROOT, 'bench', 'results', 'latest.json'), 'utf8')) as BenchReport;
  const svg = chartOf(report);
  assert.ok(svg !== null);
  const texts = [...svg.matchAll(/<text x="([\d.]+)" y="([\d.]+)"(?: text-anchor="(start|middle|end)")? font-size="10"[^>]*>([^<]+)<\/text>/g)];
  assert.ok(texts.length >= 10, 'the chart labels its points');
  const boxes = texts.map((t) => labelBox(Number(t[1]), Number(t[2]), t[4]!.replace('&amp;', '&'), (t[3] ?? 'start') as 'start' | 'middle' | 'end'));
  const markers = [...svg.matchAll(/<circle cx="([\d.]+)" cy="([\d.]+)" r="3.5"/g)].map((c) => ({ x0: Number(c[1]) - 3.5, y0: Number(c[2]) - 3.5, x1: Number(c[1]) + 3.5, y1: Number(c[2]) + 3.5 }));
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) assert.equal(overlapArea(boxes[i]!, boxes[j]!), 0, `labels ${texts[i]![4]} and ${texts[j]![4]} overlap`);
    for (const m of markers) assert.equal(overlapArea(boxes[i]!, m), 0, `label ${texts[i]![4]} covers a marker`);
  }
  // Twelve points within 40 px of each other.
  const crowded = Array.from({ length: 12 }, (_, i) => ({ x: 300 + (i % 4) * 12, y: 200 + Math.floor(i / 4) * 12, text: `×${2 ** i}` }));
  const placed = placeLabels(crowded, { x0: 0, y0: 0, x1: 760, y1: 460 });
  for (let i = 0; i < placed.length; i++) {
    for (let j = i + 1; j < placed.length; j++) assert.equal(overlapArea(placed[i]!.box, placed[j]!.box), 0, `crowded labels ${i} and ${j} overlap`);
  }
  assert.ok(placed.some((p) => p.leader), 'a label set apart from its point gets a leader line');
});
