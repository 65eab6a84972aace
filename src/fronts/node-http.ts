/**
 * The node:http front: a request handler for `createServer` that feeds the exchange. The undici
 * and http-proxy-3 engines (and the built-in backend with either) serve clients through it. It
 * only translates: IncomingMessage -> RequestHead, and reads the body when the exchange asks.
 * The native request handed to transports is the client's ServerResponse (`res.req` is its
 * request): http-proxy-3 drives those objects itself.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type ActiveRequest, type FrontHooks, Pipeline, type PipelineOptions } from '../core/exchange.js';
import { GatewayError } from '../core/errors.js';
import { readBody, refuseBody, refuseRestOfBody, sendContinue } from './body.js';
import { holdReading, releaseReading } from './connections.js';

const hooks: FrontHooks = {
  proceed(request: ActiveRequest): void {
    const res = request.native as ServerResponse;
    const req = res.req;
    if (request.ex.operation?.hasBody !== true) {
      refuseBody(req, res); // a body nobody asked for is never forwarded, nor read whole
      return request.forward(undefined);
    }
    sendContinue(req, res);
    readBody(req, req.headers['content-length'], request.bodyLimit).then(
      (body) => request.forward(body),
      (err: unknown) => {
        if (err instanceof GatewayError && err.status === 413) refuseRestOfBody(req, res);
        request.failBody(err);
      },
    );
  },
  discard(request: ActiveRequest): void {
    const res = request.native as ServerResponse;
    refuseBody(res.req, res);
  },
  hold(request: ActiveRequest): void {
    holdReading((request.native as ServerResponse).req);
  },
  release(request: ActiveRequest): void {
    releaseReading((request.native as ServerResponse).req);
  },
};

/** True on a TLS connection (node's TLSSocket says `encrypted`; HTTP/2's socket proxy passes it on). */
export function isTls(req: IncomingMessage): boolean {
  return (req.socket as { encrypted?: boolean } | null)?.encrypted === true;
}

export type NodeHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** A node:http request handler running every request through the exchange. */
export function createNodeHandler(options: Omit<PipelineOptions, 'front'>): { handler: NodeHandler; pipeline: Pipeline } {
  const pipeline = new Pipeline({ ...options, front: hooks });
  const handler: NodeHandler = (req, res) => {
    const head = { method: req.method ?? 'GET', target: req.url ?? '/', headers: req.headers, remoteAddress: req.socket.remoteAddress, tls: isTls(req), httpVersion: req.httpVersion };
    try {
      pipeline.handle(head, res, res);
    } catch (err) {
      // The barrier's last line: an exception before the exchange could answer (a front bug).
      pipeline.reject(head, res, res, err);
    }
  };
  return { handler, pipeline };
}
