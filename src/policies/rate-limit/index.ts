/**
 * The `rate-limit` policy: requests per consumer, counted per API key id across
 * operations. It runs right after `auth`, so a bad key is answered 401 and never counted against
 * anyone, and a refused request never reaches the upstream.
 *
 * Headers: draft-ietf-httpapi-ratelimit-headers (-10/-11: Structured Fields, RFC 9651) on every
 * response to a limited consumer, denials included:
 *   RateLimit-Policy: "default";q=<limit>;w=<window seconds>
 *   RateLimit: "default";r=<remaining>;t=<seconds>
 * `t` is the seconds until the whole quota is back; on a 429 it is the Retry-After (the seconds
 * until one request is allowed again), both rounded up so a client never retries too early.
 */
import { GatewayError } from '../../core/errors.js';
import { pathSegment } from '../../core/json-path.js';
import type { CheckContext, Decision, Exchange, PolicyEnv, PolicyModule, Problem } from '../../core/policy.js';
import { checkConnection } from '../../stores/connection-schema.js';
import { MemoryRateLimitStore, openStore } from '../../stores/index.js';
import { ThrottledWarning } from '../../stores/redis.js';
import type { RateDecision, RateLimitRule, RateLimitStore } from '../../stores/types.js';
import { KEY_ID } from '../auth/facts.js';
import { schema, type RateLimitConfig } from './schema.js';
import { TRACE_EVENTS } from '../../core/trace.js';

export type { RateLimitConfig } from './schema.js';

/** Keys the local fallback counts at most: the consumers are configured keys, so far fewer in practice. */
const LOCAL_MAX_KEYS = 100_000;
/** A failing store is reported at most this often, with the number of decisions since. */
export const STORE_WARNING_EVERY_MS = 10_000;

/** The one quota policy a consumer has; its name in the headers (an sf-string, RFC 9651). */
const POLICY_NAME = '"default"';

interface Rule extends RateLimitRule {
  /** RateLimit-Policy, built once per rule. */
  readonly policyHeader: string;
}

function rule(limit: number, windowSeconds: number): Rule {
  return Object.freeze({ limit, windowMs: windowSeconds * 1000, policyHeader: `${POLICY_NAME};q=${limit};w=${windowSeconds}` });
}

/** Whole seconds, rounded up: never shorter than the real wait. */
function seconds(ms: number): number {
  const s = Math.ceil(ms / 1000);
  return Math.max(s , 0);
}

const isMapping = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A registry key id (src/registry/records.ts ID_PATTERN): no `#`, so never an environment id. */
const REGISTRY_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The `perKey` ids of the file and the environment, and what the rest of them are. */
interface PerKeyIds {
  /** Not a key of the file or the environment, and no registry could have it: a typo. */
  readonly unknown: string[];
  /** Not a key of the file or the environment, but possibly a registry key (known at run time). */
  readonly registry: string[];
  /** The ids of the file and the environment, for the message. */
  readonly known: Set<string>;
}

/**
 * The ids `perKey` may name: every `auth.keys` id, and `NAME#n` for the keys of `auth.keysFromEnv`
 * NAME (n from 1, in the order the variable lists them), as the auth policy names them. When the
 * variable holds no key where the file is checked (a CI check without the secret,
 * `--ephemeral-key`), any `NAME#n` is accepted: the count is known only where the gateway runs,
 * which checks again with its keys. With a key registry (`auth.registry`), an id of the registry's
 * form is accepted too: registry ids are issued at run time (docs/keys.md), so `check` notes it
 * (`perKeyNotes`) rather than refusing it. The auth section is read as data, defensively: it may
 * hold schema errors of its own.
 */
function perKeyIds(perKey: unknown, auth: unknown, env: PolicyEnv): PerKeyIds | undefined {
  if (!isMapping(auth) || !isMapping(perKey) || !Array.isArray(auth.keys)) return undefined;
  const known = new Set(auth.keys.map((k: unknown) => (isMapping(k) ? k.id : undefined)).filter((id): id is string => typeof id === 'string'));
  const name = typeof auth.keysFromEnv === 'string' ? auth.keysFromEnv : undefined;
  const fromEnv = name === undefined ? [] : (env.env[name] ?? '').split(',').filter((k) => k.trim() !== '');
  for (let i = 1; i <= fromEnv.length; i++) known.add(`${name}#${i}`);
  const hasRegistry = isMapping(auth.registry);
  const unknown: string[] = [];
  const registry: string[] = [];
  for (const id of Object.keys(perKey)) {
    if (known.has(id)) continue;
    const envId = name !== undefined && id.startsWith(`${name}#`) && /^[1-9][0-9]*$/.test(id.slice(name.length + 1));
    if (envId && fromEnv.length === 0) continue;
    if (hasRegistry && REGISTRY_ID.test(id)) registry.push(id);
    else unknown.push(id);
  }
  return { unknown, registry, known };
}

function perKeyProblems(perKey: unknown, auth: unknown, path: string, env: PolicyEnv): Problem[] {
  const ids = perKeyIds(perKey, auth, env);
  if (ids === undefined) return [];
  const known = [...ids.known].map((k) => JSON.stringify(k)).join(', ');
  const registry = isMapping(auth) && isMapping(auth.registry) ? ' (a registry key id is 1 to 64 letters, digits, ".", "_" or "-")' : '';
  return ids.unknown.map((id) => ({
    path: `${path}.perKey${pathSegment(id)}`,
    message: `names no API key, so this limit would apply to no one: the ids are ${known === '' ? '(none)' : known}${registry}`,
  }));
}

/**
 * What `check` says of `perKey` ids that name no file or environment key but may name a key of the
 * registry (its ids are issued at run time): one line each. Empty without a registry.
 */
