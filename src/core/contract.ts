/**
 * The data shapes of the interface (docs/interface.md, "Resources and their fields"), checked
 * without losing a digit: JSON is parsed with lossless-json, which keeps every number as its source
 * text (JSON.parse turns 9223372036854775807 into 9223372036854776000), rejects a key repeated with
 * another value (parsers downstream might keep either one) and keeps `__proto__` as a plain own
 * field. Bytes that are not UTF-8 are rejected, never replaced: the upstream gets what was checked.
 *
 * Used by the `new-pet` policy and by the reference backend, so both apply one definition.
 */
import { Ajv, type ErrorObject } from 'ajv';
import { isLosslessNumber, parse, stringify, type LosslessNumber } from 'lossless-json';

export const PET_STATUSES = ['available', 'pending', 'sold'] as const;
export type PetStatus = (typeof PET_STATUSES)[number];

export function isPetStatus(value: unknown): value is PetStatus {
  return value === 'available' || value === 'pending' || value === 'sold';
}

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

/** listPets' `limit` (docs/interface.md, "Limits"). */
export const LIMIT_MIN = 1;
export const LIMIT_MAX = 100;
export const LIMIT_DEFAULT = 20;

export interface ListQuery {
  readonly limit: number;
  readonly status: PetStatus | undefined;
}

/**
 * Reads listPets' query: `limit` an integer 1..100 (default 20), `status` a PetStatus, each at most
 * once. Returns the values, or a message naming the bound. With `clamp`, an integer `limit` outside
 * the bounds is brought to the nearest bound instead; a `limit` that is not an integer never is.
 */
export function parseListQuery(rawQuery: string, clamp: boolean): ListQuery | { readonly error: string } {
  const params = new URLSearchParams(rawQuery);
  const limits = params.getAll('limit');
  const statuses = params.getAll('status');
  if (limits.length > 1) return { error: 'limit may be given once' };
  if (statuses.length > 1) return { error: 'status may be given once' };
  let limit = LIMIT_DEFAULT;
  const given = limits[0];
  if (given !== undefined) {
    if (!/^[+-]?[0-9]+$/.test(given)) return { error: `limit must be an integer from ${LIMIT_MIN} to ${LIMIT_MAX}` };
    // Compared as BigInt: '99999999999999999999' is out of range, not a rounding artefact.
    const n = BigInt(given);
    if (n < LIMIT_MIN && !clamp) return { error: `limit must be at least ${LIMIT_MIN}` };
    if (n > LIMIT_MAX && !clamp) return { error: `limit must be at most ${LIMIT_MAX}` };
    limit = n < LIMIT_MIN ? LIMIT_MIN : n > LIMIT_MAX ? LIMIT_MAX : Number(n);
  }
  const status = statuses[0];
  if (status !== undefined && !isPetStatus(status)) return { error: `status must be one of ${PET_STATUSES.join(', ')}` };
  return { limit, status };
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

export type UnknownFields = 'reject' | 'strip' | 'allow';

const NEW_PET_FIELDS = new Set(['name', 'categoryId', 'status']);

function newPetSchema(unknownFields: UnknownFields) {
  return {
    type: 'object',
    required: ['name', 'categoryId'],
    properties: {
      name: { type: 'string' },
      categoryId: { int64: true },
      status: { enum: PET_STATUSES },
      // "`id` is never supplied by the client when creating."
      id: false,
    },
    additionalProperties: unknownFields !== 'reject',
  };
}

function message(e: ErrorObject): string {
  const field = e.instancePath.slice(1).split('/')[0] ?? '';
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return `${String(p.missingProperty)} is required`;
    case 'additionalProperties':
      return `unknown field '${String(p.additionalProperty)}'`;
    case 'false schema':
      return `${field} must not be sent: the service assigns it`;
    case 'int64':
      return `${field} must be an integer within int64`;
    case 'enum':
      return `${field} must be one of ${PET_STATUSES.join(', ')}`;
    case 'type':
      return field === '' ? 'the body must be a JSON object' : `${field} must be a ${String(p.type)}`;
    default:
      return `${field || 'the body'} ${e.message ?? 'is not valid'}`;
  }
}

export interface NewPetCheck {
  /** Every violation, each naming its field; empty when the body is a valid NewPet. */
  readonly errors: readonly string[];
  /** With `strip`: the value without unknown fields, when any were removed. */
  readonly stripped?: LosslessValue;
}

