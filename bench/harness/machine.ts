// Machine description: what a reader needs to judge whether figures from two runs are comparable.
//
// Owns: `describeMachine(dir)`. Guarantees: it only reads (os, /proc/mounts); a field it cannot
// learn is null rather than a guess. The filesystem is the mount that holds `dir`, found as the
// longest mount point in /proc/mounts that is a prefix of dir's real path.

import { readFileSync, realpathSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface MountInfo {
  mountPoint: string;
  device: string;
  type: string;
  options: string;
}

export interface MachineInfo {
  cpuModel: string;
  cpuCount: number;
  memoryBytes: number;
  /** e.g. "Linux 6.1.0 #1 SMP ..." */
  kernel: string;
  arch: string;
  node: string;
  /** libuv's thread pool size: UV_THREADPOOL_SIZE when set, else libuv's default of 4. */
  uvThreadpoolSize: number;
  uvThreadpoolSizeFrom: 'env' | 'default';
  /** The directory measured and the filesystem under it (null off Linux or when unreadable). */
  dir: string;
  filesystem: MountInfo | null;
}

/** Decodes the octal escapes /proc/mounts uses for spaces, tabs, newlines and backslashes. */
function unescapeMountField(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** Parses /proc/mounts text into entries (exported for tests). */
export function parseMounts(text: string): MountInfo[] {
  const out: MountInfo[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 4) continue;
    out.push({
      device: unescapeMountField(f[0] as string),
      mountPoint: unescapeMountField(f[1] as string),
      type: f[2] as string,
      options: f[3] as string,
    });
  }
  return out;
}

/** The mount holding `realDir`: the longest mount point that is a path prefix of it (last wins on ties). */
export function mountFor(mounts: readonly MountInfo[], realDir: string): MountInfo | null {
  let best: MountInfo | null = null;
  for (const m of mounts) {
    const mp = m.mountPoint;
    const inside = realDir === mp || mp === '/' || realDir.startsWith(mp.endsWith('/') ? mp : `${mp}/`);
    if (inside && (best === null || mp.length >= best.mountPoint.length)) best = m;
  }
  return best;
}

/** The thread pool size libuv will use in this process. */
export function uvThreadpool(env: Readonly<Record<string, string | undefined>> = process.env): { size: number; from: 'env' | 'default' } {
  const raw = env['UV_THREADPOOL_SIZE'];
  const n = raw === undefined ? NaN : Number.parseInt(raw, 10);
  // libuv clamps the value to 1..1024 and ignores garbage.
  if (Number.isFinite(n) && n > 0) return { size: Math.min(n, 1024), from: 'env' };
  return { size: 4, from: 'default' };
}

export function describeMachine(dir: string): MachineInfo {
  const cpus = os.cpus();
  let real = path.resolve(dir);
  try {
    real = realpathSync(dir);
  } catch {
    // keep the resolved path: the directory may not exist yet
  }
  let filesystem: MountInfo | null = null;
  try {
    filesystem = mountFor(parseMounts(readFileSync('/proc/mounts', 'utf8')), real);
  } catch {
    filesystem = null;
  }
  const pool = uvThreadpool();
  return {
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    cpuCount: cpus.length,
    memoryBytes: os.totalmem(),
    kernel: `${os.type()} ${os.release()} ${os.version()}`,
    arch: os.arch(),
    node: process.version,
    uvThreadpoolSize: pool.size,
    uvThreadpoolSizeFrom: pool.from,
    dir: real,
    filesystem,
  };
}

/** The 1-minute load average (0 where the platform has none). */
export function loadAverage(): number {
  return os.loadavg()[0] ?? 0;
}
