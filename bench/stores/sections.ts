// The ids of the sections of `seglog bench stores`, in report order: what `--only` selects from.
//
// Owns: `STORES_SECTION_IDS` and `SEGLOG_ALONE_SECTIONS`. Kept apart from suite.ts so that the command line can check `--only`
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

/**
 * The sections that measure seglog alone in this process (its payload store against raw I/O; the
 * 1 GiB payload's memory runs in a child process): the command runs them before it loads the
 * peers' libraries. With lmdb-js loaded into the process (loading it is enough), raw reads of the
 * page cache ran 1.6–3× slower and a payload get 1.3–1.5× slower, with six times the mark-compact
 * collections (docs/benchmarks.md, "Which libraries share the process"); the sections that pair
 * seglog with the peers round by round need them in the same process.
 */
export const SEGLOG_ALONE_SECTIONS: ReadonlySet<string> = new Set(STORES_SECTION_IDS.filter((id) => id.startsWith('payload-') && id !== 'payload-rss'));
