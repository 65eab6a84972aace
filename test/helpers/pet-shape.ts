/**
 * The Pet shape (docs/interface.md, "Pet") as src/api/model.ts writes an object shape, for tests of
 * the shape scanners; and the reference those scanners are held to: the shape's JSON Schema
 * compiled by Ajv (int64 and int32 as custom keywords on lossless-json's numbers, as
 * src/core/contract.ts's Ajv has int64), run after `parseLossless`, with the unknown fields found on
 * the parsed value.
 */
import { Ajv } from 'ajv';
import type { Field, ObjectShape } from '../../src/api/model.js';
import { isInt64Text, isLosslessNumber, parseLossless, stringifyLossless } from '../../src/core/contract.js';
import type { UnknownFieldMode } from '../../src/api/scan/index.js';

export const PET_SHAPE: ObjectShape = {
  name: 'Pet',
  fields: [
    { name: 'id', type: { kind: 'int64' } },
    { name: 'name', type: { kind: 'string' } },
    { name: 'categoryId', type: { kind: 'int64' } },
    { name: 'status', type: { kind: 'enum', values: ['available', 'pending', 'sold'] } },
  ],
  required: ['id', 'name', 'categoryId'],
  forbidden: [],
};

function propertyOf(f: Field): object {
  switch (f.type.kind) {
    case 'int64':
      return { int64: true };
    case 'int32':
      return { int32: true };
    case 'string':
      return { type: 'string' };
    case 'enum':
      return { enum: f.type.values };
  }
}

/** The JSON Schema of a shape, as the interface document would write it for Ajv. */
export function schemaOf(shape: ObjectShape): { type: 'object'; required: string[]; properties: Record<string, object | false> } {
  const properties: Record<string, object | false> = {};
  for (const f of shape.fields) properties[f.name] = propertyOf(f);
  for (const name of shape.forbidden) properties[name] = false;
  return { type: 'object', required: [...shape.required], properties };
}

const INT32 = /^-?(0|[1-9][0-9]{0,9})$/;

function referenceAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, strict: true });
  ajv.addKeyword({ keyword: 'int64', schemaType: 'boolean', errors: false, validate: (_s: boolean, data: unknown) => isLosslessNumber(data) && isInt64Text(data.value) });
  ajv.addKeyword({
    keyword: 'int32',
    schemaType: 'boolean',
    errors: false,
    validate: (_s: boolean, data: unknown) => isLosslessNumber(data) && INT32.test(data.value) && BigInt(data.value) >= -(2n ** 31n) && BigInt(data.value) < 2n ** 31n,
  });
  return ajv;
}

export interface Verdict {
  readonly valid: boolean;
  /** With `drop` and a valid body: the body sent, as lossless JSON text (int64 exact). */
  readonly sent?: string;
  /** With `refuse`: the unknown names, sorted. */
  readonly unknown?: readonly string[];
}

/** The reference path for one shape: lossless parse, Ajv, unknown fields from the parsed value. */
export function referenceOf(shape: ObjectShape): (body: Buffer, list: boolean, mode: UnknownFieldMode) => Verdict {
  const ajv = referenceAjv();
  const schema = schemaOf(shape);
  const one = ajv.compile(schema);
  const many = ajv.compile({ type: 'array', items: schema });
  const known = new Set(shape.fields.map((f) => f.name));
  const items = (value: unknown): unknown[] => (Array.isArray(value) ? (value as unknown[]) : [value]);
  const keep = (item: unknown): unknown => {
    if (item === null || typeof item !== 'object') return item;
    return Object.fromEntries(Object.entries(item).filter(([k]) => known.has(k)));
  };
  return (body, list, mode) => {
    let value: unknown;
    try {
      value = parseLossless(body);
    } catch {
      return { valid: false };
    }
    if (!(list ? many : one)(value)) return { valid: false };
    const unknown = [...new Set(items(value).flatMap((item) => (item === null || typeof item !== 'object' ? [] : Object.keys(item).filter((k) => !known.has(k)))))];
    if (mode === 'refuse' && unknown.length > 0) return { valid: false, unknown: unknown.sort() };
    if (mode === 'drop') return { valid: true, sent: stringifyLossless(unknown.length > 0 ? (Array.isArray(value) ? (value as unknown[]).map(keep) : keep(value)) : value) };
    return { valid: true };
  };
}
