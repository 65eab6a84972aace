/**
 * The listening socket of the standalone gateway, whichever engine serves it: node:http with the
 * limits of the policy's `server` section, and Error-shape answers for what node's parser refuses.
 */
import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { addressShare, type ListenerConfig } from './config.js';
import { ERROR_CONTENT_TYPE, GatewayError, renderError } from '../core/errors.js';
import { hostFieldCount } from '../core/headers.js';
import { markAwaitingContinue } from './body.js';
import { boundInFlight, PIPELINE_OVERFLOW, shareConnections } from './connections.js';
import { attachListenerTls, ListenerTls } from '../tls/listener.js';
import { admitStream } from '../tls/h2-streams.js';
import { secureServer } from '../tls/server.js';

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
  socket.end(rawErrorResponse(error));
}

/** The raw bytes of an Error response that closes the connection (for a socket node has let go of). */
function rawErrorResponse(error: GatewayError): string {
  const body = renderError(error);
  return (
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? 'Error'}\r\ncontent-type: ${ERROR_CONTENT_TYPE}\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
  );
}

/**
 * Answers `res` with an Error and closes the connection once it is sent (HTTP/1.x; over HTTP/2
 * the stream ends with the answer: a Connection field is not allowed there, RFC 9113 section 8.2.2).
 */
function answerAndClose(res: ServerResponse, error: GatewayError): void {
  const body = renderError(error);
  const headers: Record<string, string | number> = { 'content-type': ERROR_CONTENT_TYPE, 'content-length': Buffer.byteLength(body) };
  if (res.req.httpVersionMajor !== 2) {
    res.shouldKeepAlive = false;
    headers.connection = 'close';
  }
  res.writeHead(error.status, headers);
  res.end(body);
}

/** True when a `Connection` field value lists the `upgrade` option (RFC 9110 section 7.6.1). */
function connectionListsUpgrade(value: string | undefined): boolean {
  return value?.split(',').some((o) => o.trim().toLowerCase() === 'upgrade') === true;
}

/**
 * What must be refused before any policy sees the request, or undefined.
 * RFC 9112 section 3.2: a server MUST answer 400 to an HTTP/1.1 request without Host, and to any
 * request with more than one Host field. node joins nothing for Host (it keeps the first), so the
 * raw header list is counted.
 */
export function hostProblem(req: IncomingMessage): GatewayError | undefined {
  const hosts = hostFieldCount(req.rawHeaders);
  if (hosts > 1) return new GatewayError('invalid_request', { message: 'The request has more than one Host header (RFC 9112 section 3.2).' });
  if (hosts === 0 && req.httpVersionMajor === 1 && req.httpVersionMinor === 1) {
    return new GatewayError('invalid_request', { message: 'An HTTP/1.1 request must carry a Host header (RFC 9112 section 3.2).' });
  }
  return undefined;
}

/** An authority (host[:port]) as compared: lower case, without the port https implies (RFC 3986 section 6.2). */
function normalAuthority(value: string): string {
  const v = value.toLowerCase();
  return v.endsWith(':443') ? v.slice(0, -4) : v;
}

/**
 * HTTP/2 names the host in `:authority` (RFC 9113 section 8.3.1), which becomes the request's
 * Host here. A request that also carries a Host field naming another authority is malformed
 * ("SHOULD treat as malformed"): refused, or a client could have the upstream told one host
 * (X-Forwarded-Host) while the connection was made for another.
 */
function authorityProblem(req: IncomingMessage): GatewayError | undefined {
  const authority = req.headers[':authority'] as string | undefined;
  const host = req.headers.host;
  if (host === undefined) {
    req.headers.host = authority;
    return undefined;
  }
  if (authority === undefined || normalAuthority(host) === normalAuthority(authority)) return undefined;
  return new GatewayError('invalid_request', { message: 'The Host field names another authority than :authority (RFC 9113 section 8.3.1).' });
}

/**
 * A node:http server with the policy's limits. node checks its header and request timeouts every
 * connectionsCheckingInterval (30 s by default): every 250 ms here, so a slow client gets its 408
 * near the configured time.
 *
 * Connection accounting (src/fronts/connections.ts): at most `maxInFlightPerConnection` requests
 * of a connection served at once (pipelined ones wait, the socket unread), a connection with more
 * than `maxPipelinedPerConnection` waiting is closed (the server emits PIPELINE_OVERFLOW with its
 * socket) and its address refused for `pipelineOverflowRefuseMs`, and at most `addressShare(limits)`
 * connections per client (`maxConnectionsPerAddress`, by default a quarter of `maxConnections`).
 *
 * node's own answers are replaced by Error-shape ones, the same for every engine (Fastify's
 * serverFactory uses this function too), before the engine's handler runs:
 * - HTTP/1.1 without Host, or two Host fields: 400 invalid_request, then close (node's
 *   `requireHostHeader` would send an empty 400, and it accepts a second Host).
 * - `Expect: 100-continue`: no `100 Continue` on receipt of the head, only once the request phase
 *   passed and the body will be read (src/fronts/body.ts).
 * - `Expect` other than 100-continue: 417 expectation_failed, then close. The client may be
 *   holding its body back until a 100 that never comes, or may send it anyway: the next bytes on
 *   the connection cannot be framed with confidence (RFC 9110 section 10.1.1).
 * - CONNECT: 501 not_implemented, then close. The gateway tunnels nothing; 501 is the status for
 *   a method the server supports for no resource (RFC 9110 section 15.6.2), where 405 would be
 *   about one resource and would need an Allow list for a target (host:port) that is not ours.
 *   Without a `connect` listener node destroys the socket without a word.
 * - An upgrade request (Upgrade plus `Connection: upgrade`, e.g. websocket or h2c): the gateway
 *   switches no protocol, so the Upgrade field is ignored (RFC 9110 section 7.8 allows it) and the
 *   request is answered as any other, by the policies. node's parser stops reading the connection
 *   after such a request, so a request pipelined after it would never be read: the answer carries
 *   `Connection: close` and the connection is closed after it, which tells the client that the
 *   pipelined request was not processed and may be retried (RFC 9112 section 9.3.2) instead of
 *   leaving it waiting.
 */
