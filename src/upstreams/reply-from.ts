/**
 * @fastify/reply-from (under @fastify/http-proxy) behind the Upstream port, for the Fastify plugin:
 * `reply.from` is a decorator of the client's reply, so the front's native request is the
 * FastifyReply. reply-from's own retries are off (the exchange owns the retry rule: its default
 * would retry a GET on 503 up to ten times), its headers and body are left alone (the exchange
 * writes the client's response), and its errors are mapped by `err.code` to failure kinds.
 */
import type { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
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

class ReplyFromCall extends StreamedCall {
  constructor(
    handler: UpstreamHandler,
    /** What reply-from asks for through its option hooks, read there from the call. */
    readonly query: string,
    readonly headers: Record<string, string | string[]>,
  ) {
    super(handler, REPLY_FROM_KINDS);
  }

  respond(res: UndiciAnswer): void {
    this.feed(res.statusCode, res.headers, res.stream);
  }
}

/** Where a request keeps its call for reply-from's hooks (one set of hooks, no closures per call). */
const CALL = Symbol('petstore-gateway reply-from call');
type WithCall = { [CALL]?: ReplyFromCall };
const callOf = (request: unknown): ReplyFromCall => (request as WithCall)[CALL]!;

const noRetry = (): null => null;
const noHeaders = (): Record<string, never> => ({});
// Without this, reply-from would take the client's query string from the request URL.
const queryString = (_search: unknown, _url: unknown, request: unknown): string => callOf(request).query;
const rewriteRequestHeaders = (request: unknown): Record<string, string | string[]> => callOf(request).headers;
const onError = (reply: { request: unknown }, { error }: { error: Error }): void => callOf(reply.request).fail(error);
// reply-from's types call `res` a ServerResponse; it is undici's response.
const onResponse = (request: unknown, _reply: unknown, res: unknown): void => callOf(request).respond(res as UndiciAnswer);

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
