/**
 * The start-up probe of the upstream: one `GET <upstream.url>/pets?limit=1`, no
 * API key, a short timeout, so that an upstream URL without its `/v1` base path is caught at start
 * instead of as a silent 404 on every call. It never stops the gateway: the upstream may come up
 * later, and the probe only says what it saw.
 *
 * The rule (what each answer tells):
 * - 2xx: the base path serves listPets: info.
 * - 401/403: the upstream wants credentials before it says whether the path exists; a warning when
 *   `policies.auth.upstreamAuthorization` is `drop` (every call would be refused), else info.
 * - 404, 405, 3xx: nothing serves GET /pets there: a warning that the base path looks wrong, with the
 *   URL plus `/v1` as the likely fix when the URL has no version segment (`/v2`, say, is named as
 *   the suspect instead: never `/v2/v1`).
 * - 400, 421, 495, 496, 497 to this valid request: the upstream refuses the gateway itself, not the
 *   request (nginx's 400 "No required SSL certificate was sent", a Host or SNI it does not serve,
 *   HTTP to an HTTPS port): a warning naming upstream.tls, since every client would get 4xx.
 * - other 4xx: the path exists: info.
 * - 5xx: a warning that the upstream answers with server errors.
 * - no answer (refused, DNS, timeout): an error line; requests get 502/504 until it answers.
 */
import type { Logger } from 'pino';
import type { PolicyConfig } from '../config/types.js';
import { probeDispatcher } from '../tls/upstream.js';

export const PROBE_TIMEOUT_MS = 2000;

export type ProbeVerdict = 'ok' | 'needs-credentials' | 'wrong-base-path' | 'refuses-gateway' | 'server-error' | 'reachable' | 'unreachable';

/** Answers to a valid bare GET that say the upstream refuses the connection or the gateway, not the request. */
const REFUSES_GATEWAY: ReadonlySet<number> = new Set([400, 421, 495, 496, 497]);

export interface ProbeResult {
  readonly verdict: ProbeVerdict;
  readonly status?: number;
  readonly level: 'info' | 'warn' | 'error';
  readonly message: string;
}

/** Classifies the probe's outcome: `status`, or the error when there was no answer. */
export function judgeProbe(base: string, upstreamAuthorization: unknown, status: number | undefined, error?: string): ProbeResult {
  const trimmed = base.replace(/\/+$/, '');
  const target = `GET ${trimmed}/pets?limit=1`;
  if (status === undefined) {
    return { verdict: 'unreachable', level: 'error', message: `upstream probe: ${target} got no answer (${error ?? 'error'}); requests will get 502/504 until the upstream answers` };
  }
  if (status >= 200 && status < 300) return { verdict: 'ok', status, level: 'info', message: `upstream probe: ${target} answered ${status}` };
  if (status === 401 || status === 403) {
    const dropped = upstreamAuthorization === 'drop';
    return {
      verdict: 'needs-credentials',
      status,
      level: dropped ? 'warn' : 'info',
      message: dropped
        ? `upstream probe: ${target} answered ${status} without credentials, and policies.auth.upstreamAuthorization is drop: the upstream will likely refuse every call (set it to forward or {fromEnv: NAME})`
        : `upstream probe: ${target} answered ${status} without credentials (the gateway sends them per policies.auth.upstreamAuthorization)`,
    };
  }
  if (status === 404 || status === 405 || (status >= 300 && status < 400)) {
    const path = new URL(trimmed).pathname.replace(/\/+$/, '');
    const version = /\/v\d+$/.exec(path)?.[0];
    const hint =
      version === '/v1'
        ? 'check that it is the base the interface paths hang from'
        : version !== undefined
          ? `its base path ends with ${version}, which serves no GET /pets there: set the base path the upstream serves the interface under (the interface's own is /v1)`
          : `it probably lacks the /v1 base path: try --upstream ${trimmed}/v1`;
    return { verdict: 'wrong-base-path', status, level: 'warn', message: `upstream probe: ${target} answered ${status}, so the upstream URL looks wrong: ${hint}` };
  }
  if (REFUSES_GATEWAY.has(status)) {
    return {
      verdict: 'refuses-gateway',
      status,
      level: 'warn',
      message:
        `upstream probe: ${target}, a valid request, answered ${status}: the upstream likely refuses the gateway itself (a client certificate it requires: upstream.tls.certFile and keyFile; ` +
        `a host name it does not serve: upstream.tls.servername or the URL's host; plain HTTP to an HTTPS port): until that is fixed, clients get 4xx answers for every call`,
    };
  }
  if (status >= 500) return { verdict: 'server-error', status, level: 'warn', message: `upstream probe: ${target} answered ${status}: the upstream reports a server error` };
  return { verdict: 'reachable', status, level: 'info', message: `upstream probe: ${target} answered ${status}` };
}

/** Probes the configured upstream once and logs one line; nothing for the built-in backend. */
export async function probeUpstream(config: PolicyConfig, log: Logger, timeoutMs = PROBE_TIMEOUT_MS): Promise<ProbeResult | undefined> {
  const base = config.upstream.url;
  if (base === 'builtin') return undefined;
  let status: number | undefined;
  let error: string | undefined;
  // An https upstream is verified as the transports verify it (upstream.tls).
  const tls = await probeDispatcher(config.upstream);
  try {
    // fetch (node's built-in client): no engine library is loaded for one request. No redirect is
    // followed: a redirect is itself a sign of a wrong base path.
    const res = await fetch(`${base.replace(/\/+$/, '')}/pets?limit=1`, {
      ...(tls.dispatcher === undefined ? {} : ({ dispatcher: tls.dispatcher } as RequestInit)),
      redirect: 'manual',
      headers: { accept: 'application/json' },
      signal: AbortSignal.timeout(timeoutMs),
    });
    status = res.status;
    await res.body?.cancel().catch(() => undefined);
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    error = e.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (e.cause?.code ?? e.message);
  }
  void tls.close().catch(() => undefined);
  const result = judgeProbe(base, config.policies.auth.upstreamAuthorization, status, error);
  log[result.level]({ upstream: base, status: result.status, verdict: result.verdict }, result.message);
  return result;
}
