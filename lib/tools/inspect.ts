// `seglog inspect <dir>`: a readable dump of what a data directory holds.
//
// Owns: `inspectDataDirectory` and `runInspectCommand`. It walks the directory with the same
// read-only checkers as `seglog verify` (so it never writes and never opens a store) and prints
// what each one described: cells (slot size, live slot, stamp, value), segmented logs (first and
// end index, generation, each segment with its records, bytes and index), payload stores
// (payloads, sizes, holders), Raft groups and snapshots, host store realms (fence, checkpoint,
// stripes, and each scope's visible kind, name, version, rows and head); then a one-line verdict
// from verify's findings.

import * as path from 'node:path';
import type { FileSystem } from '../fs/types.js';
import { verifyDataDirectory, verifyExitCode, whyNothingToVerify, type VerifyReport } from './verify.js';
import { formatFlags, parseOrExplain, type FlagTable } from './cli.js';
import type { Described } from './verify/context.js';

export interface InspectOptions {
  fs?: FileSystem;
  /** Records of each log to show (default 5). */
  records?: number;
}

export async function inspectDataDirectory(dir: string, options: InspectOptions = {}): Promise<VerifyReport> {
  return verifyDataDirectory(dir, { ...(options.fs === undefined ? {} : { fs: options.fs }), recordPreview: options.records ?? 5 });
}

function rel(root: string, p: string): string {
  const r = path.relative(root, p);
  return r === '' ? '.' : r;
}

function line(root: string, d: Described): string[] {
  const at = rel(root, d.path);
  const v = d as Record<string, unknown>;
  switch (d.kind) {
    case 'cell': {
      if (v['live'] === null || v['live'] === undefined) return [`${at}: ${String(v['role'])}, ${String(v['slotBytes'] ?? '?')}-byte slots, no readable value (${JSON.stringify(v['slots'] ?? v['state'])})`];
      return [
        `${at}: ${String(v['role'])}, ${String(v['slotBytes'])}-byte slots, live slot ${String(v['live'])}, stamp ${String(v['sequence'])}, ` +
          `${String(v['valueBytes'])} byte(s): ${String(v['value'])}`,
      ];
    }
    case 'log': {
      if (v['state'] === 'no manifest') return [`${at}/: ${String(v['role'])} without a manifest (never committed)`];
      const segments = (v['segments'] as Record<string, unknown>[] | undefined) ?? [];
      const out = [
        `${at}/: ${String(v['role'])} [${String(v['firstIndex'])}, ${String(v['endIndex'])}) — ${Number(v['endIndex']) - Number(v['firstIndex'])} record(s), ` +
          `manifest generation ${String(v['generation'])}, ${segments.length} segment(s)`,
      ];
      for (const s of segments) {
        out.push(
          `    ${String(s['name'])}.seg  ${String(s['state']).padEnd(6)}  base ${String(s['base'])}, ${String(s['records'])} record(s), ${String(s['bytes'])} bytes` +
            `${Number(s['zeroBytes']) > 0 ? ` (${String(s['zeroBytes'])} zero-filled)` : ''}${Number(s['deadFrames']) > 0 ? `, ${String(s['deadFrames'])} dead` : ''}; index: ${String(s['index'])}`,
        );
      }
      for (const r of (v['records'] as string[] | undefined) ?? []) out.push(`    record ${r}`);
      return out;
    }
    case 'payloads': {
      const payloads = (v['payloads'] as { digest: string; size: number; holders: number }[] | undefined) ?? [];
      const out = [`${at}/: payload store, store time ${String(v['storeTimeMs'])} ms, ${payloads.length} payload(s)`];
      for (const p of payloads.slice(0, 50)) out.push(`    ${p.digest}  ${p.size} bytes, ${p.holders} holder(s)`);
      if (payloads.length > 50) out.push(`    … ${payloads.length - 50} more`);
      return out;
    }
    case 'raft-group':
      return [
        `${at}/: Raft group ${JSON.stringify(v['id'])}, vote ${voteText(v['vote'])}, committed ${logIdText(v['committed'])}, purged ${logIdText(v['purged'])}, ` +
          `${String(v['entries'])} entries, ${String(v['payloadsNamed'])} payload(s) named` +
          (v['stateMachineFiles'] === false ? ', state machine files not yet made (nothing applied)' : ''),
      ];
    case 'host-realm':
      return hostLines(at, v);
    case 'raft-snapshot':
      return [`${at}: Raft snapshot ${String(v['snapshotId'])} of plugin ${String(v['plugin'])}, last log id ${JSON.stringify(v['lastLogId'])}, ${String(v['stateBytes'])} state bytes`];
    default:
      return [`${at}: ${d.kind} ${JSON.stringify(d)}`];
  }
}

/**
 * A Raft cell's decoded value: undefined when its file does not exist (every group holds its
 * cells from its creation on: verify reports it missing), null when it holds none.
 */
function logIdText(v: unknown): string {
  if (v === undefined) return 'missing';
  if (v === null) return 'none';
  const id = v as { leaderId: { term: number; nodeId: number }; index: number };
  return `index ${id.index} (term ${id.leaderId.term}, node ${id.leaderId.nodeId})`;
}

function voteText(v: unknown): string {
  if (v === undefined) return 'missing';
  if (v === null) return 'none';
  const vote = v as { leaderId: { term: number; nodeId: number }; committed: boolean };
  return `term ${vote.leaderId.term} for node ${vote.leaderId.nodeId} (${vote.committed ? 'committed' : 'not committed'})`;
}

