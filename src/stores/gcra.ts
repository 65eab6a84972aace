/**
 * GCRA, the generic cell rate algorithm (ITU-T I.371; as in redis-cell and `throttled`): one stored
 * number per key, the theoretical arrival time (TAT) of the next request at the sustained rate.
 *
 * `limit` requests per `windowMs` means one request every T = windowMs / limit, with a burst of
 * `limit` at once (burst tolerance windowMs - T). Unlike a fixed window, a client that spent its
 * burst at the end of one window gets only what it has earned since (one request per T) at the
 * start of the next: never 2x at a boundary. Retry-After is exact: the moment the TAT
 * has come back within the tolerance.
 *
 * The same arithmetic runs in Lua in the Redis store (src/stores/redis.ts); keep the two equal.
 */
import type { RateDecision, RateLimitRule } from './types.js';

/**
 * Floating-point slack (milliseconds): windowMs / limit is not exact in binary (60000 / 7), and
 * `limit` additions of it may land a hair past windowMs. 10 µs is far above the rounding error at
 * epoch-milliseconds magnitudes (about 0.2 µs) and far below any interval a client could exploit.
 */
export const EPSILON_MS = 0.01;

/** A decision and the TAT to store when it allowed the request. */
export interface GcraStep extends RateDecision {
  readonly tat: number;
}

/**
 * One request at `now` against a stored TAT (undefined: never seen, or expired).
 * Pure: the caller stores `tat` when `allowed`.
 */
export function gcra(stored: number | undefined, now: number, rule: RateLimitRule): GcraStep {
  const interval = rule.windowMs / rule.limit;
  const tat = stored === undefined || stored < now ? now : stored;
  const next = tat + interval;
  if (next - now > rule.windowMs + EPSILON_MS) {
    // Refused: the request is allowed once next - windowMs <= now.
    return { allowed: false, remaining: 0, resetMs: tat - now, retryAfterMs: next - rule.windowMs - now, tat };
  }
  // Never more than limit - 1 after this request: the slack is larger than an interval at huge limits.
  const remaining = Math.min(Math.floor((rule.windowMs + EPSILON_MS - (next - now)) / interval), rule.limit - 1);
  return { allowed: true, remaining: Math.max(remaining, 0), resetMs: next - now, retryAfterMs: 0, tat: next };
}
