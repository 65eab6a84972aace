/**
 * The exchange: the life of one client request, in one place, whatever front received it and
 * whatever transport reaches the upstream (Envoy's router is the model):
 *
 *   client request -> request policies -> [body -> body policies] -> forwarding layers -> Upstream port
 *                  -> response policies -> client  -> observers (access log, metrics)
 *
 * Fronts (src/fronts) only turn their framework's request into a `RequestHead` and read the body
 * when asked; transports (src/upstreams) only move bytes and name failures with a `FailureKind`.
 * What happens to one call on its way (deadlines, the retry rule, breaker accounting, bounded
 * buffering) is a stack of small layers around the port (src/core/forward). What is left is the
 * exchange: the request id, the policy phases, the breaker's admission, error mapping to the
 * catalogue, writing the answer, the error barrier, and the record observers read when it ends.
 *
 * Error barrier: an exception from a policy, a transport or a hook becomes a 500 `internal_error`
 * for that request, logged once with its stack; the process keeps serving.
 *
 * This module is the exchange's public face; its parts are in src/core/exchange/:
 *
 *   ports.ts      what a front implements or hands in (ClientResponse, FrontHooks, FrontRequest)
 *                 and what a pipeline is built from (PipelineOptions, ForwardSettings, ...)
 *   pipeline.ts   Pipeline: one per server; the composed send; starts one ActiveRequest per request
 *   request.ts    ActiveRequest: start, the request phase, the consumer's place, forward, closed
 *   call.ts       ...its upstream call: the fields sent, the ForwardHandler callbacks, the endings
 *   reply.ts      ...writing its answer: sendError, a local reply, a stored answer, header assembly
 *   operation.ts  the one place that reads the operations: the upstream target, the route label
 *
 * ActiveRequest is one object per request: request.ts extends call.ts extends reply.ts.
 */
export type { ClientResponse, ForwardSettings, FrontHooks, FrontRequest, GatewaySource, GatewayView, OperatorLog, PipelineOptions } from './exchange/ports.js';
export { Pipeline } from './exchange/pipeline.js';
export { ActiveRequest } from './exchange/request.js';
export { describeCause, ERROR_BODY_CAP } from './exchange/reply.js';
