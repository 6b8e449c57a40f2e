// The real-process kill harness: writer processes SIGKILLed at random moments, and a checker that
// compares what reopens with a ledger of what was acknowledged.
//
// Owns: `runKillCampaign` (the parent side) and the ledger protocol. A writer is a Node script
// (see ./kill-child.ts for its side) started as `node <writer> <dir> <seed> <life>`: it opens its
// store in <dir>, writes one ledger line saying what it found (`{"t":"open",...}`, which also marks
// it ready), then works forever, writing a ledger line BEFORE it issues each operation
// (`"t":"begin"`) and one AFTER each acknowledgement (`"t":"ack"`). Ledger lines go to file
// descriptor 3, a pipe, with one synchronous write each: a line is in the kernel before the next
// statement runs, so a SIGKILL can cut the ledger only between lines, never lose a line of an
// acknowledgement already made, and never show an acknowledgement the writer did not get.
// The writer writes `{"t":"start"}` once its modules are loaded. The parent kills it at a random
// moment — within a few ms of its start (mostly inside its open, i.e. inside recovery from the
// previous kill), or at a random moment of its work after it is ready (a random number of ledger
// lines after its open, then a random number of ms more: so every life does some work however
// slow the machine, and the kill still lands anywhere in it) — then runs the target's `check`
// on the directory with the ledger lines of that life, which throws on a violation and answers
// the model to carry into the next life. Lives run one after another on one directory (each life
// recovers from the previous kill); `lanes` directories run side by side to use both cores.
// Plugging in a store: docs/crash-testing.md, "The real-process kill harness".

import { spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { seededRandom } from '../../lib/crash/determinism.js';

/** One ledger line, as the writer wrote it (JSON). */
export interface LedgerEntry {
  readonly t: string;
  readonly [key: string]: unknown;
}

export interface KillTarget<Model> {
  readonly name: string;
  /** The writer script (its compiled .js under dist/test/support/). */
  readonly writer: URL;
  initialModel(): Model;
  /**
   * Checks the directory after the writer of life `life` was killed, given that life's ledger
   * and the model the previous check answered; throws on a violation; answers the new model
   * (what the directory holds now: the next life's writer must find exactly that at its open).
   */
  check(dir: string, model: Model, ledger: readonly LedgerEntry[], life: number): Promise<Model>;
}

export interface KillCampaignOptions {
  /** Kills in all (spread over the lanes). */
  kills: number;
  /** Directories worked on side by side (default 2). */
  lanes?: number;
  seed?: number;
  /** Where the lanes' directories go (made and removed by the caller). */
  root: string;
  /** After the writer is ready and wrote its random share of `workLines`, it is killed within this many ms (default 40). */
  maxRunMs?: number;
  /** A life after its open writes a random number of ledger lines below this before the ms above start (default 8). */
  workLines?: number;
  /** Share of kills within a few ms of the writer's start, mostly inside its open (default 0.2). */
  earlyShare?: number;
}

export interface KillCampaignResult {
  readonly kills: number;
  /** Kills that landed after the writer was ready (had opened its store). */
  readonly afterReady: number;
  /** Ledger lines over all lives. */
  readonly ledgerLines: number;
  /** Acknowledgements over all lives. */
  readonly acks: number;
  readonly elapsedMs: number;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

interface Life {
  ledger: LedgerEntry[];
  ready: boolean;
  stderr: string;
  exit: { code: number | null; signal: NodeJS.Signals | null };
}

/** Starts one life of the writer and kills it at a random moment. */
async function oneLife(writer: string, dir: string, seed: number, life: number, rng: () => number, options: Required<Pick<KillCampaignOptions, 'maxRunMs' | 'earlyShare' | 'workLines'>>): Promise<Life> {
  const child = spawn(process.execPath, [writer, dir, String(seed), String(life)], { stdio: ['ignore', 'ignore', 'pipe', 'pipe'] });
  const ledgerStream = child.stdio[3] as NodeJS.ReadableStream;
  let buffered = '';
  const ledger: LedgerEntry[] = [];
  let ready = false;
  let onReady: () => void = () => undefined;
  const readyPromise = new Promise<void>((resolve) => {
    onReady = resolve;
  });
  let onStart: () => void = () => undefined;
  const startPromise = new Promise<void>((resolve) => {
    onStart = resolve;
  });
  // Lines after the open to wait for before the kill's random ms (a late kill's share of the work).
  let linesWanted = Infinity;
  let onWorked: () => void = () => undefined;
  const workedPromise = new Promise<void>((resolve) => {
    onWorked = resolve;
  });
  ledgerStream.setEncoding('utf8');
  ledgerStream.on('data', (chunk: string) => {
    buffered += chunk;
    let nl: number;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (line.length === 0) continue;
      const entry = JSON.parse(line) as LedgerEntry;
      ledger.push(entry);
      if (entry.t === 'start') onStart();
      if (entry.t === 'open' && !ready) {
        ready = true;
        onReady();
      }
      if (ready && ledger.length >= linesWanted) onWorked();
    }
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (s: string) => {
    stderr += s;
  });
  const ledgerClosed = new Promise<void>((resolve) => ledgerStream.on('close', () => resolve()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  let finishedEarly = false;
  void exited.then(() => {
    finishedEarly = true;
    onStart();
    onReady();
    onWorked();
  });

  // Wait (at most 20 s) for the writer to load its modules, then kill it either a few ms later,
  // which lands inside the store's open (recovery from the previous kill) or just after, or at a
  // random moment of its work after it reported what it opened.
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<void>((resolve) => (timer = setTimeout(resolve, 20_000)));
  await Promise.race([startPromise, limit]);
  if (rng() < options.earlyShare) {
    await sleep(rng() * 8);
  } else {
    const lines = Math.floor(rng() * options.workLines);
    await Promise.race([readyPromise, limit]);
    if (ready) {
      linesWanted = ledger.length + lines;
      if (ledger.length >= linesWanted) onWorked();
      await Promise.race([workedPromise, limit]);
    }
    await sleep(rng() * options.maxRunMs);
  }
  clearTimeout(timer);
  const wasReady = ready;
  if (!finishedEarly) child.kill('SIGKILL');
  const exit = await exited;
  await ledgerClosed;
  if (buffered.trim().length > 0) throw new Error(`writer ${writer} left a partial ledger line: ${JSON.stringify(buffered)}`);
  return { ledger, ready: wasReady, stderr, exit };
}

/** Runs `options.kills` lives of the target's writer, checking after each kill. */
export async function runKillCampaign<Model>(target: KillTarget<Model>, options: KillCampaignOptions): Promise<KillCampaignResult> {
  const started = performance.now();
  const lanes = options.lanes ?? 2;
  const seed = options.seed ?? 1;
  const writer = fileURLToPath(target.writer);
  let afterReady = 0;
  let ledgerLines = 0;
  let acks = 0;
  let kills = 0;
  let failed = false;
  const lane = async (k: number, lives: number): Promise<void> => {
    const dir = path.join(options.root, `${target.name}-lane-${k}`);
    await fsp.mkdir(dir, { recursive: true });
    const rng = seededRandom(seed * 1000 + k);
    let model = target.initialModel();
    for (let life = 0; life < lives && !failed; life++) {
      const l = await oneLife(writer, dir, seed * 1000 + k, life, rng, { maxRunMs: options.maxRunMs ?? 40, earlyShare: options.earlyShare ?? 0.2, workLines: options.workLines ?? 8 });
      if (l.exit.signal !== 'SIGKILL') {
        failed = true;
        throw new Error(`${target.name} lane ${k} life ${life}: the writer exited by itself (code ${String(l.exit.code)}, signal ${String(l.exit.signal)}):\n${l.stderr}`);
      }
      kills++;
      if (l.ready) afterReady++;
      ledgerLines += l.ledger.length;
      acks += l.ledger.filter((e) => e.t === 'ack').length;
      try {
        model = await target.check(dir, model, l.ledger, life);
      } catch (err) {
        failed = true;
        const tail = l.ledger.slice(-6).map((e) => JSON.stringify(e)).join('\n  ');
        throw new Error(`${target.name} lane ${k} life ${life} (killed ${l.ready ? 'after' : 'before'} ready, ${l.ledger.length} ledger lines; last:\n  ${tail}):\n${String(err instanceof Error ? err.stack : err)}`);
      }
    }
  };
  const per = Math.floor(options.kills / lanes);
  // Every lane settles before this answers (a failed lane stops the others at their next life),
  // so that the caller may remove the directories at once.
  const settled = await Promise.allSettled(Array.from({ length: lanes }, (_, k) => lane(k, per + (k < options.kills % lanes ? 1 : 0))));
  for (const s of settled) if (s.status === 'rejected') throw s.reason;
  return { kills, afterReady, ledgerLines, acks, elapsedMs: performance.now() - started };
}
