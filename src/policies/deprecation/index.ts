/**
 * The `deprecation` policy: the operations the interface document marks `deprecated` (getPet:
 * removed on 5 December 2030, docs/interface.md, "Versioning"). Every response of such an
 * operation, 200, 401 and 404 alike, says so: `Deprecation` (RFC 9745), `Sunset` (RFC 8594, from
 * the document's `x-sunset` or the policy's `sunset`) and `Link` to the successor (`x-successor`).
 * After the sunset moment, and during scheduled brownouts before it, the operation answers 410
 * without calling the upstream.
 */
import { apiOf } from '../../api/index.js';
import { lifecycleOf, type Lifecycle } from '../../api/lifecycle.js';
import type { ApiOperation } from '../../api/model.js';
import { GatewayError } from '../../core/errors.js';
import type { Decision, Exchange, PolicyEnv, PolicyModule, Problem } from '../../core/policy.js';
import { schema, type DeprecationConfig } from './schema.js';
import { parseDateTime } from '../../core/date-time.js';
import { TRACE_EVENTS } from '../../core/trace.js';

export type { DeprecationConfig } from './schema.js';
export { parseDateTime };
export { deprecatedOperations, lifecycleOf, type Lifecycle } from '../../api/lifecycle.js';

function check(config: DeprecationConfig, path: string, env: PolicyEnv): Problem[] {
  const problems: Problem[] = [];
  // The earliest sunset of the deprecated operations (the policy's, else the document's).
  let sunset = config.sunset === undefined ? Infinity : parseDateTime(config.sunset);
  let sunsetText = config.sunset;
  let who = 'the operation';
  for (const op of apiOf(env).operations) {
    const life = lifecycleOf(op, config);
    if (life?.sunset === undefined) continue;
    const t = parseDateTime(life.sunset);
    if (t < sunset || sunsetText === undefined || life.sunset === sunsetText) {
      if (t < sunset || sunsetText === undefined) ({ sunset, sunsetText } = { sunset: t, sunsetText: life.sunset });
      who = op.id;
    }
  }
  if (Number.isNaN(parseDateTime(config.deprecatedAt))) problems.push({ path: `${path}.deprecatedAt`, message: 'is not a valid date' });
  if (config.sunset !== undefined && Number.isNaN(parseDateTime(config.sunset))) problems.push({ path: `${path}.sunset`, message: 'is not a valid date' });
  if (parseDateTime(config.deprecatedAt) > sunset) {
    problems.push({ path: `${path}.deprecatedAt`, message: `must not be after the sunset (${sunsetText})` });
  }
  config.brownouts.forEach((b, i) => {
    const start = parseDateTime(b.start);
    const end = parseDateTime(b.end);
    if (Number.isNaN(start) || Number.isNaN(end)) problems.push({ path: `${path}.brownouts[${i}]`, message: 'has an invalid date' });
    else if (start >= end) problems.push({ path: `${path}.brownouts[${i}]`, message: 'must end after it starts' });
    else if (end > sunset) problems.push({ path: `${path}.brownouts[${i}].end`, message: `must not be after the sunset: after it, ${who} is removed` });
  });
  return problems;
}

/** The header values, computed once when the policy is created. */
export function deprecationHeaders(config: DeprecationConfig, life: Lifecycle): Record<string, string> {
  const links = life.successor === undefined ? [] : [`<${life.successor}>; rel="successor-version"`];
  for (const l of config.links) links.push(`<${l.href}>; rel="${l.rel}"${l.type === undefined ? '' : `; type="${l.type}"`}`);
  const out: Record<string, string> = { deprecation: `@${Math.floor(Date.parse(config.deprecatedAt) / 1000)}` };
  if (life.sunset !== undefined) out.sunset = new Date(Date.parse(life.sunset)).toUTCString();
  if (links.length > 0) out.link = links.join(', ');
  return out;
}

/** One deprecated operation: its headers, its removal and its brownouts. */
function planOf(config: DeprecationConfig, op: ApiOperation) {
  const life = lifecycleOf(op, config);
  if (life === undefined) return undefined;
  const headers = deprecationHeaders(config, life);
  const instead = life.advice ?? life.successor;
  const use = instead === undefined ? '' : `: use ${instead}`;
  const sunset = life.sunset === undefined ? Infinity : Date.parse(life.sunset);
  const removedOn = headers.sunset === undefined ? '' : `, and is removed on ${headers.sunset}`;
  return {
    /** What its trace event says: one object per operation, not per call. */
    traced: Object.freeze({ 'gateway.operation': op.id }),
    headers,
    sunset,
    removed: new GatewayError('operation_removed', { message: `${op.id} was removed on ${headers.sunset ?? ''}${use}.` }),
    brownouts: config.brownouts
      .map((b) => ({ start: Date.parse(b.start), end: Date.parse(b.end), until: b.end }))
      .filter((b) => b.end <= sunset)
      .map((b) => ({ ...b, error: new GatewayError('operation_removed', { message: `${op.id} is unavailable during a scheduled brownout until ${b.until}${removedOn}${use}.` }) })),
  };
}

function create(config: DeprecationConfig, env: PolicyEnv) {
  const plans = apiOf(env).operations.map((op) => planOf(config, op));
  const now = env.now ?? Date.now;
  const planFor = (ex: Exchange) => plans[(ex.operation as ApiOperation | undefined)?.index ?? -1];
  return {
    name: 'deprecation',
    annotate(ex: Exchange): void {
      const plan = planFor(ex);
      if (plan !== undefined) Object.assign(ex.responseHeaders, plan.headers);
    },
    onRequest(ex: Exchange): Decision {
      const plan = planFor(ex);
      if (plan === undefined) return undefined;
      const trace = ex.trace;
      trace?.event(TRACE_EVENTS.deprecated, plan.traced);
      const t = now();
      if (config.removeAfterSunset && t >= plan.sunset) return plan.removed;
      for (const b of plan.brownouts) {
        if (t >= b.start && t < b.end) {
          trace?.event(TRACE_EVENTS.brownout, { 'gateway.brownout.until': b.until });
          return b.error;
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
