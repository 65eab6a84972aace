/**
 * The lifecycle of a deprecated operation: the document's `x-sunset`, `x-successor` and
 * `x-successor-description`, each overridden by the deprecation policy's own option when set. One
 * rule for the policy's headers and 410s and for the deprecation report and metrics (src/ops).
 */
import type { ApiOperation } from './model.js';

export interface Lifecycle {
  readonly sunset: string | undefined;
  readonly successor: string | undefined;
  readonly advice: string | undefined;
}

/** The policy options that override the document's (`policies.deprecation`). */
export interface LifecycleOverrides {
  readonly sunset?: string | undefined;
  readonly successor?: string | undefined;
}

/** The lifecycle of `op`; undefined when the document does not deprecate it. */
export function lifecycleOf(op: ApiOperation, overrides: LifecycleOverrides): Lifecycle | undefined {
  const d = op.deprecation;
  if (d === undefined) return undefined;
  return { sunset: overrides.sunset ?? d.sunset, successor: overrides.successor ?? d.successor, advice: d.advice };
}

/** The deprecated operations of an interface and their sunsets. */
export function deprecatedOperations(operations: readonly ApiOperation[], overrides: LifecycleOverrides): { operation: string; sunset: string | undefined }[] {
  return operations.flatMap((op) => {
    const l = lifecycleOf(op, overrides);
    return l === undefined ? [] : [{ operation: op.id, sunset: l.sunset }];
  });
}
