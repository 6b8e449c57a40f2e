// A terminal progress bar for long benchmark runs.
//
// Owns: `Progress`. Guarantees: it writes only when its stream is a TTY (a pipe, a file or CI gets
// nothing, so `--json > out.json` stays clean), it redraws one line in place, and `finish()` erases
// that line so the report printed next starts on a clean line.
// The bar counts planned units (the runner's planned milliseconds). A section rarely advances by
// exactly its plan (a child process that runs five repeats reports once; set-up is not planned), so
// whoever runs a section `settle`s the bar at the section's planned end when it ends: the fraction
// then follows the plan section by section and reaches 100 % when the last one ends. The time left
// is the planned units left at the pace measured so far; it is shown only once that pace rests on
// enough of the run (10 % of the plan and 3 s), since the first sections' pace says little about
// the rest.

export interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(s: string): unknown;
}

/** Fraction of the plan, and seconds, before the bar estimates the time left. */
const ESTIMATE_AFTER_FRACTION = 0.1;
const ESTIMATE_AFTER_MS = 3000;

export class Progress {
  readonly enabled: boolean;
  #stream: ProgressStream;
  #total: number;
  #done = 0;
  #now: () => number;
  #startedMs: number;
  #label = '';

  /** `total` is in arbitrary units (the runner uses planned milliseconds); `now` is for tests. */
  constructor(total: number, stream: ProgressStream = process.stdout, enabled = stream.isTTY === true, now: () => number = Date.now) {
    this.#stream = stream;
    this.#total = Math.max(1, total);
    this.enabled = enabled;
    this.#now = now;
    this.#startedMs = now();
  }

  /** Units done so far (where a section starts, for its `settle` at the end). */
  get done(): number {
    return this.#done;
  }

  /** Adds to the planned total (sections discovered later). */
  grow(units: number): void {
    this.#total += units;
  }

  /** Sets what is running now, without advancing. */
  label(text: string): void {
    this.#label = text;
    this.#draw();
  }

  advance(units: number, text?: string): void {
    this.#done = Math.min(this.#total, this.#done + units);
    if (text !== undefined) this.#label = text;
    this.#draw();
  }

  /** Moves the bar to `units` done (never back): a section that ended stands at its planned end. */
  settle(units: number): void {
    const at = Math.min(this.#total, units);
    if (at <= this.#done) return;
    this.#done = at;
    this.#draw();
  }

  /** The line the bar shows now (exported for tests). */
  line(width = 80): string {
    const fraction = this.#done / this.#total;
    const pct = Math.floor(fraction * 100);
    const elapsedMs = this.#now() - this.#startedMs;
    const estimate = fraction >= ESTIMATE_AFTER_FRACTION && elapsedMs >= ESTIMATE_AFTER_MS && fraction < 1;
    const leftS = estimate ? (elapsedMs / fraction - elapsedMs) / 1000 : NaN;
    const time = `${Math.round(elapsedMs / 1000)}s${Number.isFinite(leftS) ? `, ~${Math.ceil(leftS)}s left` : ''}`;
    const barWidth = 24;
    const filled = Math.round(fraction * barWidth);
    const bar = `[${'#'.repeat(filled)}${'-'.repeat(barWidth - filled)}]`;
    const head = `${bar} ${String(pct).padStart(3)}% ${time} `;
    const room = Math.max(0, width - head.length - 1);
    const label = this.#label.length > room ? `${this.#label.slice(0, Math.max(0, room - 1))}…` : this.#label;
    return `${head}${label}`;
  }

  #draw(): void {
    if (!this.enabled) return;
    this.#stream.write(`\r\x1b[K${this.line(this.#stream.columns || 80)}`); // 0 columns: size unknown
  }

  /** Erases the bar. */
  finish(): void {
    if (this.enabled) this.#stream.write('\r\x1b[K');
  }
}
