// `seglog bench stores [--quick] [--json]`: loads seglog's stores, runs the sections that measure
// seglog alone, then loads the peers and runs the rest, and assembles the report.
//
// Owns: `runStoresReport`. Guarantees: scratch files live in a fresh `.seglog-bench-*` directory
// under --dir, removed at the end, on failure and on Ctrl-C; when the peers are not installed it
// says so on stderr with the command that installs them, and measures the rest (the peers' rows
// and the targets that need them then read "NOT MEASURED (peer not installed)"); the report
// validates against the JSON Schema before it is printed.

import { mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { describeMachine, loadAverage } from '../harness/machine.js';
import { Progress } from '../harness/progress.js';
import { REPORT_SCHEMA_ID, REPORT_VERSION, type BenchReport } from '../harness/report.js';
import { validateReport } from '../harness/schema.js';
import { startBenchPostgres, type BenchPostgres } from './host-pg.js';
import { hostImplementations, raftImplementations, type PgServer } from './impls.js';
import { INSTALL_HINT, loadPeers } from './peers.js';
import { loadSeglogStores } from './seglog.js';
import { loadEngine } from '../engine.js';
import { collectStoreTargets, durationTarget, plannedStoresMs, runStores, storesConfig, type StoresConfig } from './suite.js';
import { SEGLOG_ALONE_SECTIONS, STORES_SECTION_IDS } from './sections.js';

export interface StoresCommandOptions {
  dir: string;
  quick: boolean;
  rounds: number;
  logBytes: number | undefined;
  scopes: number | undefined;
  payloadBytes: number | undefined;
  snapshotBytes: number | undefined;
  /** Run only these sections (ids of STORES_SECTION_IDS); all when undefined. */
  only?: readonly string[] | undefined;
}

export async function runStoresReport(o: StoresCommandOptions): Promise<BenchReport> {
  const startedAt = new Date();
  const loadStart = loadAverage();
  const root = await mkdtemp(path.join(o.dir, '.seglog-bench-'));
  const cleanup = (): void => {
    void rm(root, { recursive: true, force: true }).finally(() => process.exit(130));
  };
  process.once('SIGINT', cleanup);
  const progress = new Progress(1);
  let pg: BenchPostgres | null = null;
  try {
    const machine = describeMachine(root);
    const notes: string[] = [];
    if (machine.filesystem?.type === 'tmpfs' || machine.filesystem?.type === 'ramfs') {
      notes.push(`${machine.filesystem.type} keeps files in memory: a sync there costs nothing, so these figures do not describe a disk.`);
    }
    const seglog = await loadSeglogStores();
    for (const [what, s] of [
      ['host store (openFsHostStore)', seglog.host],
      ['Raft node (openRaftNode)', seglog.raft],
      ['payload store (openPayloadStore)', seglog.payloads],
    ] as const) {
      if (!s.ok) notes.push(`seglog ${what}: ${s.missing}.`);
    }
    const overrides: Partial<StoresConfig> = {};
    if (o.scopes !== undefined) overrides.realmScopes = o.scopes;
    if (o.logBytes !== undefined) overrides.logBytes = o.logBytes;
    if (o.payloadBytes !== undefined) overrides.bigPayloadBytes = o.payloadBytes;
    if (o.snapshotBytes !== undefined) overrides.snapshotBytes = o.snapshotBytes;
    if (o.only !== undefined) overrides.only = o.only;
    const cfg = storesConfig(root, o.quick, o.rounds, overrides);
    // The PostgreSQL host store and pgbench need a server: a scratch one, as the tests start one (or SEGLOG_PG_URL).
    let pgServer: PgServer | undefined;
    if (['host-commits', 'host-open', 'host-pg'].some((id) => o.only === undefined || o.only.includes(id))) {
      const started = await startBenchPostgres();
      if (started.ok) {
        pg = started.pg;
        pgServer = { ok: true, url: pg.url };
        notes.push(`PostgreSQL: ${pg.describe}.`);
      } else {
        pgServer = { ok: false, missing: started.missing };
        console.error(`seglog bench stores: the PostgreSQL host store is not measured: ${started.missing}`);
        notes.push(`PostgreSQL host store ${started.missing}`);
      }
    }
    const engine = await loadEngine();
    if ('missing' in engine) notes.push(`seglog segmented log: ${engine.missing}.`);
    const segments = 'open' in engine ? engine.open : null;
    // The sections of seglog alone run before the peers' libraries are loaded into this process:
    // loading lmdb-js alone slows raw page-cache reads 1.6–3× (sections.ts, SEGLOG_ALONE_SECTIONS).
    const notLoadedYet = 'the peers are loaded after the sections of seglog alone';
    const alone = { seglog, host: hostImplementations(seglog, null, notLoadedYet, pgServer), raft: raftImplementations(seglog, null, notLoadedYet), pg, segments };
    const plannedAlone = plannedStoresMs(cfg, alone);
    progress.grow(plannedAlone);
    const first = await runStores(cfg, alone, progress, (id) => SEGLOG_ALONE_SECTIONS.has(id));
    const loaded = loadPeers();
    const peers = loaded.ok ? loaded.peers : null;
    const peersMissing = loaded.ok ? '' : loaded.missing;
    if (peers === null) {
      console.error(`seglog bench stores: the peers (better-sqlite3 12, lmdb 3) are not installed, so their rows are not measured; ${INSTALL_HINT}.`);
      notes.push(`Peers NOT MEASURED: ${peersMissing}`);
    } else {
      notes.push(
        `Peers: better-sqlite3 ${peers.versions.betterSqlite3} (SQLite ${peers.versions.sqlite}) and lmdb-js ${peers.versions.lmdb}, ` +
          `loaded from ${path.relative(process.cwd(), peers.dir) || peers.dir} (not dependencies of seglog), ` +
          'after the sections that measure seglog alone (the payload sections; the 1 GiB one runs in a child process of its own).',
      );
    }
    const deps = { seglog, host: hostImplementations(seglog, peers, peersMissing, pgServer), raft: raftImplementations(seglog, peers, peersMissing), pg, segments };
    progress.grow(Math.max(0, plannedStoresMs(cfg, deps) - plannedAlone));
    const second = await runStores(cfg, deps, progress, (id) => !SEGLOG_ALONE_SECTIONS.has(id));
    const order = (id: string): number => STORES_SECTION_IDS.indexOf(id);
    const run = { sections: [...first.sections, ...second.sections].sort((a, b) => order(a.id) - order(b.id)), notes: second.notes };
    progress.finish();
    const why = {
      host: seglog.host.ok ? null : seglog.host.missing,
      raft: seglog.raft.ok ? null : seglog.raft.missing,
      payloads: seglog.payloads.ok ? null : seglog.payloads.missing,
      peers: peers === null ? `NOT MEASURED (peer not installed): ${INSTALL_HINT}` : null,
      pg: pgServer === undefined || pgServer.ok ? null : pgServer.missing,
    };
    const targets = collectStoreTargets(run.sections, cfg, why);
    const finishedAt = new Date();
    const durationMs = finishedAt.getTime() - startedAt.getTime();
    targets.push(durationTarget(o.quick, durationMs, o.only !== undefined));
    const report: BenchReport = {
      schema: REPORT_SCHEMA_ID,
      version: REPORT_VERSION,
      command: ['seglog', 'bench', 'stores', ...(o.quick ? ['--quick'] : []), ...(o.only !== undefined ? ['--only', o.only.join(',')] : [])].join(' '),
      quick: o.quick,
      startedAt: startedAt.toISOString(),
      finishedAt: finishedAt.toISOString(),
      durationMs,
      units: { latency: 'us', throughput: 'MiB/s', rate: 'per second', size: 'bytes' },
      machine,
      load: { start: loadStart, end: loadAverage() },
      sections: run.sections,
      targets,
      notes: [...notes, ...run.notes],
    };
    const problems = validateReport(report);
    if (problems.length > 0) throw new Error(`the report does not match its schema:\n${problems.join('\n')}`);
    return report;
  } finally {
    progress.finish();
    await pg?.stop();
    process.removeListener('SIGINT', cleanup);
    await rm(root, { recursive: true, force: true });
  }
}
