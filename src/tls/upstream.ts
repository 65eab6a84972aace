/**
 * TLS towards an https:// upstream: the options every transport gives its connector (undici's
 * `connect`, node's https.Agent). Verification is always on: there is no option to turn it off.
 */
import type { ConnectionOptions } from 'node:tls';
import { readCa, readKeyPair, type Read } from './material.js';

/** What this module reads of the `upstream:` section (src/upstreams/config.ts's UpstreamConfig fits it). */
export interface UpstreamTlsSource {
  readonly url: string;
  readonly tls: {
    readonly caFile: string | null;
    readonly certFile: string | null;
    readonly keyFile: string | null;
    readonly servername: string | null;
  };
}

/** What a transport passes to its TLS connector: trust, optional client pair, the name to check. */
export interface UpstreamTlsOptions {
  readonly ca?: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
  readonly servername?: string;
  readonly rejectUnauthorized: true;
  readonly minVersion: 'TLSv1.2';
}

/** Reads the files of `upstream.tls`; undefined for a plain http:// upstream. */
export function readUpstreamTls(config: UpstreamTlsSource): Read<UpstreamTlsOptions | undefined> {
  if (!config.url.startsWith('https://')) return { ok: true, value: undefined };
  const { caFile, certFile, keyFile, servername } = config.tls;
  const ca = readCa(caFile, 'upstream.tls.caFile');
  if (!ca.ok) return ca;
  let pair: { cert: Buffer; key: Buffer } | undefined;
  if (certFile !== null && keyFile !== null) {
    const read = readKeyPair(certFile, keyFile);
    if (!read.ok) return { ok: false, problem: `upstream.tls: ${read.problem}` };
    pair = read.value;
  } else if (certFile !== null || keyFile !== null) {
    return { ok: false, problem: 'upstream.tls: certFile and keyFile go together (mutual TLS needs both)' };
  }
  return {
    ok: true,
    value: {
      ...(ca.value === undefined ? {} : { ca: ca.value }),
      ...(pair === undefined ? {} : { cert: pair.cert, key: pair.key }),
      ...(servername === null ? {} : { servername }),
      rejectUnauthorized: true,
      minVersion: 'TLSv1.2',
    },
  };
}

/** As readUpstreamTls, for a transport being built: a problem is thrown (serve and check report it first). */
export function upstreamTlsOrThrow(config: UpstreamTlsSource): UpstreamTlsOptions | undefined {
  const read = readUpstreamTls(config);
  if (!read.ok) throw new Error(read.problem);
  return read.value;
}

export type { ConnectionOptions };

/**
 * For the start-up probe (node's fetch): an undici Agent with `upstream.tls`, so the probe trusts
 * what the transports trust; nothing for a plain upstream (undici is then not loaded).
 */
export async function probeDispatcher(config: UpstreamTlsSource): Promise<{ dispatcher?: unknown; close(): Promise<void> }> {
  const read = readUpstreamTls(config);
  if (!read.ok || read.value === undefined) return { close: async () => {} };
  const { Agent } = await import('undici');
  const agent = new Agent({ connect: { ...read.value } });
  return { dispatcher: agent, close: () => agent.close() };
}
