/**
 * The brute-force lock keys on the real client: resolved through trusted
 * proxies, IPv6 grouped by /64, never the proxy; and the start-up warning for an exposed listener.
 */
import t from 'tap';
import { Chain } from '../helpers/chain.js';
import { auth, bruteForceExposureWarning, clientKey, hashKey, type AuthConfig } from '../../src/policies/auth/index.js';

const GOOD = 'psg_good-key-0123456789';

function setup(trustedProxies: string[] | undefined) {
  const cfg: AuthConfig = {
    keys: [{ id: 'good', hash: hashKey(GOOD) }],
    keysFromEnv: null,
    registry: null,
    realm: 'petstore',
    upstreamAuthorization: 'drop',
    bruteForce: { maxFailures: 3, windowSeconds: 60 },
  };
  const now = Date.parse('2027-03-01T12:00:00Z');
  const chain = new Chain([auth.create(cfg, { env: {}, now: () => now, ...(trustedProxies === undefined ? {} : { trustedProxies }) })]);
  return (key: string, peer: string, xff?: string) =>
    chain.begin({
      method: 'GET',
      target: '/v1/pets',
      headers: { authorization: `Bearer ${key}`, ...(xff === undefined ? {} : { 'x-forwarded-for': xff }) },
      remoteAddress: peer,
    }).error?.code;
}

t.test('clientKey: IPv4 as is, IPv6 by /64, IPv4-mapped as IPv4, zones dropped', async (t) => {
  const table: [string, string][] = [
    ['192.0.2.7', '192.0.2.7'],
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:db8:1:2:ffff:eeee:dddd:cccc', '2001:db8:1:2::/64'],
    ['2001:DB8:1:2:0:0:0:9', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::ffff:192.0.2.9', '192.0.2.9'],
    ['::ffff:c000:209', '192.0.2.9'],
    ['not-an-address', 'not-an-address'],
  ];
  for (const [input, key] of table) t.equal(clientKey(input), key, input);
});

t.test('behind a trusted proxy: the guesser is locked, another client of the same proxy is not', async (t) => {
  const call = setup(['10.0.0.1']);
  for (let i = 0; i < 3; i++) t.equal(call(`psg_guess-${i}`, '10.0.0.1', '203.0.113.5'), 'invalid_api_key');
  t.equal(call(GOOD, '10.0.0.1', '203.0.113.5'), 'too_many_auth_failures', 'the guesser, valid key or not');
  t.equal(call(GOOD, '10.0.0.1', '203.0.113.6'), undefined, 'another client behind the same proxy');
  t.equal(call(GOOD, '10.0.0.1'), undefined, 'the proxy itself (no X-Forwarded-For) is not locked');
  // The client's own X-Forwarded-For entries before the proxy's are not trusted: the nearest
  // untrusted address is the client, whatever it prepends.
  t.equal(call(GOOD, '10.0.0.1', '198.51.100.1, 203.0.113.5'), 'too_many_auth_failures', 'a forged prefix does not escape');
});

t.test('from an untrusted peer, X-Forwarded-For chooses nothing: failures are the peer\'s', async (t) => {
  const call = setup(['10.0.0.1']);
  for (let i = 0; i < 3; i++) t.equal(call(`psg_guess-${i}`, '192.0.2.50', `203.0.113.${i}`), 'invalid_api_key');
  t.equal(call(GOOD, '192.0.2.50', '203.0.113.99'), 'too_many_auth_failures', 'a new X-Forwarded-For does not unlock');
  t.equal(call(GOOD, '10.0.0.1', '203.0.113.0'), undefined, 'the forged addresses were never charged');
  const none = setup(undefined);
  for (let i = 0; i < 3; i++) none(`psg_guess-${i}`, '192.0.2.60', '203.0.113.7');
  t.equal(none(GOOD, '192.0.2.61', '203.0.113.7'), undefined, 'no proxy trusted: X-Forwarded-For ignored');
});

t.test('rotating addresses inside one IPv6 /64 does not evade the lock; the next /64 is not locked', async (t) => {
  const call = setup([]);
  for (let i = 1; i <= 3; i++) t.equal(call(`psg_guess-${i}`, `2001:db8:1:2::${i.toString(16)}`), 'invalid_api_key');
  t.equal(call(GOOD, '2001:db8:1:2:abcd::99'), 'too_many_auth_failures', 'same /64');
  t.equal(call(GOOD, '2001:db8:1:3::1'), undefined, 'neighbouring /64');
});

t.test('bruteForceExposureWarning: only lock on, listener not loopback, no proxy trusted', async (t) => {
  const cfg = (host: string, trustedProxies: string[], bruteForce: unknown = { maxFailures: 100, windowSeconds: 60 }) => ({
    server: { host, trustedProxies },
    policies: { auth: { bruteForce } },
  });
  t.match(bruteForceExposureWarning(cfg('0.0.0.0', [])), /trustedProxies/);
  t.match(bruteForceExposureWarning(cfg('::', [])), /trustedProxies/);
  t.match(bruteForceExposureWarning(cfg('10.1.2.3', [])), /trustedProxies/);
  t.equal(bruteForceExposureWarning(cfg('0.0.0.0', ['10.0.0.0/8'])), undefined, 'a proxy is trusted');
  t.equal(bruteForceExposureWarning(cfg('0.0.0.0', [], null)), undefined, 'lock off');
  for (const host of ['127.0.0.1', '127.0.0.2', '::1', '[::1]', 'localhost']) t.equal(bruteForceExposureWarning(cfg(host, [])), undefined, host);
  t.match(bruteForceExposureWarning(cfg('127.0.0.1', []), '0.0.0.0'), /trustedProxies/, 'the --host override is what counts');
});
