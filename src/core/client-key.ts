/**
 * The key one client is counted under, for the limits that charge a client rather than a
 * connection (the brute-force lock, the refusal after a pipelining overflow).
 *
 * An IPv6 host usually owns a whole /64 (RFC 4291 section 2.5.1, RFC 8981 temporary addresses),
 * so rotating addresses inside it would evade a per-address limit: IPv6 clients are grouped by /64.
 * IPv4-mapped IPv6 addresses (`::ffff:192.0.2.1`, as a dual-stack socket reports them) count as
 * the IPv4 address they carry.
 */
import { isIPv4, isIPv6 } from 'node:net';

/** The key a client is counted under: an IPv4 address, or an IPv6 /64 as `a:b:c:d::/64`. */
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
