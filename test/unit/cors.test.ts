// The cors policy's decisions, with inline config and no sockets: the chain's answer to a
// preflight, the fields every exchange gets, and the config rules.
import t from 'tap';
import { parsePolicy } from '../../src/config/load.js';
import { mergeVary } from '../../src/core/headers.js';
import { LocalReply, type IncomingHeaders } from '../../src/core/policy.js';
import { createGateway } from '../../src/gateway.js';

const APP = 'https://app.example.com';

function chainOf(cors: Record<string, unknown> | undefined) {
  const text = JSON.stringify({ version: 1, policies: { auth: { keysFromEnv: 'K' }, ...(cors === undefined ? {} : { cors }) } });
  const loaded = parsePolicy(text, { env: { K: 'unit_key_0123456789abcdef' } });
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  return createGateway(loaded.config, { env: { K: 'unit_key_0123456789abcdef' } }).chain;
}

const preflight = (origin: string): IncomingHeaders => ({ origin, 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' });

t.test('a preflight from an allowed origin is a local 204, before authentication', async (t) => {
  const chain = chainOf({ origins: [APP], maxAgeSeconds: 60 });
  const { ex, error, reply } = chain.begin({ method: 'OPTIONS', target: '/v1/pets', headers: preflight(APP) });
  t.equal(error, undefined);
  t.ok(reply instanceof LocalReply);
  t.equal(reply?.status, 204);
  t.match(reply?.headers, { 'access-control-allow-methods': 'GET, POST', 'access-control-max-age': '60', 'access-control-allow-headers': /Authorization/ });
  t.equal(ex.responseHeaders['access-control-allow-origin'], APP);
  t.equal(ex.responseHeaders['access-control-expose-headers'], undefined, 'no Expose-Headers on a preflight');
  t.equal(ex.deniedBy, undefined, 'a local reply is not a denial');
});

t.test('another origin: no CORS field, the chain goes on (401)', async (t) => {
  const chain = chainOf({ origins: [APP] });
  const { ex, error, reply } = chain.begin({ method: 'OPTIONS', target: '/v1/pets', headers: preflight('https://evil.example') });
  t.equal(reply, undefined);
  t.equal(error?.code, 'missing_api_key');
  t.equal(ex.responseHeaders['access-control-allow-origin'], undefined);
  t.equal(ex.responseHeaders.vary, 'Origin');
});

t.test('a denial to an allowed origin carries Allow-Origin and Expose-Headers', async (t) => {
  const chain = chainOf({ origins: [APP], credentials: true, exposeHeaders: ['X-Request-Id'] });
  const { ex, error } = chain.begin({ method: 'GET', target: '/v1/pets', headers: { origin: APP } });
  t.equal(error?.code, 'missing_api_key');
  t.match(ex.responseHeaders, { 'access-control-allow-origin': APP, 'access-control-allow-credentials': 'true', 'access-control-expose-headers': 'X-Request-Id', vary: 'Origin' });
});

t.test('"*" without credentials answers the literal *; an OPTIONS without a request method is no preflight', async (t) => {
  const chain = chainOf({ origins: ['*'] });
  const { ex, reply, error } = chain.begin({ method: 'OPTIONS', target: '/v1/pets', headers: { origin: 'http://any.example' } });
  t.equal(reply, undefined);
  t.equal(error?.code, 'missing_api_key');
  t.equal(ex.responseHeaders['access-control-allow-origin'], '*');
});

t.test('no section (or no origins): no field at all', async (t) => {
  for (const cors of [undefined, {}]) {
    const { ex, reply } = chainOf(cors).begin({ method: 'OPTIONS', target: '/v1/pets', headers: preflight(APP) });
    t.equal(reply, undefined);
    t.strictSame(Object.keys(ex.responseHeaders).filter((h) => h.startsWith('access-control') || h === 'vary'), []);
  }
});

t.test('config: "*" with credentials, and origins with a path, are refused', async (t) => {
  const star = parsePolicy('version: 1\npolicies: { cors: { origins: ["*"], credentials: true } }\n', { env: {} });
  t.notOk(star.ok);
  t.match(!star.ok && star.problems, [{ path: '$.policies.cors.origins', message: /credentials/ }]);
  const path = parsePolicy('version: 1\npolicies: { cors: { origins: ["https://a.example/app"] } }\n', { env: {} });
  t.notOk(path.ok);
});

t.test("mergeVary: the gateway's Origin joins the upstream's list (RFC 9110 section 12.5.5)", async (t) => {
  const cases: Array<[string | string[] | undefined, string | undefined, string]> = [
    [undefined, 'Origin', 'Origin'],
    ['Accept-Encoding', 'Origin', 'Accept-Encoding, Origin'],
    ['accept-encoding, ORIGIN', 'Origin', 'accept-encoding, ORIGIN'],
    [['Accept-Language', ' accept-encoding '], 'Origin', 'Accept-Language, accept-encoding, Origin'],
    ['*', 'Origin', '*'],
    ['Accept, *', 'Origin', '*'],
    ['Origin', 'Origin, Access-Control-Request-Method', 'Origin, Access-Control-Request-Method'],
    [' , ,', 'Origin', 'Origin'],
  ];
  for (const [upstream, own, want] of cases) t.equal(mergeVary(upstream, own), want, JSON.stringify([upstream, own]));
});
