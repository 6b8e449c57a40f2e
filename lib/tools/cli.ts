// The command line of every `seglog` sub-command: flag tables, their parsing, their usage text,
// and how a failure is reported.
//
// Owns: `FlagTable` (one entry per flag: its type, bounds and help line), `parseCommandLine`,
// `formatFlags` and `formatColumns`, `UsageError`, `describeFailure`. Every sub-command declares its flags as a table
// and parses with `parseCommandLine`, so that all of them behave alike (docs/tools.md):
// - `--help`/`-h` is understood by every command; the command prints its usage on stdout, exit 0.
// - A bad argument (unknown flag, missing or malformed value, a number out of its bounds, a
//   stray positional) is a `UsageError` with a one-line message; the command prints that line,
//   then its usage, on stderr, and exits 2.
// - Any other failure is reported by `describeFailure` in one line that names the path for an
//   I/O error, exit 1; `--debug` (also accepted by every command) adds the stack.
// The parsing itself is Node's `util.parseArgs` (docs/dependencies.md says why), run in its
// non-strict mode with tokens so that the checks and their messages are ours: a flag's value may
// start with '-' (`--seed -1` is then refused by the bounds, not by a parser message).

import { parseArgs } from 'node:util';
import { SeglogError } from '../errors.js';

/** What a flag takes. `integer` and `number` are checked against `min`/`max`; `list` is comma-separated. */
export type FlagType = 'boolean' | 'string' | 'integer' | 'number' | 'list';

export interface Flag {
  readonly type: FlagType;
  /** One line of help (wrapped in the usage text); say the default here. */
  readonly help: string;
  /** The value's name in the usage text (default: N for numbers, IDS for lists, VALUE for strings). */
  readonly value?: string;
  /** A one-letter alias, without the dash. */
  readonly short?: string;
  /** Inclusive bounds of `integer` and `number` flags. */
  readonly min?: number;
  readonly max?: number;
  /** `number` flags: the value must be greater than this. */
  readonly above?: number;
  /** `list` flags: the items allowed (the usage text lists them when `help` does not). */
  readonly choices?: readonly string[];
  /** `string` flags: may be given more than once (the values accumulate in `repeated`). */
  readonly multiple?: boolean;
}

/** A command's flags, by long name (without the dashes). */
export type FlagTable = Readonly<Record<string, Flag>>;

type ValueOf<F extends Flag> = F['type'] extends 'boolean'
  ? boolean
  : F['type'] extends 'integer' | 'number'
    ? number | undefined
    : F['type'] extends 'list'
      ? string[] | undefined
      : string | undefined;

/** The parsed values of a table: booleans are false when absent, everything else undefined. */
export type FlagValues<T extends FlagTable> = { -readonly [K in keyof T]: ValueOf<T[K]> };

/** A bad command line. The message is one line; the command adds its usage. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** The flags every command understands. */
export const COMMON_FLAGS = {
  help: { type: 'boolean', short: 'h', help: 'print this usage and exit' },
  debug: { type: 'boolean', help: 'on a failure, print the stack trace too' },
} as const satisfies FlagTable;

export interface CommandLine<T extends FlagTable> {
  values: FlagValues<T>;
  positionals: string[];
  /** `--help` or `-h` was given (nothing else is checked then). */
  help: boolean;
  /** The values of `multiple` string flags, in order. */
  repeated: Record<string, string[]>;
}

export interface PositionalRule {
  /** How the positionals are named in messages ("a directory", "a command"). */
  readonly name: string;
  readonly min: number;
  readonly max: number;
}

const INTEGER = /^[+-]?\d+$/;

function flagName(name: string): string {
  return name.length === 1 ? `-${name}` : `--${name}`;
}

function parseNumber(name: string, flag: Flag, text: string): number {
  const n = flag.type === 'integer' ? (INTEGER.test(text) ? Number(text) : NaN) : text.trim() === '' ? NaN : Number(text);
  const bounds: string[] = [];
  if (flag.min !== undefined) bounds.push(`>= ${flag.min}`);
  if (flag.above !== undefined) bounds.push(`> ${flag.above}`);
  if (flag.max !== undefined) bounds.push(`<= ${flag.max}`);
  const what = `${flag.type === 'integer' ? 'an integer' : 'a number'}${bounds.length > 0 ? ` ${bounds.join(' and ')}` : ''}`;
  const ok =
    Number.isFinite(n) &&
    (flag.type !== 'integer' || Number.isSafeInteger(n)) &&
    (flag.min === undefined || n >= flag.min) &&
    (flag.above === undefined || n > flag.above) &&
    (flag.max === undefined || n <= flag.max);
  if (!ok) throw new UsageError(`--${name} takes ${what}, got '${text}'`);
  return n;
}

