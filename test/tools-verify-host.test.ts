// `seglog verify` on host store realms (lib/tools/verify/host.ts): a clean realm is clean, and a
// single flipped byte anywhere in one (a deterministic sample of every file and every region:
// file headers, frame headers, payloads, cell slots, row frames, notes) is an ERROR, except in the
// regions listed in EXCEPTIONS below — bytes no reader of the store ever reads, or a cell slot the
// cell does not read — where verify must still report it (a warning) and the test proves the flip
// harmless with the store's own readers: the cell reads the same value, or the store opened on the
// damaged disk (a new boot: it rescans and recovers) shows exactly what it shows on the clean one.
// Also: crash leftovers are warnings and damage is an error (hand-made cases, and sampled crash
// states of the `host` crash workload, with and without a planted acknowledge-before-sync bug),
// and inspect's lines.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as os from 'node:os';
import * as path from 'node:path';
import { promises as fsp } from 'node:fs';
import { decodeCell, DEFAULT_SLOT_BYTES } from '../cells/format.js';
import { MemoryFs, type DiskImage } from '../lib/fs/memory.js';
import { loadImage } from './support/disk-image.js';
import {
  decodeCheckpoint,
  decodeHome,
  decodePublished,
  decodeStripeHeader,
  encodePublished,
  FRAME_HEADER_BYTES,
  HOME_SLOT_BYTES,
  parseStripeFileName,
  REC_SEAL,
  ROW_FRAME_HEADER_BYTES,
  ROW_HEADER_BYTES,
  STRIPE_HEADER_BYTES,
  stripeFileName,
  u32,
  u64,
  type HomeValue,
  type Position,
} from '../lib/host/fs/format.js';
import { runDemo } from '../lib/tools/demo.js';
import { verifyDataDirectory, verifyExitCode } from '../lib/tools/verify.js';
import { formatInspectReport, inspectDataDirectory } from '../lib/tools/inspect.js';
import { seededRandom, withSeededRandomness } from '../lib/crash/determinism.js';
import { exploreCrashStates } from '../lib/crash/index.js';
import { workload as hostWorkload } from '../lib/crash/workloads/host.js';
import type { ScopeRef } from '../lib/host/index.js';
import { buildHostRealm, dumpRealm, realmScopes } from './support/host-realm-data.js';
import { quietly } from './support/quietly.js';


/**
 * The regions where a flipped byte need not be an error, each with why no reader depends on it.
 * Verify must still report a flip there (a warning); the test proves each one harmless.
 */
const EXCEPTIONS = {
  standbySlot:
    "a cell's older slot of several sectors: the cell reads the live slot (verify warns: a damaged older slot); proof: the cell reads the same value",
  newestTail:
    "zero-filled space past the valid end (= the published note) of a stripe's newest file: never read; verify warns as for a torn log tail; proof: the store shows the same",
  afterSeal: "a sealed stripe file's zero-filled space after its SEAL: never read; proof: the store shows the same",
  beforeCheckpoint:
    "frames before the checkpoint position in the checkpoint's stripe file: already in the homes, no reader starts before the checkpoint; proof: the store shows the same",
  pastRowEnd:
    "row frames past the end offset a home's cell names (cut away by a truncation): never read; proof: the store shows the same",
  droppedRow:
    "a row frame below the home's first row, except its length field (read to find the frames after it): never read; proof: the store shows the same",
} as const;
type Exception = keyof typeof EXCEPTIONS;

interface Region {
  from: number;
  to: number;
  /** How many positions to sample in it (every position when it is not smaller than the region). */
  samples: number;
  /** Evenly spaced (a header: every field gets hit) instead of seeded random positions. */
  spread?: boolean;
}

/** What the test knows of a realm in the clean image: what classifies a byte and where regions lie. */
class RealmMap {
  readonly dir: string;
  readonly image: DiskImage;
  /** Per stripe: checkpoint position, note. */
  readonly ck: Position[] = [];
  readonly note: Position[] = [];
  /** Per home dir: its live value. */
  readonly homes = new Map<string, HomeValue>();