/** Pet (docs/interface.md, "Pet"): the one definition, compiled by Ajv and read by pet-scan.ts. */
export const PET_SCHEMA = {
  type: 'object',
  required: ['id', 'name', 'categoryId'],
  properties: {
    id: { int64: true },
    name: { type: 'string' },
    categoryId: { int64: true },
    status: { enum: PET_STATUSES },
  },
};

function contractAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, strict: true });
  ajv.addKeyword({
    keyword: 'int64',
    schemaType: 'boolean',
    errors: false,
    validate: (_schema: boolean, data: unknown) => isLosslessNumber(data) && isInt64Text(data.value),
  });
  return ajv;
}

/**
 * Compiles validators of the response shapes, Pet and Pets, once. They take a value from
 * `parseLossless` and return the violations (`/3/id must be an integer within int64`), empty when valid.
 * The response contract itself checks bytes in one pass (pet-scan.ts); this parse-then-validate
 * path, with `unknownPetFields` and `withoutUnknownPetFields`, is the reference its tests hold it to.
 */
let responseShapes: { pet: (v: LosslessValue) => string[]; pets: (v: LosslessValue) => string[] } | undefined;

export function compileResponseShapes(): { pet: (v: LosslessValue) => string[]; pets: (v: LosslessValue) => string[] } {
  // Compiled once per process: a reload does not pay for it again.
  if (responseShapes !== undefined) return responseShapes;
  const ajv = contractAjv();
  const wrap = (validate: ReturnType<Ajv['compile']>) => (value: LosslessValue) =>
    validate(value) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.keyword === 'int64' ? 'must be an integer within int64' : (e.message ?? 'is not valid')}`);
  responseShapes = { pet: wrap(ajv.compile(PET_SCHEMA)), pets: wrap(ajv.compile({ type: 'array', items: PET_SCHEMA })) };
  return responseShapes;
}

/** The fields of Pet (docs/interface.md, "Pet": the fields of NewPet plus `id`). */
const PET_FIELDS = new Set(['id', 'name', 'categoryId', 'status']);

/**
 * The fields of a valid Pet or Pets value that the interface does not define (each name once),
 * e.g. an upstream's `internalNote`; empty when there are none.
 */
export function unknownPetFields(value: LosslessValue): string[] {
  const found = new Set<string>();
  for (const pet of Array.isArray(value) ? (value as unknown[]) : [value]) {
    if (pet === null || typeof pet !== 'object') continue;
    for (const k of Object.keys(pet)) if (!PET_FIELDS.has(k)) found.add(k);
  }
  return [...found];
}

/** A valid Pet or Pets value with only the interface's fields, as JSON text (int64 exact). */
export function withoutUnknownPetFields(value: LosslessValue): string {
  const keep = (pet: unknown): unknown => {
    if (pet === null || typeof pet !== 'object') return pet;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(pet)) if (PET_FIELDS.has(k)) out[k] = v;
    return out;
  };
  return stringifyLossless(Array.isArray(value) ? (value as unknown[]).map(keep) : keep(value));
}

/**
 * Compiles a NewPet validator once (at policy load, never per request). It takes a value from
 * `parseLossless` and reports every violation at once.
 */
const newPetValidators = new Map<UnknownFields, (value: LosslessValue) => NewPetCheck>();

export function compileNewPet(unknownFields: UnknownFields): (value: LosslessValue) => NewPetCheck {
  // One validator per mode for the process: policies created on a reload reuse it.
  let check = newPetValidators.get(unknownFields);
  if (check === undefined) newPetValidators.set(unknownFields, (check = buildNewPet(unknownFields)));
  return check;
}

function buildNewPet(unknownFields: UnknownFields): (value: LosslessValue) => NewPetCheck {
  const validate = contractAjv().compile(newPetSchema(unknownFields));
  return (value) => {
    // A bare number is a LosslessNumber object: not a NewPet, whatever Ajv would say of its fields.
    if (isLosslessNumber(value)) return { errors: ['the body must be a JSON object'] };
    if (!validate(value)) return { errors: (validate.errors ?? []).map(message) };
    if (unknownFields !== 'strip') return { errors: [] };
    const obj = value as Record<string, unknown>;
    const unknown = Object.keys(obj).filter((k) => !NEW_PET_FIELDS.has(k));
    if (unknown.length === 0) return { errors: [] };
    const kept: Record<string, unknown> = {};
    for (const k of Object.keys(obj)) if (NEW_PET_FIELDS.has(k)) kept[k] = obj[k];
    return { errors: [], stripped: kept };
  };
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
