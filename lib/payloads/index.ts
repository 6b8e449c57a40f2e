// lib/payloads/: the node's content-addressed payload store (docs/contracts/raft-store.md, section 3). Re-exports the public
// part; see ./store.ts for the guarantees and docs/payloads.md for the layout and protocols.

export { openPayloadStore, FsPayloadStore, DEFAULT_GRACE_MS } from './store.js';
export type { PayloadStore, PayloadStoreOptions, PayloadInfo, PayloadBody, ReadableStreamLike, PutOptions, GarbageReport, PayloadVerifyReport } from './store.js';
export { isPayloadDigest, MAX_HOLDER_BYTES, MAX_HOLDERS, DEFAULT_CHUNK_BYTES as PAYLOAD_DEFAULT_CHUNK_BYTES } from './format.js';
