/**
 * The operator console of a serving process (docs/console.md): its data (src/ops/console) from
 * what this process knows, its fleet rollup in Redis when the shared store is Redis, and its
 * routes on the admin listener, behind the admin tokens when they are in force.
 *
 * - A single process counts its own requests (the ops' recorder); its console shows them, and,
 *   with Redis, the fleet's, and writes its heartbeat.
 * - A `--workers` primary counts nothing itself: it asks its workers for their counts (IPC) and
 *   writes the group's heartbeat; with Redis each worker sends its counts there itself
 *   (`workerConsoleFleet`), so the primary's fleet view reads them from Redis.
 */
import type { Logger } from 'pino';
import type { PolicyConfig } from '../config/types.js';
import { keysInForce } from '../policies/auth/index.js';
import { openRegistry, type KeyInfo, type Revocation } from '../registry/index.js';
import type { AdminRoutes, Readiness } from '../ops/admin.js';
import type { AdminAuthGuard } from '../ops/admin-guard.js';
import type { AdminTokens } from '../ops/admin-tokens.js';
import type { DeprecatedOperation } from '../ops/deprecations.js';
import { selfBeat } from '../ops/console/beat.js';
import { ConsoleFleet } from '../ops/console/fleet.js';
import { consoleData } from '../ops/console/index.js';
import { keysView, whoToTell } from '../ops/console/keys-view.js';
import { consoleRoutes } from '../ops/console/routes.js';
import type { ConsoleSnapshot, SnapshotSource } from '../ops/console/types.js';
import type { DeprecationUse } from '../stores/types.js';

type Env = Readonly<Record<string, string | undefined>>;

/** How often an instance writes its heartbeat; three missed: stale. */
export const BEAT_MS = 5000;

/** Nothing to send: a primary's fleet only beats (its workers send their own counts). */
const NO_COUNTS: SnapshotSource = { snapshot: () => ({ atMs: Date.now(), cells: [], daily: [], seen: [], violations: [], samples: [] }), takeDelta: () => undefined };

export interface ConsoleWiring {
  readonly config: PolicyConfig;
  readonly env: Env;
  readonly log: Logger;
  readonly version: string;
  /** 1, or N with `--workers N`. */
  readonly workers: number;
  /** The policy in force and its text (a reload replaces them). */
  readonly current: () => PolicyConfig;
  readonly text: () => string;
  /** When the last reload that took was (epoch ms), or null. */
  readonly lastReloadMs: () => number | null;
  readonly readiness: () => Promise<Readiness>;
  /** This instance's counts (its recorder's snapshot, or its workers' merged). */
  readonly local: () => Promise<ConsoleSnapshot>;
  /** The recorder whose deltas go to Redis from this process; absent in a `--workers` primary. */
  readonly source?: SnapshotSource | undefined;
  readonly uses: () => Promise<DeprecationUse[]>;
  readonly deprecated: () => readonly DeprecatedOperation[];
  readonly migration?: (() => Promise<object>) | undefined;
}

export interface OpenConsole {
  /** The routes, sharing the admin listener's tokens and failed-authentication guard. */
  routes(tokens: AdminTokens, guard: AdminAuthGuard): AdminRoutes;
  close(): Promise<void>;
}

/** The Redis the console rolls up in: the shared store's (`policies.rate-limit.store`), when it is Redis. */
function storeRedis(config: PolicyConfig) {
  const store = config.policies['rate-limit'].store;
  return store === 'memory' ? undefined : store.redis;
}

/** The console of this process, or undefined when `server.admin.console` is false or the admin listener is off. */
export function openConsole(w: ConsoleWiring): OpenConsole | undefined {
  const admin = w.config.server.admin;
  if (admin === null || admin.console === false) return undefined;
  let ready: { ready: boolean; reason?: string } = { ready: false, reason: 'starting' };
  const beat = selfBeat({ version: w.version, workers: w.workers, policy: w.text, lastReloadMs: w.lastReloadMs, readiness: () => ready });
  const countingSinceMs = Date.now();
  const redis = storeRedis(w.config);
  const fleet = redis === undefined ? undefined : new ConsoleFleet({ redis, source: w.source ?? NO_COUNTS, beat, env: w.env, log: w.log });
  // The heartbeat carries readiness as last checked: checked on the beat's own rhythm.
  const refreshReadiness = () =>
    w.readiness().then(
      (r) => void (ready = r.ready ? { ready: true } : { ready: false, reason: r.reason }),
      () => void (ready = { ready: false, reason: 'readiness check failed' }),
    );
  const checkReadiness = () => void refreshReadiness();
  checkReadiness();
  const timer = setInterval(checkReadiness, BEAT_MS);
  timer.unref();
  fleet?.start();

  const registry = () => {
    const rc = w.current().policies.auth.registry;
    return rc === null ? undefined : openRegistry(rc, w.env);
  };
  const policyKeys = () => keysInForce(w.current().policies.auth, { env: w.env });
  /** The registry's keys and revocations; none when it has none or cannot be read now. */
  const registryRows = async (): Promise<{ keys: KeyInfo[]; revoked: Revocation[] }> => {
    const reg = registry();
    if (reg === undefined) return { keys: [], revoked: [] };
    const [keys, revoked] = await Promise.all([reg.list().catch(() => [] as KeyInfo[]), reg.revoked().catch(() => [] as Revocation[])]);
    return { keys, revoked };
  };
  const data = consoleData({
    local: w.local,
    fleet,
    uses: w.uses,
    deprecated: w.deprecated,
    who: async () => whoToTell([...policyKeys(), ...(await registryRows()).keys.map((k) => ({ id: k.id, owner: k.owner ?? null, contact: k.contact ?? null }))]),
    keys: async (query, snapshot, scope, degraded) => {
      const rows = await registryRows();
      return keysView({
        policyKeys: policyKeys(),
        registry: rows.keys,
        revoked: rows.revoked,
        seen: new Map(snapshot.seen.map(([consumer, , last]) => [consumer, last])),
        countingSinceMs,
        nowMs: Date.now(),
        unusedDays: query.unusedDays,
        expiringDays: query.expiringDays,
        scope,
        degraded,
      });
    },
    migration: w.migration,
    self: beat,
    beatMs: BEAT_MS,
  });
  // The fleet view shows this instance's readiness as it is now, not as the last beat saw it.
  const fleetNow = async () => {
    await refreshReadiness();
    return data.fleet();
  };
  return {
    routes: (tokens, guard) => consoleRoutes({ data: { ...data, fleet: fleetNow }, tokens: () => tokens, guard, onError: (err, path) => w.log.error({ err, path }, 'console endpoint failed') }),
    async close() {
      clearInterval(timer);
      await fleet?.close();
    },
  };
}

/**
 * A `--workers` worker's side with Redis: its counts go to the fleet's rollup (the primary beats
 * for the group and reads them back); none without Redis (the primary asks over IPC).
 */
export function workerConsoleFleet(config: PolicyConfig, env: Env, log: Logger, source: SnapshotSource | undefined): { close(): Promise<void> } | undefined {
  const redis = storeRedis(config);
  if (redis === undefined || source === undefined) return undefined;
  const fleet = new ConsoleFleet({ redis, source, env, log });
  fleet.start();
  return fleet;
}
