// Crash workload `cells`: two-slot cells (cells/) written, killed mid-write, reopened, written on.
//
// Owns: the `cells` workload. Two cells under /data: `a` gets a run of writes of random lengths
// (some spanning several 512-byte sectors, so tears fall inside a value), then a process killed at
// a random call of one write (write or fdatasync), a restart that observes what survived, and more
// writes; `b` has its very first write killed at a random call (write, fdatasync, rename, the
// directory sync, or the reopen of the renamed file), then written again by the restarted process. The checker opens both cells
// on the crash image and requires, for each, a value that some step in the crash's window left
// (never a torn one, never an older one than acknowledged, never CORRUPT), and the same values
// from a second open.
// Planted mistakes (test-only): the cell's own `mistakes` switches (cells/cell.ts).

import { openCell, type Cell, type CellOptions } from '../../../cells/index.js';
import type { CellMistakes } from '../../../cells/cell.js';
import { cellValueCapacity } from '../../../cells/format.js';
import { FaultyFs } from '../../fs/faulty.js';
import { MemoryFs } from '../../fs/memory.js';
import type { FsCallKind } from '../../fs/memory.js';
import type { FileSystem } from '../../fs/types.js';
import type { CrashState } from '../explore.js';
import { randomInt } from '../determinism.js';
import { StepHistory } from './history.js';
import type { CrashWorkload, WorkloadContext, WorkloadRun } from './types.js';

const CELL_A = '/data/a.cell';
const CELL_B = '/data/b.cell';

type Value = Uint8Array | null;
/** The two cells' values. */
type Content = readonly [Value, Value];

const PLANTS: Record<string, CellMistakes> = {
  'write-live-slot': { writeLiveSlot: true },
  'ack-before-sync': { ackBeforeSync: true },
  'skip-dir-sync': { skipDirSync: true },
};

function same(a: Value, b: Value): boolean {
  if (a === null || b === null) return a === b;
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(b);
}

function show(v: Value): string {
  if (v === null) return 'nothing';
  const head = Buffer.from(v.subarray(0, 12)).toString('latin1').replace(/[^\x20-\x7e]/g, '.');
  return `${v.length} bytes "${head}${v.length > 12 ? '…' : ''}"`;
}

/** A value that says which step wrote it: "c<step>:" then a pattern, `length` bytes in all. */
function valueOf(step: number, length: number): Uint8Array {
  const v = new Uint8Array(length);
  const tag = new TextEncoder().encode(`c${step}:`);
  for (let i = 0; i < length; i++) v[i] = i < tag.length ? tag[i]! : (step * 37 + i * 13) & 0xff;
  return v;
}

async function readCells(fs: FileSystem, slotBytes: number): Promise<Content> {
  const read = async (p: string): Promise<Value> => {
    const cell = await openCell(p, { fs, slotBytes });
    try {
      return await cell.read();
    } finally {
      await cell.close();
    }
  };
  return [await read(CELL_A), await read(CELL_B)];
}

