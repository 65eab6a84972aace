/**
 * The TLS listening server: node:http2 with HTTP/1.1 on the same port (ALPN), or node:https alone.
 * HTTP/2's limits are set here, against a client that opens streams faster than it lets them
 * finish or floods the connection with frames.
 */
import { Server as HttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createSecureServer, type SecureServerOptions } from 'node:http2';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { watchSessions } from './h2-streams.js';

type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

/** What the TLS server reads of the listener's options (`server:`, src/fronts/config.ts's ListenerConfig fits it). */
export interface SecureServerLimits {
  readonly http2: boolean;
  readonly maxHeaderBytes: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly streamStallTimeoutMs: number;
}

/**
 * Streams one HTTP/2 connection may have open at once (RFC 9113 section 5.1.2). Each stream is
 * one upstream call at most; 100 is the value RFC 9113 section 6.5.2 recommends as a floor and
 * what nginx and Envoy advertise.
 */
const MAX_CONCURRENT_STREAMS = 100;

/**
 * HTTP/2 limits. What a hostile client can do and what stops it:
 * - Rapid reset (CVE-2023-44487): opening and resetting streams at once never lets them count
 *   against `maxConcurrentStreams`. Node 20.8.1 and later carry nghttp2 1.57, which rate-limits
 *   stream resets per connection and answers a flood with GOAWAY; node also closes a session once
 *   `maxSessionRejectedStreams` of its streams were refused for going over the limit. The
 *   gateway's own bound, the same on every node, is in h2-streams.ts.
 * - A client that does not read its answers (flow-control window kept shut) or keeps its streams
 *   open after them: h2-streams.ts bounds how many of a session's streams may wait on their
 *   client and for how long (`server.streamStallTimeoutMs`).
 * - CONTINUATION flood (CVE-2024-27983 and nghttp2's CVE-2024-28182): node 20.12.1 and later carry
 *   nghttp2 1.61, which caps the CONTINUATION frames of one header block; `maxHeaderListSize`
 *   bounds the decoded size, `maxHeaderListPairs` the number of fields.
 * - Frames that are invalid or that the server must answer (PING, SETTINGS) without limit:
 *   `maxSessionInvalidFrames`, `maxOutstandingPings`, and `maxSessionMemory` for what one session
 *   may hold (its header tables and queued output).
 * - Flow control: the windows stay at the protocol's 65,535 bytes (RFC 9113 section 6.9.2), so a
 *   client cannot make the gateway buffer more than that per stream; the body limit of the
 *   policy applies as over HTTP/1.1.
 */
function http2Options(limits: SecureServerLimits): SecureServerOptions {
  return {
    allowHTTP1: true,
    settings: {
      maxConcurrentStreams: MAX_CONCURRENT_STREAMS,
      maxHeaderListSize: limits.maxHeaderBytes,
      initialWindowSize: 65_535,
      enablePush: false,
      enableConnectProtocol: false,
    },
    maxHeaderListPairs: 256,
    maxSessionRejectedStreams: 100,
    maxSessionInvalidFrames: 100,
    maxOutstandingPings: 10,
    maxSessionMemory: 10,
    // A client that connects and never speaks HTTP/2 or HTTP/1.1 after ALPN is dropped.
    unknownProtocolTimeout: limits.headersTimeoutMs,
  };
}

/**
 * The HTTP/1.1 settings of node:http that the http2 server's HTTP/1.1 side reads from the server
 * object (node's createSecureServer does not take them as options).
 */
function applyHttp1Settings(server: object, http: Record<string, unknown>): void {
  for (const name of ['headersTimeout', 'requestTimeout', 'keepAliveTimeout', 'maxHeaderSize', 'connectionsCheckingInterval', 'requireHostHeader']) {
    (server as Record<string, unknown>)[name] = http[name];
  }
}

/**
 * A TLS server for `listener`. `options` holds the secure context and node:http's settings.
 * A TLS handshake that fails (plain HTTP sent to this port, a client certificate refused) closes
 * the socket without a byte: node's http2 server would hand it to `clientError`, whose answer is
 * an HTTP response in clear text, something a client could take for the API's.
 */
export function secureServer(limits: SecureServerLimits, options: Record<string, unknown>, listener: RequestListener): Server {
  let server: Server;
  if (limits.http2) {
    const h2 = createSecureServer({ ...options, ...http2Options(limits) }, listener as never);
    applyHttp1Settings(h2, options);
    // An idle HTTP/2 session closes after requestTimeoutMs: its streams are bounded by the
    // upstream deadlines, which are shorter by default.
    h2.setTimeout(Math.max(limits.requestTimeoutMs, limits.keepAliveTimeoutMs));
    // The compatibility API's events and objects are those the fronts use (see createListener).
    server = h2 as unknown as Server;
    // node:http2's server lacks closeAllConnections: node:http's, for its HTTP/1.1 connections;
    // watchSessions adds its sessions to both shutdown methods.
    server.closeAllConnections = HttpServer.prototype.closeAllConnections.bind(server);
    watchSessions(server, limits.streamStallTimeoutMs, limits.requestTimeoutMs);
  } else {
    // node:https is node:http's Server over TLS: the same settings and methods.
    server = createHttpsServer(options, listener) as unknown as Server;
  }
  server.removeAllListeners('tlsClientError');
  server.on('tlsClientError', (_err: Error, socket: Socket) => socket.destroy());
  return server;
}
