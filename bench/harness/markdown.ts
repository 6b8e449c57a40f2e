// The Markdown renderer of a benchmark report.
//
// Owns: `renderMarkdown(report)`. Guarantees: every figure appears as median (min–max) over the
// runs, with its unit in the column header; the targets table says MET, NOT MET or NOT MEASURED in
// words; the machine and the load it ran under come first, so a reader judges comparability before
// reading numbers. Text from variants is escaped so a `|` cannot break a table.

import type { BenchReport, SectionResult, TargetCheck, VariantResult } from './report.js';
import { formatBytes, formatNumber, formatStat } from './stats.js';

/** Escapes a cell of a Markdown table. */
export function cell(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
}

export function table(header: string[], rows: string[][]): string {
  const lines = [`| ${header.map(cell).join(' | ')} |`, `|${header.map(() => '---').join('|')}|`];
  for (const r of rows) lines.push(`| ${r.map(cell).join(' | ')} |`);
  return lines.join('\n');
}

/** The status word of a target. */
export function targetStatus(t: TargetCheck): 'MET' | 'NOT MET' | 'NOT MEASURED' {
  if (t.met === null) return 'NOT MEASURED';
  return t.met ? 'MET' : 'NOT MET';
}

function machineSection(report: BenchReport): string {
  const m = report.machine;
  const fs = m.filesystem;
  const rows: string[][] = [
    ['CPU', `${m.cpuModel} × ${m.cpuCount}`],
    ['Memory', formatBytes(m.memoryBytes)],
    ['Kernel', m.kernel],
    ['Node', `${m.node} (${m.arch})`],
    ['libuv thread pool', `${m.uvThreadpoolSize} (${m.uvThreadpoolSizeFrom === 'env' ? 'UV_THREADPOOL_SIZE' : 'default'})`],
    ['Directory measured', m.dir],
    ['Filesystem', fs === null ? 'unknown' : `${fs.type} on ${fs.device}, mounted at ${fs.mountPoint} (${fs.options})`],
    ['Load average (1 min)', `${report.load.start.toFixed(2)} at start, ${report.load.end.toFixed(2)} at end`],
  ];
  return `## Machine\n\n${table(['', ''], rows)}`;
}

/** One sentence on the load, so a report taken on a busy machine says so. */
export function loadNote(report: BenchReport): string | null {
  const peak = Math.max(report.load.start, report.load.end);
  if (peak < report.machine.cpuCount * 0.5) return null;
  return `Taken under load: the 1-minute load average reached ${peak.toFixed(2)} on ${report.machine.cpuCount} CPUs; other processes shared the CPU and the disk, so absolute figures are low and noisy (ratios, being paired by round, suffer less).`;
}

function targetsSection(targets: readonly TargetCheck[]): string {
  const rows = targets.map((t) => [
    t.description,
    t.source,
    `${t.comparator} ${formatNumber(t.threshold)} ${t.unit}`,
    t.measured === null ? '—' : `${formatNumber(t.measured)} ${t.unit}`,
    targetStatus(t),
    t.note,
  ]);
  const met = targets.filter((t) => t.met === true).length;
  const missed = targets.filter((t) => t.met === false).length;
  const open = targets.filter((t) => t.met === null).length;
  return `## Targets\n\n${met} met, ${missed} not met, ${open} not measured in this run.\n\n${table(
    ['Target', 'Of', 'Wanted', 'Measured (median)', 'Status', 'Note'],
    rows,
  )}`;
}

function variantRow(v: VariantResult, withRecords: boolean, withRatio: boolean): string[] {
  const s = v.summary;
  const row = [v.label, formatStat(s.opsPerSec)];
  if (withRecords) row.push(formatStat(s.recordsPerSec));
  row.push(s.mibPerSec.max === 0 ? '—' : formatStat(s.mibPerSec), formatStat(s.p50Us), formatStat(s.p99Us), formatStat(s.p999Us));
  row.push(`${s.samples}${s.minOpsPerRun < 1000 ? '*' : ''}`);
  if (withRatio) row.push(v.ratio === null ? '—' : formatStat(v.ratio.recordsPerSec, '×'));
  return row;
}

export function renderSection(section: SectionResult): string {
  const parts: string[] = [`## ${section.title}`, section.description];
  const b = section.budget;
  if (section.variants.length > 0) {
    const sliced =
      section.slices > 1
        ? `, cut into ${section.slices} slices that alternate with the other variants' slices (rotated likewise) and are merged back into one run`
        : '';
    parts.push(
      `${section.rounds} measured rounds after ${section.warmupRounds} warm-up round(s); in each round every variant ran once, ` +
        `in an order rotated by one per round, for ${formatNumber(b.durationMs)} ms or ${formatNumber(b.maxOps)} operations ` +
        `(unless a variant sets its own cap)${sliced}. Each figure: median (min–max) over the rounds.`,
    );
  }
  if (section.variants.length > 0) {
    const withRecords = section.variants.some((v) => v.runs.some((r) => r.records !== r.ops));
    const withRatio = section.baseline !== null;
    const baseline = section.variants.find((v) => v.id === section.baseline);
    const header = ['Variant', 'ops/s'];
    if (withRecords) header.push('records/s');
    header.push('MiB/s', 'p50 µs', 'p99 µs', 'p99.9 µs', 'ops timed');
    if (withRatio) header.push(`ratio to ${baseline?.label ?? section.baseline}`);
    parts.push(table(header, section.variants.map((v) => variantRow(v, withRecords, withRatio))));
    if (section.variants.some((v) => v.summary.minOpsPerRun < 1000)) {
      parts.push('\\* fewer than 1000 operations in a run: its p99.9 is that run\'s maximum (nearest rank).');
    }
    const notes = section.variants.filter((v) => v.notes.length > 0).map((v) => `- ${v.label}: ${v.notes.join(' ')}`);
    if (notes.length > 0) parts.push(notes.join('\n'));
  }
  if (section.measurements.length > 0) {
    parts.push(
      table(
        ['Measurement', 'median (min–max)', 'runs', 'note'],
        section.measurements.map((m) => [m.label, formatStat(m.summary, ` ${m.unit}`), String(m.summary.n), m.notes.join(' ')]),
      ),
    );
  }
  if (section.notes.length > 0) parts.push(section.notes.map((n) => `- ${n}`).join('\n'));
  return parts.join('\n\n');
}

export function renderMarkdown(report: BenchReport, options: { chart?: string } = {}): string {
  const parts: string[] = [
    '# seglog benchmark report',
    `\`${report.command}\` — started ${report.startedAt}, took ${formatNumber(report.durationMs / 1000)} s` +
      `${report.quick ? ' (quick mode: short runs, figures are indicative only)' : ''}.`,
    'Units: rates per second; throughput in MiB/s (2^20 bytes/s); latencies in µs; percentiles by nearest rank.',
    machineSection(report),
  ];
  const load = loadNote(report);
  if (load !== null) parts.push(`> ${load}`);
  if (report.notes.length > 0) parts.push(report.notes.map((n) => `- ${n}`).join('\n'));
  if (report.targets.length > 0) parts.push(targetsSection(report.targets));
  if (options.chart !== undefined) parts.push(`![latency against throughput](${options.chart})`);
  for (const s of report.sections) parts.push(renderSection(s));
  return `${parts.join('\n\n')}\n`;
}
