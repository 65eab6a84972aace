/**
 * /readyz's `detail` with `--workers N`: each worker reports its own (src/ops/index.ts), and the
 * primary answers with one detail for the group, the worst of each field, as its metrics do
 * (the lowest `reachable`, `connected` and `fresh`, the highest age, key count and `dataLoss`).
 */
import type { ReadinessDetail } from './admin.js';

type Fields = Readonly<Record<string, unknown>>;

const isFields = (v: unknown): v is Fields => typeof v === 'object' && v !== null && !Array.isArray(v);

function parts(details: ReadonlyArray<ReadinessDetail | undefined>, name: string): Fields[] {
  return details.map((d) => d?.[name]).filter(isFields);
}

const every = (list: Fields[], k: string) => list.every((f) => f[k] === true);
const some = (list: Fields[], k: string) => list.some((f) => f[k] === true);

function highest(list: Fields[], k: string): number | null {
  let max: number | null = null;
  for (const f of list) {
    const v = f[k];
    // A worker that never read the registry (null) makes the group's age unknown.
    if (typeof v !== 'number') return null;
    max = max === null ? v : Math.max(max, v);
  }
  return max;
}

/** One detail for the group; undefined when no worker gave one. */
export function groupDetail(details: ReadonlyArray<ReadinessDetail | undefined>): ReadinessDetail | undefined {
  const up = parts(details, 'upstream');
  if (up.length === 0) return undefined;
  const out: Record<string, unknown> = {
    upstream: {
      reachable: every(up, 'reachable'),
      circuitBreaker: up.some((f) => f.circuitBreaker === 'open') ? 'open' : 'closed',
      decidesReadiness: some(up, 'decidesReadiness'),
    },
  };
  const reg = parts(details, 'keyRegistry');
  if (reg.length > 0) {
    out.keyRegistry = {
      connected: every(reg, 'connected'),
      confirmedAgeSeconds: highest(reg, 'confirmedAgeSeconds'),
      fresh: every(reg, 'fresh'),
      keys: highest(reg, 'keys'),
      dataLoss: some(reg, 'dataLoss'),
    };
  }
  return out;
}