  constructor(image: DiskImage, dir: string) {
    this.image = image;
    this.dir = dir;
    const file = (p: string): Uint8Array => {
      const b = image.files[path.join(dir, p)];
      assert.ok(b !== undefined, p);
      return b;
    };
    const ckValue = cellValue(file('checkpoint'), DEFAULT_SLOT_BYTES)!;
    const stripes = (ckValue.length - 40) / 32; // 16 bytes before the positions, 24 after (the scope table)
    const ck = decodeCheckpoint(ckValue, stripes, 'checkpoint');
    for (let k = 0; k < stripes; k++) {
      this.ck.push(ck.positions[k]!);
      const note = decodePublished(file(`stripes/${k}/published`))!;
      this.note.push(note);
    }
    for (const [p, bytes] of Object.entries(image.files)) {
      if (p.startsWith(path.join(dir, 'scopes') + '/') && path.basename(p) === 'state') {
        this.homes.set(path.dirname(p), decodeHome(cellValue(bytes, HOME_SLOT_BYTES)!, p));
      }
    }
  }

  /** Sample regions of a file, and the exception (if any) of each byte. */
  regions(p: string, bytes: Uint8Array): Region[] {
    const rel = path.relative(this.dir, p);
    const out: Region[] = [];
    const all = (from: number, to: number): void => void out.push({ from, to, samples: to - from });
    const some = (from: number, to: number, n: number): void => void out.push({ from, to, samples: n });
    const spread = (from: number, to: number, n: number): void => void out.push({ from, to, samples: n, spread: true });
    const slotBytes = rel.startsWith('scopes/') ? HOME_SLOT_BYTES : DEFAULT_SLOT_BYTES;
    if (rel === 'FORMAT' || rel === 'checkpoint' || rel === 'fence/state' || (rel.startsWith('scopes/') && path.basename(rel) === 'state')) {
      const live = liveSlot(bytes, slotBytes);
      for (let k = 0; k < 2; k++) {
        // Each slot: its header (magic, size, length), then its sectors (value, zeros, stamps, checks).
        const s = k * slotBytes;
        if (k === live) all(s, s + 12);
        else some(s, s + 12, 4);
        some(s + 12, s + slotBytes, k === live ? 14 : 6);
      }
    } else if (path.basename(rel) === 'published') {
      spread(0, bytes.length, 22);
    } else if (parseStripeFileName(path.basename(rel)) !== null) {
      spread(0, STRIPE_HEADER_BYTES, 22);
      const seq = parseStripeFileName(path.basename(rel))!;
      const ck = this.ck[Number(path.basename(path.dirname(rel)))]!;
      let at = STRIPE_HEADER_BYTES;
      for (let n = 0; at + FRAME_HEADER_BYTES <= bytes.length; n++) {
        const len = u32(bytes, at + 4);
        if (len === 0 || u64(bytes, at + 8) === 0 || at + FRAME_HEADER_BYTES + len > bytes.length) break;
        if (seq === ck.seq && at < ck.offset) {
          // Before the checkpoint (a listed region): one byte of the header, one of the payload.
          some(at, at + FRAME_HEADER_BYTES, 1);
          some(at + FRAME_HEADER_BYTES, at + FRAME_HEADER_BYTES + len, 1);
        } else if (n === 0) all(at, at + FRAME_HEADER_BYTES);
        else {
          some(at, at + 4, 1);
          some(at + 4, at + 8, 1);
          some(at + 8, at + 16, 1);
        }
        if (!(seq === ck.seq && at < ck.offset)) some(at + FRAME_HEADER_BYTES, at + FRAME_HEADER_BYTES + len, n === 0 ? 12 : 2);
        at += FRAME_HEADER_BYTES + len;
      }
      some(at, Math.min(bytes.length, at + 16), 4);
      some(at, bytes.length, 6);
    } else if (/^[r]-[0-9a-f]{16}$/.test(path.basename(rel))) {
      spread(0, ROW_HEADER_BYTES, 12);
      for (let at = ROW_HEADER_BYTES; at + ROW_FRAME_HEADER_BYTES <= bytes.length; ) {
        const len = u32(bytes, at + 4);
        some(at, at + 4, 1);
        some(at + 4, at + 8, 1);
        some(at + 8, at + 16, 1);
        some(at + 16, at + 16 + len, 1);
        at += ROW_FRAME_HEADER_BYTES + len;
      }
    } else {
      some(0, bytes.length, 12);
    }
    return out;
  }

