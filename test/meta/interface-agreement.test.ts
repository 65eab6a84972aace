/**
 * docs/interface.md (the human description) and openapi/pet-store.yaml (what the gateway
 * enforces) say the same interface. Each side is read into flat facts, `key -> value`:
 * docs/interface.md by its section headings and tables, the document by its operations and
 * schemas; every fact either side states must be stated alike by the other. Mutated copies (in
 * memory) show the comparison fails on a disagreement of each kind.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { deleteAt, getAt, setAt, shippedDocument, type Doc } from '../helpers/openapi.js';
import { PROJECT_ROOT } from '../helpers/root.js';

type Facts = Map<string, string>;

const MARKDOWN_PATH = join(PROJECT_ROOT, 'docs', 'interface.md');
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

// ---------------------------------------------------------------- docs/interface.md

interface Section {
  readonly heading: string;
  readonly lines: readonly string[];
}

/** The page cut at its headings (any level): each heading's text and the lines up to the next heading. */
function sectionsOf(markdown: string): Section[] {
  const out: { heading: string; lines: string[] }[] = [];
  for (const line of markdown.split('\n')) {
    const h = /^#{1,6}\s+(.*?)\s*$/.exec(line);
    if (h !== null) out.push({ heading: h[1]!, lines: [] });
    else out.at(-1)?.lines.push(line);
  }
  return out;
}

