// The linear pass: proves "nothing is acknowledged before the sync that covers it" from a trace
// alone, without enumerating crash states.
//
// Owns: `checkAckAfterSync`. It walks the trace once, keeping per file the writes and truncates
// not yet covered by a datasync/sync of that file, and per directory the entry changes (create,
// mkdir, rename = unlink + link, link, unlink, rmdir) not yet covered by a syncDir of that
// directory. Guarantees, for the model of docs/crash-testing.md:
// - at each acknowledgement marker it reports every operation the marker depends on (by default:
//   every operation before it) that a crash right then could still lose. No report means every
//   crash state after the marker holds all of them, so no crash can undo what was acknowledged.
// - it reports every rename or link of a file whose own writes were not yet synced (the classic
//   "rename before fsync": a crash can show the new name with missing bytes).
// What it cannot say: whether the synced bytes are the right ones, or whether recovery reads them
// correctly; the explorer (./explore.ts) checks that, state by state.

import type { TraceEntry } from '../fs/memory.js';

export interface AckCheckOptions {
  /** Which markers are acknowledgements (default: every marker). */
  isAck?: (marker: TraceEntry) => boolean;
  /**
   * Whether the acknowledgement `marker` depends on the earlier operation `op` (default: every
   * earlier operation does, which is exact for a workload that awaits each call before the next).
   * Concurrent workloads narrow it, e.g. to the files the acknowledged call wrote.
   */
  dependsOn?: (marker: TraceEntry, op: TraceEntry) => boolean;
}

/** What a finding of the linear pass lists: the operations not durable when they had to be. */
interface UnsyncedFinding {
  readonly unsynced: readonly TraceEntry[];
  readonly description: string;
}

/** `unsynced`: the operations the marker depends on that were not durable when it was recorded. */
export interface AckViolation extends UnsyncedFinding {
  readonly marker: TraceEntry;
}

/** `unsynced`: the writes/truncates of the renamed file not yet synced at the rename. */
export interface RenameBeforeSync extends UnsyncedFinding {
  readonly entry: TraceEntry;
}

export interface AckCheckResult {
  /** Acknowledgement markers checked. */
  readonly acks: number;
  readonly violations: readonly AckViolation[];
  readonly renamesBeforeSync: readonly RenameBeforeSync[];
}

function describe(e: TraceEntry): string {
  if (e.kind === 'write' || e.kind === 'writev') return `#${e.index} ${e.kind} ${e.path} @${e.offset ?? 0}+${e.length ?? 0}`;
  if (e.kind === 'truncate') return `#${e.index} truncate ${e.path} to ${e.size ?? 0}`;
  if (e.to !== undefined) return `#${e.index} ${e.kind} ${e.path} -> ${e.to}`;
  return `#${e.index} ${e.kind} ${e.path}`;
}

/** The linear pass; see the module header. */
export function checkAckAfterSync(trace: readonly TraceEntry[], options: AckCheckOptions = {}): AckCheckResult {
  const isAck = options.isAck ?? (() => true);
  const dependsOn = options.dependsOn ?? (() => true);
  /** inode → unsynced writes/truncates. */
  const files = new Map<number, TraceEntry[]>();
  /** directory inode → calls with an unsynced change in it. */
  const dirs = new Map<number, TraceEntry[]>();
  const violations: AckViolation[] = [];
  const renamesBeforeSync: RenameBeforeSync[] = [];
  let acks = 0;

  for (const e of trace) {
    if (e.error !== undefined) continue;
    switch (e.kind) {
      case 'write':
      case 'writev':
      case 'truncate': {
        if (e.kind !== 'truncate' && (e.length ?? 0) === 0) break;
        const list = files.get(e.inode ?? -1) ?? [];
        list.push(e);
        files.set(e.inode ?? -1, list);
        break;
      }
      case 'datasync':
      case 'sync':
        files.delete(e.inode ?? -1);
        break;
      case 'syncDir':
        dirs.delete(e.inode ?? -1);
        break;
      case 'rename':
      case 'link': {
        const pending = files.get(e.inode ?? -1);
        if (pending !== undefined && pending.length > 0) {
          renamesBeforeSync.push({
            entry: e,
            unsynced: [...pending],
            description: `${describe(e)} names a file whose ${pending.length} write(s) were not synced: ${pending.map(describe).join('; ')}`,
          });
        }
        break;
      }
      case 'mark': {
        if (!isAck(e)) break;
        acks++;
        const unsynced: TraceEntry[] = [];
        for (const list of files.values()) for (const op of list) if (dependsOn(e, op)) unsynced.push(op);
        for (const list of dirs.values()) for (const op of list) if (dependsOn(e, op) && !unsynced.includes(op)) unsynced.push(op);
        if (unsynced.length > 0) {
          unsynced.sort((a, b) => a.index - b.index);
          violations.push({
            marker: e,
            unsynced,
            description: `marker #${e.index} "${e.label ?? ''}" acknowledges before these were durable: ${unsynced.map(describe).join('; ')}`,
          });
        }
        break;
      }
      default:
        break;
    }
    for (const change of e.changes ?? []) {
      const list = dirs.get(change.dir) ?? [];
      if (list[list.length - 1] !== e) list.push(e);
      dirs.set(change.dir, list);
    }
  }
  return { acks, violations, renamesBeforeSync };
}
