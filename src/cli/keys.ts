/**
 * `petstore-gateway keys create|list|rotate|revoke`: the key registry from the command line, the
 * same operations as the admin API (src/ops/admin-keys.ts); `keys export|import|reset-epoch`: its
 * backup and what an operator does after Redis lost its data (docs/keys.md). The registry is the
 * one the policy file names (`policies.auth.registry`, `--policy FILE`).
 *
 * A new secret is printed once, alone on one stdout line (so `KEY=$(petstore-gateway keys create
 * ...)` captures exactly it); everything else goes to stderr. The secret is never stored or logged.
 */
import { parseArgs } from 'node:util';
import { existsSync, readFileSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import { join } from 'node:path';
import { shippedApi } from '../api/index.js';
import { formatProblems, loadPolicyFile } from '../config/load.js';
import type { PolicyConfig } from '../config/types.js';
import type { Logger } from 'pino';
import { combineRoutes, type AdminRoutes } from '../ops/admin.js';
import { migrationAdminRoutes } from '../ops/admin-migration.js';
import { ADMIN_BRUTE_FORCE_DEFAULT, AdminAuthGuard } from '../ops/admin-guard.js';
import { keyAdminRoutes } from '../ops/admin-keys.js';
import { liveAdminTokens } from './admin.js';
import type { AdminTokens } from '../ops/admin-tokens.js';
import { KeyRegistry } from '../registry/registry.js';
import { EXPORT_FORMAT, RegistryError, REGISTRY_DEFAULTS, type NewKeyInput } from '../registry/types.js';
import { openRegistry } from '../registry/index.js';
import { ID_PATTERN, parseRecord, type KeyInfo, type KeyRecord } from '../registry/records.js';
import { describeConnection } from '../stores/connection.js';
import { SCOPES_SCHEMA } from '../core/policy.js';
import { ownerFieldsProblem } from '../core/key-owner.js';
import type { OwnerPatch } from '../registry/who-to-tell.js';
import { parseDateTime } from '../policies/deprecation/index.js';

export const KEYS_HELP = `Usage: petstore-gateway keys create --id ID [--operations OP,...] [--scope S]... [--expires RFC3339] [--owner TEXT] [--contact C] [--policy FILE]
       petstore-gateway keys set ID [--owner TEXT | --clear-owner] [--contact C | --clear-contact] [--policy FILE]
       petstore-gateway keys list [--json] [--policy FILE]
       petstore-gateway keys rotate ID [--overlap 24h] [--policy FILE]
       petstore-gateway keys revoke ID [--policy FILE]
       petstore-gateway keys export [--policy FILE] > backup.json
       petstore-gateway keys import FILE|- [--policy FILE]
       petstore-gateway keys reset-epoch [--policy FILE]

Issue, list, rotate and revoke the keys of the key registry that the policy file names
(policies.auth.registry); every gateway sharing it sees a change within a second.
  create    a key for a new id; the secret is printed once, alone on one stdout line
  set       changes who to tell about a key: its owner and contact (--clear-owner,
            --clear-contact remove them)
  list      id, created, expires, operations, scopes, last used, until when older secrets work,
            owner, contact (never a secret or a hash)
  rotate    a new secret for the id; every older secret stays valid for --overlap at most
            (default 24h; 0: every older secret ends now, as for a leaked key)
  revoke    removes the id and all its secrets (the registry remembers the last 100 revocations,
            with who revoked each)
  export    every key record (hashes only, never a secret) as JSON on stdout: a backup
  import    writes the records of an export back (each replaces its id's) and makes every gateway
            take Redis as the registry again: the restore after Redis lost its data
  reset-epoch  accepts what Redis holds now as the registry after a data loss that will not be
            restored: every gateway drops the keys it kept that Redis no longer has
  --policy FILE   the policy file (default: ./policies/default.yaml, else the packaged one)
  --operations    comma-separated operationIds the key may call (listPets, createPet, getPet)
  --scope S       a scope of the key (repeatable), such as migration:tester (docs/keys.md, "Scopes")
  --expires T     when the key stops working (RFC 3339)
  --owner TEXT    who the key belongs to: 1 to 100 printable characters, such as "Payments team"
  --contact C     where to reach the owner: an e-mail address, an https:// or mailto: URL, or a
                  chat handle (@team, #channel); neither may look like a secret (docs/keys.md)
Exit codes: 0 ok, 1 registry unreachable or the change refused, 2 bad usage, 78 no registry configured.
`;

/** An operationId (the interface document's rule); whether the interface has it is checked once the policy is read. */
const OPERATION_ID = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

/** Refuses an operation the interface does not have (`known`: its operationIds), or, before the policy is read, one that is no operationId. */
function checkOperations(operations: readonly unknown[], known: ReadonlySet<string> | 'any-id', what: (o: string) => string): void {
  for (const o of operations) {
    if (typeof o !== 'string' || !OPERATION_ID.test(o) || (known !== 'any-id' && !known.has(o))) {
      throw new KeysUsageError(`${what(String(o))}${known === 'any-id' ? '' : `: the interface has ${[...known].join(', ')}`}`);
    }
  }
}

const SCOPE = new RegExp(SCOPES_SCHEMA.items.pattern);

/** Refuses a scope out of SCOPES_SCHEMA's form, and more distinct scopes than it allows. */
function checkScopes(scopes: readonly unknown[], what: (s: string) => string): void {
  for (const s of scopes) {
    if (typeof s !== 'string' || !SCOPE.test(s) || s.length > SCOPES_SCHEMA.items.maxLength) throw new KeysUsageError(`${what(String(s))}: a scope is 1 to 64 letters, digits, ':', '.', '_' or '-'`);
  }
  if (new Set(scopes).size > SCOPES_SCHEMA.maxItems) throw new KeysUsageError(`a key has at most ${SCOPES_SCHEMA.maxItems} scopes`);
}

/** The operationIds of the shipped interface: what a key may name when no policy says otherwise. */
function shippedOperationIds(): ReadonlySet<string> {
  return new Set(shippedApi().operations.map((o) => o.id));
}
const DATE_TIME = /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$/;

/** A usage problem: the caller prints it with the command's help pointer (exit 2). */
export class KeysUsageError extends Error {}

/** `90`, `90s`, `30m`, `24h`, `7d` to seconds; undefined when not one of these. */
export function parseDuration(text: string): number | undefined {
  const m = /^([0-9]{1,9})([smhd]?)$/.exec(text);
  if (m === null) return undefined;
  const unit = { '': 1, s: 1, m: 60, h: 3600, d: 86400 }[m[2] as '' | 's' | 'm' | 'h' | 'd'];
  const seconds = Number(m[1]) * unit;
  return seconds <= 31536000 ? seconds : undefined;
}

function defaultPolicyFile(packageRoot: string): string {
  const local = join(process.cwd(), 'policies', 'default.yaml');
  return existsSync(local) ? local : join(packageRoot, 'policies', 'default.yaml');
}

const HEADER = ['ID', 'CREATED', 'EXPIRES', 'OPERATIONS', 'SCOPES', 'LAST USED', 'OLD SECRETS UNTIL', 'OWNER', 'CONTACT'];

function table(keys: readonly KeyInfo[]): string {
  const rows = [
    HEADER,
    ...keys.map((k) => [k.id, k.created, k.expires ?? '-', k.operations === null ? 'all' : k.operations.join(',') || '(none)', k.scopes?.join(',') || '-', k.lastUsed ?? '-', k.previousValidUntil ?? '-', k.owner ?? '-', k.contact ?? '-']),
  ];
  const widths = HEADER.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  return rows.map((r) => r.map((cell, c) => cell.padEnd(widths[c] ?? 0)).join('  ').trimEnd()).join('\n') + '\n';
}

interface Parsed {
  readonly action: string;
  readonly values: Record<string, string | string[] | boolean | undefined>;
  /** '' for the actions of NO_ID and import: every other action requires an id (parseKeysArgs). */
  readonly id: string;
  /** `keys import FILE`: the export to read ('-': stdin). */
  readonly file?: string | undefined;
}

const ACTIONS = ['create', 'set', 'list', 'rotate', 'revoke', 'export', 'import', 'reset-epoch'];
/** The actions that take no id and no file. */
const NO_ID = ['list', 'export', 'reset-epoch'];

/** The records of an export file (`keys export`), checked before anything is written. */
export function readExport(text: string, known: ReadonlySet<string> | 'any-id' = shippedOperationIds()): KeyRecord[] {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new KeysUsageError('the file to import is not JSON: give the output of keys export');
  }
  const e = v as { format?: unknown; records?: unknown };
  if (typeof v !== 'object' || v === null || e.format !== EXPORT_FORMAT || !Array.isArray(e.records)) {
    throw new KeysUsageError(`the file to import is not a keys export (format "${EXPORT_FORMAT}", records [...])`);
  }
  const id = new RegExp(ID_PATTERN);
  const records = e.records.map((r: unknown, i: number) => {
    const record = parseRecord(JSON.stringify(r));
    if (record === undefined || !id.test(record.id)) throw new KeysUsageError(`record ${i + 1} of the file to import is not a key record (id, created, secrets: [{hash: sha256:...}])`);
    // What a gateway reads of it must mean what it says: a date it cannot read would never expire.
    const dates = [record.created, ...(record.expires === undefined ? [] : [record.expires])];
    if (dates.some((d) => typeof d !== 'string' || !DATE_TIME.test(d) || Number.isNaN(parseDateTime(d)))) throw new KeysUsageError(`record ${i + 1} ('${record.id}') has a date that is not RFC 3339`);
    if (record.operations !== undefined) {
      if (!Array.isArray(record.operations)) throw new KeysUsageError(`record ${i + 1} ('${record.id}') has operations that are not a list`);
      checkOperations(record.operations, known, (o) => `record ${i + 1} ('${record.id}') names an operation the interface does not have, '${o}'`);
    }
    if (record.scopes !== undefined) {
      if (!Array.isArray(record.scopes)) throw new KeysUsageError(`record ${i + 1} ('${record.id}') has scopes that are not a list`);
      checkScopes(record.scopes, (sc) => `record ${i + 1} ('${record.id}') has a scope that is not one, '${sc}'`);
    }
    const who = ownerFieldsProblem(record);
    if (who !== undefined) throw new KeysUsageError(`record ${i + 1} ('${record.id}'): ${who.field} ${who.message}`);
    if (record.secrets.some((sec) => sec.until !== undefined && !Number.isSafeInteger(sec.until))) throw new KeysUsageError(`record ${i + 1} ('${record.id}') has a secret whose end is not epoch milliseconds`);
    return record;
  });
  refuseRepeats(records);
  return records;
}

