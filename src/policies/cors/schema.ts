/** The options of the `cors` policy: its JSON Schema (with defaults), and the type derived from it. */
import type { SchemaType } from '../../core/options.js';

const FIELD_NAME = { type: 'string', pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$", maxLength: 128 } as const;

export const schema = {
  type: 'object',
  description:
    'Cross-origin requests from browsers (the Fetch standard, "CORS protocol"). A preflight from an allowed origin is answered 204 by the gateway before authentication, never forwarded; every answer to an allowed origin, errors included, carries Access-Control-Allow-Origin and Access-Control-Expose-Headers; Vary: Origin always. An origin not listed gets no CORS field. No `origins` (the default): no CORS at all.',
  additionalProperties: false,
  properties: {
    origins: {
      type: 'array',
      default: [],
      maxItems: 256,
      items: { type: 'string', pattern: '^(\\*|https?://[^/\\s?#]+)$', maxLength: 256, description: 'An origin exactly as a browser sends it (scheme://host[:port], no path), or "*".' },
      description: 'Origins allowed to call the API from a browser, compared exactly; "*" allows any, only when `credentials` is false. Empty: no CORS.',
    },
    credentials: {
      type: 'boolean',
      default: false,
      description: 'Send Access-Control-Allow-Credentials: true, so a page may send cookies or TLS client certificates. Not needed for Authorization: Bearer, which a page sets itself.',
    },
    maxAgeSeconds: { type: 'integer', minimum: 0, maximum: 86400, default: 600, description: 'How long a browser may reuse a preflight answer (Access-Control-Max-Age).' },
    exposeHeaders: {
      type: 'array',
      default: ['X-Request-Id', 'RateLimit', 'RateLimit-Policy', 'Deprecation', 'Sunset', 'Link', 'Retry-After', 'Cache-Status', 'Age'],
      maxItems: 64,
      items: FIELD_NAME,
      description: 'Response fields a page may read beyond the CORS-safelisted ones (Access-Control-Expose-Headers).',
    },
    allowHeaders: {
      type: 'array',
      default: ['Authorization', 'Content-Type', 'X-Request-Id', 'traceparent', 'tracestate'],
      maxItems: 64,
      items: FIELD_NAME,
      description: 'Request fields a page may send (Access-Control-Allow-Headers in a preflight answer). Authorization must be named: "*" does not cover it.',
    },
  },
} as const;

export type CorsConfig = SchemaType<typeof schema>;
