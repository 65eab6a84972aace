/**
 * What changed between two interface documents, as an operator reviewing 1.0 -> 1.1 wants it:
 * operations added or removed, deprecation, parameters, request bodies, answers, the list
 * extensions (x-list-limit, x-list-filter), and in every schema the bounds, enums, defaults,
 * fields and types, each change marked breaking or not (the table is src/api/diff-rules.ts).
 *
 * Operations are matched by method and path, the path parameters' names aside (`/pets/{id}` is
 * `/pets/{petId}` renamed); parameters by where and name (a path parameter by its position).
 * Local references are followed; descriptions, summaries and examples are not compared.
 */
import { isDeepStrictEqual } from 'node:util';
import { Changes, type Change } from './diff-rules.js';
import { SchemaComparison, type SchemaSite } from './diff-schema.js';
import { follow, isObject, pointerToken, type Json, type Located } from './refs.js';

export type { Change, ChangeKind } from './diff-rules.js';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
const join = (at: string, ...keys: string[]) => at + keys.map((k) => '/' + pointerToken(k)).join('');
const show = (v: unknown): string => (v === undefined ? 'none' : JSON.stringify(v));

interface OperationView {
  /** `GET /pets/{petId}`, as the document writes it. */
  readonly label: string;
  readonly at: string;
  readonly op: Json;
  readonly parameters: ReadonlyMap<string, { readonly param: Json; readonly at: string }>;
  /** The security requirements that apply: the operation's, else the document's. */
  readonly security: unknown;
}

/** Every operation of a document, keyed by method and path with its parameters' names blanked. */
function operationsOf(doc: Json): Map<string, OperationView> {
  const out = new Map<string, OperationView>();
  if (!isObject(doc.paths)) return out;
  for (const [path, rawItem] of Object.entries(doc.paths)) {
    const item = follow(doc, rawItem, join('', 'paths', path));
    if (!isObject(item.value)) continue;
    const templated = [...path.matchAll(/\{([^}]*)\}/g)].map((m) => m[1]!);
    for (const method of METHODS) {
      const op = item.value[method];
      if (!isObject(op)) continue;
      const at = join(item.at, method);
      const parameters = new Map<string, { param: Json; at: string }>();
      // Path-level parameters first: the operation's own replace them (OpenAPI 3.1, "Path Item Object").
      for (const [list, listAt] of [[item.value.parameters, join(item.at, 'parameters')], [op.parameters, join(at, 'parameters')]] as const) {
        if (!Array.isArray(list)) continue;
        list.forEach((raw: unknown, i) => {
          const p = follow(doc, raw, join(listAt, String(i)));
          if (!isObject(p.value) || typeof p.value.name !== 'string') return;
          const position = p.value.in === 'path' ? templated.indexOf(p.value.name) : -1;
          const key = position >= 0 ? `path #${position}` : `${String(p.value.in)} ${p.value.name}`;
          parameters.set(key, { param: p.value, at: p.at });
        });
      }
      const key = `${method.toUpperCase()} ${path.replace(/\{[^}]*\}/g, '{}')}`;
      out.set(key, { label: `${method.toUpperCase()} ${path}`, at, op, parameters, security: op.security ?? doc.security });
    }
  }
  return out;
}

class DocumentComparison {
  readonly changes = new Changes();
  private readonly schemas: SchemaComparison;

  constructor(
    private readonly before: Json,
    private readonly after: Json,
  ) {
    this.schemas = new SchemaComparison(before, after, this.changes);
  }

  run(): void {
    const serverOf = (doc: Json) => (Array.isArray(doc.servers) && isObject(doc.servers[0]) ? doc.servers[0].url : undefined);
    const [was, now] = [serverOf(this.before), serverOf(this.after)];
    if (was !== now) this.changes.add('base-path-changed', '/servers/0/url', `base path ${show(was)} changed to ${show(now)}`);
    const b = operationsOf(this.before);
    const a = operationsOf(this.after);
    for (const [key, op] of b) if (!a.has(key)) this.changes.add('operation-removed', op.at, `${op.label}: operation removed`);
    for (const [key, op] of a) {
      const old = b.get(key);
      if (old === undefined) this.changes.add('operation-added', op.at, `${op.label}: operation added`);
      else this.operation(old, op);
    }
  }

  private operation(b: OperationView, a: OperationView): void {
    this.deprecation(b, a);
    if (!isDeepStrictEqual(b.security, a.security)) {
      this.changes.add('security-changed', 'security' in a.op ? join(a.at, 'security') : '/security', `${a.label}: security ${show(b.security)} changed to ${show(a.security)}`);
    }
    this.parameters(b, a);
    this.requestBody(b, a);
    this.responses(b, a);
    this.listRules(b, a);
  }

