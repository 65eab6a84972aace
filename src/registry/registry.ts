/**
 * The key registry: keys issued at run time, kept in Redis (hashes only) and shared by every
 * gateway instance and worker, beside the keys of the policy file and the environment.
 *
 * Authentication never waits on Redis: each process holds a local copy (digest -> grant) and the
 * auth policy reads only that, so a request costs no Redis round trip. The copy is kept current by
 * publish/subscribe (a change is announced on a channel; each process re-reads that one record,
 * within milliseconds) and by a periodic sync (`syncIntervalMs`: a version counter is read, and
 * the whole set when it moved), which also catches messages lost while a subscriber reconnected.
 * A (re)connection always starts with a full sync, so a revocation made while this process could
 * not reach Redis applies as soon as it can again.
 *
 * While Redis is away the local copy keeps answering for `maxStaleSeconds` after the last time it
 * was confirmed current; past that, registry keys are refused (a revocation this process cannot
 * learn of must not stay unheard for ever). Changes (create, rotate, revoke) need Redis and fail
 * with `RegistryUnavailable` while it is away.
 *
 * A Redis that comes back without the registry's data (a restart without persistence, FLUSHALL, a
 * failover to an empty replica) must not revoke every key at once. The registry keeps an epoch
 * beside its records (`<prefix>{keys}:epoch`, written with the first record): a full read that
 * finds another epoch than the one this process took its copy from (none, or an implicit one made
 * by a later write) is a data loss, not a change. It is logged at error and counted, and the copy
 * this process had keeps answering (keys made since are added to it) until an operator acts:
 * `keys import` of a backup, or `keys reset-epoch` to accept what Redis holds now. Both write an
 * explicit epoch (`<ms>-<random>`, newer than any before), which every process adopts. An implicit
 * epoch is `0-<random>`: never newer than a known one.
 *
 * Each key may say who to tell about it (owner, contact), and the registry remembers its last
 * revocations, with who revoked each (who-to-tell.ts). What it keeps in Redis and the scripts that
 * change it are in redis-data.ts; its options, status, errors and export format in types.ts.
 */
import { hash } from 'node:crypto';
import type { PolicyLog } from '../core/policy.js';
import { hashKey, type KeyGrant } from '../policies/auth/keys.js';
import { acquireRedis, deploymentPrefix, describeConnection, type RedisConnection, type SharedRedis } from '../stores/connection.js';
import { newRegistryKey } from './format.js';
import { infoOf, localSecrets, parseRecord, type KeyInfo, type KeyRecord, type LocalSecret, type SecretRecord } from './records.js';
import { CAS_LUA, deadline, epochTime, newEpoch, pairsOf, READ_LUA, registryKeys, RESTORE_LUA, TOUCH_LUA, type RegistryKeys } from './redis-data.js';
import { EXPORT_FORMAT, REGISTRY_DEFAULTS, RegistryError, type NewKeyInput, type RegistryConfig, type RegistryExport, type RegistryOptions, type RegistryStatus } from './types.js';
import { checkOwnerFields, parseRevocation, patchOwner, revocationEntry, REVOKED_KEPT, type OwnerPatch, type Revocation } from './who-to-tell.js';

/** Why revoking a kept key's id answers 404 during a data loss, and the way out. */
const KEPT_HINT =
  "but the gateways still accept it: Redis lost the registry's data and they keep the keys they knew. To end it: `keys import` a backup, then revoke it; or `keys reset-epoch` to drop every key Redis does not hold (docs/keys.md)";

