// The node of many groups: what a thousand mostly idle Raft groups cost one node.
//
// Owns: the `raft-groups` section of `seglog bench stores` — its two child phases (`create`: a
// new node, N groups with one blank entry each, then close, and the node's files counted;
// `open`: in a fresh process, the node opened and the first entry of every group read) and the
// section built from their runs. Guarantees: every figure comes from the real file system and
// the real process (/proc/self/fd, process.memoryUsage().rss after a full collection); a group
// whose first read does not answer its one entry fails the run, never a figure.

import { readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { openRaftNode } from '../../lib/raft/node.js';
import { measurement, type Measurement } from '../harness/report.js';
import { nowNs } from '../harness/timing.js';

/** Groups of the node (the acceptance figure speaks of a thousand). */
export const RAFT_NODE_GROUPS = 1000;

export interface RaftGroupsCreateResult {
  groups: number;
  /** openRaftNode on an empty directory, then every group created and its entry flushed. */
  createMs: number;
  closeMs: number;
  /** Sum of the sizes of the files under groups/ (apparent bytes). */
  fileBytes: number;
  /** Blocks allocated to the files and directories under groups/ (st_blocks × 512). */
  allocatedBytes: number;
  files: number;
  directories: number;
}

export interface RaftGroupsOpenResult {
  groups: number;
  openMs: number;
  /** openRaftNode, then every group's openGroup and the read of its entry. */
  openReadMs: number;
  fdsBefore: number;
  fdsOpen: number;
  rssBeforeBytes: number;
  rssOpenBytes: number;
}

const TERM = { term: 1, nodeId: 1 };

function groupId(i: number): string {
  return `queue/${i.toString().padStart(5, '0')}`;
}

function openDescriptors(): Promise<number> {
  return readdir('/proc/self/fd').then((names) => names.length);
}

function residentAfterGc(): Promise<number> {
  (globalThis as { gc?: () => void }).gc?.();
  return sleep(100).then(() => process.memoryUsage().rss);
}

/** Child phase 1: a new node of `groups` groups, one blank entry each, closed; its files counted. */
export async function raftGroupsCreate(dir: string, groups: number): Promise<RaftGroupsCreateResult> {
  await rm(dir, { recursive: true, force: true });
  const t0 = nowNs();
  const node = await openRaftNode(dir);
  for (let i = 0; i < groups; i++) {
    const g = await node.openGroup(groupId(i));
    await new Promise<void>((resolve, reject) => {
      g.log.append([{ logId: { leaderId: TERM, index: 1 }, payload: { type: 'blank' } }], (err) => (err === null ? resolve() : reject(err))).catch(reject);
    });
  }
  const t1 = nowNs();
  await node.close();
  const t2 = nowNs();
  const counted = { fileBytes: 0, allocatedBytes: 0, files: 0, directories: 0 };
  const walk = async (d: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      const st = await stat(p);
      counted.allocatedBytes += st.blocks * 512;
      if (e.isDirectory()) {
        counted.directories++;
        await walk(p);
      } else {
        counted.files++;
        counted.fileBytes += st.size;
      }
    }
  };
  await walk(path.join(dir, 'groups'));
  return { groups, createMs: (t1 - t0) / 1e6, closeMs: (t2 - t1) / 1e6, ...counted };
}

/** Child phase 2, in a fresh process: the node opened, every group's entry read, then idle. */
export async function raftGroupsOpen(dir: string, groups: number): Promise<RaftGroupsOpenResult> {
  const rssBeforeBytes = await residentAfterGc();
  const fdsBefore = await openDescriptors();
  const t0 = nowNs();
  const node = await openRaftNode(dir);
  const t1 = nowNs();
  for (let i = 0; i < groups; i++) {
    const g = await node.openGroup(groupId(i));
    const got = await g.log.tryGetLogEntries(1, 2);
    if (got.length !== 1 || got[0]?.logId.index !== 1) throw new Error(`group ${groupId(i)}: the first read answered ${got.length} entries`);
  }
  const t2 = nowNs();
  const fdsOpen = await openDescriptors();
  const rssOpenBytes = await residentAfterGc();
  if (node.groupIds().length !== groups) throw new Error(`the node holds ${node.groupIds().length} groups, not ${groups}`);
  await node.close();
  return { groups, openMs: (t1 - t0) / 1e6, openReadMs: (t2 - t0) / 1e6, fdsBefore, fdsOpen, rssBeforeBytes, rssOpenBytes };
}

/** The section's measurements from paired runs of the two phases. */
export function raftGroupsMeasurements(creates: RaftGroupsCreateResult[], opens: RaftGroupsOpenResult[]): Measurement[] {
  const groups = creates[0]?.groups ?? RAFT_NODE_GROUPS;
  const params = { groups, implementation: 'seglog' };
  const kib = (b: number): number => b / 1024;
  return [
    measurement({ id: 'raft-groups-create/seglog', label: `create a node of ${groups} groups, one blank entry each (flushed)`, unit: 'ms', runs: creates.map((r) => r.createMs), params }),
    measurement({ id: 'raft-groups-close/seglog', label: 'close that node', unit: 'ms', runs: creates.map((r) => r.closeMs), params }),
    measurement({ id: 'raft-groups-open/seglog', label: 'open the node (fresh process)', unit: 'ms', runs: opens.map((r) => r.openMs), params }),
    measurement({ id: 'raft-groups-open-read/seglog', label: 'open the node + first read of every group', unit: 'ms', runs: opens.map((r) => r.openReadMs), params }),
    measurement({
      id: 'raft-groups-fds/seglog',
      label: 'descriptors open with every group open (/proc/self/fd)',
      unit: 'count',
      runs: opens.map((r) => r.fdsOpen),
      params,
      notes: [`before the open: ${opens.map((r) => r.fdsBefore).join(', ')}`],
    }),
    measurement({
      id: 'raft-groups-rss/seglog',
      label: 'resident memory per idle open group (growth over the process before the open, after a full GC)',
      unit: 'KiB',
      runs: opens.map((r) => kib(r.rssOpenBytes - r.rssBeforeBytes) / r.groups),
      params,
    }),
    measurement({
      id: 'raft-groups-disk/seglog',
      label: 'disk per group holding one entry: file bytes (apparent size)',
      unit: 'KiB',
      runs: creates.map((r) => kib(r.fileBytes) / r.groups),
      params,
    }),
    measurement({
      id: 'raft-groups-disk-allocated/seglog',
      label: 'disk per group holding one entry: blocks allocated, directories included',
      unit: 'KiB',
      runs: creates.map((r) => kib(r.allocatedBytes) / r.groups),
      params,
    }),
    measurement({
      id: 'raft-groups-files/seglog',
      label: 'files per group (directories per group in the notes)',
      unit: 'count',
      runs: creates.map((r) => r.files / r.groups),
      params,
      notes: [`directories per group: ${creates.map((r) => (r.directories / r.groups).toFixed(2)).join(', ')}`],
    }),
  ];
}
