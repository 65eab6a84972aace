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
}

export const OPERATIONS: Readonly<Record<OperationId, Operation>> = Object.freeze({
  listPets: { id: 'listPets', method: 'GET', hasBody: false },
  createPet: { id: 'createPet', method: 'POST', hasBody: true },
  getPet: { id: 'getPet', method: 'GET', hasBody: false },
});

/** The path prefix of the interface's base address ("Versioning": /v1). */
export const BASE_PATH = '/v1';
const COLLECTION = '/v1/pets';
const ITEM_PREFIX = '/v1/pets/';

/** Path segment characters we accept for petId before any policy looks at it (RFC 3986 pchar, minus ';'). */
const SEGMENT = /^[A-Za-z0-9\-._~%!$&'()*+,=:@]+$/;

export type RouteMatch =
  | { readonly kind: 'operation'; readonly operation: Operation; readonly petId?: string }
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
    return { kind: 'operation', operation: OPERATIONS.getPet, petId: segment };
  }
  return NOT_FOUND;
}

/** The raw petId path segment of a getPet route (not yet checked as an int64: the `route` policy does). */
export function petIdOf(route: RouteMatch): string | undefined {
  return route.kind === 'operation' ? route.petId : undefined;
}

/** The path of an operation below the base address, as the upstream receives it: `/pets` or `/pets/{petId}`. */
export function operationPath(operation: Operation, petId: string | undefined): string {
  return operation.id === 'getPet' ? `/pets/${petId}` : '/pets';
}
