/**
 * The document clients see (src/api/served.ts) for a policy: what the policy switches on, read
 * from its config, and where the interface document comes from. Used by `petstore-gateway openapi`
 * and by the admin listener's /openapi.json (serve-process.ts, serve.ts).
 */
import { isIP } from 'node:net';
import { dirname } from 'node:path';
import { servedDocument, shippedDocument, type ServedOptions } from '../api/served.js';
import { formatOf, formatProblems, parsePolicy, readPolicyText } from '../config/load.js';
import type { PolicyConfig } from '../config/types.js';
import { deprecationHeaders, lifecycleOf } from '../policies/deprecation/index.js';
import { shippedApi } from '../api/index.js';
import { limitsAnyone } from '../policies/rate-limit/index.js';
import { defaultPolicyFile, EXIT, parse } from './usage.js';

export const OPENAPI_HELP = `Usage: petstore-gateway openapi [--policy FILE]

Print the OpenAPI 3.1 document of what clients get through the gateway with this policy (JSON):
the interface plus the gateway's own answers (400, 413, 415, 429, 502, 503, 504...), its
headers (RateLimit, Deprecation...) and the bearer scheme. The admin listener serves the same
document as GET /openapi.json. Without --policy: the file \`serve\` would use.
`;

/**
 * The interface document the gateway enforces for `config`, as read. The one place the served
 * document's source is chosen: the shipped document until the policy names its own.
 */
export function interfaceDocument(config: PolicyConfig): object {
  return config.api === undefined ? shippedDocument() : (structuredClone(config.api.document) as object);
}

/** The listener's origins as Server Objects: its own address, or `{host}` when it listens on every interface. */
function originsOf(server: PolicyConfig['server'], port: number | undefined): ServedOptions['origins'] {
  if (port === undefined || port === 0) return [];
  const scheme = server.tls === null ? 'http' : 'https';
  const host = server.host;
  if (host === '0.0.0.0' || host === '::') {
    return [{ url: `${scheme}://{host}:${port}`, description: 'The API listener (on every interface of its machine).', variables: { host: { default: 'localhost', description: 'A name or address of the machine.' } } }];
  }
  return [{ url: `${scheme}://${isIP(host) === 6 ? `[${host}]` : host}:${port}`, description: 'The API listener.' }];
}

/**
 * What the policy changes in the served document. `port`: where the API listener listens, when
 * known (a running gateway); else the policy's `server.port` (none when it is 0).
 */
export function servedOptionsOf(config: PolicyConfig, port?: number): ServedOptions {
  const p = config.policies;
  const rateLimit = limitsAnyone(p['rate-limit']);
  const dep = p.deprecation;
  const headers: Record<string, Record<string, string>> = {};
  for (const op of (config.api ?? shippedApi()).operations) {
    const life = lifecycleOf(op, dep);
    if (life !== undefined) headers[op.id] = deprecationHeaders(dep, life);
  }
  return {
    origins: originsOf(config.server, port ?? config.server.port),
    rateLimit,
    rateLimitStoreClosed: rateLimit && p['rate-limit'].onStoreError === 'closed',
    // Absent (a config built in code): the schema's default, on.
    authFailureLock: p.auth.bruteForce !== null,
    scopedKeys: p.auth.keys.some((k) => k.operations !== undefined) || p.auth.registry != null,
    consumerBound: config.server.maxInFlightPerConsumer !== null,
    cors: p.cors.origins.length > 0,
    cache: p.cache.ttlSeconds.listPets > 0 || p.cache.ttlSeconds.getPet > 0,
    maxBodyBytes: p['new-pet'].maxBytes,
    deprecation: {
      headers,
      removal: dep.removeAfterSunset || dep.brownouts.length > 0,
    },
  };
}

/** The served document of a policy in force; `port` as in `servedOptionsOf`. */
export function servedFor(config: PolicyConfig, port?: number): object {
  return servedDocument(interfaceDocument(config), servedOptionsOf(config, port));
}

/** `petstore-gateway openapi [--policy FILE]`: the served document on stdout. */
export function openapiCommand(args: string[]): number {
  const { values } = parse('openapi', args, { policy: { type: 'string' } });
  const file = (values.policy as string | undefined) ?? defaultPolicyFile();
  const read = readPolicyText(file);
  // No API key is needed to describe the interface: the keys are not checked.
  const loaded = read.ok ? parsePolicy(read.text, { env: { ...process.env } }, {}, { keys: 'not-checked', format: formatOf(file), baseDir: dirname(file) }) : read;
  if (!loaded.ok) {
    process.stderr.write(formatProblems(file, loaded.problems) + '\n');
    return EXIT.config;
  }
  process.stdout.write(JSON.stringify(servedFor(loaded.config), null, 2) + '\n');
  return EXIT.ok;
}
