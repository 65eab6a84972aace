/**
 * An ObjectShape (model.ts) compiled into the tables the checks read: each field's key and enum
 * values as byte tokens, its integer bounds as digits, the required fields as a bit set, and a
 * lookup of a key by its length. Built once per shape, at load; a shape with something the scanner
 * cannot check is refused here, naming the field, rather than let through unchecked.
 */
import type { FieldType, ObjectShape } from '../model.js';
import { decode } from './json.js';

/** The integer kinds first: `kind <= Kind.Int32` is one compare on the common path. */
export const enum Kind {
  Int64,
  Int32,
  String,
  Enum,
}

/**
 * A token as little-endian 32-bit words, the last one masked to the token's own bytes: the common
 * key and enum value are matched four bytes per compare (`tokenAt`) rather than one.
 */
export interface Token {
  readonly bytes: Buffer;
  readonly words: Int32Array;
  readonly mask: number;
}

function tokenOf(text: string): Token {
  const bytes = Buffer.from(text);
  const padded = Buffer.alloc(Math.ceil(bytes.length / 4) * 4);
  bytes.copy(padded);
  const words = new Int32Array(padded.length / 4);
  for (let w = 0; w < words.length; w++) words[w] = padded.readInt32LE(4 * w);
  const rest = bytes.length % 4;
  return { bytes, words, mask: rest === 0 ? -1 : (1 << (8 * rest)) - 1 };
}

export interface CompiledField {
  readonly name: string;
  /** The name as a JSON string token, quotes included: how an upstream spells it unescaped. */
  readonly token: Buffer;
  /** The same token with the colon after it: the common spelling of the member's key, whole. */
  readonly key: Token;
  readonly kind: Kind;
  /** For an integer: the most digits of its bounds, and the largest magnitudes as digits. */
  readonly digits: number;
  readonly max: Buffer;
  readonly min: Buffer;
  /** For Kind.Enum: each allowed value as a JSON string token, and as text. */
  readonly tokens: readonly Token[];
  readonly values: readonly string[];
  /** What a value of another type is, as Ajv words it. */
  readonly problem: string;
  /** Its bit in a set of fields (`CompiledShape.required`): 1 << its index. */
  readonly bit: number;
  /** Whether it is the field a list's filter reads. */
  readonly filtered: boolean;
  /** The next field in the shape's order, null after the last. */
  readonly next: CompiledField | null;
}

/** The digits of 2^63 - 1 and 2^63, of 2^31 - 1 and 2^31: the largest magnitudes of each kind. */
const INT64 = { digits: 19, max: Buffer.from('9223372036854775807'), min: Buffer.from('9223372036854775808') };
const INT32 = { digits: 10, max: Buffer.from('2147483647'), min: Buffer.from('2147483648') };
const NOT_INTEGER = { digits: 0, max: Buffer.alloc(0), min: Buffer.alloc(0) };
const NO_VALUES: readonly string[] = [];

/** The parts of a field that its type decides. */
interface Typed {
  readonly kind: Kind;
  readonly bounds: typeof INT64;
  readonly values: readonly string[];
  readonly problem: string;
}

/** What a field's type compiles to, or a refusal naming the field (a kind the scanner does not know must fail here). */
function typed(shape: string, name: string, type: FieldType): Typed {
  switch (type.kind) {
    case 'int64':
      return { kind: Kind.Int64, bounds: INT64, values: NO_VALUES, problem: 'must be an integer within int64' };
    case 'int32':
      return { kind: Kind.Int32, bounds: INT32, values: NO_VALUES, problem: 'must be an integer within int32' };
    case 'string':
      return { kind: Kind.String, bounds: NOT_INTEGER, values: NO_VALUES, problem: 'must be string' };
    case 'enum': {
      const values = type.values;
      if (values.length === 0 || !values.every((v) => typeof v === 'string')) throw new Error(`compileShape: ${shape}.${name}: an enum of strings, at least one`);
      return { kind: Kind.Enum, bounds: NOT_INTEGER, values, problem: 'must be equal to one of the allowed values' };
    }
    default:
      throw new Error(`compileShape: ${shape}.${name} has a type the scanner does not implement: ${JSON.stringify(type)}`);
  }
}

/**
 * Every field written out in one order, so that the checks see one object shape whatever the kind;
 * made last to first, so that each knows the next.
 */
