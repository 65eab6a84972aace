/**
 * Oracles for the fuzz tests, written independently of src/: what an int64 literal is, a strict
 * JSON reader, and what makes a body a valid NewPet.
 */

export const INT64_MAX = 2n ** 63n - 1n;
export const INT64_MIN = -(2n ** 63n);

/** How the `new-pet` policy treats fields NewPet does not define. */
export type UnknownFields = 'reject' | 'strip' | 'allow';

export function isInt64(text: string): boolean {
  if (!/^-?(0|[1-9][0-9]*)$/.test(text)) return false;
  const n = BigInt(text);
  return n >= INT64_MIN && n <= INT64_MAX;
}

export type JsonValue = null | boolean | string | { num: string } | JsonValue[] | Map<string, JsonValue>;

/**
 * A strict RFC 8259 reader: UTF-8 only (no BOM), numbers kept as their text, and any key repeated
 * in an object is an error. Throws on anything else.
 */
export function readStrictJson(bytes: Buffer): JsonValue {
  const text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at ${i}`);
  };
  const value = (depth: number): JsonValue => {
    if (depth > 200) fail('too deep');
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const obj = new Map<string, JsonValue>();
      ws();
      if (text[i] === '}') {
        i++;
        return obj;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('key expected');
        const k = str();
        ws();
        if (text[i++] !== ':') fail('colon expected');
        const v = value(depth + 1);
        if (obj.has(k)) fail(`duplicate key ${k}`);
        obj.set(k, v);
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === '}') {
          i++;
          return obj;
        }
        fail('comma or } expected');
      }
    }
    if (c === '[') {
      i++;
      const arr: JsonValue[] = [];
      ws();
      if (text[i] === ']') {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(value(depth + 1));
        ws();
        if (text[i] === ',') {
          i++;
          continue;
        }
        if (text[i] === ']') {
          i++;
          return arr;
        }
        fail('comma or ] expected');
      }
    }
    if (c === '"') return str();
    for (const [word, v] of [['true', true], ['false', false], ['null', null]] as const) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return v;
      }
    }
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i));
    if (m === null) return fail('value expected');
    i += m[0].length;
    return { num: m[0] };
  };
  const str = (): string => {
    i++; // "
    let out = '';
    for (;;) {
      if (i >= text.length) fail('unterminated string');
      const c = text[i++]!;
      if (c === '"') return out;
      if (c.charCodeAt(0) < 0x20) fail('control character in string');
      if (c !== '\\') {
        out += c;
        continue;
      }
      const e = text[i++];
      const simple: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };
      if (e !== undefined && e in simple) out += simple[e];
      else if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i, i + 4))) {
        out += String.fromCharCode(parseInt(text.slice(i, i + 4), 16));
        i += 4;
      } else fail('bad escape');
    }
  };
  const v = value(0);
  ws();
  if (i !== text.length) fail('trailing characters');
  return v;
}

/** Why a body is not a NewPet the gateway may forward (an empty list when it is one). */
export function newPetProblems(bytes: Buffer, unknownFields: UnknownFields): string[] {
  let v: JsonValue;
  try {
    v = readStrictJson(bytes);
  } catch (err) {
    return [`not strict JSON: ${(err as Error).message}`];
  }
  if (!(v instanceof Map)) return ['not an object'];
  const problems: string[] = [];
  const name = v.get('name');
  if (typeof name !== 'string') problems.push('name is not a string');
  const cat = v.get('categoryId');
  if (cat === null || typeof cat !== 'object' || !('num' in cat) || !isInt64(cat.num)) problems.push('categoryId is not an int64 literal');
  if (v.has('status') && !['available', 'pending', 'sold'].includes(v.get('status') as string)) problems.push('status is not a PetStatus');
  if (v.has('id')) problems.push('id is sent');
  const unknown = [...v.keys()].filter((k) => !['name', 'categoryId', 'status', 'id'].includes(k));
  if (unknownFields !== 'allow' && unknown.length > 0) problems.push(`unknown fields ${unknown.join(',')}`);
  return problems;
}
