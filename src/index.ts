/**
 * petstore-gateway as a library: the policy core, the policy file loader, the engines (a front, the
 * exchange and an upstream transport, composed) and the reference backend. The CLI (`petstore-gateway`) is built from these same parts.
 */
export { petstoreGateway, type PetstoreGatewayOptions } from './fronts/fastify.js';
export { buildServer } from './engines/fastify.js';
export { buildProxyServer, createPetstoreHandler, type PetstoreHandler, type ProxyServerHandle } from './engines/http-proxy-3.js';
export { buildUndiciServer, createUndiciHandler, type UndiciHandler } from './engines/undici.js';
export type { NodeServerHandle } from './fronts/node-server.js';
export type { Upstream, UpstreamHandler, UpstreamRequest, FailureKind } from './core/upstream.js';
export type { ExchangeObserver, ExchangeRecord } from './core/record.js';
export { ReferenceBackend } from './backend/service.js';
export { createBackendServer } from './backend/server.js';
export { formatProblems, loadPolicyFile, parsePolicy, type LoadResult, type Overrides } from './config/load.js';
export { policyFileSchema } from './config/schema.js';
export type { PolicyConfig } from './config/types.js';
export { CATALOGUE, GatewayError, renderError, type ErrorCode } from './core/errors.js';
export type { Exchange, Policy, PolicyEnv, PolicyModule, Problem, RequestHead } from './core/policy.js';
export { createGateway, GatewayHolder, type Gateway } from './gateway.js';
export { hashKey, newKey } from './policies/auth/index.js';
export { POLICY_MODULES } from './policies/index.js';
