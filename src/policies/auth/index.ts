/**
 * The `auth` policy: `Authorization: Bearer <key>` on every request (docs/interface.md,
 * "Authentication"), challenged as RFC 6750 section 3 describes. It runs first in the chain, so an
 * unauthenticated client learns nothing about routes or schemas.
 *
 * A key may expire (401, error="invalid_token", "The access token expired") and may be
 * limited to some operations (403 forbidden, error="insufficient_scope", RFC 6750 section 3.1);
 * failed guesses are limited per client address (429 too_many_auth_failures).
 *
 * Failures are charged to the real client: the address resolved through `server.trustedProxies`,
 * IPv6 grouped by /64 (client-address.ts), so a proxy is never locked for its clients' guesses.
 *
 * A locked address is locked for every key, valid ones included: answering a valid key from a
 * locked address differently from an invalid one would tell the guesser which guess was right,
 * which is the oracle the lock exists to take away. Clients behind the same NAT as a guesser wait
 * for the window to drain (at most `windowSeconds` after the guessing stops); raise `maxFailures`
 * where many clients share one address.
 */
import { GatewayError } from '../../core/errors.js';
import { isValidHost } from '../../core/headers.js';
import type { CheckContext, Decision, Exchange, PolicyEnv, PolicyModule, Problem, RunRequirement, UpstreamAuth } from '../../core/policy.js';
import { credentialSecrets, SecretSet } from '../../core/redact.js';
import { apiOf } from '../../api/index.js';
import { parseDateTime } from '../../core/date-time.js';
import { FailureLimiter } from './brute-force.js';
import { CONSUMER, DECLARES, KEY_ID } from './facts.js';
import { clientKey, clientResolver } from './client-address.js';
import { digestOf, KeyRing, type KeyGrant } from './keys.js';
import { envOwners } from './owners.js';
import { ownerFieldsProblem } from '../../core/key-owner.js';
import { checkConnection } from '../../stores/connection-schema.js';
import { claimsRegistryFormat, isWellFormedKey } from '../../registry/format.js';
import { openRegistry } from '../../registry/index.js';
import { DEFAULT_BRUTE_FORCE, schema, type AuthConfig } from './schema.js';

export { hashKey, newKey, KeyRing } from './keys.js';
export { bruteForceExposureWarning, clientKey } from './client-address.js';
export { envOwners, ownersVariable } from './owners.js';
export type { AuthConfig, BruteForceConfig, KeyEntry } from './schema.js';

/** RFC 6750 section 2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=". */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
/** The scheme is case-insensitive (RFC 9110 section 11.1); one or more spaces follow it. */
const BEARER = /^bearer +/i;

/** The keys a config accepts: its hashes, plus the plaintext keys of its environment variable. */
export function buildKeyRing(config: AuthConfig, env: PolicyEnv): KeyRing {
  const ring = new KeyRing();
  for (const k of config.keys) ring.add(k.id, k.hash, { expires: k.expires, operations: k.operations, scopes: k.scopes });
  for (const [i, key] of envKeys(config, env).entries()) ring.addPlain(`${config.keysFromEnv}#${i + 1}`, key);
  return ring;
}

/**
 * Every secret of this config the gateway holds in plaintext, to mask in upstream text it relays or
 * logs: the keys of `keysFromEnv` and the `upstreamAuthorization.fromEnv`
 * credential with its token part. Keys given as hashes are not known in plaintext.
 */
export function gatewaySecrets(config: AuthConfig, env: PolicyEnv): SecretSet {
  const secrets = envKeys(config, env);
  const up = config.upstreamAuthorization;
  if (typeof up === 'object') {
    const value = env.env[up.fromEnv];
    if (value !== undefined && value.trim() !== '') secrets.push(...credentialSecrets(value));
  }
  return new SecretSet(secrets);
}

/** Whose credential the upstream sees, and the realm of challenges (for `upstream-errors`). */
export function upstreamAuthOf(config: AuthConfig): UpstreamAuth {
  return { credential: config.upstreamAuthorization === 'forward' ? 'client' : 'gateway', realm: config.realm };
}

