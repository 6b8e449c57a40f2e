// Kill-harness writer for the segmented log (./kill-harness.ts): opens the log, reports what it
// found, then appends in concurrent bursts (group commit, rolls at 8 KiB segments) with an
// occasional truncateAfter, dropBefore or reset, logging each operation before it is issued and
// each acknowledgement after it, until it is killed.

import { openSegmentedLog } from '../../segments/index.js';
import { randomInt } from '../../lib/crash/determinism.js';
import { ledger, runWriter, writerArgs } from './kill-child.js';
import { KILL_SEGMENT_BYTES, killRecord } from './kill-records.js';


runWriter(async () => {
  const { dir, life, random } = writerArgs();
  const log = await openSegmentedLog(dir, { segmentBytes: KILL_SEGMENT_BYTES });
  ledger({ t: 'open', first: log.firstIndex, end: log.endIndex });
  for (let seq = 1; ; seq++) {
    const r = random();
    const first = log.firstIndex;
    const end = log.endIndex;
    if (end - first > 2000) {
      const index = end - 300;
      ledger({ t: 'begin', seq, op: 'drop', index });
      await log.dropBefore(index);
      ledger({ t: 'ack', seq });
    } else if (r < 0.84) {
      let j = 0;
      const batches = Array.from({ length: randomInt(random, 1, 6) }, () =>
        Array.from({ length: random() < 0.7 ? 1 : randomInt(random, 2, 3) }, () => randomInt(random, 0, 300)),
      );
      const staged = batches.map((lens) => log.stage(lens.map((len) => killRecord(life, seq, j++, len))));
      // Staging does no I/O: the line is in the ledger before any byte of the burst is written.
      ledger({ t: 'begin', seq, op: 'append', batches, firsts: staged.map((s) => s.first) });
      await Promise.all(staged.map((s, b) => s.durable.then(() => ledger({ t: 'ack', seq, b }))));
    } else {
      const op = r < 0.91 ? 'truncate' : r < 0.985 ? 'drop' : 'reset';
      const index = op === 'truncate' ? randomInt(random, first, end) : op === 'drop' ? randomInt(random, first, end + 2) : end + randomInt(random, 0, 3);
      ledger({ t: 'begin', seq, op, index });
      if (op === 'truncate') await log.truncateAfter(index);
      else if (op === 'drop') await log.dropBefore(index);
      else await log.reset(index);
      ledger({ t: 'ack', seq });
    }
  }
});
