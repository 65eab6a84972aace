/**
 * The standalone gateway on Fastify: the plugin on a server of its own, plus the answers that only
 * a whole server gives (paths outside /v1, malformed URLs, unparsable requests), all in the Error
 * shape, and the socket limits of the policy's `server` section. Authentication still runs first
 * on every path.
 */
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import fp from 'fastify-plugin';
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { ERROR_CONTENT_TYPE, GatewayError, renderError } from '../../core/errors.js';
import { GatewayHolder, type Gateway } from '../../gateway.js';
import { fromFastifyError, petstoreGateway, runRequestPhase, sendError } from './plugin.js';

export interface ServerOptions {
  /** A pino logger (the one given to the policies too); none by default. */
  readonly loggerInstance?: FastifyServerOptions['loggerInstance'];
}

/**
 * Answers a request node's HTTP parser refused (RFC 9112 framing errors such as conflicting
 * Content-Length and Transfer-Encoding, oversized headers, a client too slow to send its request)
 * in the Error shape, then closes the connection: after such an error the stream cannot be trusted.
 */
export function clientErrorResponse(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const error =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? new GatewayError('headers_too_large')
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? new GatewayError('request_timeout')
        : new GatewayError('invalid_request');
  const body = renderError(error);
  socket.end(
    `HTTP/1.1 ${error.status} ${error.code.replace(/_/g, ' ')}\r\ncontent-type: ${ERROR_CONTENT_TYPE}\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

export async function buildServer(gateway: Gateway | GatewayHolder, options: ServerOptions = {}): Promise<FastifyInstance> {
  const holder = gateway instanceof GatewayHolder ? gateway : new GatewayHolder(gateway);
  const limits = holder.current.config.server;
  const app = Fastify({
    ...(options.loggerInstance === undefined ? { logger: false } : { loggerInstance: options.loggerInstance }),
    // One line per request costs more than the policies do; errors are logged where they happen.
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    routerOptions: { caseSensitive: true, ignoreTrailingSlash: false, ignoreDuplicateSlashes: false },
    // node checks its request and header timeouts every connectionsCheckingInterval (30 s by
    // default): check every 250 ms so a slow client gets its 408 near the configured time.
    serverFactory: (handler) => {
      const server: Server = createServer(
        {
          headersTimeout: limits.headersTimeoutMs,
          requestTimeout: limits.requestTimeoutMs,
          keepAliveTimeout: limits.keepAliveTimeoutMs,
          maxHeaderSize: limits.maxHeaderBytes,
          connectionsCheckingInterval: 250,
        },
        handler,
      );
      server.maxConnections = limits.maxConnections;
      return server;
    },
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
