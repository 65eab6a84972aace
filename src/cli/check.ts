/** `petstore-gateway check`: the validation `serve` runs, nothing started. */
import { documentReport } from '../api/diff.js';
import { readShippedDocument } from '../api/document.js';
import { perKeyNotes } from '../policies/rate-limit/index.js';
import { describeKeys } from '../policies/auth/index.js';
import { describeListenerTls } from '../tls/ops.js';
import { interfaceStructure, loadForServe } from './policy-load.js';
import { formatProblems } from '../config/load.js';
import { defaultPolicyFile, EXIT, OVERRIDE_OPTIONS, overridesOf, parse } from './usage.js';

export const CHECK_HELP = `Usage: petstore-gateway check [FILE] [--upstream URL] [--host H] [--port N] [--ephemeral-key]

Validate a policy file exactly as \`serve\` would with the same flags and environment (e.g.
PETSTORE_API_KEYS): every problem in one pass, one line each (FILE: $.path: message).
Without FILE: the file \`serve\` would use. Exit 0 when serve would start, 78 otherwise.
`;

/**
 * What `check` says of the interface document a policy chooses: its changes against the shipped
 * document (openapi/pet-store.yaml, read only when a document is chosen), one line each under a
 * heading with their count (docs/cli.md, "check: the interface document"); nothing when none is
 * chosen or it is the shipped one.
 */
export function interfaceChangeReport(chosen: object | undefined, shipped: () => object = readShippedDocument): string[] {
  return chosen === undefined ? [] : documentReport(shipped(), chosen);
}

/** `check`: the validation `serve` runs, with the same flags and environment, nothing started. */
export async function check(args: string[]): Promise<number> {
  const { values, positionals } = parse('check', args, OVERRIDE_OPTIONS, 1);
  const file = positionals[0] ?? defaultPolicyFile();
  const overrides = overridesOf('check', values);
  const env: Record<string, string | undefined> = { ...process.env };
  const loaded = loadForServe(file, env, overrides, { ephemeralKey: values['ephemeral-key'] === true, fileGiven: positionals[0] !== undefined });
  if (!loaded.ok) {
    process.stdout.write(loaded.problems + '\n');
    return EXIT.config;
  }
  // Each key's id, expiry and operations, one indented line each (never a hash or a key).
  // An ephemeral key (--ephemeral-key) is made per run: said as such, not as a key of the environment.
  const described = describeKeys(loaded.config.policies.auth, { env: loaded.ephemeral === undefined ? env : process.env });
  if (loaded.ephemeral !== undefined) described.push('(ephemeral): made at each start, all operations');
  const keys = described.map((line) => `  key ${line}\n`);
  const tls = describeListenerTls(loaded.config).map((line) => `  ${line}\n`);
  const notes = perKeyNotes(loaded.config.policies['rate-limit'], loaded.config.policies.auth, { env }).map((line) => `  note: ${line}\n`);
  // The document the policy chooses with `interface:` (compiled by the loader: every construct the
  // gateway cannot enforce was refused there); its OpenAPI 3.1 structure is checked here too.
  const structure = await interfaceStructure(loaded.config);
  if (structure.length > 0) {
    process.stdout.write(formatProblems(file, structure) + '\n');
    return EXIT.config;
  }
  const api = loaded.config.interface === undefined ? undefined : loaded.config.api;
  const changes = interfaceChangeReport(api?.document as object | undefined).map((line) => `  ${line}\n`);
  process.stdout.write(`${file}: ok\n${keys.join('')}${tls.join('')}${notes.join('')}${changes.join('')}`);
  return EXIT.ok;
}
