/**
 * The `cache` policy: only its config. The cache itself is a forwarding layer (layer.ts, with
 * flight.ts, key.ts, directives.ts and its stores beside it), built once with the upstream
 * (open.ts, called by src/gateway.ts, which hands it to the exchange as a wrapper of the composed
 * send), because what it stores is
 * the upstream's answer before the response phase: a hit is replayed through the same response
 * phase, header allowlist and access line as a miss. Authentication, scopes, the rate limit and
 * deprecation headers are request-phase policies, so they run before the layer, for hits as for
 * misses. No decision is taken here: the chain skips a policy with no phase.
 */
import type { Policy, PolicyModule, Problem } from '../../core/policy.js';
import { checkConnection } from '../../stores/connection-schema.js';
import { schema, type CacheConfig } from './schema.js';

export type { CacheConfig, CacheRedisConfig } from './schema.js';

function check(config: CacheConfig, path: string): Problem[] {
  const store = config.store;
  if (typeof store !== 'object') return [];
  return checkConnection(store.redis, `${path}.store.redis`);
}

const NOTHING: Policy = Object.freeze({ name: 'cache' });

export const cache: PolicyModule<CacheConfig, 'cache'> = {
  name: 'cache',
  description: schema.description,
  schema,
  check,
  create: () => NOTHING,
};
