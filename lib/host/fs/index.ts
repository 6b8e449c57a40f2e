// The file-system host store: the public part of lib/host/fs (re-exported by lib/host/index.ts).
//
// Owns: nothing of its own; it names what the package exports of the fs host store.

export { openFsHostStore, FsHostStore, type FsHostStoreOptions, type FsHostStoreHooks } from './store.js';
