// Who holds the locks under a directory: for a test's failure report (Linux only).
//
// Owns: `lockHolders(dir)`. Reads /proc/<pid>/fdinfo/<fd> of every process of this user: an open
// file description holding an OFD or flock lock lists it there ("lock:" lines), and
// /proc/<pid>/fd/<fd> names its file. Answers one line per held lock on a file under `dir`.

import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

export function lockHolders(dir: string): string[] {
  const out: string[] = [];
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return ['(no /proc)'];
  }
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const file = readlinkSync(`/proc/${pid}/fd/${fd}`);
        if (!file.startsWith(dir)) continue;
        const info = readFileSync(`/proc/${pid}/fdinfo/${fd}`, 'utf8');
        for (const line of info.split('\n')) {
          if (line.startsWith('lock:')) out.push(`pid ${pid} fd ${fd} ${file}: ${line.slice(5).trim()}`);
        }
      } catch {
        // The process or descriptor went away meanwhile.
      }
    }
  }
  return out;
}
