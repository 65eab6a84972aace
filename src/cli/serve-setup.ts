/**
 * What the `serve` primary (serve.ts) and a serving process (serve-process.ts) share: the settled
 * setup, the primary's hand-over to its workers, the validation of a reload, the banner and the
 * admin listener.
 */
import { dirname } from 'node:path';
import type { Logger } from 'pino';
import { type AdminHandle, type AdminOptions, startAdmin } from '../ops/admin.js';
import { formatOf, parsePolicy, readPolicyText, type Overrides } from '../config/load.js';
import type { PolicyConfig } from '../config/types.js';
import { restartOnlyChanges } from '../gateway.js';
import { adminTls } from './admin.js';
import { interfaceStructure } from './policy-load.js';

/**
 * The variable through which the `--workers` primary hands each worker, replacements included, the
 * policy text in force: a worker never reads the file, which may have been edited since, or left
 * invalid by a refused reload. Internal: taken out of the worker's environment before use.
 */
export const WORKER_POLICY_ENV = 'PETSTORE_GATEWAY_WORKER_POLICY';
/**
 * Set by a primary whose workers listen themselves with `reusePort` (supervisor.ts): the port a
 * worker listens on, the one the first worker got when the policy says port 0. Internal, like
 * WORKER_POLICY_ENV.
 */
export const WORKER_PORT_ENV = 'PETSTORE_GATEWAY_WORKER_REUSE_PORT';
/** primary -> worker: `{ type, text, reason }`, a reload the primary has validated. */
export const POLICY_MESSAGE = 'petstore-gateway:policy';

export interface PolicyMessage {
  readonly type: typeof POLICY_MESSAGE;
  readonly text: string;
  readonly reason: string;
}

export function isPolicyMessage(m: unknown): m is PolicyMessage {
  return typeof m === 'object' && m !== null && (m as { type?: unknown }).type === POLICY_MESSAGE && typeof (m as { text?: unknown }).text === 'string';
}

/** What `serve` has settled before it starts anything. */
export interface ServeSetup {
  readonly file: string;
  /** The policy text in force at start (validated into `config`). */
  readonly text: string;
  readonly config: PolicyConfig;
  readonly env: Record<string, string | undefined>;
  readonly overrides: Overrides;
  readonly engine: string;
  readonly workers: number;
  /** A worker that listens itself, with `reusePort`, on this port (not the policy's). */
  readonly reusePort?: number | undefined;
  readonly watch: boolean;
  readonly ephemeral: string | undefined;
  readonly log: Logger;
}

/**
 * Validates a policy text for a reload: as `serve` would, plus what a reload cannot change.
 * Returns the new config, or the problems (then the policy in force stays).
 */
export function checkReload(s: ServeSetup, current: PolicyConfig, text: string): { ok: true; config: PolicyConfig } | { ok: false; problems: string[] } {
  const next = parsePolicy(text, { env: s.env }, s.overrides, { keys: 'required', format: formatOf(s.file), baseDir: dirname(s.file) });
  const problems = !next.ok ? next.problems : restartOnlyChanges(current, next.config);
  if (next.ok && problems.length === 0) return { ok: true, config: next.config };
  return { ok: false, problems: problems.map((p) => `${p.path}: ${p.message}`) };
}

/** `checkReload`, and the OpenAPI structure of the interface document the new policy names. */
export async function checkReloadWhole(s: ServeSetup, current: PolicyConfig, text: string): Promise<{ ok: true; config: PolicyConfig } | { ok: false; problems: string[] }> {
  const next = checkReload(s, current, text);
  if (!next.ok) return next;
  const structure = await interfaceStructure(next.config);
  return structure.length === 0 ? next : { ok: false, problems: structure.map((p) => `${p.path}: ${p.message}`) };
}

/**
 * Reads the policy file for a reload; undefined (after its log line) when it cannot be read, or
 * when a file change left the text as it was (an editor's save fires several events: one reload
 * line per change, not per event).
 */
export function readForReload(s: ServeSetup, reason: string, last: { text: string }): string | undefined {
  const read = readPolicyText(s.file);
  if (!read.ok) {
    s.log.error({ file: s.file, reason, problems: read.problems.map((p) => p.message) }, 'policy reload refused; the previous policy stays');
    return undefined;
  }
  if (reason === 'file changed' && read.text === last.text) return undefined;
  last.text = read.text;
  return read.text;
}

/** The human text of a start, on stderr: stdout stays NDJSON. */
export function printBanner(banner: string, ephemeral: string | undefined, url: string | undefined): void {
  process.stderr.write(banner + '\n');
  if (ephemeral !== undefined) {
    process.stderr.write(`API key for this run (kept in memory only): ${ephemeral}\n`);
    if (url !== undefined) process.stderr.write(`try: curl -H 'Authorization: Bearer ${ephemeral}' ${url}/v1/pets\n`);
  }
}

/** The admin listener on its own port; undefined (after a clear message) when it cannot listen. */
export async function listenAdmin(at: NonNullable<PolicyConfig['server']['admin']>, callbacks: Pick<AdminOptions, 'readiness' | 'metrics' | 'deprecations' | 'routes' | 'openapi' | 'migration'>, log: Logger): Promise<AdminHandle | undefined> {
  try {
    const tls = adminTls(at, log);
    const admin = await startAdmin({ host: at.host, port: at.port, allowedHosts: at.allowedHosts, tls: tls?.options, ...callbacks, onError: (err, path) => log.error({ err, path }, 'admin endpoint failed') });
    tls?.attach(admin.server);
    const a = admin.address();
    log.info({ url: `${tls === undefined ? 'http' : 'https'}://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}` }, `admin listening (/healthz, /readyz, /metrics, /deprecations, /openapi.json${callbacks.migration === undefined ? '' : ', /migration'}${at.console === false ? '' : ', /console/'})`);
    return admin;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    process.stderr.write(`petstore-gateway: the admin listener cannot listen on ${at.host}:${at.port}: ${e.code ?? e.message} (set server.admin or --admin-port, or server.admin: null to turn it off)\n`);
    return undefined;
  }
}
