// A throwaway PostgreSQL server for tests and benchmarks: `initdb` into a temporary directory,
// listening on a Unix socket in that directory only, run as an unprivileged user, removed at stop.
//
// Owns: `startScratchPostgres` and `ScratchPostgres` (stop, an immediate stop and a start of the
// same data directory, running the server's own tools such as pgbench). Guarantees: the server
// never listens on a TCP address (`listen_addresses = ''`); it runs as the calling user, or, when
// that is root (which PostgreSQL refuses), as the `postgres` user through `runuser` (or `su`),
// with the directory handed to that user; `fsync` and `synchronous_commit` are on, as in
// production; a server this process started is stopped when the process exits, even on a failed
// test. Every failure to find the binaries or start the server throws an Error that says why.
// This module is a tool for tests and benchmarks: the store itself never starts a server.

import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { appendFile, chmod, chown, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** A running (or stopped, for a restart) scratch server. */
export interface ScratchPostgres {
  /** A connection string for the `pg` client: the server's socket directory, its superuser, database `postgres`. */
  readonly url: string;
  /** The directory holding the data directory, the socket and the log. */
  readonly dir: string;
  /** The directory of the Unix socket (libpq's `host`). */
  readonly socketDir: string;
  readonly port: number;
  /** The database superuser (the OS user the server runs as). */
  readonly user: string;
  /** Where `initdb`, `pg_ctl` and `pgbench` live. */
  readonly bindir: string;
  /** The server's major version, as `postgres --version` says it. */
  readonly version: string;
  /** Runs one of the server's tools (`pgbench`, `psql`, ...) as the server's user; answers stdout. */
  run(tool: string, args: readonly string[], options?: { timeoutMs?: number; env?: Readonly<Record<string, string>> }): Promise<string>;
  /** `pg_ctl stop -m immediate`: the server dies without a checkpoint, as in a crash; the next start recovers from WAL. */
  stopImmediately(): Promise<void>;
  /** Starts the server on the same data directory (after `stopImmediately`), waiting until it accepts connections. */
  start(): Promise<void>;
  /** Stops the server (fast shutdown) and removes its directory. Idempotent. */
  stop(): Promise<void>;
}

export interface ScratchPostgresOptions {
  /** `max_connections` (default 300: a pool of 200 and pgbench's 200 clients, one at a time). */
  maxConnections?: number;
  /** More `postgresql.conf` settings, written after the defaults. */
  settings?: Readonly<Record<string, string>>;
}

/** Where the server binaries are: `pg_config --bindir`, else the newest /usr/lib/postgresql/N/bin. */
export function findPostgresBindir(): string | null {
  const fromConfig = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  const candidates: string[] = [];
  if (fromConfig.status === 0) candidates.push(fromConfig.stdout.trim());
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const versions = readdirSync(debian)
      .filter((v) => /^\d+$/.test(v))
      .sort((a, b) => Number(b) - Number(a));
    for (const v of versions) candidates.push(path.join(debian, v, 'bin'));
  }
  return candidates.find((dir) => existsSync(path.join(dir, 'initdb')) && existsSync(path.join(dir, 'pg_ctl'))) ?? null;
}

interface RunAs {
  user: string;
  uid: number;
  gid: number;
  /** The command line that runs `argv` as that user. */
  wrap(argv: readonly string[]): [string, string[]];
}

function passwdEntry(name: string): { uid: number; gid: number } | null {
  let text: string;
  try {
    text = readFileSync('/etc/passwd', 'utf8');
  } catch {
    return null;
  }
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f[0] === name && f.length >= 4) return { uid: Number(f[2]), gid: Number(f[3]) };
  }
  return null;
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** Who runs the server: this user, or `postgres` when this process is root. */
function runAs(): RunAs {
  const uid = process.getuid?.() ?? 0;
  if (uid !== 0) {
    const user = (process.env['USER'] ?? '') || spawnSync('id', ['-un'], { encoding: 'utf8' }).stdout.trim() || 'postgres';
    return { user, uid, gid: process.getgid?.() ?? uid, wrap: (argv) => [argv[0]!, argv.slice(1)] };
  }
  const pg = passwdEntry('postgres');
  if (pg === null) throw new Error('PostgreSQL refuses to run as root, and this machine has no "postgres" user to run it as');
  if (spawnSync('runuser', ['--help'], { stdio: 'ignore' }).status === 0) {
    return { user: 'postgres', ...pg, wrap: (argv) => ['runuser', ['-u', 'postgres', '--', ...argv]] };
  }
  return { user: 'postgres', ...pg, wrap: (argv) => ['su', ['-s', '/bin/sh', 'postgres', '-c', argv.map(shellQuote).join(' ')]] };
}

