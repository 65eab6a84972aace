/**
 * @fastify/reply-from (under @fastify/http-proxy) behind the Upstream port, for the Fastify plugin:
 * `reply.from` is a decorator of the client's reply, so the front's native request is the
 * FastifyReply. reply-from's own retries are off (the exchange owns the retry rule: its default
 * would retry a GET on 503 up to ten times), its headers and body are left alone (the exchange
 * writes the client's response), and its errors are mapped by `err.code` to failure kinds.
 */
import type { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import { Pool, type Dispatcher } from 'undici';
import type { UpstreamConfig } from './config.js';
import { poolOptions } from './undici.js';
import type { FailureKind, Upstream, UpstreamHandler, UpstreamRequest } from '../core/upstream.js';
import { StreamedCall } from './streamed-call.js';

const REPLY_FROM_KINDS: ReadonlyMap<string, FailureKind> = new Map<string, FailureKind>([
  ['FST_REPLY_FROM_BAD_GATEWAY', 'invalid_response'],
  ['HTTPParserError', 'invalid_response'],
  ['UND_ERR_HEADERS_OVERFLOW', 'invalid_response'],
  ['UND_ERR_CONNECT_TIMEOUT', 'connect_timeout'],
  ['UND_ERR_HEADERS_TIMEOUT', 'headers_timeout'],
  ['UND_ERR_BODY_TIMEOUT', 'body_timeout'],
  ['UND_ERR_SOCKET', 'reset'],
  ['UND_ERR_CLOSED', 'reset'],
  ['FST_REPLY_FROM_GATEWAY_TIMEOUT', 'headers_timeout'],
  ['FST_REPLY_FROM_CONNECTION_RESET', 'reset'],
]);

interface UndiciAnswer {
  readonly statusCode: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly stream: Readable;
}

/**
 * Where the headers reply-from hands to undici carry their call: reply-from copies them with
 * Object.assign (which copies symbol keys) and passes undici no signal of its own; undici reads
 * only string keys as header fields.
 */
const SIGNAL = Symbol('petstore-gateway reply-from signal');

/**
 * One call. It is also the call's abort signal for undici (the EventTarget subset undici reads:
 * `aborted` and one `abort` listener), so a client that leaves (or resets its HTTP/2 stream)
 * aborts the upstream request before its response, without an AbortController per call.
 */
class ReplyFromCall extends StreamedCall {
  private abortListener: (() => void) | undefined;
  aborted = false;

  constructor(
    handler: UpstreamHandler,
    /** What reply-from asks for through its option hooks, read there from the call. */
    readonly query: string,
    readonly headers: Record<string, string | string[]> & { [SIGNAL]?: ReplyFromCall },
  ) {
    super(handler, REPLY_FROM_KINDS);
    headers[SIGNAL] = this;
  }

  addEventListener(_type: 'abort', listener: () => void): void {
    this.abortListener = listener;
  }

  removeEventListener(): void {
    this.abortListener = undefined;
  }

  protected override stopRequest(): void {
    this.aborted = true;
    const listener = this.abortListener;
    this.abortListener = undefined;
    listener?.();
  }

  respond(res: UndiciAnswer): void {
    this.feed(res.statusCode, res.headers, res.stream);
  }
}

/** Where a request keeps its call for reply-from's hooks (one set of hooks, no closures per call). */
const CALL = Symbol('petstore-gateway reply-from call');
type WithCall = { [CALL]?: ReplyFromCall };
// `send` sets the call on the request before `reply.from` runs, and only reply-from's hooks read it.
const callOf = (request: unknown): ReplyFromCall => (request as WithCall)[CALL]!;

const noRetry = (): null => null;
const noHeaders = (): Record<string, never> => ({});
// Without this, reply-from would take the client's query string from the request URL.
const queryString = (_search: unknown, _url: unknown, request: unknown): string => callOf(request).query;
const rewriteRequestHeaders = (request: unknown): Record<string, string | string[]> => callOf(request).headers;
const onError = (reply: { request: unknown }, { error }: { error: Error }): void => callOf(reply.request).fail(error);
// reply-from's types call `res` a ServerResponse; it is undici's response.
const onResponse = (request: unknown, _reply: unknown, res: unknown): void => callOf(request).respond(res as UndiciAnswer);

/**
 * The undici Pool reply-from sends through (given as its `undici` option, it is used as is): the
 * pool sizes and timeouts of `upstream`, its TLS options for an https:// upstream, and each call's
 * abort signal taken from its headers.
 */
export function replyFromPool(origin: string, config: UpstreamConfig): Pool {
  const pool = new Pool(origin, poolOptions(config));
  const request = pool.request.bind(pool) as (opts: Dispatcher.RequestOptions, cb: unknown) => void;
  // reply-from calls request(opts, callback): the call's signal joins the options here. The casts:
  // undici types `request` as a set of overloads, which one wrapper function cannot be assigned to.
  (pool as unknown as { request: typeof request }).request = (opts, cb) => {
    const call = (opts.headers as { [SIGNAL]?: ReplyFromCall } | undefined)?.[SIGNAL];
    request(call === undefined ? opts : { ...opts, signal: call }, cb);
  };
  return pool;
}

export function replyFromUpstream(): Upstream {
  return {
    name: 'reply-from',
    conforms: false,
    send(request: UpstreamRequest, handler: UpstreamHandler): void {
      const reply = request.native as FastifyReply;
      const { pathname, query, body, headers } = request;
      const call = new ReplyFromCall(handler, query, headers);
      handler.onStart(call);
      if (call.stopped) return;
      // The call rides on the request, the one object reply-from hands to its hooks (callOf reads it).
      (reply.request as unknown as WithCall)[CALL] = call;
      reply.from(pathname, {
        body,
        contentType: body === undefined ? undefined : String(headers['content-type'] ?? 'application/json'),
        queryString,
        rewriteRequestHeaders,
        rewriteHeaders: noHeaders,
        retriesCount: 0,
        retryDelay: noRetry,
        onError,
        onResponse,
      });
    },
    close: async () => {},
  };
}