  /** The exception a byte of a file falls in (null: a flip there must be an error). */
  exceptionOf(p: string, bytes: Uint8Array, at: number): Exception | null {
    const rel = path.relative(this.dir, p);
    const base = path.basename(rel);
    if (rel === 'FORMAT' || rel === 'checkpoint' || rel === 'fence/state' || (rel.startsWith('scopes/') && base === 'state')) {
      const slotBytes = rel.startsWith('scopes/') ? HOME_SLOT_BYTES : DEFAULT_SLOT_BYTES;
      const slot = Math.floor(at / slotBytes);
      if (slot !== liveSlot(bytes, slotBytes)) return 'standbySlot';
      return null;
    }
    const seq = parseStripeFileName(base);
    if (seq !== null) {
      const k = Number(path.basename(path.dirname(rel)));
      const ck = this.ck[k]!;
      const note = this.note[k]!;
      if (seq === note.seq && at >= note.offset) return 'newestTail';
      if (seq === ck.seq && at >= STRIPE_HEADER_BYTES && at < ck.offset) return 'beforeCheckpoint';
      if (seq >= ck.seq && seq < note.seq && at >= sealEnd(bytes)) return 'afterSeal';
      return null;
    }
    const m = /^r-([0-9a-f]{16})$/.exec(base);
    if (m !== null) {
      const home = this.homes.get(path.dirname(p))!;
      const ref = home.rowFiles.find((r) => r.gen === m[1])!;
      if (at >= ref.endOffset) return 'pastRowEnd';
      let off = ROW_HEADER_BYTES;
      for (let i = ref.start; i < home.first && off < ref.endOffset; i++) {
        const len = u32(bytes, off + 4);
        if (at >= off && at < off + ROW_FRAME_HEADER_BYTES + len) return at >= off + 4 && at < off + 8 ? null : 'droppedRow';
        off += ROW_FRAME_HEADER_BYTES + len;
      }
    }
    return null;
  }
}

function cellState(bytes: Uint8Array, slotBytes: number) {
  try {
    return decodeCell(bytes, bytes.length, slotBytes, 'cell');
  } catch {
    return null;
  }
}

function cellValue(bytes: Uint8Array, slotBytes: number): Uint8Array | null {
  return cellState(bytes, slotBytes)?.live.value ?? null;
}

function liveSlot(bytes: Uint8Array, slotBytes: number): 0 | 1 | null {
  return cellState(bytes, slotBytes)?.live.slot ?? null;
}

/** The offset just after the SEAL frame of a sealed stripe file (walking frames by length). */
function sealEnd(bytes: Uint8Array): number {
  const header = decodeStripeHeader(bytes.subarray(0, STRIPE_HEADER_BYTES));
  assert.ok(header !== null);
  for (let at = STRIPE_HEADER_BYTES; at + FRAME_HEADER_BYTES <= bytes.length; ) {
    const len = u32(bytes, at + 4);
    assert.ok(len > 0, 'a sealed file has a SEAL');
    if (len === 1 && bytes[at + FRAME_HEADER_BYTES] === REC_SEAL) return at + FRAME_HEADER_BYTES + 1;
    at += FRAME_HEADER_BYTES + len;
  }
  assert.fail('no SEAL');
}

function positionsOf(regions: readonly Region[], rng: () => number): number[] {
  const out = new Set<number>();
  for (const r of regions) {
    if (r.to <= r.from) continue;
    if (r.samples >= r.to - r.from) {
      for (let i = r.from; i < r.to; i++) out.add(i);
      continue;
    }
    out.add(r.from);
    if (r.samples > 1) out.add(r.to - 1);
    if (r.spread === true) {
      for (let i = 1; i < r.samples - 1; i++) out.add(r.from + Math.floor((i * (r.to - r.from)) / (r.samples - 1)));
      continue;
    }
    for (let i = 2; i < r.samples; i++) out.add(r.from + Math.floor(rng() * (r.to - r.from)));
  }
  return [...out].sort((a, b) => a - b);
}

