/**
 * What the command line does with TLS: `check` and `serve` validate the files before anything
 * starts, a reload (SIGHUP, --watch) re-reads the listener's certificate, `serve` warns when it
 * is about to expire, and a gauge carries its expiry for alerting.
 */
import type { Server as NetServer } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import { Gauge, type Registry } from 'prom-client';
import { describePair, EXPIRY_WARNING_DAYS, ListenerTls, listenerTlsOf, type ListenerTlsConfig } from './listener.js';
import { readUpstreamTls, type UpstreamTlsSource } from './upstream.js';

/** What the command line's TLS checks read of a policy file (a PolicyConfig fits it). */
export interface TlsSections {
  readonly server: { readonly tls: ListenerTlsConfig | null };
  readonly upstream: UpstreamTlsSource;
}

/** The logger calls used here (pino's shape). */
interface Log {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** Every TLS file problem of a policy, as `{path, message}`; empty when all can be used. */
export function tlsProblems(config: TlsSections): Array<{ path: string; message: string }> {
  const problems: Array<{ path: string; message: string }> = [];
  const tls = config.server.tls;
  if (tls !== null) {
    const opened = ListenerTls.open(tls);
    if (!opened.ok) problems.push({ path: '$.server.tls', message: opened.problem });
  }
  const upstream = readUpstreamTls(config.upstream);
  if (!upstream.ok) problems.push({ path: '$.upstream.tls', message: upstream.problem });
  return problems;
}

/** `check`'s line about the listener's certificate (none without server.tls). */
export function describeListenerTls(config: TlsSections, now = Date.now()): string[] {
  const tls = config.server.tls;
  if (tls === null) return [];
  const opened = ListenerTls.open(tls);
  if (!opened.ok) return [];
  const d = describePair(opened.value.pair, now);
  const mtls = tls.clientCaFile === null ? '' : ', client certificates required';
  return [`tls ${tls.certFile}: ${d.subject} (${d.altNames}), expires ${d.notAfter}, ${d.daysLeft} days left${mtls}`];
}

/** The listener's certificate and key files, which `serve --watch` watches besides the policy. */
export function listenerTlsFiles(config: TlsSections): string[] {
  const tls = config.server.tls;
  return tls === null ? [] : [tls.certFile, tls.keyFile];
}

/** At start: a warning when the certificate expires within EXPIRY_WARNING_DAYS. */
export function warnIfExpiring(server: NetServer, log: Log, now = Date.now()): void {
  const tls = listenerTlsOf(server);
  if (tls === undefined) return;
  const d = describePair(tls.pair, now);
  if (d.daysLeft < EXPIRY_WARNING_DAYS) {
    log.warn({ certFile: tls.config.certFile, notAfter: d.notAfter, daysLeft: d.daysLeft }, `the TLS certificate expires in less than ${EXPIRY_WARNING_DAYS} days`);
  }
}

/**
 * On a reload: re-reads the listener's certificate and key. New connections get the new pair;
 * established ones keep theirs. A pair that cannot be used is refused and the old one stays.
 */
export function reloadListenerTls(server: NetServer, log: Log, reason: string): boolean {
  const tls = listenerTlsOf(server);
  if (tls === undefined) return true;
  const result = tls.reload(server as TlsServer);
  if (!result.ok) {
    log.error({ reason, certFile: tls.config.certFile, problem: result.problem }, 'TLS certificate reload refused; the previous certificate stays');
    return false;
  }
  const d = describePair(result.value);
  log.info({ reason, certFile: tls.config.certFile, notAfter: d.notAfter, daysLeft: d.daysLeft }, 'TLS certificate reloaded');
  warnIfExpiring(server, log);
  return true;
}

/** The gauge of the certificate in force: its notAfter in Unix seconds, read at each scrape. */
export function registerCertificateGauge(registry: Registry, server: NetServer): void {
  const tls = listenerTlsOf(server);
  if (tls === undefined) return;
  new Gauge({
    name: 'petstore_gateway_tls_certificate_expiry_seconds',
    help: "The listener's TLS certificate's notAfter, in Unix seconds (the one in force after reloads).",
    registers: [registry],
    // With --workers, the primary aggregates: the soonest expiry among workers (one that missed a
    // reload still serves the old certificate), never prom-client's default sum.
    aggregator: 'min',
    collect() {
      this.set(Math.floor(tls.pair.notAfterMs / 1000));
    },
  });
}
