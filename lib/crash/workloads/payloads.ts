// Crash workload `payloads`: the payload store (lib/payloads) through puts, references and
// garbage collection, a process killed inside one of them, and a restart.
//
// Owns: the `payloads` workload and its checker. One store under /data/payloads (chunks of 512,
// 1,024 or 2,048 bytes), driven by a seeded plan. Process 1: streamed puts (pieces of random
// sizes) of payloads of 0 bytes, a few bytes, a few KiB (several chunks and sectors, so tears fall
// inside them) and one of about 1 MiB (its frames take two writes, plus the header's), holders
// added and released (a refcount file rewritten, then removed with its last holder), a second put
// of stored bytes (the rename over the existing copy), time moved past the grace period and a
// collection that removes the old unreferenced payloads and keeps the referenced and the young.
// Process 2: a step or two, then killed (FaultyFs pause + sever) inside one call of a put (a
// frame or header write, the fdatasync, the link, the temporary unlink, the directory sync), a
// second put (its rename or directory sync), an addRef (the refcount temp write, fdatasync,
// rename, directory sync), a removeRef (the unlink of the last holder or the rename, and the
// directory sync), or a collection (a blob's unlink, the directory sync). Process 3 observes what
// survived (its first acknowledged step) and runs more puts, references and a collection.
// The checker opens the store on the crash image and requires, payload by payload, a presence and
// a holder set that some step of the crash's window left (StepHistory), which means: every
// acknowledged put is present unless a collection started after it could have removed it; a
// payload with a durably acknowledged holder is never collected; every listed blob is a payload
// the run put and reads back byte-exact (length and SHA-256, computed here) — nothing half-written
// is ever served under a digest; no temporary file survives open; `verify` finds no problem (no
// holder without bytes, every refcount file well formed); a second open lists the same; and a
// collection right after recovery removes nothing that has a holder.
// Planted mistakes (test-only): the store has no mistake switches of its own, so each plant is a
// file-system layer between the store and the disk that swallows exactly the call the mistake
// would omit (the store believes it made it): see PlantFs below.

import { createHash } from 'node:crypto';
import * as path from 'node:path';
import { ManualClock } from '../../clock.js';
import { FaultyFs, type PathPattern } from '../../fs/faulty.js';
import { MemoryFs, type FsCallKind, type TraceEntry } from '../../fs/memory.js';
import type { EntryStat, FileHandle, FileStat, FileSystem, OpenMode } from '../../fs/types.js';
import { openPayloadStore, type FsPayloadStore } from '../../payloads/index.js';
import { randomInt } from '../determinism.js';
import type { CrashState } from '../explore.js';
import { StepHistory } from './history.js';
import type { CrashWorkload, WorkloadContext, WorkloadRun } from './types.js';

const DIR = '/data/payloads';
const TMP = `${DIR}/tmp/`;
const GRACE_MS = 60_000;

// ---------------------------------------------------------------------------------------------
// Payloads: deterministic bytes, generated piece by piece (the large one is never held whole)

interface Spec {
  readonly name: string;
  readonly seed: number;
  readonly size: number;
  /** The sizes of the pieces the body yields, cycled. */
  readonly pieces: readonly number[];
  readonly digest: string;
}

function byteAt(seed: number, i: number): number {
  return (Math.imul(i + 1, 2654435761) ^ Math.imul(seed + 11, 40503) ^ (i >>> 9)) & 0xff;
}

function fill(seed: number, at: number, n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = byteAt(seed, at + i);
  return out;
}

function makeSpec(name: string, seed: number, size: number, pieces: number[]): Spec {
  const hash = createHash('sha256');
  for (let at = 0; at < size; at += 1 << 16) hash.update(fill(seed, at, Math.min(1 << 16, size - at)));
  return { name, seed, size, pieces, digest: 'sha256:' + hash.digest('hex') };
}

async function* bodyOf(spec: Spec): AsyncGenerator<Uint8Array> {
  let k = 0;
  for (let at = 0; at < spec.size; ) {
    const n = Math.min(Math.max(1, spec.pieces[k++ % spec.pieces.length] ?? 1), spec.size - at);
    yield fill(spec.seed, at, n);
    at += n;
  }
}

