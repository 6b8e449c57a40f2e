// Exact UTF-8 for the strings the stores persist: scope names, group ids, commit ids, holder ids,
// KV keys, plugin names, snapshot ids, membership text.
//
// Owns: `decodeUtf8Exact`, the one decoder every store reads persisted text with. Guarantees: the
// string it answers is exactly the one whose UTF-8 the bytes are — a leading U+FEFF is kept (a
// default `TextDecoder` takes it for a byte-order mark and drops it, so "\uFEFFa" would come back
// as "a"), and malformed bytes throw instead of turning into U+FFFD. Every well-formed string
// (no lone surrogate) therefore round-trips: `decodeUtf8Exact(utf8(s)) === s`. The stores refuse
// strings that are not well-formed with INVALID before anything is written, since their UTF-8
// (with U+FFFD in place of the lone surrogate) would not decode back to them.

const exact = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The string whose UTF-8 `bytes` are, exactly. Throws a TypeError when they are not UTF-8. */
export function decodeUtf8Exact(bytes: Uint8Array): string {
  return exact.decode(bytes);
}

/** `decodeUtf8Exact`, or null when the bytes are not UTF-8. */
export function tryDecodeUtf8Exact(bytes: Uint8Array): string | null {
  try {
    return exact.decode(bytes);
  } catch (err) {
    if (err instanceof TypeError) return null;
    throw err;
  }
}
