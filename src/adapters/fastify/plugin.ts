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
import { errorForStatus, fromTransportError } from '../../core/failures.js';
import { clientResponseHeaders, upstreamRequestHeaders } from '../../core/headers.js';
import { operationPath } from '../../core/operations.js';
import type { Exchange, ResponseBody } from '../../core/policy.js';
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
  if (ex != null) reply.headers(ex.responseHeaders);
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

  /** Sends a response the chain may still rewrite: buffered only when some policy must read it. */
  function respond(reply: FastifyReply, ex: Exchange, res: ResponseBody): void {
    const out = gw.chain.finishResponse(ex, res);
    const headers = clientResponseHeaders(out.headers, ex);
    delete headers['content-length'];
    reply.code(out.status).headers(headers).send(out.body);
  }

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
      respond(reply, ex, { status: res.status, headers: { 'content-type': ERROR_CONTENT_TYPE }, body: Buffer.from(res.body), truncated: false });
    };
    for (const url of ROUTES) app.route({ method: METHODS, url, handler, exposeHeadRoute: false });
    return;
  }

  const { timeouts, connections, maxBufferedBytes } = gw.upstream;
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
        rewriteRequestHeaders: (_req, headers) => upstreamRequestHeaders(headers, ex),
        // Headers are set in onResponse, once the chain has decided what the client gets.
        rewriteHeaders: () => ({}),
        // Never retry: createPet is not idempotent, and a 503 must not start a retry storm.
        retryDelay: () => null,
        onError: (r, { error }) => sendError(r as FastifyReply, ex, fromTransportError(error)),
        onResponse: (_request, r, raw) => {
          // reply-from's types call this a ServerResponse; it is undici's response.
          const res = raw as unknown as { statusCode: number; headers: IncomingHttpHeaders; stream: Readable };
          const rep = r as FastifyReply;
          const head = { status: res.statusCode, headers: { ...res.headers } };
          if (!gw.chain.wantsResponseBody(ex, head)) {
            rep.headers(clientResponseHeaders(head.headers, ex)).send(res.stream);
            return;
          }
          readCapped(res.stream, maxBufferedBytes).then(
            ({ body, truncated }) => respond(rep, ex, { ...head, body, truncated }),
            (err: unknown) => sendError(rep, ex, fromTransportError(err)),
          );
        },
      });
    },
  });
}

/** Reads a stream up to `cap` bytes; past it, stops reading and destroys the stream. */
export function readCapped(stream: Readable, cap: number): Promise<{ body: Buffer; truncated: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (chunk: Buffer) => {
      if (size + chunk.length > cap) {
        chunks.push(chunk.subarray(0, cap - size));
        stream.destroy();
        resolve({ body: Buffer.concat(chunks), truncated: true });
        return;
      }
      size += chunk.length;
      chunks.push(chunk);
    });
    stream.on('end', () => resolve({ body: Buffer.concat(chunks), truncated: false }));
    stream.on('error', reject);
  });
}
