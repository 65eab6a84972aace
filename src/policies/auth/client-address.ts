/**
 * Which client a failed authentication is charged to.
 *
 * Behind a load balancer every request has the balancer as its TCP peer: keyed on the peer, one
 * guesser would lock out every client of that balancer. The client is therefore the address
 * resolved through `server.trustedProxies` (proxy-addr: the nearest X-Forwarded-For entry that is
 * not a trusted proxy), and from an untrusted peer the peer itself, so a client cannot choose whom
 * its failures are charged to by writing X-Forwarded-For.
 *
 * IPv6 clients are grouped by /64 (`clientKey`, src/core/client-key.ts, shared with the
 * connection accounting of the fronts).
 */
import { isIPv4 } from 'node:net';
import proxyAddr from 'proxy-addr';
import type { RequestHead } from '../../core/policy.js';

export { clientKey } from '../../core/client-key.js';

/**
 * Resolves the client of a request: `(head) => address`, compiled once from the trusted proxies.
 * With none trusted it is the peer; undefined when the peer is unknown.
 */
export function clientResolver(trustedProxies: readonly string[]): (head: RequestHead) => string | undefined {
  if (trustedProxies.length === 0) return (head) => head.remoteAddress;
  const trust = proxyAddr.compile([...trustedProxies]);
  return (head) => {
    const peer = head.remoteAddress;
    if (peer === undefined) return undefined;
    // proxy-addr reads a node request; these two fields are all it reads.
    return proxyAddr({ headers: head.headers, socket: { remoteAddress: peer } } as unknown as Parameters<typeof proxyAddr>[0], trust);
  };
}

/** The wording of the start-up warning, or undefined when the lock keys on real clients. */
export function bruteForceExposureWarning(config: {
  readonly server: { readonly host: string; readonly trustedProxies: readonly string[] };
  readonly policies: { readonly auth: { readonly bruteForce: unknown } };
}, host = config.server.host): string | undefined {
  if (config.policies.auth.bruteForce === null || config.server.trustedProxies.length > 0) return undefined;
  if (isLoopback(host)) return undefined;
  return 'the brute-force lock keys on the TCP peer and server.trustedProxies is empty: behind a load balancer or reverse proxy one guesser locks out every client behind it; list the proxy in server.trustedProxies';
}

function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h === '::1') return true;
  return isIPv4(h) && h.startsWith('127.');
}
