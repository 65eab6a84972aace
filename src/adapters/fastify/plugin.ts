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
import httpProxy from '@fastify/http-proxy';
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import { ERROR_CONTENT_TYPE, GatewayError, renderError } from '../../core/errors.js';
import { errorForStatus, fromTransportError } from '../../core/failures.js';
import { clientResponseHeaders } from '../../core/headers.js';
import { operationPath } from '../../core/operations.js';
import type { Exchange } from '../../core/policy.js';
import type { Gateway } from '../../gateway.js';

declare module 'fastify' {
  interface FastifyRequest {
    exchange: Exchange | null;
  }
}

export interface PetstoreGatewayOptions {
  readonly gateway: Gateway;
}

/** Every method reaches the chain, which answers 405 for those the interface does not define. */
const METHODS: HTTPMethods[] = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS'];
const ROUTES = ['/v1', '/v1/*'];
const EMPTY = Buffer.alloc(0);

/** Renders an error in the Error shape, with the exchange's own response headers (e.g. deprecation). */
export function sendError(reply: FastifyReply, ex: Exchange | null, err: GatewayError): void {
  if (err.status >= 500) reply.log.warn({ code: err.code, cause: describeCause(err.cause) }, 'gateway error');
  if (ex !== null) reply.headers(ex.responseHeaders);
  reply.code(err.status).headers(err.headers).type(ERROR_CONTENT_TYPE).send(renderError(err));
}

/** What the operator log gets of a cause: its code and message, never a request header. */
function describeCause(cause: unknown): string | undefined {
  if (!(cause instanceof Error)) return undefined;
  const code = (cause as { code?: unknown }).code;
  return `${typeof code === 'string' ? code + ': ' : ''}${cause.message}`;
}

/** Fastify's own errors (body too large, bad content-length, ...) in the Error shape. */
export function fromFastifyError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  const status = (err as { statusCode?: unknown }).statusCode;
  return errorForStatus(typeof status === 'number' ? status : 500, err);
}

/** Runs the request phase of the chain; used by the plugin's hook and the standalone 404 handler. */
export function runRequestPhase(gateway: Gateway, request: FastifyRequest, reply: FastifyReply): boolean {
  const { ex, error } = gateway.chain.begin({ method: request.method, target: request.url, headers: request.headers });
  request.exchange = ex;
  if (error === undefined) return true;
  sendError(reply, ex, error);
  return false;
}

export async function petstoreGateway(app: FastifyInstance, opts: PetstoreGatewayOptions): Promise<void> {
  const gw = opts.gateway;

  // The policies read the exact bytes the client sent and forward them unchanged (lossless), so
  // every body is taken as a Buffer, within the policy's size limit (413 past it).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: gw.bodyLimit }, (_req, body, done) => done(null, body));
  if (!app.hasRequestDecorator('exchange')) app.decorateRequest('exchange', null);

  // Authentication and routing run before Fastify reads any body.
  app.addHook('onRequest', (request, reply, done) => {
    if (runRequestPhase(gw, request, reply)) done();
  });
  app.addHook('preHandler', (request, reply, done) => {
    const ex = request.exchange!;
    if (ex.operation?.hasBody === true) {
      const error = gw.chain.acceptBody(ex, (request.body as Buffer | undefined) ?? EMPTY);
      if (error !== undefined) return sendError(reply, ex, error);
    }
    done();
  });
  app.setErrorHandler((err, request, reply) => sendError(reply, request.exchange, fromFastifyError(err)));

  if (gw.backend !== undefined) {
    const backend = gw.backend;
    const handler = (request: FastifyRequest, reply: FastifyReply) => {
      const ex = request.exchange!;
      const res = backend.handle({
        operation: ex.operation!.id,
        petId: ex.petId,
        query: ex.upstreamQuery,
        body: ex.upstreamBody ?? (request.body as Buffer | undefined),
      });
      reply.code(res.status).headers(ex.responseHeaders).type(ERROR_CONTENT_TYPE).send(res.body);
    };
    for (const url of ROUTES) app.route({ method: METHODS, url, handler, exposeHeadRoute: false });
    return;
  }

  const { timeouts, connections } = gw.upstream;
  await app.register(httpProxy, {
    upstream: gw.upstreamOrigin!,
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
      const body = ex.operation!.hasBody ? (ex.upstreamBody ?? (request.body as Buffer | undefined) ?? EMPTY) : undefined;
      return reply.from(gw.upstreamBasePath + operationPath(ex.operation!, ex.petId), {
        body,
        contentType: body === undefined ? undefined : String(request.headers['content-type']),
        queryString: () => ex.upstreamQuery,
        rewriteRequestHeaders: (_req, headers) => {
          for (const [name, value] of Object.entries(ex.upstreamHeaders)) {
            if (value === null) delete headers[name];
            else headers[name] = value;
          }
          return headers;
        },
        rewriteHeaders: (headers) => clientResponseHeaders(headers, ex),
        // Never retry: createPet is not idempotent, and a 503 must not start a retry storm.
        retryDelay: () => null,
        onError: (r, { error }) => sendError(r as FastifyReply, ex, fromTransportError(error)),
      });
    },
  });
}