export function createNodeServer(limits: ListenerConfig, handler: (req: IncomingMessage, res: ServerResponse) => void): Server {
  const hsts = limits.tls === null ? undefined : hstsValue(limits);
  const serve = (req: IncomingMessage, res: ServerResponse) => {
    const problem = req.httpVersionMajor === 2 ? authorityProblem(req) ?? hostProblem(req) : hostProblem(req);
    if (hsts !== undefined) res.setHeader('strict-transport-security', hsts);
    if (problem !== undefined) return answerAndClose(res, problem);
    if (req.headers.upgrade !== undefined && connectionListsUpgrade(req.headers.connection)) res.shouldKeepAlive = false;
    handler(req, res);
  };
  // HTTP/1.1 pipelining has no bound of its own: the gate paces it per connection. An HTTP/2
  // session bounds its streams itself (SETTINGS_MAX_CONCURRENT_STREAMS, src/tls/server.ts), and its
  // streams share one socket that the gate must not pause.
  const gated = boundInFlight(limits.maxInFlightPerConnection, serve, limits.maxPipelinedPerConnection, (socket) => {
    share.refuse(socket.remoteAddress);
    server.emit(PIPELINE_OVERFLOW, socket);
  });
  // An HTTP/2 stream of a session whose client leaves too many answers unread is refused before
  // anything is made for it (src/tls/h2-streams.ts).
  const entry = (req: IncomingMessage, res: ServerResponse) => {
    if (req.httpVersionMajor !== 2) return gated(req, res);
    if (admitStream(req)) serve(req, res);
  };
  const server: Server = createListener(limits, entry);
  // With a listener, node does not send `100 Continue` by itself on receipt of the head: the front
  // sends it once the request phase passed (src/fronts/body.ts), so an unauthenticated client is
  // never invited to send its body.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    markAwaitingContinue(req);
    entry(req, res);
  });
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    const problem = hostProblem(req);
    answerAndClose(res, problem ?? new GatewayError('expectation_failed'));
  });
  server.on('connect', (req: IncomingMessage, socket: Socket | ServerResponse) => {
    const error = new GatewayError('not_implemented', { message: 'The gateway does not tunnel: CONNECT is not implemented.' });
    // Over HTTP/2 a CONNECT is a stream with a response object (RFC 9113 section 8.5), not a socket.
    if (req.httpVersionMajor === 2) return answerAndClose(socket as ServerResponse, error);
    socket.on('error', () => socket.destroy());
    (socket as Socket).end(rawErrorResponse(error));
  });
  server.maxConnections = limits.maxConnections;
  const share = shareConnections(server, addressShare(limits), limits.trustedProxies, limits.pipelineOverflowRefuseMs);
  return server;
}

/** The Strict-Transport-Security value of `server.hsts` (RFC 6797 section 6.1), if any. */
function hstsValue(limits: ListenerConfig): string | undefined {
  const h = limits.hsts;
  return h === null ? undefined : `max-age=${h.maxAgeSeconds}${h.includeSubDomains ? '; includeSubDomains' : ''}`;
}

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * The listening server: node:http, or with `server.tls` node:https (HTTP/1.1 only) or node:http2
 * with HTTP/1.1 on the same port through ALPN (`server.http2`, the default). The TLS servers are
 * typed as node:http's Server: they emit the same events (request, checkExpectation, connect,
 * clientError) with request and response objects that have what the fronts use (the http2
 * compatibility API), and the missing connection methods are added in `secureServer`.
 */
function createListener(limits: ListenerConfig, listener: RequestListener): Server {
  const http = {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    maxHeaderSize: limits.maxHeaderBytes,
    connectionsCheckingInterval: 250,
    // Checked in createNodeServer, to answer in the Error shape.
    requireHostHeader: false,
  };
  if (limits.tls === null) return createServer(http, listener);
  const opened = ListenerTls.open(limits.tls);
  if (!opened.ok) throw new Error(`server.tls: ${opened.problem}`);
  const tls = opened.value;
  const server = secureServer(limits, { ...http, ...tls.options(), handshakeTimeout: limits.headersTimeoutMs }, listener);
  attachListenerTls(server, tls);
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
  limits: ListenerConfig,
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