export class KeyRegistry {
  private local = new Map<string, LocalSecret>();
  private version = '';
  /** The epoch the local copy was taken from; '' before the first full read of a registry with one. */
  private epoch = '';
  /** While Redis has lost the registry's data: the copy this process had then (kept answering). */
  private lost: Map<string, LocalSecret> | undefined;
  private lossDetected = 0;
  /** The full read a message asked for, while it runs; and whether another was asked meanwhile. */
  private wholeRead: Promise<void> | undefined;
  private readAgain = false;
  private confirmedMs = -Infinity;
  private lastUsed = new Map<string, number>();
  private syncTimer: NodeJS.Timeout | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  private subscribed = false;
  private subscription: Promise<boolean> | undefined;
  private closed = false;
  /** Changes announced so far: a full read that overlapped one is read again (it may predate it). */
  private announced = 0;
  private readonly conn: RedisConnection;
  private readonly keys: RegistryKeys;
  private readonly now: () => number;
  private readonly log: PolicyLog | undefined;
  /** Resolves once the first full sync is done, or the connection failed once (never rejects). */
  readonly ready: Promise<void>;
  private readonly connected: Promise<void>;
  private connectedOnce = false;
  private readonly shared: SharedRedis;

  constructor(
    readonly config: RegistryConfig,
    options: RegistryOptions = {},
  ) {
    const p = config.prefix ?? deploymentPrefix(options.env ?? process.env);
    this.keys = registryKeys(p);
    this.now = options.now ?? Date.now;
    this.log = options.log;
    // The process's connection to this Redis, shared with the rate-limit store and the cache when
    // they name the same one.
    this.shared = acquireRedis(config.redis, options.env ?? process.env);
    this.conn = this.shared.conn;
    let warned = false;
    this.conn.on('error', (err) => {
      // Once per outage: the client retries with backoff and would repeat it on every attempt.
      if (!warned) this.log?.warn({ registry: describeConnection(config.redis), err: err.message }, 'key registry: Redis unreachable; the local copy answers meanwhile');
      warned = true;
    });
    const follow = options.follow ?? true;
    this.conn.on('ready', () => {
      if (warned && follow) this.log?.warn({ registry: describeConnection(config.redis) }, 'key registry: Redis reachable again; reading the registry');
      warned = false;
      if (follow) void this.resync();
    });
    // Settles on the first connection, or on the first failure to make one (node-redis keeps
    // retrying, and its connect() would wait for a success that may be minutes away).
    const connecting = new Promise<void>((resolve) => {
      this.conn.on('error', () => resolve());
      void this.shared.connected.then(() => {
        this.connectedOnce = this.shared.connectedOnce;
        resolve();
      });
    });
    this.connected = connecting;
    this.ready = connecting.then(() => (follow ? this.resync() : undefined));
    if (follow) {
      this.syncTimer = setInterval(() => void this.sync(), config.syncIntervalMs);
      this.syncTimer.unref();
    }
  }

  /** Keys in the local copy (secrets, the overlap's old ones included). */
  get size(): number {
    return this.local.size;
  }

  /** What this process knows of the registry now (metrics, /readyz). */
  status(): RegistryStatus {
    return {
      redis: describeConnection(this.config.redis),
      connected: this.conn.isReady,
      confirmedAgeSeconds: Number.isFinite(this.confirmedMs) ? Math.max(0, (this.now() - this.confirmedMs) / 1000) : null,
      fresh: this.fresh,
      keys: idsOf(this.local).length,
      dataLoss: this.lost !== undefined,
      dataLossDetected: this.lossDetected,
    };
  }

  /** Whether the local copy may answer now (it was confirmed current recently enough). */
  get fresh(): boolean {
    const max = this.config.maxStaleSeconds;
    return max === null || this.now() - this.confirmedMs <= max * 1000;
  }

  /**
   * The grant of a presented key's SHA-256 digest (base64), from the local copy only: no Redis.
   * Undefined when unknown, past its rotation overlap, or when the copy is too stale to trust.
   */
  grant(digest: string, nowMs: number): KeyGrant | undefined {
    const s = this.local.get(digest);
    if (s === undefined) return undefined;
    if (s.untilMs !== undefined && nowMs >= s.untilMs) return undefined;
    if (!this.fresh) return undefined;
    return s.grant;
  }

  /** Notes a use of `id` (written to Redis once per flush interval, never per request). */
  touch(id: string, nowMs: number): void {
    this.lastUsed.set(id, nowMs);
    if (this.flushTimer === undefined) {
      this.flushTimer = setTimeout(() => void this.flushLastUsed(), REGISTRY_DEFAULTS.lastUsedFlushMs);
      this.flushTimer.unref();
    }
  }