function posText(p: unknown): string {
  if (p === null || p === undefined) return '-';
  const q = p as { seq: number; offset: number; lsn: number };
  return `file ${q.seq} offset ${q.offset} lsn ${q.lsn}`;
}

/** A host store realm: fence, checkpoint, each stripe, then each scope's visible state. */
function hostLines(at: string, v: Record<string, unknown>): string[] {
  if (v['state'] === 'no FORMAT') return [`${at}/: host store realm without FORMAT (a creation that crashed)`];
  const fence = v['fence'] as { highest: number; holderToken: number; holder: string; leaseEnd: number; boot: string } | null;
  const checkpoint = v['checkpoint'] as { round: number } | null;
  const table = v['table'] as { file: string; entries: number; live: number; homed: number } | null | undefined;
  const tableText = table === null || table === undefined ? 'no scope table yet' : `scope table ${table.file.slice(table.file.lastIndexOf('/') + 1)}: ${table.entries} scope(s), ${table.live} live, ${table.homed} homed`;
  const fenceText =
    fence === null
      ? 'no fence token issued'
      : `fence token ${fence.holderToken} held by ${JSON.stringify(fence.holder)} (highest ${fence.highest}, lease ends at ${fence.leaseEnd.toFixed(0)} ms of boot ${fence.boot.slice(0, 8)})`;
  const out = [
    `${at}/: host store realm, ${String(v['stripes'])} stripe(s), realm id ${String(v['realmId'])}; ${fenceText}; ` +
      `checkpoint round ${checkpoint === null ? '?' : String(checkpoint.round)}; ${tableText}; ${String(v['homes'])} home(s)`,
  ];
  for (const s of (v['stripeReports'] as Record<string, unknown>[] | undefined) ?? []) {
    if (s['state'] === 'unreadable') {
      out.push(`    stripe ${String(s['index'])}: unreadable`);
      continue;
    }
    const files = ((s['files'] as { name: string; bytes: number; role: string }[] | undefined) ?? []).map((f) => `${f.name} (${f.bytes} bytes, ${f.role})`);
    out.push(
      `    stripe ${String(s['index'])}: checkpoint ${posText(s['checkpoint'])}; published ${posText(s['published'])}; end ${posText(s['end'])}; ` +
        `from the checkpoint: ${String(s['batches'])} batch(es), ${String(s['fences'])} fence(s), ${String(s['seals'])} seal(s); files: ${files.join(', ')}`,
    );
  }
  const scopes = (v['scopes'] as Record<string, unknown>[] | undefined) ?? [];
  for (const sc of scopes.slice(0, 50)) {
    const home = sc['home'] as { version: number; rowFiles: number; headInBlob: boolean; deleted: boolean } | null;
    const homeText = sc['inTable'] === true ? 'in the scope table' : home === null ? 'no home' : `home at version ${home.version}${home.deleted ? ' (tombstone)' : `, ${home.rowFiles} row file(s)${home.headInBlob ? ', head in a blob' : ''}`}`;
    const state = sc['exists']
      ? `version ${String(sc['version'])}, rows [${String(sc['first'])}, ${String(sc['end'])}) (${String(sc['rows'])}), head ${String(sc['headBytes'])} bytes`
      : sc['deleted']
        ? `deleted at version ${String(sc['version'])}`
        : 'not visible';
    out.push(
      `    ${String(sc['kind'])} ${JSON.stringify(sc['name'])}: ${state}, commit ${JSON.stringify(sc['commitId'])}; ${homeText}; ${String(sc['records'])} record(s) in the stripes`,
    );
  }
  if (scopes.length > 50) out.push(`    … ${scopes.length - 50} more scope(s)`);
  return out;
}

export function formatInspectReport(report: VerifyReport): string {
  const lines = [`seglog inspect ${report.dir}`];
  // Group by directory order: sort by path, a log's manifest cell right after the log line.
  const items = [...report.described].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  for (const d of items) lines.push(...line(report.dir, d));
  for (const u of report.unknown) lines.push(`${rel(report.dir, u)}: unknown format (not inspected)`);
  lines.push(
    report.clean
      ? 'verify: clean'
      : `verify: ${report.errors} error(s), ${report.warnings} warning(s) — run \`seglog verify ${report.dir}\` for them`,
  );
  return lines.join('\n');
}

const FLAGS = {
  records: { type: 'integer', min: 0, help: 'show the first N records of each log (default 5)' },
  json: { type: 'boolean', help: 'print what was found as JSON' },
} as const satisfies FlagTable;

const USAGE = `usage: seglog inspect <dir> [--records N] [--json]

Prints what a data directory holds (cells, logs and their segments, payloads, Raft groups, host
store realms and their scopes), reading only, then verify's verdict in one line.

options:
${formatFlags(FLAGS)}
exit: 0 (1 when verify finds errors, <dir> is missing or holds no seglog store), 2 bad usage`;

export async function runInspectCommand(argv: string[]): Promise<number> {
  const line = parseOrExplain('seglog inspect', USAGE, argv, FLAGS, { name: 'a directory', min: 1, max: 1 });
  if (typeof line === 'number') return line;
  const dir = line.positionals[0]!;
  const found = await whyNothingToVerify(dir, () => inspectDataDirectory(dir, { records: line.values.records ?? 5 }));
  if ('problem' in found) {
    console.error(`seglog inspect: ${found.problem}`);
    return 1;
  }
  const report = found.report;
  console.log(line.values.json ? JSON.stringify(report.described, null, 2) : formatInspectReport(report));
  return verifyExitCode(report) === 1 ? 1 : 0;
}