/** A key of the policy file or the environment as the console lists it (src/ops/console/keys-view.ts): never a secret or a hash. */
export interface PolicyKeyInfo {
  readonly id: string;
  readonly source: 'file' | 'env';
  readonly expires: string | null;
  readonly owner: string | null;
  readonly contact: string | null;
}

/** The file's and the environment's keys of a config, with who to tell about each (owners of a refused companion variable: none). */
export function keysInForce(config: AuthConfig, env: PolicyEnv): PolicyKeyInfo[] {
  const fromFile = config.keys.map((k): PolicyKeyInfo => ({ id: k.id, source: 'file', expires: k.expires ?? null, owner: k.owner ?? null, contact: k.contact ?? null }));
  const plain = envKeys(config, env);
  const { owners } = envOwners(config.keysFromEnv, env.env, plain.length);
  const fromEnv = plain.map((_, i): PolicyKeyInfo => ({ id: `${config.keysFromEnv}#${i + 1}`, source: 'env', expires: null, owner: owners[i]?.owner ?? null, contact: owners[i]?.contact ?? null }));
  return [...fromFile, ...fromEnv];
}

function envKeys(config: AuthConfig, env: PolicyEnv): string[] {
  if (config.keysFromEnv === null) return [];
  const raw = env.env[config.keysFromEnv];
  if (raw === undefined) return [];
  return raw.split(',').map((k) => k.trim()).filter((k) => k !== '');
}

/**
 * The problem `serve` refuses to start with when the config accepts no API key: every request
 * would be 401. `check` applies the same rule, so it fails exactly when `serve` would.
 */
function keyProblem(config: AuthConfig, path: string, env: PolicyEnv, run: RunRequirement): Problem | undefined {
  if (run === 'not-checked') return undefined;
  if (buildKeyRing(config, env).size > 0) return undefined;
  // Keys come at run time from the registry (docs/keys.md): none yet is a fleet's first start.
  if (config.registry != null) return undefined;
  // `serve --ephemeral-key` makes a key for the run, put in the variable keysFromEnv names.
  if (run === 'ephemeral-allowed' && config.keysFromEnv !== null) return undefined;
  const ways = ['add keys to auth.keys (petstore-gateway new-key, then hash-key)'];
  if (config.keysFromEnv !== null) ways.push(`set ${config.keysFromEnv}`, 'or pass --ephemeral-key for a key that lasts one run');
  else ways.push('or set auth.keysFromEnv to read keys from the environment');
  return { path, message: `no API key is configured, so every request would be refused: ${ways.join(', ')}` };
}

function check(config: AuthConfig, path: string, env: PolicyEnv, context?: CheckContext): Problem[] {
  const problems: Problem[] = [];
  const seenIds = new Set<string>();
  const seenHashes = new Set<string>();
  const ids = new Set(apiOf(env).operations.map((o) => o.id));
  config.keys.forEach((k, i) => {
    if (seenIds.has(k.id)) problems.push({ path: `${path}.keys[${i}].id`, message: `duplicate key id '${k.id}'` });
    if (seenHashes.has(k.hash)) problems.push({ path: `${path}.keys[${i}].hash`, message: 'duplicate key hash' });
    seenIds.add(k.id);
    seenHashes.add(k.hash);
    if (k.expires !== undefined && Number.isNaN(parseDateTime(k.expires))) {
      problems.push({ path: `${path}.keys[${i}].expires`, message: 'is not a valid date' });
    }
    (k.operations ?? []).forEach((o, j) => {
      if (!ids.has(o)) problems.push({ path: `${path}.keys[${i}].operations[${j}]`, message: `'${o}' is not an operation of the interface: ${[...ids].join(', ')}` });
    });
    // The form is the schema's; what looks like a secret only this says.
    const who = ownerFieldsProblem(k);
    if (who !== undefined) problems.push({ path: `${path}.keys[${i}].${who.field}`, message: who.message });
  });
  // Never echo a plaintext key in a message: only its position.
  const plain = envKeys(config, env);
  plain.forEach((k, i) => {
    if (!B64TOKEN.test(k)) {
      problems.push({ path: `${path}.keysFromEnv`, message: `key #${i + 1} of ${config.keysFromEnv} is not a valid bearer token (RFC 6750 b64token)` });
    }
  });
  for (const message of envOwners(config.keysFromEnv, env.env, plain.length).problems) problems.push({ path: `${path}.keysFromEnv`, message });
  const up = config.upstreamAuthorization;
  if (typeof up === 'object' && (env.env[up.fromEnv] ?? '') === '') {
    problems.push({ path: `${path}.upstreamAuthorization.fromEnv`, message: `environment variable ${up.fromEnv} is not set or empty` });
  }
  if (config.registry != null) problems.push(...checkConnection(config.registry.redis, `${path}.registry.redis`));
  // Only on a section the schema accepted: a key ring is built from it.
  const missing = context?.accepted === true ? keyProblem(config, path, env, context.run) : undefined;
  if (missing !== undefined) problems.push(missing);
  return problems;
}

