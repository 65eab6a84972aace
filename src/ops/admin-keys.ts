/**
 * The key admin API on the admin listener (docs/keys.md): issue, rotate, revoke and list the keys
 * of the registry. Bearer-authenticated with admin tokens (src/ops/admin-tokens.ts: from
 * `server.admin.tokensFromEnv` and `server.admin.tokensFile`), held as SHA-256 digests and compared
 * in constant time against every token (no early exit); an API key is never an admin token.
 * Failed authentications are limited per address, logged and counted (src/ops/admin-guard.ts).
 * While no token is in force these routes do not exist (404, as any unknown admin path).
 *
 * - `POST /keys` {"id", "operations"?, "scopes"?, "expires"?, "owner"?, "contact"?} -> 201 {"id", "key", "created", "expires", "operations", "scopes", "owner", "contact", ...}
 * - `POST /keys/{id}/rotate` {"overlapSeconds"?} -> 200 {..., "key", "previousKeyValidUntil"}
 * - `PATCH /keys/{id}` {"owner"?: string|null, "contact"?: string|null} -> 200 {the key, as GET lists it} (null clears)
 * - `DELETE /keys/{id}` -> 204 (remembered among the registry's revocations, with the token's name)
 * - `GET /keys` -> 200 {"keys": [{"id", "created", "expires", "operations", "scopes", "owner", "contact", "lastUsed", "previousValidUntil"}]}
 *
 * A request is validated (Ajv) before anything changes, so bad input changes nothing. Every error is
 * in the interface's Error shape. Each change leaves one audit line (who, what, which id), never
 * the secret. Answers carry `Cache-Control: no-store`: a new secret must not rest in a cache.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Ajv } from 'ajv';
import { shippedApi } from '../api/index.js';
import { ERROR_CONTENT_TYPE, GatewayError, renderError } from '../core/errors.js';
import { SCOPES_SCHEMA } from '../core/policy.js';
import { ownerFieldsProblem } from '../core/key-owner.js';
import type { KeyRegistry } from '../registry/registry.js';
import { RegistryError, REGISTRY_DEFAULTS } from '../registry/types.js';
import { ID_PATTERN } from '../registry/records.js';
import { parseDateTime } from '../core/date-time.js';
import type { AdminRoutes } from './admin.js';
import { adminAuthenticator } from './admin-auth.js';
import type { AdminAuthGuard } from './admin-guard.js';
import type { AdminTokens } from './admin-tokens.js';

const BODY_LIMIT = 16 * 1024;
const JSON_TYPE = 'application/json; charset=utf-8';
const DATE_TIME = '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$';

const CREATE_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  required: ['id'],
  properties: {
    id: { type: 'string', pattern: ID_PATTERN },
    operations: { type: 'array', uniqueItems: true, items: { type: 'string', pattern: '^[A-Za-z][A-Za-z0-9_]{0,63}$' } },
    scopes: SCOPES_SCHEMA,
    expires: { type: 'string', pattern: DATE_TIME },
    // Their form (src/core/key-owner.ts) is checked after the schema, with its own message.
    owner: { type: 'string' },
    contact: { type: 'string' },
  },
} as const;

/** `PATCH /keys/{id}`: a string sets, null clears, an absent field stays. */
const PATCH_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: { owner: { type: ['string', 'null'] }, contact: { type: ['string', 'null'] } },
} as const;

const ROTATE_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: { overlapSeconds: { type: 'integer', minimum: 0, maximum: 31536000 } },
} as const;

const ajv = new Ajv({ allErrors: false, strict: true });
const validCreate = ajv.compile<{ id: string; operations?: string[]; scopes?: string[]; expires?: string; owner?: string; contact?: string }>(CREATE_SCHEMA);
const validPatch = ajv.compile<{ owner?: string | null; contact?: string | null }>(PATCH_SCHEMA);
const validRotate = ajv.compile<{ overlapSeconds?: number }>(ROTATE_SCHEMA);
const ID = new RegExp(ID_PATTERN);

