/**
 * The admin tokens of a serving process (src/ops/admin-tokens.ts): checked by `check` and `serve`
 * before anything starts (a weak token refuses the start, naming the variable or the file and the
 * token's number, never the token), and re-read from `server.admin.tokensFile` on each reload
 * (SIGHUP, `--watch`): a file that cannot be read or holds a weak token is refused with an error
 * line, and the tokens in force stay.
 */
import type { PolicyConfig } from '../config/types.js';
import { AdminTokens, readAdminTokens, type TokenProblem } from '../ops/admin-tokens.js';

type Env = Readonly<Record<string, string | undefined>>;

interface ReloadLog {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/** What `check` and `serve` refuse in the admin tokens; empty when the admin listener is off. */
export function adminTokenProblems(config: PolicyConfig, env: Env): TokenProblem[] {
  const admin = config.server.admin;
  if (admin === null) return [];
  const read = readAdminTokens(admin, env);
  return read.ok ? [] : [...read.problems];
}

/** The tokens file to watch with `--watch`, if one is configured. */
export function adminTokenFiles(config: PolicyConfig): string[] {
  const file = config.server.admin?.tokensFile;
  return file === undefined ? [] : [file];
}

/** The reloads of this process's token sets (one per admin listener: at most one in a process). */
const reloads = new Set<(reason: string) => void>();

/**
 * The admin tokens in force for an admin listener, from the sources `config` names; their file is
 * re-read by `reloadAdminTokens`. Tokens refused at this point (the file changed since `check`)
 * leave the set empty, with an error line.
 */
export function liveAdminTokens(config: PolicyConfig, env: Env, log: ReloadLog): AdminTokens {
  const admin = config.server.admin;
  if (admin === null) return new AdminTokens();
  const first = readAdminTokens(admin, env);
  if (!first.ok) log.error({ problems: first.problems.map((p) => `${p.path}: ${p.message}`) }, 'admin tokens refused; the key admin API is off');
  const tokens = new AdminTokens(first.ok ? first.tokens : []);
  const file = admin.tokensFile;
  if (file !== undefined) {
    reloads.add((reason) => {
      const read = readAdminTokens(admin, env);
      if (!read.ok) {
        log.error({ file, reason, problems: read.problems.map((p) => `${p.path}: ${p.message}`) }, 'admin tokens reload refused; the tokens in force stay');
        return;
      }
      if (!tokens.replace(read.tokens)) return;
      if (tokens.size === 0) log.warn({ file, reason }, 'admin tokens reloaded: none in force, the key admin API answers 404');
      else log.info({ file, reason, tokens: tokens.size }, 'admin tokens reloaded');
    });
  }
  return tokens;
}

/** Re-reads every tokens file of this process (SIGHUP, --watch); nothing without one. */
export function reloadAdminTokens(reason: string): void {
  for (const reload of reloads) reload(reason);
}
