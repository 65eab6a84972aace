/** Defaults of the Redis store, apart from the client so the config schema can cite them without loading node-redis. */
export const REDIS_DEFAULTS = {
  prefix: 'petstore-gateway:',
  /** Short: a decision waits at most this long for Redis before onStoreError decides (never a hang). */
  commandTimeoutMs: 250,
  connectTimeoutMs: 1000,
  maxReconnectDelayMs: 2000,
  /** The shared deprecation report is written once a second per instance, not once per call. */
  ledgerFlushMs: 1000,
} as const;
