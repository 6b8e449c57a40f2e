// seglog: the public entry point. Each section re-exports one module; see API.md for the shapes.

// --- errors, clocks, the file-system layer (owner: core) ---
export * from './errors.js';
export type { Clock } from './clock.js';
export { monotonicClock, ManualClock } from './clock.js';
export type { FileSystem, FileHandle, FileStat, OpenMode } from './fs/types.js';
export { realFs } from './fs/real.js';

// --- recording / fault-injecting file systems (owner: fs-sim) ---

// --- segments (owner: segments) ---

// --- cells (owner: fs-sim) ---

// --- host store (owner: host) ---

// --- raft store (owner: raft) ---
