/**
 * The format of keys the registry issues: `psgk_`, 40 random base62 characters, then a 6-character
 * base62 CRC-32 of everything before it. The shape of GitHub's `ghp_` tokens: a fixed prefix lets
 * secret scanners find a leaked key with a regex and few false positives, and the checksum lets
 * the gateway (and a scanner) refuse a mistyped or truncated key without looking anything up.
 *
 * The checksum is not a secret and proves nothing about who made the key: only the registry's
 * hash does. 40 base62 characters carry 238 random bits.
 *
 * Keys of the older forms (`psg_` from `new-key`, any RFC 6750 token from a policy file or the
 * environment) are looked up in the file's and the environment's keys first, whatever their
 * prefix: one that happens to start with `psgk_` works like any other.
 */
import { randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';

export const KEY_PREFIX = 'psgk_';
const BODY_LENGTH = 40;
const CHECK_LENGTH = 6;
export const KEY_LENGTH = KEY_PREFIX.length + BODY_LENGTH + CHECK_LENGTH;
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** The documented regex of a registry key (docs/keys.md), for secret scanners. */
export const KEY_REGEX_SOURCE = '\\bpsgk_[0-9A-Za-z]{46}\\b';
const WHOLE_KEY = /^psgk_[0-9A-Za-z]{46}$/;

/** A 32-bit number as exactly 6 base62 digits (62^6 > 2^32), most significant first. */
function base62Checksum(n: number): string {
  let out = '';
  let v = n >>> 0;
  for (let i = 0; i < CHECK_LENGTH; i++) {
    out = BASE62[v % 62] + out;
    v = Math.floor(v / 62);
  }
  return out;
}

function checksumOf(head: string): string {
  return base62Checksum(crc32(head));
}

/** A new registry key: the prefix, 40 uniformly random base62 characters and the checksum. */
export function newRegistryKey(): string {
  let body = '';
  // Rejection sampling: bytes of 248 and above are dropped so each character is uniform
  // (248 = 4 * 62); bounded: 40 characters need on average 42 bytes, 256 bytes fail with
  // probability below 2^-200, and then another round is drawn.
  while (body.length < BODY_LENGTH) {
    for (const b of randomBytes(64)) {
      if (b < 248) body += BASE62[b % 62];
      if (body.length === BODY_LENGTH) break;
    }
  }
  const head = KEY_PREFIX + body;
  return head + checksumOf(head);
}

/**
 * Whether a presented token claims the registry format (its prefix). A token that claims it and
 * fails `isWellFormedKey` is not looked up in the registry (the file's keys are still searched).
 */
export function claimsRegistryFormat(token: string): boolean {
  return token.startsWith(KEY_PREFIX);
}

/** The prefix, the length, the alphabet and the checksum are all right. */
export function isWellFormedKey(token: string): boolean {
  if (token.length !== KEY_LENGTH || !WHOLE_KEY.test(token)) return false;
  const head = token.slice(0, KEY_LENGTH - CHECK_LENGTH);
  return checksumOf(head) === token.slice(KEY_LENGTH - CHECK_LENGTH);
}
