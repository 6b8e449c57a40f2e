// The PostgreSQL host store: the public surface of lib/host/pg.
//
// Owns: nothing of its own; it names what the package exports for the PostgreSQL store.

export { openPgHostStore, PgHostStore, type PgHostStoreOptions } from './store.js';