export interface KeyAdminOptions {
  /** The admin tokens in force (replaced whole on a reload); none: the routes answer 404. */
  readonly tokens: AdminTokens;
  /** Limits, logs and counts failed authentications per address. */
  readonly guard: AdminAuthGuard;
  /** The registry, or undefined when the policy configures none. */
  readonly registry: () => KeyRegistry | undefined;
  /** Ids of the policy file's keys: the registry cannot issue one (the file's key would win). */
  readonly fileIds: () => ReadonlySet<string>;
  /** Where the audit lines go (info level); pino's logger fits. */
  readonly log: AuditLog | undefined;
  /** The operationIds of the interface in force: a key may name only these; the shipped interface's when absent. */
  readonly operations?: () => ReadonlySet<string>;
}

export interface AuditLog {
  info(fields: Record<string, unknown>, message: string): void;
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = body === undefined ? '' : JSON.stringify(body);
  res.writeHead(status, { 'cache-control': 'no-store', ...(body === undefined ? {} : { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(text) }) });
  res.end(text);
}

function sendError(res: ServerResponse, err: GatewayError): void {
  const text = renderError(err);
  res.writeHead(err.status, { ...err.headers, 'cache-control': 'no-store', 'content-type': ERROR_CONTENT_TYPE, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Reads a JSON body within the limit: the value, or the error to answer. Nothing read: undefined. */
async function readJson(req: IncomingMessage): Promise<{ value: unknown } | { error: GatewayError }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > BODY_LIMIT) return { error: new GatewayError('payload_too_large') };
    chunks.push(chunk);
  }
  if (size === 0) return { value: undefined };
  const type = (req.headers['content-type'] ?? '').split(';', 1)[0]?.trim().toLowerCase();
  if (type !== 'application/json') return { error: new GatewayError('unsupported_media_type') };
  try {
    return { value: JSON.parse(Buffer.concat(chunks).toString('utf8')) };
  } catch {
    return { error: new GatewayError('malformed_json') };
  }
}