export function perKeyNotes(config: RateLimitConfig, auth: unknown, env: PolicyEnv): string[] {
  const ids = perKeyIds(config.perKey, auth, env);
  return (ids?.registry ?? []).map(
    (id) => `rate-limit perKey ${JSON.stringify(id)}: no key of the file or the environment has this id; it limits the key registry's consumer ${JSON.stringify(id)} (registry ids are known at run time: see keys list)`,
  );
}

function check(config: RateLimitConfig, path: string, env: PolicyEnv, context?: CheckContext): Problem[] {
  const problems: Problem[] = [];
  const store: unknown = config.store;
  // Read defensively, so a store the schema refused does not hide the perKey problems below.
  if (isMapping(store) && isMapping(store.redis)) problems.push(...checkConnection(store.redis, `${path}.store.redis`));
  if (context !== undefined) problems.push(...perKeyProblems(config.perKey, context.policies.auth, path, env));
  return problems;
}

/** Whether the config limits anyone: without `limit` and `perKey` the policy does nothing (today's behaviour). */
export function limitsAnyone(config: RateLimitConfig): boolean {
  return config.limit !== undefined || Object.keys(config.perKey).length > 0;
}

/**
 * What `serve --workers N` must say at start when each worker would count on its own:
 * the memory store with N > 1. undefined when there is nothing to say.
 */
export function perWorkerNotice(config: RateLimitConfig, workers: number): string | undefined {
  if (workers <= 1 || config.store !== 'memory' || !limitsAnyone(config)) return undefined;
  return `rate-limit: the memory store counts per worker: with --workers ${workers} a consumer may make up to ${workers}x its limit; use store: {redis: {url}} for one limit across workers`;
}

function create(config: RateLimitConfig, env: PolicyEnv) {
  if (!limitsAnyone(config)) return { name: 'rate-limit' };
  const store: RateLimitStore = (env.openStore ?? openStore)(config.store);
  const base = config.limit === undefined ? undefined : rule(config.limit, config.windowSeconds);
  const perKey = new Map<string, Rule>();
  for (const [id, r] of Object.entries(config.perKey)) perKey.set(id, rule(r.limit, r.windowSeconds ?? config.windowSeconds));
  const failOpen = config.onStoreError === 'open';
  // A store that fails (Redis away, or too slow for the command deadline) must not switch the limit
  // off: with onStoreError open, this process counts on its own meanwhile, with the same rule. The
  // limit itself, not limit / instances: the number of instances is not known here, and a share
  // would refuse a consumer whose traffic reaches one instance. Across a failover a consumer may
  // so get its limit from the store plus its limit from each process's own counters.
  const local = new MemoryRateLimitStore({ max: LOCAL_MAX_KEYS, ...(env.now === undefined ? {} : { now: env.now }) });
  const warning = new ThrottledWarning(env.log, STORE_WARNING_EVERY_MS, env.now);
  const unavailable = new GatewayError('service_unavailable', { message: 'The rate limit store is unavailable: retry later.', headers: { 'retry-after': '1' } });
  let failedOpen = 0;

  function decide(ex: Exchange, r: Rule, d: RateDecision): Decision {
    ex.responseHeaders['ratelimit-policy'] = r.policyHeader;
    if (d.allowed) {
      ex.responseHeaders.ratelimit = `${POLICY_NAME};r=${d.remaining};t=${seconds(d.resetMs)}`;
      return undefined;
    }
    // At least 1: a refusal always has something to wait for (GCRA's retryAfterMs > 0).
    const retry = Math.max(1, seconds(d.retryAfterMs));
    ex.responseHeaders.ratelimit = `${POLICY_NAME};r=0;t=${retry}`;
    ex.trace?.event(TRACE_EVENTS.rateLimited, { 'gateway.limit': 'rate', 'gateway.retry_after_s': retry });
    return new GatewayError('rate_limited', { headers: { 'retry-after': String(retry) } });
  }

  function storeFailed(ex: Exchange, id: string, r: Rule, err: unknown): Decision {
    if (!failOpen) {
      // The limit is known, the count is not: only the policy header is true.
      ex.responseHeaders['ratelimit-policy'] = r.policyHeader;
      return unavailable;
    }
    failedOpen++;
    warning.warn(
      { policy: 'rate-limit', store: store.kind, err: err instanceof Error ? err.message : String(err), decidedLocally: failedOpen },
      "rate limit store failed: limiting with this process's own counters (onStoreError: open)",
    );
    return decide(ex, r, local.take(id, r));
  }

  return {
    name: 'rate-limit',
    /** Requests decided by this process's own counters because the store failed (onStoreError: open). */
    get failedOpen(): number {
      return failedOpen;
    },
    onRequest(ex: Exchange): Decision | Promise<Decision> {
      const id = ex.get(KEY_ID);
      // auth runs first; without a key id the request was not authenticated, nothing to count.
      if (id === undefined) return undefined;
      const r = perKey.get(id) ?? base;
      if (r === undefined) return undefined;
      let d: RateDecision | Promise<RateDecision>;
      try {
        d = store.take(id, r);
      } catch (err) {
        return storeFailed(ex, id, r, err);
      }
      // The memory store answers synchronously: no promise on its path.
      if (d instanceof Promise) return d.then((v) => decide(ex, r, v), (err: unknown) => storeFailed(ex, id, r, err));
      return decide(ex, r, d);
    },
  };
}

export const rateLimit: PolicyModule<RateLimitConfig, 'rate-limit'> = {
  name: 'rate-limit',
  description: schema.description,
  schema,
  check,
  create,
};
