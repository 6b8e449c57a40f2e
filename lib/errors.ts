// Errors: the one error class every layer throws on purpose, and its stable codes.
//
// Owns: `SeglogError` (a stable string `code`, an optional `cause`, structured details) and one
// small factory per code. Guarantees: codes never change meaning; messages may. Every message
// starts with its code so that a log line alone says what kind of failure it was. Every code is
// listed, with its meaning and an example, in docs/errors.md.

/** Every code the package throws on purpose. Host-store codes follow the Host Store SPI. */
export const ERROR_CODES = [
  'CORRUPT',
  'IO_ERROR',
  'NO_SPACE',
  'POISONED',
  'CLOSED',
  'INVALID',
  'LOCKED',
  'NOT_FOUND',
  'PAYLOAD_MISSING',
  'TOO_LARGE',
  'DIGEST_MISMATCH',
  'CONFLICT',
  'FENCED_OUT',
  'INDETERMINATE',
  'UNAVAILABLE',
  'HELD',
  'VERSION_TOO_NEW',
] as const;

/** A stable error code; docs/errors.md documents each one. */
export type ErrorCode = (typeof ERROR_CODES)[number];

/** The base of every error seglog throws on purpose. `code` is stable across versions. */
export class SeglogError extends Error {
  readonly code: ErrorCode;
  /** Structured facts about the failure (file, offset, index, ...), for tools and tests. */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super(`${code}: ${message}`, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'SeglogError';
    this.code = code;
    this.details = Object.freeze({ ...(options?.details ?? {}) });
  }
}

/** True when `err` is a SeglogError, optionally with the given code. */
export function isSeglogError(err: unknown, code?: ErrorCode): err is SeglogError {
  return err instanceof SeglogError && (code === undefined || err.code === code);
}

type Details = Record<string, unknown>;

/** Stored bytes fail validation: a checksum, a length, a sequence or a continuity check. */
export function corrupt(message: string, details: Details = {}): SeglogError {
  return new SeglogError('CORRUPT', message, { details });
}

/** The caller broke a limit or passed something malformed. Nothing was changed. */
export function invalid(message: string, details: Details = {}): SeglogError {
  return new SeglogError('INVALID', message, { details });
}

/** The object was closed (or is closing) before or during the call. */
export function closed(what: string): SeglogError {
  return new SeglogError('CLOSED', `${what} is closed`);
}

/** An earlier write or sync failed; the object refuses writes until it is reopened. */
export function poisoned(what: string, cause: unknown): SeglogError {
  return new SeglogError('POISONED', `${what} refuses writes after an earlier I/O failure; reopen it`, { cause });
}

/** Another handle or process holds the lock that guards this directory. */
export function locked(path: string): SeglogError {
  return new SeglogError('LOCKED', `${path} is in use by another handle or process`, { details: { path } });
}

/** A named thing does not exist. */
export function notFound(message: string, details: Details = {}): SeglogError {
  return new SeglogError('NOT_FOUND', message, { details });
}

/**
 * Wraps an error from the file-system layer: ENOSPC and EDQUOT become NO_SPACE, any other
 * errno IO_ERROR; a SeglogError passes through unchanged.
 */
export function fromIo(err: unknown, action: string, path: string): SeglogError {
  if (err instanceof SeglogError) return err;
  const errno = (err as { code?: unknown } | null)?.code;
  const code: ErrorCode = errno === 'ENOSPC' || errno === 'EDQUOT' ? 'NO_SPACE' : 'IO_ERROR';
  const reason = err instanceof Error ? err.message : String(err);
  return new SeglogError(code, `${action} ${path}: ${reason}`, { cause: err, details: { path, errno } });
}