function invalid(errors: ReadonlyArray<{ instancePath: string; message?: string | undefined }> | null | undefined): GatewayError {
  const e = errors?.[0];
  const where = e === undefined || e.instancePath === '' ? 'the body' : e.instancePath.slice(1).replace(/\//g, '.');
  return new GatewayError('invalid_request', { message: `The request is not valid: ${where} ${e?.message ?? 'is invalid'}.` });
}

/** A RegistryError as the client sees it (the one place reasons become statuses). */
function registryError(err: unknown): GatewayError {
  if (!(err instanceof RegistryError)) return new GatewayError('internal_error');
  switch (err.reason) {
    case 'exists':
      return new GatewayError('conflict', { message: 'A key with this id exists.' });
    case 'conflict':
      return new GatewayError('conflict', { message: 'The key was changed by another request at the same time; try again.' });
    case 'unknown':
      return new GatewayError('not_found', { message: err.hint === undefined ? 'No key with this id.' : `No key with this id in Redis, ${err.hint}.` });
    case 'invalid':
      return new GatewayError('invalid_request', { message: `The request is not valid: ${err.message}.` });
    default:
      return new GatewayError('service_unavailable', { message: 'The key registry (Redis) is not reachable; nothing was changed.', headers: { 'retry-after': '1' } });
  }
}

/**
 * The key routes, and the failed-authentication metric for /metrics.
 *
 * @example
 *   const tokens = new AdminTokens([{ name: 'PETSTORE_ADMIN_TOKENS#1', token }]);
 *   const keys = keyAdminRoutes({ tokens, guard: new AdminAuthGuard({ maxFailures: 10, windowSeconds: 60, log }),
 *     registry: () => reg, fileIds: () => new Set(), log });
 *   await startAdmin({ ..., routes: keys });
 */
export function keyAdminRoutes(options: KeyAdminOptions): AdminRoutes {
  const { tokens, guard } = options;
  const who = adminAuthenticator(tokens, guard);

  return {
    metrics: () => guard.metrics(),
    handle: async (req, res, path) => {
      if (tokens.size === 0) return false;
      const m = /^\/keys(?:\/([^/]+)(\/rotate)?)?\/?$/.exec(path);
      if (m === null) return false;
      const by = who(req);
      const answer = by instanceof GatewayError ? by : await decide(options, req, { id: m[1], rotate: m[2] !== undefined, by }).catch(registryError);
      if (answer instanceof GatewayError) sendError(res, answer);
      else send(res, answer.status, answer.body);
      return true;
    },
  };
}

/** What a key request gets: an error, or a status and a body (none for 204). */
type Answer = GatewayError | { readonly status: number; readonly body?: unknown };

interface Target {
  /** The path's id; undefined for /keys itself. */
  readonly id: string | undefined;
  readonly rotate: boolean;
  /** The name of the admin token that authenticated the request (`PETSTORE_ADMIN_TOKENS#2`). */
  readonly by: string;
}

/**
 * The decision for an authenticated key request: every check runs before the one change, so bad
 * input changes nothing. A RegistryError it throws is mapped by `registryError`.
 */
async function decide(options: KeyAdminOptions, req: IncomingMessage, { id, rotate, by }: Target): Promise<Answer> {
  const allow = id === undefined ? 'GET, POST' : rotate ? 'POST' : 'DELETE, PATCH';
  if (!allow.split(', ').includes(req.method ?? '')) return new GatewayError('method_not_allowed', { headers: { allow } });
  const registry = options.registry();
  if (registry === undefined) return new GatewayError('not_found', { message: 'No key registry is configured (policies.auth.registry).' });
  if (id !== undefined && !ID.test(id)) return registryError(new RegistryError('unknown', ''));
  const audit = (action: string, keyId: string, extra: Record<string, unknown> = {}) =>
    options.log?.info({ audit: 'keys', action, id: keyId, by, remoteAddress: req.socket.remoteAddress, ...extra }, `key ${action}`);
  if (req.method === 'GET') return { status: 200, body: { keys: await registry.list() } };
  if (id !== undefined && req.method === 'DELETE') {
    await registry.revoke(id, by);
    audit('revoked', id);
    return { status: 204 };
  }
  const body = await readJson(req);
  if ('error' in body) return body.error;
  if (id !== undefined && !rotate) {
    if (!validPatch(body.value)) return invalid(validPatch.errors);
    const patch = body.value;
    const problem = ownerFieldsProblem({ owner: patch.owner ?? undefined, contact: patch.contact ?? undefined });
    if (problem !== undefined) return invalid([{ instancePath: `/${problem.field}`, message: problem.message }]);
    const info = await registry.describe(id, patch);
    audit('updated', id, { fields: Object.keys(patch).sort() });
    return { status: 200, body: info };
  }
  if (id === undefined) {
    if (!validCreate(body.value)) return invalid(validCreate.errors);
    const input = body.value;
    if (input.expires !== undefined && Number.isNaN(parseDateTime(input.expires))) return invalid([{ instancePath: '/expires', message: 'is not a valid date' }]);
    const problem = ownerFieldsProblem(input);
    if (problem !== undefined) return invalid([{ instancePath: `/${problem.field}`, message: problem.message }]);
    if (options.fileIds().has(input.id)) return new GatewayError('conflict', { message: 'This id is a key of the policy file.' });
    const known = options.operations?.() ?? new Set(shippedApi().operations.map((o) => o.id));
    const unknown = (input.operations ?? []).findIndex((o) => !known.has(o));
    if (unknown >= 0) return invalid([{ instancePath: `/operations/${unknown}`, message: `is not an operation of the interface: ${[...known].join(', ')}` }]);
    const made = await registry.create(input);
    audit('created', input.id);
    return { status: 201, body: { ...made.info, key: made.key } };
  }
  const value = body.value ?? {};
  if (!validRotate(value)) return invalid(validRotate.errors);
  const overlap = value.overlapSeconds ?? REGISTRY_DEFAULTS.overlapSeconds;
  const made = await registry.rotate(id, overlap);
  audit('rotated', id, { overlapSeconds: overlap });
  return { status: 200, body: { ...made.info, key: made.key, previousKeyValidUntil: made.previousValidUntil } };
}
