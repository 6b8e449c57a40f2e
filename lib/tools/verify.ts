// `seglog verify <dir>`: checks a data directory offline, without writing to it.
//
// Owns: `verifyDataDirectory` (the library form), `runVerifyCommand`, the report and its text.
// The checks live in ./verify/ (one module per format; ./verify/walk.ts says which runs where).
// Guarantees:
// - Read only: every file access goes through a FileSystem that refuses anything but reads
//   (./verify/context.ts ReadOnlyFs): no store is opened (their opens repair and sync).
// - Every byte of every file of a known format is covered by a check, except the ranges the report
//   lists as unchecked (cell slot bytes past the value: never read by anyone; docs/tools.md).
// - Bounded memory: files are read in windows of at most 1 MiB (or one record), lengths checked
//   against their bounds before they size a buffer.
// Exit codes: 0 clean; 1 errors (damage a store cannot read past, or lost data), and a path that
// is missing or holds no seglog store; 3 warnings only (what a crash can leave, or damage the
// stores tolerate); 2 bad usage.

import * as path from 'node:path';
import type { FileSystem } from '../fs/types.js';
import { realFs } from '../fs/real.js';
import { VerifyContext, type Described, type Finding, type UncheckedRange, type VerifyCounts } from './verify/context.js';
import { walkDataDirectory } from './verify/walk.js';
import { formatFlags, parseOrExplain, type FlagTable } from './cli.js';

export type { Finding, UncheckedRange, VerifyCounts, Described, Severity } from './verify/context.js';
export { STORE_CHECKERS, type StoreChecker } from './verify/walk.js';

export interface VerifyOptions {
  /** The file-system layer (default: the real one); only its read calls are used. */
  fs?: FileSystem;
  /** Records of each log to read for `described` (inspect); default 0. */
  recordPreview?: number;
}

export interface VerifyReport {
  readonly dir: string;
  /** No error and no warning. */
  readonly clean: boolean;
  readonly errors: number;
  readonly warnings: number;
  readonly findings: readonly Finding[];
  readonly counts: Readonly<VerifyCounts>;
  /** Files of no known format (listed, not checked). */
  readonly unknown: readonly string[];
  /** Byte ranges no check covers, and why a change there is harmless. */
  readonly unchecked: readonly UncheckedRange[];
  /** What each checked thing is (what `seglog inspect` prints). */
  readonly described: readonly Described[];
}

/** Checks `dir` (or one file) offline; never writes. See the module header. */
export async function verifyDataDirectory(dir: string, options: VerifyOptions = {}): Promise<VerifyReport> {
  const ctx = new VerifyContext(options.fs ?? realFs, options.recordPreview === undefined ? {} : { recordPreview: options.recordPreview });
  const root = path.resolve(dir);
  await walkDataDirectory(ctx, root);
  const errors = ctx.findings.filter((f) => f.severity === 'error').length;
  const warnings = ctx.findings.length - errors;
  return {
    dir: root,
    clean: ctx.findings.length === 0,
    errors,
    warnings,
    findings: ctx.findings,
    counts: ctx.counts,
    unknown: ctx.unknown,
    unchecked: ctx.unchecked,
    described: ctx.described,
  };
}

/** The exit code a report stands for. */
export function verifyExitCode(report: VerifyReport): number {
  return report.errors > 0 ? 1 : report.warnings > 0 ? 3 : 0;
}

