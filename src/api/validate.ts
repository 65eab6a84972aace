/**
 * The structure of an interface document: is it an OpenAPI 3.1 document at all? Checked against
 * the specification's own JSON Schema (@seriousme/openapi-schema-validator, which carries the
 * schemas the OpenAPI Initiative publishes), every Schema Object against the JSON Schema 2020-12
 * meta-schema (the specification's schema leaves them open: `type: 5` passes it), and every local
 * `$ref` resolved. Each problem names its JSON path, as the policy file's problems do.
 *
 * Whether the gateway supports each construct is the compiler's question, asked after this one.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import type { ErrorObject } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { toJsonPath } from '../core/json-path.js';
import type { Problem } from '../core/policy.js';
import { isObject, pointerToken as token, resolvePointer, type Json } from './refs.js';


/**
 * Checks an interface document (already parsed from YAML or JSON) against the OpenAPI 3.1
 * structure. Returns every problem found, each with its JSON path; none when it is well formed.
 *
 * @example
 *   const problems = await validateStructure(parse(readFileSync('openapi/pet-store.yaml', 'utf8')));
 *   for (const p of problems) console.log(`${p.path}: ${p.message}`);
 */
export async function validateStructure(document: unknown): Promise<Problem[]> {
  if (!isObject(document)) return [{ path: '$', message: 'must be an object: an OpenAPI 3.1 document' }];
  const version = document.openapi;
  if (typeof version !== 'string' || !/^3\.1\.\d+(-.+)?$/.test(version)) {
    // Another version is validated against another schema: its other problems would mislead.
    const found = version === undefined ? 'it is missing' : `found ${JSON.stringify(version)}`;
    return [{ path: '$.openapi', message: `must be an OpenAPI 3.1 version such as "3.1.0" (${found})` }];
  }
  const refProblems = refsOf(document);
  const problems: Problem[] = [...refProblems];
  const result = await validator().validate(document);
  if (typeof result.errors === 'string') {
    // The library's own reference check says only "Can't resolve X", without a place: ours said it.
    if (refProblems.length === 0) problems.push({ path: '$', message: result.errors });
  } else if (result.errors !== undefined) {
    problems.push(...describeAll(result.errors, ''));
  }
  for (const [pointer, schema] of schemaObjects(document)) problems.push(...metaSchemaProblems(schema, pointer));
  return dedupe(problems);
}

let shared: Validator | undefined;
/** One validator for the process: it compiles the specification's schema on first use. */
function validator(): Validator {
  shared ??= new Validator({ allErrors: true });
  return shared;
}

let metaAjv: Ajv2020 | undefined;
function metaSchemaProblems(schema: unknown, pointer: string): Problem[] {
  // A schema naming its own dialect is not checked against 2020-12; boolean schemas are always valid.
  if (!isObject(schema) || '$schema' in schema) return [];
  metaAjv ??= new Ajv2020({ strict: false, allErrors: true, logger: false });
  if (metaAjv.validateSchema(schema) === true) return [];
  return describeAll(metaAjv.errors ?? [], pointer);
}

/**
 * Ajv's errors, said plainly. The OpenAPI schema chooses between a Reference Object and the thing
 * itself with if/then/else: the `if` error adds nothing. An alternative (oneOf, anyOf) that failed
 * reports each branch and then itself: when a branch failed deeper down, that error is the precise
 * one and the summary goes; when every branch failed at the same place, they become one problem
 * that lists what each branch wanted.
 */
function describeAll(errors: readonly ErrorObject[], prefix: string): Problem[] {
  const isAlternative = (e: ErrorObject) => e.keyword === 'oneOf' || e.keyword === 'anyOf';
  const alternatives = errors.filter(isAlternative);
  const deeper = (e: ErrorObject, than: string) => e.instancePath.startsWith(than + '/');
  const merged = new Map<string, string[]>();
  const out: Problem[] = [];
  for (const e of errors) {
    if (e.keyword === 'if') continue;
    if (isAlternative(e)) {
      if (!errors.some((o) => deeper(o, e.instancePath))) out.push({ path: toJsonPath(prefix + e.instancePath), message: '' });
      continue;
    }
    const atAlternative = alternatives.some((a) => a.instancePath === e.instancePath && !errors.some((o) => deeper(o, a.instancePath)));
    const problem = describe(e, prefix);
    if (!atAlternative) out.push(problem);
    else merged.set(problem.path, [...(merged.get(problem.path) ?? []), problem.message]);
  }
  return out.map((p) => (p.message !== '' ? p : { path: p.path, message: merged.get(p.path)?.join('; or ') ?? 'is not any of the forms OpenAPI 3.1 accepts here' }));
}

