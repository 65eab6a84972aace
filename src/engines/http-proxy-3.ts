/**
 * Engine `http-proxy-3`: node:http for clients, http-proxy-3 for the upstream, for teams that run
 * that stack.
 *
 * @example
 *   import { createServer } from 'node:http';
 *   import { createGateway, createPetstoreHandler, loadPolicyFile } from 'petstore-gateway';
 *   const env = { env: process.env };
 *   const loaded = loadPolicyFile('policies/default.yaml', env);
 *   if (!loaded.ok) throw new Error('bad policy');
 *   const { handler } = createPetstoreHandler(createGateway(loaded.config, env), { log: console });
 *   createServer(handler).listen(8080);
 */
import type { NodeServerHandle } from '../fronts/node-server.js';
import type { Gateway, GatewayHolder } from '../gateway.js';
import { httpProxy3Upstream } from '../upstreams/http-proxy-3.js';
import { nodeEngine, serveNodeEngine, type EngineOptions, type NodeEngine } from './node.js';

export type PetstoreHandler = NodeEngine;
export type ProxyServerHandle = NodeServerHandle;

function engine(gateway: Gateway | GatewayHolder, options: EngineOptions) {
  return nodeEngine(gateway, (origin, gw) => httpProxy3Upstream(origin, gw.upstream, (err) => options.log?.warn({ cause: err.message }, 'proxy error')), options);
}

export function createPetstoreHandler(gateway: Gateway | GatewayHolder, options: EngineOptions = {}): PetstoreHandler {
  return engine(gateway, options);
}

export function buildProxyServer(gateway: Gateway | GatewayHolder, options: EngineOptions = {}): ProxyServerHandle {
  return serveNodeEngine(engine(gateway, options));
}
