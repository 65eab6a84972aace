/**
 * The standalone gateway on node:http + http-proxy-3 (`serve --engine http-proxy-3`): the handler
 * on a server with the policy's socket limits, and Error-shape answers for what node's parser
 * refuses, exactly as the other engines have them.
 */
import type { PolicyLog } from '../../core/policy.js';
import { GatewayHolder, type Gateway } from '../../gateway.js';
import { serveHandler, type NodeServerHandle } from '../shared/node-server.js';
import { createPetstoreHandler } from './handler.js';

export type ProxyServerHandle = NodeServerHandle;

export function buildProxyServer(gateway: Gateway | GatewayHolder, options: { log?: PolicyLog } = {}): ProxyServerHandle {
  const holder = gateway instanceof GatewayHolder ? gateway : new GatewayHolder(gateway);
  const petstore = createPetstoreHandler(holder, options);
  return serveHandler(holder, petstore.handler, () => petstore.close());
}
