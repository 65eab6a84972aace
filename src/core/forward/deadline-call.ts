/**
 * What the response-head and total deadlines share: a call on one deadline list for every call
 * (src/core/deadlines.ts: nothing per call but the wrapper), taken off the list when the call fails
 * or is aborted, failed with the layer's own kind when the deadline falls due. Each layer says when
 * else its deadline is met (the head arrived; the answer ended).
 */
import { DeadlineList, type Clock, type Deadlined, type DeadlineOwner } from '../deadlines.js';
import { UpstreamFailure, type AbortReason, type FailureKind } from '../upstream.js';
import { Wrapper } from './layer.js';

export abstract class DeadlinedCall extends Wrapper implements Deadlined {
  deadlinePrev: Deadlined | undefined = undefined;
  deadlineNext: Deadlined | undefined = undefined;
  deadlineAt = 0;
  deadlineList: DeadlineOwner | undefined = undefined;

  /** The failure this deadline gives the call (a getter on the prototype: no field per call). */
  protected abstract get kind(): FailureKind;

  /** The deadline is met: off the list. */
  protected met(): void {
    this.deadlineList?.remove(this);
  }

  override onFailure(failure: UpstreamFailure): void {
    this.met();
    super.onFailure(failure);
  }

  override abort(reason?: AbortReason): void {
    this.met();
    super.abort(reason);
  }

  expire(): void {
    this.fail(new UpstreamFailure(this.kind));
  }
}

function due(call: DeadlinedCall): undefined {
  call.expire();
  return undefined;
}

/**
 * The one list of a deadline layer: every call waits `ms`. Each layer writes its own `send` with
 * its own `new` of its own class: one `send` shared by both deadline layers would construct two
 * classes from one site, which V8 does not inline (a generic construct per call).
 */
export function deadlineList(ms: number, clock: Clock): DeadlineList<DeadlinedCall> {
  return new DeadlineList<DeadlinedCall>(ms, due, clock);
}
