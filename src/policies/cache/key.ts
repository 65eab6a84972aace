/** The key of a cacheable request: the rules, the operation, its parameters and the keyed request fields. */
import type { UpstreamRequest } from '../../core/upstream.js';

/** What a key is made of, of the cache's rules (`ResponseCache`, flight.ts). */
export interface KeyRules {
  /** The store's current list generation (`CacheStore.generation`). */
  readonly store: { readonly generation: number };
  readonly ttlMs: Readonly<Record<'listPets' | 'getPet', number>>;
  readonly unkeyed: ReadonlySet<string>;
  readonly keyTag?: string;
  readonly keys?: KeyMemo;
}

/** The key of a cacheable request, or undefined. listPets keys carry the list generation. */
export function cacheKey(cache: KeyRules, request: UpstreamRequest): string | undefined {
  if (request.method !== 'GET') return undefined;
  const op = request.operation;
  if (op === 'getPet') return cache.ttlMs.getPet > 0 && request.param !== undefined ? keyOf(cache, request, 0, request.param) : undefined;
  if (op === 'listPets') return cache.ttlMs.listPets > 0 ? keyOf(cache, request, 1, request.query) : undefined;
  return undefined;
}

/**
 * A field's value as the key holds it: `\\`, CR and LF escaped (node's parser and nghttp2 let
 * none of the last two through, so this only makes sure), the lines of a repeated field joined
 * with CR, and, where the difference means nothing to the upstream, one spelling: a host is
 * case-insensitive (RFC 3986 section 3.2.2), and in Accept and Accept-Language the case of media
 * ranges and language tags and the whitespace around `,` and `;` mean nothing (RFC 9110 sections
 * 5.6.1, 12.5.1 and 12.5.4) unless a quoted string is there.
 */
export function keyValue(name: string, value: string | string[] | number | undefined): string {
  if (value === undefined) return '';
  if (typeof value !== 'string') return Array.isArray(value) ? value.map((v) => escaped(v)).join('\r') : String(value);
  if (name === 'x-forwarded-host') return escaped(value.toLowerCase());
  if ((name === 'accept' || name === 'accept-language') && SPELLING.test(value) && !value.includes('"')) return escaped(value.toLowerCase().replace(OWS, ''));
  return escaped(value);
}

const CONTROL = /[\\\r\n]/;
const CONTROLS = /[\\\r\n]/g;

function escaped(value: string): string {
  return CONTROL.test(value) ? value.replace(CONTROLS, (c) => (c === '\\' ? '\\\\' : c === '\n' ? '\\n' : '\\r')) : value;
}

const SPELLING = /[A-Z \t]/;
const OWS = /[ \t]+/g;

/**
 * The forwarded fields' part of a key: `\n<name>=<value>` (`keyValue`) for every field the upstream
 * is sent but the unkeyed ones, in the order of their names, so the order a client sent them in
 * makes no other key. A field's absence is part of it too: two requests of one key carry the same
 * names. Names are tokens and values hold no line feed (node's parser and nghttp2 refuse one), so
 * the text is unambiguous.
 */
export function variantText(fields: readonly (readonly [string, string])[]): string {
  let out = '';
  for (const [name, value] of fields) out += '\n' + name + '=' + value;
  return out;
}

/** The keyed fields of `headers`, by name, their values as the key holds them. */
export function variantOf(cache: KeyRules, headers: Readonly<Record<string, string | string[] | number>>): string {
  const fields: [string, string][] = [];
  for (const name in headers) if (!cache.unkeyed.has(name)) fields.push([name, keyValue(name, headers[name])]);
  fields.sort((a, b) => (a[0] < b[0] ? -1 : 1));
  return variantText(fields);
}

/**
 * Most `KeyMemo` holds, in bytes it counts (its strings as UTF-16, and `MEMO_ITEM` for each map
 * entry and object): past it, it starts afresh. A bound on its memory (a client may send a
 * User-Agent of 8 KiB, a new one per request), not on the cache: a key not held is made as before.
 */
const KEY_MEMO_MAX_BYTES = 1 << 20;
const MEMO_ITEM = 160;

/**
 * One combination of keyed field values seen lately, reached from the memo's root one field at a
 * time in the order the request holds them: its key text, made once (sorted, so any order reaches
 * the same text), and the keys made with it, by operation and parameter.
 */
