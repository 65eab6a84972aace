/**
 * Reads a policy file (YAML or JSON), validates it against the policy file schema and the cross-field
 * rules of every policy module, and returns a frozen config with every default filled in, or every
 * problem at once, each with its JSON path and a plain message.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve as resolvePath } from 'node:path';
import { loadInterface, shippedApi, type Api } from '../api/index.js';
import { Ajv, type ErrorObject } from 'ajv';
import { parseDocument } from 'yaml';
import { checkHeaderRules } from '../core/headers.js';
import { listenerProblems } from '../fronts/config.js';
import { toJsonPath } from '../core/json-path.js';
import { CONTACT_EXPECTS, CONTACT_PATTERN, OWNER_EXPECTS, OWNER_PATTERN } from '../core/key-owner.js';
import type { CheckContext, PolicyEnv, PolicyModule, Problem, RunRequirement } from '../core/policy.js';
import { POLICY_MODULES, type PolicyName } from '../policies/index.js';
import { migrationProblems } from '../migration/rules.js';
import type { MigrationConfig } from '../migration/schema.js';
import type { TracesSection } from '../telemetry/schema.js';
import { tracesSectionProblems } from '../telemetry/settings.js';
import { policyFileSchema } from './schema.js';
import type { PolicyConfig } from './types.js';

export type LoadResult =
  | { readonly ok: true; readonly config: PolicyConfig }
  | { readonly ok: false; readonly problems: readonly Problem[] };

let validator: ReturnType<Ajv['compile']> | undefined;
function validate(value: unknown) {
  validator ??= new Ajv({ allErrors: true, useDefaults: true, verbose: true, strict: true }).compile(policyFileSchema());
  const ok = validator(value);
  return ok ? [] : (validator.errors ?? []);
}

export { toJsonPath };

/**
 * What a `pattern` expects, said the way a user reads it ("has the wrong format"
 * is not enough). Keyed by the pattern text of the schemas; a pattern missing here is described by
 * the pattern itself, so every message still says what was expected.
 */
const PATTERN_EXPECTS: Readonly<Record<string, string>> = {
  '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$':
    'must be an RFC 3339 date-time with a zone, such as 2030-12-05T00:00:00Z',
  '^(builtin|https?://[^\\s?#/@]+(/[^\\s?#]*)?)$':
    'must be "builtin" or an http(s) base URL without user:password@, query or fragment, ending with the /v1 prefix, such as http://127.0.0.1:8081/v1 (an upstream credential goes in policies.auth.upstreamAuthorization)',
  '^sha256:[0-9a-f]{64}$': 'must be "sha256:" and 64 lower-case hex digits, as `petstore-gateway hash-key` prints it',
  '^[A-Za-z_][A-Za-z0-9_]*$': 'must be an environment variable name such as PETSTORE_API_KEYS (letters, digits and _, not starting with a digit)',
  '^[^\\s<>"]+$': 'must be a URI reference without spaces, <, > or ", such as /v1/pets or https://example.com/doc',
  '^[a-z]+/[a-z0-9.+-]+$': 'must be a lower-case media type such as text/html',
  '^[\\x20-\\x21\\x23-\\x5b\\x5d-\\x7e]{1,64}$': 'must be 1 to 64 printable ASCII characters without " or \\',
  '^[1-5][0-9]{2}$': 'must be an HTTP status code of three digits, such as 422',
  '^[A-Za-z0-9:._-]+$': 'must be a scope: letters, digits, ":", ".", "_" and "-", such as migration:tester',
  [OWNER_PATTERN]: OWNER_EXPECTS,
  [CONTACT_PATTERN]: CONTACT_EXPECTS,
  '^https?://[^\\s/?#@]+([/?][^\\s#]*)?$':
    "must be an http(s) URL without user:password@ or fragment, such as http://collector:4318/v1/traces (a collector's API key goes in OTEL_EXPORTER_OTLP_HEADERS)",
};

