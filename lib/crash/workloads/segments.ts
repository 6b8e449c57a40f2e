// Crash workload `segments`: the segmented log (segments/) through every structural change.
//
// Owns: the `segments` workload. One log under /data/log with small segments (256–512 bytes, so
// that a few records roll), driven by a seeded plan that always holds single appends, concurrent
// bursts (group commit), truncateAfter, dropBefore and reset; record sizes reach past 512 bytes so
// that tears fall inside records. Then a second process appends under sync 'none' (written, never
// acknowledged) and is killed, either at once or at the manifest sync of a structural change; a
// third process observes what survived and runs more of the plan.
// The checker opens the log on the crash image and requires the content of some step of the
// crash's window (StepHistory), where an append in flight may have landed as any prefix of its
// records (the log keeps a contiguous valid prefix: appends of several records are not atomic
// in a segmented log — stores that need atomic batches build them on top), plus: a second open
// reads the same, and an append after recovery lands at the end and survives a third open.
// Planted mistakes (test-only): segments/mistakes.ts `SegmentMistakes`.

import { openSegmentedLog, type SegmentedLog, type SegmentedLogOptions } from '../../../segments/index.js';
import type { SegmentMistakes } from '../../../segments/mistakes.js';
import { FaultyFs } from '../../fs/faulty.js';
import { MemoryFs } from '../../fs/memory.js';
import type { FileSystem } from '../../fs/types.js';
import type { CrashState } from '../explore.js';
import { randomInt } from '../determinism.js';
import { StepHistory } from './history.js';
import type { CrashWorkload, WorkloadContext, WorkloadRun } from './types.js';

const DIR = '/data/log';

interface Content {
  readonly first: number;
  readonly records: readonly Buffer[];
}

type Step =
  | { readonly op: 'append'; readonly batches: readonly Buffer[][] }
  | { readonly op: 'truncate' | 'drop' | 'reset'; readonly index: number };

const PLANTS: Record<string, SegmentMistakes> = {
  'ack-before-sync': { ackBeforeSync: true },
  'skip-dir-sync': { skipDirSync: true },
  'unlink-before-commit': { unlinkBeforeCommit: true },
};

function endOf(c: Content): number {
  return c.first + c.records.length;
}

function apply(c: Content, s: Step): Content {
  switch (s.op) {
    case 'append':
      return { first: c.first, records: [...c.records, ...s.batches.flat()] };
    case 'truncate':
      return s.index >= endOf(c) ? c : { first: c.first, records: c.records.slice(0, s.index - c.first) };
    case 'drop': {
      if (s.index <= c.first) return c;
      const first = Math.min(s.index, endOf(c));
      return { first, records: c.records.slice(first - c.first) };
    }
    case 'reset':
      return { first: s.index, records: [] };
  }
}

function label(s: Step): string {
  if (s.op !== 'append') return `${s.op === 'truncate' ? 'truncateAfter' : s.op === 'drop' ? 'dropBefore' : 'reset'}(${s.index})`;
  const n = s.batches.reduce((a, b) => a + b.length, 0);
  return s.batches.length === 1 ? `append ${n} record(s)` : `${s.batches.length} concurrent appends, ${n} records`;
}

function showContent(c: Content): string {
  return `[${c.first}, ${endOf(c)})`;
}

/** A record that names the step and position that wrote it, `size` bytes long. */
function recordOf(step: number, ordinal: number, size: number): Buffer {
  const b = Buffer.alloc(size);
  const tag = Buffer.from(`s${step}.${ordinal}:`);
  for (let i = 0; i < size; i++) b[i] = i < tag.length ? tag[i]! : (step * 31 + ordinal * 7 + i * 11) & 0xff;
  return b;
}

function isPrefix(a: readonly Buffer[], b: readonly Buffer[], from = 0): boolean {
  if (a.length > b.length) return false;
  for (let i = from; i < a.length; i++) if (!a[i]!.equals(b[i]!)) return false;
  return true;
}

async function readAll(log: SegmentedLog): Promise<Content> {
  const records = (await log.read(log.firstIndex, Number.MAX_SAFE_INTEGER)).map((r) => Buffer.from(r));
  if (log.endIndex !== log.firstIndex + records.length) {
    throw new Error(`endIndex ${log.endIndex} disagrees with ${records.length} records read from ${log.firstIndex}`);
  }
  return { first: log.firstIndex, records };
}

