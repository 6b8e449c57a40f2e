// fast-check arbitraries for Raft values (lib/raft/types.ts), shared by the Raft tests.

import fc from 'fast-check';

// Plain objects (fast-check may build null-prototype ones; decoded values have Object.prototype).
const plain = { noNullPrototype: true } as const;

import type { Entry, LeaderId, LogId, Membership, StoredMembership, Vote } from '../../lib/raft/types.js';

/** Safe non-negative integers, small ones and extremes both likely. */
export const safeNat: fc.Arbitrary<number> = fc.oneof(fc.nat({ max: 300 }), fc.maxSafeNat(), fc.constant(Number.MAX_SAFE_INTEGER));

export const leaderIdArb: fc.Arbitrary<LeaderId> = fc.record({ term: safeNat, nodeId: safeNat }, plain);
export const logIdArb: fc.Arbitrary<LogId> = fc.record({ leaderId: leaderIdArb, index: safeNat }, plain);
export const optionalLogIdArb: fc.Arbitrary<LogId | null> = fc.option(logIdArb, { nil: null });
export const voteArb: fc.Arbitrary<Vote> = fc.record({ leaderId: leaderIdArb, committed: fc.boolean() }, plain);

const text = fc.oneof(fc.string({ maxLength: 12 }), fc.string({ unit: 'grapheme', maxLength: 6 }));
const scalar = fc.oneof(text, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Object.is(d, -0)), fc.boolean(), fc.constant(null));
const { json } = fc.letrec((tie) => ({
  json: fc.oneof({ depthSize: 'small' }, scalar, fc.array(tie('json'), { maxLength: 3 }), fc.dictionary(text, tie('json'), { maxKeys: 3, noNullPrototype: true })),
}));

/** Membership node data: JSON objects keyed by node id, with arbitrary JSON values. */
export const membershipArb: fc.Arbitrary<Membership> = fc.record(
  {
    configs: fc.array(fc.array(safeNat, { maxLength: 5 }), { maxLength: 3 }),
    nodes: fc.dictionary(fc.oneof(safeNat.map(String), text), json, { maxKeys: 4, noNullPrototype: true }),
  },
  plain,
);

export const storedMembershipArb: fc.Arbitrary<StoredMembership> = fc.record({ logId: optionalLogIdArb, membership: membershipArb }, plain);

export const digestArb: fc.Arbitrary<string> = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => 'sha256:' + Buffer.from(b).toString('hex'));

export const entryArb: fc.Arbitrary<Entry> = fc.record(
  {
    logId: logIdArb,
    payload: fc.oneof(
      fc.constant({ type: 'blank' as const }),
      fc.record({ type: fc.constant('normal' as const), data: fc.uint8Array({ maxLength: 300 }) }, plain),
      fc.record(
        { type: fc.constant('normal' as const), data: fc.uint8Array({ maxLength: 64 }), payloads: fc.array(digestArb, { minLength: 1, maxLength: 3 }) },
        plain,
      ),
      fc.record({ type: fc.constant('membership' as const), membership: membershipArb }, plain),
    ),
  },
  plain,
);
