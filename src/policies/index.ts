/**
 * The policy modules, in the order the chain runs them. This list is the only place that order is
 * written: `cors` first (a browser's preflight carries no credentials: it is answered before
 * authentication, and every answer, denials included, gets its CORS fields), then `auth` (an
 * unauthenticated client learns nothing else), then `rate-limit` (per key
 * id, so only after auth: a bad key is never counted; before `route`, so a consumer over its limit
 * is refused whatever it asks, unknown paths included), then `route`, then the
 * checks of one operation. Response phases run in the same order: `upstream-errors` makes every
 * non-2xx the Error shape, then `list-pets` and `response-contract` look at 2xx bodies. `cache` takes no
 * decision (its layer is in src/core/forward), so its place in the list does not matter. The name of
 * each module is its key under `policies:` in a policy file. The list gives the type of that section
 * too (`PolicyConfigs`): a new policy is its folder and one line here.
 */
import type { PolicyEnv, PolicyModule } from '../core/policy.js';
import { auth, gatewaySecrets, upstreamAuthOf } from './auth/index.js';
import { cache } from './cache/index.js';
import { cors } from './cors/index.js';
import { deprecation } from './deprecation/index.js';
import { listPets } from './list-pets/index.js';
import { newPet } from './new-pet/index.js';
import { rateLimit } from './rate-limit/index.js';
import { responseContract } from './response-contract/index.js';
import { route } from './route/index.js';
import { upstreamErrors } from './upstream-errors/index.js';

const MODULES = [cors, auth, rateLimit, route, deprecation, listPets, newPet, upstreamErrors, responseContract, cache] as const;

type OptionsOf<M> = M extends PolicyModule<infer C, string> ? C : never;

/** The `policies:` section of a validated policy file: each policy's options under its name. */
export type PolicyConfigs = { readonly [M in (typeof MODULES)[number] as M['name']]: OptionsOf<M> };

/** The name of a policy module: its key under `policies:` in a policy file. */
export type PolicyName = keyof PolicyConfigs;

/**
 * Any one registered module, its config type tied to its name: narrowing `m.name` narrows the
 * config `m.create` takes, so `config.policies[m.name]` fits it with no cast.
 */
export type AnyPolicyModule = { [K in PolicyName]: PolicyModule<PolicyConfigs[K], K> }[PolicyName];

export const POLICY_MODULES: ReadonlyArray<AnyPolicyModule> = Object.freeze(MODULES);

export { auth, cache, cors, deprecation, listPets, newPet, rateLimit, responseContract, route, upstreamErrors };

/**
 * The environment every policy of a config is created with: `env` plus what policies need to know
 * of each other, compiled once per config load: the secrets the gateway holds in plaintext (masked
 * in relayed and logged upstream text), whose credential the upstream sees, and which proxies are
 * trusted (the brute-force lock charges the client they name).
 *
 * @example
 *   const penv = gatewayPolicyEnv(config, env);
 *   const policies = POLICY_MODULES.map((m) => createPolicy(m, config, penv)); // src/gateway.ts
 *   // penv.secrets!.mask(text) for any upstream text the exchange logs
 */
export function gatewayPolicyEnv(config: { readonly policies: PolicyConfigs; readonly server: { readonly trustedProxies: readonly string[] } }, env: PolicyEnv): PolicyEnv {
  const a = config.policies.auth;
  return { ...env, secrets: gatewaySecrets(a, env), upstreamAuth: upstreamAuthOf(a), trustedProxies: config.server.trustedProxies };
}
