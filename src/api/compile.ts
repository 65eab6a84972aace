/**
 * Compiles an interface document (OpenAPI 3.1) into the operations the gateway enforces
 * (model.ts): once, at load. Every construct the compiled checks cannot enforce exactly is refused
 * with its JSON path, rather than let through unchecked (docs/interface-document.md lists what is
 * supported). The structure of the document as OpenAPI is checked before (validate.ts).
 */
import { CATALOGUE } from '../core/errors.js';
import type { Problem } from '../core/policy.js';
import { deref, isObject, pathOf } from './document.js';
import type { Api, ApiOperation, Field, FieldType, ObjectShape, QueryParam, SuccessAnswer } from './model.js';
import { InterfaceRouter } from './router.js';

type Keys = readonly (string | number)[];

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;
const REFUSED_METHODS = ['head', 'options', 'trace'] as const;
const OPERATION_ID = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;
const DATE_TIME = /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$/;
const URI_REFERENCE = /^[^\s<>"]+$/;
/** A document path: plain segments (never `.` or `..`) or one `{parameter}` segment. */
const DOCUMENT_PATH = /^(\/([A-Za-z0-9\-._~]+|\{[A-Za-z_][A-Za-z0-9_]*\}))+$/;
const DOT_SEGMENT = /\/\.\.?(\/|$)/;
/** A path parameter's enum value: matched on the raw, undecoded segment, so only unreserved characters. */
const SEGMENT_VALUE = /^[A-Za-z0-9\-._~]+$/;
/**
 * A query parameter's name: written as is into the upstream query and the access log's JSON, so
 * no character that needs encoding or escaping there.
 */
const QUERY_NAME = /^[A-Za-z0-9_.~\-[\]]{1,64}$/;
/** Keywords that only describe: allowed anywhere in a supported schema. */
const NOTES = new Set(['description', 'title', 'example', 'examples', '$comment', 'deprecated']);

class Compiler {
  readonly problems: Problem[] = [];
  constructor(readonly doc: Record<string, unknown>) {}

  refuse(keys: Keys, message: string): undefined {
    this.problems.push({ path: pathOf(keys), message });
    return undefined;
  }

  resolve(node: unknown, at: Keys): { node: unknown; at: Keys } | undefined {
    return deref(this.doc, node, at, this.problems);
  }

  /** Keys of `node` outside `allowed` (and the notes): each refused with its path. */
  onlyKeys(node: Record<string, unknown>, at: Keys, allowed: readonly string[], what: string): boolean {
    let ok = true;
    for (const k of Object.keys(node)) {
      if (allowed.includes(k) || NOTES.has(k) || k.startsWith('x-')) continue;
      this.refuse([...at, k], `'${k}' is not supported in ${what} (docs/interface-document.md)`);
      ok = false;
    }
    return ok;
  }

  fieldType(raw: unknown, rawAt: Keys): FieldType | undefined {
    const r = this.resolve(raw, rawAt);
    if (r === undefined) return undefined;
    const { node, at } = r;
    if (!isObject(node)) return this.refuse(at, 'must be a schema object');
    if (!this.onlyKeys(node, at, ['type', 'format', 'enum'], 'a field schema')) return undefined;
    if (node.type === 'integer') {
      if (node.enum !== undefined) return this.refuse([...at, 'enum'], 'an integer enum is not supported');
      if (node.format === 'int64') return { kind: 'int64' };
      if (node.format === 'int32') return { kind: 'int32' };
      return this.refuse(at, 'an integer field needs format int64 or int32');
    }
    if (node.type === 'string') {
      if (node.format !== undefined) return this.refuse([...at, 'format'], `string format '${String(node.format)}' is not checked by the gateway`);
      if (node.enum === undefined) return { kind: 'string' };
      if (!Array.isArray(node.enum) || node.enum.length === 0 || !node.enum.every((v) => typeof v === 'string')) return this.refuse([...at, 'enum'], 'must be a non-empty list of strings');
      return { kind: 'enum', values: [...new Set(node.enum as string[])] };
    }
    return this.refuse([...at, 'type'], `type ${JSON.stringify(node.type ?? null)} is not supported: integer (int64, int32) or string (with or without enum)`);
  }

  shape(raw: unknown, rawAt: Keys): ObjectShape | undefined {
    const name = isObject(raw) && typeof raw.$ref === 'string' ? raw.$ref.slice(raw.$ref.lastIndexOf('/') + 1) : 'object';
    const r = this.resolve(raw, rawAt);
    if (r === undefined) return undefined;
    const { node, at } = r;
    if (!isObject(node)) return this.refuse(at, 'must be a schema object');
    if (!this.onlyKeys(node, at, ['type', 'properties', 'required'], 'an object schema')) return undefined;
    if (node.type !== 'object') return this.refuse([...at, 'type'], 'must be "object": a body is a flat JSON object (or a list of them)');
    const props = node.properties ?? {};
    if (!isObject(props)) return this.refuse([...at, 'properties'], 'must be a mapping');
    const fields: Field[] = [];
    const forbidden: string[] = [];
    for (const [fname, fs] of Object.entries(props)) {
      if (fs === false) forbidden.push(fname);
      else {
        const type = this.fieldType(fs, [...at, 'properties', fname]);
        if (type !== undefined) fields.push({ name: fname, type });
      }
    }
    const required = node.required ?? [];
    if (!Array.isArray(required) || !required.every((x) => typeof x === 'string')) return this.refuse([...at, 'required'], 'must be a list of property names');
    required.forEach((f, i) => {
      if (!fields.some((x) => x.name === f)) this.refuse([...at, 'required', i], `'${f}' is not a property`);
    });
    if (fields.length > 30) return this.refuse([...at, 'properties'], 'at most 30 properties');
    return { name, fields, required: required as string[], forbidden };
  }

  jsonContent(content: unknown, at: Keys): { schema: unknown; at: Keys } | undefined {
    if (!isObject(content)) return this.refuse(at, 'must be a mapping of media types');
    const types = Object.keys(content);
    if (types.length !== 1 || types[0] !== 'application/json') return this.refuse(at, 'only application/json is supported, alone');
    const media = content['application/json'];
    if (!isObject(media) || media.schema === undefined) return this.refuse([...at, 'application/json'], 'needs a schema');
    if (!this.onlyKeys(media, [...at, 'application/json'], ['schema'], 'a media type')) return undefined;
    return { schema: media.schema, at: [...at, 'application/json', 'schema'] };
  }

  success(status: number, response: Record<string, unknown>, at: Keys): SuccessAnswer | undefined {
    const c = this.jsonContent(response.content, [...at, 'content']);
    if (c === undefined) return undefined;
    const r = this.resolve(c.schema, c.at);
    if (r === undefined) return undefined;
    if (isObject(r.node) && r.node.type === 'array') {
      if (!this.onlyKeys(r.node, r.at, ['type', 'items'], 'a list schema')) return undefined;
      const shape = this.shape(r.node.items, [...r.at, 'items']);
      return shape === undefined ? undefined : { status, list: true, shape };
    }
    const shape = this.shape(c.schema, c.at);
    return shape === undefined ? undefined : { status, list: false, shape };
  }

  queryParam(p: Record<string, unknown>, at: Keys): QueryParam | undefined {
    const name = String(p.name);
    const required = p.required === true;
    const r = this.resolve(p.schema, [...at, 'schema']);
    if (r === undefined) return undefined;
    const s = r.node;
    if (!isObject(s)) return this.refuse(r.at, 'must be a schema object');
    if (s.type === 'integer') {
      if (!this.onlyKeys(s, r.at, ['type', 'format', 'minimum', 'maximum', 'default'], 'an integer query parameter')) return undefined;
      const min = s.minimum ?? Number.MIN_SAFE_INTEGER;
      const max = s.maximum ?? Number.MAX_SAFE_INTEGER;
      if (!Number.isSafeInteger(min) || !Number.isSafeInteger(max) || (min as number) > (max as number)) return this.refuse(r.at, 'minimum and maximum must be integers, minimum <= maximum');
      const def = s.default;
      if (def !== undefined && (!Number.isSafeInteger(def) || (def as number) < (min as number) || (def as number) > (max as number))) return this.refuse([...r.at, 'default'], 'must be an integer within minimum..maximum');
      return { name, kind: 'integer', min: min as number, max: max as number, default: def as number | undefined, required };
    }
    const type = this.fieldType(p.schema, [...at, 'schema']);
    if (type === undefined) return undefined;
    if (type.kind !== 'enum') return this.refuse([...at, 'schema'], 'a query parameter is an integer or a string enum');
    return { name, kind: 'enum', values: type.values, required };
  }

  operation(path: string, method: string, raw: unknown, at: Keys, index: number, basePath: string): ApiOperation | undefined {
    if (!isObject(raw)) return this.refuse(at, 'must be an operation object');
    const allowed = ['operationId', 'summary', 'parameters', 'requestBody', 'responses', 'security', 'tags', 'operationId', 'externalDocs'];
    if (!this.onlyKeys(raw, at, allowed, 'an operation')) return undefined;
    const id = raw.operationId;
    if (typeof id !== 'string' || !OPERATION_ID.test(id)) return this.refuse([...at, 'operationId'], 'every operation needs an operationId: a letter, then letters, digits or _ (at most 64)');
    this.security(raw.security, [...at, 'security']);

    const params = this.parameters(path, raw, at);
    if (params === undefined) return undefined;
    const { paramName, pathParam, query } = params;
    const body = this.requestBody(raw, at);
    const answers = this.responses(raw, at);
    if (answers === undefined) return undefined;
    const { success, statuses, errorCodes } = answers;
    const { listLimit, listFilter } = this.listRules(raw, at, query, success);
    const deprecation = this.deprecation(raw, at);

    const label = basePath + path;
    const open = path.indexOf('{');
    return {
      id,
      method: method.toUpperCase(),
      hasBody: body !== undefined,
      paramName,
      label,
      pathPrefix: open === -1 ? path : path.slice(0, open),
      pathSuffix: open === -1 ? '' : path.slice(path.indexOf('}', open) + 1),
      index,
      path,
      pathParam,
      query,
      listLimit,
      listFilter,
      body,
      success,
      statuses: statuses.sort((a, b) => a - b),
      errorCodes,
      deprecation,
    };
  }

  parameters(path: string, raw: Record<string, unknown>, at: Keys): { paramName: string | undefined; pathParam: Field | undefined; query: QueryParam[] } | undefined {
    const segments = path.split('/');
    const params = segments.filter((s) => s.startsWith('{'));
    if (params.length > 1) return this.refuse(['paths', path], 'at most one path parameter per path');
    const paramName = params[0]?.slice(1, -1);
    let pathParam: Field | undefined;
    const query: QueryParam[] = [];
    const list = raw.parameters ?? [];
    if (!Array.isArray(list)) return this.refuse([...at, 'parameters'], 'must be a list');
    list.forEach((p0, i) => {
      const r = this.resolve(p0, [...at, 'parameters', i]);
      if (r === undefined) return;
      const p = r.node;
      if (!isObject(p) || typeof p.name !== 'string') return this.refuse(r.at, 'a parameter needs a name');
      if (!this.onlyKeys(p, r.at, ['name', 'in', 'required', 'schema'], 'a parameter')) return;
      if (p.in === 'path') {
        if (p.name !== paramName) return this.refuse([...r.at, 'name'], `the path '${path}' has no parameter '${p.name}'`);
        if (p.required !== true) return this.refuse([...r.at, 'required'], 'a path parameter is required: true');
        const type = this.pathParamType(p.schema, [...r.at, 'schema']);
        if (type !== undefined) pathParam = { name: p.name, type };
      } else if (p.in === 'query') {
        if (!QUERY_NAME.test(p.name)) return this.refuse([...r.at, 'name'], 'a query parameter\'s name is 1 to 64 letters, digits or - . _ ~ [ ]');
        if (query.some((q) => q.name === p.name)) return this.refuse([...r.at, 'name'], `'${p.name}' is given twice`);
        const q = this.queryParam(p, r.at);
        if (q !== undefined) query.push(q);
      } else return this.refuse([...r.at, 'in'], `parameters in ${String(p.in)} are not supported (path and query only)`);
    });
    if (paramName !== undefined && pathParam === undefined && !this.problems.some((p) => p.path.startsWith(pathOf(at)))) {
      this.refuse([...at, 'parameters'], `the path parameter '${paramName}' is not defined`);
    }

    return { paramName, pathParam, query };
  }

  /**
   * A path parameter's type: an integer (int64, int32) or a string enum of unreserved values. The
   * router hands the raw segment on undecoded, so any other text could carry an encoded '/', '\\'
   * or dot segment (`..%2F`, `%2e%2e`) to the upstream, past the paths the document lists.
   */
  pathParamType(raw: unknown, at: Keys): FieldType | undefined {
    const type = this.fieldType(raw, at);
    if (type === undefined) return undefined;
    if (type.kind === 'string') return this.refuse(at, 'a path parameter is an integer (format int64 or int32) or a string enum: free text would reach the upstream undecoded (%2F, %2e%2e)');
    if (type.kind === 'enum') {
      const bad = type.values.find((v) => !SEGMENT_VALUE.test(v) || v === '.' || v === '..');
      if (bad !== undefined) return this.refuse(at, `enum value ${JSON.stringify(bad)} cannot be a path segment: a path parameter's values are letters, digits or - . _ ~ (matched undecoded), never . or ..`);
    }
    return type;
  }

  requestBody(raw: Record<string, unknown>, at: Keys): ObjectShape | undefined {
    let body: ObjectShape | undefined;
    if (raw.requestBody !== undefined) {
      const r = this.resolve(raw.requestBody, [...at, 'requestBody']);
      if (r !== undefined && isObject(r.node)) {
        if (this.onlyKeys(r.node, r.at, ['content', 'required'], 'a request body')) {
          if (r.node.required !== true) this.refuse([...r.at, 'required'], 'an optional request body is not supported: required: true');
          const c = this.jsonContent(r.node.content, [...r.at, 'content']);
          if (c !== undefined) body = this.shape(c.schema, c.at);
        }
      }
    }

    return body;
  }

  responses(raw: Record<string, unknown>, at: Keys): { success: SuccessAnswer | undefined; statuses: number[]; errorCodes: Record<number, string> } | undefined {
    const responses = raw.responses;
    if (!isObject(responses)) return this.refuse([...at, 'responses'], 'must be a mapping of statuses');
    let success: SuccessAnswer | undefined;
    const statuses: number[] = [];
    const errorCodes: Record<number, string> = {};
    for (const [key, r0] of Object.entries(responses)) {
      const rat = [...at, 'responses', key];
      if (!/^[1-5][0-9]{2}$/.test(key)) {
        this.refuse(rat, `'${key}': only explicit statuses (200, 404...) are supported`);
        continue;
      }
      const status = Number(key);
      statuses.push(status);
      const r = this.resolve(r0, rat);
      if (r === undefined || !isObject(r.node)) continue;
      if (!this.onlyKeys(r.node, r.at, ['content', 'headers', 'x-error-code'], 'a response')) continue;
      const code = r.node['x-error-code'];
      if (code !== undefined) {
        const entry = (CATALOGUE as Record<string, { status: number }>)[String(code)];
        if (entry === undefined || entry.status !== status) this.refuse([...r.at, 'x-error-code'], `must be a code of the gateway's catalogue (docs/errors.md) with status ${status}`);
        else errorCodes[status] = String(code);
      }
      if (status >= 200 && status < 300) {
        if (success !== undefined) this.refuse(rat, 'one 2xx response per operation');
        else success = this.success(status, r.node, r.at);
      }
    }
    if (success === undefined && !this.problems.some((p) => p.path.startsWith(pathOf([...at, 'responses'])))) this.refuse([...at, 'responses'], 'needs one 2xx response with an application/json body');

    return { success, statuses, errorCodes };
  }

  listRules(raw: Record<string, unknown>, at: Keys, query: readonly QueryParam[], success: SuccessAnswer | undefined): { listLimit: string | undefined; listFilter: ApiOperation['listFilter'] } {
    const listLimit = raw['x-list-limit'];
    if (listLimit !== undefined) {
      const q = query.find((x) => x.name === listLimit);
      if (q === undefined || q.kind !== 'integer') this.refuse([...at, 'x-list-limit'], 'must name an integer query parameter of the operation');
      else if (success?.list !== true) this.refuse([...at, 'x-list-limit'], 'the 2xx answer must be a list');
      else if (q.default === undefined && !q.required) this.refuse([...at, 'x-list-limit'], `'${q.name}' needs a default (or required: true)`);
    }
    let listFilter: ApiOperation['listFilter'];
    const f = raw['x-list-filter'];
    if (f !== undefined) {
      const entries = isObject(f) ? Object.entries(f) : [];
      const [param, field] = entries[0] ?? [];
      const q = query.find((x) => x.name === param);
      const item = success?.shape.fields.find((x) => x.name === field);
      if (entries.length !== 1) this.refuse([...at, 'x-list-filter'], 'must map one query parameter to one item field: { status: status }');
      else if (q === undefined || q.kind !== 'enum') this.refuse([...at, 'x-list-filter'], `'${String(param)}' must be an enum query parameter of the operation`);
      else if (success?.list !== true || item === undefined || item.type.kind !== 'enum') this.refuse([...at, 'x-list-filter'], `'${String(field)}' must be an enum field of the list's items`);
      else listFilter = { param: q.name, field: item.name };
    }

    return { listLimit: typeof listLimit === 'string' ? listLimit : undefined, listFilter };
  }

  deprecation(raw: Record<string, unknown>, at: Keys): ApiOperation['deprecation'] {
    let deprecation: ApiOperation['deprecation'];
    const sunset = raw['x-sunset'];
    const successor = raw['x-successor'];
    if (raw.deprecated === true) {
      if (sunset !== undefined && (typeof sunset !== 'string' || !DATE_TIME.test(sunset) || Number.isNaN(Date.parse(sunset)))) this.refuse([...at, 'x-sunset'], 'must be an RFC 3339 date-time with a zone, such as 2030-12-05T00:00:00Z');
      if (successor !== undefined && (typeof successor !== 'string' || !URI_REFERENCE.test(successor))) this.refuse([...at, 'x-successor'], 'must be a URI reference without spaces, <, > or "');
      const advice = raw['x-successor-description'];
      if (advice !== undefined && (typeof advice !== 'string' || advice.length > 200)) this.refuse([...at, 'x-successor-description'], 'must be a string of at most 200 characters');
      deprecation = { sunset: sunset as string | undefined, successor: successor as string | undefined, advice: advice as string | undefined };
    } else if (sunset !== undefined || successor !== undefined) this.refuse(at, 'x-sunset and x-successor need deprecated: true');

    return deprecation;
  }

  /** The gateway's one scheme is the bearer API key: an operation may only require it. */
  security(raw: unknown, at: Keys): void {
    if (raw === undefined) return;
    const schemes = isObject(this.doc.components) && isObject(this.doc.components.securitySchemes) ? this.doc.components.securitySchemes : {};
    if (!Array.isArray(raw) || raw.length !== 1 || !isObject(raw[0]) || Object.keys(raw[0]).length !== 1) {
      this.refuse(at, 'must be one requirement of one bearer scheme: every operation requires the API key');
      return;
    }
    const name = Object.keys(raw[0])[0] ?? '';
    const s = schemes[name];
    if (!isObject(s) || s.type !== 'http' || String(s.scheme).toLowerCase() !== 'bearer') this.refuse(at, `'${name}' must be an http bearer scheme of components.securitySchemes`);
  }
}

/** The path prefix of the base address: `servers[0].url`'s path, without a trailing slash. */
function basePathOf(c: Compiler): string {
  const servers = c.doc.servers;
  if (servers === undefined) return '';
  const url = Array.isArray(servers) && isObject(servers[0]) ? servers[0].url : undefined;
  if (typeof url !== 'string') return c.refuse(['servers'], 'must be a list whose first entry has a url') ?? '';
  if (/[{}]/.test(url)) return c.refuse(['servers', 0, 'url'], 'server variables are not supported') ?? '';
  const path = url.startsWith('/') ? url : new URL(url).pathname;
  return path.replace(/\/+$/, '');
}

export type CompileResult = { readonly ok: true; readonly api: Api } | { readonly ok: false; readonly problems: readonly Problem[] };

/** Compiles a document (already read, its OpenAPI structure valid) into the gateway's operations. */
export function compileDocument(doc: unknown, source: string): CompileResult {
  if (!isObject(doc)) return { ok: false, problems: [{ path: '$', message: 'must be an OpenAPI document (a mapping)' }] };
  const c = new Compiler(doc);
  if (typeof doc.openapi !== 'string' || !doc.openapi.startsWith('3.1.')) c.refuse(['openapi'], 'must be 3.1.x: the gateway reads OpenAPI 3.1 documents');
  c.onlyKeys(doc, [], ['openapi', 'info', 'servers', 'paths', 'components', 'security', 'tags', 'externalDocs', 'jsonSchemaDialect'], 'the document');
  if (doc.webhooks !== undefined) c.refuse(['webhooks'], 'webhooks are not supported');
  c.security(doc.security, ['security']);
  const basePath = basePathOf(c);
  const operations: ApiOperation[] = [];
  const paths = doc.paths;
  if (!isObject(paths) || Object.keys(paths).length === 0) c.refuse(['paths'], 'needs at least one path');
  // A templated path by its shape (`/pets/{}`): two that differ only in the parameter's name are one path.
  const templates = new Map<string, string>();
  for (const [path, item] of Object.entries(isObject(paths) ? paths : {})) {
    if (!DOCUMENT_PATH.test(path) || DOT_SEGMENT.test(path)) {
      c.refuse(['paths', path], 'must be /segment/... with plain segments (not . or ..) or one {parameter} segment, no trailing slash');
      continue;
    }
    const shape = path.replace(/\{[^}]*\}/g, '{}');
    const twin = templates.get(shape);
    if (twin !== undefined && shape !== path) {
      c.refuse(['paths', path], `is the path '${twin}' with another parameter name: one of them could never be reached`);
      continue;
    }
    templates.set(shape, path);
    if (!isObject(item)) continue;
    for (const k of Object.keys(item)) {
      if ((REFUSED_METHODS as readonly string[]).includes(k)) c.refuse(['paths', path, k], `${k.toUpperCase()} is not an operation the gateway forwards`);
      else if (!(METHODS as readonly string[]).includes(k) && !NOTES.has(k) && k !== 'summary' && !k.startsWith('x-')) c.refuse(['paths', path, k], `'${k}' is not supported in a path item (parameters go on each operation)`);
    }
    for (const m of METHODS) {
      if (item[m] === undefined) continue;
      const op = c.operation(path, m, item[m], ['paths', path, m], operations.length, basePath);
      if (op === undefined) continue;
      if (operations.some((o) => o.id === op.id)) c.refuse(['paths', path, m, 'operationId'], `'${op.id}' is used twice`);
      operations.push(op);
    }
  }
  if (c.problems.length > 0) return { ok: false, problems: c.problems };
  const info = isObject(doc.info) ? doc.info : {};
  const frozen = Object.freeze(operations.map((o) => Object.freeze(o)));
  return {
    ok: true,
    api: Object.freeze({ title: String(info.title ?? ''), version: String(info.version ?? ''), basePath, operations: frozen, router: new InterfaceRouter(frozen), document: doc, source }),
  };
}
