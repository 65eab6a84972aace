/**
 * Two Schema Objects compared, keyword by keyword, on one side of the exchange: types and formats,
 * enum values, defaults, bounds, an object's fields and which are required, an array's items.
 * References are followed in each document; a pair of schemas already compared for the same
 * place is not compared again, so a loop of references (a tree of Pets) ends.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Changes, Side } from './diff-rules.js';
import { follow, isObject, pointerToken, type Json, type Located } from './refs.js';

/** Whose schema it is, for messages ("GET /pets response 200"), and on which side. */
export interface SchemaSite {
  readonly side: Side;
  readonly context: string;
}

/** A bound, and which way of moving it narrows what is valid. */
const BOUNDS: readonly { readonly keyword: string; readonly tighter: 'higher' | 'lower' }[] = [
  { keyword: 'minimum', tighter: 'higher' },
  { keyword: 'exclusiveMinimum', tighter: 'higher' },
  { keyword: 'maximum', tighter: 'lower' },
  { keyword: 'exclusiveMaximum', tighter: 'lower' },
  { keyword: 'minLength', tighter: 'higher' },
  { keyword: 'maxLength', tighter: 'lower' },
  { keyword: 'minItems', tighter: 'higher' },
  { keyword: 'maxItems', tighter: 'lower' },
  { keyword: 'minProperties', tighter: 'higher' },
  { keyword: 'maxProperties', tighter: 'lower' },
];

/** Keywords compared by their own rule below. */
const COMPARED = new Set(['$ref', 'type', 'format', 'enum', 'default', 'properties', 'required', 'items', ...BOUNDS.map((b) => b.keyword)]);
/** Keywords that say nothing a client or the gateway checks. */
const ANNOTATIONS = new Set(['title', 'description', 'example', 'examples', '$comment', 'externalDocs', 'xml', 'deprecated', 'readOnly', 'writeOnly']);

const show = (v: unknown): string => (v === undefined ? 'none' : JSON.stringify(v));
const join = (at: string, ...keys: string[]) => at + keys.map((k) => '/' + pointerToken(k)).join('');

/** A schema in a message: `true`, `false`, `none`, `a reference to nothing`, or its type. */
function schemaName(written: unknown, resolved: unknown): string {
  if (resolved === undefined) return written === undefined ? 'none' : 'a reference that resolves to nothing';
  return isObject(resolved) ? `of type ${typesOf(resolved)}` : show(resolved);
}

function typesOf(schema: Json): string {
  const t = schema.type;
  if (t === undefined) return 'any';
  return Array.isArray(t) ? [...t].map(String).sort().join(' or ') : String(t);
}

/** The fields of an object schema (properties written as `false` are forbidden, not fields). */
function fieldsOf(schema: Json): { fields: Map<string, unknown>; forbidden: Set<string>; required: Set<string> } {
  const fields = new Map<string, unknown>();
  const forbidden = new Set<string>();
  if (isObject(schema.properties)) {
    for (const [name, value] of Object.entries(schema.properties)) {
      if (value === false) forbidden.add(name);
      else fields.set(name, value);
    }
  }
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === 'string') : []);
  return { fields, forbidden, required };
}

export class SchemaComparison {
  /** Pairs (earlier, later) already compared, with the sites they were compared for. */
  private readonly done = new WeakMap<object, WeakMap<object, Set<string>>>();

  constructor(
    private readonly before: unknown,
    private readonly after: unknown,
    private readonly changes: Changes,
  ) {}

  /** Compares two schemas (each where it is written in its document); `trail` names the field (`[].status`). */
  compare(b: Located, a: Located, site: SchemaSite, trail = ''): void {
    const B = follow(this.before, b.value, b.at);
    const A = follow(this.after, a.value, a.at);
    if (!this.first(B.value, A.value, site)) return;
    const where = trail === '' ? site.context : `${site.context}, field ${trail}`;
    if (!isObject(B.value) || !isObject(A.value)) {
      if (!isDeepStrictEqual(B.value, A.value)) {
        const what = `schema ${schemaName(b.value, B.value)} changed to ${schemaName(a.value, A.value)}`;
        this.changes.addOnSide('schema-changed', site.side, a.value === undefined ? B.at : A.at, `${where}: ${what}`);
      }
      return;
    }
    const bs = B.value;
    const as = A.value;
    const at = (key: string) => join(key in as ? A.at : B.at, key);
    const add = (kind: Parameters<Changes['addOnSide']>[0], key: string, what: string) => this.changes.addOnSide(kind, site.side, at(key), `${where}: ${what}`);

    if (typesOf(bs) !== typesOf(as)) add('type-changed', 'type', `type ${typesOf(bs)} changed to ${typesOf(as)}`);
    if (bs.format !== as.format) add('format-changed', 'format', `format ${show(bs.format)} changed to ${show(as.format)}`);
    this.enums(bs, as, add);
    this.defaults(bs, as, add);
    for (const { keyword, tighter } of BOUNDS) {
      const was = bs[keyword];
      const now = as[keyword];
      if (isDeepStrictEqual(was, now)) continue;
      if (typeof was === 'number' && typeof now === 'number') {
        const raised = now > was;
        const tightened = raised === (tighter === 'higher');
        add(tightened ? 'bound-tightened' : 'bound-loosened', keyword, `${keyword} ${raised ? 'raised' : 'lowered'} from ${was} to ${now}`);
      } else if (was === undefined) {
        add('bound-tightened', keyword, `${keyword} ${show(now)} added`);
      } else if (now === undefined) {
        add('bound-loosened', keyword, `${keyword} ${show(was)} removed`);
      } else {
        add('schema-changed', keyword, `${keyword} ${show(was)} changed to ${show(now)}`);
      }
    }
    if ('properties' in bs || 'properties' in as || 'required' in bs || 'required' in as) this.fields(B, A, site, trail);
    if ('items' in bs || 'items' in as) {
      this.compare({ value: bs.items, at: join(B.at, 'items') }, { value: as.items, at: join(A.at, 'items') }, site, `${trail}[]`);
    }
    for (const key of new Set([...Object.keys(bs), ...Object.keys(as)])) {
      if (COMPARED.has(key) || ANNOTATIONS.has(key) || key.startsWith('x-')) continue;
      if (!isDeepStrictEqual(bs[key], as[key])) add('schema-changed', key, `${key} ${show(bs[key])} changed to ${show(as[key])}`);
    }
  }

