/**
 * Latency kept as counts in fixed log-scale buckets, the same in every process: eight buckets per
 * doubling from 0.01 ms (each about 9% wide), so counts from many processes and instances merge
 * by adding them (HdrHistogram's and Prometheus native histograms' rule: fixed boundaries, sparse
 * counts), and a percentile read from them is within about 4.5% of the true value.
 */

/** Buckets per doubling of the value. */
export const BUCKETS_PER_DOUBLING = 8;
/** The lower bound of bucket 1; bucket 0 holds everything below (including 0). */
export const MIN_MS = 0.01;
/** The last bucket (about 31 minutes): a longer duration counts there. */
export const MAX_BUCKET = 220;

/** The bucket of a duration in milliseconds (a value that is no finite number counts in bucket 0). */
export function bucketOf(ms: number): number {
  if (!(ms > MIN_MS) || !Number.isFinite(ms)) return ms === Infinity ? MAX_BUCKET : 0;
  return Math.min(MAX_BUCKET, Math.floor(Math.log2(ms / MIN_MS) * BUCKETS_PER_DOUBLING));
}

/** The value a bucket stands for: its geometric middle. */
export function bucketValue(bucket: number): number {
  return MIN_MS * 2 ** ((bucket + 0.5) / BUCKETS_PER_DOUBLING);
}

/** Sparse counts: bucket index (as a string, JSON's keys) to count. */
export type Buckets = Readonly<Record<string, number>>;

/** How many durations the buckets hold. */
export function bucketCount(buckets: Buckets): number {
  let n = 0;
  for (const v of Object.values(buckets)) n += v;
  return n;
}

/**
 * The `q` quantile (0.5, 0.99) of the counted durations, in milliseconds rounded to 0.01 ms: the
 * middle of the bucket that holds the ceil(q * n)-th smallest; null when nothing was counted.
 */
export function quantile(buckets: Buckets, q: number): number | null {
  const entries = Object.entries(buckets)
    .map(([k, v]) => [Number(k), v] as const)
    .filter(([k, v]) => Number.isInteger(k) && k >= 0 && k <= MAX_BUCKET && v > 0)
    .sort((a, b) => a[0] - b[0]);
  let total = 0;
  for (const [, v] of entries) total += v;
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (const [k, v] of entries) {
    seen += v;
    if (seen >= rank) return Math.round(bucketValue(k) * 100) / 100;
  }
  return null;
}