/**
 * One line per key for `check`: id, expiry, operations, scopes, owner and contact (when it has some). Never a hash or a key.
 * `now` marks keys that have already expired.
 */
export function describeKeys(config: AuthConfig, env: PolicyEnv): string[] {
  const now = (env.now ?? Date.now)();
  const lines = config.keys.map((k) => {
    const expires = k.expires === undefined ? 'never expires' : `${Date.parse(k.expires) <= now ? 'EXPIRED' : 'expires'} ${k.expires}`;
    const ops = k.operations === undefined ? 'all operations' : `operations: ${k.operations.length === 0 ? '(none)' : k.operations.join(', ')}`;
    const scopes = k.scopes === undefined ? '' : `, scopes: ${k.scopes.length === 0 ? '(none)' : k.scopes.join(', ')}`;
    return `${k.id}: ${expires}, ${ops}${scopes}${whoLine(k)}`;
  });
  const plain = envKeys(config, env);
  const { owners } = envOwners(config.keysFromEnv, env.env, plain.length);
  plain.forEach((_, i) => {
    lines.push(`${config.keysFromEnv}#${i + 1}: never expires, all operations (from the environment)${whoLine(owners[i] ?? {})}`);
  });
  return lines;
}

/** `, owner: X, contact: Y` for what a key has of these; '' for none. */
function whoLine(k: { readonly owner?: string | undefined; readonly contact?: string | undefined }): string {
  return (k.owner === undefined ? '' : `, owner: ${k.owner}`) + (k.contact === undefined ? '' : `, contact: ${k.contact}`);
}

/** The brute-force key of the request's client: the real client (client-address.ts), never a proxy that many clients share. */
function addressOf(clientOf: (head: Exchange['head']) => string | undefined, ex: Exchange): string | undefined {
  const client = clientOf(ex.head);
  return client === undefined ? undefined : clientKey(client);
}

/** The answers of a refused request, made once per policy (the realm is in their challenges). */
function denials(realmName: string) {
  const realm = `Bearer realm="${realmName}"`;
  const badHost = new GatewayError('invalid_request', { message: 'The Host header is not valid.' });
  // RFC 6750 section 3.1: no error code when the request has no authentication information.
  const missing = new GatewayError('missing_api_key', { headers: { 'www-authenticate': realm } });
  const malformed = new GatewayError('malformed_authorization', {
    headers: { 'www-authenticate': `${realm}, error="invalid_request"` },
  });
  const invalid = new GatewayError('invalid_api_key', { headers: { 'www-authenticate': `${realm}, error="invalid_token"` } });
  // RFC 6750 section 3: the wording of its own example for an expired token.
  const expired = new GatewayError('expired_api_key', {
    headers: { 'www-authenticate': `${realm}, error="invalid_token", error_description="The access token expired"` },
  });
  const forbidden = new GatewayError('forbidden', { headers: { 'www-authenticate': `${realm}, error="insufficient_scope"` } });
  return { badHost, missing, malformed, invalid, expired, forbidden };
}

