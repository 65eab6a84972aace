/**
 * The built-in backend's answer to an exchange that passed the request and body phases, as the
 * client gets it: the exchange's own headers (e.g. deprecation) over `content-type`. The reference
 * backend is not an upstream: its answers conform by construction, so the response phase, which
 * polices what an upstream sends, has nothing to check and is not run.
 */
import { ERROR_CONTENT_TYPE } from '../../core/errors.js';
import { clientResponseHeaders } from '../../core/headers.js';
import type { Exchange, ResponseBody } from '../../core/policy.js';
import type { ReferenceBackend } from '../../backend/service.js';

const BACKEND_HEADERS = { 'content-type': ERROR_CONTENT_TYPE };

export function backendAnswer(backend: ReferenceBackend, ex: Exchange, body: Buffer | undefined): ResponseBody {
  const r = backend.handle({ operation: ex.operation!.id, petId: ex.petId, query: ex.upstreamQuery, body });
  return { status: r.status, headers: clientResponseHeaders(BACKEND_HEADERS, ex, true), body: r.body, truncated: false };
}
