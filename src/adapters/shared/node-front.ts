/**
 * The client side of the engines that serve node:http directly (undici, http-proxy-3): the request
 * phase of the chain, the client's body within the policy's limit, the body phase, the built-in
 * backend, and every answer the gateway writes itself. An engine only supplies how a request that
 * passed is forwarded upstream (`Forward`), so both engines answer their clients alike.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ERROR_CONTENT_TYPE, GatewayError, renderError } from '../../core/errors.js';
import { describeCause } from '../../core/failures.js';
import { clientResponseHeaders } from '../../core/headers.js';
import type { Exchange, PolicyLog, ResponseBody } from '../../core/policy.js';
import { GatewayHolder, type Gateway } from '../../gateway.js';
import { backendAnswer } from './backend.js';
import { readBody } from './streams.js';

/** Forwards one request that passed the request and body phases; `body` is set for createPet. */
export type Forward = (gw: Gateway, ex: Exchange, req: IncomingMessage, res: ServerResponse, body: Buffer | undefined) => void;

export interface Front {
  /** The request handler for node:http's createServer. */
  readonly handler: (req: IncomingMessage, res: ServerResponse) => void;
  /** Writes an error in the Error shape, with the exchange's own headers (e.g. deprecation). */
  sendError(res: ServerResponse, ex: Exchange | undefined, err: GatewayError): void;
  /** Runs the response-body phase on a complete answer and writes what the chain decided. */
  finish(gw: Gateway, ex: Exchange, answer: ResponseBody, res: ServerResponse): void;
}

function send(res: ServerResponse, out: ResponseBody): void {
  if (res.headersSent) return;
  const headers = out.headers as Record<string, string | string[] | number>;
  headers['content-length'] = out.body.length;
  res.writeHead(out.status, headers);
  res.end(out.body);
}

export function createFront(holder: GatewayHolder, log: PolicyLog | undefined, forward: Forward): Front {
  const backend = holder.current.backend;

  function sendError(res: ServerResponse, ex: Exchange | undefined, err: GatewayError): void {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (err.status >= 500) log?.warn({ code: err.code, cause: describeCause(err.cause) }, 'gateway error');
    const body = Buffer.from(renderError(err));
    send(res, { status: err.status, headers: { ...ex?.responseHeaders, ...err.headers, 'content-type': ERROR_CONTENT_TYPE }, body, truncated: false });
  }

  function finish(gw: Gateway, ex: Exchange, answer: ResponseBody, res: ServerResponse): void {
    const final = gw.chain.finishResponse(ex, answer);
    send(res, { status: final.status, headers: clientResponseHeaders(final.headers, ex, true), body: final.body, truncated: false });
  }

  function pass(gw: Gateway, ex: Exchange, req: IncomingMessage, res: ServerResponse, body: Buffer | undefined): void {
    if (backend === undefined) return forward(gw, ex, req, res, body);
    send(res, backendAnswer(backend, ex, body));
  }

  const handler = (req: IncomingMessage, res: ServerResponse): void => {
    const gw = holder.current; // kept for the whole request: a reload does not change it mid-way
    const { ex, error } = gw.chain.begin({ method: req.method ?? 'GET', target: req.url ?? '/', headers: req.headers });
    if (error !== undefined) {
      req.resume(); // the body is not read: let it drain
      return sendError(res, ex, error);
    }
    if (ex.operation?.hasBody !== true) {
      req.resume();
      return pass(gw, ex, req, res, undefined);
    }
    readBody(req, req.headers['content-length'], gw.bodyLimit).then(
      (body) => {
        const denied = gw.chain.acceptBody(ex, body);
        if (denied !== undefined) return sendError(res, ex, denied);
        pass(gw, ex, req, res, ex.upstreamBody ?? body);
      },
      (err: unknown) => {
        if (err instanceof GatewayError) {
          // 413 before the body is read whole: close the connection rather than drain it.
          res.setHeader('connection', 'close');
          return sendError(res, ex, err);
        }
        res.destroy();
      },
    );
  };

  return { handler, sendError, finish };
}
