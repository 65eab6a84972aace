/**
 * petstore-gateway as a library: the policy core, the policy file loader, the adapters and the
 * reference backend. The CLI (`petstore-gateway`) is built from these same parts.
 */
export { petstoreGateway, type PetstoreGatewayOptions } from './adapters/fastify/plugin.js';
export { buildServer } from './adapters/fastify/server.js';
export { createPetstoreHandler, type PetstoreHandler } from './adapters/http-proxy-3/handler.js';
export { buildProxyServer, type ProxyServerHandle } from './adapters/http-proxy-3/server.js';
export { createUndiciHandler, type UndiciHandler } from './adapters/undici/handler.js';
export { buildUndiciServer } from './adapters/undici/server.js';
export type { NodeServerHandle } from './adapters/shared/node-server.js';
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
