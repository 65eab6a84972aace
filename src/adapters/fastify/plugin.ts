/**
 * The Fastify adapter: a plugin that puts the policy chain in front of the interface's paths
 * (`/v1` and below) and forwards what passes, with @fastify/http-proxy to an upstream URL or in
 * process to the reference backend. It only translates: Fastify request -> RequestHead, chain
 * decision -> reply. No policy logic lives here.
 *
 * @example
 *   import Fastify from 'fastify';
 *   import { petstoreGateway, loadPolicyFile, createGateway } from 'petstore-gateway';
 *   const loaded = loadPolicyFile('policies/default.yaml', { env: process.env });
 *   if (!loaded.ok) throw new Error('bad policy');
 *   const app = Fastify();
 *   await app.register(petstoreGateway, { gateway: createGateway(loaded.config, { env: process.env }) });
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import httpProxy from '@fastify/http-proxy';
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import { ERROR_CONTENT_TYPE, GatewayError, renderError } from '../../core/errors.js';
import { describeCause, errorForStatus, fromTransportError, isConnectionFailure } from '../../core/failures.js';
import { clientResponseHeaders, tooManyHeaders, upstreamRequestHeaders } from '../../core/headers.js';
import { operationPath } from '../../core/operations.js';
import type { Exchange, ResponseBody } from '../../core/policy.js';
import { GatewayHolder, type Gateway } from '../../gateway.js';
import { backendAnswer } from '../shared/backend.js';
import { guardIdle, readBody, readCapped } from '../shared/streams.js';
import { UpstreamCall } from '../shared/upstream-call.js';

declare module 'fastify' {
  interface FastifyRequest {
    exchange: Exchange | null;
    /** The gateway this request started under: a reload does not change it mid-request. */
    gateway: Gateway | null;
  }
}

export interface PetstoreGatewayOptions {
  /** A gateway, or a holder whose gateway can be replaced while serving (hot reload). */
  readonly gateway: Gateway | GatewayHolder;
}

/** Every method reaches the chain, which answers 405 for those the interface does not define. */
const METHODS: HTTPMethods[] = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS'];
const ROUTES = ['/v1', '/v1/*'];
const EMPTY = Buffer.alloc(0);

/** Renders an error in the Error shape, with the exchange's own response headers (e.g. deprecation). */
export function sendError(reply: FastifyReply, ex: Exchange | null | undefined, err: GatewayError): void {
  if (reply.sent) return;
  if (err.status >= 500) reply.log.warn({ code: err.code, cause: describeCause(err.cause) }, 'gateway error');
  if (ex != null) reply.headers(ex.responseHeaders);
  reply.code(err.status).headers(err.headers).type(ERROR_CONTENT_TYPE).send(renderError(err));
}

/** Fastify's own errors (bad content-length, closing server, ...) in the Error shape. */
export function fromFastifyError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  const status = (err as { statusCode?: unknown }).statusCode;
  return errorForStatus(typeof status === 'number' ? status : 500, err);
}

/** Runs the request phase of the chain under the gateway in force; false when it answered already. */
export function runRequestPhase(holder: GatewayHolder, request: FastifyRequest, reply: FastifyReply): boolean {
  const gateway = holder.current;
  const { ex, error } = gateway.chain.begin({ method: request.method, target: request.url, headers: request.headers });
  request.gateway = gateway;
  request.exchange = ex;
  if (error === undefined) return true;
  sendError(reply, ex, error);
  return false;
}

