// The Raft conformance suite must fail on broken stores: each mutant below breaks one rule of the
// reference memory group, and the named suite tests must then fail (and pass on the intact group).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { runRaftConformanceTest, type RaftStorageBuilder, type RaftStoreUnderTest } from '../lib/conformance/raft.js';
import { kvPlugin } from '../lib/raft/kv.js';
import { MemoryRaftDisk, openMemoryRaftGroup } from '../lib/raft/memory.js';
import type { Entry, RaftLogReader, RaftLogStorage, RaftSnapshotBuilder, RaftStateMachine, Vote } from '../lib/raft/types.js';

type Mutate = (g: RaftStoreUnderTest) => RaftStoreUnderTest;

function builder(mutate?: Mutate): RaftStorageBuilder {
  return {
    async create() {
      const disk = new MemoryRaftDisk();
      return {
        open: async () => {
          const g = await openMemoryRaftGroup(disk, { plugin: kvPlugin });
          return mutate === undefined ? g : mutate(g);
        },
        cleanup: async () => {},
      };
    },
  };
}

/** The log with some methods replaced. */
function log(base: RaftLogStorage, over: Partial<RaftLogStorage>): RaftLogStorage {
  return {
    getLogState: () => base.getLogState(),
    getLogReader: () => base.getLogReader(),
    saveVote: (v) => base.saveVote(v),
    readVote: () => base.readVote(),
    saveCommitted: (c) => base.saveCommitted(c),
    readCommitted: () => base.readCommitted(),
    append: (e, cb) => base.append(e, cb),
    truncate: (l) => base.truncate(l),
    purge: (l) => base.purge(l),
    tryGetLogEntries: (s, e) => base.tryGetLogEntries(s, e),
    limitedGetLogEntries: (s, e) => base.limitedGetLogEntries(s, e),
    ...over,
  };
}

function sm(base: RaftStateMachine<unknown>, over: Partial<RaftStateMachine<unknown>>): RaftStateMachine<unknown> {
  return {
    appliedState: () => base.appliedState(),
    apply: (e) => base.apply(e),
    getSnapshotBuilder: () => base.getSnapshotBuilder(),
    beginReceivingSnapshot: () => base.beginReceivingSnapshot(),
    installSnapshot: (m, s) => base.installSnapshot(m, s),
    getCurrentSnapshot: () => base.getCurrentSnapshot(),
    ...over,
  };
}

interface Mutant {
  name: string;
  mutate: Mutate;
  /** Suite tests that must fail: in the plain pass, or only when reopened at checkpoints. */
  fails: string[];
  reopen?: boolean;
}

