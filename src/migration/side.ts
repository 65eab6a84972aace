/**
 * Which side a request of a split operation goes to. Each consumer (its key id) has a place on
 * [0, 100), from the SHA-256 of its id: the same on every instance, worker and version, and spread
 * evenly. A consumer whose place is below the operation's `percent` goes to `next`. With two
 * sides this threshold is what rendezvous hashing reduces to: raising the percent moves exactly
 * the consumers whose place falls between the old and the new value, from legacy to next, and
 * none back; lowering it moves them back in the reverse order.
 *
 * A request without a consumer (authentication off) has no place: it goes to `next` only at 100%.
 * A tester (a key with the tester scope) picks its side with the tester header, in every mode.
 */
import { createHash } from 'node:crypto';
import type { Exchange } from '../core/policy.js';
import { CONSUMER } from '../policies/auth/facts.js';
import { lruOfAtMost } from '../stores/memory.js';
import type { Side } from './types.js';

/** Places computed lately: consumers are the configured keys, so this holds every one in practice. */
const places = lruOfAtMost<number>(10_000);

/** A consumer's place on [0, 100): the first 53 bits of the SHA-256 of its id, as a fraction. */
export function placeOf(consumerId: string): number {
  let place = places.get(consumerId);
  if (place === undefined) {
    const d = createHash('sha256').update(consumerId, 'utf8').digest();
    place = ((d.readUInt32BE(0) * 2 ** 21 + (d.readUInt32BE(4) >>> 11)) / 2 ** 53) * 100;
    places.set(consumerId, place);
  }
  return place;
}

/** The side of a consumer for a split at `percent` (0 to 100). */
export function splitSide(consumerId: string | undefined, percent: number): Side {
  if (percent >= 100) return 'next';
  if (percent <= 0 || consumerId === undefined) return 'legacy';
  return placeOf(consumerId) < percent ? 'next' : 'legacy';
}

/** The side a tester asks for: the header's value, when the request's key has the tester scope; else undefined. */
export function testerSide(ex: Exchange, header: string, scope: string): Side | undefined {
  const asked = ex.head.headers[header];
  if (asked !== 'legacy' && asked !== 'next') return undefined;
  const scopes = ex.get(CONSUMER)?.scopes;
  return scopes !== undefined && scopes.includes(scope) ? asked : undefined;
}
