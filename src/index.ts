/**
 * petstore-gateway as a library. `createGateway(config, env)` compiles a policy file once and
 * returns the gateway, served by `gateway.nodeHandler()`, `gateway.listen()` or
 * `gateway.fastifyPlugin`; the loader, the error catalogue, the policy contract and the reference
 * backend are here too. The CLI (`petstore-gateway`) is built from these same parts.
 */
import { petstoreGateway as fastifyPluginOf, type PetstoreGatewayOptions as FastifyPluginOptions } from './fronts/fastify.js';
import type { NodeServerHandle } from './fronts/node-server.js';
import { buildServer as buildFastifyServer } from './engines/fastify.js';
import { buildProxyServer as buildHttpProxy3Server, createPetstoreHandler as httpProxy3Handler } from './engines/http-proxy-3.js';
import type { NodeEngine } from './engines/node.js';
import { buildUndiciServer as buildUndiciNodeServer, createUndiciHandler as undiciHandler } from './engines/undici.js';

export {
  createGateway,
  PetstoreGateway,
  type EngineName,
  type GatewayFastifyPlugin,
  type GatewayServer,
  type ListenOptions,
  type NodeHandlerOptions,
  type NodeUpstream,
} from './engines/index.js';
export type { EngineOptions, NodeEngine } from './engines/node.js';
export type { NodeServerHandle } from './fronts/node-server.js';
export type { Upstream, UpstreamHandler, UpstreamRequest, FailureKind } from './core/upstream.js';
export type { ExchangeObserver, ExchangeRecord } from './core/record.js';
export { declaredValues, slot, type Declarations, type LogField, type RecordFacts, type Slot } from './core/facts.js';
export { ReferenceBackend } from './backend/service.js';
export { createBackendServer } from './backend/server.js';
export { formatProblems, loadPolicyFile, parsePolicy, type LoadResult, type Overrides } from './config/load.js';
export { policyFileSchema } from './config/schema.js';
export type { PolicyConfig } from './config/types.js';
export { CATALOGUE, GatewayError, renderError, type ErrorCode } from './core/errors.js';
export type { Exchange, Policy, PolicyEnv, PolicyModule, Problem, RequestHead } from './core/policy.js';
export { compileGateway, GatewayHolder, type Gateway } from './gateway.js';
export { hashKey, newKey } from './policies/auth/index.js';
export { POLICY_MODULES } from './policies/index.js';

// The names before `createGateway` served its gateway itself; each does what it did. Kept for one
// release (see CHANGELOG.md), then removed.

/** @deprecated Use `gateway.fastifyPlugin` (`app.register(gateway.fastifyPlugin, { log })`). */
export const petstoreGateway = fastifyPluginOf;
/** @deprecated The options of the deprecated `petstoreGateway` plugin. */
export type PetstoreGatewayOptions = FastifyPluginOptions;
/** @deprecated Use `gateway.listen({ engine: 'fastify' })`. */
export const buildServer = buildFastifyServer;
/** @deprecated Use `gateway.listen({ engine: 'http-proxy-3' })`. */
export const buildProxyServer = buildHttpProxy3Server;
/** @deprecated Use `gateway.nodeHandler({ upstream: 'http-proxy-3' })`. */
export const createPetstoreHandler = httpProxy3Handler;
/** @deprecated Use `gateway.listen()` (undici is the default engine). */
export const buildUndiciServer = buildUndiciNodeServer;
/** @deprecated Use `gateway.nodeHandler()` (undici is the default upstream). */
export const createUndiciHandler = undiciHandler;
/** @deprecated Use `NodeEngine`. */
export type PetstoreHandler = NodeEngine;
/** @deprecated Use `NodeEngine`. */
export type UndiciHandler = NodeEngine;
/** @deprecated Use `GatewayServer` (what `gateway.listen()` returns) or `NodeServerHandle`. */
export type ProxyServerHandle = NodeServerHandle;
