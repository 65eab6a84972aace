/**
 * Two answers compared as the client would see them (each after the same response phase): the
 * status, then the Error `code` of a non-2xx, then the bodies, with the declared noise
 * (`compare.ignore`) left out. A status that differs is the one difference reported (bodies of two
 * statuses are two shapes), so is a code that differs; an Error's `message` is compared like any
 * field, the client reads it. Numbers are read by lossless-json and compared as exact decimals:
 * 9007199254740993 is not 9007199254740992; 1.0 equals 1, 1e2 equals 100, -0 equals 0. Bodies equal
 * byte for byte are equal unread. A body not JSON (or not UTF-8, or empty) on either side, or
 * truncated on either side, equals the other only with the same bytes (and both truncated or
 * neither); otherwise the difference is `$`.
 *
 * Paths: `$`, `.name` (`["a-b"]` for a name that is not an identifier), indices written `[*]`. A
 * value of another type is one difference at its node; a field on one side only, one at the field;
 * two arrays of different lengths, one at the array (nothing deeper). An ignored path is not
 * compared at all, presence included; `[N]` matches index N of each answer; an array's length is
 * its own (`$[*]` ignored still compares lengths). listOrder `ignore`: arrays of one length are
 * equal when their items are as multisets, by canonical forms (keys sorted, exact decimals, ignored
 * paths left out, nested arrays sorted); if not, the items found on both sides are set aside and
 * the rest compared pairwise in order (a pair of two indices leaves out what either's ignores do).
 *
 * Bounds, so that a hostile answer cannot take the stack or the CPU (COMPARE_LIMITS): a body nested
 * deeper than `depth` or holding more than `nodes` values is not read, a comparison that visits
 * more than `work` values stops: either is the difference `$` (unless the bytes are equal). At most
 * `paths` paths per comparison. A sample never carries a body: a scalar as its JSON text, an array
 * or object as `[N items]` or `{N fields}`, redacted, then cut to 64 characters.
 */
import { isLosslessNumber, parse, type LosslessNumber } from 'lossless-json';
import type { ClientView, Comparison, Sample } from './types.js';

export interface CompareRules {
  readonly ignore: readonly string[];
  readonly listOrder: 'strict' | 'ignore';
  /** Samples kept per comparison (default 3); the tally keeps its own bound across comparisons. */
  readonly maxSamples?: number;
}

/** Bounds of one comparison: nesting and values per body, values visited, paths kept, sample size. */
export const COMPARE_LIMITS = { depth: 64, nodes: 20_000, work: 100_000, paths: 100, sampleChars: 64, samples: 3 } as const;

/** One node of the compiled ignore paths: a trie over `.name`, `[N]` and `[*]` steps. */
interface Step { readonly fields: Map<string, Step>; readonly indices: Map<number, Step>; any: Step | undefined; end: boolean }
/** Where a walk stands in the trie: every node the concrete path reached so far matches. */
type State = readonly Step[];
const NONE: State = [];

const newStep = (): Step => ({ fields: new Map(), indices: new Map(), any: undefined, end: false });
const child = <K>(map: Map<K, Step>, key: K): Step => map.get(key) ?? map.set(key, newStep()).get(key)!;
const PATH_STEP = /\.([A-Za-z_][A-Za-z0-9_]*)|\[\*\]|\[([0-9]+)\]/y;

/** Compiles ignore paths (already checked by the schema's pattern) once into a trie. */
function compileIgnore(paths: readonly string[]): State {
  if (paths.length === 0) return NONE;
  const root = newStep();
  for (const path of paths) {
    if (!path.startsWith('$')) throw new Error(`compare.ignore: "${path}" does not start with $`);
    let node = root;
    for (let i = 1; i < path.length; i = PATH_STEP.lastIndex) {
      PATH_STEP.lastIndex = i;
      const m = PATH_STEP.exec(path);
      if (m === null) throw new Error(`compare.ignore: "${path}" is not a path of $, .name, [*] and [N] steps`);
      const [, name, index] = m;
      if (name !== undefined) node = child(node.fields, name);
      else if (index !== undefined) node = child(node.indices, Number(index));
      else node = node.any ??= newStep();
    }
    node.end = true;
  }
  return [root];
}

