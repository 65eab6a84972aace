/**
 * The listening socket of the standalone gateway, whichever adapter serves it: node:http with the
 * limits of the policy's `server` section, and Error-shape answers for what node's parser refuses.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ServerConfig } from '../config/types.js';
import { ERROR_CONTENT_TYPE, GatewayError, renderError } from '../core/errors.js';

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
  // Bytes after a request whose answer has started on this connection (e.g. one that said
  // Connection: close): no second response (RFC 9112 section 9.6); close once the first is out.
  // (A request still arriving, e.g. too slowly, has a response whose headers are not sent: it gets
  // its 408 below, as node itself would answer.)
  const current = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (current?.headersSent) {
    if (current.writableFinished) socket.destroy();
    else current.once('finish', () => socket.end());
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

/**
 * A node:http server with the policy's limits. node checks its header and request timeouts every
 * connectionsCheckingInterval (30 s by default): every 250 ms here, so a slow client gets its 408
 * near the configured time.
 */
export function createNodeServer(limits: ServerConfig, handler: (req: IncomingMessage, res: ServerResponse) => void): Server {
  const server = createServer(
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
}

export interface NodeServerHandle {
  readonly server: Server;
  /** Stops accepting, waits for in-flight requests, then closes the upstream connections. */
  close(): Promise<void>;
}

/**
 * A standalone server for a node:http request handler (the undici and http-proxy-3 engines): the
 * policy's socket limits, Error-shape answers for parser refusals, and a close that lets
 * in-flight requests finish before `closeUpstream`.
 */
export function serveHandler(
  limits: ServerConfig,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  closeUpstream: () => unknown,
): NodeServerHandle {
  const server = createNodeServer(limits, handler);
  server.on('clientError', clientErrorResponse);
  return {
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => {
          void Promise.resolve(closeUpstream()).finally(resolve);
        });
        server.closeIdleConnections();
      }),
  };
}
