/**
 * The rare object, read a second time: one with a member name outside the shape or a name given
 * twice. The common path records nothing per member; this one builds what it needs (names, a map)
 * because it runs only for such objects.
 */
import { parseLossless } from '../../core/contract.js';
import { decode, skipSpace, skipString, skipValue } from './json.js';
import type { Scan } from './scan.js';
import { Kind } from './shape.js';

const QUOTE = 0x22;
const COMMA = 0x2c;

/**
 * lossless-json's equality of two values under one name (its `isDeepEqual`): a repeated name is
 * accepted when this holds, refused otherwise. Arrays and objects are both compared by their own
 * enumerable keys, as there.
 */
function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, k) => sameValue(x, b[k]));
  if (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null) {
    const x = a as Record<string, unknown>;
    const y = b as Record<string, unknown>;
    return [...new Set([...Object.keys(x), ...Object.keys(y)])].every((k) => sameValue(x[k], y[k]));
  }
  return false;
}

/**
 * A member of an object: its key and value as offsets, its name, its index in the shape's `names`
 * (-1: outside the shape; past the fields: a forbidden name).
 */
interface Member {
  readonly keyStart: number;
  readonly valueStart: number;
  readonly valueEnd: number;
  readonly name: string;
  readonly field: number;
}

/** The members of the object at `start`, already checked by scanObject. */
function membersOf(s: Scan, start: number): Member[] {
  const buf = s.buf;
  const names = s.shape.names;
  const out: Member[] = [];
  let i = skipSpace(buf, start + 1);
  while (buf[i] === QUOTE) {
    const keyStart = i;
    i = skipString(buf, i);
    const name = decode(buf, keyStart, i);
    const valueStart = skipSpace(buf, skipSpace(buf, i) + 1);
    const valueEnd = skipValue(buf, valueStart);
    out.push({ keyStart, valueStart, valueEnd, name, field: names.indexOf(name) });
    i = skipSpace(buf, valueEnd);
    if (buf[i] === COMMA) i = skipSpace(buf, i + 1);
  }
  return out;
}

/**
 * Whether a repeated name has another value. A field of the shape is compared as its type
 * (numbers by their text, strings decoded: lossless-json compares a number's text); any other value
 * as lossless-json would, once parsed.
 */
function differs(s: Scan, a: Member, b: Member): boolean {
  const buf = s.buf;
  const field = s.shape.fields[a.field];
  if (field === undefined) return !sameValue(parseLossless(buf.subarray(a.valueStart, a.valueEnd)), parseLossless(buf.subarray(b.valueStart, b.valueEnd)));
  if (field.kind === Kind.Int64 || field.kind === Kind.Int32) return buf.compare(buf, a.valueStart, a.valueEnd, b.valueStart, b.valueEnd) !== 0;
  return decode(buf, a.valueStart, a.valueEnd) !== decode(buf, b.valueStart, b.valueEnd);
}

const OPEN = Buffer.from('{');
const SEPARATOR = Buffer.from(',');
const CLOSE = Buffer.from('}');

/**
 * An object with a member name outside the shape or a repeated one: repeats checked, unknown names
 * collected for `refuse`, or the object rebuilt without them for `drop` from the kept members' own
 * bytes.
 */
export function rareMembers(s: Scan, start: number, end: number): void {
  const buf = s.buf;
  const members = membersOf(s, start);
  const first = new Map<string, Member>();
  let unknown = false;
  for (const m of members) {
    const before = first.get(m.name);
    if (before === undefined) first.set(m.name, m);
    else if (differs(s, before, m)) s.repeated = true;
    if (m.field !== -1) continue;
    unknown = true;
    if (s.mode === 'refuse') (s.unknownNames ??= new Set()).add(m.name);
  }
  if (s.mode !== 'drop' || !unknown) return;
  const pieces = (s.pieces ??= []);
  pieces.push(buf.subarray(s.cursor, start), OPEN);
  let comma = false;
  for (const m of members) {
    if (m.field === -1) continue;
    if (comma) pieces.push(SEPARATOR);
    pieces.push(buf.subarray(m.keyStart, m.valueEnd));
    comma = true;
  }
  pieces.push(CLOSE);
  s.cursor = end;
}
