// The benchmark harness: timing, arithmetic, interleaved runs, machine description, result objects,
// their JSON Schema, and the Markdown, SVG and progress renderers. The benchmarks in bench/ use only
// this module's exports; none of it is part of seglog's public API.

export * from './stats.js';
export * from './timing.js';
export * from './report.js';
export * from './machine.js';
export * from './runner.js';
export * from './schema.js';
export * from './markdown.js';
export * from './svg.js';
export * from './progress.js';
export * from './store-workload.js';
