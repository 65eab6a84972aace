/**
 * http-proxy-3 behind the Upstream port, for teams that run node:http + http-proxy-3. What 1.x
 * needs (and gets here): an `error` callback on every call (it throws otherwise), a keep-alive
 * agent (its default opens a connection per request), the response read by us
 * (`selfHandleResponse`), and a 101 that nobody asked for failed at once (it would hang).
 * http-proxy-3 drives node's own request objects, so the front's native request is the client's
 * ServerResponse (and its `req`).
 */
import { Agent, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Stream } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import type { UpstreamConfig } from '../config/types.js';
import { UpstreamFailure, type FailureKind, type Upstream, type UpstreamHandler, type UpstreamRequest } from '../core/upstream.js';
import { StreamedCall } from './streamed-call.js';

const PROXY_KINDS: ReadonlyMap<string, FailureKind> = new Map();

/**
 * The request body as http-proxy-3 takes it (`options.buffer`): it only calls `.pipe(proxyReq)`,
 * so the whole body (or none) is handed over with `end`, in one write with the head, without a
 * Readable per request (`Readable.from` cost an async iterator and several ticks per call).
 */
function bodySource(body: Buffer | undefined): Stream {
  return {
    pipe<T extends NodeJS.WritableStream>(destination: T): T {
      if (body === undefined) destination.end();
      else destination.end(body);
      return destination;
    },
  } as unknown as Stream;
}

/** One call (and its attempt's node objects). */
class ProxyCall extends StreamedCall {
  proxyReq: ClientRequest | undefined;

  constructor(handler: UpstreamHandler) {
    super(handler, PROXY_KINDS);
  }

  protected override stopRequest(): void {
    this.proxyReq?.destroy();
  }

  readonly onUpgrade = (_res: IncomingMessage, socket: { destroy(): void }): void => {
    socket.destroy();
    this.fail(new UpstreamFailure('invalid_response', new Error('upstream answered 101 without an upgrade')));
  };

  /** Reads the response the proxy hands over (selfHandleResponse). */
  respond(proxyRes: IncomingMessage): void {
    this.feed(proxyRes.statusCode ?? 0, proxyRes.headers, proxyRes);
    proxyRes.once('close', () => {
      if (!proxyRes.complete) this.fail(new UpstreamFailure('reset', new Error('upstream closed the body early')));
    });
  }
}

export function httpProxy3Upstream(origin: string, config: UpstreamConfig, onProxyError?: (err: Error) => void): Upstream {
  const agent = new Agent({ keepAlive: true, maxSockets: config.connections });
  // No proxyTimeout: the exchange's deadlines are the timeouts (and abort the call); a socket idle
  // timeout here would also fire while the exchange holds the body back for a slow client.
  const proxy = createProxyServer({ agent, selfHandleResponse: true, ignorePath: true, changeOrigin: true });
  // A listener for every error the proxy may emit outside a call's own callback.
  proxy.on('error', (err) => onProxyError?.(err));
  // One listener per event, dispatching to the call of each request (not one listener per call).
  const calls = new WeakMap<IncomingMessage, ProxyCall>();
  // The target as http-proxy-3 reads it (protocol, host, hostname, port, pathname, search, href),
  // the origin parsed once: a URL parse per request cost about 1 µs.
  const base = new URL(origin);
  const targetOf = (request: UpstreamRequest) => {
    const { path, pathname, query } = request;
    return {
      protocol: base.protocol,
      host: base.host,
      hostname: base.hostname,
      port: base.port,
      pathname,
      search: query === '' ? '' : `?${query}`,
      href: origin + path,
    };
  };
  proxy.on('proxyReq', (proxyReq, req) => {
    const call = calls.get(req);
    if (call === undefined) return;
    call.proxyReq = proxyReq;
    proxyReq.once('upgrade', call.onUpgrade);
    if (call.stopped) proxyReq.destroy();
  });
  proxy.on('proxyRes', (proxyRes, req) => {
    const call = calls.get(req);
    if (call === undefined) return void proxyRes.destroy();
    calls.delete(req);
    call.respond(proxyRes);
  });

  return {
    name: 'http-proxy-3',
    conforms: false,
    send(request: UpstreamRequest, handler: UpstreamHandler): void {
      const res = request.native as ServerResponse;
      const req = res.req;
      // http-proxy-3 copies req.headers (and req.method) into the upstream request.
      req.headers = request.headers;
      const call = new ProxyCall(handler);
      calls.set(req, call);
      handler.onStart(call);
      if (call.stopped) return;
      proxy.web(req, res, { target: targetOf(request) as unknown as URL, buffer: bodySource(request.body) }, (err) => {
        calls.delete(req);
        call.fail(err);
      });
    },
    close: async () => {
      proxy.close();
      agent.destroy();
    },
  };
}
