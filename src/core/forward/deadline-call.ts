/**
 * What the deadline layers share: a call's place on one deadline list (src/core/deadlines.ts: one
 * list per duration, one node timer for its earliest). The call object is on several lists at once
 * (the head, total and body idle deadlines), so each layer links it through a small link of its
 * own. A link that falls due fails its call with the layer's kind.
 */
import { DeadlineList, type Clock, type Deadlined, type DeadlineOwner } from '../deadlines.js';
import { UpstreamFailure, type FailureKind } from '../upstream.js';
import type { Call } from './layer.js';

export class DeadlineLink implements Deadlined {
  deadlinePrev: Deadlined | undefined = undefined;
  deadlineNext: Deadlined | undefined = undefined;
  deadlineAt = 0;
  deadlineList: DeadlineOwner | undefined = undefined;

  constructor(readonly call: Call) {}
}

/** The one list of a deadline layer: every call waits `ms`, then fails with `kind`. */
export function deadlineList(ms: number, clock: Clock, kind: FailureKind): DeadlineList<DeadlineLink> {
  return new DeadlineList<DeadlineLink>(
    ms,
    (link) => {
      link.call.fail(new UpstreamFailure(kind));
      return undefined;
    },
    clock,
  );
}