export async function petstoreGateway(app: FastifyInstance, opts: PetstoreGatewayOptions): Promise<void> {
  const holder = opts.gateway instanceof GatewayHolder ? opts.gateway : new GatewayHolder(opts.gateway);
  // What forwarding is built from never changes on a reload (GatewayHolder refuses it).
  const { upstream, upstreamOrigin, upstreamBasePath, backend } = holder.current;
  const { timeouts, connections, maxBufferedBytes } = upstream;
  const breaker = holder.breaker;

  // Every body is read as raw bytes, within the limit of the request's own policy.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (request, payload, done) => {
    const limit = (request.gateway ?? holder.current).bodyLimit;
    readBody(payload, request.headers['content-length'], limit).then((b) => done(null, b), done);
  });
  if (!app.hasRequestDecorator('exchange')) app.decorateRequest('exchange', null);
  if (!app.hasRequestDecorator('gateway')) app.decorateRequest('gateway', null);

  // Authentication and routing run before any body is read.
  app.addHook('onRequest', (request, reply, done) => {
    if (runRequestPhase(holder, request, reply)) done();
  });
  app.addHook('preHandler', (request, reply, done) => {
    const ex = request.exchange!;
    if (ex.operation?.hasBody === true) {
      const error = request.gateway!.chain.acceptBody(ex, (request.body as Buffer | undefined) ?? EMPTY);
      if (error !== undefined) return sendError(reply, ex, error);
    }
    done();
  });
  app.setErrorHandler((err, request, reply) => sendError(reply, request.exchange, fromFastifyError(err)));

  /** Sends a response the chain may still rewrite: buffered only when some policy must read it. */
  function respond(reply: FastifyReply, request: FastifyRequest, res: ResponseBody): void {
    const ex = request.exchange!;
    const out = request.gateway!.chain.finishResponse(ex, res);
    reply.code(out.status).headers(clientResponseHeaders(out.headers, ex, true)).send(out.body);
  }

  if (backend !== undefined) {
    const handler = (request: FastifyRequest, reply: FastifyReply) => {
      const ex = request.exchange!;
      const out = backendAnswer(backend, ex, ex.upstreamBody ?? (request.body as Buffer | undefined));
      reply.code(out.status).headers(out.headers).send(out.body);
    };
    for (const url of ROUTES) app.route({ method: METHODS, url, handler, exposeHeadRoute: false });
    return;
  }

  await app.register(httpProxy, {
    upstream: upstreamOrigin!,
    routes: ROUTES,
    httpMethods: METHODS,
    // Our own parser above keeps the raw bytes; http-proxy's pass-through parsers would stream them.
    proxyPayloads: false,
    // reply-from logs every forwarded request at info level; the gateway logs failures itself.
    disableRequestLogging: true,
    undici: {
      connections,
      connectTimeout: timeouts.connectMs,
      headersTimeout: timeouts.headersMs,
      bodyTimeout: timeouts.bodyMs,
    },
    handler: (request, reply) => {
      const ex = request.exchange!;
      const closed = breaker?.admit();
      if (closed !== undefined) return sendError(reply, ex, closed);
      const body = ex.operation!.hasBody ? (ex.upstreamBody ?? (request.body as Buffer | undefined) ?? EMPTY) : undefined;
      // Past headersMs the client gets 504 and a late answer is thrown away.
      const call = new UpstreamCall(breaker, timeouts.headersMs, () => sendError(reply, ex, new GatewayError('upstream_timeout')));
      reply.raw.once('close', () => {
        if (!reply.raw.writableFinished) call.abandon();
      });
      return reply.from(upstreamBasePath + operationPath(ex.operation!, ex.petId), {
        body,
        contentType: body === undefined ? undefined : String(request.headers['content-type']),
        queryString: () => ex.upstreamQuery,
        rewriteRequestHeaders: (_req, headers) => upstreamRequestHeaders(headers, ex) as IncomingHttpHeaders,
        // Headers are set in onResponse, once the chain has decided what the client gets.
        rewriteHeaders: () => ({}),
        // Never on an answer (a 503 must not start a retry storm), never for createPet; listPets
        // and getPet once when the connection failed before any answer, if the policy allows it.
        retriesCount: upstream.retryIdempotent ? 1 : 0,
        retryDelay: ({ err, attempt }) =>
          upstream.retryIdempotent && attempt < 1 && !ex.operation!.hasBody && !call.settled && isConnectionFailure(err) ? 1 : null,
        onError: (r, { error }) => {
          if (call.settled) return;
          call.finish(false);
          sendError(r as FastifyReply, ex, fromTransportError(error));
        },
        onResponse: (_request, r, raw) => {
          // reply-from's types call this a ServerResponse; it is undici's response.
          const res = raw as unknown as { statusCode: number; headers: IncomingHttpHeaders; stream: Readable };
          const rep = r as FastifyReply;
          if (call.settled || rep.sent) {
            res.stream.destroy();
            return;
          }
          call.headersArrived();
          if (tooManyHeaders(res.headers)) {
            res.stream.destroy();
            call.finish(false);
            return sendError(rep, ex, new GatewayError('bad_gateway'));
          }
          // Policies only read these headers; clientResponseHeaders makes the client's copy.
          const head = { status: res.statusCode, headers: res.headers };
          if (!request.gateway!.chain.wantsResponseBody(ex, head)) {
            call.watch(res.stream, head.status);
            guardIdle(res.stream, timeouts.bodyMs, () => rep.log.warn({ code: 'upstream_timeout' }, 'upstream body paused too long; connection closed'));
            rep.headers(clientResponseHeaders(head.headers, ex)).send(res.stream);
            return;
          }
          readCapped(res.stream, maxBufferedBytes, timeouts.bodyMs).then(
            ({ body, truncated }) => {
              call.finish(head.status < 500);
              respond(rep, request, { ...head, body, truncated });
            },
            (err: unknown) => {
              call.finish(false);
              sendError(rep, ex, fromTransportError(err));
            },
          );
        },
      });
    },
  });
}
