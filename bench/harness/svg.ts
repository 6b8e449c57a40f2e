// The SVG chart renderer: latency against throughput, one series per flush granularity.
//
// Owns: `renderChart(series, options)` and `chartSeriesFromSection`. Guarantees: hand-written SVG
// 1.1 with no dependency and no script; both axes logarithmic (decade ticks) because throughput and
// latency span orders of magnitude across concurrency levels; every text is XML-escaped; points
// with a non-positive coordinate (which a log axis cannot show) are dropped and counted in a comment;
// point labels are placed where they overlap no other label and no marker when such a place exists
// near the point (`placeLabels`; a label set apart from its point gets a thin leader line).

import type { SectionResult } from './report.js';
import { formatNumber } from './stats.js';

export interface ChartPoint {
  x: number;
  y: number;
  /** Shown beside the point (e.g. "×16" for 16 concurrent appenders). */
  label?: string;
}

export interface ChartSeries {
  name: string;
  points: ChartPoint[];
}

export interface ChartOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  width?: number;
  height?: number;
}

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];

export function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&apos;');
}

/** The decades [10^a, 10^b] that cover [lo, hi] (lo, hi > 0). */
export function decadeRange(lo: number, hi: number): [number, number] {
  const a = Math.floor(Math.log10(lo));
  let b = Math.ceil(Math.log10(hi));
  if (b === a) b = a + 1;
  return [a, b];
}

function fmt(n: number): string {
  return Number(n.toFixed(2)).toString();
}

function tickLabel(exp: number): string {
  const v = 10 ** exp;
  if (v >= 1e6) return `${formatNumber(v / 1e6)}M`;
  if (v >= 1e3) return `${formatNumber(v / 1e3)}k`;
  return formatNumber(v);
}

/** An axis-aligned box in SVG user units. */
export interface Box {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

/** A label to place beside the point (x, y), in SVG user units. */
export interface LabelRequest {
  x: number;
  y: number;
  text: string;
}

export interface PlacedLabel {
  /** The text's anchor point and alignment (SVG `x`, `y` (baseline) and `text-anchor`). */
  x: number;
  y: number;
  anchor: 'start' | 'middle' | 'end';
  box: Box;
  /** True when the label sits away from its point (draw a leader line). */
  leader: boolean;
}

const LABEL_FONT = 10;
const MARKER_R = 3.5;

/** The box a text of `LABEL_FONT` px takes (an estimate: 0.62 em per character, cap height 0.8 em). */
export function labelBox(x: number, y: number, text: string, anchor: PlacedLabel['anchor']): Box {
  const w = [...text].length * LABEL_FONT * 0.62;
  const x0 = anchor === 'start' ? x : anchor === 'end' ? x - w : x - w / 2;
  return { x0, y0: y - LABEL_FONT * 0.8, x1: x0 + w, y1: y + LABEL_FONT * 0.2 };
}

/** The area two boxes share (0 when they do not overlap). */
export function overlapArea(a: Box, b: Box): number {
  const w = Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0);
  const h = Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0);
  return w > 0 && h > 0 ? w * h : 0;
}

/**
 * Places each label at the first of a ring of spots around its point (right-above first, then the
 * other corners and sides, each ring farther out) where its box overlaps no label placed before, no
 * marker and nothing outside `frame`; when no spot is free, at the spot of least overlap. Greedy, in
 * the order given; deterministic.
 */
export function placeLabels(requests: readonly LabelRequest[], frame: Box): PlacedLabel[] {
  const markers: Box[] = requests.map((r) => ({ x0: r.x - MARKER_R - 1, y0: r.y - MARKER_R - 1, x1: r.x + MARKER_R + 1, y1: r.y + MARKER_R + 1 }));
  const placed: PlacedLabel[] = [];
  for (const r of requests) {
    let best: { label: PlacedLabel; cost: number } | null = null;
    for (const d of [6, 12, 20, 30]) {
      const spots: [number, number, PlacedLabel['anchor']][] = [
        [d, -d, 'start'],
        [-d, -d, 'end'],
        [d, d + LABEL_FONT * 0.8, 'start'],
        [-d, d + LABEL_FONT * 0.8, 'end'],
        [d + 2, LABEL_FONT * 0.3, 'start'],
        [-d - 2, LABEL_FONT * 0.3, 'end'],
        [0, -d - 2, 'middle'],
        [0, d + 2 + LABEL_FONT * 0.8, 'middle'],
      ];
      for (const [dx, dy, anchor] of spots) {
        const x = r.x + dx;
        const y = r.y + dy;
        const box = labelBox(x, y, r.text, anchor);
        const outside = box.x0 < frame.x0 || box.y0 < frame.y0 || box.x1 > frame.x1 || box.y1 > frame.y1;
        const cost =
          (outside ? 1e6 : 0) + placed.reduce((t, p) => t + overlapArea(box, p.box), 0) + markers.reduce((t, m) => t + overlapArea(box, m), 0) + d / 100;
        if (best === null || cost < best.cost) best = { label: { x, y, anchor, box, leader: d > 6 }, cost };
      }
      if (best !== null && best.cost < 1) break; // a free spot in this ring
    }
    placed.push(best!.label);
  }
  return placed;
}

