// Host store: the SPI's errors.
//
// Owns: `HostStoreError`, the one error class every host store answers with, and one factory per
// SPI code (static methods, so that they do not collide with lib/errors.ts's factories in the
// package's flat export list). Guarantees: every HostStoreError is a SeglogError whose `code` is
// one of the six SPI codes, and carries the SPI's fields both as properties and in `details`.

import { SeglogError } from '../errors.js';
import type { ScopeRef } from './types.js';

/** The codes of the Host Store SPI's errors (docs/contracts/host-store.md, section 5). */
export type HostStoreErrorCode = 'CONFLICT' | 'FENCED_OUT' | 'INDETERMINATE' | 'INVALID' | 'UNAVAILABLE' | 'HELD';

const HOST_CODES: ReadonlySet<string> = new Set<HostStoreErrorCode>([
  'CONFLICT',
  'FENCED_OUT',
  'INDETERMINATE',
  'INVALID',
  'UNAVAILABLE',
  'HELD',
]);

interface HostStoreErrorFields {
  scope?: ScopeRef;
  current?: number | null;
  holder?: string;
  remaining?: number;
  token?: number;
}

/**
 * An error of the Host Store SPI. Fields by code:
 * - `CONFLICT`: `scope` is at version `current` (null: it does not exist), not at the update's
 *   `previous`. Nothing was applied.
 * - `FENCED_OUT`: a token `current` higher than the caller's exists. Nothing was applied.
 * - `INDETERMINATE`: the outcome is unknown; settle it by retrying the same batch or loading the head.
 * - `INVALID`: the request breaks a limit or is malformed. Nothing was applied.
 * - `UNAVAILABLE`: the store cannot serve now. Nothing was applied.
 * - `HELD`: an exclusive acquire found a live `holder` with token `token`, whose lease lasts
 *   `remaining` more milliseconds. Nothing was acquired.
 */
export class HostStoreError extends SeglogError {
  declare readonly code: HostStoreErrorCode;
  /** CONFLICT: the scope that is not at the update's `previous`. */
  readonly scope?: ScopeRef;
  /** CONFLICT: the scope's version (null: absent). FENCED_OUT: the highest token. */
  readonly current?: number | null;
  /** HELD: who holds the fence. */
  readonly holder?: string;
  /** HELD: milliseconds left of the holder's lease. */
  readonly remaining?: number;
  /** HELD: the holder's token. */
  readonly token?: number;

  constructor(
    code: HostStoreErrorCode,
    message: string,
    fields: HostStoreErrorFields = {},
    options: { cause?: unknown; details?: Record<string, unknown> } = {},
  ) {
    super(code, message, { cause: options.cause, details: { ...options.details, ...fields } });
    this.name = 'HostStoreError';
    if (fields.scope !== undefined) this.scope = Object.freeze({ kind: fields.scope.kind, name: fields.scope.name });
    if ('current' in fields) this.current = fields.current;
    if (fields.holder !== undefined) this.holder = fields.holder;
    if (fields.remaining !== undefined) this.remaining = fields.remaining;
    if (fields.token !== undefined) this.token = fields.token;
  }

  /** The batch was refused: `scope` is at `current`, not at the update's `previous`. */
  static conflict(scope: ScopeRef, current: number | null, detail?: string): HostStoreError {
    const at = current === null ? 'does not exist' : `is at version ${current}`;
    return new HostStoreError('CONFLICT', `${scope.kind} scope ${JSON.stringify(scope.name)} ${at}${detail ? `: ${detail}` : ''}`, {
      scope,
      current,
    });
  }

  /** A token higher than the caller's exists. */
  static fencedOut(current: number, detail?: string): HostStoreError {
    return new HostStoreError('FENCED_OUT', `token ${current} supersedes the caller's${detail ? `: ${detail}` : ''}`, { current });
  }

  /** The outcome is unknown: the batch may or may not have landed. */
  static indeterminate(detail: string, cause?: unknown): HostStoreError {
    return new HostStoreError('INDETERMINATE', detail, {}, { cause });
  }

  /** The request breaks a limit or is malformed; nothing was applied. */
  static invalid(detail: string, details: Record<string, unknown> = {}): HostStoreError {
    return new HostStoreError('INVALID', detail, {}, { details });
  }

  /** The store cannot serve now; nothing was applied. */
  static unavailable(detail: string, cause?: unknown): HostStoreError {
    return new HostStoreError('UNAVAILABLE', detail, {}, { cause });
  }

  /**
   * Damage found in stored data. The SPI has no code for it, so the answer is UNAVAILABLE
   * (nothing was applied; the store refuses to serve the damaged data) and `cause` is always the
   * CORRUPT SeglogError that names what failed: the file and, where known, the offset (the fs
   * store), or the schema, table and value (the PostgreSQL store). `details.corrupt` copies the
   * cause's details, with the damaged file always as `file` (a cell names it `path`), so that a
   * caller can tell damage from a passing outage, and find it, without unwrapping.
   */
  static damaged(cause: SeglogError, what?: string): HostStoreError {
    const found = cause.details;
    const file = found['file'] ?? found['path'];
    return new HostStoreError('UNAVAILABLE', `${what === undefined ? '' : `${what}: `}stored data is damaged: ${cause.message}`, {}, {
      cause,
      details: { corrupt: file === undefined ? { ...found } : { ...found, file } },
    });
  }

  /** An exclusive acquire found a live holder. The message rounds `remaining` up to a whole ms; the field keeps it exact. */
  static held(holder: string, remaining: number, token: number): HostStoreError {
    return new HostStoreError('HELD', `the fence is held by ${holder} (token ${token}) for ${Math.ceil(remaining)} ms more`, {
      holder,
      remaining,
      token,
    });
  }
}

/** True when `err` is the host stores' answer to damage: UNAVAILABLE whose cause is CORRUPT. */
export function isDamagedAnswer(err: unknown): err is HostStoreError {
  return err instanceof HostStoreError && err.code === 'UNAVAILABLE' && err.cause instanceof SeglogError && err.cause.code === 'CORRUPT';
}

/** True when `err` is a HostStoreError, optionally with the given code. */
export function isHostStoreError(err: unknown, code?: HostStoreErrorCode): err is HostStoreError {
  return err instanceof HostStoreError && HOST_CODES.has(err.code) && (code === undefined || err.code === code);
}