  private async flushLastUsed(): Promise<void> {
    this.flushTimer = undefined;
    if (this.lastUsed.size === 0) return;
    const args = [...this.lastUsed].flatMap(([id, ms]) => [id, String(ms)]);
    this.lastUsed = new Map();
    // A lost write loses a last-used time, never a key: not worth a retry.
    await deadline(this.run(['EVAL', TOUCH_LUA, '1', this.keys.lastused, ...args]), this.config.commandTimeoutMs).catch(() => undefined);
  }

  /**
   * One command; before the first connection is up, once it is (the offline queue is off, so it
   * would fail at once): a registry opened by the first admin request must not answer 503 for
   * the milliseconds of its connection. The callers' deadline bounds the wait.
   */
  private run(args: readonly string[]): Promise<unknown> {
    if (this.connectedOnce) return this.conn.command(this.keys.records, args);
    return this.connected.then(() => this.conn.command(this.keys.records, args));
  }

  /**
   * A full read a message asked for (`*`, or an epoch that moved): one at a time, and at most one
   * more when more were asked meanwhile, so a flood of messages (anyone who may PUBLISH) costs two
   * reads, not one per message. A change it missed moved the version: the periodic sync reads it.
   */
  private resyncSoon(): Promise<void> {
    if (this.wholeRead !== undefined) {
      this.readAgain = true;
      return this.wholeRead;
    }
    this.wholeRead = (async () => {
      for (let i = 0; i < 2 && (i === 0 || this.readAgain); i++) {
        this.readAgain = false;
        await this.resync();
      }
    })().finally(() => (this.wholeRead = undefined));
    return this.wholeRead;
  }

  /** Reads every record and replaces the local copy; subscribes on the first success. */
  private async resync(): Promise<void> {
    // Bounded: a full read that raced an announced change is repeated, at most three times.
    for (let i = 0; i < 3; i++) {
      const before = this.announced;
      await this.readAll();
      if (this.announced === before) return;
    }
  }

  private async readAll(): Promise<void> {
    try {
      const t = this.config.commandTimeoutMs;
      const reply = (await deadline(this.run(['EVAL', READ_LUA, '3', this.keys.records, this.keys.version, this.keys.epoch, newEpoch(undefined)]), t)) as unknown[];
      const version = String(reply[0] ?? '');
      const epoch = String(reply[1] ?? '');
      const flat = Array.isArray(reply[2]) ? (reply[2] as unknown[]) : [];
      const next = new Map<string, LocalSecret>();
      for (const [, text] of pairsOf(flat)) {
        const record = parseRecord(String(text));
        if (record !== undefined) for (const [digest, s] of localSecrets(record)) next.set(digest, s);
      }
      this.adopt(version, epoch, next);
      // Shared by concurrent syncs (the first connection runs two), so `ready` means subscribed.
      this.subscription ??= this.conn.subscribe(this.keys.channel, (id) => void (id === '*' ? this.resyncSoon() : this.refresh(id))).then(
        () => true,
        () => {
          this.subscription = undefined;
          return false;
        },
      );
      this.subscribed = await this.subscription;
    } catch {
      // Redis away: the copy stays as it was; the next sync or reconnection tries again.
    }
  }