export function renderChart(series: readonly ChartSeries[], options: ChartOptions): string {
  const width = options.width ?? 760;
  const height = options.height ?? 460;
  const m = { left: 72, right: 200, top: 44, bottom: 56 };
  const pw = width - m.left - m.right;
  const ph = height - m.top - m.bottom;
  let dropped = 0;
  const clean = series.map((s) => ({
    name: s.name,
    points: s.points.filter((p) => {
      const ok = p.x > 0 && p.y > 0 && Number.isFinite(p.x) && Number.isFinite(p.y);
      if (!ok) dropped++;
      return ok;
    }),
  }));
  const all = clean.flatMap((s) => s.points);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<title>${escapeXml(options.title)}</title>`,
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${fmt(width / 2)}" y="24" text-anchor="middle" font-size="15">${escapeXml(options.title)}</text>`,
  ];
  if (dropped > 0) out.push(`<!-- ${dropped} point(s) with a non-positive value left out -->`);
  if (all.length === 0) {
    out.push(`<text x="${fmt(width / 2)}" y="${fmt(height / 2)}" text-anchor="middle">no data</text>`, '</svg>');
    return `${out.join('\n')}\n`;
  }
  const [xa, xb] = decadeRange(Math.min(...all.map((p) => p.x)), Math.max(...all.map((p) => p.x)));
  const [ya, yb] = decadeRange(Math.min(...all.map((p) => p.y)), Math.max(...all.map((p) => p.y)));
  const sx = (x: number): number => m.left + ((Math.log10(x) - xa) / (xb - xa)) * pw;
  const sy = (y: number): number => m.top + ph - ((Math.log10(y) - ya) / (yb - ya)) * ph;
  // Frame, grid and ticks.
  out.push(`<rect x="${m.left}" y="${m.top}" width="${pw}" height="${ph}" fill="none" stroke="#333333"/>`);
  for (let e = xa; e <= xb; e++) {
    const x = fmt(sx(10 ** e));
    out.push(`<line x1="${x}" y1="${m.top}" x2="${x}" y2="${m.top + ph}" stroke="#dddddd"/>`);
    out.push(`<text x="${x}" y="${m.top + ph + 18}" text-anchor="middle">${tickLabel(e)}</text>`);
  }
  for (let e = ya; e <= yb; e++) {
    const y = fmt(sy(10 ** e));
    out.push(`<line x1="${m.left}" y1="${y}" x2="${m.left + pw}" y2="${y}" stroke="#dddddd"/>`);
    out.push(`<text x="${m.left - 8}" y="${y}" text-anchor="end" dominant-baseline="middle">${tickLabel(e)}</text>`);
  }
  out.push(`<text x="${fmt(m.left + pw / 2)}" y="${height - 14}" text-anchor="middle">${escapeXml(options.xLabel)}</text>`);
  out.push(
    `<text x="18" y="${fmt(m.top + ph / 2)}" text-anchor="middle" transform="rotate(-90 18 ${fmt(m.top + ph / 2)})">${escapeXml(options.yLabel)}</text>`,
  );
  // Series: a polyline through the points in the order given (rising load: 1, 16, 64, 256
  // appenders), a marker and a label per point. Not sorted by x: past saturation throughput can
  // fall as load rises, and the line should show that turn. Labels are placed over all series at once.
  const requests: (LabelRequest & { series: number })[] = [];
  clean.forEach((s, i) => {
    for (const p of s.points) if (p.label !== undefined) requests.push({ x: sx(p.x), y: sy(p.y), text: p.label, series: i });
  });
  const labels = placeLabels(requests, { x0: m.left + 2, y0: m.top + 2, x1: m.left + pw - 2, y1: m.top + ph - 2 });
  clean.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length] as string;
    const pts = s.points;
    out.push(`<g class="series" data-name="${escapeXml(s.name)}">`);
    if (pts.length > 1) {
      out.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts.map((p) => `${fmt(sx(p.x))},${fmt(sy(p.y))}`).join(' ')}"/>`);
    }
    for (const p of pts) out.push(`<circle cx="${fmt(sx(p.x))}" cy="${fmt(sy(p.y))}" r="${MARKER_R}" fill="${color}"/>`);
    requests.forEach((r, k) => {
      if (r.series !== i) return;
      const l = labels[k]!;
      if (l.leader) {
        const cx = Math.min(Math.max(r.x, l.box.x0), l.box.x1);
        const cy = Math.min(Math.max(r.y, l.box.y0), l.box.y1);
        out.push(`<line x1="${fmt(r.x)}" y1="${fmt(r.y)}" x2="${fmt(cx)}" y2="${fmt(cy)}" stroke="${color}" stroke-width="0.75"/>`);
      }
      const anchor = l.anchor === 'start' ? '' : ` text-anchor="${l.anchor}"`;
      out.push(`<text x="${fmt(l.x)}" y="${fmt(l.y)}"${anchor} font-size="${LABEL_FONT}" fill="${color}">${escapeXml(r.text)}</text>`);
    });
    out.push('</g>');
    const ly = m.top + 10 + i * 20;
    out.push(`<rect x="${width - m.right + 16}" y="${ly - 6}" width="14" height="4" fill="${color}"/>`);
    out.push(`<text x="${width - m.right + 36}" y="${ly}" dominant-baseline="middle">${escapeXml(s.name)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}

/**
 * One series per variant group of a section: x = records/s (median), y = p50 latency in µs
 * (median), labelled with the variant's `concurrency` parameter when it has one.
 */
export function chartSeriesFromSection(section: SectionResult, latency: 'p50Us' | 'p99Us' = 'p50Us'): ChartSeries[] {
  const groups = new Map<string, ChartPoint[]>();
  for (const v of section.variants) {
    if (v.group === null) continue;
    const c = v.params['concurrency'];
    const point: ChartPoint = { x: v.summary.recordsPerSec.median, y: v.summary[latency].median };
    if (c !== undefined) point.label = `×${String(c)}`;
    const list = groups.get(v.group) ?? [];
    list.push(point);
    groups.set(v.group, list);
  }
  return [...groups].map(([name, points]) => ({ name, points }));
}
