/**
 * Deadlines without a timer per request. Every request of a pipeline waits the same `headersMs`
 * for its upstream's head and the same `bodyMs` of body silence, so deadlines are set in the order
 * they fall due: one list per duration, kept in due order, and one node timer for its earliest.
 * Setting and clearing a deadline only links and unlinks the request (no Timeout object, no
 * clearTimeout); the timer fires about once per duration while traffic flows. Node's own timers
 * (a list per duration) are the model; a node Timeout per request and an IdleTimer object per
 * response cost measurably more than this list on the hot path (bench/ab.mjs).
 *
 * The items are the requests themselves (intrusive links: nothing allocated per request). When an
 * item falls due, `due(item, now)` says what happens: undefined, it expired (the owner answers the
 * timeout); a later time, it is due again then (a body that moved since, or a stream the gateway
 * holds back on purpose: the body-idle rule).
 *
 * Time comes from a `Clock` (performance.now() and node's timers by default), so the layers built
 * on these lists are tested on a clock the test moves by hand.
 */

/** Where a list reads the time and arms its one timer. */
export interface Clock {
  /** Monotonic milliseconds (performance.now() by default). */
  now(): number;
  /** Calls `fire` in about `ms` milliseconds; the returned handle goes to `clear`. */
  set(fire: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

/** The real clock: performance.now() and an unref'd node timer (a listed call keeps its socket, and so the process, alive: the timer need not). */
export const REAL_CLOCK: Clock = {
  now: () => performance.now(),
  set(fire, ms) {
    const timer = setTimeout(fire, ms);
    timer.unref();
    return timer;
  },
  clear(handle) {
    clearTimeout(handle as NodeJS.Timeout);
  },
};

/** What a list links through: fields of the item, owned by the list it is in. */
export interface Deadlined {
  deadlinePrev: Deadlined | undefined;
  deadlineNext: Deadlined | undefined;
  /** When it falls due (the list's clock, milliseconds). */
  deadlineAt: number;
  deadlineList: DeadlineOwner | undefined;
}

/** The list an item is on, as the item sees it: only to take itself off. */
export interface DeadlineOwner {
  remove(item: Deadlined): void;
}

export class DeadlineList<T extends Deadlined> implements DeadlineOwner {
  private head: Deadlined | undefined = undefined;
  private tail: Deadlined | undefined = undefined;
  private timer: unknown = undefined;
  /** When the armed timer fires (Infinity: none armed). */
  private timerAt = Infinity;

  constructor(
    /** The duration every item of this list waits. */
    readonly ms: number,
    /** An item fell due: undefined when it expired, else when it is due next (it stays listed). */
    private readonly due: (item: T, now: number) => number | undefined,
    readonly clock: Clock = REAL_CLOCK,
  ) {}

  /** Lists `item`, due `ms` from now (or at `at`); an item already listed is moved. */
  add(item: T, at: number = this.clock.now() + this.ms): void {
    item.deadlineList?.remove(item);
    item.deadlineAt = at;
    item.deadlineList = this;
    // From the tail back: nearly always the new item is the latest and goes last at once.
    let after = this.tail;
    while (after !== undefined && after.deadlineAt > at) after = after.deadlinePrev;
    item.deadlinePrev = after;
    item.deadlineNext = after === undefined ? this.head : after.deadlineNext;
    if (item.deadlineNext === undefined) this.tail = item;
    else item.deadlineNext.deadlinePrev = item;
    if (after === undefined) this.head = item;
    else after.deadlineNext = item;
    if (at < this.timerAt) this.arm(at);
  }

  /** Takes `item` off the list (nothing when it is not on it). The timer is left to find nothing due. */
  remove(item: Deadlined): void {
    if (item.deadlineList !== this) return;
    const { deadlinePrev: prev, deadlineNext: next } = item;
    if (prev === undefined) this.head = next;
    else prev.deadlineNext = next;
    if (next === undefined) this.tail = prev;
    else next.deadlinePrev = prev;
    item.deadlinePrev = undefined;
    item.deadlineNext = undefined;
    item.deadlineList = undefined;
  }

  /** How many items are listed (for tests; walks the list). */
  get size(): number {
    let n = 0;
    for (let i = this.head; i !== undefined; i = i.deadlineNext) n++;
    return n;
  }

  private arm(at: number): void {
    if (this.timer !== undefined) this.clock.clear(this.timer);
    this.timerAt = at;
    this.timer = this.clock.set(this.fire, Math.max(1, Math.ceil(at - this.clock.now())));
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = this.clock.now();
    let item = this.head;
    while (item !== undefined && item.deadlineAt <= now) {
      this.remove(item);
      const later = this.due(item as T, now);
      // Never due again at once: a `due` that answers the past cannot spin this loop.
      if (later !== undefined && item.deadlineList === undefined) this.add(item as T, Math.max(later, now + 1));
      item = this.head;
    }
    if (item !== undefined) this.arm(item.deadlineAt);
  };
}
