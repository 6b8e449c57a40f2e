// Kill-harness writer for two-slot cells (./kill-harness.ts): opens four cells, reports what each
// holds, then writes all four concurrently (each cell one write at a time, values of random
// lengths up to the capacity), logging each write before it is issued and after it resolved,
// until it is killed.

import * as path from 'node:path';
import { openCell } from '../../cells/index.js';
import { cellValueCapacity } from '../../cells/format.js';
import { randomInt } from '../../lib/crash/determinism.js';
import { ledger, runWriter, writerArgs } from './kill-child.js';
import { KILL_CELLS, KILL_SLOT_BYTES, digestOf, killValue } from './kill-records.js';


runWriter(async () => {
  const { dir, life, random } = writerArgs();
  const cells = [];
  const found: (string | null)[] = [];
  for (let c = 0; c < KILL_CELLS; c++) {
    const cell = await openCell(path.join(dir, `c${c}.cell`), { slotBytes: KILL_SLOT_BYTES });
    found.push(digestOf(await cell.read()));
    cells.push(cell);
  }
  ledger({ t: 'open', cells: found });
  const capacity = cellValueCapacity(KILL_SLOT_BYTES);
  let seq = 0;
  await Promise.all(
    cells.map(async (cell, c) => {
      for (;;) {
        const s = ++seq;
        const len = random() < 0.2 ? capacity : randomInt(random, 0, capacity);
        ledger({ t: 'begin', c, seq: s, len });
        await cell.write(killValue(life, c, s, len));
        ledger({ t: 'ack', c, seq: s });
      }
    }),
  );
});
