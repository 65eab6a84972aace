/**
 * Security notices for the operator: what a start-up configuration leaves exposed, and
 * what a policy reload weakens. A reload is a quiet way to switch a protection off (a mistaken
 * edit, or someone with write access to the file), so each weakening is named in one warn line
 * when the new policy takes effect. Pure functions of the configs; strengthening and neutral
 * changes say nothing.
 */
import type { PolicyConfig } from './types.js';
import { bruteForceExposureWarning } from '../policies/auth/index.js';
import type { RateLimitConfig } from '../policies/rate-limit/schema.js';

type Policies = PolicyConfig['policies'];

/** How much each mode lets through, least first: a higher rank is weaker. */
const CONTRACT_RANK = { enforce: 0, monitor: 1, off: 2 } as const;
const UNKNOWN_PET_RANK = { refuse: 0, drop: 1, pass: 2 } as const;
const NEW_PET_RANK = { reject: 0, strip: 1, allow: 2 } as const;

/**
 * Each way `next` protects less than `prev`, as a short phrase naming the option; empty when none.
 *
 * @example
 *   securityWeakenings(before, after) // ['rate-limit: limit removed', 'response-contract.mode enforce -> off']
 */
export function securityWeakenings(prev: PolicyConfig, next: PolicyConfig): string[] {
  return [
    ...authWeakenings(prev.policies.auth, next.policies.auth),
    ...rateLimitWeakenings(prev.policies['rate-limit'], next.policies['rate-limit']),
    ...contractWeakenings(prev.policies, next.policies),
    ...added('headers.request.allow', prev.headers.request.allow, next.headers.request.allow),
    ...added('headers.response.allow', prev.headers.response.allow, next.headers.response.allow),
    ...(prev.log.access && !next.log.access ? ['log.access turned off'] : []),
  ];
}

function added(path: string, before: readonly string[], after: readonly string[]): string[] {
  const had = new Set(before.map((n) => n.toLowerCase()));
  const more = after.filter((n) => !had.has(n.toLowerCase()));
  return more.length === 0 ? [] : [`${path} gained ${more.join(', ')}`];
}

function authWeakenings(prev: Policies['auth'], next: Policies['auth']): string[] {
  const out: string[] = [];
  const bf = prev.bruteForce;
  const nbf = next.bruteForce;
  if (bf !== null && nbf === null) out.push('auth.bruteForce turned off');
  else if (bf !== null && nbf !== null && nbf.maxFailures / nbf.windowSeconds > bf.maxFailures / bf.windowSeconds) out.push('auth.bruteForce allows more failures');
  if (prev.upstreamAuthorization !== 'forward' && next.upstreamAuthorization === 'forward') out.push("auth.upstreamAuthorization now forwards clients' keys upstream");
  if (prev.keysFromEnv === null && next.keysFromEnv !== null) out.push(`auth.keysFromEnv now reads ${next.keysFromEnv}`);
  const before = new Map(prev.keys.map((k) => [k.id, k]));
  const newIds: string[] = [];
  for (const k of next.keys) {
    const old = before.get(k.id);
    if (old === undefined) {
      newIds.push(k.id);
      continue;
    }
    if (old.operations !== undefined && (k.operations === undefined || k.operations.some((op) => !old.operations?.includes(op)))) out.push(`auth key '${k.id}' may call more operations`);
    if ((k.scopes ?? []).some((sc) => !(old.scopes ?? []).includes(sc))) out.push(`auth key '${k.id}' has more scopes`);
    if (old.expires !== undefined && (k.expires === undefined || Date.parse(k.expires) > Date.parse(old.expires))) out.push(`auth key '${k.id}' expires later`);
    if (old.hash !== k.hash) out.push(`auth key '${k.id}' accepts another key`);
  }
  if (newIds.length > 0) out.push(`auth keys added: ${newIds.join(', ')}`);
  return out;
}

/** Requests per second a rule allows (the sustained rate); Infinity without a limit. */
function rate(limit: number | undefined, windowSeconds: number): number {
  return limit === undefined ? Number.POSITIVE_INFINITY : limit / windowSeconds;
}

function rateLimitWeakenings(prev: RateLimitConfig, next: RateLimitConfig): string[] {
  const out: string[] = [];
  if (prev.limit !== undefined) {
    if (next.limit === undefined) out.push('rate-limit: limit removed');
    else if (next.limit > prev.limit || rate(next.limit, next.windowSeconds) > rate(prev.limit, prev.windowSeconds)) out.push('rate-limit: limit raised');
  }
  for (const [id, rule] of Object.entries(prev.perKey)) {
    const now = next.perKey[id];
    const before = rate(rule.limit, rule.windowSeconds ?? prev.windowSeconds);
    if (now === undefined) {
      if (rate(next.limit, next.windowSeconds) > before) out.push(`rate-limit.perKey.${id} removed`);
    } else if (rate(now.limit, now.windowSeconds ?? next.windowSeconds) > before || now.limit > rule.limit) out.push(`rate-limit.perKey.${id} raised`);
  }
  if (prev.onStoreError === 'closed' && next.onStoreError === 'open') out.push('rate-limit.onStoreError closed -> open');
  return out;
}

