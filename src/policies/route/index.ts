/**
 * The `route` policy: a request must name an operation of the interface. It runs right after `auth`
 * so that only authenticated clients learn which paths exist: 404 for an unknown path, 405 with
 * `Allow` (RFC 9110 section 15.5.6) for a known path with another method. HEAD and OPTIONS are not
 * operations of the interface and get 405 like any other method. A getPet petId that is not an
 * int64 is an unknown animal: 404 pet_not_found.
 */
import { isInt64Text } from '../../core/contract.js';
import { GatewayError } from '../../core/errors.js';
import type { SchemaType } from '../../core/options.js';
import type { Decision, Exchange, PolicyModule } from '../../core/policy.js';

/** No options: an empty mapping (or none) is the only valid section. */
export const schema = { type: 'object', additionalProperties: false, properties: {} } as const;

export type RouteConfig = SchemaType<typeof schema>;

const notFound = new GatewayError('not_found');
const petNotFound = new GatewayError('pet_not_found');
const notAllowed = new Map<string, GatewayError>();

function methodNotAllowed(allow: string): GatewayError {
  let err = notAllowed.get(allow);
  if (err === undefined) {
    err = new GatewayError('method_not_allowed', { headers: { allow } });
    notAllowed.set(allow, err);
  }
  return err;
}

export const route: PolicyModule<RouteConfig, 'route'> = {
  name: 'route',
  description: 'Unknown paths get 404, known paths with another method 405, a petId that is not an int64 404. No options.',
  schema,
  create: () => ({
    name: 'route',
    onRequest(ex: Exchange): Decision {
      const r = ex.route;
      if (r.kind === 'operation') {
        // getPet's one parameter is "petId: integer, int64": any other segment identifies no
        // animal. The interface lists no 400 for getPet, so this is its 404, answered without
        // calling the upstream.
        return r.param !== undefined && !isInt64Text(r.param) ? petNotFound : undefined;
      }
      return r.kind === 'not_found' ? notFound : methodNotAllowed(r.allow);
    },
  }),
};
