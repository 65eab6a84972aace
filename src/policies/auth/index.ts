/**
 * The `auth` policy: `Authorization: Bearer <key>` on every request (pet-store-interface.md,
 * "Authentication"), challenged as RFC 6750 section 3 describes. It runs first in the chain, so an
 * unauthenticated client learns nothing about routes or schemas.
 */
import { GatewayError } from '../../core/errors.js';
import type { Decision, Exchange, PolicyEnv, PolicyModule, Problem, UpstreamAuth } from '../../core/policy.js';
import { credentialSecrets, SecretSet } from '../../core/redact.js';
import { KeyRing } from './keys.js';
import { schema, type AuthConfig } from './schema.js';

export { hashKey, newKey, KeyRing } from './keys.js';
export type { AuthConfig } from './schema.js';

/** RFC 6750 section 2.1: b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=". */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
/** The scheme is case-insensitive (RFC 9110 section 11.1); one or more spaces follow it. */
const BEARER = /^bearer +/i;

/** The keys a config accepts: its hashes, plus the plaintext keys of its environment variable. */
export function buildKeyRing(config: AuthConfig, env: PolicyEnv): KeyRing {
  const ring = new KeyRing();
  for (const k of config.keys) ring.add(k.id, k.hash);
  for (const [i, key] of envKeys(config, env).entries()) ring.addPlain(`${config.keysFromEnv}#${i + 1}`, key);
  return ring;
}

/**
 * Every secret of this config the gateway holds in plaintext, to mask in upstream text it relays or
 * logs (issue 12, finding 4): the keys of `keysFromEnv` and the `upstreamAuthorization.fromEnv`
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

function envKeys(config: AuthConfig, env: PolicyEnv): string[] {
  if (config.keysFromEnv === null) return [];
  const raw = env.env[config.keysFromEnv];
  if (raw === undefined) return [];
  return raw.split(',').map((k) => k.trim()).filter((k) => k !== '');
}

function check(config: AuthConfig, path: string, env: PolicyEnv): Problem[] {
  const problems: Problem[] = [];
  const seenIds = new Set<string>();
  const seenHashes = new Set<string>();
  config.keys.forEach((k, i) => {
    if (seenIds.has(k.id)) problems.push({ path: `${path}.keys[${i}].id`, message: `duplicate key id '${k.id}'` });
    if (seenHashes.has(k.hash)) problems.push({ path: `${path}.keys[${i}].hash`, message: 'duplicate key hash' });
    seenIds.add(k.id);
    seenHashes.add(k.hash);
  });
  // Never echo a plaintext key in a message: only its position.
  envKeys(config, env).forEach((k, i) => {
    if (!B64TOKEN.test(k)) {
      problems.push({ path: `${path}.keysFromEnv`, message: `key #${i + 1} of ${config.keysFromEnv} is not a valid bearer token (RFC 6750 b64token)` });
    }
  });
  const up = config.upstreamAuthorization;
  if (typeof up === 'object' && (env.env[up.fromEnv] ?? '') === '') {
    problems.push({ path: `${path}.upstreamAuthorization.fromEnv`, message: `environment variable ${up.fromEnv} is not set or empty` });
  }
  return problems;
}

function create(config: AuthConfig, env: PolicyEnv) {
  const ring = buildKeyRing(config, env);
  const realm = `Bearer realm="${config.realm}"`;
  // RFC 6750 section 3.1: no error code when the request has no authentication information.
  const missing = new GatewayError('missing_api_key', undefined, { 'www-authenticate': realm });
  const malformed = new GatewayError('malformed_authorization', undefined, {
    'www-authenticate': `${realm}, error="invalid_request"`,
  });
  const invalid = new GatewayError('invalid_api_key', undefined, { 'www-authenticate': `${realm}, error="invalid_token"` });

  // Authorization reaches the upstream only as this policy sets it (src/core/headers.ts never
  // forwards the client's): `forward` sets the client's header, `drop` nothing, `fromEnv` the
  // gateway's credential.
  const up = config.upstreamAuthorization;
  const forward = up === 'forward';
  const upstreamValue: string | null = up === 'drop' || up === 'forward' ? null : (env.env[up.fromEnv] ?? null);

  return {
    name: 'auth',
    onRequest(ex: Exchange): Decision {
      const header = ex.head.headers.authorization;
      if (header === undefined || header === '') return missing;
      // Another scheme (Basic, ...), a bare "Bearer", or junk: not a bearer credential.
      const scheme = typeof header === 'string' ? BEARER.exec(header) : null;
      if (scheme === null) return malformed;
      const token = (header as string).slice(scheme[0].length);
      if (!B64TOKEN.test(token)) return malformed;
      const id = ring.identify(token);
      if (id === undefined) return invalid;
      ex.keyId = id;
      ex.upstreamHeaders.authorization = forward ? (header as string) : upstreamValue;
      return undefined;
    },
  };
}

export const auth: PolicyModule<AuthConfig> = {
  name: 'auth',
  description: schema.description,
  schema,
  check,
  create,
};
