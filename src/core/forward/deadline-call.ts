/**
 * What the response-head and total deadlines share: a call on one deadline list for every call
 * (src/core/deadlines.ts: nothing per call but the wrapper), taken off the list when the call fails
 * or is aborted, failed with the layer's own kind when the deadline falls due. Each layer says when
 * else its deadline is met (the head arrived; the answer ended).
 */
import { DeadlineList, type Clock, type Deadlined, type DeadlineOwner } from '../deadlines.js';
import { UpstreamFailure, type AbortReason, type FailureKind } from '../upstream.js';
import { start, Wrapper, type ForwardHandler, type Layer, type Send } from './layer.js';

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

/** A layer that puts every call, wrapped by `Call`, on one list of `ms`. */
export function deadlineLayer(ms: number, clock: Clock, Call: new (handler: ForwardHandler) => DeadlinedCall): Layer {
  const list = new DeadlineList<DeadlinedCall>(ms, due, clock);
  return (next: Send): Send =>
    (request, handler: ForwardHandler) => {
      const call = new Call(handler);
      list.add(call);
      start(next, request, call);
    };
}
