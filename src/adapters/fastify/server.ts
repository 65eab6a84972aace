/**
 * The standalone gateway on Fastify: the plugin on a server of its own, plus the answers that only
 * a whole server gives (paths outside /v1, malformed URLs, unparsable requests), all in the Error
 * shape. Authentication still runs first on every path.
 */
import type { Socket } from 'node:net';
import fp from 'fastify-plugin';
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { ERROR_CONTENT_TYPE, GatewayError, renderError } from '../../core/errors.js';
import type { Gateway } from '../../gateway.js';
import { fromFastifyError, petstoreGateway, runRequestPhase, sendError } from './plugin.js';

export interface ServerOptions {
  /** A pino logger (the one given to the policies too); none by default. */
  readonly loggerInstance?: FastifyServerOptions['loggerInstance'];
}

/**
 * Answers a request node's HTTP parser refused (RFC 9112 framing errors, oversized headers) in the
 * Error shape, then closes the connection: after such an error the stream cannot be trusted.
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

export async function buildServer(gateway: Gateway, options: ServerOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    ...(options.loggerInstance === undefined ? { logger: false } : { loggerInstance: options.loggerInstance }),
    // One line per request costs more than the policies do; errors are logged where they happen.
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
    routerOptions: { caseSensitive: true, ignoreTrailingSlash: false, ignoreDuplicateSlashes: false },
    clientErrorHandler: clientErrorResponse,
    // A URL the router cannot decode: still authentication first, then 400.
    frameworkErrors: (err, request, reply) => {
      if (runRequestPhase(gateway, request, reply)) sendError(reply, request.exchange, fromFastifyError(err));
    },
  });
  // Registered without encapsulation: its hooks, body parser and error handler govern the whole
  // server, so a request to any path is authenticated and answered by the chain (404, 405, ...).
  await app.register(fp(petstoreGateway), { gateway });
  // Reached only if the chain let a request through that no route serves.
  app.setNotFoundHandler((request, reply) => sendError(reply, request.exchange, new GatewayError('not_found')));
  return app;
}