function down(state: State, key: string | number): State {
  if (state.length === 0) return NONE;
  const out: Step[] = [];
  for (const s of state) {
    for (const hit of typeof key === 'string' ? [s.fields.get(key)] : [s.any, s.indices.get(key)]) if (hit !== undefined) out.push(hit);
  }
  return out.length === 0 ? NONE : out;
}

const isIgnored = (state: State): boolean => state.some((s) => s.end);

/** The value of a JSON number as `[-]digits e exponent`, digits without leading or trailing zeros. */
const NUMBER = /^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/;
const PLAIN = /^-?[1-9](?:[0-9]*[1-9])?$/;
export function exactDecimal(text: string): string {
  if (PLAIN.test(text)) return `${text}e0`;
  const m = NUMBER.exec(text);
  if (m === null) return text;
  const [, sign, int, frac = '', exp = '0'] = m;
  const digits = (int! + frac).replace(/^0+/, '');
  if (digits === '') return '0';
  const trimmed = digits.replace(/0+$/, '');
  const shift = digits.length - trimmed.length - frac.length;
  // Up to 15 digits the exponent is exact as a double; past that (a hostile 1e99999999999999999), BigInt.
  const e = exp.length <= 15 ? String(Number(exp) + shift) : String(BigInt(exp) + BigInt(shift));
  return `${sign}${trimmed}e${e}`;
}

type Kind = 'null' | 'boolean' | 'number' | 'string' | 'array' | 'object';
function kindOf(v: unknown): Kind {
  if (v === null) return 'null';
  if (typeof v === 'boolean' || typeof v === 'string') return typeof v as Kind;
  if (Array.isArray(v)) return 'array';
  return isLosslessNumber(v) ? 'number' : 'object';
}

type Obj = Record<string, unknown>;
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const stepOf = (key: string): string =>
  IDENTIFIER.test(key) && key.length <= 64 ? `.${key}` : `[${JSON.stringify(key.length > 64 ? `${key.slice(0, 64)}…` : key)}]`;

/** Preformatted sample text (a summary of a body that was not read), not a JSON value. */
class Note { constructor(readonly text: string) {} }

const OVER = new Error('the comparison is over its bounds');

interface Walk {
  readonly order: boolean;
  readonly maxSamples: number;
  readonly redact: ((text: string) => string) | undefined;
  /** This request's own secrets masked (the key the client presented), before `redact` and the cut. */
  readonly mask: ((text: string) => string) | undefined;
  readonly paths: Set<string>;
  readonly samples: Sample[];
  /** Canonical forms of nodes with no ignore path below them: each is read once per comparison. */
  readonly forms: WeakMap<object, string>;
  work: number;
}

function textOf(v: unknown): string {
  if (v === undefined) return '(absent)';
  if (v instanceof Note) return v.text;
  if (typeof v === 'string') return JSON.stringify(v.length > 1024 ? v.slice(0, 1024) : v);
  if (Array.isArray(v)) return `[${v.length} items]`;
  if (isLosslessNumber(v)) return (v as LosslessNumber).value.slice(0, 1024);
  if (v !== null && typeof v === 'object') return `{${Object.keys(v).length} fields}`;
  return String(v);
}

function sampleText(w: Walk, v: unknown): string {
  const raw = w.mask === undefined ? textOf(v) : w.mask(textOf(v));
  const text = w.redact === undefined ? raw : w.redact(raw);
  // Cut between two UTF-16 units of one character, the lone half is dropped.
  return text.length <= COMPARE_LIMITS.sampleChars ? text : `${text.slice(0, COMPARE_LIMITS.sampleChars).replace(/[\ud800-\udbff]$/, '')}…`;
}

