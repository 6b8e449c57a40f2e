// The errno codes of file-system errors, read in one place.
//
// Owns: `errnoOf`, `isMissing` and `isExists`. Guarantees: they read the Node-style `code` of any
// thrown value without assuming its shape (a non-object, null or an error without a code answers
// undefined / false), so callers can test what a file-system call threw without casts.

/** The errno code ('ENOENT', 'EIO', ...) of a thrown value, or undefined. */
export function errnoOf(err: unknown): unknown {
  return typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
}

/** True when a file-system call failed because the file or directory does not exist (ENOENT). */
export function isMissing(err: unknown): boolean {
  return errnoOf(err) === 'ENOENT';
}

/** True when a file-system call failed because the name exists already (EEXIST). */
export function isExists(err: unknown): boolean {
  return errnoOf(err) === 'EEXIST';
}
