/**
 * `petstore-gateway health`: the container's healthcheck, which knows where to look. It reads the
 * command line of the process it checks (PID 1 of the container by default, `--pid N` else) and
 * asks that process where it listens, as that process itself would have worked it out:
 *
 * - `serve`: `GET /healthz` on its admin listener (`--admin-host`/`--admin-port`, else the policy
 *   file's `server.admin`, read with the same environment); with the admin listener off
 *   (`server.admin: null`), a TCP connection to its API port;
 * - `backend`: `GET /v1/pets?limit=1` on its port (default 8081).
 *
 * Exit 0 when it answers (2xx, or the connection for the API port), 1 otherwise, with one line on
 * stderr saying what was tried (Docker keeps a healthcheck's output: `docker inspect`). A listener
 * bound to every interface (0.0.0.0, ::) is reached on loopback. `--url URL` checks one URL instead.
 */
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, isAbsolute, join } from 'node:path';
import { parseArgs } from 'node:util';
import { formatOf, parsePolicy } from '../config/load.js';

export const HEALTH_HELP = `Usage: petstore-gateway health [--pid N] [--url URL]

The container's healthcheck (deploy/Dockerfile HEALTHCHECK): checks the petstore-gateway process
PID N (default 1, the container's main process) where its own command line says it listens:
serve: GET /healthz on its admin listener (from --admin-host/--admin-port, else the policy's
server.admin; with server.admin: null, a TCP connect to the API port); backend: GET
/v1/pets?limit=1 on its port. --url URL: GET that URL instead. Exit 0 healthy, 1 not.
`;

const TIMEOUT_MS = 1500;

export type HealthTarget = { readonly kind: 'http'; readonly url: string } | { readonly kind: 'tcp'; readonly host: string; readonly port: number };

/** The address to connect to for a listener bound to `host`: every interface is reached on loopback. */
function reachable(host: string): string {
  const h = host.replace(/^\[|\]$/g, '');
  if (h === '0.0.0.0' || h === '') return '127.0.0.1';
  if (h === '::') return '::1';
  return h;
}

function origin(host: string, port: number): string {
  const h = reachable(host);
  return `http://${h.includes(':') ? `[${h}]` : h}:${port}`;
}

/**
 * Where the process whose arguments are `argv` (its whole command line) can be checked, worked out
 * as it worked out where to listen; a string saying why not otherwise.
 */
export function healthTarget(argv: readonly string[], cwd: string, env: Record<string, string | undefined>, packageRoot: string): HealthTarget | string {
  const at = argv.findIndex((a) => a === 'serve' || a === 'backend');
  if (at < 0) return `not a petstore-gateway serve or backend process: ${argv.join(' ')}`;
  const { values } = parseArgs({
    args: argv.slice(at + 1),
    options: { policy: { type: 'string' }, host: { type: 'string' }, port: { type: 'string' }, 'admin-host': { type: 'string' }, 'admin-port': { type: 'string' }, upstream: { type: 'string' } },
    strict: false,
    allowPositionals: true,
  });
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  if (argv[at] === 'backend') {
    const port = Number(str(values.port) ?? 8081);
    return port === 0 ? 'the backend listens on port 0 (a free port): its port cannot be known' : { kind: 'http', url: `${origin(str(values.host) ?? '127.0.0.1', port)}/v1/pets?limit=1` };
  }
  const given = str(values.policy);
  const local = join(cwd, 'policies', 'default.yaml');
  const file = given === undefined ? (existsSync(local) ? local : join(packageRoot, 'policies', 'default.yaml')) : isAbsolute(given) ? given : join(cwd, given);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    return `cannot read the policy ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
  }
  const num = (v: unknown) => (typeof v === 'string' ? Number(v) : undefined);
  const overrides = { host: str(values.host), port: num(values.port), adminHost: str(values['admin-host']), adminPort: num(values['admin-port']) };
  const loaded = parsePolicy(text, { env }, overrides, { keys: 'not-checked', format: formatOf(file), baseDir: dirname(file) });
  if (!loaded.ok) return `the policy ${file} is not valid: ${loaded.problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`;
  const { admin, host, port } = loaded.config.server;
  if (admin !== null) return admin.port === 0 ? 'the admin listener is on port 0 (a free port): its port cannot be known' : { kind: 'http', url: `${origin(admin.host, admin.port)}/healthz` };
  return port === 0 ? 'the API listens on port 0 (a free port) and server.admin is null: nothing to check' : { kind: 'tcp', host: reachable(host), port };
}

/** 0 when the target answers, else 1 after one line on stderr. */
export async function checkHealth(target: HealthTarget): Promise<number> {
  if (target.kind === 'http') {
    try {
      const res = await fetch(target.url, { redirect: 'manual', signal: AbortSignal.timeout(TIMEOUT_MS) });
      await res.body?.cancel().catch(() => undefined);
      if (res.ok) return 0;
      process.stderr.write(`petstore-gateway health: GET ${target.url} answered ${res.status}\n`);
    } catch (err) {
      const e = err as Error & { cause?: { code?: string } };
      process.stderr.write(`petstore-gateway health: GET ${target.url} got no answer (${e.name === 'TimeoutError' ? `${TIMEOUT_MS} ms` : (e.cause?.code ?? e.message)})\n`);
    }
    return 1;
  }
  const problem = await new Promise<string | undefined>((resolve) => {
    const socket = connect({ host: target.host, port: target.port, timeout: TIMEOUT_MS });
    socket.once('connect', () => (socket.destroy(), resolve(undefined)));
    socket.once('timeout', () => (socket.destroy(), resolve(`no connection within ${TIMEOUT_MS} ms`)));
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
  if (problem === undefined) return 0;
  process.stderr.write(`petstore-gateway health: cannot connect to ${target.host}:${target.port} (${problem})\n`);
  return 1;
}

/** The `health` command: `args` are its own flags. */
export async function healthCommand(args: readonly string[], packageRoot: string): Promise<number> {
  const { values } = parseArgs({ args: [...args], options: { pid: { type: 'string' }, url: { type: 'string' } }, strict: true });
  if (typeof values.url === 'string') return checkHealth({ kind: 'http', url: values.url });
  const pid = values.pid ?? '1';
  if (!/^[1-9]\d{0,9}$/.test(pid)) throw new HealthUsageError(`--pid must be a process id, not '${pid}'`);
  let argv: string[];
  let cwd: string;
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((a) => a !== '');
    cwd = readlinkSync(`/proc/${pid}/cwd`);
  } catch (err) {
    process.stderr.write(`petstore-gateway health: cannot read process ${pid}'s command line (${(err as NodeJS.ErrnoException).code ?? 'error'}); pass --url\n`);
    return 1;
  }
  const target = healthTarget(argv, cwd, process.env, packageRoot);
  if (typeof target === 'string') {
    process.stderr.write(`petstore-gateway health: process ${pid}: ${target}\n`);
    return 1;
  }
  return checkHealth(target);
}

/** A bad flag of `health` (the caller turns it into its usage error, exit 2). */
export class HealthUsageError extends Error {}
