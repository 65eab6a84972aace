/**
 * What of an upstream's error text may reach a client or a log. A client sees an upstream message
 * only when it is short, plain prose; an operator's log sees an excerpt with anything that looks
 * like a secret masked. HTML pages, stack traces and credentials never reach a client.
 */

/** Words and shapes that suggest a secret or an internal detail ("API key" with a space too). */
const SECRETISH =
  /(pass(word|wd)?|secret|token|api[_ -]?key|access[_ -]?key|bearer|authori[sz]ation|credential|private[ _-]?key|session|cookie)|[a-z][a-z0-9+.-]*:\/\/[^\s/@]*@|[A-Za-z0-9+/_=-]{32,}|\b\d{1,3}(\.\d{1,3}){3}\b/i;
/** Stack frames, exceptions and source positions. */
const INTERNALS = /\bat\s+[\w$.<>]+\s*\(|\.(js|ts|mjs|cjs|java|py|rb|go|php|cs|kt|scala):\d+|exception|traceback|stack|errno|sqlstate|ORA-\d+|syntax error at or near|\/(usr|var|home|opt|srv|app)\//i;
/** Markup or structure. */
const MARKUP = /[<>{}[\]\\`\n\r\t]/;

export const MAX_CLIENT_MESSAGE = 200;

/** Whether an upstream message may be shown to a client as it is. */
export function isPlainMessage(text: unknown): text is string {
  return (
    typeof text === 'string' &&
    text.trim().length > 0 &&
    text.length <= MAX_CLIENT_MESSAGE &&
    !MARKUP.test(text) &&
    !INTERNALS.test(text) &&
    !SECRETISH.test(text)
  );
}

const MASKS: ReadonlyArray<[RegExp, string]> = [
  // name: "value": a quoted value is masked up to its closing quote, whatever it contains.
  [/((?:pass(?:word|wd)?|secret|token|api[_ -]?key|access[_ -]?key|credential|session|cookie)["']?\s*[:=]\s*)(["'])(?:(?!\2)[^\\]|\\.)*\2/gi, '$1$2[redacted]$2'],
  // name=value: unquoted, up to a space, a quote or a tag; & , ; end it only before another name= or a space.
  [/((?:pass(?:word|wd)?|secret|token|api[_ -]?key|access[_ -]?key|credential|session|cookie)["']?\s*[:=]\s*["']?)(?:[^\s"'&,;<]|[&,;](?!\s|$|[\w.-]+\s*[:=]))+/gi, '$1[redacted]'],
  // <td>DB_PASSWORD</td><td>value</td>: the name and the value in separate elements.
  [/((?:pass(?:word|wd)?|secret|token|api[_ -]?key|access[_ -]?key|credential)["']?\s*[:=]?\s*(?:<[^>]*>\s*)+)[^<\s]+/gi, '$1[redacted]'],
  [/(bearer|basic)\s+[A-Za-z0-9\-._~+/]+=*/gi, '$1 [redacted]'],
  [/([a-z][a-z0-9+.-]*:\/\/)[^\s/@]*@/gi, '$1[redacted]@'],
  [/[A-Za-z0-9+/_=-]{32,}/g, '[redacted]'],
];

/**
 * The secrets the gateway holds in plaintext, masked EXACTLY wherever upstream text is relayed to a
 * client or logged: a plain string search, so a secret is found whatever its
 * length or shape, where the heuristics above only catch what looks like one. Compiled once from
 * the config and environment (`gatewaySecrets` in src/policies/auth); immutable.
 */
export class SecretSet {
  static readonly EMPTY = new SecretSet([]);
  /** Distinct, non-empty, longest first: a secret that contains another is masked whole. */
  private readonly secrets: readonly string[];
  private readonly given: readonly string[];

  constructor(secrets: Iterable<string>) {
    this.given = [...secrets];
    const all = new Set<string>();
    for (const secret of this.given) {
      if (secret === '') continue;
      all.add(secret);
      // The spellings an upstream may echo it in: JSON-escaped slashes and percent-encoding.
      if (secret.includes('/')) all.add(secret.replaceAll('/', '\\/'));
      const encoded = encodeURIComponent(secret);
      if (encoded !== secret) all.add(encoded);
    }
    this.secrets = [...all].sort((a, b) => b.length - a.length);
  }

  get size(): number {
    return this.secrets.length;
  }

  /** This set plus one more secret (e.g. the key a client presented, when it is forwarded). */
  including(secret: string | undefined): SecretSet {
    return secret === undefined || secret === '' ? this : new SecretSet([...this.given, secret]);
  }

  /** Whether the text holds any of the secrets. */
  contains(text: string): boolean {
    for (const s of this.secrets) if (text.includes(s)) return true;
    return false;
  }

  /** The text with every occurrence of every secret replaced by `[redacted]`. */
  mask(text: string): string {
    let out = text;
    for (const s of this.secrets) if (out.includes(s)) out = out.split(s).join('[redacted]');
    return out;
  }
}

/**
 * The secret parts of an Authorization value: the whole value, the credentials after the scheme
 * ("Bearer <token>", "Basic <base64>"), and for Basic the decoded "user:password" and password.
 */
export function credentialSecrets(value: string): string[] {
  const out = [value.trim()];
  const m = /^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*)[ \t]+(\S.*)$/.exec(value.trim());
  const [, scheme, rest] = m ?? [];
  if (scheme !== undefined && rest !== undefined) {
    const token = rest.trim();
    out.push(token);
    if (scheme.toLowerCase() === 'basic' && /^[A-Za-z0-9+/]+=*$/.test(token)) {
      const decoded = Buffer.from(token, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon >= 0) {
        out.push(decoded);
        if (colon < decoded.length - 1) out.push(decoded.slice(colon + 1));
      }
    }
  }
  return out;
}

/**
 * An excerpt of an upstream body for the operator log: the gateway's own secrets masked exactly
 * (before the cut, so none is logged in part; `cut` says the text itself is a prefix), then
 * anything that looks like a secret, whitespace folded, bounded.
 */
export function redactForLog(text: string, max = 500, secrets: SecretSet = SecretSet.EMPTY, cut = false): string {
  const masked = secrets.mask(text);
  let out = masked.slice(0, max * 2).replace(/\s+/g, ' ');
  // A token cut by the slice (or by the caller: `cut`) may be the first part of a secret, too short
  // to look like one and no longer equal to the whole: it is left out.
  if (cut || masked.length > max * 2) out = out.replace(/\S*$/, '');
  for (const [pattern, replacement] of MASKS) out = out.replace(pattern, replacement);
  return out.length > max ? out.slice(0, max) + '…' : out;
}
