/**
 * What the registry keeps in Redis per key id, and the local copy built from it. A record holds
 * hashes only (`sha256:<hex>`, as a policy file does): the secret is shown once, at creation or
 * rotation, and never stored.
 */
import type { Consumer } from '../core/policy.js';
import type { KeyGrant } from '../policies/auth/keys.js';

export interface SecretRecord {
  /** `sha256:` and 64 lower-case hex digits. */
  readonly hash: string;
  /** Epoch ms after which this secret is refused (the end of a rotation's overlap); absent: none. */
  readonly until?: number;
}

export interface KeyRecord {
  readonly id: string;
  /** RFC 3339. */
  readonly created: string;
  readonly expires?: string;
  readonly operations?: readonly string[];
  /** Absent in records written before keys had scopes: none. */
  readonly scopes?: readonly string[];
  /** Who to tell about the key (src/core/key-owner.ts); absent: none (and in records written before keys had them). */
  readonly owner?: string;
  readonly contact?: string;
  /** The current secret last; older ones only while their overlap lasts. */
  readonly secrets: readonly SecretRecord[];
}

/** What `GET /keys` and `keys list` show of a key: never a secret or a hash. */
export interface KeyInfo {
  readonly id: string;
  readonly created: string;
  readonly expires: string | null;
  readonly operations: readonly string[] | null;
  /** null: none. */
  readonly scopes: readonly string[] | null;
  /** Who to tell about the key; null: none. */
  readonly owner: string | null;
  readonly contact: string | null;
  /** RFC 3339, to the flush interval; null: not used yet. */
  readonly lastUsed: string | null;
  /**
   * RFC 3339: the latest end of the older secrets still valid after a rotation (what the gateway
   * enforces: every older secret ends by then); null: only the current secret works.
   */
  readonly previousValidUntil: string | null;
}

/** Registry ids: no `#` (ids from the environment are `NAME#n`), nothing a log line must escape. */
export const ID_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$';

/** One secret of the local copy: the grant it gives, until when. */
export interface LocalSecret {
  readonly grant: KeyGrant;
  readonly untilMs: number | undefined;
}

/** The JSON object a text from Redis holds, or undefined when it holds none (a hand edit). */
export function jsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** A record read from Redis, or undefined when it is not one (a hand edit, another version). */
export function parseRecord(text: string): KeyRecord | undefined {
  const r = jsonObject(text) as Partial<KeyRecord> | undefined;
  if (r === undefined) return undefined;
  if (typeof r.id !== 'string' || typeof r.created !== 'string' || !Array.isArray(r.secrets)) return undefined;
  if (!r.secrets.every((s) => typeof s?.hash === 'string' && /^sha256:[0-9a-f]{64}$/.test(s.hash))) return undefined;
  return r as KeyRecord;
}

/** The grant of a record, shared by its secrets (the consumer object is frozen and per key). */
export function grantOf(record: KeyRecord): KeyGrant {
  const consumer: Consumer = Object.freeze({
    id: record.id,
    expires: record.expires,
    operations: record.operations === undefined ? undefined : Object.freeze([...record.operations]),
    scopes: record.scopes === undefined ? undefined : Object.freeze([...record.scopes]),
  });
  return Object.freeze({
    expiresMs: record.expires === undefined ? undefined : Date.parse(record.expires),
    operations: record.operations === undefined ? undefined : new Set(record.operations),
    consumer,
  });
}

/** The local copy's entries of a record: digest (base64 of the SHA-256) to secret. */
export function localSecrets(record: KeyRecord): Array<[string, LocalSecret]> {
  const grant = grantOf(record);
  return record.secrets.map((s) => [Buffer.from(s.hash.slice('sha256:'.length), 'hex').toString('base64'), { grant, untilMs: s.until }]);
}

export function infoOf(record: KeyRecord, lastUsedMs: number | undefined, nowMs: number = Date.now()): KeyInfo {
  let previous = -Infinity;
  for (const s of record.secrets) if (s.until !== undefined && s.until > nowMs) previous = Math.max(previous, s.until);
  return {
    id: record.id,
    created: record.created,
    expires: record.expires ?? null,
    operations: record.operations === undefined ? null : [...record.operations],
    scopes: record.scopes === undefined ? null : [...record.scopes],
    // Checked when written; a hand edit of another type shows as none rather than dropping the key.
    owner: typeof record.owner === 'string' ? record.owner : null,
    contact: typeof record.contact === 'string' ? record.contact : null,
    lastUsed: lastUsedMs === undefined || !Number.isFinite(lastUsedMs) ? null : new Date(lastUsedMs).toISOString(),
    previousValidUntil: Number.isFinite(previous) ? new Date(previous).toISOString() : null,
  };
}