function describe(e: ErrorObject): Problem {
  const path = toJsonPath(e.instancePath);
  const hint = typeof e.parentSchema?.description === 'string' ? `: ${e.parentSchema.description}` : '';
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'additionalProperties':
      return { path: toJsonPath(`${e.instancePath}/${String(p.additionalProperty)}`), message: `unknown property '${String(p.additionalProperty)}'` };
    case 'required':
      return { path, message: `missing required property '${String(p.missingProperty)}'` };
    case 'type':
      return { path, message: `must be ${String(p.type).replace(',', ' or ')}` };
    case 'enum':
      return { path, message: `must be one of: ${(p.allowedValues as unknown[]).map(String).join(', ')}` };
    case 'const':
      return { path, message: `must be ${JSON.stringify(p.allowedValue)}` };
    case 'pattern': {
      const expects = PATTERN_EXPECTS[String(p.pattern)];
      return { path, message: expects ?? `must match /${String(p.pattern)}/${hint}` };
    }
    case 'oneOf':
      return { path, message: `is not any of the accepted forms${hint}` };
    case 'minimum':
    case 'maximum':
      return { path, message: `must be ${p.comparison} ${String(p.limit)}` };
    case 'minLength':
      return { path, message: `must not be empty` };
    case 'maxLength':
      return { path, message: `must be at most ${String(p.limit)} characters` };
    default:
      return { path, message: e.message ?? 'is not valid' };
  }
}