  /**
   * A full read's result: the new local copy, unless Redis lost the registry's data. Redis holds
   * the epoch this copy came from, or this process knew none, or an operator wrote a newer one:
   * Redis is the registry. Otherwise (no epoch, or an implicit one made since) the data was lost:
   * the copy this process had keeps answering, with the records Redis holds now added over it,
   * and it is not confirmed current (maxStaleSeconds runs on).
   */
  private adopt(version: string, epoch: string, next: Map<string, LocalSecret>): void {
    const known = this.epoch;
    const operator = epoch !== known && epochTime(epoch) > epochTime(known);
    const lost = this.lost ?? this.local;
    if (known === '' || epoch === known || operator || lost.size === 0) {
      if (this.lost !== undefined || (operator && known !== '')) {
        const how = operator ? 'an operator restored or reset it (keys import, keys reset-epoch)' : 'Redis has its data again';
        this.log?.warn({ registry: describeConnection(this.config.redis), keys: idsOf(next) }, `key registry: ${how}; Redis is the registry again`);
      }
      this.lost = undefined;
      this.local = next;
      this.version = version;
      this.epoch = epoch;
      this.confirmedMs = this.now();
      return;
    }
    if (this.lost === undefined) {
      this.lost = lost;
      this.lossDetected++;
      const fields = { registry: describeConnection(this.config.redis), keysKept: idsOf(lost), keysInRedis: idsOf(next) };
      const message =
        "key registry: Redis lost the registry's data (its epoch is gone or new); keeping this process's copy until an operator acts: restore a backup with `keys import FILE`, or accept what Redis holds with `keys reset-epoch` (docs/keys.md)";
      if (this.log?.error !== undefined) this.log.error(fields, message);
      else this.log?.warn(fields, message);
    }
    const ids = new Set([...next.values()].map((s) => s.grant.consumer.id));
    const merged = new Map([...lost].filter(([, s]) => !ids.has(s.grant.consumer.id)));
    for (const [digest, s] of next) merged.set(digest, s);
    this.local = merged;
    this.version = version;
  }

  /** The periodic check: a full sync only when the version or the epoch moved (or was never read). */
  async sync(): Promise<void> {
    if (this.closed) return;
    try {
      const [version, epoch] = ((await deadline(this.run(['MGET', this.keys.version, this.keys.epoch]), this.config.commandTimeoutMs)) as unknown[]).map((v) => String(v ?? ''));
      if (this.lost === undefined && version === this.version && epoch === this.epoch && this.subscribed) this.confirmedMs = this.now();
      else await this.resync();
    } catch {
      // Away: not confirmed; `fresh` runs out after maxStaleSeconds.
    }
  }

  /**
   * A change announced on the channel: re-read that record alone, unless the epoch is not the one
   * this copy came from (the first record of an empty registry, or a loss): then a full read, which
   * tells the two apart. While Redis has lost its data, the record is added to the kept copy.
   */
  private async refresh(id: string): Promise<void> {
    this.announced++;
    try {
      const t = this.config.commandTimeoutMs;
      const [text, epoch] = await Promise.all([
        deadline(this.run(['HGET', this.keys.records, id]), t) as Promise<string | null>,
        deadline(this.run(['GET', this.keys.epoch]), t).then((e) => String(e ?? '')),
      ]);
      if (this.lost === undefined && epoch !== this.epoch) return void (await this.resyncSoon());
      const next = new Map([...this.local].filter(([, s]) => s.grant.consumer.id !== id));
      const record = text === null ? undefined : parseRecord(String(text));
      if (record !== undefined) for (const [digest, s] of localSecrets(record)) next.set(digest, s);
      this.local = next;
    } catch {
      // Missed: the periodic sync sees the version moved and reads everything.
    }
  }

  private async read(id: string): Promise<{ text: string; record: KeyRecord | undefined }> {
    const text = (await deadline(this.run(['HGET', this.keys.records, id]), this.config.commandTimeoutMs)) as string | null;
    return { text: text === null ? '' : String(text), record: text === null ? undefined : parseRecord(String(text)) };
  }

  /** Compare-and-set of one record (undefined: delete it, and remember the `revocation` entry if any). */
  private async write(id: string, expected: string, next: KeyRecord | undefined, revocation = ''): Promise<void> {
    const k = this.keys;
    const r = await deadline(
      this.run(['EVAL', CAS_LUA, '5', k.records, k.version, k.lastused, k.epoch, k.revoked, id, expected, next === undefined ? '' : JSON.stringify(next), k.channel, newEpoch(undefined), revocation, String(REVOKED_KEPT)]),
      this.config.commandTimeoutMs,
    );
    if (Number(r) < 0) throw new RegistryError('conflict', `key '${id}' was changed by someone else at the same time; try again`);
    // This process sees its own change at once, not a message later.
    await this.refresh(id);
  }