function parseList(name: string, flag: Flag, text: string): string[] {
  const items = text
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x.length > 0);
  if (items.length === 0) throw new UsageError(`--${name} takes a comma-separated list, got '${text}'`);
  if (flag.choices !== undefined) {
    const unknown = items.filter((x) => !flag.choices!.includes(x));
    if (unknown.length > 0) throw new UsageError(`--${name}: unknown ${unknown.map((x) => `'${x}'`).join(', ')} (known: ${flag.choices.join(', ')})`);
  }
  return items;
}

/**
 * Parses `argv` against `table` (plus COMMON_FLAGS). Throws `UsageError` for anything wrong;
 * with `--help` it answers at once with `help: true` and checks nothing more.
 */
export function parseCommandLine<T extends FlagTable>(argv: readonly string[], table: T, positionals: PositionalRule): CommandLine<T> {
  const all: Record<string, Flag> = { ...table, ...COMMON_FLAGS };
  const options: Record<string, { type: 'boolean' | 'string'; short?: string; multiple?: boolean }> = {};
  const byShort = new Map<string, string>();
  for (const [name, flag] of Object.entries(all)) {
    options[name] = { type: flag.type === 'boolean' ? 'boolean' : 'string', ...(flag.short === undefined ? {} : { short: flag.short }) };
    if (flag.short !== undefined) byShort.set(flag.short, name);
  }
  const { tokens } = parseArgs({ args: [...argv], options, strict: false, allowPositionals: true, tokens: true });
  if (tokens.some((t) => t.kind === 'option' && (t.name === 'help' || t.name === 'h'))) {
    return { values: {} as FlagValues<T>, positionals: [], help: true, repeated: {} };
  }
  const values: Record<string, unknown> = {};
  const repeated: Record<string, string[]> = {};
  const rest: string[] = [];
  const seen = new Set<string>();
  for (const [name, flag] of Object.entries(table)) if (flag.type === 'boolean') values[name] = false;
  for (const token of tokens) {
    if (token.kind === 'positional') {
      rest.push(token.value);
      continue;
    }
    if (token.kind === 'option-terminator') continue;
    // parseArgs names a known short option by its long name; an unknown one keeps its letter.
    const name = token.name.length === 1 ? byShort.get(token.name) : token.name;
    const flag = name === undefined ? undefined : all[name];
    if (name === undefined || flag === undefined) throw new UsageError(`unknown option '${token.rawName}'`);
    if (name in COMMON_FLAGS) {
      if (token.value !== undefined) throw new UsageError(`${flagName(name)} takes no value`);
      continue;
    }
    if (flag.type === 'boolean') {
      if (token.value !== undefined) throw new UsageError(`--${name} takes no value, got '${token.value}'`);
      values[name] = true;
      continue;
    }
    const text = token.value;
    // A missing value, or the next flag taken as the value (`--dir --json`): numbers that start
    // with '-' go on to their bounds check, which names the value.
    const looksLikeFlag = text !== undefined && !token.inlineValue && text.startsWith('-') && !((flag.type === 'integer' || flag.type === 'number') && /^-[\d.]/.test(text));
    if (text === undefined || looksLikeFlag) throw new UsageError(`--${name} needs a value${text === undefined ? '' : ` (for a value that starts with '-', write --${name}=${text})`}`);
    if (seen.has(name) && flag.multiple !== true) throw new UsageError(`--${name} given twice`);
    seen.add(name);
    if (flag.type === 'integer' || flag.type === 'number') values[name] = parseNumber(name, flag, text);
    else if (flag.type === 'list') values[name] = parseList(name, flag, text);
    else {
      if (flag.multiple === true) (repeated[name] ??= []).push(text);
      values[name] = text;
    }
  }
  if (rest.length < positionals.min) throw new UsageError(`expected ${positionals.name}${positionals.min > 1 ? ` (${positionals.min})` : ''}`);
  if (rest.length > positionals.max) {
    throw new UsageError(positionals.max === 0 ? `unexpected argument '${rest[0]}'` : `unexpected argument '${rest[positionals.max]}' (expected ${positionals.name})`);
  }
  return { values: values as FlagValues<T>, positionals: rest, help: false, repeated };
}

function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (word === '') continue;
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(line);
  return lines;
}

