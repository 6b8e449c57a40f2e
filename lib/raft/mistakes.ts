// Planted mistakes of the file-system Raft log store: test-only switches that make it commit a
// known ordering mistake, so that the crash tests prove they catch each class (docs/crash-testing.md
// lists every store's switches and the tests that require each to be caught).
//
// Owns: `RaftMistakes`. Never set outside tests; not exported from the package. Passed to
// `openRaftNode` as `{ ...options, mistakes }` (not part of RaftNodeOptions), handed to each
// group's `FsRaftLogStorage`, which holds one object and consults it at four named points, each
// marked `mistakes.<name>` in fs-log.ts: `append` (flushBeforeSync), `purge`
// (dropBeforePurgedId), `saveVote` (voteNotBarrier) and `saveCommitted` (committedBeforeLog); the node's open consults
// `keepCleanMark` (node.ts), the node journal's checkpoint `dropJournalBeforeGroupSync` (node-journal.ts),
// a state machine's first write `markBeforeStateMachineFiles` (fs-state-machine.ts).

/** @internal */
export interface RaftMistakes {
  /** Call `onFlushed(null)` when the entries are staged, before the sync that covers them. */
  flushBeforeSync?: boolean;
  /** Write the vote cell without waiting for earlier appends to be durable. */
  voteNotBarrier?: boolean;
  /** Write the committed cell without waiting for earlier appends to be durable. */
  committedBeforeLog?: boolean;
  /** Drop the purged entries before the purged id is durable. */
  dropBeforePurgedId?: boolean;
  /** Truncate without first lowering the reference checkpoint's coverage to the cut. */
  truncateKeepsCheckpoint?: boolean;
  /** Leave the clean-close mark in place at open (a later open after a kill trusts what it reads). */
  keepCleanMark?: boolean;
  /** Drop the node journal's records at a checkpoint before the groups holding them synced their logs. */
  dropJournalBeforeGroupSync?: boolean;
  /** Mark a group's state machine files made in its GROUP file before they are renamed into place and synced. */
  markBeforeStateMachineFiles?: boolean;
}
