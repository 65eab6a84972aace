/**
 * The one place the exchange reads the interface's operations (src/core/operations.ts): the
 * upstream request's target (`Outgoing`: the path rebuilt from the operation) and the route label
 * observers get (`routeOf`).
 */
import type { Exchange } from '../policy.js';
import { operationPath, paramOf, routeLabel, type Operation } from '../operations.js';
import type { RouteLabel } from '../record.js';
import type { UpstreamRequest } from '../upstream.js';
import type { UpstreamCall } from './call.js';

/** The route label: the operation's path template (a 405's: its path's), or `unknown` for every other path (bounded). */
export function routeOf(ex: Exchange): RouteLabel {
  return routeLabel(ex.route);
}

/**
 * The upstream request of one client request. Its headers are built when first read: a transport
 * reads them as it sends, while a request a wrapper of send answers itself is never sent.
 * Built (the path rebuilt from the operation, never copied from the client) once the request and
 * body phases passed.
 */
export class Outgoing implements UpstreamRequest {
  readonly method: string;
  readonly operation: string;
  readonly param: string | undefined;
  readonly query: string;
  readonly pathname: string;
  readonly path: string;
  readonly native: unknown;
  readonly answerRules: string | undefined;
  readonly exchange: Exchange;
  private built: Record<string, string | string[]> | undefined = undefined;
  private forwarded: Record<string, string | string[]> | undefined = undefined;

  constructor(
    private readonly active: UpstreamCall,
    op: Operation,
    basePath: string,
    readonly body: Buffer | undefined,
  ) {
    const ex = active.ex;
    this.method = op.method;
    this.operation = op.id;
    this.param = paramOf(ex.route);
    this.query = ex.upstreamQuery;
    this.pathname = basePath + operationPath(op, this.param);
    this.path = this.query === '' ? this.pathname : `${this.pathname}?${this.query}`;
    this.native = active.native;
    this.answerRules = active.answerRulesOf;
    this.exchange = ex;
  }

  get headers(): Record<string, string | string[]> {
    return (this.built ??= this.active.upstreamHeaders(this.body));
  }

  get keyFields(): Readonly<Record<string, string | string[]>> {
    return this.built ?? (this.forwarded ??= this.active.forwardedFields());
  }
}
