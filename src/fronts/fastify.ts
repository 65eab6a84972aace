/**
 * The Fastify front: a plugin that serves the interface's paths (`/v1` and below) through the
 * exchange, forwarding with @fastify/http-proxy (reply-from) or to the in-process reference backend.
 * It only translates: Fastify request -> RequestHead, its hooks -> the exchange's phases. The
 * exchange writes every answer to `reply.raw`.
 *
 * What a host application gets:
 * - fastify-plugin metadata (`petstore-gateway`, `fastify: 5.x`); options checked at register with
 *   a clear message; a second register refused; a `prefix` refused (the interface lives at `/v1`).
 * - The plugin owns `/v1`: a host route under `/v1` registered after it is refused at registration
 *   (it would be served without authentication); one registered before it is never run: the
 *   gateway answers its path (authentication first, then 404) and warns the operator once. Host routes elsewhere are the host's: the gateway does not
 *   authenticate them, and its body parser, hooks and error handler do not touch them.
 *
 * @example
 *   import Fastify from 'fastify';
 *   import { createGateway, loadPolicyFile, petstoreGateway } from 'petstore-gateway';
 *   const env = { env: process.env };
 *   const loaded = loadPolicyFile('policies/default.yaml', env);
 *   if (!loaded.ok) throw new Error('bad policy');
 *   const app = Fastify({ logger: true });
 *   await app.register(petstoreGateway, { gateway: createGateway(loaded.config, { ...env, log: app.log }) });
 *   await app.listen({ port: 8080 });
 */
import httpProxy from '@fastify/http-proxy';
import fp from 'fastify-plugin';
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import { errorForStatus, GatewayError } from '../core/errors.js';
import { type ActiveRequest, type FrontHooks, type OperatorLog, Pipeline } from '../core/exchange.js';
import type { RequestHead } from '../core/policy.js';
import type { ExchangeObserver } from '../core/record.js';
import { forwardSettings, GatewayHolder, type Gateway } from '../gateway.js';
import { builtinUpstream } from '../upstreams/builtin.js';
import { replyFromPool, replyFromUpstream } from '../upstreams/reply-from.js';
import { readBody, refuseBody, refuseRestOfBody, sendContinue } from './body.js';
import { holdReading, releaseReading } from './connections.js';
import { isTls } from './node-http.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The exchange of this request, once the gateway's onRequest hook has started it. */
    petstore: ActiveRequest | null;
    /** Fastify's `done` of the onRequest hook, called when the request phase passed. */
    petstoreDone: (() => void) | null;
    /** A framework error to answer once the request phase passed (authentication first). */
    petstoreError: GatewayError | null;
  }
  interface FastifyInstance {
    /** The exchange pipeline of the petstore-gateway plugin registered on this instance. */
    petstoreGateway: { readonly pipeline: Pipeline };
  }
}

export interface PetstoreGatewayOptions {
  /** A gateway (createGateway), or a holder whose gateway can be replaced while serving (hot reload). */
  readonly gateway: Gateway | GatewayHolder;
  /** The operator log; the instance's logger by default. */
  readonly log?: OperatorLog;
  /** Receives every finished request (access log, metrics). */
  readonly observer?: ExchangeObserver;
  /** Refused: the interface lives at /v1. */
  readonly prefix?: string;
}

/** Every method reaches the chain, which answers 405 for those the interface does not define. */
const METHODS: HTTPMethods[] = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS'];
const ROUTES = ['/v1', '/v1/*'];
const EMPTY = Buffer.alloc(0);
/** Marks the routes the plugin registers itself, so the /v1 guard lets them through. */
const OWN_ROUTE = Symbol('petstore-gateway route');

/** Fastify's own errors (bad content-length, body too large, ...) in the catalogue. */
export function fromFastifyError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  const status = (err as { statusCode?: unknown }).statusCode;
  return errorForStatus(typeof status === 'number' ? status : 500, err);
}

