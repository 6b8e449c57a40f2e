// Payload names: which payload digests the node's Raft logs name, for the ordering rule's other
// half — the payload store's garbage collection must never remove a payload that a durable (or
// staged) log record names (docs/contracts/raft-store.md, sections 3 and 5).
//
// Owns: `PayloadNameIndex`, the node-wide count of live log records naming each digest, and
// `GroupNames`, one group's list of the records that name payloads (index → digests), which the
// group uses to know what a truncation or a purge takes away. Guarantees (the callers keep them,
// see lib/raft/fs-log.ts): a digest's count rises before the payload's presence is checked for an
// append (so a collection racing the append either sees the count or is seen by the check), and
// falls only after the truncation or purge that removed its records is durable — a crash can
// never bring back a record whose payload was collected. Memory: one entry per record that names
// a payload, per live log (a Raft log is compacted after snapshots, so this stays bounded by what
// the logs hold between two snapshots).

import type { LogId } from './types.js';

/** Node-wide: digest → number of live (durable or staged) log records, of every group, naming it. */
export class PayloadNameIndex {
  readonly #counts = new Map<string, number>();

  /** Counts one more naming of each digest (a digest listed twice counts twice). */
  add(digests: readonly string[]): void {
    for (const d of digests) this.#counts.set(d, (this.#counts.get(d) ?? 0) + 1);
  }

  /** Takes back what `add` counted. */
  remove(digests: readonly string[]): void {
    for (const d of digests) {
      const n = (this.#counts.get(d) ?? 0) - 1;
      if (n > 0) this.#counts.set(d, n);
      else this.#counts.delete(d);
    }
  }

  /** True when a live log record names `digest` (the payload store's `isNamed` hook). */
  isNamed(digest: string): boolean {
    return this.#counts.has(digest);
  }

  /** Distinct digests named. */
  get size(): number {
    return this.#counts.size;
  }

  /** Every digest named, in no particular order. */
  digests(): IterableIterator<string> {
    return this.#counts.keys();
  }
}

interface NamingRecord {
  index: number;
  term: number;
  nodeId: number;
  digests: readonly string[];
}

/** One group's records that name payloads, in increasing index order. */
export class GroupNames {
  #records: NamingRecord[] = [];
  #head = 0;

  /** Adds a record (its index above every index held). */
  push(logId: LogId, digests: readonly string[]): void {
    this.#records.push({ index: logId.index, term: logId.leaderId.term, nodeId: logId.leaderId.nodeId, digests });
  }

  /** The records with an index in [from, upTo), in index order (the reference checkpoint's capture). */
  between(from: number, upTo: number): { logId: LogId; digests: readonly string[] }[] {
    let lo = this.#head;
    let hi = this.#records.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.#records[mid] as NamingRecord).index < from) lo = mid + 1;
      else hi = mid;
    }
    const out: { logId: LogId; digests: readonly string[] }[] = [];
    for (let i = lo; i < this.#records.length; i++) {
      const r = this.#records[i] as NamingRecord;
      if (r.index >= upTo) break;
      out.push({ logId: { leaderId: { term: r.term, nodeId: r.nodeId }, index: r.index }, digests: r.digests });
    }
    return out;
  }

  /** Removes the records at or above `index`; answers their digest lists. */
  takeFrom(index: number): (readonly string[])[] {
    const out: (readonly string[])[] = [];
    while (this.#records.length > this.#head) {
      const last = this.#records[this.#records.length - 1] as NamingRecord;
      if (last.index < index) break;
      this.#records.pop();
      out.push(last.digests);
    }
    return out;
  }

  /** Removes the records at or below `index`; answers their digest lists. */
  takeThrough(index: number): (readonly string[])[] {
    const out: (readonly string[])[] = [];
    while (this.#head < this.#records.length) {
      const first = this.#records[this.#head] as NamingRecord;
      if (first.index > index) break;
      out.push(first.digests);
      this.#head++;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#records.length) {
      this.#records = this.#records.slice(this.#head);
      this.#head = 0;
    }
    return out;
  }

  /** Removes every record; answers their digest lists. */
  takeAll(): (readonly string[])[] {
    const out = this.#records.slice(this.#head).map((r) => r.digests);
    this.#records = [];
    this.#head = 0;
    return out;
  }

  /** Records held. */
  get size(): number {
    return this.#records.length - this.#head;
  }
}