/**
 * An id twice would store one record of two; a hash under two ids would authenticate its key as
 * whichever a gateway met first (perhaps the broader one). Either refuses the whole file.
 */
function refuseRepeats(records: readonly KeyRecord[]): void {
  const ids = new Set<string>();
  const hashes = new Map<string, string>();
  for (const r of records) {
    if (ids.has(r.id)) throw new KeysUsageError(`the file to import has the id '${r.id}' twice; nothing was imported`);
    ids.add(r.id);
    for (const sec of r.secrets) {
      const other = hashes.get(sec.hash);
      if (other !== undefined && other !== r.id) throw new KeysUsageError(`the file to import has one secret hash under two records ('${other}', '${r.id}'); nothing was imported`);
      hashes.set(sec.hash, r.id);
    }
  }
}

function parseKeysArgs(args: string[]): Parsed {
  const [action, ...rest] = args;
  if (action === undefined || !ACTIONS.includes(action)) {
    throw new KeysUsageError(action === undefined ? `keys needs an action: ${ACTIONS.join(', ')}` : `unknown keys action '${action}'`);
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: rest,
      allowPositionals: true,
      strict: true,
      options: {
        policy: { type: 'string' },
        id: { type: 'string' },
        operations: { type: 'string' },
        scope: { type: 'string', multiple: true },
        expires: { type: 'string' },
        overlap: { type: 'string' },
        json: { type: 'boolean' },
        owner: { type: 'string' },
        contact: { type: 'string' },
        'clear-owner': { type: 'boolean' },
        'clear-contact': { type: 'boolean' },
      },
    });
  } catch (err) {
    throw new KeysUsageError((err as Error).message);
  }
  const values = parsed.values as Record<string, string | string[] | boolean | undefined>;
  checkOwnerOptions(action, values);
  if (action === 'import') {
    if (parsed.positionals.length !== 1) throw new KeysUsageError('keys import needs one FILE (an export), or - for stdin');
    return { action, values, id: '', file: parsed.positionals[0] };
  }
  if (NO_ID.includes(action)) {
    if (parsed.positionals.length > 0) throw new KeysUsageError(`unexpected argument '${parsed.positionals[0]}'`);
    return { action, values, id: '' };
  }
  const wantsPositional = action === 'rotate' || action === 'revoke' || action === 'set';
  if (parsed.positionals.length > (wantsPositional ? 1 : 0)) throw new KeysUsageError(`unexpected argument '${parsed.positionals.at(-1)}'`);
  const id = wantsPositional ? parsed.positionals[0] : (values.id as string | undefined);
  if (id === undefined) throw new KeysUsageError(action === 'create' ? 'keys create needs --id ID' : `keys ${action} needs the key's ID`);
  if (id !== undefined && !new RegExp(ID_PATTERN).test(id)) throw new KeysUsageError(`a key id is 1 to 64 letters, digits, '.', '_' or '-' (starting with a letter or digit), not '${id}'`);
  if (action === 'set' && values.owner === undefined && values.contact === undefined && values['clear-owner'] !== true && values['clear-contact'] !== true) {
    throw new KeysUsageError('keys set needs --owner, --contact, --clear-owner or --clear-contact');
  }
  return { action, values, id: id ?? '' };
}