function isUnderV1(url: string): boolean {
  return url === '/v1' || url.startsWith('/v1/');
}

/** What the exchange needs of a Fastify request (also used by the standalone server's own handlers). */
export function headOf(request: FastifyRequest): RequestHead {
  return { method: request.raw.method ?? 'GET', target: request.raw.url ?? '/', headers: request.headers, remoteAddress: request.raw.socket.remoteAddress, tls: isTls(request.raw), httpVersion: request.raw.httpVersion };
}

const hooks: FrontHooks = {
  proceed(ar: ActiveRequest): void {
    const request = (ar.native as FastifyReply).request;
    const pending = request.petstoreError;
    if (pending !== null) return ar.failBody(pending);
    const done = request.petstoreDone;
    const raw = (ar.native as FastifyReply).raw;
    if (ar.ex.operation?.hasBody === true) sendContinue(request.raw, raw);
    // Fastify reads the body (the raw parser below), then calls the route's handler: `forward`.
    if (done !== null) return done();
    ar.forward(undefined);
  },
  discard(ar: ActiveRequest): void {
    const reply = ar.native as FastifyReply;
    refuseBody(reply.request.raw, reply.raw);
  },
  hold(ar: ActiveRequest): void {
    holdReading((ar.native as FastifyReply).request.raw);
  },
  release(ar: ActiveRequest): void {
    releaseReading((ar.native as FastifyReply).request.raw);
  },
};

function checkOptions(opts: PetstoreGatewayOptions): GatewayHolder {
  const g = (opts as Partial<PetstoreGatewayOptions> | undefined)?.gateway;
  if (g === undefined || g === null || typeof g !== 'object' || !('chain' in g || g instanceof GatewayHolder)) {
    throw new TypeError('petstore-gateway: options.gateway is required: pass createGateway(config, env) or a GatewayHolder');
  }
  if (opts.prefix !== undefined && opts.prefix !== '') {
    throw new Error(`petstore-gateway: a prefix ('${opts.prefix}') is not supported: the interface is served at /v1; register the plugin without one`);
  }
  return g instanceof GatewayHolder ? g : new GatewayHolder(g as Gateway);
}

/**
 * The plugin owns /v1: a host route there would be served without authentication. A route
 * registered after the plugin is refused; one registered before it is answered by the gateway.
 */
function guardV1(app: FastifyInstance, pipeline: Pipeline): void {
  app.addHook('onRoute', (route) => {
    const own = (route.config as Record<symbol, unknown> | undefined)?.[OWN_ROUTE] === true;
    if (!own && isUnderV1(route.url)) {
      throw new Error(`petstore-gateway: the route ${route.method} ${route.url} is under /v1, which the gateway serves (and authenticates); register it elsewhere`);
    }
  });
  // A host route under /v1 registered BEFORE the plugin escaped the onRoute guard (Fastify runs
  // onRoute hooks only for later routes), and find-my-way prefers it to the plugin's /v1/*: it
  // would be served without authentication. Fastify gives the hooks of an instance to all of its
  // routes at ready, earlier ones included, so this hook catches it per request: the gateway
  // answers it (authentication first, then 404 not_found: not an operation of the interface),
  // and the operator is told once per route.
  const warned = new Set<string>();
  app.addHook('onRequest', (request, reply, done) => {
    // Read once: Fastify builds a new object of twelve fields on every read of `routeOptions`.
    const { url, config } = request.routeOptions;
    if (url === undefined || !isUnderV1(url) || (config as { [OWN_ROUTE]?: unknown })[OWN_ROUTE] === true) return done();
    if (!warned.has(url)) {
      warned.add(url);
      pipeline.log?.warn({ route: url }, 'petstore-gateway: a host route under /v1 was registered before the plugin; the gateway answers it (404), not the route');
    }
    request.petstoreError = new GatewayError('not_found');
    pipeline.handle(headOf(request), reply.raw, reply);
  });
}