test('verify: host realms — clean is clean; every sampled single-byte flip is an error, or a listed harmless region that verify still reports', { timeout: 120_000 }, async (t) => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-verify-host-'));
  try {
    await quietly(() => runDemo(['--dir', root, '--records', '5']));
    await buildHostRealm(path.join(root, 'realm'));
    const image = await loadImage(root, ['host', 'realm']);
    const realms: { dir: string; refs: ScopeRef[] }[] = [
      { dir: '/data/realm', refs: Object.values(realmScopes()) },
      { dir: '/data/host', refs: [{ kind: 'session', name: 'demo' }] },
    ];
    const rng = seededRandom(20261130);
    const byClass = new Map<string, number>();
    let flips = 0;
    let errors = 0;
    let proven = 0;
    const perFile: string[] = [];
    for (const realm of realms) {
      const clean = await verifyDataDirectory(realm.dir, { fs: new MemoryFs({ image, trace: false }) });
      assert.deepEqual(clean.findings, [], `${realm.dir} verifies clean`);
      assert.deepEqual(clean.unknown, []);
      assert.equal(verifyExitCode(clean), 0);
      const map = new RealmMap(image, realm.dir);
      const cleanDump = await dumpRealm(image, realm.dir, realm.refs);
      const files = Object.keys(image.files).filter((f) => f.startsWith(realm.dir + '/')).sort();
      for (const file of files) {
        const bytes = image.files[file]!;
        if (bytes.length === 0) continue;
        let fileErrors = 0;
        const positions = positionsOf(map.regions(file, bytes), rng);
        for (const at of positions) {
          const flipped = bytes.slice();
          flipped[at] = flipped[at]! ^ (1 + Math.floor(rng() * 255));
          const damaged: DiskImage = { dirs: image.dirs ?? [], files: { ...image.files, [file]: flipped } };
          const report = await verifyDataDirectory(realm.dir, { fs: new MemoryFs({ image: damaged, trace: false }) });
          flips++;
          const code = verifyExitCode(report);
          const where = `byte ${at} of ${file}`;
          assert.notEqual(code, 0, `a flip of ${where} went unreported`);
          const exception = map.exceptionOf(file, bytes, at);
          if (code === 1) {
            errors++;
            fileErrors++;
            byClass.set(exception ?? 'error', (byClass.get(exception ?? 'error') ?? 0) + 1);
            continue;
          }
          assert.ok(exception !== null, `a flip of ${where} is reported only as warnings: ${JSON.stringify(report.findings)}`);
          // A listed region: prove that no reader depends on the byte.
          if (exception === 'standbySlot') {
            const slotBytes = file.includes('/scopes/') ? HOME_SLOT_BYTES : DEFAULT_SLOT_BYTES;
            assert.deepEqual(cellValue(flipped, slotBytes), cellValue(bytes, slotBytes), `a flip of ${where} changed what the cell reads`);
          } else {
            assert.equal(await dumpRealm(damaged, realm.dir, realm.refs), cleanDump, `a flip of ${where} (${exception}) changed what the store shows`);
          }
          proven++;
          byClass.set(`${exception} (warning, proven harmless)`, (byClass.get(`${exception} (warning, proven harmless)`) ?? 0) + 1);
        }
        perFile.push(`${path.relative('/data', file)} ${fileErrors}/${positions.length}`);
      }
    }
    t.diagnostic(`${flips} single-byte flips over ${Object.keys(image.files).length} host store files: ${errors} reported as errors, ${proven} as warnings in listed harmless regions (proven)`);
    t.diagnostic(`by region: ${JSON.stringify(Object.fromEntries([...byClass].sort()))}`);
    t.diagnostic(perFile.join('; '));
    assert.equal(errors + proven, flips);
    assert.ok(flips >= 1000, `only ${flips} flips`);
    // The interesting states are there: both slots of homes valid (so a live-slot flip falls back),
    // a sealed stripe file past the checkpoint, a truncated and a dropped row file.
    for (const need of ['standbySlot (warning, proven harmless)', 'afterSeal (warning, proven harmless)', 'pastRowEnd (warning, proven harmless)', 'droppedRow (warning, proven harmless)', 'beforeCheckpoint (warning, proven harmless)', 'newestTail (warning, proven harmless)']) {
      assert.ok((byClass.get(need) ?? 0) > 0, `no flip landed in ${need}`);
    }
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});

