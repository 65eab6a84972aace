/**
 * The in-process reference backend behind the Upstream port (`upstream.url: builtin`): no socket,
 * no loopback hop. Its answers conform to the interface by construction, so the exchange runs no
 * response phase and no breaker on them.
 */
import type { ReferenceBackend } from '../backend/service.js';
import { ERROR_CONTENT_TYPE } from '../core/errors.js';
import type { Upstream, UpstreamControl, UpstreamHandler, UpstreamRequest } from '../core/upstream.js';

/** Nothing to pause or abort: the answer is complete before `send` returns. */
const INSTANT: UpstreamControl = { pause() {}, resume() {}, abort() {} };

export function builtinUpstream(backend: ReferenceBackend): Upstream {
  return {
    name: 'builtin',
    conforms: true,
    send(request: UpstreamRequest, handler: UpstreamHandler): void {
      const r = backend.handle({ operation: request.operation, petId: request.param, query: request.query, body: request.body });
      handler.onStart(INSTANT);
      handler.onHead(r.status, { 'content-type': ERROR_CONTENT_TYPE, 'content-length': String(r.body.length) }, r.code);
      handler.onData(r.body);
      handler.onEnd();
    },
    close: async () => {},
  };
}
