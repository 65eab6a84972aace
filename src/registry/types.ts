/**
 * What the key registry's users handle (src/registry/registry.ts has the registry itself): its
 * options and their defaults, its status, the error a change is refused with, and the format of
 * its backups.
 */
import type { PolicyLog } from '../core/policy.js';
import type { RedisConnectionConfig } from '../stores/connection.js';
import type { KeyRecord } from './records.js';

export interface RegistryConfig {
  readonly redis: RedisConnectionConfig;
  /** Prefix of every Redis key and channel of the registry; null: the deployment's (PETSTORE_REDIS_PREFIX). */
  readonly prefix: string | null;
  /** How often the local copy is checked against Redis (a safety net under pub/sub). */
  readonly syncIntervalMs: number;
  /** How long the local copy answers after it was last confirmed current; null: for ever. */
  readonly maxStaleSeconds: number | null;
  /** Longest wait for one Redis command (a change, a sync, a list). */
  readonly commandTimeoutMs: number;
}

export const REGISTRY_DEFAULTS = {
  prefix: 'petstore-gateway:',
  syncIntervalMs: 5000,
  maxStaleSeconds: 21600,
  commandTimeoutMs: 1000,
  overlapSeconds: 86400,
  lastUsedFlushMs: 1000,
} as const;

/** A change the registry refused; `reason` maps to an HTTP status in one place (admin-keys.ts). */
export class RegistryError extends Error {
  constructor(
    readonly reason: 'exists' | 'unknown' | 'unavailable' | 'conflict' | 'invalid',
    message: string,
    /** What the operator can do about it, for the admin API's message (a kept key after a data loss). */
    readonly hint?: string,
  ) {
    super(message);
    this.name = 'RegistryError';
  }
}

/** What a process knows of its registry, for metrics and /readyz (docs/keys.md). */
export interface RegistryStatus {
  /** Which Redis: its URL without a password, or the Sentinel or Cluster nodes. */
  readonly redis: string;
  /** Whether the connection to Redis is up now. */
  readonly connected: boolean;
  /** Seconds since the local copy was last confirmed current; null: never. */
  readonly confirmedAgeSeconds: number | null;
  /** Whether the local copy may answer (confirmed within maxStaleSeconds). */
  readonly fresh: boolean;
  /** Key ids in the local copy. */
  readonly keys: number;
  /** Whether Redis came back without the registry's data and this process keeps its copy. */
  readonly dataLoss: boolean;
  /** Data losses detected since the process started. */
  readonly dataLossDetected: number;
}

/** The format line of an export file (`keys export`, `keys import`). */
export const EXPORT_FORMAT = 'petstore-gateway-keys/1';

/** A backup of the registry: hashed records only, never a secret. */
export interface RegistryExport {
  readonly format: typeof EXPORT_FORMAT;
  readonly exported: string;
  readonly records: readonly KeyRecord[];
}

export interface RegistryOptions {
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly log?: PolicyLog | undefined;
  readonly now?: () => number;
  /** Whether to keep a live local copy (a gateway) or only make changes (the CLI). */
  readonly follow?: boolean;
}

export interface NewKeyInput {
  readonly id: string;
  readonly operations?: readonly string[] | undefined;
  readonly scopes?: readonly string[] | undefined;
  readonly expires?: string | undefined;
  readonly owner?: string | undefined;
  readonly contact?: string | undefined;
}
