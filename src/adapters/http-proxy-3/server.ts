/**
 * The standalone gateway on node:http + http-proxy-3 (`serve --engine http-proxy-3`): the handler
 * on a server with the policy's socket limits, and Error-shape answers for what node's parser
 * refuses, exactly as the Fastify engine has them.
 */
import type { Server } from 'node:http';
import type { PolicyLog } from '../../core/policy.js';
import { GatewayHolder, type Gateway } from '../../gateway.js';
import { clientErrorResponse, createNodeServer } from '../shared/node-server.js';
import { createPetstoreHandler } from './handler.js';

export interface ProxyServerHandle {
  readonly server: Server;
  /** Stops accepting, waits for in-flight requests, closes the proxy's upstream connections. */
  close(): Promise<void>;
}

export function buildProxyServer(gateway: Gateway | GatewayHolder, options: { log?: PolicyLog } = {}): ProxyServerHandle {
  const holder = gateway instanceof GatewayHolder ? gateway : new GatewayHolder(gateway);
  const petstore = createPetstoreHandler(holder, options);
  const server = createNodeServer(holder.current.config.server, petstore.handler);
  server.on('clientError', clientErrorResponse);
  return {
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          petstore.close();
          resolve();
        });
        server.closeIdleConnections();
      }),
  };
}
