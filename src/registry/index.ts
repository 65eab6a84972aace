/**
 * The registries of this process: one per Redis and prefix, opened by the first policy that names
 * it and shared by every reload (a reload must not open a second connection or lose the local
 * copy), closed once at shutdown.
 */
import type { PolicyLog } from '../core/policy.js';
import { KeyRegistry } from './registry.js';
import type { RegistryConfig } from './types.js';

export { KeyRegistry } from './registry.js';
export { RegistryError, REGISTRY_DEFAULTS, EXPORT_FORMAT, type RegistryConfig, type RegistryStatus, type RegistryExport, type NewKeyInput } from './types.js';
export { KEY_PREFIX, KEY_REGEX_SOURCE, isWellFormedKey, claimsRegistryFormat, newRegistryKey } from './format.js';
export type { KeyInfo } from './records.js';
export { REVOKED_KEPT, type OwnerPatch, type Revocation } from './who-to-tell.js';

const open = new Map<string, KeyRegistry>();
let log: PolicyLog | undefined;

/** Where registries report that Redis is unreachable; set once at startup. */
export function setRegistryLog(l: PolicyLog | undefined): void {
  log = l;
}

/** The registry a config names, opened on first use (following changes) and shared afterwards. */
export function openRegistry(config: RegistryConfig, env: Readonly<Record<string, string | undefined>> = process.env): KeyRegistry {
  const id = JSON.stringify([config.redis, config.prefix]);
  let r = open.get(id);
  if (r === undefined) {
    r = new KeyRegistry(config, { env, log });
    open.set(id, r);
  }
  return r;
}

/** The open registries (the admin API takes the first: a policy names at most one). */
export function openRegistries(): KeyRegistry[] {
  return [...open.values()];
}

/** Waits until every open registry has its first copy (bounded by `timeoutMs`); true when all did. */
export async function registriesReady(timeoutMs = 2000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((r) => (timer = setTimeout(() => r(false), timeoutMs)));
  const all = Promise.all([...open.values()].map((r) => r.ready)).then(() => true as const);
  try {
    return await Promise.race([all, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Closes every registry (shutdown, after the drain). */
export async function closeRegistries(): Promise<void> {
  const closing = [...open.values()].map((r) => r.close());
  open.clear();
  await Promise.all(closing);
}