function bytesText(n: number): string {
  if (n < 10_000) return `${n} B`;
  if (n < 10_000_000) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function formatVerifyReport(report: VerifyReport): string {
  const c = report.counts;
  const lines = [`seglog verify ${report.dir}`];
  const parts = [`${c.cells} cell(s)`, `${c.logs} log(s) with ${c.segments} segment(s), ${c.records} record(s), ${c.indexes} index file(s)`];
  if (c.payloads > 0 || c.refFiles > 0) parts.push(`${c.payloads} payload(s) of ${bytesText(c.payloadBytes)}, ${c.refFiles} refcount file(s)`);
  if (c.raftGroups > 0) parts.push(`${c.raftGroups} Raft group(s)`);
  if (c.hostRealms > 0) {
    parts.push(
      `${c.hostRealms} host realm(s) with ${c.hostStripeFiles} stripe file(s), ${c.hostRecords} record(s) from the checkpoint on, ` +
        `${c.hostHomes} scope home(s) with ${c.hostRowFiles} row file(s), ${c.hostRows} row(s)`,
    );
  }
  lines.push(`  checked ${c.files} file(s), ${bytesText(c.bytes)}: ${parts.join('; ')}`);
  if (report.unchecked.length > 0) {
    const total = report.unchecked.reduce((n, r) => n + (r.to - r.from), 0);
    lines.push(`  not covered by any check: ${bytesText(total)} in ${report.unchecked.length} range(s): cell slot bytes past their values (never read)`);
  }
  for (const u of report.unknown) lines.push(`  unknown file, not checked: ${u}`);
  for (const f of report.findings) {
    lines.push(`${f.severity === 'error' ? 'ERROR  ' : 'WARNING'} ${f.path}${f.offset === undefined ? '' : ` @${f.offset}`}: ${f.message}`);
  }
  lines.push(
    report.clean
      ? 'clean'
      : `${report.errors} error(s), ${report.warnings} warning(s)` +
          (report.errors === 0 ? ' (warnings only: what a crash can leave, or damage the stores tolerate; opening the store repairs most)' : ''),
  );
  return lines.join('\n');
}

const FLAGS = {
  json: { type: 'boolean', help: 'print the report as JSON, with its exit code' },
} as const satisfies FlagTable;

const USAGE = `usage: seglog verify <dir> [--json]

Checks a data directory offline without writing to it: every checksum, cell, segment, index,
segment chain (manifest against files), payload digest and reference, Raft log entry, host store
realm (stripes and their published notes, checkpoint, fence, scope homes and their row files).
<dir> may also be one file (a cell, a Raft snapshot).

options:
${formatFlags(FLAGS)}
exit: 0 clean, 1 errors (or no seglog store at <dir>, or <dir> missing), 3 warnings only, 2 bad usage`;

/** True when the report found at least one thing of a seglog format (a store, a log, a cell...). */
export function holdsStore(report: VerifyReport): boolean {
  return report.described.length > 0;
}

/**
 * What `seglog verify` and `seglog inspect` say before they report: that `dir` is missing, or that
 * it holds nothing seglog wrote; otherwise the report.
 */
export async function whyNothingToVerify(dir: string, report: () => Promise<VerifyReport>): Promise<{ problem: string } | { report: VerifyReport }> {
  const root = path.resolve(dir);
  if ((await realFs.stat(root)) === null) return { problem: `${root}: no such file or directory` };
  const r = await report();
  if (!holdsStore(r)) {
    const unknown = r.unknown.length === 0 ? 'it is empty' : `${r.unknown.length} file(s) of no seglog format`;
    return { problem: `no seglog store at ${root} (${unknown})` };
  }
  return { report: r };
}

export async function runVerifyCommand(argv: string[]): Promise<number> {
  const line = parseOrExplain('seglog verify', USAGE, argv, FLAGS, { name: 'a directory', min: 1, max: 1 });
  if (typeof line === 'number') return line;
  const found = await whyNothingToVerify(line.positionals[0]!, () => verifyDataDirectory(line.positionals[0]!));
  if ('problem' in found) {
    console.error(`seglog verify: ${found.problem}`);
    return 1;
  }
  const report = found.report;
  if (line.values.json) {
    const { described: _described, ...rest } = report;
    console.log(JSON.stringify({ ...rest, exitCode: verifyExitCode(report) }, null, 2));
  } else {
    console.log(formatVerifyReport(report));
  }
  return verifyExitCode(report);
}
