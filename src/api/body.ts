/**
 * The JSON Schema of an object shape for Ajv, and the request body check compiled from it: every
 * violation at once, each naming its field; int64 checked on the exact text (`contractAjv`).
 * Compiled at policy load, never per request.
 */
import type { ErrorObject } from 'ajv';
import { contractAjv, isLosslessNumber, type LosslessValue } from '../core/contract.js';
import type { FieldType, ObjectShape } from './model.js';

export type UnknownFields = 'reject' | 'strip' | 'allow';

export interface BodyCheck {
  /** Every violation, each naming its field; empty when the body is valid. */
  readonly errors: readonly string[];
  /** With `strip`: the value without unknown fields, when any were removed. */
  readonly stripped?: LosslessValue;
}

function fieldSchema(type: FieldType): object {
  switch (type.kind) {
    case 'int64':
      return { int64: true };
    case 'int32':
      return { int32: true };
    case 'string':
      return { type: 'string' };
    case 'enum':
      return { enum: type.values };
  }
}

/** The shape as a JSON Schema for `contractAjv` (int64 and int32 on the exact text). */
export function shapeSchema(shape: ObjectShape, additional = true): object {
  const properties: Record<string, object | boolean> = {};
  for (const f of shape.fields) properties[f.name] = fieldSchema(f.type);
  for (const f of shape.forbidden) properties[f] = false;
  return { type: 'object', required: shape.required, properties, additionalProperties: additional };
}

function message(shape: ObjectShape, e: ErrorObject): string {
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
    case 'int32':
      return `${field} must be an integer within int32`;
    case 'enum': {
      const t = shape.fields.find((f) => f.name === field)?.type;
      return `${field} must be one of ${t?.kind === 'enum' ? t.values.join(', ') : ''}`;
    }
    case 'type':
      return field === '' ? 'the body must be a JSON object' : `${field} must be a ${String(p.type)}`;
    default:
      return `${field || 'the body'} ${e.message ?? 'is not valid'}`;
  }
}

/** Compiles the check of a request body of `shape` (a value from `parseLossless`). */
export function compileBody(shape: ObjectShape, unknownFields: UnknownFields): (value: LosslessValue) => BodyCheck {
  const validate = contractAjv().compile(shapeSchema(shape, unknownFields !== 'reject'));
  const known = new Set([...shape.fields.map((f) => f.name), ...shape.forbidden]);
  return (value) => {
    // A bare number is a LosslessNumber object: not a JSON object, whatever Ajv would say of its fields.
    if (isLosslessNumber(value)) return { errors: ['the body must be a JSON object'] };
    if (!validate(value)) return { errors: (validate.errors ?? []).map((e) => message(shape, e)) };
    if (unknownFields !== 'strip') return { errors: [] };
    const obj = value as Record<string, unknown>;
    if (Object.keys(obj).every((k) => known.has(k))) return { errors: [] };
    const kept: Record<string, unknown> = {};
    for (const k of Object.keys(obj)) if (known.has(k)) kept[k] = obj[k];
    return { errors: [], stripped: kept };
  };
}
