/**
 * The standalone gateway on Fastify: the plugin on a server of its own, plus the answers that only
 * a whole server gives (paths outside /v1, malformed URLs, unparsable requests), all in the Error
 * shape, and the socket limits of the policy's `server` section. Authentication still runs first
 * on every path.
 */
import fp from 'fastify-plugin';
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { GatewayError } from '../../core/errors.js';
import { GatewayHolder, type Gateway } from '../../gateway.js';
import { clientErrorResponse, createNodeServer } from '../shared/node-server.js';
import { fromFastifyError, petstoreGateway, runRequestPhase, sendError } from './plugin.js';

export interface ServerOptions {
  /** A pino logger (the one given to the policies too); none by default. */
  readonly loggerInstance?: FastifyServerOptions['loggerInstance'];
}

export async function buildServer(gateway: Gateway | GatewayHolder, options: ServerOptions = {}): Promise<FastifyInstance> {
  const holder = gateway instanceof GatewayHolder ? gateway : new GatewayHolder(gateway);
  const limits = holder.current.config.server;
  const app = Fastify({
    ...(options.loggerInstance === undefined ? { logger: false } : { loggerInstance: options.loggerInstance }),
    // One line per request costs more than the policies do; errors are logged where they happen.
    logController: new LogController({ disableRequestLogging: true }),
    // While closing, requests on open connections are still served (and told Connection: close).
    return503OnClosing: false,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    routerOptions: { caseSensitive: true, ignoreTrailingSlash: false, ignoreDuplicateSlashes: false },
    serverFactory: (handler) => createNodeServer(limits, handler),
    clientErrorHandler: clientErrorResponse,
    // A URL the router cannot decode: still authentication first, then 400.
    frameworkErrors: (err, request, reply) => {
      if (runRequestPhase(holder, request, reply)) sendError(reply, request.exchange, fromFastifyError(err));
    },
  });
  // Registered without encapsulation: its hooks, body parser and error handler govern the whole
  // server, so a request to any path is authenticated and answered by the chain (404, 405, ...).
  await app.register(fp(petstoreGateway), { gateway: holder });
  // Reached only if the chain let a request through that no route serves.
  app.setNotFoundHandler((request, reply) => sendError(reply, request.exchange, new GatewayError('not_found')));
  return app;
}
