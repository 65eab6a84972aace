/**
 * The migration lane as the composition root opens it (src/gateway.ts), once per serving process:
 * `next`'s forwarding layers around its transport (its own breaker and deadlines), the tally and
 * its report (view.ts), and the lane. What a reload changes is read through `rules`.
 */
import { CircuitBreaker } from '../core/breaker.js';
import { forwarding, type Send, type SendWrapper } from '../core/forward/index.js';
import type { Upstream } from '../core/upstream.js';
import { MigrationLane } from './lane.js';
import type { MigrationRules } from './rules.js';
import type { MigrationConfig } from './schema.js';
import { openMigrationView, type MigrationLaneView, type ViewOptions } from './view.js';

/** What the lane reads of `next`'s section (the options of `upstream`, and `sandbox`). */
export interface NextView {
  readonly url: string;
  readonly sandbox: boolean;
  readonly timeouts: { readonly headersMs: number; readonly bodyMs: number; readonly totalMs: number };
  readonly retryIdempotent: boolean;
  readonly maxBufferedBytes: number;
  readonly circuitBreaker: { readonly failures: number; readonly coolDownMs: number } | null;
}

export interface OpenedMigration {
  readonly view: MigrationLaneView;
  readonly lane: MigrationLane;
  /** The lane around `inner` (legacy's wrapper of send, the response cache, when there is one). */
  readonly wrapper: (inner: SendWrapper | undefined) => SendWrapper;
  /** `next`'s breaker, when it has one. */
  readonly breaker: CircuitBreaker | undefined;
  close(): Promise<void>;
}

export interface OpenOptions extends ViewOptions {
  readonly config: MigrationConfig;
  readonly next: NextView;
  /** `next`'s transport, made for its origin. */
  readonly upstream: Upstream;
  /** The path prefix of legacy's URL (`/v1`, no trailing slash). */
  readonly legacyBasePath: string;
  readonly rules: () => MigrationRules | undefined;
  /** A wrapper of `next`'s transport that sees each attempt of a request routed there (tracing). */
  readonly attempts?: ((send: Send) => Send) | undefined;
}

const NONE: readonly string[] = Object.freeze([]);

export function openMigration(o: OpenOptions): OpenedMigration {
  const n = o.next;
  const breaker = n.circuitBreaker === null ? undefined : new CircuitBreaker(n.circuitBreaker, o.now);
  const layers = { headersMs: n.timeouts.headersMs, bodyMs: n.timeouts.bodyMs, totalMs: n.timeouts.totalMs, retryIdempotent: n.retryIdempotent };
  const next: Send = forwarding(o.upstream, layers, breaker).send;
  // A request routed to `next` is the client's own: its attempts are traced; a shadow copy is not.
  const routedNext = o.attempts === undefined ? undefined : forwarding(o.upstream, layers, breaker, undefined, undefined, o.attempts).send;
  const view = openMigrationView(o.config, o);
  const lane = new MigrationLane({
    rules: o.rules,
    next,
    routedNext,
    legacyBasePath: o.legacyBasePath,
    nextBasePath: new URL(n.url).pathname.replace(/\/+$/, ''),
    sandbox: n.sandbox,
    nextMaxBytes: n.maxBufferedBytes,
    tally: view.tally,
  });
  let closing: Promise<void> | undefined;
  return {
    view,
    lane,
    breaker,
    wrapper: (inner) => ({ wrap: (call) => lane.wrap(inner === undefined ? call : inner.wrap(call)), trailing: inner?.trailing ?? NONE, account: inner?.account ?? NONE }),
    close: () => (closing ??= Promise.all([o.upstream.close(), view.close()]).then(() => undefined)),
  };
}
