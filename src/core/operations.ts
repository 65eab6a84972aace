/**
 * The operations of the interface (docs/interface.md, "Endpoints") and the one route matcher
 * that maps a request line to them. The chain (every engine) and the reference backend use it, so what is a
 * known path, a wrong method or an unknown path is decided in one place.
 *
 * Matching is strict on the raw (not decoded) path: exactly `/v1/pets` or `/v1/pets/{segment}`,
 * case-sensitive, no trailing slash, no empty or dot segments, no `;` parameters. Anything else is
 * an unknown path (404). The upstream path is rebuilt from the operation, never copied from the
 * client's path, so no path trick can reach an upstream path that the interface does not list.
 */

export type OperationId = 'listPets' | 'createPet' | 'getPet';

export interface Operation {
  readonly id: OperationId;
  readonly method: 'GET' | 'POST';
  /** Whether the request carries a body the gateway must read (createPet only). */
  readonly hasBody: boolean;
  /**
   * The name of the operation's one path parameter, as the interface writes it (`/pets/{petId}`);
   * undefined: its path has none. Its value travels as `param` (RouteMatch, UpstreamRequest), so the
   * core's types name no field of the pet store. Present on every operation (undefined when none),
   * so the three objects share one shape and the hot path's property reads stay monomorphic.
   */
  readonly paramName: string | undefined;
}

export const OPERATIONS: Readonly<Record<OperationId, Operation>> = Object.freeze({
  listPets: { id: 'listPets', method: 'GET', hasBody: false, paramName: undefined },
  createPet: { id: 'createPet', method: 'POST', hasBody: true, paramName: undefined },
  getPet: { id: 'getPet', method: 'GET', hasBody: false, paramName: 'petId' },
});

/** The path prefix of the interface's base address ("Versioning": /v1). */
export const BASE_PATH = '/v1';
const COLLECTION = '/v1/pets';
const ITEM_PREFIX = '/v1/pets/';

/** Path segment characters we accept for a path parameter before any policy looks at it (RFC 3986 pchar, minus ';'). */
const SEGMENT = /^[A-Za-z0-9\-._~%!$&'()*+,=:@]+$/;

export type RouteMatch =
  | {
      readonly kind: 'operation';
      readonly operation: Operation;
      /** The raw value of the operation's path parameter (`operation.paramName`), unchecked. */
      readonly param?: string;
    }
  | { readonly kind: 'method_not_allowed'; readonly allow: string }
  | { readonly kind: 'not_found' };

const NOT_FOUND: RouteMatch = Object.freeze({ kind: 'not_found' });
const COLLECTION_405: RouteMatch = Object.freeze({ kind: 'method_not_allowed', allow: 'GET, POST' });
const ITEM_405: RouteMatch = Object.freeze({ kind: 'method_not_allowed', allow: 'GET' });
const LIST: RouteMatch = Object.freeze({ kind: 'operation', operation: OPERATIONS.listPets });
const CREATE: RouteMatch = Object.freeze({ kind: 'operation', operation: OPERATIONS.createPet });

/** Splits a request target into its raw path and raw query (without the '?'). */
export function splitTarget(target: string): { path: string; query: string } {
  const q = target.indexOf('?');
  return q === -1 ? { path: target, query: '' } : { path: target.slice(0, q), query: target.slice(q + 1) };
}

/** Maps a method and a raw path to an operation of the interface, a 405 or a 404. */
export function matchRoute(method: string, path: string): RouteMatch {
  if (path === COLLECTION) {
    if (method === 'GET') return LIST;
    if (method === 'POST') return CREATE;
    return COLLECTION_405;
  }
  if (path.startsWith(ITEM_PREFIX)) {
    const segment = path.slice(ITEM_PREFIX.length);
    if (!SEGMENT.test(segment) || segment === '.' || segment === '..') return NOT_FOUND;
    if (method !== 'GET') return ITEM_405;
    return { kind: 'operation', operation: OPERATIONS.getPet, param: segment };
  }
  return NOT_FOUND;
}

/**
 * The raw path parameter of a route (getPet's petId segment), not yet checked: the `route` policy
 * checks it is an int64.
 */
export function paramOf(route: RouteMatch): string | undefined {
  return route.kind === 'operation' ? route.param : undefined;
}

/** The path of an operation below the base address, as the upstream receives it: `/pets` or `/pets/{petId}`. */
export function operationPath(operation: Operation, param: string | undefined): string {
  return operation.paramName !== undefined ? `/pets/${param}` : '/pets';
}