function execAs(as: RunAs, argv: readonly string[], timeoutMs: number, env: Readonly<Record<string, string>> = {}): Promise<string> {
  const [cmd, args] = as.wrap(argv);
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, env: { ...process.env, LC_ALL: 'C', ...env } }, (err, stdout, stderr) => {
      if (err !== null) reject(new Error(`${argv.map((a) => path.basename(a)).join(' ')} failed: ${err.message}\n${stderr}`.trim()));
      else resolve(stdout);
    });
  });
}

/** Servers this process started and has not stopped: stopped at exit, whatever ended the process. */
const running = new Map<string, () => void>();
let exitHookInstalled = false;

function stopAllAtExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const stop of running.values()) stop();
  });
}

/** Starts a throwaway server (see the module header). Throws, saying why, when it cannot. */
export async function startScratchPostgres(options: ScratchPostgresOptions = {}): Promise<ScratchPostgres> {
  const bindir = findPostgresBindir();
  if (bindir === null) {
    throw new Error('no PostgreSQL server binaries: neither `pg_config --bindir` nor /usr/lib/postgresql/N/bin has initdb and pg_ctl (Debian: apt-get install postgresql)');
  }
  const as = runAs();
  const dir = await mkdtemp(path.join(tmpdir(), 'seglog-pg-'));
  const data = path.join(dir, 'data');
  const log = path.join(dir, 'server.log');
  const port = 20000 + Math.floor(Math.random() * 20000);
  const tool = (name: string): string => path.join(bindir, name);
  let started = false;
  try {
    if ((process.getuid?.() ?? 0) === 0) {
      await chown(dir, as.uid, as.gid);
      await chmod(dir, 0o700);
    }
    const version = (await execAs(as, [tool('postgres'), '--version'], 10_000)).trim();
    await execAs(as, [tool('initdb'), '-D', data, '-U', as.user, '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync', '--no-instructions'], 120_000);
    const settings: Record<string, string> = {
      listen_addresses: "''",
      unix_socket_directories: `'${dir}'`,
      port: String(port),
      max_connections: String(options.maxConnections ?? 300),
      fsync: 'on',
      synchronous_commit: 'on',
      full_page_writes: 'on',
      shared_buffers: "'128MB'",
      // Tests and benchmarks keep a server busy for minutes: no autovacuum surprises in a run.
      autovacuum: 'off',
      ...options.settings,
    };
    const conf = Object.entries(settings)
      .map(([k, v]) => `${k} = ${v}`)
      .join('\n');
    await appendFile(path.join(data, 'postgresql.conf'), `\n# written by seglog's scratch server\n${conf}\n`);
    const start = async (): Promise<void> => {
      await execAs(as, [tool('pg_ctl'), '-D', data, '-l', log, '-w', '-t', '60', 'start'], 90_000).catch((err: unknown) => {
        let tail = '';
        try {
          tail = readFileSync(log, 'utf8').split('\n').slice(-15).join('\n');
        } catch {
          // no log yet
        }
        throw new Error(`${(err as Error).message}\nserver log:\n${tail}`);
      });
      started = true;
      running.set(dir, () => {
        const [cmd, args] = as.wrap([tool('pg_ctl'), '-D', data, '-m', 'immediate', '-w', 'stop']);
        spawnSync(cmd, args, { stdio: 'ignore' });
        spawnSync('rm', ['-rf', dir]);
      });
      stopAllAtExit();
    };
    await start();
    const server: ScratchPostgres = {
      url: `postgresql://${encodeURIComponent(as.user)}@/postgres?host=${encodeURIComponent(dir)}&port=${port}`,
      dir,
      socketDir: dir,
      port,
      user: as.user,
      bindir,
      version,
      run: (name, args, o = {}) => execAs(as, [tool(name), ...args], o.timeoutMs ?? 600_000, o.env),
      stopImmediately: async () => {
        await execAs(as, [tool('pg_ctl'), '-D', data, '-m', 'immediate', '-w', 'stop'], 60_000);
        started = false;
      },
      start,
      stop: async () => {
        if (!running.has(dir)) return;
        running.delete(dir);
        if (started) await execAs(as, [tool('pg_ctl'), '-D', data, '-m', 'fast', '-w', '-t', '60', 'stop'], 90_000).catch(() => undefined);
        started = false;
        await rm(dir, { recursive: true, force: true });
      },
    };
    return server;
  } catch (err) {
    running.get(dir)?.();
    running.delete(dir);
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
    throw new Error(`could not start a scratch PostgreSQL server (as user ${as.user}): ${(err as Error).message}`);
  }
}