test('verify: host realm crash leftovers are warnings; damage the store cannot read past is an error', async () => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-verify-host-'));
  try {
    await buildHostRealm(path.join(root, 'realm'));
    const image = await loadImage(root, ['realm']);
    const run = async (files: Record<string, Uint8Array>, drop: string[] = []): Promise<{ code: number; text: string }> => {
      const all = { ...image.files, ...files };
      for (const d of drop) delete all[d];
      const r = await verifyDataDirectory('/data/realm', { fs: new MemoryFs({ image: { dirs: image.dirs ?? [], files: all }, trace: false }) });
      return { code: verifyExitCode(r), text: r.findings.map((f) => `${f.severity} ${f.path} ${f.message}`).join('\n') };
    };
    const map = new RealmMap(image, '/data/realm');
    const notePath = (k: number): string => `/data/realm/stripes/${k}/published`;
    const walPath = (k: number, seq: number): string => `/data/realm/stripes/${k}/${stripeFileName(seq)}`;
    const note1 = decodePublished(image.files[notePath(1)]!)!;

    // A torn tail after the last record (garbage an unfinished write left): a warning.
    const wal = image.files[walPath(1, map.note[1]!.seq)]!.slice();
    wal.fill(0x5a, note1.offset + 3, note1.offset + 40);
    let r = await run({ [walPath(1, map.note[1]!.seq)]: wal });
    assert.equal(r.code, 3, r.text);
    assert.match(r.text, /torn by a crash/);

    // The note lost its last rewrites (records past it, valid): a warning (the next open adopts them).
    const older = encodePublished({ ...map.ck[1]!, boot: note1.boot });
    r = await run({ [notePath(1)]: older });
    assert.equal(r.code, 3, r.text);
    assert.match(r.text, /past the published note/);

    // A stripe file left before the checkpoint's (an unlink lost in a crash): a warning.
    r = await run({ [walPath(0, map.ck[0]!.seq - 1)]: image.files[walPath(0, map.ck[0]!.seq)]! });
    assert.equal(r.code, 3, r.text);
    assert.match(r.text, /before the checkpoint/);

    // A leftover row file in a home (a round cut short): a warning.
    const home = [...map.homes.keys()][0]!;
    r = await run({ [`${home}/r-00000000000000ff`]: new Uint8Array(40) });
    assert.equal(r.code, 3, r.text);

    // The note names records past the valid end (acknowledged records lost): an error.
    r = await run({ [notePath(1)]: encodePublished({ ...note1, offset: note1.offset + 40, lsn: note1.lsn + 1 }) });
    assert.equal(r.code, 1, r.text);
    assert.match(r.text, /published \(acknowledged\) records are damaged or missing/);

    // A row file a home names is missing; the file the checkpoint starts in is missing: errors.
    const withRows = [...map.homes].find(([, v]) => v.rowFiles.length > 0)!;
    r = await run({}, [`${withRows[0]}/r-${withRows[1].rowFiles[0]!.gen}`]);
    assert.equal(r.code, 1, r.text);
    r = await run({}, [walPath(2, map.ck[2]!.seq)]);
    assert.equal(r.code, 1, r.text);
    assert.match(r.text, /checkpoint starts in this file, which is missing/);

    // The fence state's newest slot lost (zeroed): an error — the cell refuses to answer the older
    // slot (a token would be reissued).
    const state = image.files['/data/realm/fence/state']!.slice();
    const live = liveSlot(state, DEFAULT_SLOT_BYTES)!;
    state.fill(0, live * DEFAULT_SLOT_BYTES, (live + 1) * DEFAULT_SLOT_BYTES);
    r = await run({ '/data/realm/fence/state': state });
    assert.equal(r.code, 1, r.text);
    assert.match(r.text, /fence\/state.*CORRUPT/);
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});