/** Ajv reports each failed branch of a oneOf, then the oneOf itself: keep the one clear line. */
function schemaProblems(errors: readonly ErrorObject[]): Problem[] {
  const oneOfPaths = errors.filter((e) => e.keyword === 'oneOf').map((e) => e.instancePath);
  const kept = errors.filter(
    (e) => e.keyword === 'oneOf' || !oneOfPaths.some((p) => e.instancePath === p || e.instancePath.startsWith(p + '/')),
  );
  const seen = new Set<string>();
  const out: Problem[] = [];
  for (const e of kept) {
    const problem = describe(e);
    const key = problem.path + '\0' + problem.message;
    if (!seen.has(key)) {
      seen.add(key);
      out.push(problem);
    }
  }
  return out;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/** What the command line may set over a policy file; validated with the file. */
export interface Overrides {
  readonly upstreamUrl?: string | undefined;
  readonly host?: string | undefined;
  readonly port?: number | string | undefined;
  /** `serve --admin-host`/`--admin-port`: carried for the admin listener (applied where it is wired). */
  readonly adminHost?: string | undefined;
  readonly adminPort?: number | undefined;
}

/**
 * What a running gateway needs beyond a valid file. `serve` refuses a config that accepts no API key
 * (every request would be 401); `check` runs the same rule so it fails exactly when `serve` would.
 * `'ephemeral-allowed'`: `serve --ephemeral-key` may make a key for the run,
 * which works only when `auth.keysFromEnv` names a variable to put it in.
 */
export interface LoadOptions {
  readonly keys?: RunRequirement;
  /**
   * `json`: the text is parsed as strict JSON (RFC 8259), as a `.json` file's reader expects; a
   * YAML parser would accept trailing commas and comments that every other JSON tool refuses.
   * `yaml` (default): YAML 1.2, of which JSON is a subset.
   */
  readonly format?: 'json' | 'yaml';
  /** The folder a relative `interface:` path is read from: the policy file's; the working directory when absent. */
  readonly baseDir?: string;
}

/** The format a policy file is read in, from its name: `.json` is strict JSON, anything else YAML. */
export function formatOf(file: string): 'json' | 'yaml' {
  return /\.json$/i.test(file) ? 'json' : 'yaml';
}

function applyOverrides(value: Record<string, unknown>, o: Overrides): void {
  // A section that is absent is created; one that is not a mapping is left for validation to report.
  const set = (name: string, key: string, v: unknown): void => {
    if (value[name] === undefined) value[name] = {};
    const s = value[name];
    if (s !== null && typeof s === 'object' && !Array.isArray(s)) (s as Record<string, unknown>)[key] = v;
  };
  if (o.upstreamUrl !== undefined) set('upstream', 'url', o.upstreamUrl);
  if (o.host !== undefined) set('server', 'host', o.host);
  if (o.port !== undefined) set('server', 'port', o.port);
  if (o.adminHost !== undefined || o.adminPort !== undefined) {
    // The flags turn the admin listener on even where the file turned it off (`admin: null`).
    if (value.server === undefined) value.server = {};
    const server = value.server;
    if (isMapping(server)) {
      const admin = isMapping(server.admin) ? server.admin : {};
      if (o.adminHost !== undefined) admin.host = o.adminHost;
      if (o.adminPort !== undefined) admin.port = o.adminPort;
      server.admin = admin;
    }
  }
}

const isMapping = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** `$.a.b` relates to `$.a.b[0].c` and to `$.a`: one is the other or contains it. */
function related(a: string, b: string): boolean {
  const within = (inner: string, outer: string) => inner === outer || inner.startsWith(outer + '.') || inner.startsWith(outer + '[');
  return within(a, b) || within(b, a);
}

/**
 * One module's cross-field rules over its section. The section has been through Ajv (defaults
 * filled) but may still hold schema errors, so it is the module's config only as far as the schema
 * passed (`context.accepted` says whether it did): the cast says that, and the caller skips a rule
 * that trips over a value of the wrong type. Generic in the name so the module and its config type
 * stay paired (see `createPolicy`, src/gateway.ts).
 */
function checkSection<K extends PolicyName>(
  m: PolicyModule<PolicyConfig['policies'][K], K>,
  section: Record<string, unknown>,
  path: string,
  env: PolicyEnv,
  context: CheckContext,
): readonly Problem[] {
  if (m.check === undefined) return [];
  // A mapping the schema may have refused: `check` reads its fields defensively, the caller catches
  // a throw and drops problems under a path the schema already reported.
  return m.check(section as unknown as PolicyConfig['policies'][K], path, env, context);
}

/**
 * Every module's cross-field rules, in the chain's order, on the sections that are mappings. A
 * rule that trips over a value of the wrong type is skipped (that value is reported already), and a
 * problem about a value the schema already blamed (e.g. "is not a valid date" after "must be an
 * RFC 3339 date-time") is dropped.
 */
function policyProblems(policies: Record<string, unknown>, env: PolicyEnv, run: RunRequirement, schemaPaths: readonly string[]): Problem[] {
  const problems: Problem[] = [];
  for (const m of POLICY_MODULES) {
    const section = policies[m.name];
    if (!isMapping(section)) continue;
    const path = toJsonPath(`/policies/${m.name}`);
    const context: CheckContext = { policies, accepted: !schemaPaths.some((s) => related(s, path)), run };
    let found: readonly Problem[];
    try {
      found = checkSection(m, section, path, env, context);
    } catch {
      continue;
    }
    problems.push(...found.filter((f) => !schemaPaths.some((s) => related(f.path, s))));
  }
  return problems;
}

/** The document of a policy file's text, or its syntax problems: strict JSON for `.json`, else YAML. */
function parseText(text: string, format: 'json' | 'yaml'): { value: unknown } | { problems: Problem[] } {
  if (format === 'json') {
    try {
      return { value: JSON.parse(text) as unknown };
    } catch (err) {
      return { problems: [{ path: '$', message: `not valid JSON (a .json file is read as strict JSON: no comments or trailing commas): ${(err as Error).message}` }] };
    }
  }
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    return {
      problems: doc.errors.map((e) => ({
        path: '$',
        message: `not valid YAML or JSON${e.linePos ? ` at line ${e.linePos[0].line}, column ${e.linePos[0].col}` : ''}: ${(e.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '')}`,
      })),
    };
  }
  return { value: doc.toJS() ?? {} };
}

/**
 * The `upstream.url` a policy text itself writes (before any default or override), or undefined
 * when it writes none; for a text that does not parse, undefined too (validation reports it).
 */
export function upstreamUrlWritten(text: string, format: 'json' | 'yaml' = 'yaml'): unknown {
  const parsed = parseText(text, format);
  if ('problems' in parsed || !isMapping(parsed.value) || !isMapping(parsed.value.upstream)) return undefined;
  return parsed.value.upstream.url;
}

