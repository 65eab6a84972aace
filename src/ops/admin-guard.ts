/**
 * Failed admin authentications, per client address: limited, logged and counted, as the API's
 * brute-force lock does for API keys (src/policies/auth/brute-force.ts; the same GCRA arithmetic).
 *
 * - Limited: past `maxFailures` wrong tokens in `windowSeconds` from one address (an IPv6 /64
 *   counts as one, `clientKey`), every key API request from it gets 429 `too_many_auth_failures`
 *   with Retry-After, a right token included, until the window drains. The admin port has no
 *   trusted proxy: the address is the socket's. Probes and scrapes (/healthz, /metrics...) are
 *   never locked.
 * - Logged: one warn line per address per window ("failed admin authentication", with how many
 *   failures since its last line), one when an address gets locked; never the token. The operator
 *   log's throttle (src/ops/log-throttle.ts) still folds a flood from many addresses.
 * - Counted: `petstore_gateway_admin_auth_failures_total{reason}`: `missing` (no Authorization),
 *   `invalid` (a wrong token, or not a bearer token), `locked` (refused while locked).
 *
 * A missing header guesses nothing: it is counted, not charged to the address.
 */
import type { LRUCache } from 'lru-cache';
import { Counter, Registry } from 'prom-client';
import { clientKey } from '../core/client-key.js';
import { EPSILON_MS, gcra } from '../stores/gcra.js';
import { lruOfAtMost } from '../stores/memory.js';

export const ADMIN_AUTH_FAILURES_METRIC = 'petstore_gateway_admin_auth_failures_total';
export type AdminAuthFailure = 'missing' | 'invalid' | 'locked';
const REASONS: readonly AdminAuthFailure[] = ['missing', 'invalid', 'locked'];

/** `server.admin.bruteForce`'s default: ten wrong tokens a minute from one address. */
export const ADMIN_BRUTE_FORCE_DEFAULT = Object.freeze({ maxFailures: 10, windowSeconds: 60 });
/** Addresses tracked at most; the least recently failed is forgotten first. */
const MAX_ADDRESSES = 100_000;

export interface WarnLog {
  warn(fields: Record<string, unknown>, message: string): void;
}

export interface AdminGuardOptions {
  readonly maxFailures: number;
  readonly windowSeconds: number;
  readonly log?: WarnLog | undefined;
  /** Milliseconds since the epoch; tests move it. */
  readonly now?: () => number;
  readonly maxAddresses?: number;
}

interface AddressState {
  /** GCRA's theoretical arrival time of the next failure. */
  tat: number;
  /** Until when this address's failures are not logged again. */
  quietUntil: number;
  /** Failures since its last line. */
  unlogged: number;
  /** A lock-out line was written for the lock in force. */
  lockLogged: boolean;
}

export class AdminAuthGuard {
  readonly registry = new Registry();
  private readonly counter: Counter<'reason'>;
  private readonly rule: { limit: number; windowMs: number };
  private readonly now: () => number;
  private readonly addresses: LRUCache<string, AddressState>;

  constructor(private readonly options: AdminGuardOptions) {
    this.rule = { limit: options.maxFailures, windowMs: options.windowSeconds * 1000 };
    this.now = options.now ?? Date.now;
    this.addresses = lruOfAtMost<AddressState>(options.maxAddresses ?? MAX_ADDRESSES);
    this.counter = new Counter({
      name: ADMIN_AUTH_FAILURES_METRIC,
      help: 'Requests to the key admin API refused for their authentication, by reason: missing, invalid (a wrong token), locked (the address had too many failures)',
      labelNames: ['reason'],
      registers: [this.registry],
    });
    for (const r of REASONS) this.counter.labels(r).inc(0);
  }

  /** The client key of a socket address (an IPv6 /64 as one). */
  static keyOf(remoteAddress: string | undefined): string {
    return remoteAddress === undefined ? 'unknown' : clientKey(remoteAddress);
  }

  /** Milliseconds until `client` may try again; 0 when it is not locked. */
  lockedFor(client: string): number {
    const s = this.addresses.get(client);
    if (s === undefined) return 0;
    const now = this.now();
    const next = Math.max(s.tat, now) + this.rule.windowMs / this.rule.limit;
    const wait = next - now > this.rule.windowMs + EPSILON_MS ? next - this.rule.windowMs - now : 0;
    if (wait === 0) s.lockLogged = false;
    return wait;
  }

  /** A request refused because `client` is locked: counted only (its lock-out was logged). */
  refusedLocked(): void {
    this.counter.labels('locked').inc();
  }

  /** A failed authentication from `client`: counted, logged once per window, charged when it guessed. */
  failed(client: string, reason: 'missing' | 'invalid'): void {
    this.counter.labels(reason).inc();
    if (reason === 'missing') return;
    const now = this.now();
    let s = this.addresses.get(client);
    if (s === undefined) {
      s = { tat: now, quietUntil: 0, unlogged: 0, lockLogged: false };
      this.addresses.set(client, s);
    }
    const step = gcra(s.tat, now, this.rule);
    if (step.allowed) s.tat = step.tat;
    s.unlogged++;
    if (now >= s.quietUntil) {
      this.options.log?.warn({ client, failures: s.unlogged, windowSeconds: this.options.windowSeconds }, 'failed admin authentication');
      s.unlogged = 0;
      s.quietUntil = now + this.rule.windowMs;
    }
    const wait = this.lockedFor(client);
    if (wait > 0 && !s.lockLogged) {
      s.lockLogged = true;
      this.options.log?.warn(
        { client, maxFailures: this.options.maxFailures, windowSeconds: this.options.windowSeconds, retryAfterSeconds: Math.ceil(wait / 1000) },
        'admin API locked for an address: too many failed admin authentications',
      );
    }
  }

  /** This guard's metric in the Prometheus text format, for the admin listener's /metrics. */
  metrics(): Promise<string> {
    return this.registry.metrics();
  }
}
