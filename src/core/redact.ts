/**
 * What of an upstream's error text may reach a client or a log. A client sees an upstream message
 * only when it is short, plain prose; an operator's log sees an excerpt with anything that looks
 * like a secret masked. HTML pages, stack traces and credentials never reach a client.
 */

/** Words and shapes that suggest a secret or an internal detail. */
const SECRETISH =
  /(pass(word|wd)?|secret|token|api[_-]?key|bearer|authori[sz]ation|credential|private[ _-]?key|session|cookie)|[a-z][a-z0-9+.-]*:\/\/[^\s/@]*@|[A-Za-z0-9+/_=-]{32,}|\b\d{1,3}(\.\d{1,3}){3}\b/i;
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
  [/((?:pass(?:word|wd)?|secret|token|api[_-]?key|credential|session|cookie)["']?\s*[:=]\s*)(["'])(?:(?!\2)[^\\]|\\.)*\2/gi, '$1$2[redacted]$2'],
  // name=value: unquoted, up to a space, a quote or a tag; & , ; end it only before another name= or a space.
  [/((?:pass(?:word|wd)?|secret|token|api[_-]?key|credential|session|cookie)["']?\s*[:=]\s*["']?)(?:[^\s"'&,;<]|[&,;](?!\s|$|[\w.-]+\s*[:=]))+/gi, '$1[redacted]'],
  // <td>DB_PASSWORD</td><td>value</td>: the name and the value in separate elements.
  [/((?:pass(?:word|wd)?|secret|token|api[_-]?key|credential)["']?\s*[:=]?\s*(?:<[^>]*>\s*)+)[^<\s]+/gi, '$1[redacted]'],
  [/(bearer|basic)\s+[A-Za-z0-9\-._~+/]+=*/gi, '$1 [redacted]'],
  [/([a-z][a-z0-9+.-]*:\/\/)[^\s/@]*@/gi, '$1[redacted]@'],
  [/[A-Za-z0-9+/_=-]{32,}/g, '[redacted]'],
];

/** An excerpt of an upstream body for the operator log: secrets masked, whitespace folded, bounded. */
export function redactForLog(text: string, max = 500): string {
  let out = text.slice(0, max * 2).replace(/\s+/g, ' ');
  // A token cut by the slice may be the first part of a secret too short left to look like one.
  if (text.length > max * 2) out = out.replace(/\S*$/, '');
  for (const [pattern, replacement] of MASKS) out = out.replace(pattern, replacement);
  return out.length > max ? out.slice(0, max) + '…' : out;
}
