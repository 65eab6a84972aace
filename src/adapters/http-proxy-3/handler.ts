/**
 * The http-proxy-3 adapter: the same policy chain as the Fastify adapter, for a team that runs
 * node:http + http-proxy-3. `createPetstoreHandler` returns a request handler (and the proxy it
 * drives). It only translates: IncomingMessage -> RequestHead, chain decision -> ServerResponse.
 *
 * What http-proxy-3 1.x needs (and gets here): an `error` listener on every call (it throws
 * otherwise), a keep-alive agent (its default opens a connection per request), our own upstream
 * deadline (it applies none and reports a timeout as a plain socket hang-up), and upstream bodies
 * read only where a policy needs them (`selfHandleResponse`).
 *
 * @example
 *   import { createServer } from 'node:http';
 *   import { createGateway, createPetstoreHandler, loadPolicyFile } from 'petstore-gateway';
 *   const env = { env: process.env };
 *   const loaded = loadPolicyFile('policies/upstream.yaml', env);
 *   if (!loaded.ok) throw new Error('bad policy');
 *   const { handler } = createPetstoreHandler(createGateway(loaded.config, env));
 *   createServer(handler).listen(8080);
 */
import { Agent, type IncomingMessage, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { createProxyServer, type ProxyServer } from 'http-proxy-3';
import { GatewayError } from '../../core/errors.js';
import { fromTransportError, isConnectionFailure } from '../../core/failures.js';
import { clientResponseHeaders, tooManyHeaders, upstreamRequestHeaders } from '../../core/headers.js';
import { operationPath } from '../../core/operations.js';
import type { Exchange, PolicyLog } from '../../core/policy.js';
import { GatewayHolder, type Gateway } from '../../gateway.js';
import { createFront } from '../shared/node-front.js';
import { guardIdle, readCapped } from '../shared/streams.js';
import { UpstreamCall } from '../shared/upstream-call.js';

export interface PetstoreHandler {
  /** The request handler for node:http's createServer. */
  readonly handler: (req: IncomingMessage, res: ServerResponse) => void;
  /** The proxy it drives (undefined with the built-in backend). */
  readonly proxy: ProxyServer | undefined;
  /** Closes the proxy's keep-alive connections. */
  close(): void;
}

export interface HandlerOptions {
  /** Where failures are logged (5xx with their cause); nothing is logged when absent. */
  readonly log?: PolicyLog;
}

/** Request headers the adapter sets itself (http-proxy-3 writes host, from the target). */
const SET_BY_ADAPTER: ReadonlySet<string> = new Set(['content-length']);

/** One attempt of an upstream call, while it waits for the response headers. */
interface Attempt {
  proxyReq: { destroy(): void } | undefined;
  onResponse(proxyRes: IncomingMessage): void;
}

export function createPetstoreHandler(gateway: Gateway | GatewayHolder, options: HandlerOptions = {}): PetstoreHandler {
  const holder = gateway instanceof GatewayHolder ? gateway : new GatewayHolder(gateway);
  const { upstream, upstreamOrigin, upstreamBasePath, backend } = holder.current;
  const { timeouts, maxBufferedBytes } = upstream;
  const breaker = holder.breaker;
  const log = options.log;
  const agent = backend === undefined ? new Agent({ keepAlive: true, maxSockets: upstream.connections }) : undefined;
  const proxy = backend === undefined ? createProxyServer({ agent, selfHandleResponse: true, ignorePath: true, changeOrigin: true }) : undefined;
  // A listener for every error the proxy may emit outside a call's own callback.
  proxy?.on('error', (err) => log?.warn({ cause: err.message }, 'proxy error'));
  // One listener per event, dispatching to the attempt of each request (not one listener per call).
  const pending = new WeakMap<IncomingMessage, Attempt>();
  proxy?.on('proxyReq', (proxyReq, req) => {
    const attempt = pending.get(req);
    if (attempt !== undefined) attempt.proxyReq = proxyReq;
  });
  proxy?.on('proxyRes', (proxyRes, req) => pending.get(req)?.onResponse(proxyRes));

  function forward(gw: Gateway, ex: Exchange, req: IncomingMessage, res: ServerResponse, body: Buffer | undefined): void {
    const closed = breaker?.admit();
    if (closed !== undefined) return sendError(res, ex, closed);

    const query = ex.upstreamQuery === '' ? '' : `?${ex.upstreamQuery}`;
    const target = new URL(upstreamOrigin + upstreamBasePath + operationPath(ex.operation!, ex.petId) + query);
    const headers = upstreamRequestHeaders(req.headers, ex, SET_BY_ADAPTER);
    if (body !== undefined) headers['content-length'] = body.length;
    // http-proxy-3 copies req.headers into the upstream request.
    req.headers = headers as IncomingMessage['headers'];

    // Past headersMs the client gets 504, the upstream request is destroyed, a late answer dropped.
    const call = new UpstreamCall(breaker, timeouts.headersMs, () => {
      pending.get(req)?.proxyReq?.destroy();
      sendError(res, ex, new GatewayError('upstream_timeout'));
    });
    res.once('close', () => {
      if (!res.writableFinished) call.abandon();
    });
    let attempt = 0;
    const start = () => {
      pending.set(req, { proxyReq: undefined, onResponse });

      function onResponse(proxyRes: IncomingMessage) {
        pending.delete(req);
        if (call.settled) return proxyRes.destroy();
        call.headersArrived();
        if (tooManyHeaders(proxyRes.headers)) {
          proxyRes.destroy();
          call.finish(false);
          return sendError(res, ex, new GatewayError('bad_gateway'));
        }
        const status = proxyRes.statusCode ?? 502;
        // Policies only read these headers; clientResponseHeaders makes the client's copy.
        const head = { status, headers: proxyRes.headers };
        if (!gw.chain.wantsResponseBody(ex, head)) {
          call.watch(proxyRes, status);
          guardIdle(proxyRes, timeouts.bodyMs, () => log?.warn({ code: 'upstream_timeout' }, 'upstream body paused too long; connection closed'));
          proxyRes.on('error', () => res.destroy());
          res.writeHead(status, clientResponseHeaders(head.headers, ex) as Record<string, string | string[]>);
          proxyRes.pipe(res);
          return;
        }
        readCapped(proxyRes, maxBufferedBytes, timeouts.bodyMs).then(
          ({ body: b, truncated }) => {
            call.finish(status < 500);
            finish(gw, ex, { ...head, body: b, truncated }, res);
          },
          (err: unknown) => {
            call.finish(false);
            sendError(res, ex, fromTransportError(err));
          },
        );
      }

      const buffer = Readable.from(body === undefined ? [] : [body]);
      proxy!.web(req, res, { target, buffer }, (err) => {
        pending.delete(req);
        if (call.settled) return;
        // Never on an answer, never createPet: listPets and getPet once when the connection
        // failed before any answer, if the policy allows it.
        if (upstream.retryIdempotent && attempt === 0 && !ex.operation!.hasBody && isConnectionFailure(err)) {
          attempt++;
          start();
          return;
        }
        call.finish(false);
        sendError(res, ex, fromTransportError(err));
      });
    };
    start();
  }

  const { handler, sendError, finish } = createFront(holder, log, forward);

  return {
    handler,
    proxy,
    close() {
      proxy?.close();
      agent?.destroy();
    },
  };
}
