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
 * Per request this costs two Map operations on the consumer's count: nothing is allocated unless
 * the request has to wait. The queue's deadlines share one list and one timer (core/deadlines.ts).
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

/** A request waiting for a place: on its consumer's queue and on the deadline list. */
export class Waiting implements Deadlined {
  deadlinePrev: Deadlined | undefined = undefined;
  deadlineNext: Deadlined | undefined = undefined;
  deadlineAt = 0;
  deadlineList: DeadlineOwner | undefined = undefined;

  constructor(
    readonly consumer: string,
    readonly entry: GateEntry,
  ) {}
}

/** How many requests the gate made wait, and how many of those waited too long (the overflow metric). */
export interface GateCounts {
  readonly queued: number;
  readonly expired: number;
}

export class ConsumerGate {
  /** Consumer -> places taken (absent: none). */
  private readonly inFlight = new Map<string, number>();
  /** Consumer -> requests waiting, oldest first (absent: none). */
  private readonly queues = new Map<string, Waiting[]>();
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
   * Takes a place of `consumer` for `entry`: undefined when it got one now; else `entry` waits,
   * and the returned `Waiting` is what `cancel` takes should its client leave first.
   */
  enter(consumer: string, entry: GateEntry): Waiting | undefined {
    const n = this.inFlight.get(consumer) ?? 0;
    // While any request waits, the consumer's places are all taken (a freed place goes to the
    // oldest waiting at once), so a newcomer cannot overtake the queue.
    if (n < this.bound.maxInFlight) {
      this.inFlight.set(consumer, n + 1);
      return undefined;
    }
    const w = new Waiting(consumer, entry);
    let queue = this.queues.get(consumer);
    if (queue === undefined) this.queues.set(consumer, (queue = []));
    queue.push(w);
    this.deadlines.add(w);
    this.queued++;
    return w;
  }

  /** A request holding a place of `consumer` is done: the place goes to its oldest waiting request, or is freed. */
  leave(consumer: string): void {
    const queue = this.queues.get(consumer);
    const next = queue?.shift();
    if (next !== undefined) {
      if (queue?.length === 0) this.queues.delete(consumer);
      this.deadlines.remove(next);
      next.entry.admitted();
      return;
    }
    const n = (this.inFlight.get(consumer) ?? 1) - 1;
    if (n <= 0) this.inFlight.delete(consumer);
    else this.inFlight.set(consumer, n);
  }

  /** A waiting request whose client left: off the queue, holding nothing. */
  cancel(w: Waiting): void {
    this.deadlines.remove(w);
    this.unqueue(w);
  }

  /** Places taken by `consumer` now (for tests and the docs' examples). */
  inFlightOf(consumer: string): number {
    return this.inFlight.get(consumer) ?? 0;
  }

  /** Requests of `consumer` waiting now. */
  waitingOf(consumer: string): number {
    return this.queues.get(consumer)?.length ?? 0;
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
    const queue = this.queues.get(w.consumer);
    if (queue === undefined) return;
    const i = queue.indexOf(w);
    if (i >= 0) queue.splice(i, 1);
    if (queue.length === 0) this.queues.delete(w.consumer);
  }
}
