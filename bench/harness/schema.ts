// The JSON Schema of a benchmark report, and a small validator for the part of JSON Schema it uses.
//
// Owns: `REPORT_JSON_SCHEMA` (draft 2020-12; printed by `seglog bench schema`) and `validate`.
// Guarantees: the schema describes exactly the `BenchReport` of ./report.ts at REPORT_VERSION; the
// test suite validates a produced report against it, so the two cannot drift apart silently. The
// validator supports: type (one or a list), anyOf, const, enum, minimum, properties, required,
// additionalProperties (false or a schema), items, and local $ref ("#/$defs/name"). No dependency.

import { REPORT_SCHEMA_ID, REPORT_VERSION } from './report.js';

export type JsonSchema = { [key: string]: unknown };

const num = { type: 'number' };
const nonNegInt = { type: 'integer', minimum: 0 };
const str = { type: 'string' };
const params = {
  type: 'object',
  additionalProperties: { type: ['string', 'number', 'boolean'] },
};

export const REPORT_JSON_SCHEMA: JsonSchema = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  $id: `${REPORT_SCHEMA_ID}/v${REPORT_VERSION}`,
  title: 'seglog benchmark report',
  type: 'object',
  required: [
    'schema', 'version', 'command', 'quick', 'startedAt', 'finishedAt', 'durationMs', 'units',
    'machine', 'load', 'sections', 'targets', 'notes',
  ],
  additionalProperties: false,
  properties: {
    schema: { const: REPORT_SCHEMA_ID },
    version: { const: REPORT_VERSION },
    command: str,
    quick: { type: 'boolean' },
    startedAt: str,
    finishedAt: str,
    durationMs: { type: 'number', minimum: 0 },
    units: {
      type: 'object',
      required: ['latency', 'throughput', 'rate', 'size'],
      additionalProperties: false,
      properties: {
        latency: { const: 'us' },
        throughput: { const: 'MiB/s' },
        rate: { const: 'per second' },
        size: { const: 'bytes' },
      },
    },
    machine: { $ref: '#/$defs/machine' },
    load: {
      type: 'object',
      required: ['start', 'end'],
      additionalProperties: false,
      properties: { start: num, end: num },
    },
    sections: { type: 'array', items: { $ref: '#/$defs/section' } },
    targets: { type: 'array', items: { $ref: '#/$defs/target' } },
    notes: { type: 'array', items: str },
  },
  $defs: {
    stat: {
      type: 'object',
      required: ['median', 'min', 'max', 'n'],
      additionalProperties: false,
      properties: { median: num, min: num, max: num, n: { type: 'integer', minimum: 1 } },
    },
    mount: {
      type: 'object',
      required: ['mountPoint', 'device', 'type', 'options'],
      additionalProperties: false,
      properties: { mountPoint: str, device: str, type: str, options: str },
    },
    machine: {
      type: 'object',
      required: [
        'cpuModel', 'cpuCount', 'memoryBytes', 'kernel', 'arch', 'node', 'uvThreadpoolSize',
        'uvThreadpoolSizeFrom', 'dir', 'filesystem',
      ],
      additionalProperties: false,
      properties: {
        cpuModel: str,
        cpuCount: nonNegInt,
        memoryBytes: nonNegInt,
        kernel: str,
        arch: str,
        node: str,
        uvThreadpoolSize: { type: 'integer', minimum: 1 },
        uvThreadpoolSizeFrom: { enum: ['env', 'default'] },
        dir: str,
        filesystem: { anyOf: [{ type: 'null' }, { $ref: '#/$defs/mount' }] },
      },
    },
    run: {
      type: 'object',
      required: [
        'ops', 'records', 'bytes', 'elapsedMs', 'opsPerSec', 'recordsPerSec', 'mibPerSec', 'p50Us',
        'p99Us', 'p999Us', 'maxUs',
      ],
      additionalProperties: false,
      properties: {
        ops: { type: 'integer', minimum: 1 },
        records: nonNegInt,
        bytes: nonNegInt,
        elapsedMs: num,
        opsPerSec: num,
        recordsPerSec: num,
        mibPerSec: num,
        p50Us: num,
        p99Us: num,
        p999Us: num,
        maxUs: num,
      },
    },
    variant: {
      type: 'object',
      required: ['id', 'label', 'group', 'params', 'runs', 'summary', 'ratio', 'notes'],
      additionalProperties: false,
      properties: {
        id: str,
        label: str,
        group: { type: ['string', 'null'] },
        params,
        runs: { type: 'array', items: { $ref: '#/$defs/run' } },
        summary: {
          type: 'object',
          required: ['opsPerSec', 'recordsPerSec', 'mibPerSec', 'p50Us', 'p99Us', 'p999Us', 'samples', 'minOpsPerRun'],
          additionalProperties: false,
          properties: {
            opsPerSec: { $ref: '#/$defs/stat' },
            recordsPerSec: { $ref: '#/$defs/stat' },
            mibPerSec: { $ref: '#/$defs/stat' },
            p50Us: { $ref: '#/$defs/stat' },
            p99Us: { $ref: '#/$defs/stat' },
            p999Us: { $ref: '#/$defs/stat' },
            samples: nonNegInt,
            minOpsPerRun: nonNegInt,
          },
        },
        ratio: {
          type: ['object', 'null'],
          required: ['baseline', 'recordsPerSec'],
          additionalProperties: false,
          properties: { baseline: str, recordsPerSec: { $ref: '#/$defs/stat' } },
        },
        notes: { type: 'array', items: str },
      },
    },
    measurement: {
      type: 'object',
      required: ['id', 'label', 'unit', 'params', 'runs', 'summary', 'notes'],
      additionalProperties: false,
      properties: {
        id: str,
        label: str,
        unit: { enum: ['ms', 'MiB', 'KiB', 'count'] },
        params,
        runs: { type: 'array', items: num },
        summary: { $ref: '#/$defs/stat' },
        notes: { type: 'array', items: str },
      },
    },
    budget: {
      type: 'object',
      required: ['durationMs', 'maxOps', 'minOps'],
      additionalProperties: false,
      properties: { durationMs: num, maxOps: nonNegInt, minOps: nonNegInt },
    },
    section: {
      type: 'object',
      required: [
        'id', 'title', 'description', 'rounds', 'warmupRounds', 'slices', 'budget', 'baseline', 'variants',
        'measurements', 'notes',
      ],
      additionalProperties: false,
      properties: {
        id: str,
        title: str,
        description: str,
        rounds: { type: 'integer', minimum: 1 },
        warmupRounds: nonNegInt,
        slices: { type: 'integer', minimum: 1 },
        budget: { $ref: '#/$defs/budget' },
        baseline: { type: ['string', 'null'] },
        variants: { type: 'array', items: { $ref: '#/$defs/variant' } },
        measurements: { type: 'array', items: { $ref: '#/$defs/measurement' } },
        notes: { type: 'array', items: str },
      },
    },
    target: {
      type: 'object',
      required: ['id', 'source', 'description', 'comparator', 'threshold', 'unit', 'measured', 'met', 'note'],
      additionalProperties: false,
      properties: {
        id: str,
        source: str,
        description: str,
        comparator: { enum: ['>=', '<', '<='] },
        threshold: num,
        unit: str,
        measured: { type: ['number', 'null'] },
        met: { type: ['boolean', 'null'] },
        note: str,
      },
    },
  },
};

