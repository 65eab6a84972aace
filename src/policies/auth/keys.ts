/**
 * API keys and their hashes. A policy file holds keys only as `sha256:<hex>` hashes; the gateway
 * hashes the presented key and looks the digest up, so a lookup costs the same whatever the number
 * of keys (O(1)) and whatever part of a real key the presented one shares.
 *
 * SHA-256 rather than a slow password hash: API keys made by `new-key` carry 256 random bits, so
 * no dictionary attack applies, and a slow hash would put milliseconds on every request.
 */
import { createHash, hash, randomBytes } from 'node:crypto';
import type { Consumer } from '../../core/policy.js';

export const HASH_PREFIX = 'sha256:';
export const HASH_PATTERN = '^sha256:[0-9a-f]{64}$';

/** The line a policy file needs for a key: `sha256:<64 lower-case hex digits>`. */
export function hashKey(key: string): string {
  return HASH_PREFIX + createHash('sha256').update(key, 'utf8').digest('hex');
}

/** A new key: 32 random bytes, base64url, with a `psg_` prefix so secret scanners can spot it. */
export function newKey(): string {
  return 'psg_' + randomBytes(32).toString('base64url');
}

/** What a key may do besides authenticate: built once per key, read per request. */
export interface KeyGrant {
  /** Epoch milliseconds after which the key is refused; undefined: never. */
  readonly expiresMs: number | undefined;
  /** The operationIds it may call; undefined: all. */
  readonly operations: ReadonlySet<string> | undefined;
  /** The consumer the exchange carries (frozen, shared by every request of the key). */
  readonly consumer: Consumer;
}

interface Entry {
  readonly id: string;
  /** The SHA-256 digest, base64 (44 characters). */
  readonly digest: string;
  readonly grant: KeyGrant;
}

/**
 * Whether two strings of the same length are equal, in time that depends only on the length
 * (every character is compared, whatever the first difference): the constant-time compare of two
 * base64 digests, without making a Buffer of each (node's timingSafeEqual takes buffers).
 */
export function sameDigest(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** Keys as a set of digests, looked up in O(1) and confirmed with a constant-time compare. */
export class KeyRing {
  private readonly byDigest = new Map<string, Entry>();

  add(id: string, hash: string, limits: { expires?: string | undefined; operations?: readonly string[] | undefined; scopes?: readonly string[] | undefined } = {}): void {
    const hex = hash.slice(HASH_PREFIX.length);
    const consumer: Consumer = Object.freeze({
      id,
      expires: limits.expires,
      operations: limits.operations === undefined ? undefined : Object.freeze([...limits.operations]),
      scopes: limits.scopes === undefined ? undefined : Object.freeze([...limits.scopes]),
    });
    const grant: KeyGrant = Object.freeze({
      expiresMs: limits.expires === undefined ? undefined : Date.parse(limits.expires),
      operations: limits.operations === undefined ? undefined : new Set(limits.operations),
      consumer,
    });
    const digest = Buffer.from(hex, 'hex').toString('base64');
    this.byDigest.set(digest, { id, digest, grant });
  }

  /** A plaintext key, as it comes from the environment: hashed at once, never kept. */
  addPlain(id: string, key: string): void {
    this.add(id, hashKey(key));
  }

  get size(): number {
    return this.byDigest.size;
  }

  /** The id of the key, or undefined. Never logs or keeps the presented key. */
  identify(presented: string): string | undefined {
    return this.grant(presented)?.consumer.id;
  }

  /** The grant of the key, or undefined. Never logs or keeps the presented key. */
  grant(presented: string): KeyGrant | undefined {
    return this.grantOfDigest(digestOf(presented));
  }

  /** The grant of a presented key's digest (`digestOf`), so a caller hashes once for several rings. */
  grantOfDigest(digest: string): KeyGrant | undefined {
    const entry = this.byDigest.get(digest);
    return entry !== undefined && sameDigest(entry.digest, digest) ? entry.grant : undefined;
  }
}

/** The SHA-256 digest of a presented key, base64: what a ring and the key registry look up. */
export function digestOf(presented: string): string {
  // crypto.hash: one call, no Hash object per request (far cheaper than createHash here),
  // and its digest as a base64 string: a Buffer made in C++ for it costs more than the hash
  // (the Buffer digest alone costs more than the whole grant: `node bench/ops.mjs`).
  return hash('sha256', presented, 'base64');
}