function createInput(p: Parsed, known: ReadonlySet<string> | 'any-id'): NewKeyInput {
  const ops = p.values.operations as string | undefined;
  const operations = ops === undefined ? undefined : ops.split(',').map((o) => o.trim()).filter((o) => o !== '');
  checkOperations(operations ?? [], known, (o) => `--operations takes operationIds of the interface, not '${o}'`);
  const scopes = p.values.scope as string[] | undefined;
  checkScopes(scopes ?? [], (sc) => `--scope takes a scope, not '${sc}'`);
  const expires = p.values.expires as string | undefined;
  if (expires !== undefined && (!DATE_TIME.test(expires) || Number.isNaN(parseDateTime(expires)))) throw new KeysUsageError(`--expires must be an RFC 3339 date-time such as 2027-01-31T00:00:00Z, not '${expires}'`);
  const owner = p.values.owner as string | undefined;
  const contact = p.values.contact as string | undefined;
  return {
    id: p.id,
    ...(operations === undefined ? {} : { operations: [...new Set(operations)] }),
    ...(scopes === undefined ? {} : { scopes: [...new Set(scopes)] }),
    ...(expires === undefined ? {} : { expires }),
    ...(owner === undefined ? {} : { owner }),
    ...(contact === undefined ? {} : { contact }),
  };
}