const mutants: Mutant[] = [
  {
    name: 'getLogState forgets the purged id when the log is empty',
    mutate: (g) => ({
      ...g,
      log: log(g.log, {
        getLogState: async () => {
          const st = await g.log.getLogState();
          const any = await g.log.tryGetLogEntries(0, Number.MAX_SAFE_INTEGER);
          return any.length === 0 ? { ...st, lastLogId: null } : st;
        },
      }),
    }),
    fails: ['get_log_state', 'purge_logs_upto_20', 'last_id_in_log'],
  },
  {
    name: 'onFlushed held back until the next append',
    mutate: (g) => {
      let held: ((err: Error | null) => void) | null = null;
      return {
        ...g,
        log: log(g.log, {
          append: async (entries, cb) => {
            const previous = held;
            held = cb;
            await g.log.append(entries, () => {});
            previous?.(null);
          },
        }),
      };
    },
    fails: ['append_flush_callback_not_held_back', 'append_to_log', 'get_log_entries'],
  },
  {
    name: 'onFlushed called twice',
    mutate: (g) => ({ ...g, log: log(g.log, { append: (e, cb) => g.log.append(e, (err) => (cb(err), cb(err))) }) }),
    fails: ['append_to_log', 'log_reader_reads_new_entries'],
  },
  {
    name: 'a reader frozen at its creation',
    mutate: (g) => ({
      ...g,
      log: log(g.log, {
        getLogReader: async (): Promise<RaftLogReader> => {
          const frozen = await g.log.tryGetLogEntries(0, Number.MAX_SAFE_INTEGER);
          const pick = (s: number, e: number): Entry[] => frozen.filter((x) => x.logId.index >= s && x.logId.index < e);
          return { tryGetLogEntries: async (s, e) => pick(s, e), limitedGetLogEntries: async (s, e) => pick(s, e) };
        },
      }),
    }),
    fails: ['log_reader_reads_new_entries'],
  },
  {
    name: 'truncate keeps the entry at the given index',
    mutate: (g) => ({ ...g, log: log(g.log, { truncate: (l) => g.log.truncate({ ...l, index: l.index + 1 }) }) }),
    fails: ['delete_logs_since_0', 'delete_logs_after_5', 'write_io_in_call_order'],
  },
  {
    name: 'purge keeps the entry at the given index',
    mutate: (g) => ({ ...g, log: log(g.log, { purge: (l) => (l.index === 0 ? Promise.resolve() : g.log.purge({ ...l, index: l.index - 1 })) }) }),
    fails: ['purge_logs_upto_0', 'purge_logs_upto_5', 'try_get_log_entry'],
  },
  {
    name: 'limitedGetLogEntries answers [] for a range that starts before the first entry',
    mutate: (g) => ({
      ...g,
      log: log(g.log, {
        limitedGetLogEntries: async (s, e) => {
          const got = await g.log.limitedGetLogEntries(s, e);
          return got[0]?.logId.index === s ? got : [];
        },
      }),
    }),
    fails: ['limited_get_log_entries_bounded'],
  },
  {
    name: 'the vote is not durable (lost at reopen)',
    mutate: (g) => {
      let kept: Vote | null = null; // in the handle only: gone at close
      return {
        ...g,
        log: log(g.log, {
          saveVote: async (v) => void (kept = v),
          readVote: async () => kept,
        }),
      };
    },
    fails: ['save_vote'],
    reopen: true,
  },
  {
    name: 'apply does not record membership',
    mutate: (g) => ({
      ...g,
      stateMachine: sm(g.stateMachine, {
        apply: (entries) => g.stateMachine.apply(entries.map((e) => (e.payload.type === 'membership' ? { logId: e.logId, payload: { type: 'blank' } } : e))),
      }),
    }),
    fails: ['last_applied_state', 'apply_multiple', 'get_membership_from_empty_log_and_sm'],
  },
  {
    name: 'the snapshot builder captures at build time, not when obtained',
    mutate: (g) => ({
      ...g,
      stateMachine: sm(g.stateMachine, {
        getSnapshotBuilder: async (): Promise<RaftSnapshotBuilder> => ({ buildSnapshot: async () => (await g.stateMachine.getSnapshotBuilder()).buildSnapshot() }),
      }),
    }),
    fails: ['build_snapshot_while_applying'],
  },
  {
    name: 'installSnapshot keeps the old state',
    mutate: (g) => ({ ...g, stateMachine: sm(g.stateMachine, { installSnapshot: async () => {} }) }),
    fails: ['transfer_snapshot', 'install_snapshot_replaces_state'],
  },
  {
    name: 'getCurrentSnapshot answers nothing',
    mutate: (g) => ({ ...g, stateMachine: sm(g.stateMachine, { getCurrentSnapshot: async () => null }) }),
    fails: ['transfer_snapshot', 'snapshot_meta'],
  },
  {
    name: 'saveCommitted is a no-op (the optional part left out)',
    mutate: (g) => ({ ...g, log: log(g.log, { saveCommitted: async () => {}, readCommitted: async () => null }) }),
    fails: ['get_initial_state_re_apply_committed', 'vote_and_committed_overwrite'],
  },
  {
    name: 'invalid numbers accepted',
    mutate: (g) => ({
      ...g,
      log: log(g.log, { tryGetLogEntries: (s, e) => g.log.tryGetLogEntries(Number.isSafeInteger(s) && s >= 0 ? s : 0, e) }),
    }),
    fails: ['invalid_input_refused'],
  },
];

test('the conformance suite passes on the intact memory group (the tests the mutants target)', async () => {
  const names = new Set(mutants.flatMap((m) => m.fails));
  for (const name of names) {
    await runRaftConformanceTest(builder(), name, { reopen: false });
    await runRaftConformanceTest(builder(), name, { reopen: true });
  }
});

for (const m of mutants) {
  test(`the conformance suite catches: ${m.name}`, async () => {
    for (const name of m.fails) {
      await assert.rejects(
        runRaftConformanceTest(builder(m.mutate), name, { reopen: m.reopen ?? false, callbackDeadlineMs: 300 }),
        (err: unknown) => err instanceof Error,
        `${name} must fail`,
      );
    }
    if (m.reopen === true) {
      // A durability mutant passes without reopening: the reopen pass is what catches it.
      for (const name of m.fails) await runRaftConformanceTest(builder(m.mutate), name, { reopen: false });
    }
  });
}