function create(config: AuthConfig, env: PolicyEnv) {
  const ring = buildKeyRing(config, env);
  const now = env.now ?? Date.now;
  // Absent (a config built in code, not loaded): the schema's default, on.
  const bruteForce = config.bruteForce === undefined ? DEFAULT_BRUTE_FORCE : config.bruteForce;
  const failures = bruteForce === null ? undefined : new FailureLimiter(bruteForce, now);
  const clientOf = clientResolver(env.trustedProxies ?? []);
  const { badHost, missing, malformed, invalid, expired, forbidden } = denials(config.realm);
  // The registry (docs/keys.md): read from its local copy only, after the file's keys. An id in
  // both is the file's: a run-time change must not take over a consumer the file defines.
  const registry = config.registry == null ? undefined : openRegistry(config.registry, env.env);
  const fileIds = new Set(config.keys.map((k) => k.id));
  /** A registry key's grant, unless the file defines that consumer (the file's keys win). */
  const registryGrant = (digest: string, nowMs: number): KeyGrant | undefined => {
    const reg = registry?.grant(digest, nowMs);
    return reg === undefined || fileIds.has(reg.consumer.id) ? undefined : reg;
  };
  // Authorization reaches the upstream only as this policy sets it (src/core/headers.ts never
  // forwards the client's): `forward` sets the client's header, `drop` nothing, `fromEnv` the
  // gateway's credential.
  const up = config.upstreamAuthorization;
  const forward = up === 'forward';
  const upstreamValue: string | null = up === 'drop' || up === 'forward' ? null : (env.env[up.fromEnv] ?? null);

  return {
    name: 'auth',
    declares: DECLARES,
    /** Client addresses with recent failures (bounded by lru-cache); 0 without brute-force protection. */
    get trackedAddresses(): number {
      return failures?.size ?? 0;
    },
    onRequest(ex: Exchange): Decision {
      // RFC 9112 section 3.2: 400 for an invalid or repeated Host. Checked here because this policy
      // runs first, so no policy and no forwarded field ever uses a Host of invalid syntax.
      if (!isValidHost(ex.head.headers.host)) return badHost;
      const header = ex.head.headers.authorization;
      if (header === undefined || header === '') return missing;
      // Another scheme (Basic, ...), a bare "Bearer", or junk: not a bearer credential.
      const scheme = typeof header === 'string' ? BEARER.exec(header) : null;
      if (scheme === null) return malformed;
      const token = (header as string).slice(scheme[0].length);
      if (!B64TOKEN.test(token)) return malformed;
      // A token from a locked address is not even looked up (see the header comment). While no
      // address has failed (nearly always), the client's address is not even worked out.
      let address: string | undefined;
      if (failures !== undefined && failures.size > 0) {
        address = addressOf(clientOf, ex);
        const waitMs = address === undefined ? 0 : failures.lockedFor(address);
        if (waitMs > 0) return new GatewayError('too_many_auth_failures', { headers: { 'retry-after': String(Math.max(1, Math.ceil(waitMs / 1000))) } });
      }
      const nowMs = now();
      // The file's and the environment's keys first: any bearer token, one that happens to start
      // with `psgk_` too (docs/keys.md). Then the registry, which issues only well-formed keys: a
      // token in its format with a wrong checksum is a typo or a forgery, not looked up there
      // (it still counts as a failed guess).
      const digest = digestOf(token);
      let grant: KeyGrant | undefined = ring.grantOfDigest(digest);
      let registered = false;
      if (grant === undefined && registry !== undefined && (!claimsRegistryFormat(token) || isWellFormedKey(token))) {
        grant = registryGrant(digest, nowMs);
        registered = grant !== undefined;
      }
      if (grant === undefined) {
        if (failures !== undefined) {
          address ??= addressOf(clientOf, ex);
          if (address !== undefined) failures.fail(address);
        }
        return invalid;
      }
      if (grant.expiresMs !== undefined && nowMs >= grant.expiresMs) return expired;
      if (grant.operations !== undefined && ex.operation !== undefined && !grant.operations.has(ex.operation.id)) return forbidden;
      if (registered) registry?.touch(grant.consumer.id, nowMs);
      ex.set(KEY_ID, grant.consumer.id);
      ex.set(CONSUMER, grant.consumer);
      ex.upstreamHeaders.authorization = forward ? (header as string) : upstreamValue;
      return undefined;
    },
  };
}

export const auth: PolicyModule<AuthConfig, 'auth'> = {
  name: 'auth',
  description: schema.description,
  schema,
  check,
  create,
};