function field(name: string, t: Typed, index: number, filtered: boolean, next: CompiledField | null): CompiledField {
  return {
    name,
    token: Buffer.from(JSON.stringify(name)),
    key: tokenOf(JSON.stringify(name) + ':'),
    kind: t.kind,
    digits: t.bounds.digits,
    max: t.bounds.max,
    min: t.bounds.min,
    tokens: t.values.map((v) => tokenOf(JSON.stringify(v))),
    values: t.values,
    problem: t.problem,
    bit: 1 << index,
    filtered,
    next,
  };
}

/** The tables of one shape. Every check of this folder takes one; none holds state of a call. */
export class CompiledShape {
  /** The fields, in the shape's order: the order the common object is read in. */
  readonly fields: readonly CompiledField[];
  /**
   * fields[0], the others by `next`: the common path walks the list, which keeps fewer values
   * live in its loop than an index into an array (measured: 4% fewer instructions on a list).
   */
  readonly first: CompiledField | null;
  /** The fields' names, then the forbidden ones': a member's index in this list, -1 for any other. */
  readonly names: readonly string[];
  /** Bit f set: fields[f] is required. */
  readonly required: number;
  /** The index of the field a list's filter reads (an enum), or -1. */
  readonly filter: number;
  /**
   * The name whose unescaped token has this length, when one name has it (-2: several, -1: none):
   * a key is then matched with one compare of its bytes.
   */
  readonly byLength = new Int16Array(64).fill(-1);
  /** The names as JSON string tokens, in the order of `names`. */
  readonly tokens: readonly Buffer[];

  constructor(
    readonly shape: ObjectShape,
    filterField: string | undefined,
  ) {
    const label = shape.name || 'shape';
    const types = shape.fields.map((f) => typed(label, f.name, f.type));
    // One bit per field in an int32, the sign left alone.
    if (types.length > 30) throw new Error(`compileShape: ${label} has ${types.length} fields, at most 30`);
    this.filter = filterField === undefined ? -1 : shape.fields.findIndex((f) => f.name === filterField);
    if (filterField !== undefined && types[this.filter]?.kind !== Kind.Enum) throw new Error(`compileShape: ${label}.${filterField}: a list's filter reads an enum field of the shape`);
    const fields: CompiledField[] = [];
    let next: CompiledField | null = null;
    for (let k = types.length - 1; k >= 0; k--) fields[k] = next = field(shape.fields[k]!.name, types[k]!, k, k === this.filter, next);
    this.fields = fields;
    this.first = next;
    this.names = [...this.fields.map((f) => f.name), ...new Set(shape.forbidden)];
    for (const [k, name] of this.names.entries()) {
      if (this.names.indexOf(name) !== k) throw new Error(`compileShape: ${label}.${name} is ${k < this.fields.length ? 'defined twice' : 'both a field and forbidden'}`);
    }
    let required = 0;
    for (const name of shape.required) {
      const f = this.fields.findIndex((x) => x.name === name);
      if (f === -1) throw new Error(`compileShape: ${label}: required '${name}' is not a field`);
      required |= 1 << f;
    }
    this.required = required;
    this.tokens = this.names.map((name) => Buffer.from(JSON.stringify(name)));
    this.tokens.forEach((t, k) => {
      const l = t.length;
      if (l < this.byLength.length) this.byLength[l] = this.byLength[l] === -1 ? k : -2;
    });
  }

  /** The index in `names` of the key token `buf[start, end)`, or -1 for a name outside the shape. */
  nameOf(buf: Buffer, start: number, end: number, hasEscape: boolean): number {
    if (!hasEscape) {
      const f = end - start < this.byLength.length ? this.byLength[end - start]! : -1;
      if (f >= 0) return sameBytes(buf, start, end, this.tokens[f]!) ? f : -1;
      if (f === -1) return -1;
    }
    return this.names.indexOf(decode(buf, start, end));
  }
}

/** Whether the string token `buf[start, end)` equals `token` byte for byte. */
function sameBytes(buf: Buffer, start: number, end: number, token: Buffer): boolean {
  if (end - start !== token.length) return false;
  for (let k = 0; k < token.length; k++) if (buf[start + k] !== token[k]) return false;
  return true;
}
