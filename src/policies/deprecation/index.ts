/**
 * The `deprecation` policy: getPet is deprecated and removed on 5 December 2030
 * (docs/interface.md, "Versioning"). Every getPet response, 200, 401 and 404 alike, says so:
 * `Deprecation` (RFC 9745), `Sunset` (RFC 8594) and `Link` to the successor. After the sunset
 * moment, and during scheduled brownouts before it, getPet answers 410 without calling the
 * upstream.
 */
import { GatewayError } from '../../core/errors.js';
import type { Decision, Exchange, PolicyEnv, PolicyModule, Problem } from '../../core/policy.js';
import { schema, type DeprecationConfig } from './schema.js';
import { parseDateTime } from '../../core/date-time.js';

export type { DeprecationConfig } from './schema.js';
export { parseDateTime };

function check(config: DeprecationConfig, path: string): Problem[] {
  const problems: Problem[] = [];
  const sunset = parseDateTime(config.sunset);
  if (Number.isNaN(parseDateTime(config.deprecatedAt))) problems.push({ path: `${path}.deprecatedAt`, message: 'is not a valid date' });
  if (Number.isNaN(sunset)) problems.push({ path: `${path}.sunset`, message: 'is not a valid date' });
  if (parseDateTime(config.deprecatedAt) > sunset) {
    problems.push({ path: `${path}.deprecatedAt`, message: `must not be after the sunset (${config.sunset})` });
  }
  config.brownouts.forEach((b, i) => {
    const start = parseDateTime(b.start);
    const end = parseDateTime(b.end);
    if (Number.isNaN(start) || Number.isNaN(end)) problems.push({ path: `${path}.brownouts[${i}]`, message: 'has an invalid date' });
    else if (start >= end) problems.push({ path: `${path}.brownouts[${i}]`, message: 'must end after it starts' });
    else if (end > sunset) problems.push({ path: `${path}.brownouts[${i}].end`, message: 'must not be after the sunset: after it, getPet is removed' });
  });
  return problems;
}

/** The header values, computed once when the policy is created. */
export function deprecationHeaders(config: DeprecationConfig): Record<string, string> {
  const links = [`<${config.successor}>; rel="successor-version"`];
  for (const l of config.links) links.push(`<${l.href}>; rel="${l.rel}"${l.type === undefined ? '' : `; type="${l.type}"`}`);
  return {
    deprecation: `@${Math.floor(Date.parse(config.deprecatedAt) / 1000)}`,
    sunset: new Date(Date.parse(config.sunset)).toUTCString(),
    link: links.join(', '),
  };
}

function create(config: DeprecationConfig, env: PolicyEnv) {
  const headers = deprecationHeaders(config);
  const sunset = Date.parse(config.sunset);
  const brownouts = config.brownouts.map((b) => ({ start: Date.parse(b.start), end: Date.parse(b.end), until: b.end }));
  const now = env.now ?? Date.now;
  const removed = new GatewayError('operation_removed', { message: `getPet was removed on ${headers.sunset}: use GET /v1/pets with the status filter.` });
  return {
    name: 'deprecation',
    annotate(ex: Exchange): void {
      if (ex.operation?.id === 'getPet') Object.assign(ex.responseHeaders, headers);
    },
    onRequest(ex: Exchange): Decision {
      if (ex.operation?.id !== 'getPet') return undefined;
      const t = now();
      if (config.removeAfterSunset && t >= sunset) return removed;
      for (const b of brownouts) {
        if (t >= b.start && t < b.end) {
          return new GatewayError('operation_removed', {
            message: `getPet is unavailable during a scheduled brownout until ${b.until}, and is removed on ${headers.sunset}: use GET /v1/pets with the status filter.`,
          });
        }
      }
      return undefined;
    },
  };
}

export const deprecation: PolicyModule<DeprecationConfig, 'deprecation'> = {
  name: 'deprecation',
  description: schema.description,
  schema,
  check,
  create,
};