async function plugin(app: FastifyInstance, opts: PetstoreGatewayOptions): Promise<void> {
  if (app.hasDecorator('petstoreGateway')) {
    throw new Error('petstore-gateway: the plugin is registered twice on this instance; register it once');
  }
  const holder = checkOptions(opts);
  const gw = holder.current;
  const upstream = gw.backend !== undefined ? builtinUpstream(gw.backend) : replyFromUpstream();
  const pipeline = new Pipeline({ gateways: holder, upstream, settings: forwardSettings(gw), front: hooks, log: opts.log ?? app.log, observer: opts.observer });
  app.decorate('petstoreGateway', { pipeline });
  app.addHook('onClose', async () => {
    await Promise.all([upstream.close(), holder.close()]);
  });

  app.decorateRequest('petstore', null);
  app.decorateRequest('petstoreDone', null);
  app.decorateRequest('petstoreError', null);
  guardV1(app, pipeline);

  // Encapsulated: the raw body parser, the hooks and the error handler govern only the gateway's routes.
  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (request, payload, done) => {
      const limit = request.petstore?.bodyLimit ?? holder.current.bodyLimit;
      readBody(payload, request.headers['content-length'], limit).then(
        (b) => done(null, b),
        (err: Error) => {
          const reply = request.petstore?.native as FastifyReply | undefined;
          if (err instanceof GatewayError && err.status === 413 && reply !== undefined) refuseRestOfBody(request.raw, reply.raw);
          done(err);
        },
      );
    });
    // Authentication and the rest of the request phase run before any body is read.
    scope.addHook('onRequest', (request, reply, done) => {
      request.petstoreDone = done;
      // Kept before it starts: a passing request phase calls `done`, and Fastify may run the
      // handler (which reads `request.petstore`) before `start` returns.
      const ar = pipeline.open(headOf(request), reply.raw, reply);
      request.petstore = ar;
      ar.start();
    });
    scope.setErrorHandler((err, request, reply) => {
      const ar = request.petstore;
      if (ar !== null) ar.failBody(fromFastifyError(err));
      else pipeline.reject(headOf(request), reply.raw, reply, fromFastifyError(err));
    });
    const handler = (request: FastifyRequest) => {
      // Set by the scope's onRequest hook, which runs before any handler of these routes.
      const ar = request.petstore!;
      ar.forward(ar.ex.operation?.hasBody === true ? ((request.body as Buffer | undefined) ?? EMPTY) : undefined);
    };
    const config = { [OWN_ROUTE]: true };
    if (gw.backend !== undefined) {
      for (const url of ROUTES) scope.route({ method: METHODS, url, handler, config, exposeHeadRoute: false });
      return;
    }
    // Without the built-in backend the upstream is a URL, and compileGateway gave it an origin.
    await scope.register(httpProxy, {
      upstream: gw.upstreamOrigin!,
      routes: ROUTES,
      httpMethods: METHODS,
      config,
      // Our own parser above keeps the raw bytes; http-proxy's pass-through parsers would stream them.
      proxyPayloads: false,
      // reply-from logs every forwarded request at info level; the access log is the gateway's.
      disableRequestLogging: true,
      // Our own pool: the upstream's sizes, timeouts and TLS, and the abort of a call whose client left.
      undici: replyFromPool(gw.upstreamOrigin!, gw.upstream),
      // The exchange forwards from the routes' preHandler and never calls `done`: http-proxy's own
      // route handler rewrites the URL, parses and re-serialises the query and resolves a
      // destination URL per request, for a path the exchange builds itself (from the operation and
      // a checked petId): a measurable share of this engine's CPU. `handler` is what that handler would call.
      preHandler: (request: FastifyRequest) => handler(request),
      handler,
    });
  });
}

/** The Fastify plugin: `app.register(petstoreGateway, { gateway })`. */
export const petstoreGateway = fp(plugin, { name: 'petstore-gateway', fastify: '5.x' });
