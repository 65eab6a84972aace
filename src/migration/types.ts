/**
 * The words the migration lane's parts share: the side a request goes to, an answer as the client
 * would get it, the outcome of comparing two, and what the lane records (`Recorder`: the tally
 * behind /migration, the metrics and `petstore-gateway migration report`).
 */
import type { Mode } from './schema.js';

export type { Mode };

/** Which upstream: `legacy` (the policy file's `upstream`, the system of record) or `next`. */
export type Side = 'legacy' | 'next';

/**
 * One answer as the client gets it (or would have got it): after the response phase (list cut,
 * status filter, unknown fields, the response contract, error rewriting). `code`: the Error
 * shape's code of a non-2xx. `body`: the bytes; `truncated` when the gateway held only a part.
 */
export interface ClientView {
  readonly status: number;
  readonly code: string | undefined;
  readonly body: Buffer;
  readonly truncated: boolean;
}

/** One difference kept as a sample: the field path and both values, redacted and cut short. */
export interface Sample {
  readonly path: string;
  readonly legacy: string;
  readonly next: string;
}

/**
 * The outcome of comparing two answers. `paths`: where they differ, each once, array indices
 * written `[*]` (`$.name`, `$[*].status`; `status` and `code` for the status and the Error code;
 * `$` for bodies that are not both JSON); empty when equal. `samples`: a few of them with values.
 */
export interface Comparison {
  readonly equal: boolean;
  readonly paths: readonly string[];
  readonly samples: readonly Sample[];
}

/** Why a request sent to `next` was answered from legacy instead (split and next modes). */
export type FallbackReason = 'refused' | 'reset' | 'timeout' | 'invalid_response' | 'tls' | 'contract' | 'server_error' | 'open_circuit';

/**
 * Why a shadowed request was not compared: its copy was not sent (`in_flight`: maxInFlight copies
 * were waiting; `body`: its body is over shadow.maxBodyBytes; `method`: not GET or HEAD, and `next`
 * is no sandbox; `sampled_out`: outside shadow.percent), or an answer could not be compared
 * (`answer_too_large`: over shadow.maxAnswerBytes; `legacy_failed`: legacy failed, or was not in
 * within shadow.timeoutMs; `compare_failed`: the comparison itself threw, which no known input
 * does). A copy `next` failed is counted by `nextFailed` instead.
 */
export type DropReason = 'in_flight' | 'body' | 'method' | 'sampled_out' | 'answer_too_large' | 'legacy_failed' | 'compare_failed';

/** What the lane tells its tally, per operation (operationId). */
export interface Recorder {
  /** A request was routed to `side` (whatever mode), and answered the client in `ms` (undefined: it failed). */
  routed(operation: string, side: Side, ms: number | undefined): void;
  /** A request sent to `next` failed in a way safe to repeat and was answered from legacy. */
  fallback(operation: string, reason: FallbackReason): void;
  /** A shadow copy was not sent. */
  dropped(operation: string, reason: DropReason): void;
  /** A shadow copy's answer was compared with legacy's; `legacyMs` and `nextMs` each call's duration. */
  compared(operation: string, comparison: Comparison, legacyMs: number, nextMs: number): void;
  /** `next` failed a call (shadow copy or routed request): refused, reset, timeout, invalid_response, tls. */
  nextFailed(operation: string, kind: string): void;
  /** `next` answered outside the interface; `rule`: what broke, short (a field path and kind, or `status`, `content-type`). */
  nextViolation(operation: string, rule: string): void;
}