async function run(context: WorkloadContext): Promise<WorkloadRun> {
  const { fs, random, scale } = context;
  const mistakes = context.plant === null ? {} : PLANTS[context.plant];
  if (mistakes === undefined) throw new RangeError(`cells: no planted mistake '${context.plant}'`);
  const slotBytes = random() < 0.7 ? 4096 : 1024;
  const capacity = cellValueCapacity(slotBytes);
  const options = (f: FileSystem): CellOptions => ({ fs: f, slotBytes, mistakes }) as CellOptions;
  const history = new StepHistory<Content>([null, null], 'both cells unwritten');
  const length = (): number => {
    const r = random();
    if (r < 0.1) return 0;
    if (r < 0.2) return capacity;
    if (r < 0.55) return randomInt(random, 500, Math.min(capacity, 2000));
    return randomInt(random, 1, 200);
  };
  const write = async (cell: Cell, which: 0 | 1, ack: (k: number) => void): Promise<void> => {
    const k = history.last + 1;
    const value = valueOf(k, length());
    const next: Content = which === 0 ? [value, history.current[1]] : [history.current[0], value];
    history.push(`write ${show(value)} to ${which === 0 ? 'a' : 'b'}`, next);
    await cell.write(value);
    ack(k);
  };

  // Process 1: a run of writes to `a`.
  const first = await openCell(CELL_A, options(fs));
  const writes = Math.max(2, Math.round(30 * scale));
  for (let i = 0; i < writes; i++) await write(first, 0, (k) => history.ack(fs, k));
  await first.close();

  // Process 2: writes `a` again and is killed inside one write; or is killed inside `b`'s first write.
  const killFirstWrite = random() < 0.5;
  const p2 = new FaultyFs(fs.newProcess());
  const second = await openCell(killFirstWrite ? CELL_B : CELL_A, options(p2));
  const kinds: FsCallKind[] = killFirstWrite ? ['open', 'write', 'datasync', 'rename', 'syncDir'] : ['write', 'datasync'];
  const kind = kinds[randomInt(random, 0, kinds.length - 1)]!;
  const pause = p2.pause(kind, kind === 'syncDir' ? '/data' : killFirstWrite ? '*b.cell*' : CELL_A);
  const value = valueOf(history.last + 1, length());
  history.push(`write ${show(value)} to ${killFirstWrite ? 'b' : 'a'} (killed at its ${kind})`, killFirstWrite ? [history.current[0], value] : [value, history.current[1]]);
  const dying = second.write(value).catch(() => undefined);
  await Promise.race([pause.reached, dying]);
  await p2.sever();
  await dying;

  // Process 3: observes what survived (that is its first acknowledged step), writes on.
  const p3 = fs.newProcess();
  const seen = await readCells(p3, slotBytes);
  const window = { acked: history.last - 1, inFlight: history.last };
  if (!allowed(history, seen, window.acked, window.inFlight)) {
    throw new Error(`cells: the restarted process read a: ${show(seen[0])}, b: ${show(seen[1])}, which no step left`);
  }
  history.ack(p3, history.push(`process 3 opened: a ${show(seen[0])}, b ${show(seen[1])}`, seen));
  const a = await openCell(CELL_A, options(p3));
  const b = await openCell(CELL_B, options(p3));
  const more = Math.max(2, Math.round(14 * scale));
  for (let i = 0; i < more; i++) await write(i % 2 === 0 ? b : a, i % 2 === 0 ? 1 : 0, (k) => history.ack(p3, k));
  await a.close();
  await b.close();

  const trace = fs.trace;
  return {
    summary: `${history.last} steps, slots of ${slotBytes} bytes; process 2 killed at the ${kind} of ${killFirstWrite ? "b's first write" : "a write of a"}`,
    // An acknowledgement depends on its own process's calls: a killed process's unsynced temp
    // file is a leftover nobody reads, and what a restarted process observed it made durable
    // itself (the explorer checks that).
    // The creation of a never-written cell's temporary file (its lock, made by openCell) is none
    // either: nothing reads it, and the first write's rename and directory sync cover its name.
    ackCheck: { dependsOn: (marker, op) => op.process === marker.process && !(op.kind === 'open' && op.path.endsWith('.tmp')) },
    explain: (state) => history.explain(state, trace),
    check: async (state: CrashState) => {
      const { acked, inFlight } = history.window(state, trace);
      const disk = new MemoryFs({ image: state.image, trace: false });
      const got = await readCells(disk, slotBytes);
      if (!allowed(history, got, acked, inFlight)) {
        throw new Error(
          `read a: ${show(got[0])}, b: ${show(got[1])}; no step from ${acked} (acknowledged) to ${inFlight} left that: ` +
            history.states
              .slice(acked, inFlight + 1)
              .map((c, i) => `step ${acked + i} a: ${show(c[0])}, b: ${show(c[1])}`)
              .join('; '),
        );
      }
      const again = await readCells(disk, slotBytes);
      if (!same(again[0], got[0]) || !same(again[1], got[1])) {
        throw new Error(`a second open read a: ${show(again[0])}, b: ${show(again[1])} after a: ${show(got[0])}, b: ${show(got[1])}`);
      }
    },
  };
}

function allowed(history: StepHistory<Content>, got: Content, acked: number, inFlight: number): boolean {
  for (let j = acked; j <= inFlight; j++) {
    const s = history.states[j]!;
    if (same(s[0], got[0]) && same(s[1], got[1])) return true;
  }
  return false;
}

export const workload: CrashWorkload = {
  name: 'cells',
  description: 'two-slot cells: writes of random lengths, a kill inside a write and inside a first write, restart, more writes',
  plants: {
    'write-live-slot': 'a write overwrites the live slot in place instead of the other one',
    'ack-before-sync': 'a write resolves before its fdatasync (and the first write before the temp file is synced)',
    'skip-dir-sync': 'the first write renames its file into place without syncing the directory',
  },
  run,
};