function report(w: Walk, path: string, legacy: unknown, next: unknown): void {
  if (w.paths.has(path) || w.paths.size >= COMPARE_LIMITS.paths) return;
  w.paths.add(path);
  if (w.samples.length < w.maxSamples) w.samples.push({ path, legacy: sampleText(w, legacy), next: sampleText(w, next) });
}

/** An item's canonical form: equal forms, equal items (under the same ignore paths and list order). */
function canonical(v: unknown, state: State, w: Walk): string {
  if (++w.work > COMPARE_LIMITS.work) throw OVER;
  if (isIgnored(state)) return '~';
  if (state.length > 0 || v === null || typeof v !== 'object' || isLosslessNumber(v)) return form(v, state, w);
  let f = w.forms.get(v);
  if (f === undefined) w.forms.set(v, (f = form(v, state, w)));
  return f;
}

function form(v: unknown, state: State, w: Walk): string {
  switch (kindOf(v)) {
    case 'null':
    case 'boolean': return String(v);
    case 'number': return `#${exactDecimal((v as LosslessNumber).value)}`;
    case 'string': return JSON.stringify(v);
    case 'array': {
      const items = (v as unknown[]).map((item, i) => canonical(item, down(state, i), w));
      if (w.order) items.sort();
      return `[${items.join(',')}]`;
    }
    case 'object': {
      const parts: string[] = [];
      for (const key of Object.keys(v as Obj).sort()) {
        const s = down(state, key);
        if (!isIgnored(s)) parts.push(`${JSON.stringify(key)}:${canonical((v as Obj)[key], s, w)}`);
      }
      return `{${parts.join(',')}}`;
    }
  }
}

function diff(a: unknown, b: unknown, path: string, state: State, w: Walk): void {
  if (++w.work > COMPARE_LIMITS.work) throw OVER;
  const kind = kindOf(a);
  if (kind !== kindOf(b)) return report(w, path, a, b);
  if (kind === 'array') return diffArrays(a as unknown[], b as unknown[], path, state, w);
  if (kind === 'object') return diffObjects(a as Obj, b as Obj, path, state, w);
  if (kind === 'number') {
    const [x, y] = [(a as LosslessNumber).value, (b as LosslessNumber).value];
    if (x !== y && exactDecimal(x) !== exactDecimal(y)) report(w, path, a, b);
  } else if (a !== b) report(w, path, a, b);
}

function diffObjects(a: Obj, b: Obj, path: string, state: State, w: Walk): void {
  for (const key of Object.keys(a)) {
    const s = down(state, key);
    if (isIgnored(s)) continue;
    if (Object.hasOwn(b, key)) diff(a[key], b[key], path + stepOf(key), s, w);
    else report(w, path + stepOf(key), a[key], undefined);
  }
  for (const key of Object.keys(b)) {
    if (!Object.hasOwn(a, key) && !isIgnored(down(state, key))) report(w, path + stepOf(key), undefined, b[key]);
  }
}

function diffArrays(a: unknown[], b: unknown[], path: string, state: State, w: Walk): void {
  if (a.length !== b.length) return report(w, path, a, b);
  let left = a.map((_, i) => i);
  let right = left;
  if (w.order) {
    // Multisets: each item of `a` by its canonical form, then each of `b` takes one of its form.
    const unmatched = new Map<string, number[]>();
    a.forEach((item, i) => {
      const form = canonical(item, down(state, i), w);
      (unmatched.get(form) ?? unmatched.set(form, []).get(form)!).push(i);
    });
    right = [];
    for (let j = 0; j < b.length; j++) {
      const list = unmatched.get(canonical(b[j], down(state, j), w));
      if (list !== undefined && list.length > 0) list.pop();
      else right.push(j);
    }
    if (right.length === 0) return;
    left = [...unmatched.values()].flat().sort((x, y) => x - y);
  }
  const items = `${path}[*]`;
  for (let k = 0; k < left.length; k++) {
    const [i, j] = [left[k]!, right[k]!];
    const s = i === j ? down(state, i) : [...down(state, i), ...down(state, j)];
    if (!isIgnored(s)) diff(a[i], b[j], items, s, w);
  }
}