/** Two columns of usage text: each head, then its help wrapped at 100 columns beside it. */
export function formatColumns(rows: readonly (readonly [head: string, help: string])[]): string {
  const heads = rows.map(([head]) => `  ${head}`);
  const column = Math.min(22, Math.max(...heads.map((h) => h.length)) + 2);
  const out: string[] = [];
  rows.forEach(([, help], i) => {
    const head = heads[i]!;
    const body = wrap(help, 100 - column);
    if (head.length + 1 > column) {
      out.push(head);
      for (const l of body) out.push(`${' '.repeat(column)}${l}`);
    } else {
      body.forEach((l, j) => out.push(j === 0 ? head.padEnd(column) + l : `${' '.repeat(column)}${l}`));
    }
  });
  return out.join('\n');
}

/** The usage lines of a table's flags (and the common flags), aligned and wrapped at 100 columns. */
export function formatFlags(table: FlagTable, options: { common?: boolean } = {}): string {
  const entries = Object.entries(options.common === false ? table : { ...table, ...COMMON_FLAGS });
  return formatColumns(
    entries.map(([name, f]) => {
      const value = f.type === 'boolean' ? '' : ` ${f.value ?? (f.type === 'list' ? 'IDS' : f.type === 'string' ? 'VALUE' : 'N')}`;
      const help = f.choices !== undefined && !f.help.includes(f.choices[0]!) ? `${f.help} (one or more of: ${f.choices.join(', ')})` : f.help;
      return [`${f.short === undefined ? '' : `-${f.short}, `}--${name}${value}`, help] as const;
    }),
  );
}

/** True when the command line asks for stack traces on failure (`--debug` or SEGLOG_DEBUG=1). */
export function debugRequested(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end < 0 ? argv : argv.slice(0, end)).includes('--debug') || process.env['SEGLOG_DEBUG'] === '1';
}

const ERRNO_TEXT: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOTDIR: 'not a directory',
  EISDIR: 'is a directory',
  EEXIST: 'already exists',
  ENOSPC: 'no space left on the device',
  EROFS: 'read-only file system',
  EIO: 'input/output error',
  EMFILE: 'too many open files',
  ENOTEMPTY: 'directory not empty',
};

interface SystemErrorLike {
  code?: unknown;
  syscall?: unknown;
  path?: unknown;
  dest?: unknown;
  message: string;
}

/**
 * One line that says what failed: a file-system error names its path and what the system said; a
 * SeglogError gives its message (which starts with its code); anything else its name and message.
 * Never a stack trace (the caller adds `err.stack` under `--debug`).
 */
export function describeFailure(err: unknown): string {
  if (err instanceof SeglogError) {
    const file = err.details['path'] ?? err.details['file'];
    const message = err.message.split('\n')[0]!;
    return typeof file === 'string' && !message.includes(file) ? `${message} (${file})` : message;
  }
  if (err instanceof Error) {
    const e = err as Error & SystemErrorLike;
    if (typeof e.code === 'string' && typeof e.path === 'string') {
      const what = ERRNO_TEXT[e.code] ?? e.message.replace(/^[A-Z]+: /, '').split(',')[0]!;
      const dest = typeof e.dest === 'string' ? ` -> ${e.dest}` : '';
      return `${e.path}${dest}: ${what} (${e.code}${typeof e.syscall === 'string' ? `, ${e.syscall}` : ''})`;
    }
    const first = err.message.split('\n')[0]!;
    return err.name === 'Error' ? first : `${err.name}: ${first}`;
  }
  return String(err);
}

/**
 * Parses a sub-command's line, or handles it: with `--help` prints `usage` (stdout) and answers 0;
 * on a bad argument prints `<command>: <message>`, a blank line, the synopsis of `usage` and where
 * the rest is (stderr), and answers 2.
 */
export function parseOrExplain<T extends FlagTable>(
  command: string,
  usage: string,
  argv: readonly string[],
  table: T,
  positionals: PositionalRule,
): CommandLine<T> | number {
  let line: CommandLine<T>;
  try {
    line = parseCommandLine(argv, table, positionals);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`${command}: ${err.message}\n\n${synopsis(usage)}\n(\`${command} --help\` for the options)`);
    return 2;
  }
  if (line.help) {
    console.log(usage);
    return 0;
  }
  return line;
}

/** The leading lines of a usage text, up to its first blank line (the `usage: ...` lines). */
export function synopsis(usage: string): string {
  const end = usage.indexOf('\n\n');
  return end < 0 ? usage : usage.slice(0, end);
}

/** True for the failures a user causes or meets (a file-system error, a SeglogError), not a bug's. */
export function failureIsExpected(err: unknown): boolean {
  if (err instanceof SeglogError) return true;
  return err instanceof Error && typeof (err as SystemErrorLike).code === 'string' && typeof (err as SystemErrorLike).path === 'string';
}