  /** Issues a key for a new id; the secret is returned once and stored only as its hash. */
  async create(input: NewKeyInput): Promise<{ info: KeyInfo; key: string }> {
    checkOwnerFields(input);
    const key = newRegistryKey();
    const record: KeyRecord = {
      id: input.id,
      created: new Date(this.now()).toISOString(),
      ...(input.expires === undefined ? {} : { expires: input.expires }),
      ...(input.operations === undefined ? {} : { operations: [...input.operations] }),
      ...(input.scopes === undefined ? {} : { scopes: [...input.scopes] }),
      ...(input.owner === undefined ? {} : { owner: input.owner }),
      ...(input.contact === undefined ? {} : { contact: input.contact }),
      secrets: [{ hash: hashKey(key) }],
    };
    const { text } = await this.read(input.id);
    if (text !== '') throw new RegistryError('exists', `a key with id '${input.id}' exists`);
    await this.write(input.id, '', record).catch((err: unknown) => {
      throw err instanceof RegistryError && err.reason === 'conflict' ? new RegistryError('exists', `a key with id '${input.id}' exists`) : err;
    });
    return { info: infoOf(record, undefined, this.now()), key };
  }

  /**
   * A new secret for an existing id. Every older secret ends at `now + overlapSeconds` at the
   * latest: the current one then, and one still in an earlier overlap at its own end or then,
   * whichever comes first (0: every older secret ends now, the answer to a leaked key; an overlap
   * shorter than an earlier one caps it). Ended ones are dropped. `previousValidUntil` is the
   * latest end of the older secrets that remain (now when none does): what the gateway enforces.
   */
  async rotate(id: string, overlapSeconds: number): Promise<{ info: KeyInfo; key: string; previousValidUntil: string; previousSecrets: number }> {
    const { text, record } = await this.read(id);
    if (record === undefined) throw new RegistryError('unknown', `no key with id '${id}'`);
    const now = this.now();
    const until = now + overlapSeconds * 1000;
    const key = newRegistryKey();
    const kept: SecretRecord[] = record.secrets
      .map((s) => ({ hash: s.hash, until: s.until === undefined ? until : Math.min(s.until, until) }))
      .filter((s) => s.until > now);
    const next: KeyRecord = { ...record, secrets: [...kept, { hash: hashKey(key) }] };
    await this.write(id, text, next);
    const latest = kept.reduce((m, s) => Math.max(m, s.until ?? now), now);
    return { info: infoOf(next, undefined, now), key, previousValidUntil: new Date(latest).toISOString(), previousSecrets: kept.length };
  }

  /** Sets (a string) or clears (null) the owner and contact of a key; absent fields stay. */
  async describe(id: string, patch: OwnerPatch): Promise<KeyInfo> {
    checkOwnerFields(patch);
    const { text, record } = await this.read(id);
    if (record === undefined) throw new RegistryError('unknown', `no key with id '${id}'`);
    const next = patchOwner(record, patch);
    await this.write(id, text, next);
    const used = (await deadline(this.run(['HGET', this.keys.lastused, id]), this.config.commandTimeoutMs).catch(() => null)) as string | null;
    return infoOf(next, used === null ? undefined : Number(used), this.now());
  }

  /** Removes the key and every one of its secrets; remembered among the revocations, with `by` (who did it). */
  async revoke(id: string, by?: string): Promise<void> {
    const { text, record } = await this.read(id);
    if (record === undefined) {
      // After a data loss this process may still answer a key Redis no longer has: a 404 alone
      // would let the operator believe it ended (docs/keys.md, "When Redis loses the registry").
      if (this.lost !== undefined && idsOf(this.local).includes(id)) throw new RegistryError('unknown', `no key with id '${id}' in Redis, ${KEPT_HINT}`, KEPT_HINT);
      throw new RegistryError('unknown', `no key with id '${id}'`);
    }
    await this.write(id, text, undefined, revocationEntry(record, by, this.now()));
  }