/** Validates the text of a policy file. Pure: reads nothing but its arguments. */
export function parsePolicy(text: string, env: PolicyEnv, overrides: Overrides = {}, options: LoadOptions = {}): LoadResult {
  const parsed = parseText(text, options.format ?? 'yaml');
  if ('problems' in parsed) return { ok: false, problems: parsed.problems };
  const value = parsed.value;
  if (!isMapping(value)) {
    return { ok: false, problems: [{ path: '$', message: 'a policy file must be a mapping (an object)' }] };
  }
  applyOverrides(value, overrides);
  // Ajv fills defaults as it goes, also in a section that has errors, so the cross-field rules
  // below see complete sections.
  const errors = validate(value);
  const problems = schemaProblems(errors);
  // Every problem in one pass: the cross-field rules (date order, duplicate keys...) run also on a
  // section with schema errors.
  const schemaPaths = problems.map((p) => p.path);
  // The interface first: the policies' own rules read it (a key's operations are the document's).
  const api = interfaceOf(value.interface, options.baseDir, problems);
  if (isMapping(value.policies)) problems.push(...policyProblems(value.policies, { ...env, api }, options.keys ?? 'not-checked', schemaPaths));
  // Header names the gateway never forwards, and trusted proxies proxy-addr cannot parse.
  const v = value as { headers?: unknown; server?: unknown };
  const clean = (pointer: string) => !errors.some((e) => e.instancePath === pointer || e.instancePath.startsWith(pointer + '/'));
  problems.push(...checkHeaderRules({ headers: clean('/headers') ? v.headers : undefined, server: clean('/server/trustedProxies') ? v.server : undefined }));
  if (isMapping(v.server) && clean('/server')) problems.push(...listenerProblems(v.server));
  const m = (value as { migration?: unknown; upstream?: { url?: unknown } }).migration;
  if (isMapping(m) && clean('/migration') && clean('/upstream')) problems.push(...migrationProblems(m as unknown as MigrationConfig, api, String((value as { upstream?: { url?: unknown } }).upstream?.url)));
  const traces = (value as { telemetry?: { traces?: unknown } }).telemetry?.traces;
  // As a policy's `check`: also beside schema errors, less what is about a value already blamed.
  if (isMapping(traces)) problems.push(...tracesSectionProblems(traces as TracesSection).filter((p) => !schemaPaths.some((s) => related(p.path, s))));
  if (problems.length > 0) return { ok: false, problems };
  // No problem at all: the schema and every cross-field check accepted the whole document.
  const config = value as unknown as PolicyConfig;
  // The compiled interface rides along, not enumerable: the config stays the file's data.
  Object.defineProperty(config, 'api', { value: api, enumerable: false });
  return { ok: true, config: deepFreeze(config) };
}

/**
 * The interface the policy file names (`interface:`, relative to the policy file's folder),
 * compiled, or the shipped one; its problems are named under `$.interface` with the document's
 * own JSON path.
 */
function interfaceOf(path: unknown, baseDir: string | undefined, problems: Problem[]): Api {
  if (typeof path !== 'string') return shippedApi();
  const r = loadInterface(resolvePath(baseDir ?? process.cwd(), path));
  if (r.ok) return r.api;
  for (const p of r.problems) problems.push({ path: '$.interface', message: `${path}: ${p.path}: ${p.message}` });
  return shippedApi();
}

/** The text of a policy file, or the one problem of reading it. */
export function readPolicyText(file: string): { ok: true; text: string } | { ok: false; problems: readonly Problem[] } {
  try {
    return { ok: true, text: readFileSync(file, 'utf8') };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    return { ok: false, problems: [{ path: '$', message: `cannot read the file (${code})` }] };
  }
}

/** Reads and validates a policy file: the one path `serve`, `check` and a reload go through. */
export function loadPolicyFile(file: string, env: PolicyEnv, overrides: Overrides = {}, options: LoadOptions = {}): LoadResult {
  const read = readPolicyText(file);
  if (!read.ok) return read;
  return parsePolicy(read.text, env, overrides, { format: formatOf(file), baseDir: dirname(file), ...options });
}

/** One line per problem, as the CLI prints them: `FILE: PATH: MESSAGE`. */
export function formatProblems(file: string, problems: readonly Problem[]): string {
  return problems.map((p) => `${file}: ${p.path}: ${p.message}`).join('\n');
}