  private deprecation(b: OperationView, a: OperationView): void {
    const was = b.op.deprecated === true;
    const now = a.op.deprecated === true;
    const sunset = (op: Json) => (typeof op['x-sunset'] === 'string' ? op['x-sunset'] : undefined);
    if (!was && now) {
      const details = [sunset(a.op) === undefined ? '' : `, removal on ${sunset(a.op)}`, a.op['x-successor'] === undefined ? '' : `, successor ${show(a.op['x-successor'])}`];
      this.changes.add('deprecation-added', join(a.at, 'deprecated'), `${a.label}: deprecated${details.join('')}`);
    } else if (was && !now) {
      this.changes.add('deprecation-removed', join(b.at, 'deprecated'), `${a.label}: no longer deprecated`);
    }
    if (!now) return;
    const [before, after] = [sunset(b.op), sunset(a.op)];
    if (before !== after && was) {
      const earlier = before !== undefined && after !== undefined && Date.parse(after) < Date.parse(before);
      const at = join(after === undefined ? b.at : a.at, 'x-sunset');
      this.changes.add(earlier ? 'sunset-earlier' : 'sunset-changed', at, `${a.label}: sunset ${show(before)} changed to ${show(after)}`);
    }
    if (was && !isDeepStrictEqual(b.op['x-successor'], a.op['x-successor'])) {
      this.changes.add('successor-changed', join(a.at, 'x-successor'), `${a.label}: successor ${show(b.op['x-successor'])} changed to ${show(a.op['x-successor'])}`);
    }
  }

  private parameters(b: OperationView, a: OperationView): void {
    for (const [key, { param, at }] of b.parameters) {
      if (!a.parameters.has(key)) this.changes.add('parameter-removed', at, `${a.label}: ${String(param.in)} parameter ${String(param.name)} removed`);
    }
    for (const [key, { param, at }] of a.parameters) {
      const name = `${String(param.in)} parameter ${String(param.name)}`;
      const old = b.parameters.get(key);
      if (old === undefined) {
        const required = param.required === true;
        this.changes.add(required ? 'required-parameter-added' : 'parameter-added', at, `${a.label}: ${name} added${required ? ', required' : ''}`);
        continue;
      }
      if (old.param.name !== param.name) this.changes.add('parameter-renamed', join(at, 'name'), `${a.label}: ${String(old.param.in)} parameter ${String(old.param.name)} renamed ${String(param.name)}`);
      const [wasRequired, nowRequired] = [old.param.required === true, param.required === true];
      if (wasRequired !== nowRequired) {
        this.changes.add(nowRequired ? 'parameter-required' : 'parameter-optional', join(at, 'required'), `${a.label}: ${name} ${nowRequired ? 'now required' : 'no longer required'}`);
      }
      const site: SchemaSite = { side: 'request', context: `${a.label} ${name}` };
      this.schemas.compare({ value: old.param.schema, at: join(old.at, 'schema') }, { value: param.schema, at: join(at, 'schema') }, site);
      for (const key of ['style', 'explode', 'allowReserved', 'allowEmptyValue', 'content']) {
        if (!isDeepStrictEqual(old.param[key], param[key])) {
          this.changes.addOnSide('schema-changed', 'request', join(key in param ? at : old.at, key), `${a.label}: ${name}: ${key} ${show(old.param[key])} changed to ${show(param[key])}`);
        }
      }
    }
  }

  private requestBody(b: OperationView, a: OperationView): void {
    const was = follow(this.before, b.op.requestBody, join(b.at, 'requestBody'));
    const now = follow(this.after, a.op.requestBody, join(a.at, 'requestBody'));
    const required = (body: Located) => isObject(body.value) && body.value.required === true;
    if (!isObject(was.value) && !isObject(now.value)) return;
    if (!isObject(now.value)) return this.changes.add('request-body-removed', was.at, `${a.label}: request body removed`);
    if (!isObject(was.value)) {
      return this.changes.add(required(now) ? 'required-request-body-added' : 'request-body-added', now.at, `${a.label}: request body added${required(now) ? ', required' : ''}`);
    }
    if (required(was) !== required(now)) {
      this.changes.add(required(now) ? 'request-body-required' : 'request-body-optional', join(now.at, 'required'), `${a.label}: request body ${required(now) ? 'now required' : 'no longer required'}`);
    }
    this.content(was, now, { side: 'request', context: `${a.label} request body` });
  }

  private responses(b: OperationView, a: OperationView): void {
    const map = (op: OperationView) => (isObject(op.op.responses) ? op.op.responses : {});
    const [was, now] = [map(b), map(a)];
    for (const status of Object.keys(was)) {
      if (status in now) continue;
      const success = /^2(\d\d|XX)$/.test(status);
      this.changes.add(success ? 'success-response-removed' : 'response-removed', join(b.at, 'responses', status), `${a.label}: response ${status} removed`);
    }
    for (const status of Object.keys(now)) {
      const at = join(a.at, 'responses', status);
      if (!(status in was)) {
        this.changes.add('response-added', at, `${a.label}: response ${status} added`);
        continue;
      }
      const before = follow(this.before, was[status], join(b.at, 'responses', status));
      const after = follow(this.after, now[status], at);
      const code = (r: Located) => (isObject(r.value) ? r.value['x-error-code'] : undefined);
      if (!isDeepStrictEqual(code(before), code(after))) {
        this.changes.add('error-code-changed', join(code(after) === undefined ? before.at : after.at, 'x-error-code'), `${a.label}: response ${status} error code ${show(code(before))} changed to ${show(code(after))}`);
      }
      this.content(before, after, { side: 'response', context: `${a.label} response ${status}` });
    }
  }

