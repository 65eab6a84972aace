/**
 * The router of a compiled interface: a request's method and raw path to an operation, a 405 or a
 * 404, decided once per request from tables built at load. Matching is strict on the raw (not
 * decoded) path: a static path exactly, a path with a parameter as its prefix, one segment and its
 * suffix; case-sensitive, no trailing slash, no empty or dot segments, no `;` parameters. Anything
 * else is an unknown path (404).
 */
import type { Operation, RouteMatch, Router } from '../core/operations.js';

/** Path segment characters accepted for a path parameter before any policy looks at it (RFC 3986 pchar, minus ';'). */
const SEGMENT = /^[A-Za-z0-9\-._~%!$&'()*+,=:@]+$/;

const NOT_FOUND: RouteMatch = Object.freeze({ kind: 'not_found' });

/** One path of the interface: its operations by method and its 405. */
interface PathRoutes {
  readonly byMethod: ReadonlyMap<string, Operation>;
  readonly notAllowed: RouteMatch;
}

interface ParamPath extends PathRoutes {
  /** The full path before the parameter's segment and after it (base path included). */
  readonly prefix: string;
  readonly suffix: string;
}

function routesOf(label: string, ops: readonly Operation[]): PathRoutes {
  const byMethod = new Map(ops.map((o) => [o.method, o]));
  return { byMethod, notAllowed: Object.freeze({ kind: 'method_not_allowed', allow: [...byMethod.keys()].join(', '), label }) };
}

export class InterfaceRouter implements Router {
  /** Static paths: the operation for each method, made once (a match allocates nothing). */
  private readonly statics = new Map<string, { readonly matches: ReadonlyMap<string, RouteMatch>; readonly notAllowed: RouteMatch }>();
  private readonly params: ParamPath[] = [];

  /** `operations` with their full path (base path included) as `label`. */
  constructor(operations: readonly Operation[]) {
    const byLabel = new Map<string, Operation[]>();
    for (const op of operations) byLabel.set(op.label, [...(byLabel.get(op.label) ?? []), op]);
    for (const [label, ops] of byLabel) {
      const routes = routesOf(label, ops);
      const open = label.indexOf('{');
      if (open === -1) {
        const matches = new Map<string, RouteMatch>();
        for (const [method, operation] of routes.byMethod) matches.set(method, Object.freeze({ kind: 'operation', operation }));
        this.statics.set(label, { matches, notAllowed: routes.notAllowed });
      } else {
        this.params.push({ ...routes, prefix: label.slice(0, open), suffix: label.slice(label.indexOf('}', open) + 1) });
      }
    }
  }

  match(method: string, path: string): RouteMatch {
    const s = this.statics.get(path);
    if (s !== undefined) return s.matches.get(method) ?? s.notAllowed;
    for (const p of this.params) {
      if (path.length <= p.prefix.length + p.suffix.length || !path.startsWith(p.prefix) || !path.endsWith(p.suffix)) continue;
      const segment = path.slice(p.prefix.length, path.length - p.suffix.length);
      if (!SEGMENT.test(segment) || segment === '.' || segment === '..') continue;
      const operation = p.byMethod.get(method);
      return operation === undefined ? p.notAllowed : { kind: 'operation', operation, param: segment };
    }
    return NOT_FOUND;
  }
}