function contractWeakenings(prev: Policies, next: Policies): string[] {
  const out: string[] = [];
  const rc = prev['response-contract'];
  const nrc = next['response-contract'];
  if (CONTRACT_RANK[nrc.mode] > CONTRACT_RANK[rc.mode]) out.push(`response-contract.mode ${rc.mode} -> ${nrc.mode}`);
  if (UNKNOWN_PET_RANK[nrc.unknownFields] > UNKNOWN_PET_RANK[rc.unknownFields]) out.push(`response-contract.unknownFields ${rc.unknownFields} -> ${nrc.unknownFields}`);
  const np = prev['new-pet'];
  const nnp = next['new-pet'];
  if (nnp.maxBytes > np.maxBytes) out.push(`new-pet.maxBytes raised to ${nnp.maxBytes}`);
  if (NEW_PET_RANK[nnp.unknownFields] > NEW_PET_RANK[np.unknownFields]) out.push(`new-pet.unknownFields ${np.unknownFields} -> ${nnp.unknownFields}`);
  if (prev['list-pets'].enforceResponse && !next['list-pets'].enforceResponse) out.push('list-pets.enforceResponse turned off');
  return out;
}

/** Whether a listener bound to `host` is reachable from this machine only. */
function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^(::ffff:)?127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/**
 * The built-in demo backend (pets in process memory, created by anyone with a key) is never an
 * accident: bound to an address other machines reach, `serve` (and `check`) refuse it unless it was
 * chosen, by `--upstream builtin` or in the policy file given with `--policy` (`upstream: { url:
 * builtin }`). Falling into it (no `--policy`, the packaged quickstart policy, or a file that
 * leaves `upstream.url` out) is the mistake this catches: a healthy-looking fake API.
 */
export function builtinExposureProblem(config: PolicyConfig, chosen: boolean): { path: string; message: string } | undefined {
  if (config.upstream.url !== 'builtin' || chosen || isLoopback(config.server.host)) return undefined;
  return {
    path: '$.upstream.url',
    message:
      `is the built-in demo backend (pets in memory) by default, and server.host ${config.server.host} is not loopback: ` +
      `set upstream.url to your upstream's base URL (ending with /v1), or choose the demo explicitly with --upstream builtin ` +
      `or upstream: { url: builtin } in the file given with --policy`,
  };
}

/** Logs what the configuration `serve` starts with leaves exposed (one warn line each). */
export function warnAtStart(config: PolicyConfig, log: { warn(fields: Record<string, unknown>, message: string): void }): void {
  const exposed = bruteForceExposureWarning(config);
  if (exposed !== undefined) log.warn({ host: config.server.host }, exposed);
}

/** After a reload that took: one warning naming everything the new policy weakens, if anything. */
export function warnWeakenings(prev: PolicyConfig, next: PolicyConfig, log: { warn(fields: Record<string, unknown>, message: string): void }): void {
  const weakened = securityWeakenings(prev, next);
  // The list is in the message so that two different weakenings are two lines (warnings are throttled per message).
  if (weakened.length > 0) log.warn({ weakened }, `policy reload weakens security: ${weakened.join('; ')}`);
}

/**
 * With `--workers N` (N > 1): the per-client bounds each worker keeps in its own memory, and what
 * they become for the group, as one line for the primary to log at start (src/cli/serve.ts),
 * or undefined with one worker. The rate limit's memory store has its own notice
 * (`perWorkerNotice` in src/policies/rate-limit).
 */
export function perClientBoundsNotice(config: PolicyConfig, workers: number): string | undefined {
  if (workers <= 1) return undefined;
  const bf = config.policies.auth.bruteForce;
  const bounds = [
    ...(bf === null ? [] : [`auth.bruteForce allows ${workers} x ${bf.maxFailures} failed guesses per ${bf.windowSeconds} s from one address`]),
    `server.maxConnectionsPerAddress is ${workers} x the share`,
    ...(config.server.maxInFlightPerConsumer === null ? [] : [`server.maxInFlightPerConsumer is ${workers} x ${config.server.maxInFlightPerConsumer}`]),
    `the pipelining refusal holds on the worker that saw the overflow only`,
  ];
  return `per-client bounds are kept per worker: with --workers ${workers}, ${bounds.join('; ')} (the kernel spreads one client's connections over the workers); divide them by ${workers} for one bound across the group, or run one worker per instance`;
}
