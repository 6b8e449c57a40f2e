// The ids of the sections of `seglog bench stores`, in report order: what `--only` selects from.
//
// Owns: `STORES_SECTION_IDS`. Kept apart from suite.ts so that the command line can check `--only`
// without loading the suite (and the stores it imports).

export const STORES_SECTION_IDS: readonly string[] = [
  'host-commits',
  'host-open',
  'host-pg',
  'raft-appends',
  'raft-1mib',
  'raft-open',
  'raft-snapshot-rss',
  'raft-groups',
  'payload-put',
  'payload-put-large',
  'payload-get',
  'payload-get-large',
  'payload-put-concurrent-1mib',
  'payload-put-concurrent',
  'payload-get-concurrent-1mib',
  'payload-get-concurrent',
  'payload-rss',
];