/** Not UTF-8 is not JSON (RFC 8259 section 8.1): never read as U+FFFD. Notes: why a body was not read. */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const [NOT_JSON, TOO_BIG] = [new Note('not JSON'), new Note('over the comparison bounds')];

/** One pass over the bytes, outside strings: nesting depth and a count of values (commas, openings). */
function withinBounds(body: Buffer): boolean {
  let [depth, nodes, inString] = [0, 1, false];
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > COMPARE_LIMITS.depth || ++nodes > COMPARE_LIMITS.nodes) return false;
    } else if (c === 0x5d || c === 0x7d) depth--;
    else if (c === 0x2c && ++nodes > COMPARE_LIMITS.nodes) return false;
  }
  return true;
}

function readJson(body: Buffer): unknown {
  if (body.length === 0) return NOT_JSON;
  if (!withinBounds(body)) return TOO_BIG;
  try { return parse(UTF8.decode(body)); } catch { return NOT_JSON; }
}

const unread = (view: ClientView, why: string): Note => new Note(`(${why}, ${view.body.length} bytes)`);

function diffBodies(legacy: ClientView, next: ClientView, start: State, w: Walk): void {
  if (legacy.truncated === next.truncated && legacy.body.equals(next.body)) return;
  const held = (v: ClientView) => unread(v, v.truncated ? 'truncated' : 'whole');
  if (legacy.truncated || next.truncated) return report(w, '$', held(legacy), held(next));
  const a = readJson(legacy.body);
  const b = readJson(next.body);
  if (a instanceof Note || b instanceof Note) return report(w, '$', a instanceof Note ? unread(legacy, a.text) : a, b instanceof Note ? unread(next, b.text) : b);
  try {
    diff(a, b, '$', start, w);
  } catch (err) {
    if (err !== OVER) throw err;
    w.paths.clear();
    w.samples.length = 0;
    report(w, '$', unread(legacy, TOO_BIG.text), unread(next, TOO_BIG.text));
  }
}

/**
 * The comparison of two answers under `rules`, compiled once (the ignore paths into a trie).
 * `redact` is applied to each sample value before it is cut; so is a comparison's own `mask`
 * (this request's secrets: the key its client presented, which an upstream may echo), first.
 *
 * @example
 *   const compare = compileComparer({ ignore: ['$[*].id'], listOrder: 'ignore' });
 *   compare(legacyView, nextView); // { equal, paths: ['$[*].name'], samples: [...] }
 */
export function compileComparer(rules: CompareRules, redact?: (text: string) => string): (legacy: ClientView, next: ClientView, mask?: (text: string) => string) => Comparison {
  const [start, order, maxSamples] = [compileIgnore(rules.ignore), rules.listOrder === 'ignore', rules.maxSamples ?? COMPARE_LIMITS.samples];
  const bodyIgnored = isIgnored(start);
  return (legacy, next, mask) => {
    const w: Walk = { order, maxSamples, redact, mask, paths: new Set(), samples: [], forms: new WeakMap(), work: 0 };
    if (legacy.status !== next.status) report(w, 'status', legacy.status, next.status);
    else if ((legacy.status < 200 || legacy.status > 299) && legacy.code !== next.code) report(w, 'code', legacy.code, next.code);
    else if (!bodyIgnored) diffBodies(legacy, next, start, w);
    return { equal: w.paths.size === 0, paths: [...w.paths].sort(), samples: w.samples };
  };
}