class Variant {
  /** name -> value as sent -> the variant with that field too. */
  readonly next = new Map<string, Map<string, Variant>>();
  readonly keys = [new Map<string, string>(), new Map<string, string>()] as const;
  /** The step taken last from here: requests in a row mostly carry the same fields, so two compares find it. */
  lastName = '';
  lastValue = '';
  lastTo: Variant | undefined = undefined;
  constructor(
    /** Its fields as the key holds them, by name. */
    readonly fields: readonly (readonly [string, string])[],
    readonly text: string,
  ) {}
}

/**
 * The keys made lately, for one set of rules and list generation. A key made per request is a new
 * string the store hashes whole (and flattens first: a joined string is kept as its parts until
 * read), after the variant text was joined from the fields; found here, each keyed field costs
 * two compares (the step taken last from there) or two lookups in a map, the parameter one, and
 * the key is the string made before, its hash kept with it.
 */
export class KeyMemo {
  private rules: string | undefined = undefined;
  private generation = -1;
  private root = new Variant([], '');
  private size = 0;

  /** Where a request's walk begins, for these rules and this generation. */
  start(rules: string | undefined, generation: number): Variant {
    if (rules !== this.rules || generation !== this.generation) {
      this.rules = rules;
      this.generation = generation;
      this.clear();
    }
    return this.root;
  }

  /**
   * The variant of `from`'s fields and `name` with `value`, made when new. `slot`: where it is
   * found, `name` for a value sent once, `name` and a NUL (no name has one) for a repeated field,
   * found by `lookup`, the text of its lines.
   */
  step(from: Variant, slot: string, lookup: string, name: string, value: string | string[] | number): Variant {
    if (from.lastName === slot && from.lastValue === lookup && from.lastTo !== undefined) return from.lastTo;
    let byValue = from.next.get(slot);
    let to = byValue?.get(lookup);
    if (to === undefined) {
      const fields = [...from.fields, [name, keyValue(name, value)] as const].sort((a, b) => (a[0] < b[0] ? -1 : 1));
      to = new Variant(fields, variantText(fields));
      if (!this.grow(MEMO_ITEM + 4 * to.text.length + 2 * lookup.length)) return to;
      if (byValue === undefined) from.next.set(slot, (byValue = new Map()));
      byValue.set(lookup, to);
    }
    from.lastName = slot;
    from.lastValue = lookup;
    from.lastTo = to;
    return to;
  }

  /** Counts `bytes` more held; false (nothing is added) when the memo had to start afresh. */
  grow(bytes: number): boolean {
    if (this.size + bytes <= KEY_MEMO_MAX_BYTES) {
      this.size += bytes;
      return true;
    }
    this.clear();
    return false;
  }

  /** Bytes held now, as counted (for tests of the bound). */
  get bytes(): number {
    return this.size;
  }

  private clear(): void {
    this.root = new Variant([], '');
    this.size = 0;
  }
}

function makeKey(cache: KeyRules, answerRules: string | undefined, op: 0 | 1, generation: number, param: string, variant: string): string {
  const rules = (answerRules === undefined ? '' : `${answerRules} `) + (cache.keyTag ?? '');
  // A parameter holds no line feed (a petId, a query rebuilt by list-pets): `param + variant` is unambiguous.
  return op === 0 ? `${rules}getPet ${param}${variant}` : `${rules}listPets ${generation} ${param}${variant}`;
}

function keyOf(cache: KeyRules, request: UpstreamRequest, op: 0 | 1, param: string): string {
  const generation = cache.store.generation;
  const memo = cache.keys;
  const headers = request.keyFields ?? request.headers;
  if (memo === undefined) return makeKey(cache, request.answerRules, op, generation, param, variantOf(cache, headers));
  const unkeyed = cache.unkeyed;
  let at = memo.start(request.answerRules, generation);
  for (const name in headers) {
    if (unkeyed.has(name)) continue;
    const value = headers[name] as string | string[];
    // A repeated field (a list) is a new array per request: found by its text instead.
    at = typeof value === 'string' ? memo.step(at, name, value, name, value) : memo.step(at, name + '\0', keyValue(name, value), name, value);
  }
  const keys = at.keys[op];
  let key = keys.get(param);
  if (key !== undefined) return key;
  key = makeKey(cache, request.answerRules, op, generation, param, at.text);
  if (memo.grow(MEMO_ITEM + 2 * key.length)) keys.set(param, key);
  return key;
}