  /** The last revocations (at most REVOKED_KEPT), newest first. */
  async revoked(): Promise<Revocation[]> {
    const list = (await deadline(this.run(['LRANGE', this.keys.revoked, '0', String(REVOKED_KEPT - 1)]), this.config.commandTimeoutMs)) as unknown[];
    return list.map((text) => parseRevocation(String(text))).filter((r): r is Revocation => r !== undefined);
  }

  /** Every key as Redis has it now (never a secret or a hash), sorted by id. */
  async list(): Promise<KeyInfo[]> {
    const t = this.config.commandTimeoutMs;
    const all = (await deadline(this.run(['HGETALL', this.keys.records]), t)) as Record<string, string> | string[];
    const used = (await deadline(this.run(['HGETALL', this.keys.lastused]), t)) as Record<string, string> | string[];
    const usedMap = new Map((Array.isArray(used) ? pairsOf(used) : Object.entries(used)).map(([k, v]) => [k, Number(v)]));
    const out: KeyInfo[] = [];
    for (const [, text] of Array.isArray(all) ? pairsOf(all) : Object.entries(all)) {
      const r = parseRecord(String(text));
      if (r !== undefined) out.push(infoOf(r, usedMap.get(r.id), this.now()));
    }
    return out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  }

  /** Every record as Redis has it now, hashes included (never a secret): `keys export`. */
  async exportAll(): Promise<RegistryExport> {
    const all = (await deadline(this.run(['HGETALL', this.keys.records]), this.config.commandTimeoutMs)) as Record<string, string> | string[];
    const records: KeyRecord[] = [];
    for (const [, text] of Array.isArray(all) ? pairsOf(all) : Object.entries(all)) {
      const r = parseRecord(String(text));
      if (r !== undefined) records.push(r);
    }
    records.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return { format: EXPORT_FORMAT, exported: new Date(this.now()).toISOString(), records };
  }

  /**
   * The first record of `records` with a secret hash that a record of Redis holds under another
   * id (one `records` does not replace), or undefined: `keys import` refuses such a file, as the
   * key would authenticate as either.
   */
  async hashClash(records: readonly KeyRecord[]): Promise<{ imported: string; existing: string } | undefined> {
    const replaced = new Set(records.map((r) => r.id));
    const held = new Map<string, string>();
    for (const r of (await this.exportAll()).records) {
      if (!replaced.has(r.id)) for (const sec of r.secrets) held.set(sec.hash, r.id);
    }
    for (const r of records) {
      for (const sec of r.secrets) {
        const existing = held.get(sec.hash);
        if (existing !== undefined) return { imported: r.id, existing };
      }
    }
    return undefined;
  }

  /**
   * An operator's act after a data loss (or a move): writes `records` (each replaces the id's
   * record in Redis; others stay) and a new explicit epoch, so every gateway takes Redis as the
   * registry again. With no records, this is `keys reset-epoch`: accept what Redis holds.
   */
  async restore(records: readonly KeyRecord[]): Promise<void> {
    const args = records.flatMap((r) => [r.id, JSON.stringify(r)]);
    await deadline(this.run(['EVAL', RESTORE_LUA, '3', this.keys.records, this.keys.version, this.keys.epoch, newEpoch(this.now()), this.keys.channel, ...args]), this.config.commandTimeoutMs);
  }

  /** Whether the presented key's digest is in the local copy (tests, `check`). */
  knows(presented: string): boolean {
    return this.local.has(hash('sha256', presented, 'base64'));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.syncTimer);
    clearTimeout(this.flushTimer);
    if (this.conn.isReady) await this.flushLastUsed();
    await this.shared.release();
  }
}

/** The key ids of a local copy, sorted (for a log line). */
function idsOf(local: ReadonlyMap<string, LocalSecret>): string[] {
  return [...new Set([...local.values()].map((s) => s.grant.consumer.id))].sort();
}