// ---------------------------------------------------------------------------------------------
// What the store holds, payload by payload

interface PayloadState {
  readonly present: boolean;
  /** Sorted. */
  readonly holders: readonly string[];
}

type Content = ReadonlyMap<string, PayloadState>;

const ABSENT: PayloadState = { present: false, holders: [] };

function stateOf(c: Content, name: string): PayloadState {
  return c.get(name) ?? ABSENT;
}

function withState(c: Content, name: string, s: PayloadState): Content {
  const next = new Map(c);
  next.set(name, s);
  return next;
}

function showState(s: PayloadState): string {
  return `${s.present ? 'present' : 'absent'}${s.holders.length > 0 ? ` held by ${s.holders.join(',')}` : ''}`;
}

function showContent(c: Content): string {
  const parts: string[] = [];
  for (const [name, s] of [...c].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) if (s.present || s.holders.length > 0) parts.push(`${name} ${showState(s)}`);
  return parts.length === 0 ? 'nothing' : parts.join('; ');
}

// ---------------------------------------------------------------------------------------------
// Planted mistakes: a layer that swallows the one call a mistake would omit

type Plant = 'put-ack-before-sync' | 'put-skip-dir-sync' | 'ref-rename-before-sync' | 'ref-skip-dir-sync';

const PLANTS: Readonly<Record<Plant, string>> = {
  'put-ack-before-sync': "put acknowledges without its fdatasync: the temporary blob's data is never synced before the link (acknowledging before the sync)",
  'put-skip-dir-sync': "put skips the directory sync after linking (or renaming) the blob into blobs/<hh> (skipping a directory sync after create or rename)",
  'ref-rename-before-sync': 'addRef/removeRef rename a refcount file into place without its fdatasync (rename before fsync)',
  'ref-skip-dir-sync': 'addRef/removeRef skip the directory sync after the rename or unlink in refs/<hh> (skipping a directory sync after rename)',
};

function isPlant(p: string): p is Plant {
  return Object.hasOwn(PLANTS, p);
}

/**
 * The store's view of the disk with one mistake planted: the swallowed call answers success and
 * never reaches the disk, exactly as if the store's code did not make it. `sync after change`
 * plants skip a fan-out directory's sync only when an entry changed in it since its last sync (the
 * sync that follows a link, rename or unlink), not the trust sync a store makes before it first
 * relies on a directory.
 */
class PlantFs implements FileSystem {
  readonly #inner: FileSystem;
  readonly #plant: Plant;
  /** Fan-out directories with an entry changed (link, rename, unlink) since their last sync. */
  readonly #changed = new Set<string>();

  constructor(inner: FileSystem, plant: Plant) {
    this.#inner = inner;
    this.#plant = plant;
  }

  #swallowsDataSync(file: string): boolean {
    const name = file.startsWith(TMP) ? file.slice(TMP.length) : '';
    return (this.#plant === 'put-ack-before-sync' && name.startsWith('put-')) || (this.#plant === 'ref-rename-before-sync' && name.startsWith('ref-'));
  }

