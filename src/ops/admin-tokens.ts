/**
 * The admin API's bearer tokens (docs/keys.md, "The admin API"): where they come from, which are
 * strong enough, and the set in force, held as SHA-256 digests.
 *
 * Two sources, both optional: an environment variable (`server.admin.tokensFromEnv`, comma-
 * separated), read once since a process's environment never changes, and a file
 * (`server.admin.tokensFile`, one token per line, `#` comment lines; a Kubernetes Secret mount),
 * read at start and again on each reload (SIGHUP, `--watch`), so a leaked token is revoked without a
 * restart.
 *
 * A token found whoever reaches the admin port can mint keys for any id: it must resist guessing.
 * `tokenWeakness` refuses a short one (under 32 characters) and the shapes a person types (one
 * character repeated, a word repeated, a run such as `abcdef...` or `0123...`, few distinct
 * characters). Random bytes pass: `openssl rand -base64 32` (44 characters), `openssl rand -hex 16`
 * (32 hex digits, 128 bits). The thresholds were chosen so that random hex, base64 and even
 * all-digit tokens of 32 characters are never refused (tried on 300,000 of each).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';

export const MIN_TOKEN_LENGTH = 32;
const HOW = 'make one with `openssl rand -base64 32`';
/** Characters an Authorization header carries in a bearer token: visible ASCII, no space. */
const VISIBLE = /^[\x21-\x7e]+$/;

/** Shannon entropy of the token's character frequencies, times its length, in bits. */
function variety(token: string): number {
  const counts = new Map<string, number>();
  for (const ch of token) counts.set(ch, (counts.get(ch) ?? 0) + 1);
  let bits = 0;
  for (const n of counts.values()) bits -= n * Math.log2(n / token.length);
  return bits;
}

/** Distinct 3-character substrings per position: near 1 for random text, low for a repeated word. */
function trigramRatio(token: string): number {
  const seen = new Set<string>();
  for (let i = 0; i + 3 <= token.length; i++) seen.add(token.slice(i, i + 3));
  return seen.size / (token.length - 2);
}

/** Share of neighbouring characters whose codes differ by 0 or 1 (`aaaa`, `abcd`, `4321`). */
function runShare(token: string): number {
  let n = 0;
  for (let i = 1; i < token.length; i++) if (Math.abs(token.charCodeAt(i) - token.charCodeAt(i - 1)) <= 1) n++;
  return n / (token.length - 1);
}

/**
 * Why `token` is too weak to be an admin token, as a phrase that never quotes it; undefined when it
 * is strong enough.
 *
 * @example
 *   tokenWeakness('a')                     // 'is 1 character long; an admin token needs at least 32 (...)'
 *   tokenWeakness(randomBytes(32).toString('base64url')) // undefined
 */
export function tokenWeakness(token: string): string | undefined {
  if (token.length < MIN_TOKEN_LENGTH) {
    return `is ${token.length} character${token.length === 1 ? '' : 's'} long; an admin token needs at least ${MIN_TOKEN_LENGTH} (${HOW})`;
  }
  if (!VISIBLE.test(token)) return 'has a character a bearer token cannot carry (only visible ASCII, no spaces)';
  // 72 bits: random all-digit tokens of 32 characters measure 78 and more; four letters shuffled, 64 at most.
  if (variety(token) < 72) return `has too few distinct characters to resist guessing (${HOW})`;
  // Random tokens measure 0.76 and more; a word repeated, about 0.3.
  if (trigramRatio(token) < 0.6) return `repeats itself (${HOW})`;
  // Random digits measure 0.68 at most; `abcdef...`, about 1.
  if (runShare(token) > 0.75) return `is a run of neighbouring characters (${HOW})`;
  return undefined;
}

/** Admin tokens from an environment variable: comma-separated, blanks ignored. */
export function adminTokens(env: Readonly<Record<string, string | undefined>>, name: string | null): string[] {
  if (name === null) return [];
  return (env[name] ?? '').split(',').map((t) => t.trim()).filter((t) => t !== '');
}

