/**
 * Who to tell about a key: its `owner` (a team or person) and `contact` (where to reach them), as
 * every source of keys takes them (a policy file's keys, the environment's companion variable, the
 * key registry's CLI and admin API, docs/keys.md "Owner and contact"). One set of rules, here: the
 * JSON Schema fragments (for the policy file and its published schema) and the checks every other
 * entry point runs (the same rules, plus the refusal of what looks like a secret, which no schema
 * can say).
 *
 * Neither is ever a secret: both are shown by `keys list`, `GET /keys` and the console, so a value
 * that looks like an API key or a token (a prefix of a known key format, a long run of
 * random-looking characters, a credential in a URL) is refused.
 */

export const OWNER_MAX_LENGTH = 100;
export const CONTACT_MAX_LENGTH = 200;

/** Control characters, and the invisible ones that make a text read as another (bidi overrides, zero widths, separators). */
const HIDDEN = '\\x00-\\x1f\\x7f-\\x9f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\ufeff';

/** 1 or more printable characters, no leading or trailing space. */
export const OWNER_PATTERN = `^[^\\s${HIDDEN}](?:[^${HIDDEN}]*[^\\s${HIDDEN}])?$`;

const EMAIL = "[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+";
/** No user:password@ (the host part has no `@`), printable ASCII after the host. */
const HTTPS = 'https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:[/?#][!-~]*)?';
const HANDLE = '[@#][A-Za-z0-9][A-Za-z0-9._/-]*';

/** An e-mail address, a `mailto:` or `https://` URL, or a chat handle (`@team`, `#channel`). */
export const CONTACT_PATTERN = `^(?:${EMAIL}|mailto:${EMAIL}|${HTTPS}|${HANDLE})$`;

export const OWNER_EXPECTS = `must be 1 to ${OWNER_MAX_LENGTH} printable characters, without control characters or a leading or trailing space, such as "Payments team"`;
export const CONTACT_EXPECTS = `must be an e-mail address, an https:// or mailto: URL, or a chat handle (@team, #channel), at most ${CONTACT_MAX_LENGTH} characters`;
export const SECRET_EXPECTS = 'looks like a secret (an API key, a token or a credential in a URL): give a name or a way to reach someone, never a secret';

export const OWNER_SCHEMA = {
  type: 'string',
  // No minLength: the pattern refuses an empty value, with its own message (one problem, not two).
  maxLength: OWNER_MAX_LENGTH,
  pattern: OWNER_PATTERN,
  description: 'Who the key belongs to (a team or a person), shown by `check`, `keys list` and `GET /keys` (registry keys) and the operator console: never a secret. See docs/keys.md, "Owner and contact".',
} as const;

export const CONTACT_SCHEMA = {
  type: 'string',
  maxLength: CONTACT_MAX_LENGTH,
  pattern: CONTACT_PATTERN,
  description: 'Where to reach the owner: an e-mail address, an https:// or mailto: URL, or a chat handle (@team, #channel); never a secret. See docs/keys.md, "Owner and contact".',
} as const;

const OWNER = new RegExp(OWNER_PATTERN);
const CONTACT = new RegExp(CONTACT_PATTERN);

/** Why `value` is not an owner, or undefined when it is one. */
export function ownerProblem(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length === 0 || value.length > OWNER_MAX_LENGTH || !OWNER.test(value)) return OWNER_EXPECTS;
  return looksLikeSecret(value) ? SECRET_EXPECTS : undefined;
}

/** Why `value` is not a contact, or undefined when it is one. */
export function contactProblem(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length === 0 || value.length > CONTACT_MAX_LENGTH || !CONTACT.test(value)) return CONTACT_EXPECTS;
  if (value.startsWith('https://') && !URL.canParse(value)) return CONTACT_EXPECTS;
  return looksLikeSecret(value) ? SECRET_EXPECTS : undefined;
}

/** Owner and contact as a key carries them: each absent when it has none. */
export interface KeyOwnerFields {
  readonly owner?: string | undefined;
  readonly contact?: string | undefined;
}

/** The first problem of a key's owner and contact (absent ones are fine), with the field it is about. */
export function ownerFieldsProblem(fields: { readonly owner?: unknown; readonly contact?: unknown }): { field: 'owner' | 'contact'; message: string } | undefined {
  const owner = fields.owner === undefined ? undefined : ownerProblem(fields.owner);
  if (owner !== undefined) return { field: 'owner', message: owner };
  const contact = fields.contact === undefined ? undefined : contactProblem(fields.contact);
  return contact === undefined ? undefined : { field: 'contact', message: contact };
}