  #watched(dir: string): boolean {
    const kind = path.basename(path.dirname(dir));
    return path.dirname(path.dirname(dir)) === DIR && ((this.#plant === 'put-skip-dir-sync' && kind === 'blobs') || (this.#plant === 'ref-skip-dir-sync' && kind === 'refs'));
  }

  async open(p: string, mode: OpenMode): Promise<FileHandle> {
    const handle = await this.#inner.open(p, mode);
    if (!this.#swallowsDataSync(p)) return handle;
    return {
      get path() {
        return handle.path;
      },
      read: (into, position) => handle.read(into, position),
      readv: (into, position) => handle.readv(into, position),
      write: (data, position) => handle.write(data, position),
      writev: (chunks, position) => handle.writev(chunks, position),
      datasync: async () => undefined,
      sync: async () => undefined,
      truncate: (size) => handle.truncate(size),
      size: () => handle.size(),
      tryLock: () => handle.tryLock(),
      unlock: () => handle.unlock(),
      close: () => handle.close(),
    };
  }
  readdir(dir: string): Promise<string[]> {
    return this.#inner.readdir(dir);
  }
  mkdir(dir: string): Promise<void> {
    return this.#inner.mkdir(dir);
  }
  async rename(from: string, to: string): Promise<void> {
    await this.#inner.rename(from, to);
    this.#changed.add(path.dirname(to));
  }
  async link(from: string, to: string): Promise<void> {
    await this.#inner.link(from, to);
    this.#changed.add(path.dirname(to));
  }
  async unlink(p: string): Promise<void> {
    await this.#inner.unlink(p);
    // A refcount file's removal (its last holder went) needs the sync; a blob's removal by a
    // collection does not (a blob that comes back unreferenced is garbage, collected again).
    if (path.basename(path.dirname(path.dirname(p))) === 'refs') this.#changed.add(path.dirname(p));
  }
  rmdir(dir: string): Promise<void> {
    return this.#inner.rmdir(dir);
  }
  stat(p: string): Promise<FileStat | null> {
    return this.#inner.stat(p);
  }
  lstat(p: string): Promise<EntryStat | null> {
    return this.#inner.lstat(p);
  }
  async syncDir(dir: string): Promise<void> {
    const pending = this.#changed.delete(dir);
    if (pending && this.#watched(dir)) return;
    await this.#inner.syncDir(dir);
  }
}

// ---------------------------------------------------------------------------------------------
// The run

/** How process 2 dies: inside which operation, at which call. */
interface KillPlan {
  readonly op: 'put' | 'put-again' | 'add-ref' | 'remove-last-ref' | 'remove-ref' | 'collect';
  /** The call held (never made): the process dies just before it. */
  readonly call: string;
  /** The step, as the history labels it. */
  readonly label: string;
}

async function run(context: WorkloadContext): Promise<WorkloadRun> {
  const { fs, random, scale } = context;
  if (context.plant !== null && !isPlant(context.plant)) throw new RangeError(`payloads: no planted mistake '${context.plant}'`);
  const plant = context.plant;
  const chunkBytes = [512, 1024, 2048][randomInt(random, 0, 2)]!;
  const view = (f: FileSystem): FileSystem => (plant === null ? f : new PlantFs(f, plant));
  const open = (f: FileSystem, clock: ManualClock): Promise<FsPayloadStore> => openPayloadStore(DIR, { fs: view(f), clock, graceMs: GRACE_MS, chunkBytes });

  // The catalogue: every payload the run may put.
  const specs = new Map<string, Spec>();
  let seeds = 1;
  const pieces = (): number[] => Array.from({ length: randomInt(random, 1, 4) }, () => (random() < 0.3 ? randomInt(random, 1, 64) : randomInt(random, 100, 3000)));
  const spec = (name: string, size: number): Spec => {
    const s = makeSpec(name, seeds++ * 977 + randomInt(random, 0, 1000), size, size > 100_000 ? [randomInt(random, 40_000, 300_000), randomInt(random, 1000, 70_000)] : pieces());
    specs.set(name, s);
    return s;
  };
  const medium = (): number => randomInt(random, 600, 6000);
  const small = (): number => randomInt(random, 1, 200);
  const A = spec('A', medium());
  const B = spec('B', small());
  const E = spec('E', 0);
  // About 1 MiB of frames: more than one write batch of the put (lib/payloads/write.ts).
  const BIG = spec('BIG', randomInt(random, 1_060_000, 1_120_000));
  const C = spec('C', medium());
  const D = spec('D', medium());
  const F = spec('F', small());
  const G = spec('G', medium());
  const byDigest = new Map([...specs.values()].map((s) => [s.digest, s] as const));
  const holders = ['q1', 'q2', 'q3', 'q4'];

  const history = new StepHistory<Content>(new Map(), 'empty store');
  /** Store time of each payload's last put (what its header says), for the collection's model. */
  const written = new Map<string, number>();
  const counts: Record<string, number> = {};
  let removedByCollections = 0;
  const count = (k: string): void => void (counts[k] = (counts[k] ?? 0) + 1);

  /** One process's store and how it acknowledges. */
  interface Proc {
    store: FsPayloadStore;
    clock: ManualClock;
    mark: MemoryFs;
  }

  const put = async (p: Proc, s: Spec): Promise<void> => {
    const again = stateOf(history.current, s.name).present;
    count(again ? 'put again' : 'put');
    const k = history.push(`put ${s.name} (${s.size} bytes${again ? ', stored already' : ''})`, withState(history.current, s.name, { ...stateOf(history.current, s.name), present: true }));
    const at = p.store.storeTime();
    const info = await p.store.put(bodyOf(s));
    if (info.digest !== s.digest || info.size !== s.size) throw new Error(`payloads: put ${s.name} answered ${info.digest} (${info.size} bytes), expected ${s.digest} (${s.size})`);
    written.set(s.name, at);
    history.ack(p.mark, k);
  };
  const addRef = async (p: Proc, s: Spec, holder: string): Promise<void> => {
    count('addRef');
    const before = stateOf(history.current, s.name);
    const k = history.push(`addRef ${s.name} ${holder}`, withState(history.current, s.name, { ...before, holders: [...new Set([...before.holders, holder])].sort() }));
    await p.store.addRef(s.digest, holder);
    history.ack(p.mark, k);
  };
  const removeRef = async (p: Proc, s: Spec, holder: string): Promise<void> => {
    count('removeRef');
    const before = stateOf(history.current, s.name);
    const k = history.push(`removeRef ${s.name} ${holder}`, withState(history.current, s.name, { ...before, holders: before.holders.filter((h) => h !== holder) }));
    await p.store.removeRef(s.digest, holder);
    history.ack(p.mark, k);
  };
  /** What a collection at store time `now` leaves (the store's rule, docs/payloads.md). */
  const collected = (now: number): { content: Content; removed: string[] } => {
    let c = history.current;
    const removed: string[] = [];
    for (const [name, s] of history.current) {
      const w = written.get(name);
      if (!s.present || s.holders.length > 0 || w === undefined || w > now || now - w < GRACE_MS) continue;
      c = withState(c, name, ABSENT);
      removed.push(name);
    }
    return { content: c, removed };
  };
  const collect = async (p: Proc): Promise<void> => {
    count('collectGarbage');
    const { content, removed } = collected(p.store.storeTime());
    const k = history.push(`collectGarbage (removes ${removed.length === 0 ? 'nothing' : removed.join(', ')})`, content);
    const report = await p.store.collectGarbage();
    history.ack(p.mark, k);
    if (report.removed !== removed.length) {
      throw new Error(`payloads: the collection removed ${report.removed} payload(s), expected ${removed.length} (${removed.join(', ') || 'none'})`);
    }
    removedByCollections += report.removed;
    for (const s of specs.values()) {
      const present = (await p.store.stat(s.digest)) !== null;
      if (present !== stateOf(content, s.name).present) throw new Error(`payloads: after the collection ${s.name} is ${present ? 'present' : 'absent'}, expected otherwise`);
    }
  };
  const present = (): Spec[] => [...specs.values()].filter((s) => stateOf(history.current, s.name).present);
  /** A random reference change or second put on what is stored now (nothing when nothing fits). */
  const randomStep = async (p: Proc): Promise<void> => {
    const stored = present();
    if (stored.length === 0) return;
    const s = stored[randomInt(random, 0, stored.length - 1)]!;
    const held = stateOf(history.current, s.name).holders;
    const r = random();
    if (r < 0.45 || held.length === 0) {
      const free = holders.filter((h) => !held.includes(h));
      if (free.length > 0 && r < 0.9) return addRef(p, s, free[randomInt(random, 0, free.length - 1)]!);
      if (s.size < 100_000) return put(p, s);
      return;
    }
    if (r < 0.8) return removeRef(p, s, held[randomInt(random, 0, held.length - 1)]!);
    if (s.size < 100_000) return put(p, s);
    return removeRef(p, s, holders[randomInt(random, 0, holders.length - 1)]!); // possibly not a holder: no change
  };
  /** What a process sees at open, payload by payload (stat and refs sync what they rely on first). */
  const observe = async (p: Proc): Promise<Content> => {
    const seen = new Map<string, PayloadState>();
    for (const s of specs.values()) {
      const st = await p.store.stat(s.digest);
      const h = await p.store.refs(s.digest);
      if (st !== null && st.size !== s.size) throw new Error(`payloads: ${s.name} is stored with ${st.size} bytes, not ${s.size}`);
      if (st !== null || h.length > 0) seen.set(s.name, { present: st !== null, holders: [...h].sort() });
    }
    return seen;
  };

  // Process 1: the plan, every step acknowledged.
  const clock1 = new ManualClock();
  const p1: Proc = { store: await open(fs, clock1), clock: clock1, mark: fs };
  await put(p1, A);
  await addRef(p1, A, 'q1');
  await put(p1, B);
  await addRef(p1, B, 'q1');
  await addRef(p1, B, 'q2');
  await put(p1, E);
  await removeRef(p1, B, 'q1');
  await put(p1, A);
  await removeRef(p1, B, 'q2');
  for (let i = 0, n = Math.max(1, Math.round(8 * scale)); i < n; i++) await randomStep(p1);
  // The large payload lives for a few steps only: reading it back dominates a check's cost.
  await put(p1, BIG);
  await addRef(p1, BIG, 'q3');
  await removeRef(p1, BIG, 'q3');
  clock1.advance(GRACE_MS + 1);
  await put(p1, C);
  await collect(p1);
  await p1.store.close();

  // Process 2: one or two steps, then killed inside one call of an operation.
  const view2 = fs.newProcess();
  const faulty = new FaultyFs(view2);
  const clock2 = new ManualClock();
  const p2: Proc = { store: await open(faulty, clock2), clock: clock2, mark: view2 };
  clock2.advance(GRACE_MS + 1); // what process 1 put last is old now
  for (let i = 0, n = randomInt(random, 0, 2); i < n; i++) await randomStep(p2);
  const kill = await killSecond(p2, faulty);
  await faulty.sever();

  async function killSecond(p: Proc, f: FaultyFs): Promise<KillPlan> {
    const stored = present().filter((s) => s.size > 0 && s.size < 100_000);
    const sole = present().filter((s) => stateOf(history.current, s.name).holders.length === 1);
    const shared = present().filter((s) => stateOf(history.current, s.name).holders.length >= 2);
    const options: KillPlan['op'][] = ['put', 'put', 'collect', 'add-ref'];
    if (stored.length > 0) options.push('put-again');
    if (sole.length > 0) options.push('remove-last-ref');
    if (shared.length > 0) options.push('remove-ref');
    const op = options[randomInt(random, 0, options.length - 1)]!;
    const pick = <T>(xs: readonly T[]): T => xs[randomInt(random, 0, xs.length - 1)]!;
    const fanout = (kind: 'blobs' | 'refs', s: Spec): string => `${DIR}/${kind}/${s.digest.slice(7, 9)}`;
    /** Holds the first call of `kind` on `where` (after a call of `after.kind` on `after.where`, if given). */
    const holdAt = (kind: FsCallKind, where: PathPattern, after?: { kind: FsCallKind; where: PathPattern }): Promise<unknown> => {
      let armed = after === undefined;
      if (after !== undefined) f.fail({ kind: after.kind, path: after.where, when: () => ((armed = true), false) });
      const matches = (q: string): boolean => typeof where === 'function' ? where(q) : where instanceof RegExp ? where.test(q) : q === where;
      return f.pause(kind, (q) => armed && matches(q)).reached;
    };
    const nthWrite = (prefix: string, n: number): ((q: string) => boolean) => {
      let seen = 0;
      return (q) => q.startsWith(prefix) && ++seen === n;
    };
    let call: string;
    let issue: () => Promise<void>;
    let reached: Promise<unknown>;
    const lastStep = (label: string, next: Content): void => void history.push(label, next);
    switch (op) {
      case 'put':
      case 'put-again': {
        const s = op === 'put' ? D : pick(stored);
        const blobDir = fanout('blobs', s);
        // D fits one write batch: write 1 is its frames, write 2 its header (written after them).
        const calls = op === 'put' ? ['write 1', 'write 2', 'datasync', 'link', 'unlink', 'syncDir'] : ['rename', 'syncDir'];
        call = pick(calls);
        if (call.startsWith('write')) reached = holdAt('write', nthWrite(`${TMP}put-`, Number(call.slice(6))));
        else if (call === 'datasync') reached = holdAt('datasync', (q) => q.startsWith(`${TMP}put-`));
        else if (call === 'link') reached = holdAt('link', (q) => q.startsWith(`${TMP}put-`));
        else if (call === 'unlink') reached = holdAt('unlink', (q) => q.startsWith(`${TMP}put-`));
        else if (call === 'rename') reached = holdAt('rename', (q) => q.startsWith(`${TMP}put-`));
        else reached = holdAt('syncDir', blobDir, { kind: op === 'put' ? 'link' : 'rename', where: (q: string) => q.startsWith(`${blobDir}/`) });
        lastStep(`put ${s.name} (${s.size} bytes${op === 'put-again' ? ', stored already' : ''}), killed at its ${call}`, withState(history.current, s.name, { ...stateOf(history.current, s.name), present: true }));
        const at = p.store.storeTime();
        const landed = call === 'unlink' || call === 'syncDir';
        if (landed || op === 'put-again') written.set(s.name, landed ? at : (written.get(s.name) ?? at));
        issue = () => p.store.put(bodyOf(s)).then(() => undefined);
        break;
      }
      case 'add-ref': {
        const s = pick(present());
        const held = stateOf(history.current, s.name).holders;
        const holder = holders.find((h) => !held.includes(h)) ?? 'q9';
        const refDir = fanout('refs', s);
        call = pick(['write', 'datasync', 'rename', 'syncDir']);
        if (call === 'write' || call === 'datasync') reached = holdAt(call, (q) => q.startsWith(`${TMP}ref-`));
        else if (call === 'rename') reached = holdAt('rename', (q) => q.startsWith(`${TMP}ref-`));
        else reached = holdAt('syncDir', refDir, { kind: 'rename', where: (q: string) => q.startsWith(`${refDir}/`) });
        lastStep(`addRef ${s.name} ${holder}, killed at its ${call}`, withState(history.current, s.name, { ...stateOf(history.current, s.name), holders: [...held, holder].sort() }));
        issue = () => p.store.addRef(s.digest, holder);
        break;
      }
      case 'remove-last-ref':
      case 'remove-ref': {
        const s = pick(op === 'remove-ref' ? shared : sole);
        const held = stateOf(history.current, s.name).holders;
        const holder = pick(held);
        const refDir = fanout('refs', s);
        const change: FsCallKind = op === 'remove-ref' ? 'rename' : 'unlink';
        call = pick([change, 'syncDir']);
        if (call === 'syncDir') reached = holdAt('syncDir', refDir, { kind: change, where: (q: string) => q.startsWith(`${refDir}/`) });
        else reached = holdAt(change, (q) => q.startsWith(`${refDir}/`) || q.startsWith(`${TMP}ref-`));
        lastStep(`removeRef ${s.name} ${holder}, killed at its ${call}`, withState(history.current, s.name, { ...stateOf(history.current, s.name), holders: held.filter((h) => h !== holder) }));
        issue = () => p.store.removeRef(s.digest, holder);
        break;
      }
      case 'collect': {
        const { content, removed } = collected(p.store.storeTime());
        if (removed.length === 0) {
          // Nothing to collect would make the kill land after the work: put something old first.
          await put(p, F);
          p.clock.advance(GRACE_MS + 1);
          return killSecond(p, f);
        }
        call = pick(['unlink', 'syncDir']);
        const first = specs.get(removed[0]!)!;
        const blobDir = fanout('blobs', first);
        if (call === 'unlink') reached = holdAt('unlink', (q) => q.startsWith(`${DIR}/blobs/`));
        else reached = holdAt('syncDir', blobDir, { kind: 'unlink', where: (q: string) => q.startsWith(`${blobDir}/`) });
        lastStep(`collectGarbage (removes ${removed.join(', ')}), killed at its ${call}`, content);
        issue = () => p.store.collectGarbage().then(() => undefined);
        break;
      }
    }
    count('killed');
    const dying = issue().then(
      () => false,
      () => false,
    );
    if (!(await Promise.race([reached.then(() => true), dying]))) {
      throw new Error(`payloads: process 2's ${op} never made the call it was to be killed at (${call})`);
    }
    return { op, call, label: history.labels[history.last]! };
  }

  // Process 3: observes what survived (its first acknowledged step), runs more, closes.
  const view3 = fs.newProcess();
  const clock3 = new ManualClock();
  const p3: Proc = { store: await open(view3, clock3), clock: clock3, mark: view3 };
  const seen = await observe(p3);
  const window = { acked: history.last - 1, inFlight: history.last };
  const problem = disallowed(history, seen, window.acked, window.inFlight);
  if (problem !== null) throw new Error(`payloads: the restarted process found ${problem}, which no step left`);
  history.ack(view3, history.push(`process 3 opened: ${showContent(seen)}`, seen));
  for (let i = 0, n = Math.max(1, Math.round(6 * scale)); i < n; i++) await randomStep(p3);
  await put(p3, F);
  await addRef(p3, F, 'q1');
  for (const s of present()) if (s !== F) for (const h of stateOf(history.current, s.name).holders) if (random() < 0.5) await removeRef(p3, s, h);
  clock3.advance(GRACE_MS + 1);
  await put(p3, G); // young: the collection keeps it
  await collect(p3);
  await addRef(p3, G, 'q2');
  await p3.store.close();

  const trace = fs.trace;
  /** For a rename or link out of tmp/: the trace index of the next sync of its target directory. */
  const targetSynced = new Map<number, number>();
  for (const e of trace) {
    if ((e.kind === 'rename' || e.kind === 'link') && e.to !== undefined && e.error === undefined) {
      const dir = path.dirname(e.to);
      const sync = trace.find((x) => x.index > e.index && x.kind === 'syncDir' && x.path === dir && x.error === undefined);
      targetSynced.set(e.index, sync?.index ?? Number.POSITIVE_INFINITY);
    }
  }
  return {
    summary:
      `${history.last} steps (${Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(', ')}), chunks of ${chunkBytes} bytes, ` +
      `${removedByCollections} payload(s) removed by collections; process 2 died in its ${kill.label.replace(', killed at', ' at')}`,
    ackCheck: { dependsOn: (marker, op) => dependsOn(marker, op, targetSynced) },
    explain: (state) => history.explain(state, trace),
    check: async (state: CrashState) => {
      const { acked, inFlight } = history.window(state, trace);
      const disk = new MemoryFs({ image: state.image, trace: false });
      const first = await openPayloadStore(DIR, { fs: disk, clock: new ManualClock(), graceMs: GRACE_MS, chunkBytes });
      let got: Content;
      try {
        const leftovers = await disk.readdir(`${DIR}/tmp`);
        if (leftovers.length > 0) throw new Error(`temporary files survive open: ${leftovers.join(', ')}`);
        got = await inspect(first, byDigest, specs, true);
        const problem = disallowed(history, got, acked, inFlight);
        if (problem !== null) throw new Error(`reopened: ${problem}`);
        const report = await first.verify();
        if (report.problems.length > 0) throw new Error(`verify found: ${report.problems.map((x) => `${x.digest}: ${x.code} ${x.message}`).join('; ')}`);
      } finally {
        await first.close();
      }
      const second = await openPayloadStore(DIR, { fs: disk, clock: new ManualClock(), graceMs: GRACE_MS, chunkBytes });
      try {
        const again = await inspect(second, byDigest, specs, false);
        if (showContent(again) !== showContent(got)) throw new Error(`a second open found ${showContent(again)} after ${showContent(got)}`);
        // A collection right after recovery removes nothing that has a holder.
        await second.collectGarbage();
        for (const [name, s] of got) {
          if (s.holders.length > 0 && (await second.stat(specs.get(name)!.digest)) === null) throw new Error(`a collection right after recovery removed ${name}, held by ${s.holders.join(',')}`);
        }
      } finally {
        await second.close();
      }
    },
  };
}

/**
 * What the store holds, payload by payload; with `read`, every listed payload is read back whole
 * and must be byte-exact (its length and SHA-256, computed here); nothing unknown may be listed.
 */
async function inspect(store: FsPayloadStore, byDigest: ReadonlyMap<string, Spec>, specs: ReadonlyMap<string, Spec>, read: boolean): Promise<Content> {
  const listed = new Set<string>();
  for await (const d of store.digests()) {
    if (!byDigest.has(d)) throw new Error(`the store lists ${d}, which the run never put`);
    listed.add(d);
  }
  const got = new Map<string, PayloadState>();
  for (const s of specs.values()) {
    const isListed = listed.has(s.digest);
    let st: { size: number } | null;
    try {
      st = await store.stat(s.digest);
    } catch (err) {
      throw new Error(`${s.name} is ${isListed ? 'listed' : 'not listed'}; its stat fails: ${err instanceof Error ? err.message : String(err)}`);
    }
    if ((st !== null) !== isListed) throw new Error(`${s.name} is ${isListed ? 'listed' : 'not listed'} but stat answers ${JSON.stringify(st)}`);
    if (st !== null && st.size !== s.size) throw new Error(`${s.name} is stored with ${st.size} bytes, not ${s.size}`);
    if (st !== null && read) {
      const hash = createHash('sha256');
      let size = 0;
      try {
        for await (const chunk of await store.get(s.digest)) {
          hash.update(chunk);
          size += chunk.length;
        }
      } catch (err) {
        throw new Error(`${s.name} is listed but does not read back whole (a torn payload served?): ${err instanceof Error ? err.message : String(err)}`);
      }
      const digest = 'sha256:' + hash.digest('hex');
      if (size !== s.size || digest !== s.digest) throw new Error(`${s.name} read back as ${size} bytes with ${digest}, not ${s.size} bytes with ${s.digest}`);
    }
    const h = [...(await store.refs(s.digest))].sort();
    if (st !== null || h.length > 0) got.set(s.name, { present: st !== null, holders: h });
  }
  return got;
}

/**
 * Null when every payload shows a presence and a holder set that some step from `acked` to
 * `inFlight` left it (payload by payload: the store's operations touch one payload each, and a
 * collection's removals are independent of each other); else what is wrong.
 */
function disallowed(history: StepHistory<Content>, got: Content, acked: number, inFlight: number): string | null {
  const names = new Set<string>(got.keys());
  for (let j = acked; j <= inFlight; j++) for (const n of history.states[j]!.keys()) names.add(n);
  for (const name of names) {
    const s = stateOf(got, name);
    const options: PayloadState[] = [];
    for (let j = acked; j <= inFlight; j++) options.push(stateOf(history.states[j]!, name));
    if (!options.some((o) => o.present === s.present)) {
      return `${name} ${s.present ? 'present' : 'absent'}, but every step from ${acked} (acknowledged) to ${inFlight} leaves it ${options[0]!.present ? 'present' : 'absent'}`;
    }
    if (!options.some((o) => o.holders.join(',') === s.holders.join(','))) {
      return `${name} held by [${s.holders.join(',')}], but the steps from ${acked} (acknowledged) to ${inFlight} leave it held by ${[...new Set(options.map((o) => `[${o.holders.join(',')}]`))].join(' or ')}`;
    }
  }
  return null;
}

/**
 * Whether an acknowledgement depends on an earlier call, for the linear pass. Not on: the LOCK file;
 * entries made or removed in tmp/ (a temporary name is garbage by design: open deletes what a
 * crash brings back); the bytes of another process's temporary files (a killed writer's abandoned
 * put). A rename or link out of tmp/ counts for its target directory only: it is depended on
 * until that directory is synced.
 */
function dependsOn(marker: TraceEntry, op: TraceEntry, targetSynced: ReadonlyMap<number, number>): boolean {
  if (op.path.endsWith('/LOCK')) return false;
  if (!op.path.startsWith(TMP)) return true;
  if (op.kind === 'write' || op.kind === 'writev' || op.kind === 'truncate') return op.process === marker.process;
  if (op.kind === 'rename' || op.kind === 'link') return (targetSynced.get(op.index) ?? Number.POSITIVE_INFINITY) > marker.index;
  return false;
}

export const workload: CrashWorkload = {
  name: 'payloads',
  description: 'payload store: streamed puts (0 B to ~1 MiB), a second put of stored bytes, addRef/removeRef, collections; a kill inside a put, a reference change or a collection',
  plants: PLANTS,
  run,
};
