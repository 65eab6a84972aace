/**
 * Which client a failed authentication is charged to.
 *
 * Behind a load balancer every request has the balancer as its TCP peer: keyed on the peer, one
 * guesser would lock out every client of that balancer. The client is therefore the address
 * resolved through `server.trustedProxies` (proxy-addr: the nearest X-Forwarded-For entry that is
 * not a trusted proxy), and from an untrusted peer the peer itself, so a client cannot choose whom
 * its failures are charged to by writing X-Forwarded-For.
 *
 * An IPv6 host usually owns a whole /64 (RFC 4291 section 2.5.1, RFC 8981 temporary addresses),
 * so rotating addresses inside it would evade a per-address lock: IPv6 clients are grouped by /64.
 * IPv4-mapped IPv6 addresses (`::ffff:192.0.2.1`, as a dual-stack socket reports them) count as
 * the IPv4 address they carry.
 */
import { isIPv4, isIPv6 } from 'node:net';
import proxyAddr from 'proxy-addr';
import type { RequestHead } from '../../core/policy.js';

/** The key a failure is counted under: an IPv4 address, or an IPv6 /64 as `a:b:c:d::/64`. */
export function clientKey(address: string): string {
  if (isIPv4(address)) return address;
  const zoneless = address.replace(/%.*$/, '').toLowerCase();
  if (!isIPv6(zoneless)) return address;
  const groups = expandIPv6(zoneless);
  // ::ffff:0:0/96, the IPv4-mapped range (RFC 4291 section 2.5.5.2).
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    const [hi = 0, lo = 0] = groups.slice(6);
    return [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff].join('.');
  }
  return `${groups.slice(0, 4).map((g) => g.toString(16)).join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address (an embedded dotted IPv4 tail included). */
function expandIPv6(address: string): number[] {
  let text = address;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted !== null) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = text.slice(0, dotted.index) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const parse = (s: string) => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

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