/** The tokens of a tokens file: one per line, blank lines and lines starting with `#` skipped. */
export function tokensOfFile(text: string): Array<{ readonly token: string; readonly line: number }> {
  const out: Array<{ token: string; line: number }> = [];
  text.split('\n').forEach((raw, i) => {
    const token = raw.trim();
    if (token !== '' && !token.startsWith('#')) out.push({ token, line: i + 1 });
  });
  return out;
}

/** A token and the name audit lines and messages give it (`PETSTORE_ADMIN_TOKENS#2`), never its value. */
export interface NamedToken {
  readonly name: string;
  readonly token: string;
}

/** Where the tokens come from: `server.admin`'s token options. */
export interface TokenSources {
  readonly tokensFromEnv: string | null;
  readonly tokensFile?: string | null | undefined;
}

export interface TokenProblem {
  readonly path: string;
  readonly message: string;
}

export type TokenRead = { readonly ok: true; readonly tokens: readonly NamedToken[] } | { readonly ok: false; readonly problems: readonly TokenProblem[] };

/**
 * Reads both sources and checks every token; the problems name the variable or the file, the
 * token's number (and line), never the token.
 *
 * @example
 *   readAdminTokens({ tokensFromEnv: 'PETSTORE_ADMIN_TOKENS', tokensFile: '/etc/petstore-gateway/admin/tokens' }, process.env)
 */
export function readAdminTokens(sources: TokenSources, env: Readonly<Record<string, string | undefined>>, read: (file: string) => string = (f) => readFileSync(f, 'utf8')): TokenRead {
  const tokens: NamedToken[] = [];
  const problems: TokenProblem[] = [];
  const name = sources.tokensFromEnv;
  adminTokens(env, name).forEach((token, i) => {
    const weak = tokenWeakness(token);
    if (weak !== undefined) problems.push({ path: '$.server.admin.tokensFromEnv', message: `token ${i + 1} of the environment variable ${name} ${weak}` });
    tokens.push({ name: `${name}#${i + 1}`, token });
  });
  const file = sources.tokensFile;
  if (file !== null && file !== undefined) {
    let text: string | undefined;
    try {
      text = read(file);
    } catch (err) {
      problems.push({ path: '$.server.admin.tokensFile', message: `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})` });
    }
    tokensOfFile(text ?? '').forEach(({ token, line }, i) => {
      const weak = tokenWeakness(token);
      if (weak !== undefined) problems.push({ path: '$.server.admin.tokensFile', message: `token ${i + 1} of ${file} (line ${line}) ${weak}` });
      tokens.push({ name: `${file}#${i + 1}`, token });
    });
  }
  return problems.length > 0 ? { ok: false, problems } : { ok: true, tokens };
}

const sha256 = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

/**
 * The admin tokens in force, as digests: replaced whole on a reload. A presented token is compared
 * in constant time against every digest (no early exit), so the time says nothing of which
 * token, or how much of one, matched.
 */
export class AdminTokens {
  private digests: ReadonlyArray<{ readonly name: string; readonly digest: Buffer }> = [];

  constructor(tokens: readonly NamedToken[] = []) {
    this.replace(tokens);
  }

  /** Puts `tokens` in force; true when the set changed (another token, or another name of one). */
  replace(tokens: readonly NamedToken[]): boolean {
    const next = tokens.map((t) => ({ name: t.name, digest: sha256(t.token) }));
    const same = next.length === this.digests.length && next.every((t, i) => t.name === this.digests[i]?.name && t.digest.equals(this.digests[i].digest));
    this.digests = next;
    return !same;
  }

  get size(): number {
    return this.digests.length;
  }

  /** The name of the token `presented` is, or undefined. */
  match(presented: string): string | undefined {
    const digest = sha256(presented);
    let found: string | undefined;
    for (const d of this.digests) if (timingSafeEqual(d.digest, digest) && found === undefined) found = d.name;
    return found;
  }
}
