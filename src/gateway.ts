/**
 * The composition root: a validated policy config becomes a running chain of policies, plus what
 * the adapters need to forward (the upstream, the body limit, the built-in backend).
 */
import { ReferenceBackend } from './backend/service.js';
import type { PolicyConfig, UpstreamConfig } from './config/types.js';
import { Chain } from './core/gateway.js';
import type { PolicyEnv } from './core/policy.js';
import { POLICY_MODULES } from './policies/index.js';

export interface Gateway {
  readonly config: PolicyConfig;
  readonly chain: Chain;
  /** Largest request body in bytes (the `new-pet` policy's maxBytes). */
  readonly bodyLimit: number;
  readonly upstream: UpstreamConfig;
  /** For a URL upstream: its origin (`http://host:port`) and base path (`/v1`, no trailing slash). */
  readonly upstreamOrigin: string | undefined;
  readonly upstreamBasePath: string;
  /** The in-process reference backend, when `upstream.url` is `builtin`. */
  readonly backend: ReferenceBackend | undefined;
}

export function createGateway(config: PolicyConfig, env: PolicyEnv, backend?: ReferenceBackend): Gateway {
  const policies = POLICY_MODULES.map((m) => m.create(config.policies[m.name as keyof PolicyConfig['policies']], env));
  const builtin = config.upstream.url === 'builtin';
  const url = builtin ? undefined : new URL(config.upstream.url);
  return {
    config,
    chain: new Chain(policies),
    bodyLimit: config.policies['new-pet'].maxBytes,
    upstream: config.upstream,
    upstreamOrigin: url?.origin,
    upstreamBasePath: url === undefined ? '' : url.pathname.replace(/\/+$/, ''),
    backend: builtin ? (backend ?? new ReferenceBackend()) : undefined,
  };
}