/**
 * `--owner` and `--contact` only where they change something (create, set), `--clear-*` only with
 * set and not beside the value it clears; each value in form (src/core/key-owner.ts).
 */
function checkOwnerOptions(action: string, values: Record<string, string | string[] | boolean | undefined>): void {
  for (const field of ['owner', 'contact'] as const) {
    const clear = values[`clear-${field}`] === true;
    if (values[field] !== undefined && action !== 'create' && action !== 'set') throw new KeysUsageError(`--${field} is for keys create and keys set`);
    if (clear && action !== 'set') throw new KeysUsageError(`--clear-${field} is for keys set`);
    if (clear && values[field] !== undefined) throw new KeysUsageError(`--${field} and --clear-${field} together: give one`);
  }
  const problem = ownerFieldsProblem({ owner: values.owner, contact: values.contact });
  if (problem !== undefined) throw new KeysUsageError(`--${problem.field} ${problem.message}`);
}

/** What `keys set` changes: a value sets, a --clear-* flag clears (null), the rest stays. */
function ownerPatch(p: Parsed): OwnerPatch {
  const v = p.values;
  const of = (field: 'owner' | 'contact') => (v[`clear-${field}`] === true ? { [field]: null } : typeof v[field] === 'string' ? { [field]: v[field] } : {});
  return { ...of('owner'), ...of('contact') };
}

/** Who made a change from the command line, for its audit line: the OS user and host. */
function cliActor(): string {
  let user = process.env.USER ?? process.env.LOGNAME ?? 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry (a container's arbitrary uid): the environment's name stands.
  }
  return `cli:${user}@${hostname()}`;
}

