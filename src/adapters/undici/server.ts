/**
 * The standalone gateway on node:http + undici (`serve`, engine `undici`, the default): the handler
 * on a server with the policy's socket limits, and Error-shape answers for what node's parser
 * refuses, as the other engines have them.
 */
import type { PolicyLog } from '../../core/policy.js';
import { GatewayHolder, type Gateway } from '../../gateway.js';
import { serveHandler, type NodeServerHandle } from '../shared/node-server.js';
import { createUndiciHandler } from './handler.js';

export function buildUndiciServer(gateway: Gateway | GatewayHolder, options: { log?: PolicyLog } = {}): NodeServerHandle {
  const holder = gateway instanceof GatewayHolder ? gateway : new GatewayHolder(gateway);
  const petstore = createUndiciHandler(holder, options);
  return serveHandler(holder, petstore.handler, () => petstore.close());
}
