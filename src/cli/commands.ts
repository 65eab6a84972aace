/**
 * The command line: the dispatch of serve (serve.ts), check (check.ts), backend (backend.ts),
 * keys (keys.ts), health (health.ts), openapi (openapi.ts), migration (migration.ts) and the small ones kept here (hash-key, new-key, schema,
 * --version), the help texts, and how a usage error or a failure ends. Exit codes (usage.ts): 0 ok,
 * 1 runtime failure, 2 bad usage, 3 not ready (migration report), 78 bad config (EX_CONFIG, sysexits.h).
 *
 * Output: while serving, stdout carries only pino's JSON lines (NDJSON); human text
 * (the banner, the ephemeral key, usage errors, policy problems) goes to stderr.
 */
import { policyFileSchema } from '../config/schema.js';
import { hashKey, newKey } from '../policies/auth/index.js';
import { BACKEND_HELP, backend } from './backend.js';
import { CHECK_HELP, check } from './check.js';
import { HEALTH_HELP, healthCommand, HealthUsageError } from './health.js';
import { keysCommand, KEYS_HELP, KeysUsageError } from './keys.js';
import { migrationCommand, MIGRATION_HELP } from './migration.js';
import { OPENAPI_HELP, openapiCommand } from './openapi.js';
import { serve, SERVE_HELP } from './serve.js';
import { EXIT, HelpRequested, PACKAGE_ROOT, packageVersion, parse, UsageError } from './usage.js';

export { EXIT };

const HASH_KEY_HELP = `Usage: petstore-gateway hash-key [--id NAME]

Read one API key on stdin; print its line for a policy file's auth.keys (only the SHA-256 hash).
  printf %s "$KEY" | petstore-gateway hash-key --id ops
`;

const NEW_KEY_HELP = `Usage: petstore-gateway new-key

Print a new random API key (256 bits, psg_ prefix) on stdout.
`;

const SCHEMA_HELP = `Usage: petstore-gateway schema

Print the JSON Schema of policy files.
`;

const HELP = `petstore-gateway: a policy-enforcing gateway for the pet store interface

Usage:
  petstore-gateway serve [--policy FILE] [--upstream URL|builtin] [--port N] [--ephemeral-key] ...
      Run the gateway.
  petstore-gateway check [FILE]
      Validate a policy file as serve would; print every problem (exit 78 if any).
  petstore-gateway hash-key [--id NAME]
      Read a key on stdin; print the line for a policy file's auth.keys.
  petstore-gateway new-key
      Print a new random API key (256 bits).
  petstore-gateway backend [--host H] [--port N]
      Run the reference backend on its own.
  petstore-gateway keys create|list|rotate|revoke ...
      Manage the keys of the key registry (policies.auth.registry).
  petstore-gateway health [--pid N]
      The container's healthcheck: is the serve or backend process N (default 1) answering?
  petstore-gateway schema
      Print the JSON Schema of policy files.
  petstore-gateway openapi [--policy FILE]
      Print the OpenAPI document of what clients get through the gateway.
  petstore-gateway migration report|reset [--admin URL] ...
      The migration lane's report from a running gateway, with the gate's verdict; or its reset.
  petstore-gateway --version

'petstore-gateway <command> --help' for a command's options.

Environment:
  PETSTORE_API_KEYS   API keys, comma-separated (the name is set by auth.keysFromEnv)
  LOG_LEVEL           fatal, error, warn, info (default), debug, trace, silent

Exit codes: 0 ok, 1 runtime failure, 2 bad usage, 3 not ready (migration report), 78 bad policy file.
`;

const COMMAND_HELP: Readonly<Record<string, string>> = {
  serve: SERVE_HELP,
  check: CHECK_HELP,
  'hash-key': HASH_KEY_HELP,
  'new-key': NEW_KEY_HELP,
  backend: BACKEND_HELP,
  schema: SCHEMA_HELP,
  keys: KEYS_HELP,
  health: HEALTH_HELP,
  openapi: OPENAPI_HELP,
  migration: MIGRATION_HELP,
};

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function hashKeyCommand(args: string[]): Promise<number> {
  const { values } = parse('hash-key', args, { id: { type: 'string' } });
  const id = (values.id as string | undefined) ?? 'key-1';
  const key = (await readStdin()).replace(/\r?\n$/, '');
  if (key === '' || /\s/.test(key)) throw new UsageError('hash-key reads one key, without spaces, on stdin', 'hash-key');
  process.stdout.write(`- { id: ${JSON.stringify(id)}, hash: "${hashKey(key)}" }\n`);
  return EXIT.ok;
}

function version(): string {
  return packageVersion();
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'serve':
        return await serve(rest);
      case 'check':
        return await check(rest);
      case 'hash-key':
        return await hashKeyCommand(rest);
      case 'new-key':
        parse('new-key', rest, {});
        process.stdout.write(newKey() + '\n');
        return EXIT.ok;
      case 'backend':
        return await backend(rest);
      case 'keys':
        if (rest.includes('--help') || rest.includes('-h')) throw new HelpRequested('keys');
        return await keysCommand(rest, PACKAGE_ROOT).catch((err: unknown) => {
          throw err instanceof KeysUsageError ? new UsageError(err.message, 'keys') : err;
        });
      case 'health':
        if (rest.includes('--help') || rest.includes('-h')) throw new HelpRequested('health');
        return await healthCommand(rest, PACKAGE_ROOT).catch((err: unknown) => {
          const parseError = err instanceof TypeError && String((err as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS');
          throw err instanceof HealthUsageError || parseError ? new UsageError((err as Error).message, 'health') : err;
        });
      case 'openapi':
        return openapiCommand(rest);
      case 'migration':
        return await migrationCommand(rest);
      case 'schema':
        parse('schema', rest, {});
        process.stdout.write(JSON.stringify(policyFileSchema(), null, 2) + '\n');
        return EXIT.ok;
      case '--help':
      case '-h':
      case 'help': {
        const topic = rest[0];
        const text = topic === undefined ? HELP : COMMAND_HELP[topic];
        if (text === undefined) throw new UsageError(`unknown command '${topic}'`);
        process.stdout.write(text);
        return EXIT.ok;
      }
      case '--version':
      case '-V':
      case 'version':
        process.stdout.write(`${version()}\n`);
        return EXIT.ok;
      default:
        throw new UsageError(command === undefined ? 'a command is required' : `unknown command '${command}'`);
    }
  } catch (err) {
    if (err instanceof HelpRequested) {
      process.stdout.write(COMMAND_HELP[err.command] ?? HELP);
      return EXIT.ok;
    }
    if (err instanceof UsageError) {
      const more = err.command === undefined ? `'petstore-gateway --help'` : `'petstore-gateway ${err.command} --help'`;
      process.stderr.write(`petstore-gateway: ${err.message}\nsee ${more}\n`);
      return EXIT.usage;
    }
    process.stderr.write(`petstore-gateway: ${(err as Error).message}\n`);
    return EXIT.runtime;
  }
}

