/**
 * http-proxy-3 behind the Upstream port, for teams that run node:http + http-proxy-3. What 1.x
 * needs (and gets here): an `error` callback on every call (it throws otherwise), a keep-alive
 * agent (its default opens a connection per request), the response read by us
 * (`selfHandleResponse`), and a 101 that nobody asked for failed at once (it would hang).
 * http-proxy-3 drives node's own request objects, so the front's native request is the client's
 * ServerResponse (and its `req`): the request's `url` and `headers` are replaced by what the
 * upstream gets (the exchange's path and header set) before the call.
 */
import { Agent, type ClientRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { upstreamTlsOrThrow } from '../tls/upstream.js';
import type { Socket } from 'node:net';
import { Stream } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import type { UpstreamConfig } from './config.js';
import { UpstreamFailure, type FailureKind, type Upstream, type UpstreamHandler, type UpstreamRequest } from '../core/upstream.js';
import { StreamedCall, callOfBody } from './streamed-call.js';

const PROXY_KINDS: ReadonlyMap<string, FailureKind> = new Map();

/**
 * The request body as http-proxy-3 takes it (its `buffer` option, a Stream it calls `.pipe(proxyReq)`
 * on): the whole body (or none) handed over with `end`, in one write with the head.
 * Not a Readable per request (`Readable.from`): that costs over 3% of a route's req/s (docs/choices.md, "Libraries").
 */
class BodySource extends Stream {
  constructor(private readonly body: Buffer | undefined) {
    super();
  }

  override pipe<T extends NodeJS.WritableStream>(destination: T): T {
    if (this.body === undefined) destination.end();
    else destination.end(this.body);
    return destination;
  }
}

/** Where the client's request and the upstream request keep their call: no map, no closures per call. */
const CALL = Symbol('petstore-gateway http-proxy-3 call');
type WithCall = { [CALL]?: ProxyCall | undefined };

/** One call (and its attempt's node objects). */
class ProxyCall extends StreamedCall {
  proxyReq: ClientRequest | undefined;

  constructor(handler: UpstreamHandler) {
    super(handler, PROXY_KINDS);
  }

  protected override stopRequest(): void {
    this.proxyReq?.destroy();
  }

  /** Reads the response the proxy hands over (selfHandleResponse). */
  respond(proxyRes: IncomingMessage): void {
    this.feed(proxyRes.statusCode ?? 0, proxyRes.headers, proxyRes);
    // Fed (not stopped by the head): the body knows its call, and a close before its end is a reset.
    if (!this.stopped) proxyRes.on('close', onProxyResClose);
  }
}

function onProxyResClose(this: IncomingMessage): void {
  if (!this.complete) callOfBody(this).fail(new UpstreamFailure('reset', new Error('upstream closed the body early')));
}

/**
 * node's client reads an interim answer and goes on to the final one; undici refuses a 100
 * Continue that was not asked for (the gateway never sends Expect) and drops the connection. The
 * engines must agree: an unsolicited 100 is an invalid answer, and the
 * connection it came on is destroyed, never reused. Other 1xx (102, 103) are ignored by both.
 */
function onInformation(this: ClientRequest & WithCall, info: { statusCode: number }): void {
  if (info.statusCode !== 100) return;
  this[CALL]?.fail(new UpstreamFailure('invalid_response', new Error('upstream sent 100 Continue unasked')));
  this.destroy();
}

/**
 * Bytes on a pooled connection that no request is waiting on are an answer to nothing: the
 * upstream sent more than one answer for one request. node's agent would keep the connection, so
 * the next consumer's request could be answered by that stray answer; it is destroyed instead,
 * as undici does ("bad response"). A listener per free socket, which removes
 * itself at the first bytes of a request's answer once the socket is in use again.
 */
function watchIdle(agent: Agent): (socket: Socket) => void {
  const isFree = (socket: Socket) => Object.values(agent.freeSockets).some((list) => list?.includes(socket) === true);
  function onIdleData(this: Socket): void {
    if (isFree(this)) this.destroy();
    else this.removeListener('data', onIdleData);
  }
  return (socket) => {
    if (!socket.destroyed && socket.listeners('data').includes(onIdleData) === false) socket.on('data', onIdleData);
  };
}

function onUpgrade(this: ClientRequest & WithCall, _res: IncomingMessage, socket: { destroy(): void }): void {
  socket.destroy();
  this[CALL]?.fail(new UpstreamFailure('invalid_response', new Error('upstream answered 101 without an upgrade')));
}

/**
 * http-proxy-3's callback for a failed call (before the response: after it, the response's own
 * `error` and `close` tell the call).
 */
function onWebError(err: Error, req: IncomingMessage & WithCall): void {
  const call = req[CALL];
  req[CALL] = undefined;
  call?.fail(err);
}

export function httpProxy3Upstream(origin: string, config: UpstreamConfig, onProxyError?: (err: Error) => void): Upstream {
  // An https:// upstream gets a TLS agent with `upstream.tls` (verification on), same pool size.
  const tls = upstreamTlsOrThrow(config);
  const agent = tls === undefined ? new Agent({ keepAlive: true, maxSockets: config.connections }) : new HttpsAgent({ keepAlive: true, maxSockets: config.connections, ...tls });
  // Registered after the agent's own 'free' listener: a socket the agent keeps is watched until reused.
  agent.on('free', watchIdle(agent));
  // The origin parsed once, as http-proxy-3 reads a target (protocol, host, hostname, port, href).
  // The port as a number, as http-proxy-3's target type has it (a URL's is empty for the default).
  const base = new URL(origin);
  const port = base.port === '' ? (base.protocol === 'https:' ? 443 : 80) : Number(base.port);
  const target = { protocol: base.protocol, host: base.host, hostname: base.hostname, port, href: origin };
  // The request line is the exchange's path, verbatim: `toProxy` takes `req.url` as it is (set to
  // that path below) and `prependPath: false` adds no target path, so http-proxy-3 parses no URL
  // per request (its default parses the target's path and the request's). The Host
  // field is set here (the exchange forwards none), so `changeOrigin` is not needed.
  // No proxyTimeout: the exchange's deadlines are the timeouts (and abort the call); a socket idle
  // timeout here would also fire while the exchange holds the body back for a slow client.
  const proxy = createProxyServer({ target, agent, selfHandleResponse: true, toProxy: true, prependPath: false, secure: true });
  // A listener for every error the proxy may emit outside a call's own callback.
  proxy.on('error', (err) => onProxyError?.(err));
  // One listener per event, dispatching to the call of each request (not one listener per call).
  proxy.on('proxyReq', (proxyReq, req) => {
    const call = (req as IncomingMessage & WithCall)[CALL];
    if (call === undefined) return;
    call.proxyReq = proxyReq;
    (proxyReq as ClientRequest & WithCall)[CALL] = call;
    proxyReq.on('upgrade', onUpgrade);
    proxyReq.on('information', onInformation);
    if (call.stopped) proxyReq.destroy();
  });
  proxy.on('proxyRes', (proxyRes, req) => {
    const holder = req as IncomingMessage & WithCall;
    const call = holder[CALL];
    if (call === undefined) return void proxyRes.destroy();
    holder[CALL] = undefined;
    call.respond(proxyRes);
  });

  return {
    name: 'http-proxy-3',
    conforms: false,
    send(request: UpstreamRequest, handler: UpstreamHandler): void {
      const res = request.native as ServerResponse;
      const req = res.req as IncomingMessage & WithCall;
      // http-proxy-3 copies req.headers (and req.method) into the upstream request, and sends
      // req.url as the request line (toProxy).
      const headers = request.headers;
      headers.host = target.host;
      // An HTTP/2 request's `headers` is a getter only: the field is shadowed on the object.
      if (req.httpVersionMajor === 2) Object.defineProperty(req, 'headers', { value: headers, writable: true, configurable: true });
      else req.headers = headers;
      req.url = request.path;
      const call = new ProxyCall(handler);
      req[CALL] = call;
      handler.onStart(call);
      if (call.stopped) return;
      // The body as a per-call option (http-proxy-3 merges it into a copy of the proxy's options).
      proxy.web(req, res, { buffer: new BodySource(request.body) }, onWebError);
    },
    close: async () => {
      proxy.close();
      agent.destroy();
    },
  };
}
