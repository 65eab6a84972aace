/**
 * The `route` policy: a request must name an operation of the interface. It runs right after `auth`
 * so that only authenticated clients learn which paths exist: 404 for an unknown path, 405 with
 * `Allow` (RFC 9110 section 15.5.6) for a known path with another method. HEAD and OPTIONS are not
 * operations of the interface and get 405 like any other method. A path parameter that is not of
 * its type (an int64, an int32, one of an enum) names nothing: 404, with the operation's own code
 * for 404 when the document gives one (`x-error-code`, e.g. pet_not_found).
 */
import { apiOf } from '../../api/index.js';
import type { FieldType } from '../../api/model.js';
import { isInt32Text, isInt64Text } from '../../core/contract.js';
import { GatewayError, type ErrorCode } from '../../core/errors.js';
import type { SchemaType } from '../../core/options.js';
import type { Decision, Exchange, PolicyEnv, PolicyModule } from '../../core/policy.js';

/** No options: an empty mapping (or none) is the only valid section. */
export const schema = { type: 'object', additionalProperties: false, properties: {} } as const;

export type RouteConfig = SchemaType<typeof schema>;

const notFound = new GatewayError('not_found');
const notAllowed = new Map<string, GatewayError>();

function methodNotAllowed(allow: string): GatewayError {
  let err = notAllowed.get(allow);
  if (err === undefined) {
    err = new GatewayError('method_not_allowed', { headers: { allow } });
    notAllowed.set(allow, err);
  }
  return err;
}

function checkOf(type: FieldType): (raw: string) => boolean {
  switch (type.kind) {
    case 'int64':
      return isInt64Text;
    case 'int32':
      return isInt32Text;
    case 'enum':
      return (raw) => type.values.includes(raw);
    case 'string':
      return () => true;
  }
}

function create(_config: RouteConfig, env: PolicyEnv) {
  // Per operation (by index): the check of its path parameter and the error when it fails.
  const params = apiOf(env).operations.map((op) =>
    op.pathParam === undefined ? undefined : { valid: checkOf(op.pathParam.type), error: new GatewayError((op.errorCodes[404] ?? 'not_found') as ErrorCode) },
  );
  return {
    name: 'route',
    onRequest(ex: Exchange): Decision {
      const r = ex.route;
      if (r.kind === 'operation') {
        // A path parameter of another type identifies nothing: the operation's 404, answered
        // without calling the upstream.
        if (r.param === undefined) return undefined;
        const p = params[(r.operation as { index?: number }).index ?? -1];
        return p === undefined || p.valid(r.param) ? undefined : p.error;
      }
      return r.kind === 'not_found' ? notFound : methodNotAllowed(r.allow);
    },
  };
}

export const route: PolicyModule<RouteConfig, 'route'> = {
  name: 'route',
  description: 'Unknown paths get 404, known paths with another method 405, a path parameter not of its type 404. No options.',
  schema,
  create,
};