/** The audit line of a change on stderr (the CLI has no log): who, what, which id; never the secret. */
function audit(action: string, id: string, extra: Record<string, unknown> = {}): void {
  process.stderr.write(JSON.stringify({ audit: 'keys', action, id, by: cliActor(), ...extra }) + '\n');
}

/** Runs one action against the registry; the exit code. */
async function act(p: Parsed, registry: KeyRegistry, config: PolicyConfig, records: readonly KeyRecord[]): Promise<number> {
  const out = process.stdout;
  const err = process.stderr;
  switch (p.action) {
    case 'list': {
      const keys = await registry.list();
      out.write(p.values.json === true ? JSON.stringify({ keys }) + '\n' : table(keys));
      return 0;
    }
    case 'create': {
      const input = createInput(p, new Set((config.api ?? shippedApi()).operations.map((o) => o.id)));
      if (config.policies.auth.keys.some((k) => k.id === input.id)) {
        err.write(`petstore-gateway: '${input.id}' is a key id of the policy file, which wins over the registry; choose another id\n`);
        return 1;
      }
      const made = await registry.create(input);
      out.write(made.key + '\n');
      audit('created', made.info.id);
      err.write(`key '${made.info.id}' created; the secret above is shown once and stored nowhere\n`);
      return 0;
    }
    case 'set': {
      const patch = ownerPatch(p);
      const info = await registry.describe(p.id, patch);
      audit('updated', p.id, { fields: Object.keys(patch).sort() });
      err.write(`key '${p.id}': owner ${info.owner === null ? '(none)' : JSON.stringify(info.owner)}, contact ${info.contact === null ? '(none)' : JSON.stringify(info.contact)}\n`);
      return 0;
    }
    case 'rotate': {
      const text = (p.values.overlap as string | undefined) ?? String(REGISTRY_DEFAULTS.overlapSeconds);
      const overlap = parseDuration(text);
      if (overlap === undefined) throw new KeysUsageError(`--overlap must be a duration such as 0, 90s, 30m, 24h or 7d (at most a year), not '${text}'`);
      const made = await registry.rotate(p.id, overlap);
      out.write(made.key + '\n');
      audit('rotated', p.id, { overlapSeconds: overlap });
      const n = made.previousSecrets;
      err.write(
        n === 0
          ? `key '${p.id}' rotated; every previous secret ended now\n`
          : `key '${p.id}' rotated; ${n === 1 ? 'the previous secret is' : `${n} previous secrets are`} valid until ${made.previousValidUntil}${n === 1 ? '' : ' at the latest'}\n`,
      );
      return 0;
    }
    case 'export': {
      const backup = await registry.exportAll();
      out.write(JSON.stringify(backup, null, 2) + '\n');
      audit('exported', '*', { keys: backup.records.length });
      err.write(`${backup.records.length} key record(s) exported: hashes only, no secret; keep the file as confidential as Redis\n`);
      return 0;
    }
    case 'import': {
      const clash = await registry.hashClash(records);
      if (clash !== undefined) {
        throw new KeysUsageError(`record '${clash.imported}' of the file to import has the secret hash of the key '${clash.existing}' in the registry; nothing was imported (revoke '${clash.existing}' first if it is the same key)`);
      }
      await registry.restore(records);
      audit('imported', '*', { keys: records.length });
      err.write(`${records.length} key record(s) imported; every gateway takes Redis as the registry again\n`);
      return 0;
    }
    case 'reset-epoch': {
      await registry.restore([]);
      audit('reset-epoch', '*');
      err.write('registry epoch reset: every gateway takes what Redis holds now as the registry (keys it kept after a data loss and that Redis lacks stop working)\n');
      return 0;
    }
    default:
      await registry.revoke(p.id, cliActor());
      audit('revoked', p.id);
      err.write(`key '${p.id}' revoked\n`);
      return 0;
  }
}

