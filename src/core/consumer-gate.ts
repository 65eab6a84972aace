/**
 * The per-consumer in-flight bound (`server.maxInFlightPerConsumer`): at most N requests of one
 * consumer (the consumer the identifying policy declares: auth's key id) between passing their
 * request phase and the end of their answer. Past it, a request waits in its consumer's queue, in
 * arrival order, unprocessed (its body unread, nothing sent upstream), and the front stops reading
 * the connection it came on, so a flooding consumer's further bytes stay in the kernel and on its
 * own side. A request that waited `queueMs` is answered 429 `too_many_in_flight` with Retry-After:
 * the consumer is over its own share, which is its doing, not the gateway's (503 would tell load
 * balancers and clients that the instance is unwell).
 *
 * Per request this costs one Map lookup while the consumer has other requests in flight (the
 * request keeps its consumer's tally); nothing is allocated unless the request has to wait or its
 * consumer had nothing in flight. The queue's deadlines share one list and one timer (core/deadlines.ts).
 */
import { DeadlineList, REAL_CLOCK, type Clock, type DeadlineOwner, type Deadlined } from './deadlines.js';

/** The bound's settings (from `server`); fixed for the life of the process. */
export interface ConsumerBound {
  /** Most requests of one consumer in flight at once. */
  readonly maxInFlight: number;
  /** Most milliseconds a request waits for a place before its 429. */
  readonly queueMs: number;
}

/** A request as the gate sees it: told when it got its place, or that it waited too long. */
export interface GateEntry {
  /** It holds a place now (it must `leave` once done). */
  admitted(): void;
  /** It waited `queueMs` without a place: it holds none, and is off the queue. */
  expired(): void;
}

/**
 * One consumer's share: the places it holds and its requests waiting, oldest first. A request
 * holding a place keeps its tally, so giving the place back looks nothing up; the gate's map holds
 * a tally only while the consumer has a request in flight or waiting.
 */
export class Tally {
  inFlight = 0;
  queue: Waiting[] | undefined = undefined;

  constructor(readonly consumer: string) {}
}

/** A request waiting for a place: on its consumer's queue and on the deadline list. */
export class Waiting implements Deadlined {
  deadlinePrev: Deadlined | undefined = undefined;
  deadlineNext: Deadlined | undefined = undefined;
  deadlineAt = 0;
  deadlineList: DeadlineOwner | undefined = undefined;

  constructor(
    readonly tally: Tally,
    readonly entry: GateEntry,
  ) {}

  get consumer(): string {
    return this.tally.consumer;
  }
}

/** How many requests the gate made wait, and how many of those waited too long (the overflow metric). */
export interface GateCounts {
  readonly queued: number;
  readonly expired: number;
}

export class ConsumerGate {
  /** Consumer -> its tally, while it has a request in flight or waiting. */
  private readonly tallies = new Map<string, Tally>();
  private readonly deadlines: DeadlineList<Waiting>;
  private queued = 0;
  private expiredCount = 0;

  constructor(
    readonly bound: ConsumerBound,
    clock: Clock = REAL_CLOCK,
  ) {
    this.deadlines = new DeadlineList<Waiting>(bound.queueMs, (w) => this.expire(w), clock);
  }

  /**
   * Takes a place of `consumer` for `entry`: the consumer's `Tally` when it got one now (`leave`
   * takes it back); else `entry` waits, and the returned `Waiting` is what `cancel` takes should
   * its client leave first.
   */
  take(consumer: string, entry: GateEntry): Tally | Waiting {
    let tally = this.tallies.get(consumer);
    if (tally === undefined) this.tallies.set(consumer, (tally = new Tally(consumer)));
    // While any request waits, the consumer's places are all taken (a freed place goes to the
    // oldest waiting at once), so a newcomer cannot overtake the queue.
    if (tally.inFlight < this.bound.maxInFlight) {
      tally.inFlight++;
      return tally;
    }
    const w = new Waiting(tally, entry);
    (tally.queue ??= []).push(w);
    this.deadlines.add(w);
    this.queued++;
    return w;
  }

  /** `take`, answering undefined when `entry` got a place now (for tests and tools). */
  enter(consumer: string, entry: GateEntry): Waiting | undefined {
    const got = this.take(consumer, entry);
    return got instanceof Waiting ? got : undefined;
  }

  /**
   * A request holding a place of a consumer (its tally, or the consumer's name) is done: the place
   * goes to its oldest waiting request, or is freed.
   */
  leave(place: Tally | string): void {
    const tally = typeof place === 'string' ? this.tallies.get(place) : place;
    if (tally === undefined) return;
    const next = tally.queue?.shift();
    if (next !== undefined) {
      if (tally.queue?.length === 0) tally.queue = undefined;
      this.deadlines.remove(next);
      next.entry.admitted();
      return;
    }
    tally.inFlight = Math.max(0, tally.inFlight - 1);
    this.forget(tally);
  }

  /** A waiting request whose client left: off the queue, holding nothing. */
  cancel(w: Waiting): void {
    this.deadlines.remove(w);
    this.unqueue(w);
  }

  /** Places taken by `consumer` now (for tests and the docs' examples). */
  inFlightOf(consumer: string): number {
    return this.tallies.get(consumer)?.inFlight ?? 0;
  }

  /** Requests of `consumer` waiting now. */
  waitingOf(consumer: string): number {
    return this.tallies.get(consumer)?.queue?.length ?? 0;
  }

  get counts(): GateCounts {
    return { queued: this.queued, expired: this.expiredCount };
  }

  private expire(w: Waiting): undefined {
    this.unqueue(w);
    this.expiredCount++;
    w.entry.expired();
    return undefined;
  }

  private unqueue(w: Waiting): void {
    const tally = w.tally;
    const queue = tally.queue;
    if (queue === undefined) return;
    const i = queue.indexOf(w);
    if (i >= 0) queue.splice(i, 1);
    if (queue.length === 0) tally.queue = undefined;
    this.forget(tally);
  }

  /** Drops a tally with nothing in flight and nothing waiting: the map holds active consumers only. */
  private forget(tally: Tally): void {
    if (tally.inFlight === 0 && tally.queue === undefined && this.tallies.get(tally.consumer) === tally) this.tallies.delete(tally.consumer);
  }
}
