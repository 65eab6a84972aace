/**
 * The engines that serve clients with node:http (undici, http-proxy-3): the node front over a
 * transport, on a server with the policy's socket limits. The built-in backend replaces the
 * transport when `upstream.url` is `builtin`, whatever the engine.
 */
import type { ExchangeObserver } from '../core/record.js';
import type { OperatorLog } from '../core/exchange.js';
import type { Upstream } from '../core/upstream.js';
import { createNodeHandler, type NodeHandler } from '../fronts/node-http.js';
import { serveHandler, type NodeServerHandle } from '../fronts/node-server.js';
import { forwardSettings, GatewayHolder, type Gateway } from '../gateway.js';
import { builtinUpstream } from '../upstreams/builtin.js';

export interface EngineOptions {
  /** The operator log (5xx with their cause, crashes with their stack); nothing when absent. */
  readonly log?: OperatorLog | undefined;
  /** Receives every finished request (access log, metrics). */
  readonly observer?: ExchangeObserver | undefined;
}

export interface NodeEngine {
  readonly handler: NodeHandler;
  readonly upstream: Upstream;
  close(): Promise<void>;
}

/** A node:http request handler over the upstream `transport` makes (or the built-in backend). */
export function nodeEngine(
  gateway: Gateway | GatewayHolder,
  transport: (origin: string, gw: Gateway) => Upstream,
  options: EngineOptions = {},
): NodeEngine & { holder: GatewayHolder } {
  const holder = gateway instanceof GatewayHolder ? gateway : new GatewayHolder(gateway);
  const gw = holder.current;
  // Without the built-in backend the upstream is a URL, and compileGateway gave it an origin.
  const upstream = gw.backend !== undefined ? builtinUpstream(gw.backend) : transport(gw.upstreamOrigin!, gw);
  const { handler } = createNodeHandler({ gateways: holder, upstream, settings: forwardSettings(gw), log: options.log, observer: options.observer });
  return { handler, upstream, holder, close: () => Promise.all([upstream.close(), holder.close()]).then(() => undefined) };
}

/** The standalone server of a node engine: stops accepting, lets in-flight requests finish, closes the transport. */
export function serveNodeEngine(engine: NodeEngine & { holder: GatewayHolder }): NodeServerHandle {
  return serveHandler(engine.holder.current.config.server, engine.handler, () => engine.close());
}