/** `keys ...`: throws KeysUsageError for bad usage; returns the exit code otherwise. */
export async function keysCommand(args: string[], packageRoot: string): Promise<number> {
  const p = parseKeysArgs(args);
  // Before the policy is read, an operation is only checked to be an operationId; once it is read, to be one of its interface.
  if (p.action === 'create') createInput(p, 'any-id');
  // A file that cannot be imported is refused before Redis is even asked.
  let records: KeyRecord[] = [];
  let importText: string | undefined;
  if (p.action === 'import') {
    let text: string;
    try {
      text = readFileSync(p.file === '-' ? 0 : (p.file ?? ''), 'utf8');
    } catch (err) {
      throw new KeysUsageError(`cannot read ${p.file}: ${(err as Error).message}`);
    }
    records = readExport(text, 'any-id');
    importText = text;
  }
  const file = (p.values.policy as string | undefined) ?? defaultPolicyFile(packageRoot);
  const env = { ...process.env };
  const loaded = loadPolicyFile(file, { env }, {}, { keys: 'not-checked' });
  if (!loaded.ok) {
    process.stderr.write(formatProblems(file, loaded.problems) + '\n');
    return 78;
  }
  // The operations a record names must be the interface's, now that the policy says which it is.
  if (importText !== undefined) records = readExport(importText, new Set((loaded.config.api ?? shippedApi()).operations.map((o) => o.id)));
  const rc = loaded.config.policies.auth.registry;
  if (rc === null) {
    process.stderr.write(`petstore-gateway: ${file} configures no key registry (policies.auth.registry)\n`);
    return 78;
  }
  const registry = new KeyRegistry(rc, { env, follow: false });
  try {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([registry.ready, new Promise((r) => (timer = setTimeout(r, rc.redis.connectTimeoutMs + 500)))]);
    clearTimeout(timer);
    return await act(p, registry, loaded.config, records);
  } catch (err) {
    if (err instanceof KeysUsageError) throw err;
    const why = err instanceof RegistryError && err.reason !== 'unavailable' ? err.message : `the key registry (${describeConnection(rc.redis)}) is not reachable; nothing was changed`;
    process.stderr.write(`petstore-gateway: ${why}\n`);
    return 1;
  } finally {
    await registry.close();
  }
}

/**
 * The key admin API's routes for a serving process, with their failed-authentication metric, and
 * `DELETE /migration` when the migration lane is on (`migrationReset`). The routes answer 404
 * while no admin token is in force; tokens of `server.admin.tokensFile` are
 * re-read on each reload (src/cli/admin.ts).
 */
export function adminKeyRoutes(
  config: PolicyConfig,
  env: Readonly<Record<string, string | undefined>>,
  log: Logger,
  migrationReset?: () => Promise<void>,
  /** More routes behind the same tokens and guard (the console's). */
  more?: (tokens: AdminTokens, guard: AdminAuthGuard) => AdminRoutes,
): AdminRoutes | undefined {
  const admin = config.server.admin;
  if (admin === null) return undefined;
  const rc = config.policies.auth.registry;
  const fileIds = new Set(config.policies.auth.keys.map((k) => k.id));
  const operationIds = new Set((config.api ?? shippedApi()).operations.map((o) => o.id));
  const tokens = liveAdminTokens(config, env, log);
  // Opened now (the auth policy shares it): the first admin request finds it connected.
  if (tokens.size > 0 && rc !== null) openRegistry(rc, env);
  if (tokens.size > 0 && admin.tls === undefined && !/^(127\.|localhost$|::1$)/.test(admin.host)) {
    log.warn({ host: admin.host, port: admin.port }, 'the key admin API (/keys) is on an admin listener other machines may reach, in plain HTTP: keep its port to your monitoring network, or set server.admin.tls (docs/operations.md, "Exposing the admin port")');
  }
  // One guard: wrong tokens add up whichever admin route they are tried on.
  const guard = new AdminAuthGuard({ ...(admin.bruteForce ?? ADMIN_BRUTE_FORCE_DEFAULT), log });
  const keys = keyAdminRoutes({
    tokens,
    guard,
    registry: () => (rc === null ? undefined : openRegistry(rc, env)),
    fileIds: () => fileIds,
    operations: () => operationIds,
    log,
  });
  return combineRoutes([keys, migrationReset === undefined ? undefined : migrationAdminRoutes({ tokens, guard, reset: migrationReset, log }), more?.(tokens, guard)]);
}