  /** The media types of a request body or a response, and each one's schema. */
  private content(b: Located, a: Located, site: SchemaSite): void {
    const media = (r: Located) => (isObject(r.value) && isObject(r.value.content) ? r.value.content : {});
    const [was, now] = [media(b), media(a)];
    for (const type of Object.keys(was)) {
      if (!(type in now)) this.changes.add('media-type-removed', join(b.at, 'content', type), `${site.context}: media type ${type} removed`);
    }
    for (const [type, m] of Object.entries(now)) {
      const at = join(a.at, 'content', type);
      if (!(type in was)) {
        this.changes.add('media-type-added', at, `${site.context}: media type ${type} added`);
        continue;
      }
      const old = was[type];
      const schemaOf = (x: unknown) => (isObject(x) ? x.schema : undefined);
      this.schemas.compare({ value: schemaOf(old), at: join(b.at, 'content', type, 'schema') }, { value: schemaOf(m), at: join(at, 'schema') }, site);
    }
  }

  /** x-list-limit (the parameter that caps the list) and x-list-filter ({ parameter: item field }). */
  private listRules(b: OperationView, a: OperationView): void {
    const [wasLimit, nowLimit] = [b.op['x-list-limit'], a.op['x-list-limit']];
    if (!isDeepStrictEqual(wasLimit, nowLimit)) {
      const at = join(nowLimit === undefined ? b.at : a.at, 'x-list-limit');
      if (wasLimit === undefined) this.changes.add('list-limit-added', at, `${a.label}: x-list-limit added: the list is cut to parameter ${show(nowLimit)}`);
      else if (nowLimit === undefined) this.changes.add('list-limit-removed', at, `${a.label}: x-list-limit ${show(wasLimit)} removed`);
      else this.changes.add('list-limit-changed', at, `${a.label}: x-list-limit changed from parameter ${show(wasLimit)} to ${show(nowLimit)}`);
    }
    const filter = (op: Json) => (isObject(op['x-list-filter']) ? op['x-list-filter'] : {});
    const [was, now] = [filter(b.op), filter(a.op)];
    for (const param of new Set([...Object.keys(was), ...Object.keys(now)])) {
      if (isDeepStrictEqual(was[param], now[param])) continue;
      const at = join(param in now ? a.at : b.at, 'x-list-filter', param);
      const say = (what: string) => `${a.label}: x-list-filter ${param} ${what}`;
      if (!(param in was)) this.changes.add('list-filter-added', at, say(`added: each item's ${show(now[param])} equals the parameter`));
      else if (!(param in now)) this.changes.add('list-filter-removed', at, say('removed'));
      else this.changes.add('list-filter-changed', at, say(`changed from item field ${show(was[param])} to ${show(now[param])}`));
    }
  }
}

const byPath = (x: Change, y: Change) => (x.path < y.path ? -1 : x.path > y.path ? 1 : x.message < y.message ? -1 : x.message > y.message ? 1 : 0);

/**
 * Every change from `before` to `after` (two parsed OpenAPI 3.1 documents), sorted by path.
 *
 * @example
 *   const changes = diffDocuments(shipped, chosen);
 *   if (changes.some((c) => c.breaking)) console.log(formatChanges(changes).join('\n'));
 */
export function diffDocuments(before: object, after: object): Change[] {
  if (!isObject(before) || !isObject(after)) throw new TypeError('diffDocuments compares two documents (objects)');
  const comparison = new DocumentComparison(before, after);
  comparison.run();
  return [...comparison.changes.list].sort(byPath);
}

/** One line per change, sorted by path, the breaking ones marked: `breaking  $.path: message`. */
export function formatChanges(changes: readonly Change[]): string[] {
  return [...changes].sort(byPath).map((c) => `${c.breaking ? 'breaking' : '        '}  ${c.path}: ${c.message}`);
}

/**
 * What `check` says of the interface document a policy chooses: nothing when it chose none or
 * the shipped one; else a heading with the count of changes and of breaking ones, then one
 * indented line per change (formatChanges).
 */
export function documentReport(shipped: object, chosen: object | undefined): string[] {
  if (chosen === undefined || isDeepStrictEqual(shipped, chosen)) return [];
  const changes = diffDocuments(shipped, chosen);
  if (changes.length === 0) return ['interface: differs from the shipped document only in what is not enforced (descriptions, examples): no change'];
  const breaking = changes.filter((c) => c.breaking).length;
  const heading = `interface: ${changes.length} change${changes.length === 1 ? '' : 's'} against the shipped document (${breaking} breaking)`;
  return [heading, ...formatChanges(changes).map((line) => `  ${line}`)];
}
