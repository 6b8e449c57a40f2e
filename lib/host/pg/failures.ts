// The PostgreSQL host store's reading of failures: what a failed statement means for its transaction.
//
// Owns: `sqlState`, `isRetryable`, `isConnectionLoss`, `messageOf`, `backoff` and `sleep`.
// Guarantees: an error counts as the server's answer only when it carries an SQLSTATE and a
// severity (a node-postgres DatabaseError); anything else — a socket error, "Connection
// terminated" — is a lost connection, whose statement's outcome is unknown to the client.

/** Waits `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A jittered backoff: 0.5..1.5 times base·2^attempt, at most `cap` ms. */
export function backoff(attempt: number, base: number, cap: number): number {
  return Math.min(cap, base * 2 ** attempt) * (0.5 + Math.random());
}

/** The SQLSTATE of an error the server answered (a pg DatabaseError), or undefined for any other failure. */
export function sqlState(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as { code?: unknown; severity?: unknown };
  return typeof e.code === 'string' && typeof e.severity === 'string' && /^[0-9A-Z]{5}$/.test(e.code) ? e.code : undefined;
}

/** True when the statement failed in its transaction and the transaction rolled back, so a retry may succeed. */
export function isRetryable(state: string | undefined): boolean {
  return state === '40001' || state === '40P01';
}

/**
 * True when the connection was lost or the server went away (the outcome of a statement in
 * flight is unknown): no SQLSTATE at all (a socket error, "Connection terminated"), a connection
 * exception (class 08), an operator intervention (class 57: shutdown, crash, cancel) or a FATAL.
 */
export function isConnectionLoss(err: unknown): boolean {
  const state = sqlState(err);
  if (state === undefined) return true;
  if (state.startsWith('08') || state.startsWith('57')) return true;
  return (err as { severity?: unknown }).severity === 'FATAL' || (err as { severity?: unknown }).severity === 'PANIC';
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
