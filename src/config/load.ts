/**
 * Reads a policy file (YAML or JSON), validates it against the policy file schema and the cross-field
 * rules of every policy module, and returns a frozen config with every default filled in, or every
 * problem at once, each with its JSON path and a plain message.
 */
import { readFileSync } from 'node:fs';
import { Ajv, type ErrorObject } from 'ajv';
import { parseDocument } from 'yaml';
import { checkHeaderRules } from '../core/headers.js';
import type { PolicyEnv, Problem } from '../core/policy.js';
import { POLICY_MODULES } from '../policies/index.js';
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

/** `/policies/auth/keys/0/hash` -> `$.policies.auth.keys[0].hash` */
export function toJsonPath(pointer: string): string {
  if (pointer === '') return '$';
  return (
    '$' +
    pointer
      .slice(1)
      .split('/')
      .map((seg) => seg.replace(/~1/g, '/').replace(/~0/g, '~'))
      .map((seg) => (/^\d+$/.test(seg) ? `[${seg}]` : /^[A-Za-z_$][\w$]*$/.test(seg) ? `.${seg}` : `[${JSON.stringify(seg)}]`))
      .join('')
  );
}

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
    case 'pattern':
      return { path, message: `has the wrong format${hint}` };
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
}

/** Validates the text of a policy file. Pure: reads nothing but its arguments. */
export function parsePolicy(text: string, env: PolicyEnv, overrides: Overrides = {}): LoadResult {
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
  if (doc.errors.length > 0) {
    return {
      ok: false,
      problems: doc.errors.map((e) => ({
        path: '$',
        message: `not valid YAML or JSON${e.linePos ? ` at line ${e.linePos[0].line}, column ${e.linePos[0].col}` : ''}: ${e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '')}`,
      })),
    };
  }
  const value: unknown = doc.toJS() ?? {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return { ok: false, problems: [{ path: '$', message: 'a policy file must be a mapping (an object)' }] };
  }
  applyOverrides(value as Record<string, unknown>, overrides);
  const errors = validate(value);
  const problems = schemaProblems(errors);
  // Cross-field rules run on every policy section the schema accepted, so one run reports all.
  const policies = (value as { policies?: unknown }).policies;
  if (policies !== null && typeof policies === 'object' && !Array.isArray(policies)) {
    for (const m of POLICY_MODULES) {
      const pointer = `/policies/${m.name}`;
      const section = (policies as Record<string, unknown>)[m.name];
      if (m.check && section !== undefined && !errors.some((e) => e.instancePath === pointer || e.instancePath.startsWith(pointer + '/'))) {
        problems.push(...m.check(section, toJsonPath(pointer), env));
      }
    }
  }
  // Header names the gateway never forwards, and trusted proxies proxy-addr cannot parse.
  const v = value as { headers?: unknown; server?: unknown };
  const clean = (pointer: string) => !errors.some((e) => e.instancePath === pointer || e.instancePath.startsWith(pointer + '/'));
  problems.push(...checkHeaderRules({ headers: clean('/headers') ? v.headers : undefined, server: clean('/server/trustedProxies') ? v.server : undefined }));
  if (problems.length > 0) return { ok: false, problems };
  const config = value as PolicyConfig;
  return { ok: true, config: deepFreeze(config) };
}

/** Reads and validates a policy file. */
export function loadPolicyFile(file: string, env: PolicyEnv, overrides: Overrides = {}): LoadResult {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    return { ok: false, problems: [{ path: '$', message: `cannot read the file (${code})` }] };
  }
  return parsePolicy(text, env, overrides);
}

/** One line per problem, as the CLI prints them: `FILE: PATH: MESSAGE`. */
export function formatProblems(file: string, problems: readonly Problem[]): string {
  return problems.map((p) => `${file}: ${p.path}: ${p.message}`).join('\n');
}