/** Verifies a seeded sample of the `host` crash workload's crash states; answers the findings by message. */
async function verifyCrashStates(seed: number, plant: string | null, max: number): Promise<{ states: number; withErrors: number; messages: Map<string, number> }> {
  const fs = new MemoryFs({ image: { dirs: ['/data'], files: {} } });
  await withSeededRandomness(seed, () => hostWorkload.run({ fs, seed, random: seededRandom(seed), scale: 1, plant }));
  const base = { initial: fs.initialImage, trace: fs.trace, seed };
  const n = (await exploreCrashStates({ ...base, check: () => undefined, select: () => false, maxStates: Number.POSITIVE_INFINITY })).candidates;
  const rng = seededRandom(seed ^ 0x5eed);
  const chosen = new Set<number>();
  for (let j = n - Math.min(n, max); j < n; j++) {
    const x = Math.floor(rng() * (j + 1));
    chosen.add(chosen.has(x) ? j : x);
  }
  const messages = new Map<string, number>();
  let withErrors = 0;
  const result = await exploreCrashStates({
    ...base,
    select: (o) => chosen.has(o),
    maxViolations: Number.POSITIVE_INFINITY,
    check: async (state) => {
      const r = await verifyDataDirectory('/data', { fs: new MemoryFs({ image: state.image, trace: false }) });
      if (r.errors > 0) withErrors++;
      for (const f of r.findings) {
        const key = `${f.severity}: ${f.message.replace(/\d+/g, 'N').replace(/"[^"]*"/g, '"…"')}`;
        messages.set(key, (messages.get(key) ?? 0) + 1);
      }
    },
  });
  return { states: result.states, withErrors, messages };
}

test('verify: the crash states of the host workload have warnings only; with acknowledgements before the sync, errors', { timeout: 120_000 }, async (t) => {
  // The crash runner proves these states keep the store's contract (test/crash-host.test.ts):
  // verify must call what they hold crash leftovers, never damage.
  const clean = await verifyCrashStates(1, null, 150);
  t.diagnostic(`host crash states (seed 1): ${clean.states} verified, ${clean.withErrors} with errors; ${JSON.stringify(Object.fromEntries(clean.messages))}`);
  assert.ok(clean.states >= 120);
  assert.equal(clean.withErrors, 0, JSON.stringify([...clean.messages.keys()].filter((m) => m.startsWith('error'))));
  assert.ok([...clean.messages.keys()].some((m) => /past the published note/.test(m)), 'some states hold records past the note');
  // A store that publishes before its sync loses acknowledged records in a crash: verify says so.
  const planted = await verifyCrashStates(1, 'publish-before-sync', 60);
  t.diagnostic(`with publish-before-sync: ${planted.states} verified, ${planted.withErrors} with errors`);
  assert.ok(planted.withErrors > 0);
  assert.ok([...planted.messages.keys()].some((m) => /^error: .*published \(acknowledged\) records are damaged or missing/.test(m)));
});

test('inspect prints a host realm: fence, checkpoint, stripes and every scope', async () => {
  const root = await fsp.mkdtemp(path.join(os.tmpdir(), 'seglog-verify-host-'));
  try {
    await buildHostRealm(path.join(root, 'realm'));
    const report = await inspectDataDirectory(root);
    const text = formatInspectReport(report);
    const s = realmScopes();
    assert.match(text, /realm\/: host store realm, 3 stripe\(s\), realm id [0-9a-f]{32}; fence token 2 held by "writer-b" \(highest 2/);
    assert.match(text, /checkpoint round 3/);
    assert.match(text, /stripe 0: checkpoint file 1 offset \d+ lsn \d+; published file 2 offset/);
    assert.match(text, new RegExp(`session "${s.alpha.name}": version \\d+, rows \\[0, 9\\) \\(9\\)`));
    assert.match(text, new RegExp(`session "${s.beta.name}": version \\d+, rows \\[3, 8\\) \\(5\\)`));
    assert.match(text, new RegExp(`record "${s.epsilon.name}": deleted at version 2`));
    assert.match(text, /identity "gamma": version 3, rows \[0, 3\) \(3\), head 2500 bytes.*head in a blob/);
    assert.match(text, /verify: clean/);
  } finally {
    await fsp.rm(root, { recursive: true, force: true });
  }
});
