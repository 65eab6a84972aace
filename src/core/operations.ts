/**
 * The core's view of an interface: its operations and the router that maps a request line to
 * them. The core knows no operation of its own: the gateway hands it an `Interface`, compiled from
 * the interface document (src/api/), so what is a known path, a wrong method or an unknown path is
 * decided in one place, the router, for the chain (every engine) and the reference backend.
 *
 * A router matches strictly on the raw (not decoded) path. The upstream path is rebuilt from the
 * operation (`operationPath`), never copied from the client's path, so no path trick can reach an
 * upstream path that the interface does not list.
 */

export interface Operation {
  /** The document's operationId. */
  readonly id: string;
  readonly method: string;
  /** Whether the request carries a body the gateway must read. */
  readonly hasBody: boolean;
  /**
   * The name of the operation's one path parameter, as the document writes it; undefined: its path
   * has none. Its raw value travels as `param` (RouteMatch, UpstreamRequest), so the core's types
   * name no field of an interface. Present on every operation (undefined when none), so operation
   * objects share one shape and the hot path's property reads stay monomorphic.
   */
  readonly paramName: string | undefined;
  /** The route label for metrics and the access log: the path template with the base path (bounded). */
  readonly label: string;
  /** The upstream path below the base address before the parameter's value, and after it. */
  readonly pathPrefix: string;
  readonly pathSuffix: string;
}

export type RouteMatch =
  | {
      readonly kind: 'operation';
      readonly operation: Operation;
      /** The raw value of the operation's path parameter (`operation.paramName`), unchecked. */
      readonly param?: string;
    }
  /** A known path with another method: `allow` for the Allow field, `label` the path's route label. */
  | { readonly kind: 'method_not_allowed'; readonly allow: string; readonly label: string }
  | { readonly kind: 'not_found' };

/** The port the gateway hands the core: a request's method and raw path to an operation, a 405 or a 404. */
export interface Router {
  match(method: string, path: string): RouteMatch;
}

/** An interface as the core needs it: its router, its operations and its base path. */
export interface Interface {
  readonly router: Router;
  readonly operations: readonly Operation[];
  /** The path prefix of the base address (`/v1`): every route starts with it. */
  readonly basePath: string;
}

/** The route label of every request that names no path of the interface. */
export const UNKNOWN_ROUTE = 'unknown';

/** Splits a request target into its raw path and raw query (without the '?'). */
export function splitTarget(target: string): { path: string; query: string } {
  const q = target.indexOf('?');
  return q === -1 ? { path: target, query: '' } : { path: target.slice(0, q), query: target.slice(q + 1) };
}

/** The raw path parameter of a route, not yet checked: the `route` policy checks its type. */
export function paramOf(route: RouteMatch): string | undefined {
  return route.kind === 'operation' ? route.param : undefined;
}

/** The path of an operation below the base address, as the upstream receives it. */
export function operationPath(operation: Operation, param: string | undefined): string {
  return operation.paramName === undefined ? operation.pathPrefix : operation.pathPrefix + (param ?? '') + operation.pathSuffix;
}

/** The route label of a match: the operation's template, the path's for a 405, else `unknown`. */
export function routeLabel(route: RouteMatch): string {
  return route.kind === 'operation' ? route.operation.label : route.kind === 'method_not_allowed' ? route.label : UNKNOWN_ROUTE;
}
