/**
 * Clocks a test moves by hand, for the gateway's own timers (deadline lists, the circuit breaker's
 * open window, rate-limit windows): the test says when time passes instead of sleeping through it,
 * so it neither waits nor depends on how late a loaded machine runs a timer.
 */
import type { Clock } from '../../src/core/deadlines.js';

/**
 * A `Clock` (src/core/deadlines.ts) whose timers fire only when the test advances the time.
 * `now()` starts at 1000 (any monotonic origin will do) and moves only through `advance`.
 */
export class ManualClock implements Clock {
  time = 1000;
  private timers: Array<{ at: number; fire: () => void }> = [];
  now(): number {
    return this.time;
  }
  set(fire: () => void, ms: number): unknown {
    const timer = { at: this.time + ms, fire };
    this.timers.push(timer);
    return timer;
  }
  clear(handle: unknown): void {
    this.timers = this.timers.filter((x) => x !== handle);
  }
  /** How many timers are armed (a list keeps at most one). */
  get armed(): number {
    return this.timers.length;
  }
  /** Moves the time by `ms`, firing each timer due on the way, in order (bounded). */
  advance(ms: number): void {
    const end = this.time + ms;
    for (let n = 0; n < 1000; n++) {
      const next = this.timers.filter((x) => x.at <= end).sort((a, b) => a.at - b.at)[0];
      if (next === undefined) break;
      this.timers = this.timers.filter((x) => x !== next);
      this.time = next.at;
      next.fire();
    }
    this.time = end;
  }
}

/**
 * A wall clock (milliseconds since the epoch, as `Date.now`) that moves only when the test says:
 * `now` is what a policy, a store or the circuit breaker is given in place of `Date.now`.
 */
export function manualWallClock(start = Date.now()): { readonly now: () => number; advance(ms: number): void } {
  let time = start;
  return {
    now: () => time,
    advance(ms: number) {
      time += ms;
    },
  };
}