async function run(context: WorkloadContext): Promise<WorkloadRun> {
  const { fs, random, scale } = context;
  const mistakes = context.plant === null ? {} : PLANTS[context.plant];
  if (mistakes === undefined) throw new RangeError(`segments: no planted mistake '${context.plant}'`);
  const segmentBytes = [256, 384, 512][randomInt(random, 0, 2)]!;
  const options = (f: FileSystem, sync: SegmentedLogOptions['sync'] = 'always'): SegmentedLogOptions =>
    ({ fs: f, segmentBytes, sync, mistakes }) as SegmentedLogOptions;
  const history = new StepHistory<Content>({ first: 0, records: [] }, 'empty log');
  const steps: (Step | null)[] = [null];
  const counts: Record<string, number> = {};

  const size = (): number => {
    const r = random();
    if (r < 0.1) return 0;
    if (r < 0.25) return randomInt(random, 500, 1100);
    return randomInt(random, 1, 90);
  };
  /** The next step of the plan, of kind `kind`, given the content now. */
  const plan = (kind: string): Step => {
    const c = history.current;
    const k = history.last + 1;
    let ordinal = 0;
    const batch = (): Buffer[] => Array.from({ length: random() < 0.75 ? 1 : randomInt(random, 2, 3) }, () => recordOf(k, ordinal++, size()));
    switch (kind) {
      case 'burst':
        return { op: 'append', batches: Array.from({ length: randomInt(random, 2, 5) }, batch) };
      case 'truncate':
        return { op: 'truncate', index: randomInt(random, c.first, endOf(c)) };
      case 'drop':
        return { op: 'drop', index: randomInt(random, c.first, endOf(c) + 2) };
      case 'reset':
        return { op: 'reset', index: random() < 0.5 ? endOf(c) + randomInt(random, 0, 6) : Math.max(0, c.first - randomInt(random, 1, 4)) };
      default:
        return { op: 'append', batches: [batch()] };
    }
  };
  const kinds = (n: number): string[] => {
    const out: string[] = [];
    for (let i = 0; i < n; i++) {
      const r = random();
      out.push(r < 0.5 ? 'append' : r < 0.65 ? 'burst' : r < 0.77 ? 'truncate' : r < 0.9 ? 'drop' : 'reset');
    }
    // Every kind at least once, in the second half (truncate and drop need records to act on).
    for (const kind of ['burst', 'truncate', 'drop', 'reset']) {
      if (!out.includes(kind)) out.splice(randomInt(random, Math.floor(n / 2), out.length), 0, kind);
    }
    return out;
  };
  /** Issues one step on `log` (recorded in the history first); answers its promise. */
  const issue = (log: SegmentedLog, step: Step): { k: number; done: Promise<void> } => {
    const k = history.push(label(step), apply(history.current, step));
    steps[k] = step;
    counts[step.op] = (counts[step.op] ?? 0) + 1;
    let done: Promise<unknown>;
    if (step.op === 'append') {
      done = step.batches.length === 1 ? log.append(step.batches[0]!) : Promise.all(step.batches.map((b) => log.stage(b).durable));
    } else if (step.op === 'truncate') done = log.truncateAfter(step.index);
    else if (step.op === 'drop') done = log.dropBefore(step.index);
    else done = log.reset(step.index);
    return { k, done: done.then(() => undefined) };
  };
  let lastAcked = 0;
  const runPlan = async (log: SegmentedLog, view: MemoryFs, n: number): Promise<void> => {
    for (const kind of kinds(n)) {
      const { k, done } = issue(log, plan(kind));
      await done;
      history.ack(view, k);
      lastAcked = k;
    }
  };
  /** A new process opens the log: what it finds must be a state the crash could leave; it is acknowledged. */
  const observe = async (view: FileSystem, mark: MemoryFs, who: string, sync: SegmentedLogOptions['sync']): Promise<SegmentedLog> => {
    const log = await openSegmentedLog(DIR, options(view, sync));
    const seen = await readAll(log);
    if (!allowed(history, steps, seen, lastAcked, history.last)) {
      throw new Error(`segments: ${who} found ${showContent(seen)}, which no step from ${lastAcked} to ${history.last} leaves`);
    }
    const k = history.push(`${who} opened the log: ${showContent(seen)}`, seen);
    steps[k] = null;
    history.ack(mark, k);
    lastAcked = k;
    return log;
  };

  // Process 1: the plan, every step acknowledged.
  const p1 = await openSegmentedLog(DIR, options(fs));
  await runPlan(p1, fs, Math.max(6, Math.round(24 * scale)));
  await p1.close();

  // Process 2: appends under sync 'none' (written, never acknowledged as durable), then killed.
  const view2 = fs.newProcess();
  const faulty = new FaultyFs(view2);
  const p2b = await observe(faulty, view2, 'process 2', 'none');
  const unsynced = randomInt(random, 1, 4);
  for (let i = 0; i < unsynced; i++) await issue(p2b, plan('append')).done;
  let killedAt = 'after its unsynced appends';
  if (random() < 0.6) {
    const kind = ['truncate', 'drop', 'reset'][randomInt(random, 0, 2)]!;
    const pause = faulty.pause('datasync', '*MANIFEST');
    const { done } = issue(p2b, plan(kind));
    const dying = done.catch(() => undefined);
    await Promise.race([pause.reached, dying]);
    killedAt = `at the manifest sync of a ${kind}`;
  }
  await faulty.sever();

  // Process 3: observes what survived, runs more of the plan, closes.
  const view3 = fs.newProcess();
  const p3 = await observe(view3, view3, 'process 3', 'always');
  await runPlan(p3, view3, Math.max(4, Math.round(12 * scale)));
  await p3.close();

  const trace = fs.trace;
  return {
    summary:
      `${history.last} steps (${Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(', ')}), segments of ${segmentBytes} bytes; ` +
      `process 2 killed ${killedAt}`,
    // Index files are derived data, LOCK holds none, and a removed segment that reappears is
    // garbage the next open deletes (docs/crash-safety.md (segmented log)): no acknowledgement depends on those.
    ackCheck: {
      dependsOn: (_marker, op) =>
        !(op.path.endsWith('.idx') || op.path.endsWith('/LOCK') || (op.kind === 'unlink' && op.path.endsWith('.seg'))),
    },
    explain: (state) => history.explain(state, trace),
    check: async (state: CrashState) => {
      const { acked, inFlight } = history.window(state, trace);
      const disk = new MemoryFs({ image: state.image, trace: false });
      let log = await openSegmentedLog(DIR, { fs: disk, segmentBytes });
      const got = await readAll(log);
      await log.close();
      if (!allowed(history, steps, got, acked, inFlight)) {
        throw new Error(
          `reopened ${showContent(got)}; no step from ${acked} (acknowledged) to ${inFlight} leaves that: ` +
            history.states
              .slice(acked, inFlight + 1)
              .map((c, i) => `step ${acked + i} ${showContent(c)}`)
              .join(', '),
        );
      }
      log = await openSegmentedLog(DIR, { fs: disk, segmentBytes });
      const again = await readAll(log);
      if (again.first !== got.first || again.records.length !== got.records.length || !isPrefix(got.records, again.records)) {
        await log.close();
        throw new Error(`a second open read ${showContent(again)} after the first read ${showContent(got)}`);
      }
      const probe = Buffer.from('probe after recovery');
      const at = await log.append([probe]);
      await log.close();
      if (at !== endOf(got)) throw new Error(`an append after recovery took index ${at}, not the end ${endOf(got)}`);
      log = await openSegmentedLog(DIR, { fs: disk, segmentBytes });
      const third = await readAll(log);
      await log.close();
      if (third.first !== got.first || !isPrefix([...got.records, probe], third.records) || third.records.length !== got.records.length + 1) {
        throw new Error(`after an append at ${at}, a third open read ${showContent(third)}`);
      }
    },
  };
}

/**
 * True when `got` is the content of a step j in [acked, inFlight], or that content extended by a
 * prefix of the records of the appends that follow j (up to inFlight, with no other step between).
 */
function allowed(history: StepHistory<Content>, steps: readonly (Step | null)[], got: Content, acked: number, inFlight: number): boolean {
  for (let j = acked; j <= inFlight; j++) {
    const base = history.states[j]!;
    if (got.first !== base.first || got.records.length < base.records.length) continue;
    let m = j;
    while (m < inFlight && steps[m + 1]?.op === 'append') m++;
    const longest = history.states[m]!;
    if (isPrefix(got.records, longest.records) && isPrefix(base.records, got.records)) return true;
  }
  return false;
}

export const workload: CrashWorkload = {
  name: 'segments',
  description: 'segmented log: appends, concurrent bursts, rolls, truncateAfter, dropBefore, reset; a process killed with unsynced appends or mid-commit',
  plants: {
    'ack-before-sync': 'append resolves once written, before the fdatasync that covers it',
    'skip-dir-sync': 'a new segment file is created without syncing the directory',
    'unlink-before-commit': 'truncateAfter, dropBefore and reset unlink segments before the manifest that drops them is durable',
  },
  run,
};