const plain = (cell: string) => cell.replace(/`/g, '').trim();

/** The tables of a section, each after the line that introduces it ("Responses:"), rows keyed by header. */
function tablesOf(section: Section): { intro: string; rows: Record<string, string>[] }[] {
  const tables: { intro: string; rows: Record<string, string>[] }[] = [];
  let intro = '';
  let header: string[] | undefined;
  for (const line of section.lines) {
    if (!line.startsWith('|')) {
      header = undefined;
      if (line.trim() !== '') intro = line.trim();
      continue;
    }
    const cells = line.split('|').slice(1, -1).map(plain);
    if (header === undefined) {
      header = cells;
      tables.push({ intro, rows: [] });
    } else if (!cells.every((c) => /^:?-+:?$/.test(c))) {
      tables.at(-1)!.rows.push(Object.fromEntries(header.map((h, i) => [h, cells[i] ?? ''])));
    }
  }
  return tables;
}

function section(sections: Section[], heading: RegExp): Section | undefined {
  return sections.find((s) => heading.test(s.heading));
}

/** Fields of a resource table: type, format, required, meaning (a field typed by a named schema has no meaning in the document). */
function fieldFacts(facts: Facts, schema: string, rows: Record<string, string>[]): void {
  for (const row of rows) {
    const at = `schema ${schema}.${row.Field}`;
    facts.set(`${at} type`, row.Type!);
    facts.set(`${at} format`, row.Format ?? '');
    facts.set(`${at} required`, row.Required!);
    if (!/^[A-Z]/.test(row.Type!)) facts.set(`${at} meaning`, row.Meaning!);
  }
}

/** `minimum 1, maximum 100, default 20` or `one of available, pending, sold`, as separate facts. */
function constraintFacts(facts: Facts, at: string, text: string): void {
  for (const part of text.split(/,\s*(?=minimum|maximum|default|one of)/)) {
    const m = /^(minimum|maximum|default|one of)\s+(.*)$/.exec(part.trim());
    if (m === null) facts.set(`${at} constraint ${part}`, 'not understood');
    else facts.set(`${at} ${m[1] === 'one of' ? 'values' : m[1]}`, m[1] === 'one of' ? m[2]!.split(/,\s*/).join(', ') : m[2]!);
  }
}

function markdownFacts(markdown: string): Facts {
  const facts: Facts = new Map();
  const sections = sectionsOf(markdown);
  const petStatus = section(sections, /^PetStatus\b/);
  const values = petStatus?.lines.map((l) => /^Allowed values: (.*)\.$/.exec(l)).find((m) => m !== null);
  if (values) facts.set('schema PetStatus values', plain(values[1]!));
  const newPet = section(sections, /^NewPet\b/);
  const newPetRows = newPet === undefined ? [] : (tablesOf(newPet)[0]?.rows ?? []);
  fieldFacts(facts, 'NewPet', newPetRows);
  const pet = section(sections, /^Pet \(/);
  if (pet !== undefined) {
    // "All fields of NewPet plus:" the Pet table adds to NewPet's rows.
    fieldFacts(facts, 'Pet', [...(pet.lines.some((l) => /^All fields of NewPet plus:/.test(l)) ? newPetRows : []), ...(tablesOf(pet)[0]?.rows ?? [])]);
    facts.set('schema NewPet.id refused', pet.lines.some((l) => /`id` is never supplied by the client when creating/.test(l)) ? 'yes' : 'no');
  }
  const pets = section(sections, /^Pets$/)?.lines.map((l) => /^A JSON array of (\w+) objects\./.exec(l)).find((m) => m !== null);
  if (pets) facts.set('schema Pets', `array of ${pets[1]}`);
  const error = section(sections, /^Error$/);
  if (error !== undefined) fieldFacts(facts, 'Error', tablesOf(error)[0]?.rows ?? []);

  for (const s of sections) {
    const op = /^(\w+): ([A-Z]+) (\S+)(\s+\(deprecated\))?$/.exec(s.heading);
    if (op === null) continue;
    const [, id, method, path, deprecated] = op;
    facts.set(`operation ${id}`, `${method} ${path}`);
    facts.set(`operation ${id} deprecated`, deprecated === undefined ? 'no' : 'yes');
    // The first sentence after the heading is the operation's summary.
    const summary = /^(.*?\.)(\s|$)/.exec(s.lines.find((l) => l.trim() !== '')?.trim() ?? '');
    if (summary !== null) facts.set(`operation ${id} summary`, summary[1]!);
    const body = s.lines.map((l) => /Request body \((required|optional)\): (\w+), where (.*) are required\./.exec(l)).find((m) => m !== null);
    if (body) {
      facts.set(`operation ${id} request body`, `${body[2]}${body[1] === 'required' ? ', required' : ''}`);
      facts.set(`operation ${id} request body required fields`, [...body[3]!.matchAll(/`(\w+)`/g)].map((m) => m[1]).sort().join(', '));
    }
    const replacement = s.lines.map((l) => /the replacement is ([A-Z]+) (\S+)/.exec(l)).find((m) => m !== null);
    if (replacement) facts.set(`operation ${id} successor`, replacement[2]!);
    for (const table of tablesOf(s)) {
      const where = /^(Query|Path) parameters?:/.exec(table.intro);
      if (where !== null) {
        for (const row of table.rows) {
          const at = `operation ${id} ${where[1]!.toLowerCase()} parameter ${row.Name}`;
          facts.set(`${at} type`, row.Type!);
          facts.set(`${at} required`, row.Required!);
          facts.set(`${at} meaning`, row.Meaning!);
          if (row.Format !== undefined) facts.set(`${at} format`, row.Format);
          if (row.Constraints !== undefined) constraintFacts(facts, at, row.Constraints);
        }
      } else if (/^Responses:/.test(table.intro)) {
        for (const row of table.rows) {
          facts.set(`operation ${id} response ${row.Status} body`, row.Body!.split(' ')[0]!);
          facts.set(`operation ${id} response ${row.Status} condition`, row.Condition!);
        }
      }
    }
  }
  const errors = section(sections, /^Errors$/);
  for (const row of errors === undefined ? [] : (tablesOf(errors)[0]?.rows ?? [])) facts.set(`error ${row['HTTP status']} applies to`, row['Applies to']!);
  const limits = section(sections, /^Limits$/);
  for (const row of limits === undefined ? [] : (tablesOf(limits)[0]?.rows ?? [])) {
    const m = /^(\w+) parameter (default|minimum|maximum)$/.exec(row.Limit!);
    facts.set(m === null ? `limit ${row.Limit}` : `limit ${row['Applies to']} ${m[1]} ${m[2]}`, m === null ? 'not understood' : row.Value!);
  }
  const versioning = section(sections, /^Versioning$/)?.lines.join('\n') ?? '';
  const version = /The interface version is (\S+?);.*path prefix `([^`]+)`/.exec(versioning);
  if (version) {
    facts.set('version', version[1]!);
    facts.set('base path', version[2]!);
  }
  for (const m of versioning.matchAll(/([A-Z]+) (\S+) is deprecated and is removed on (\d{1,2}) (\w+) (\d{4})\./g)) {
    const month = String(MONTHS.indexOf(m[4]!) + 1).padStart(2, '0');
    facts.set(`sunset ${m[1]} ${m[2]}`, `${m[5]}-${month}-${m[3]!.padStart(2, '0')}`);
  }
  const auth = section(sections, /^Authentication$/)?.lines.join('\n') ?? '';
  const scheme = /Scheme: (HTTP \w+)\. Every operation requires it\./.exec(auth);
  if (scheme) facts.set('authentication', `${scheme[1]}, every operation`);
  return facts;
}

// ---------------------------------------------------------------- openapi/pet-store.yaml

const obj = (v: unknown): Doc => (typeof v === 'object' && v !== null ? (v as Doc) : {});
/** A description as the page's tables write it: no closing period, no code marks. */
const sentence = (v: unknown) => (typeof v === 'string' ? plain(v.replace(/\.$/, '')) : '');

/** A `$ref`'s name (`#/components/schemas/Pet` -> Pet), followed through components.responses. */
function refName(v: unknown): string | undefined {
  const ref = obj(v).$ref;
  return typeof ref === 'string' ? ref.split('/').at(-1) : undefined;
}

function resolve(doc: Doc, v: unknown): Doc {
  const ref = obj(v).$ref;
  return typeof ref === 'string' ? obj(getAt(doc, ref.slice(2).split('/'))) : obj(v);
}

function schemaFacts(doc: Doc, facts: Facts, name: string): void {
  const schema = obj(getAt(doc, ['components', 'schemas', name]));
  const required = (schema.required as string[] | undefined) ?? [];
  for (const [field, raw] of Object.entries(obj(schema.properties))) {
    if (raw === false) continue;
    const at = `schema ${name}.${field}`;
    const p = obj(raw);
    facts.set(`${at} type`, refName(p) ?? String(p.type));
    facts.set(`${at} format`, typeof p.format === 'string' ? p.format : '');
    facts.set(`${at} required`, required.includes(field) ? 'yes' : 'no');
    if (refName(p) === undefined) facts.set(`${at} meaning`, sentence(p.description));
  }
}

function documentFacts(doc: Doc): Facts {
  const facts: Facts = new Map();
  const enumOf = (v: unknown) => ((resolve(doc, v).enum as unknown[] | undefined) ?? []).map(String).join(', ');
  facts.set('schema PetStatus values', enumOf({ $ref: '#/components/schemas/PetStatus' }));
  for (const name of ['NewPet', 'Pet', 'Error']) schemaFacts(doc, facts, name);
  const pets = obj(getAt(doc, ['components', 'schemas', 'Pets']));
  facts.set('schema Pets', `${String(pets.type)} of ${refName(pets.items) ?? 'unnamed items'}`);
  facts.set('schema NewPet.id refused', getAt(doc, ['components', 'schemas', 'NewPet', 'properties', 'id']) === false ? 'yes' : 'no');
  facts.set('version', String(obj(doc.info).version));
  const basePath = String(obj((doc.servers as unknown[] | undefined)?.[0]).url);
  facts.set('base path', basePath);
  const statuses = new Map<string, string[]>();
  const operations: string[] = [];
  let everyOperationSecured = Array.isArray(doc.security) && doc.security.length > 0;
  for (const [path, item] of Object.entries(obj(doc.paths))) {
    for (const method of METHODS) {
      const op = obj(obj(item)[method]);
      if (Object.keys(op).length === 0) continue;
      const id = String(op.operationId);
      operations.push(id);
      if (op.security !== undefined) everyOperationSecured = false;
      facts.set(`operation ${id}`, `${method.toUpperCase()} ${path}`);
      facts.set(`operation ${id} deprecated`, op.deprecated === true ? 'yes' : 'no');
      facts.set(`operation ${id} summary`, String(op.summary));
      if (op.deprecated === true) {
        const sunset = op['x-sunset'];
        if (typeof sunset === 'string') facts.set(`sunset ${method.toUpperCase()} ${path}`, sunset.slice(0, 10));
        if (typeof op['x-successor'] === 'string') facts.set(`operation ${id} successor`, op['x-successor'].replace(basePath, ''));
      }
      const body = op.requestBody === undefined ? undefined : resolve(doc, op.requestBody);
      if (body !== undefined) {
        const schema = obj(obj(obj(body.content)['application/json']).schema);
        facts.set(`operation ${id} request body`, `${refName(schema)}${body.required === true ? ', required' : ''}`);
        facts.set(`operation ${id} request body required fields`, [...((resolve(doc, schema).required as string[] | undefined) ?? [])].sort().join(', '));
      }
      for (const raw of (op.parameters as unknown[] | undefined) ?? []) {
        const p = resolve(doc, raw);
        const at = `operation ${id} ${String(p.in)} parameter ${String(p.name)}`;
        const s = obj(p.schema);
        facts.set(`${at} type`, refName(s) ?? String(s.type));
        facts.set(`${at} required`, p.required === true ? 'yes' : 'no');
        facts.set(`${at} meaning`, sentence(p.description));
        if (p.in === 'path') facts.set(`${at} format`, typeof s.format === 'string' ? s.format : '');
        if (p.in !== 'query') continue;
        const r = resolve(doc, s);
        for (const k of ['minimum', 'maximum', 'default']) {
          if (r[k] === undefined) continue;
          facts.set(`${at} ${k}`, String(r[k]));
          facts.set(`limit ${id} ${String(p.name)} ${k}`, String(r[k]));
        }
        if (Array.isArray(r.enum)) facts.set(`${at} values`, enumOf(s));
      }
      for (const [status, raw] of Object.entries(obj(op.responses))) {
        const r = resolve(doc, raw);
        facts.set(`operation ${id} response ${status} body`, refName(obj(obj(obj(r.content)['application/json']).schema)) ?? 'none');
        facts.set(`operation ${id} response ${status} condition`, sentence(r.description));
        if (!status.startsWith('2')) statuses.set(status, [...(statuses.get(status) ?? []), id]);
      }
    }
  }
  for (const [status, ids] of statuses) facts.set(`error ${status} applies to`, ids.length === operations.length ? 'all operations' : ids.join(', '));
  const scheme = obj(obj(obj(doc.components).securitySchemes).bearer);
  if (everyOperationSecured) facts.set('authentication', `${String(scheme.type).toUpperCase()} ${String(scheme.scheme)}, every operation`);
  return facts;
}

// ---------------------------------------------------------------- the comparison

/** Every fact the two sides state differently, or that only one states: one line each. */
function disagreements(markdown: string, doc: Doc): string[] {
  const md = markdownFacts(markdown);
  const oa = documentFacts(doc);
  const out: string[] = [];
  for (const key of [...new Set([...md.keys(), ...oa.keys()])].sort()) {
    const [m, o] = [md.get(key), oa.get(key)];
    if (m === o) continue;
    if (m === undefined) out.push(`${key}: openapi/pet-store.yaml says ${JSON.stringify(o)}, docs/interface.md does not say it`);
    else if (o === undefined) out.push(`${key}: docs/interface.md says ${JSON.stringify(m)}, openapi/pet-store.yaml does not say it`);
    else out.push(`${key}: docs/interface.md says ${JSON.stringify(m)}, openapi/pet-store.yaml says ${JSON.stringify(o)}`);
  }
  return out;
}

const MARKDOWN = readFileSync(MARKDOWN_PATH, 'utf8');

t.test('docs/interface.md and openapi/pet-store.yaml agree', async (t) => {
  const md = markdownFacts(MARKDOWN);
  // The reading of the page found what it is meant to find: a page that lost its tables agrees with nothing.
  for (const key of [
    'schema PetStatus values',
    'schema NewPet.categoryId format',
    'schema Pet.id required',
    'schema Error.status type',
    'operation listPets query parameter limit maximum',
    'operation listPets query parameter status values',
    'operation getPet path parameter petId format',
    'operation createPet response 400 condition',
    'operation createPet request body',
    'limit listPets limit default',
    'sunset GET /pets/{petId}',
    'error 404 applies to',
    'authentication',
  ]) {
    t.ok(md.has(key), `docs/interface.md states ${key}`);
  }
  t.ok(md.size >= 60, `docs/interface.md states ${md.size} facts`);
  t.strictSame(disagreements(MARKDOWN, shippedDocument()), []);
});

t.test('a disagreement of each kind is found', async (t) => {
  const docCases: [string, (d: Doc) => void, RegExp][] = [
    ['a bound', (d) => setAt(d, ['paths', '/pets', 'get', 'parameters', 0, 'schema', 'maximum'], 50), /^limit listPets limit maximum: docs\/interface.md says "100", openapi\/pet-store.yaml says "50"$/],
    ['a default', (d) => setAt(d, ['paths', '/pets', 'get', 'parameters', 0, 'schema', 'default'], 10), /^operation listPets query parameter limit default: .* says "20", .* says "10"$/],
    ['a PetStatus value', (d) => setAt(d, ['components', 'schemas', 'PetStatus', 'enum'], ['available', 'pending']), /^schema PetStatus values: docs\/interface.md says "available, pending, sold"/],
    ['a field removed', (d) => deleteAt(d, ['components', 'schemas', 'Pet', 'properties', 'categoryId']), /^schema Pet.categoryId type: docs\/interface.md says "integer", openapi\/pet-store.yaml does not say it$/],
    ['a field added', (d) => setAt(d, ['components', 'schemas', 'Error', 'properties', 'detail'], { type: 'string', description: 'More.' }), /^schema Error.detail meaning: openapi\/pet-store.yaml says "More", docs\/interface.md does not say it$/],
    ['a required field', (d) => setAt(d, ['components', 'schemas', 'NewPet', 'required'], ['name']), /^operation createPet request body required fields: .* says "categoryId, name", .* says "name"$/],
    ['a format', (d) => setAt(d, ['components', 'schemas', 'Pet', 'properties', 'id', 'format'], 'int32'), /^schema Pet.id format: .* says "int64", .* says "int32"$/],
    ['a response', (d) => deleteAt(d, ['paths', '/pets/{petId}', 'get', 'responses', '404']), /^error 404 applies to: docs\/interface.md says "getPet", openapi\/pet-store.yaml does not say it$/],
    ['a response body', (d) => setAt(d, ['paths', '/pets', 'post', 'responses', '201', 'content', 'application/json', 'schema'], { $ref: '#/components/schemas/NewPet' }), /^operation createPet response 201 body: .* says "Pet", .* says "NewPet"$/],
    ['the sunset', (d) => setAt(d, ['paths', '/pets/{petId}', 'get', 'x-sunset'], '2031-12-05T00:00:00Z'), /^sunset GET \/pets\/\{petId\}: .* says "2030-12-05", .* says "2031-12-05"$/],
    ['the deprecation', (d) => deleteAt(d, ['paths', '/pets/{petId}', 'get', 'deprecated']), /^operation getPet deprecated: .* says "yes", .* says "no"$/],
    ['the successor', (d) => setAt(d, ['paths', '/pets/{petId}', 'get', 'x-successor'], '/v1/animals'), /^operation getPet successor: .* says "\/pets", .* says "\/animals"$/],
    ['an operation', (d) => deleteAt(d, ['paths', '/pets', 'post']), /^operation createPet: docs\/interface.md says "POST \/pets", openapi\/pet-store.yaml does not say it$/],
    ['a parameter required', (d) => setAt(d, ['paths', '/pets', 'get', 'parameters', 1, 'required'], true), /^operation listPets query parameter status required: .* says "no", .* says "yes"$/],
    ['the list', (d) => setAt(d, ['components', 'schemas', 'Pets', 'items'], { $ref: '#/components/schemas/NewPet' }), /^schema Pets: .* says "array of Pet", .* says "array of NewPet"$/],
    ['the version', (d) => setAt(d, ['info', 'version'], '1.1.0'), /^version: .* says "1.0.0", .* says "1.1.0"$/],
    ['NewPet id allowed', (d) => deleteAt(d, ['components', 'schemas', 'NewPet', 'properties', 'id']), /^schema NewPet.id refused: .* says "yes", .* says "no"$/],
  ];
  for (const [name, mutate, expected] of docCases) {
    const doc = shippedDocument();
    mutate(doc);
    const found = disagreements(MARKDOWN, doc);
    t.ok(found.some((line) => expected.test(line)), `the document changed (${name}): ${JSON.stringify(found)}`);
  }
  const markdownCases: [string, string, string, RegExp][] = [
    ['a PetStatus value', 'Allowed values: `available`, `pending`, `sold`.', 'Allowed values: `available`, `sold`.', /^schema PetStatus values: docs\/interface.md says "available, sold"/],
    ['a constraint', 'minimum 1, maximum 100, default 20', 'minimum 1, maximum 200, default 20', /^operation listPets query parameter limit maximum: docs\/interface.md says "200", openapi\/pet-store.yaml says "100"$/],
    ['a limit row', '| limit parameter maximum | listPets | 100 |', '| limit parameter maximum | listPets | 1000 |', /^limit listPets limit maximum: .* says "1000", .* says "100"$/],
    ['a field row', '| categoryId | integer | int64 | yes | Identifier of the category the animal belongs to |', '| categoryId | integer | int32 | yes | Identifier of the category the animal belongs to |', /^schema NewPet.categoryId format: .* says "int32", .* says "int64"$/],
    ['a response row', '| 404 | Error | The requested animal could not be found |', '', /^operation getPet response 404 body: openapi\/pet-store.yaml says "Error", docs\/interface.md does not say it$/],
    ['the removal date', 'is removed on 5 December 2030', 'is removed on 5 December 2031', /^sunset GET \/pets\/\{petId\}: .* says "2031-12-05", .* says "2030-12-05"$/],
    ['the deprecated mark', '### getPet: GET /pets/{petId}  (deprecated)', '### getPet: GET /pets/{petId}', /^operation getPet deprecated: .* says "no", .* says "yes"$/],
    ['an error row', '| 401 | all operations | API key missing or invalid |', '| 401 | listPets | API key missing or invalid |', /^error 401 applies to: .* says "listPets", .* says "all operations"$/],
  ];
  for (const [name, from, to, expected] of markdownCases) {
    t.ok(MARKDOWN.includes(from), `docs/interface.md has ${JSON.stringify(from)}`);
    const found = disagreements(MARKDOWN.replace(from, to), shippedDocument());
    t.ok(found.some((line) => expected.test(line)), `the page changed (${name}): ${JSON.stringify(found)}`);
  }
});
