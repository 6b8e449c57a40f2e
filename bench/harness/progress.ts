// A terminal progress bar for long benchmark runs.
//
// Owns: `Progress`. Guarantees: it writes only when its stream is a TTY (a pipe, a file or CI gets
// nothing, so `--json > out.json` stays clean), it redraws one line in place, and `finish()` erases
// that line so the report printed next starts on a clean line.

export interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(s: string): unknown;
}

export class Progress {
  readonly enabled: boolean;
  #stream: ProgressStream;
  #total: number;
  #done = 0;
  #startedMs = Date.now();
  #label = '';

  /** `total` is in arbitrary units (the runner uses planned milliseconds). */
  constructor(total: number, stream: ProgressStream = process.stdout, enabled = stream.isTTY === true) {
    this.#stream = stream;
    this.#total = Math.max(1, total);
    this.enabled = enabled;
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

  /** The line the bar shows now (exported for tests). */
  line(width = 80): string {
    const fraction = this.#done / this.#total;
    const pct = Math.floor(fraction * 100);
    const elapsed = (Date.now() - this.#startedMs) / 1000;
    const eta = fraction > 0.02 ? Math.max(0, elapsed / fraction - elapsed) : NaN;
    const etaText = Number.isFinite(eta) ? `~${Math.ceil(eta)}s left` : '';
    const barWidth = 24;
    const filled = Math.round(fraction * barWidth);
    const bar = `[${'#'.repeat(filled)}${'-'.repeat(barWidth - filled)}]`;
    const head = `${bar} ${String(pct).padStart(3)}% ${etaText} `;
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