/**
 * Prefixes of key and token formats: the gateway's own (`psgk_` of the registry, `psg_` of
 * `new-key`), a key hash as a policy file holds it, and the common ones of other services.
 */
const KNOWN_SECRET =
  /\b(?:psgk_[A-Za-z0-9]{16,}|psg_[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|glpat-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}|sk_(?:live|test)_[A-Za-z0-9]{16,}|AIza[A-Za-z0-9_-]{30,}|AKIA[0-9A-Z]{16}|sha256:[0-9a-fA-F]{16,})/;

/** Query (or fragment) parameters that carry credentials, by their whole name. */
const SECRET_PARAMETER = /^(?:access_?token|id_?token|token|api_?key|apikey|key|secret|client_?secret|password|passwd|pwd|sig|signature|auth|code|session|sid|jwt)$/i;
/** Words of a parameter's name that say it carries one (`x-api-key`, `private_token`, `X-Amz-Signature`, `sessionid`). */
const SECRET_WORDS: ReadonlySet<string> = new Set(['token', 'tokens', 'key', 'apikey', 'secret', 'password', 'passwd', 'pwd', 'signature', 'credential', 'credentials', 'sessionid', 'jwt']);

/** Whether a URL parameter's name says it carries a credential. */
function secretParameter(name: string): boolean {
  if (SECRET_PARAMETER.test(name)) return true;
  return name
    .split(/[-_.\s]+|(?<=[a-z])(?=[A-Z])/)
    .some((word) => SECRET_WORDS.has(word.toLowerCase()));
}

/** A run of token characters long enough to be a key (base64url, base62, hex...). */
const RUN = /[A-Za-z0-9_-]{20,}/g;
/** A piece made of words: capitalised or lower-case words, upper-case acronyms, numbers. */
const WORDS = /^(?:[A-Z]?[a-z]+|[A-Z]+|[0-9]+)+$/;
const SEGMENT = /[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+/g;
/** Six consonants in a row: rare in words, common in random letters. */
const CONSONANTS = /[bcdfghjklmnpqrstvwxz]{6}/i;

/** Shannon entropy of a text, in bits per character. */
function entropy(text: string): number {
  const counts = new Map<string, number>();
  for (const c of text) counts.set(c, (counts.get(c) ?? 0) + 1);
  let h = 0;
  for (const n of counts.values()) {
    const p = n / text.length;
    h -= p * Math.log2(p);
  }
  return h;
}

/** Whether a piece of a run (between `-` and `_`) reads as words: short, or a few long segments, few numbers. */
function wordLike(piece: string): boolean {
  if (piece.length <= 4) return true;
  if (!WORDS.test(piece) || CONSONANTS.test(piece)) return false;
  const segments = piece.match(SEGMENT) ?? [];
  const numbers = segments.filter((s) => s.charCodeAt(0) <= 57).length;
  return segments.length * 3 <= piece.length && numbers <= 2;
}

/**
 * Whether a run looks random: a hex string of 32 digits or more, or (not made of words) at least
 * 3.5 bits of entropy per character with two of lower case, upper case and digits. Calibrated on
 * random base62, base64url and hex strings of 20 to 40 characters (over 98% refused from 20
 * characters for base62 and base64url, all from 32 for hex) against team names, hyphenated words
 * with versions and years, and wiki and chat URLs (none refused).
 */
function randomLooking(run: string): boolean {
  if (run.length >= 32 && /^[0-9a-f]+$/i.test(run) && /[0-9]/.test(run) && /[a-f]/i.test(run)) return true;
  if (run.split(/[-_]+/).every(wordLike)) return false;
  const classes = Number(/[a-z]/.test(run)) + Number(/[A-Z]/.test(run)) + Number(/[0-9]/.test(run));
  return classes >= 2 && entropy(run) >= 3.5;
}

/** Whether a text looks like (or holds) an API key, a token, a key hash or a credential in a URL. */
export function looksLikeSecret(text: string): boolean {
  if (KNOWN_SECRET.test(text)) return true;
  if (/^https?:\/\//i.test(text) && URL.canParse(text)) {
    const url = new URL(text);
    if (url.username !== '' || url.password !== '') return true;
    // The fragment too: OAuth's implicit flow hands its tokens there (#access_token=...).
    for (const params of [url.searchParams, new URLSearchParams(url.hash.slice(1))]) for (const name of params.keys()) if (secretParameter(name)) return true;
  }
  let decoded = text;
  try {
    decoded = decodeURIComponent(text);
  } catch {
    // Not percent-encoded text: read as it is.
  }
  for (const t of new Set([text, decoded])) for (const run of t.match(RUN) ?? []) if (randomLooking(run)) return true;
  return false;
}
