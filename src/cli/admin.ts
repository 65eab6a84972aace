/**
 * The admin listener's secrets in a serving process: its tokens (src/ops/admin-tokens.ts) and its
 * TLS certificate (`server.admin.tls`, src/tls). Both are checked by `check` and `serve` before
 * anything starts (a weak token refuses the start, naming the variable or the file and the
 * token's number, never the token), and re-read on each reload (SIGHUP, `--watch`): a tokens file
 * that cannot be read or holds a weak token, or a certificate that cannot be used, is refused with
 * an error line, and what is in force stays.
 */
import type { Server as NetServer } from 'node:net';
import type { ServerOptions as HttpsOptions } from 'node:https';
import type { PolicyConfig } from '../config/types.js';
import { AdminTokens, readAdminTokens, type TokenProblem } from '../ops/admin-tokens.js';
import { attachListenerTls, ListenerTls } from '../tls/listener.js';
import { reloadListenerTls, warnIfExpiring } from '../tls/ops.js';

type Env = Readonly<Record<string, string | undefined>>;

interface ReloadLog {
  info(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
  error(fields: Record<string, unknown>, message: string): void;
}

/** What `check` and `serve` refuse in the admin listener's tokens and TLS files; empty when it is off. */
export function adminProblems(config: PolicyConfig, env: Env): TokenProblem[] {
  const admin = config.server.admin;
  if (admin === null) return [];
  const read = readAdminTokens(admin, env);
  const problems = read.ok ? [] : [...read.problems];
  if (admin.tls !== undefined) {
    const opened = ListenerTls.open(admin.tls);
    if (!opened.ok) problems.push({ path: '$.server.admin.tls', message: opened.problem });
  }
  return problems;
}

/** The files `--watch` watches for the admin listener: its tokens file, its certificate and key. */
export function adminWatchFiles(config: PolicyConfig): string[] {
  const admin = config.server.admin;
  if (admin === null) return [];
  return [...(admin.tokensFile === undefined ? [] : [admin.tokensFile]), ...(admin.tls === undefined ? [] : [admin.tls.certFile, admin.tls.keyFile])];
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

/**
 * The admin listener's TLS options, or undefined for plain HTTP; `attach` makes the listening
 * server's certificate follow reloads. The files were checked by `adminProblems`: a problem now
 * (a file changed since) throws, and the start fails with it.
 */
export function adminTls(admin: NonNullable<PolicyConfig['server']['admin']>, log: ReloadLog): { options: HttpsOptions; attach(server: NetServer): void } | undefined {
  if (admin.tls === undefined) return undefined;
  const opened = ListenerTls.open(admin.tls);
  if (!opened.ok) throw new Error(opened.problem);
  const tls = opened.value;
  return {
    options: tls.options(),
    attach(server) {
      attachListenerTls(server, tls);
      warnIfExpiring(server, log);
      reloads.add((reason) => void reloadListenerTls(server, log, reason));
    },
  };
}

/** Re-reads the admin listener's tokens file and certificate (SIGHUP, --watch); nothing without them. */
export function reloadAdmin(reason: string): void {
  for (const reload of reloads) reload(reason);
}
