/**
 * The data shapes of the interface (pet-store-interface.md, "Resources and their fields"), checked
 * without losing a digit: JSON is parsed with lossless-json, which keeps every number as its source
 * text (JSON.parse turns 9223372036854775807 into 9223372036854776000), rejects duplicate keys
 * (which parsers downstream might resolve differently) and keeps `__proto__` as a plain own field.
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
  return typeof value === 'string' && JSON_MEDIA_TYPE.test(value);
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
/** An integer literal: no fraction, no exponent, no leading zeros (RFC 8259 section 6 int). */
const INTEGER_LITERAL = /^-?(0|[1-9][0-9]{0,19})$/;

/**
 * Whether the text is an int64 written as a plain integer. `1.0`, `1e2` and `9223372036854775808`
 * are not: forwarded byte for byte, they would not reach an int64 backend as the same value.
 */
export function isInt64Text(text: string): boolean {
  if (!INTEGER_LITERAL.test(text)) return false;
  const n = BigInt(text);
  return n >= INT64_MIN && n <= INT64_MAX;
}

/** A JSON value whose numbers are LosslessNumber (their source text). */
export type LosslessValue = unknown;

/** Parses JSON keeping number text; throws SyntaxError (also on duplicate keys) or RangeError (too deep). */
export function parseLossless(text: string): LosslessValue {
  return parse(text);
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

/**
 * Compiles a NewPet validator once (at policy load, never per request). It takes a value from
 * `parseLossless` and reports every violation at once.
 */
export function compileNewPet(unknownFields: UnknownFields): (value: LosslessValue) => NewPetCheck {
  const ajv = new Ajv({ allErrors: true, strict: true });
  ajv.addKeyword({
    keyword: 'int64',
    schemaType: 'boolean',
    errors: false,
    validate: (_schema: boolean, data: unknown) => isLosslessNumber(data) && isInt64Text(data.value),
  });
  const validate = ajv.compile(newPetSchema(unknownFields));
  return (value) => {
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
