/**
 * The console's Keys view (GET /console/api/keys, docs/console.md): every key in force with who to
 * tell about it, and what needs doing: keys expiring soon, in a rotation's overlap, unused for N
 * days; the registry's last revocations. A pure function of what the caller read: the policy's
 * file and environment keys, the registry's list and revocations, the console's `seen` times.
 */
import type { KeyInfo, Revocation } from '../../registry/index.js';
import type { KeySource, KeysView, WhoToTell } from './types.js';

const DAY_MS = 86_400_000;
export const DEFAULT_UNUSED_DAYS = 30;
export const DEFAULT_EXPIRING_DAYS = 14;

/** A key of the policy file or the environment (src/policies/auth's `keysInForce` makes these). */
export interface PolicyKey extends WhoToTell {
  readonly id: string;
  readonly source: Exclude<KeySource, 'registry'>;
  /** RFC 3339, or null: never. */
  readonly expires: string | null;
}

export interface KeysViewInput {
  /** The file's and the environment's keys of the policy in force. */
  readonly policyKeys: readonly PolicyKey[];
  /** The registry's keys (`registry.list()`); an id the file also has is the file's (it wins). */
  readonly registry: readonly KeyInfo[];
  /** The registry's last revocations (`registry.revoked()`). */
  readonly revoked: readonly Revocation[];
  /** The console's last request per consumer (epoch ms), for keys whose lastUsed the registry does not know. */
  readonly seen: ReadonlyMap<string, number>;
  /** When the console started counting (epoch ms): a key never seen is unused only once it has counted unusedDays. */
  readonly countingSinceMs: number;
  readonly nowMs: number;
  readonly unusedDays?: number | undefined;
  readonly expiringDays?: number | undefined;
  readonly scope: KeysView['scope'];
  readonly degraded?: string | undefined;
}

type KeyRow = KeysView['keys'][number];

/** An RFC 3339 date as epoch ms, or undefined when null or unreadable. */
function msOf(date: string | null | undefined): number | undefined {
  if (date === null || date === undefined) return undefined;
  const ms = Date.parse(date);
  return Number.isNaN(ms) ? undefined : ms;
}

/** The later of two times, either may be unknown. */
function latest(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  return b === undefined ? a : Math.max(a, b);
}

function row(
  key: { id: string; source: KeySource; expires: string | null; owner: string | null; contact: string | null; overlapUntil: string | null; lastUsedMs: number | undefined; sinceMs: number },
  at: { nowMs: number; unusedMs: number; expiringMs: number },
): KeyRow {
  const expiresMs = msOf(key.expires);
  // As the auth policy refuses it: from the instant of `expires` on.
  const expired = expiresMs !== undefined && at.nowMs >= expiresMs;
  const expiringSoon = expiresMs !== undefined && !expired && expiresMs - at.nowMs <= at.expiringMs;
  // Never seen: unused once the key has been watched (counted, and in existence) for unusedDays.
  const unused = key.lastUsedMs === undefined ? at.nowMs - key.sinceMs >= at.unusedMs : at.nowMs - key.lastUsedMs >= at.unusedMs;
  return {
    id: key.id,
    source: key.source,
    owner: key.owner,
    contact: key.contact,
    expires: key.expires,
    overlapUntil: key.overlapUntil,
    lastUsed: key.lastUsedMs === undefined ? null : new Date(key.lastUsedMs).toISOString(),
    expiringSoon,
    expired,
    unused,
  };
}

/** A whole number of days of at least 0 (a query's value), else the default. */
function days(value: number | undefined, fallback: number): number {
  return value !== undefined && Number.isFinite(value) && value >= 0 ? Math.floor(value) : fallback;
}

/** The Keys view of what the caller read (sorted by id; revocations newest first). */
export function keysView(input: KeysViewInput): KeysView {
  const unusedDays = days(input.unusedDays, DEFAULT_UNUSED_DAYS);
  const expiringDays = days(input.expiringDays, DEFAULT_EXPIRING_DAYS);
  const at = { nowMs: input.nowMs, unusedMs: unusedDays * DAY_MS, expiringMs: expiringDays * DAY_MS };
  const rows: KeyRow[] = [];
  const policyIds = new Set<string>();
  for (const k of input.policyKeys) {
    if (policyIds.has(k.id)) continue;
    policyIds.add(k.id);
    rows.push(row({ ...k, overlapUntil: null, lastUsedMs: input.seen.get(k.id), sinceMs: input.countingSinceMs }, at));
  }
  for (const k of input.registry) {
    // The file's key wins over a registry key of the same id: this one is not in force.
    if (policyIds.has(k.id)) continue;
    const overlapMs = msOf(k.previousValidUntil);
    rows.push(
      row(
        {
          id: k.id,
          source: 'registry',
          expires: k.expires,
          owner: k.owner,
          contact: k.contact,
          overlapUntil: overlapMs !== undefined && overlapMs > input.nowMs ? k.previousValidUntil : null,
          lastUsedMs: latest(msOf(k.lastUsed), input.seen.get(k.id)),
          sinceMs: Math.max(input.countingSinceMs, msOf(k.created) ?? input.countingSinceMs),
        },
        at,
      ),
    );
  }
  rows.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const revoked = [...input.revoked]
    .map((r) => ({ r, ms: msOf(r.at) ?? 0 }))
    .sort((a, b) => b.ms - a.ms)
    .map(({ r }) => ({ id: r.id, revokedAt: r.at, by: r.by, owner: r.owner, contact: r.contact }));
  return {
    generatedAt: new Date(input.nowMs).toISOString(),
    scope: input.scope,
    ...(input.degraded === undefined ? {} : { degraded: input.degraded }),
    unusedDays,
    expiringDays,
    keys: rows,
    revoked,
  };
}

const NOBODY_TO_TELL: WhoToTell = Object.freeze({ owner: null, contact: null });

/** Who to tell about each consumer (a key id), for the other views; a consumer no key names: nobody. */
export function whoToTell(keys: Iterable<{ readonly id: string } & WhoToTell>): (consumer: string) => WhoToTell {
  const byId = new Map<string, WhoToTell>();
  for (const k of keys) if (!byId.has(k.id)) byId.set(k.id, Object.freeze({ owner: k.owner, contact: k.contact }));
  return (consumer) => byId.get(consumer) ?? NOBODY_TO_TELL;
}