  /** False when this pair was already compared for this site (a shared or looping schema). */
  private first(b: unknown, a: unknown, site: SchemaSite): boolean {
    if (!isObject(b) || !isObject(a)) return true;
    let inner = this.done.get(b);
    if (inner === undefined) this.done.set(b, (inner = new WeakMap()));
    let sites = inner.get(a);
    if (sites === undefined) inner.set(a, (sites = new Set()));
    const key = `${site.side} ${site.context}`;
    if (sites.has(key)) return false;
    sites.add(key);
    return true;
  }

  private enums(bs: Json, as: Json, add: (kind: 'enum-value-added' | 'enum-value-removed' | 'bound-tightened' | 'bound-loosened', key: string, what: string) => void): void {
    const was = Array.isArray(bs.enum) ? bs.enum : undefined;
    const now = Array.isArray(as.enum) ? as.enum : undefined;
    if (was === undefined && now === undefined) return;
    if (was === undefined) return add('bound-tightened', 'enum', `values restricted to ${now!.map(show).join(', ')}`);
    if (now === undefined) return add('bound-loosened', 'enum', `enum ${was.map(show).join(', ')} removed: any value`);
    const has = (list: unknown[], v: unknown) => list.some((x) => isDeepStrictEqual(x, v));
    for (const v of was) if (!has(now, v)) add('enum-value-removed', 'enum', `enum value ${show(v)} removed`);
    for (const v of now) if (!has(was, v)) add('enum-value-added', 'enum', `enum value ${show(v)} added`);
  }

  private defaults(bs: Json, as: Json, add: (kind: 'default-added' | 'default-changed' | 'default-removed', key: string, what: string) => void): void {
    if (isDeepStrictEqual(bs.default, as.default)) return;
    if (!('default' in bs)) add('default-added', 'default', `default ${show(as.default)} added`);
    else if (!('default' in as)) add('default-removed', 'default', `default ${show(bs.default)} removed`);
    else add('default-changed', 'default', `default changed from ${show(bs.default)} to ${show(as.default)}`);
  }

  private fields(B: Located, A: Located, site: SchemaSite, trail: string): void {
    const was = fieldsOf(B.value as Json);
    const now = fieldsOf(A.value as Json);
    const names = new Set([...was.fields.keys(), ...now.fields.keys(), ...was.forbidden, ...now.forbidden]);
    for (const name of names) {
      const field = trail === '' ? name : `${trail}.${name}`;
      const bAt = join(B.at, 'properties', name);
      const aAt = join(A.at, 'properties', name);
      const say = (what: string) => `${site.context}: field ${field} ${what}`;
      if (was.fields.has(name) && now.fields.has(name)) {
        const wasRequired = was.required.has(name);
        if (wasRequired !== now.required.has(name)) {
          this.changes.addOnSide(wasRequired ? 'field-optional' : 'field-required', site.side, join(A.at, 'required'), say(wasRequired ? 'no longer required' : 'now required'));
        }
        this.compare({ value: was.fields.get(name), at: bAt }, { value: now.fields.get(name), at: aAt }, site, field);
      } else if (was.fields.has(name)) {
        this.changes.addOnSide('field-removed', site.side, now.forbidden.has(name) ? aAt : bAt, say(now.forbidden.has(name) ? 'removed: now refused' : 'removed'));
      } else if (now.fields.has(name)) {
        const required = now.required.has(name);
        this.changes.addOnSide(required ? 'required-field-added' : 'field-added', site.side, aAt, say(required ? 'added, required' : 'added'));
      } else if (was.forbidden.has(name) !== now.forbidden.has(name)) {
        const refused = now.forbidden.has(name);
        this.changes.addOnSide(refused ? 'bound-tightened' : 'bound-loosened', site.side, refused ? aAt : bAt, say(refused ? 'now refused' : 'no longer refused'));
      }
    }
  }
}
