/**
 * Checks on what a message holds, without losing a digit: JSON is parsed with lossless-json, which
 * keeps every number as its source text (JSON.parse turns 9223372036854775807 into
 * 9223372036854776000), rejects a key repeated with another value (parsers downstream might keep
 * either one) and keeps `__proto__` as a plain own field. Bytes that are not UTF-8 are rejected,
 * never replaced: the upstream gets what was checked. The interface's own shapes are compiled from
 * its document (src/api/) with `contractAjv`.
 */
import { Ajv } from 'ajv';
import { isLosslessNumber, parse, stringify, type LosslessNumber } from 'lossless-json';

/** `application/json`, any case, parameters such as charset allowed (RFC 9110 section 8.3.1). */
const JSON_MEDIA_TYPE = /^application\/json[ \t]*(;|$)/i;

export function isJsonMediaType(value: string | string[] | undefined): boolean {
  if (typeof value !== 'string') return false;
  // The usual spelling (lower case, nothing or `;` after it) without the expression: the
  // response contract asks this of every answer it checks.
  if (value.startsWith('application/json')) {
    const next = value.charCodeAt(16);
    if (Number.isNaN(next) || next === 0x3b) return true;
    if (next !== 0x20 && next !== 0x09) return false;
  }
  return JSON_MEDIA_TYPE.test(value);
}

/**
 * One media-type parameter after `;` (RFC 9110 section 5.6.6 and 8.3.1): `name=token` or
 * `name="quoted string"`, or nothing (an empty parameter is allowed).
 */
const PARAMETER = /[ \t]*;[ \t]*(?:([!#$%&'*+.^_`|~0-9A-Za-z-]+)=([!#$%&'*+.^_`|~0-9A-Za-z-]+|"(?:[^"\\\x00-\x08\x0a-\x1f\x7f]|\\[\x09\x20-\x7e\x80-\xff])*"))?/y;

/**
 * What the charset of a JSON request body says: `utf-8` when the
 * Content-Type is `application/json` with no charset or `charset=utf-8` (any case, quoted or not);
 * `other` for any other charset (utf-7, utf-16, latin1...), a charset given twice, or parameters
 * that do not parse; `not-json` for another media type.
 *
 * JSON exchanged between systems MUST be UTF-8 (RFC 8259 section 8.1) and application/json defines
 * no charset parameter; a body labelled utf-7 would be checked as UTF-8 here but read in UTF-7 by
 * an upstream that honours the label, so an `id` or a bad status could pass validation unseen.
 */
export function jsonCharset(value: string | string[] | undefined): 'utf-8' | 'other' | 'not-json' {
  if (typeof value !== 'string') return 'not-json';
  const head = /^application\/json/i.exec(value);
  if (head === null) return 'not-json';
  let i = head[0].length;
  while (value[i] === ' ' || value[i] === '\t') i++;
  if (i === value.length) return 'utf-8';
  if (value[i] !== ';') return 'not-json';
  i = head[0].length;
  let charset: string | undefined;
  let charsets = 0;
  while (i < value.length) {
    PARAMETER.lastIndex = i;
    const m = PARAMETER.exec(value);
    if (m === null) {
      // Only trailing whitespace may follow the last parameter; anything else does not parse.
      if (!/^[ \t]*$/.test(value.slice(i))) return 'other';
      break;
    }
    i = PARAMETER.lastIndex;
    const [, name, raw] = m;
    // The value is matched together with the name (one optional group around both).
    if (name !== undefined && raw !== undefined && name.toLowerCase() === 'charset') {
      charsets++;
      charset = (raw.startsWith('"') ? raw.slice(1, -1).replace(/\\(.)/g, '$1') : raw).toLowerCase();
    }
  }
  return charsets > 1 || (charset !== undefined && charset !== 'utf-8') ? 'other' : 'utf-8';
}

/** The UTF-8 encoding of U+FEFF, a byte order mark (RFC 8259 section 8.1: never added to JSON). */
export function startsWithBom(body: Buffer): boolean {
  return body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf;
}

/** An integer literal: no fraction, no exponent, no leading zeros (RFC 8259 section 6 int). */
const INTEGER_LITERAL = /^-?(0|[1-9][0-9]{0,19})$/;
/** 2^63 - 1 and 2^63, the largest magnitudes of a positive and a negative int64, as digits. */
const INT64_MAX_DIGITS = '9223372036854775807';
const INT64_MIN_DIGITS = '9223372036854775808';

/**
 * Whether the text is an int64 written as a plain integer. `1.0`, `1e2` and `9223372036854775808`
 * are not: forwarded byte for byte, they would not reach an int64 backend as the same value.
 * Decided on the digits (no BigInt per call): up to 18 digits always fit, 19 digits are
 * compared with the limit as text (same length, no leading zeros: text order is number order).
 */
export function isInt64Text(text: string): boolean {
  if (!INTEGER_LITERAL.test(text)) return false;
  const negative = text.charCodeAt(0) === 45;
  const digits = text.length - (negative ? 1 : 0);
  if (digits < 19) return true;
  if (digits > 19) return false;
  const magnitude = negative ? text.slice(1) : text;
  return magnitude <= (negative ? INT64_MIN_DIGITS : INT64_MAX_DIGITS);
}

/** A JSON value whose numbers are LosslessNumber (their source text). */
export type LosslessValue = unknown;

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Parses JSON keeping number text. Throws SyntaxError (also on a key repeated with another value),
 * TypeError (bytes that are not UTF-8) or RangeError (nested too deep).
 */
export function parseLossless(input: string | Buffer): LosslessValue {
  return parse(typeof input === 'string' ? input : UTF8.decode(input));
}

export function stringifyLossless(value: LosslessValue): string {
  return stringify(value) ?? 'null';
}

export { isLosslessNumber, type LosslessNumber };

/** An integer literal within int32 (RFC 8259 section 6 int, no fraction or exponent). */
export function isInt32Text(text: string): boolean {
  if (!/^-?(0|[1-9][0-9]{0,9})$/.test(text)) return false;
  const n = Number(text);
  return n >= -2147483648 && n <= 2147483647;
}

/**
 * An Ajv instance with the keywords `int64` and `int32`: a number checked on its exact source text
 * (a LosslessNumber from `parseLossless`), so an int64 beyond 2^53 is neither rounded nor refused.
 */
export function contractAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, strict: true });
  ajv.addKeyword({
    keyword: 'int64',
    schemaType: 'boolean',
    errors: false,
    validate: (_schema: boolean, data: unknown) => isLosslessNumber(data) && isInt64Text(data.value),
  });
  ajv.addKeyword({
    keyword: 'int32',
    schemaType: 'boolean',
    errors: false,
    validate: (_schema: boolean, data: unknown) => isLosslessNumber(data) && isInt32Text(data.value),
  });
  return ajv;
}

/**
 * Whether an upstream status may be taken as the final answer to a request:
 * an integer 200..599 (RFC 9110 section 15: three digits, classes 1xx-5xx; 600, 999 and 000 are
 * not HTTP), or 101 Switching Protocols only when the request asked for an upgrade (RFC 9110
 * section 15.2.2: a server sends 101 only in answer to Upgrade). Other 1xx are interim answers
 * (100 Continue, 102, 103 Early Hints) that the transport consumes; seen as final they are invalid.
 * The gateway answers an invalid one with 502 at once, whatever the engine.
 */
export function isValidUpstreamStatus(status: number, upgradeRequested = false): boolean {
  if (!Number.isInteger(status)) return false;
  if (status === 101) return upgradeRequested;
  return status >= 200 && status <= 599;
}