function describe(e: ErrorObject, prefix: string): Problem {
  const pointer = prefix + e.instancePath;
  const path = toJsonPath(pointer);
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return { path, message: `missing required property '${String(p.missingProperty)}'` };
    case 'additionalProperties':
    case 'unevaluatedProperties': {
      const name = String(p.additionalProperty ?? p.unevaluatedProperty);
      const where = toJsonPath(`${pointer}/${token(name)}`);
      if (pointer === '/paths') return { path: where, message: `is not a path: a path starts with '/'` };
      return { path: where, message: `is not a property OpenAPI 3.1 allows here (an extension's name starts with x-)` };
    }
    case 'type':
      return { path, message: `must be ${String(p.type).replace(/,/g, ' or ')}` };
    case 'enum':
      return { path, message: `must be one of: ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}` };
    case 'const':
      return { path, message: `must be ${JSON.stringify(p.allowedValue)}` };
    case 'pattern':
      return { path, message: `must match /${String(p.pattern)}/` };
    case 'format':
      return { path, message: `must be a valid ${String(p.format)}` };
    default:
      return { path, message: e.message ?? 'is not valid' };
  }
}

/** Every `$ref` of the document: a local one must resolve; another document cannot be read. */
function refsOf(document: Json): Problem[] {
  const problems: Problem[] = [];
  const seen = new Set<object>();
  const visit = (node: unknown, pointer: string): void => {
    if (typeof node !== 'object' || node === null || seen.has(node)) return;
    seen.add(node);
    const entries: [string, unknown][] = Array.isArray(node) ? node.map((v, i) => [String(i), v]) : Object.entries(node);
    for (const [key, value] of entries) {
      if (key === '$ref' && !Array.isArray(node) && typeof value === 'string') {
        const problem = refProblem(document, value);
        if (problem !== undefined) problems.push({ path: toJsonPath(`${pointer}/$ref`), message: problem });
      }
      visit(value, `${pointer}/${token(key)}`);
    }
  };
  visit(document, '');
  return problems;
}

function refProblem(document: Json, ref: string): string | undefined {
  if (!ref.startsWith('#')) return `${JSON.stringify(ref)} is not in this document: only local references (#/...) are read`;
  if (!ref.startsWith('#/') && ref !== '#') return undefined; // an anchor (#name): the library resolves it
  return resolvePointer(document, ref) === undefined ? `${JSON.stringify(ref)} points to nothing in this document` : undefined;
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** Where the document holds Schema Objects: [JSON Pointer, schema], references not followed. */
function schemaObjects(document: Json): [string, unknown][] {
  const out: [string, unknown][] = [];
  const content = (holder: unknown, at: string) => {
    if (!isObject(holder) || !isObject(holder.content)) return;
    for (const [type, media] of Object.entries(holder.content)) {
      if (isObject(media) && 'schema' in media) out.push([`${at}/content/${token(type)}/schema`, media.schema]);
    }
  };
  const parameterLike = (p: unknown, at: string) => {
    if (!isObject(p)) return;
    if ('schema' in p) out.push([`${at}/schema`, p.schema]);
    content(p, at);
  };
  const headers = (holder: unknown, at: string) => {
    if (isObject(holder) && isObject(holder.headers)) for (const [n, h] of Object.entries(holder.headers)) parameterLike(h, `${at}/headers/${token(n)}`);
  };
  const parameters = (list: unknown, at: string) => {
    if (Array.isArray(list)) list.forEach((p, i) => parameterLike(p, `${at}/parameters/${i}`));
  };
  const responses = (map: unknown, at: string) => {
    if (!isObject(map)) return;
    for (const [status, r] of Object.entries(map)) {
      content(r, `${at}/${token(status)}`);
      headers(r, `${at}/${token(status)}`);
    }
  };
  if (isObject(document.paths)) {
    for (const [path, item] of Object.entries(document.paths)) {
      if (!isObject(item)) continue;
      const at = `/paths/${token(path)}`;
      parameters(item.parameters, at);
      for (const method of METHODS) {
        const op = item[method];
        if (!isObject(op)) continue;
        parameters(op.parameters, `${at}/${method}`);
        content(op.requestBody, `${at}/${method}/requestBody`);
        responses(op.responses, `${at}/${method}/responses`);
      }
    }
  }
  const c = document.components;
  if (isObject(c)) {
    if (isObject(c.schemas)) for (const [n, s] of Object.entries(c.schemas)) out.push([`/components/schemas/${token(n)}`, s]);
    if (isObject(c.parameters)) for (const [n, p] of Object.entries(c.parameters)) parameterLike(p, `/components/parameters/${token(n)}`);
    if (isObject(c.headers)) for (const [n, h] of Object.entries(c.headers)) parameterLike(h, `/components/headers/${token(n)}`);
    if (isObject(c.requestBodies)) for (const [n, b] of Object.entries(c.requestBodies)) content(b, `/components/requestBodies/${token(n)}`);
    responses(c.responses, '/components/responses');
  }
  return out;
}

function dedupe(problems: Problem[]): Problem[] {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const key = `${p.path}\n${p.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}
