/**
 * Engine `fastify`: the Fastify front (the plugin) on a server of its own, plus what only a whole
 * server answers (paths outside /v1, malformed URLs), all through the exchange, so authentication
 * still runs first on every path and every answer is in the Error shape.
 */
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { OperatorLog } from '../core/exchange.js';
import type { ExchangeObserver } from '../core/record.js';
import { fromFastifyError, headOf, petstoreGateway } from '../fronts/fastify.js';
import { clientErrorResponse, createNodeServer } from '../fronts/node-server.js';
import { GatewayHolder, type Gateway } from '../gateway.js';

export interface ServerOptions {
  /** A pino logger (the one given to the policies too); none by default. */
  readonly loggerInstance?: FastifyServerOptions['loggerInstance'];
  readonly log?: OperatorLog;
  readonly observer?: ExchangeObserver;
}

export async function buildServer(gateway: Gateway | GatewayHolder, options: ServerOptions = {}): Promise<FastifyInstance> {
  const holder = gateway instanceof GatewayHolder ? gateway : new GatewayHolder(gateway);
  const limits = holder.current.config.server;
  const app = Fastify({
    ...(options.loggerInstance === undefined ? { logger: false } : { loggerInstance: options.loggerInstance }),
    // The access log is the gateway's own (one line per request, written by the exchange).
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
      request.petstoreError = fromFastifyError(err);
      app.petstoreGateway.pipeline.handle(headOf(request), reply.raw, reply);
    },
  });
  const noop = { warn() {}, error() {} };
  await app.register(petstoreGateway, { gateway: holder, log: options.log ?? (options.loggerInstance === undefined ? noop : app.log), observer: options.observer });
  // Any other path: the chain answers it before any body is read (authentication first, then 404).
  app.addHook('onRequest', (request, reply, done) => {
    if (!request.is404) return done();
    request.petstoreDone = done;
    const ar = app.petstoreGateway.pipeline.open(headOf(request), reply.raw, reply);
    request.petstore = ar;
    ar.start();
  });
  app.setNotFoundHandler((request, reply) => {
    app.petstoreGateway.pipeline.handle(headOf(request), reply.raw, reply);
  });
  app.setErrorHandler((err, request, reply) => {
    app.petstoreGateway.pipeline.reject(headOf(request), reply.raw, reply, fromFastifyError(err));
  });
  return app;
}