function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function typeMatches(actual: string, wanted: string): boolean {
  return actual === wanted || (wanted === 'number' && actual === 'integer');
}

function resolveRef(root: JsonSchema, ref: string): JsonSchema {
  const m = /^#\/\$defs\/([A-Za-z0-9_]+)$/.exec(ref);
  const defs = root['$defs'] as Record<string, JsonSchema> | undefined;
  const target = m === null ? undefined : defs?.[m[1] as string];
  if (target === undefined) throw new Error(`unsupported or unknown $ref ${ref}`);
  return target;
}

/**
 * Validates `value` against `schema` (the subset named at the top of this file). Answers the list of
 * violations, each as "path: problem"; empty means valid.
 */
export function validate(value: unknown, schema: JsonSchema, root: JsonSchema = schema, at = '$'): string[] {
  const errors: string[] = [];
  const actual = typeOf(value);
  const type = schema['type'];
  if (type !== undefined) {
    const wanted = Array.isArray(type) ? (type as string[]) : [type as string];
    if (!wanted.some((w) => typeMatches(actual, w))) {
      return [`${at}: expected ${wanted.join(' or ')}, got ${actual}`];
    }
  }
  const anyOf = schema['anyOf'];
  if (Array.isArray(anyOf)) {
    const failures = (anyOf as JsonSchema[]).map((s) => validate(value, s, root, at));
    if (!failures.some((f) => f.length === 0)) errors.push(`${at}: matches none of anyOf (${failures.map((f) => f[0]).join('; ')})`);
  }
  const ref = schema['$ref'];
  if (typeof ref === 'string') errors.push(...validate(value, resolveRef(root, ref), root, at));
  if ('const' in schema && value !== schema['const']) {
    errors.push(`${at}: expected ${JSON.stringify(schema['const'])}, got ${JSON.stringify(value)}`);
  }
  const en = schema['enum'];
  if (Array.isArray(en) && !en.includes(value)) errors.push(`${at}: ${JSON.stringify(value)} is not one of ${JSON.stringify(en)}`);
  const minimum = schema['minimum'];
  if (typeof minimum === 'number' && typeof value === 'number' && value < minimum) {
    errors.push(`${at}: ${value} is below the minimum ${minimum}`);
  }
  if (actual === 'object') {
    const obj = value as Record<string, unknown>;
    const props = (schema['properties'] ?? {}) as Record<string, JsonSchema>;
    for (const key of (schema['required'] ?? []) as string[]) {
      if (!(key in obj)) errors.push(`${at}: missing required property ${key}`);
    }
    const extra = schema['additionalProperties'];
    for (const [key, v] of Object.entries(obj)) {
      const sub = props[key];
      if (sub !== undefined) errors.push(...validate(v, sub, root, `${at}.${key}`));
      else if (extra === false) errors.push(`${at}: unexpected property ${key}`);
      else if (typeof extra === 'object' && extra !== null) errors.push(...validate(v, extra as JsonSchema, root, `${at}.${key}`));
    }
  }
  if (actual === 'array' && schema['items'] !== undefined) {
    (value as unknown[]).forEach((item, i) => errors.push(...validate(item, schema['items'] as JsonSchema, root, `${at}[${i}]`)));
  }
  return errors;
}

/** Validates a report against REPORT_JSON_SCHEMA. */
export function validateReport(report: unknown): string[] {
  return validate(report, REPORT_JSON_SCHEMA);
}
