/**
 * Engine `undici`, the standalone default: node:http for clients, an undici Pool for the upstream.
 *
 * @example
 *   import { createServer } from 'node:http';
 *   import { createGateway, createUndiciHandler, loadPolicyFile } from 'petstore-gateway';
 *   const env = { env: process.env };
 *   const loaded = loadPolicyFile('policies/default.yaml', env);
 *   if (!loaded.ok) throw new Error('bad policy');
 *   const { handler } = createUndiciHandler(createGateway(loaded.config, env), { log: console });
 *   createServer(handler).listen(8080);
 */
import type { NodeServerHandle } from '../fronts/node-server.js';
import type { Gateway, GatewayHolder } from '../gateway.js';
import { undiciUpstream } from '../upstreams/undici.js';
import { nodeEngine, serveNodeEngine, type EngineOptions, type NodeEngine } from './node.js';

export type UndiciHandler = NodeEngine;

export function createUndiciHandler(gateway: Gateway | GatewayHolder, options: EngineOptions = {}): UndiciHandler {
  return nodeEngine(gateway, (origin, gw) => undiciUpstream(origin, gw.upstream), options);
}

export function buildUndiciServer(gateway: Gateway | GatewayHolder, options: EngineOptions = {}): NodeServerHandle {
  return serveNodeEngine(nodeEngine(gateway, (origin, gw) => undiciUpstream(origin, gw.upstream), options));
}
