/** The validation of a policy file that `serve`, `check` and a reload share. */
import { dirname } from 'node:path';
import { validateStructure } from '../api/validate.js';
import { formatOf, formatProblems, parsePolicy, readPolicyText, upstreamUrlWritten, type LoadOptions, type Overrides } from '../config/load.js';
import { builtinExposureProblem } from '../config/security-notices.js';
import type { PolicyConfig } from '../config/types.js';
import type { Problem } from '../core/policy.js';
import { buildKeyRing, newKey } from '../policies/auth/index.js';
import { tlsProblems } from '../tls/ops.js';
import { adminProblems } from './admin.js';

/**
 * The one validation path of `serve`, `check` and a reload: the file with the
 * command line's overrides, then what a running gateway needs (an API key). Only with --ephemeral-key
 * and no key configured is a key made for the run and put in the environment (`env` is changed):
 * a policy with a key registry and no other key starts with no key at all (its keys come from the
 * registry), never with one nobody asked for.
 */
export function loadForServe(
  file: string,
  env: Record<string, string | undefined>,
  overrides: Overrides,
  how: { readonly ephemeralKey: boolean; readonly fileGiven: boolean; readonly handed?: string | undefined },
): { ok: true; config: PolicyConfig; text: string; ephemeral: string | undefined } | { ok: false; problems: string } {
  const { ephemeralKey, handed } = how;
  const read = handed === undefined ? readPolicyText(file) : { ok: true as const, text: handed };
  if (!read.ok) return { ok: false, problems: formatProblems(file, read.problems) };
  const load = (keys: LoadOptions['keys']) => parsePolicy(read.text, { env }, overrides, { keys, format: formatOf(file), baseDir: dirname(file) });
  let loaded = load(ephemeralKey ? 'ephemeral-allowed' : 'required');
  if (!loaded.ok) return { ok: false, problems: formatProblems(file, loaded.problems) };
  // The demo backend on a reachable address only when chosen: by the flag, or by the file given.
  const chosen = overrides.upstreamUrl === 'builtin' || (how.fileGiven && upstreamUrlWritten(read.text, formatOf(file)) === 'builtin');
  const exposed = builtinExposureProblem(loaded.config, chosen);
  if (exposed !== undefined) return { ok: false, problems: formatProblems(file, [exposed]) };
  const tls = tlsProblems(loaded.config);
  if (tls.length > 0) return { ok: false, problems: formatProblems(file, tls) };
  const admin = adminProblems(loaded.config, env);
  if (admin.length > 0) return { ok: false, problems: formatProblems(file, admin) };
  const auth = loaded.config.policies.auth;
  if (!ephemeralKey || buildKeyRing(auth, { env }).size > 0 || auth.keysFromEnv === null) return { ok: true, config: loaded.config, text: read.text, ephemeral: undefined };
  const ephemeral = newKey();
  env[auth.keysFromEnv] = ephemeral;
  loaded = load('required');
  if (!loaded.ok) return { ok: false, problems: formatProblems(file, loaded.problems) };
  return { ok: true, config: loaded.config, text: read.text, ephemeral };
}


/**
 * The OpenAPI 3.1 structure of the interface document a policy names (`interface:`), as problems
 * of the policy file (`$.interface`); none for the shipped document. The loader compiled the
 * document already (what the gateway cannot enforce was refused there): this is the rest of
 * what `check`, `serve` and a reload refuse, asynchronous because the validator is.
 */
export async function interfaceStructure(config: PolicyConfig): Promise<Problem[]> {
  if (config.interface === undefined || config.api === undefined) return [];
  const problems = await validateStructure(config.api.document);
  return problems.map((p) => ({ path: '$.interface', message: `${config.interface}: ${p.path}: ${p.message}` }));
}
