/**
 * What every command shares: the exit codes, usage errors, and the parsing of flags (ports, hosts,
 * --upstream, the policy overrides of `serve` and `check`). Exit codes: 0 ok, 1 runtime failure,
 * 2 bad usage, 3 not ready (`migration report`: the gate's verdict), 78 bad config (EX_CONFIG,
 * sysexits.h).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Overrides } from '../config/load.js';
import { maskUrl } from '../stores/connection-schema.js';

export const EXIT = { ok: 0, runtime: 1, usage: 2, notReady: 3, config: 78 } as const;

export const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Bad usage: one line, then where to read more (never the whole help). */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly command?: string,
  ) {
    super(message);
  }
}

/** `--help` on a command: print its help and exit 0. */
export class HelpRequested extends Error {
  constructor(readonly command: string) {
    super(command);
  }
}

export function defaultPolicyFile(): string {
  const local = join(process.cwd(), 'policies', 'default.yaml');
  return existsSync(local) ? local : join(PACKAGE_ROOT, 'policies', 'default.yaml');
}

export function parse(
  command: string,
  args: string[],
  options: ParseArgsConfig['options'],
  positionals = 0,
): { values: Record<string, string | boolean | undefined>; positionals: string[] } {
  let parsed;
  try {
    parsed = parseArgs({ args, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: positionals > 0, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message, command);
  }
  if (parsed.values.help === true) throw new HelpRequested(command);
  if (parsed.positionals.length > positionals) throw new UsageError(`unexpected argument '${parsed.positionals[positionals]}'`, command);
  return { values: parsed.values as Record<string, string | boolean | undefined>, positionals: parsed.positionals };
}

/** A port flag: a whole number from 0 to 65535, else a usage error that names the flag. */
export function portFlag(command: string, flag: string, value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const text = String(value);
  if (!/^\d{1,5}$/.test(text) || Number(text) > 65535) throw new UsageError(`${flag} must be a whole number from 0 to 65535, not '${text}'`, command);
  return Number(text);
}

export function hostFlag(command: string, flag: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  const text = String(value);
  if (text === '' || /\s/.test(text)) throw new UsageError(`${flag} must be a host name or IP address, not '${text}'`, command);
  return text;
}

/** --upstream: "builtin" or an http(s) URL without query or fragment (the same rule as upstream.url). */
export function upstreamFlag(command: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  const text = String(value);
  if (text === 'builtin') return text;
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  // The value is echoed masked: a user or password in it must not reach a terminal log or CI output.
  if (url === undefined || !/^https?:$/.test(url.protocol) || /[\s?#]/.test(text) || !/^https?:\/\//.test(text)) {
    throw new UsageError(`--upstream must be 'builtin' or an http(s) base URL such as http://127.0.0.1:8081/v1, not '${maskUrl(text)}'`, command);
  }
  if (url.username !== '' || url.password !== '') {
    throw new UsageError(`--upstream takes no user or password ('${maskUrl(text)}'): a credential for the upstream goes in policies.auth.upstreamAuthorization`, command);
  }
  return text;
}

export const OVERRIDE_OPTIONS = {
  upstream: { type: 'string' },
  host: { type: 'string' },
  port: { type: 'string' },
  'ephemeral-key': { type: 'boolean' },
} as const;

export function overridesOf(command: string, values: Record<string, unknown>): Overrides {
  return {
    upstreamUrl: upstreamFlag(command, values.upstream),
    host: hostFlag(command, '--host', values.host),
    port: portFlag(command, '--port', values.port),
    adminHost: hostFlag(command, '--admin-host', values['admin-host']),
    adminPort: portFlag(command, '--admin-port', values['admin-port']),
  };
}

/** The package's version (its package.json). */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
}
