/**
 * Which headers cross the gateway (src/core/headers.ts): the request
 * fields the upstream receives and the response fields the client gets, both by allowlist, with
 * X-Forwarded-* set by the gateway. Outputs are new objects; the inputs are never changed.
 */
import t from 'tap';
import fc from 'fast-check';
import { parsePolicy } from '../../src/config/load.js';
import {
  CONNECTION_PROTECTED,
  isValidHost,
  checkHeaderRules,
  clientResponseHeaders,
  compileHeaderRules,
  DEFAULT_REQUEST_ALLOW,
  DEFAULT_RESPONSE_ALLOW,
  type ClientView,
  type ConnectionInfo,
  type HeaderRules,
  tooManyHeaders,
  upstreamRequestHeaders,
} from '../../src/core/headers.js';
import type { Exchange } from '../../src/core/policy.js';

/** Only the fields the header functions read. */
function exchange(upstreamHeaders: Record<string, string | null> = {}, responseHeaders: Record<string, string> = {}, upstreamBody?: Buffer): Exchange & ClientView {
  return { upstreamHeaders, responseHeaders, upstreamBody, consumerId: undefined } as unknown as Exchange & ClientView;
}

function rules(requestAllow: string[] = [], responseAllow: string[] = [], trustedProxies: string[] = []): HeaderRules {
  return compileHeaderRules({ headers: { request: { allow: requestAllow }, response: { allow: responseAllow } }, server: { trustedProxies } });
}

const DEFAULT = rules();
const CONN: ConnectionInfo = { remoteAddress: '203.0.113.9', tls: false, host: 'gw.example' };
const GATEWAY_SET = { 'x-forwarded-for': '203.0.113.9', 'x-forwarded-proto': 'http', 'x-forwarded-host': 'gw.example' };

t.test('upstream request: only allowlisted fields, plus the gateway-set forwarding fields', async (t) => {
  const client = {
    host: 'gw.example',
    connection: 'keep-alive',
    'keep-alive': 'timeout=5',
    'proxy-connection': 'keep-alive',
    te: 'trailers',
    trailer: 'x',
    'transfer-encoding': 'chunked',
    upgrade: 'websocket',
    expect: '100-continue',
    'proxy-authorization': 'Basic cHJveHk=',
    'accept-encoding': 'gzip',
    authorization: 'Bearer client-key',
    cookie: 'sid=1',
    range: 'bytes=0-1',
    'x-http-method-override': 'DELETE',
    'x-original-url': '/admin',
    'x-rewrite-url': '/admin',
    'x-forwarded-for': '1.2.3.4',
    forwarded: 'for=1.2.3.4',
    'x-internal-debug': '1',
    accept: 'application/json',
    'accept-language': 'fr',
    'content-type': 'application/json',
    'content-length': '12',
    'user-agent': 'curl/8',
    'x-request-id': 'abc',
    traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    tracestate: 'k=v',
  };
  const before = { ...client };
  const out = upstreamRequestHeaders(DEFAULT, client, exchange(), CONN);
  t.strictSame(out, {
    accept: 'application/json',
    'accept-language': 'fr',
    'content-type': 'application/json',
    'content-length': '12',
    'user-agent': 'curl/8',
    'x-request-id': 'abc',
    // The sampled flag is honoured only from a trusted proxy (it was passed as 01 before).
    traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00',
    tracestate: 'k=v',
    ...GATEWAY_SET,
  });
  t.strictSame(client, before, 'the client headers are not changed');
  t.strictSame([...DEFAULT_REQUEST_ALLOW].sort(), ['accept', 'accept-language', 'content-length', 'content-type', 'traceparent', 'tracestate', 'user-agent', 'x-request-id']);
});

t.test('upstream request: a field the Connection header names is removed, even if allowlisted', async (t) => {
  const out = upstreamRequestHeaders(DEFAULT, { connection: 'close, Accept-Language ,User-Agent', 'accept-language': 'fr', 'user-agent': 'a', accept: '*/*' }, exchange(), CONN);
  t.strictSame(out, { accept: '*/*', ...GATEWAY_SET });
  const arr = upstreamRequestHeaders(DEFAULT, { connection: ['close', 'user-agent'] as unknown as string, accept: '*/*', 'user-agent': 'u' }, exchange(), CONN);
  t.strictSame(arr, { accept: '*/*', ...GATEWAY_SET }, 'a Connection header given as an array');
  // A field the gateway checked or sets stays (these names were removable before).
  const kept = upstreamRequestHeaders(
    DEFAULT,
    { connection: 'content-type, Content-Length, x-request-id, accept, traceparent', 'content-type': 'application/json', 'content-length': '2', 'x-request-id': 'r', accept: '*/*' },
    exchange(),
    CONN,
  );
  t.strictSame(kept, { 'content-type': 'application/json', 'content-length': '2', 'x-request-id': 'r', accept: '*/*', ...GATEWAY_SET });
});

t.test('upstream request: the allowlist is extensible; override, forwarding and credential fields never are', async (t) => {
  const r = rules(['Cookie', 'X-Tenant', 'X-HTTP-Method-Override', 'authorization', 'host', 'accept-encoding', 'forwarded', 'connection']);
  const out = upstreamRequestHeaders(
    r,
    { cookie: 'a=1', 'x-tenant': 't', 'x-http-method-override': 'DELETE', authorization: 'Bearer k', host: 'h', 'accept-encoding': 'gzip', forwarded: 'for=x', connection: 'close' },
    exchange(),
    CONN,
  );
  t.strictSame(out, { cookie: 'a=1', 'x-tenant': 't', ...GATEWAY_SET });
  t.strictSame(
    checkHeaderRules({ headers: { request: { allow: ['X-Tenant', 'X-HTTP-Method-Override', 'Authorization'] }, response: { allow: ['Set-Cookie', 'access-control-allow-origin', 'x-ok'] } } }).map((p) => p.path),
    ['$.headers.request.allow[1]', '$.headers.request.allow[2]', '$.headers.response.allow[0]', '$.headers.response.allow[1]'],
    'a never-forwarded name in a list is a config problem, not silently ignored',
  );
});

t.test("upstream request: the policies' changes win; null removes; a rewritten body gets its own length", async (t) => {
  const out = upstreamRequestHeaders(
    DEFAULT,
    { authorization: 'Bearer client-key', accept: '*/*', 'user-agent': 'old', 'content-length': '99' },
    exchange({ authorization: 'Bearer upstream-secret', 'user-agent': null, 'x-new': 'v' }, {}, Buffer.from('{"a":1}')),
    CONN,
  );
  t.strictSame(out, { accept: '*/*', 'content-length': '7', authorization: 'Bearer upstream-secret', 'x-new': 'v', ...GATEWAY_SET });
});

t.test('upstream request: header names that are Object.prototype members are plain headers', async (t) => {
  const r = rules(['constructor', 'tostring', '__proto__x']);
  const out = upstreamRequestHeaders(r, { constructor: 'c', tostring: 't', __proto__x: 'p', hasownproperty: 'h' } as Record<string, string>, exchange({ authorization: null }), CONN);
  t.strictSame(Object.keys(out).sort(), ['__proto__x', 'constructor', 'tostring', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto']);
});

t.test('X-Forwarded-*: from an untrusted peer the gateway sets them from the connection', async (t) => {
  const client = { 'x-forwarded-for': '10.9.9.9', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.example', forwarded: 'for=10.9.9.9;proto=https' };
  t.strictSame(upstreamRequestHeaders(DEFAULT, client, exchange(), CONN), GATEWAY_SET);
  t.strictSame(upstreamRequestHeaders(DEFAULT, {}, exchange(), { remoteAddress: '::1', tls: true, host: undefined }), { 'x-forwarded-for': '::1', 'x-forwarded-proto': 'https' }, 'no Host: no X-Forwarded-Host');
  t.strictSame(upstreamRequestHeaders(DEFAULT, client, exchange(), { remoteAddress: undefined, tls: false, host: 'h' }), { 'x-forwarded-proto': 'http', 'x-forwarded-host': 'h' }, 'unknown peer: no For at all');
  const notInRange = rules([], [], ['10.0.0.0/8']);
  t.strictSame(upstreamRequestHeaders(notInRange, client, exchange(), CONN), GATEWAY_SET, 'a peer outside the trusted ranges');
});

t.test('X-Forwarded-*: from a trusted proxy the client values are kept and the peer appended', async (t) => {
  const r = rules([], [], ['10.0.0.0/8', '::1']);
  const client = { 'x-forwarded-for': '198.51.100.7, 10.1.1.1', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'shop.example', forwarded: 'for=198.51.100.7' };
  const conn = { remoteAddress: '10.0.0.2', tls: false, host: 'internal:8080' };
  t.strictSame(upstreamRequestHeaders(r, client, exchange(), conn), {
    'x-forwarded-for': '198.51.100.7, 10.1.1.1, 10.0.0.2',
    'x-forwarded-proto': 'https',
    'x-forwarded-host': 'shop.example',
    forwarded: 'for=198.51.100.7',
  });
  t.strictSame(upstreamRequestHeaders(r, {}, exchange(), conn), { 'x-forwarded-for': '10.0.0.2', 'x-forwarded-proto': 'http', 'x-forwarded-host': 'internal:8080' }, 'trusted but nothing sent');
  t.equal(upstreamRequestHeaders(r, { 'x-forwarded-for': '1.1.1.1' }, exchange(), { ...conn, remoteAddress: '::ffff:10.0.0.3' })['x-forwarded-for'], '1.1.1.1, ::ffff:10.0.0.3', 'IPv4-mapped IPv6 peer');
  t.equal(upstreamRequestHeaders(r, { 'x-forwarded-for': '1.1.1.1' }, exchange(), { ...conn, remoteAddress: '::1' })['x-forwarded-for'], '1.1.1.1, ::1');
});

t.test('trusted proxies: bad entries are config problems with their path, never a crash', async (t) => {
  t.strictSame(checkHeaderRules({ server: { trustedProxies: ['10.0.0.0/8', 'loopback', '::1/128'] } }), []);
  const p = checkHeaderRules({ server: { trustedProxies: ['10.0.0.0/8', '10.0.0.0/33', 'not-an-ip', '300.1.1.1'] } });
  t.strictSame(p.map((x) => x.path), ['$.server.trustedProxies[1]', '$.server.trustedProxies[2]', '$.server.trustedProxies[3]']);
  const r = parsePolicy('server: { trustedProxies: ["10.0.0.0/8", "bogus"] }\nheaders: { request: { allow: ["bad name", "X-Original-URL"] } }', { env: {} });
  t.equal(r.ok, false);
  if (!r.ok) {
    t.strictSame(
      r.problems.map((x) => x.path),
      ['$.headers.request.allow[0]', '$.server.trustedProxies[1]'],
      'a name that is not a token is a schema problem; the list is then not checked further',
    );
  }
  const ok = parsePolicy('server: { trustedProxies: ["10.0.0.0/8"] }\nheaders: { request: { allow: [X-Tenant] }, response: { allow: [X-RateLimit-Remaining] } }', { env: {} });
  t.equal(ok.ok, true);
  if (ok.ok) {
    const compiled = compileHeaderRules(ok.config);
    t.ok(compiled.requestAllow.has('x-tenant') && compiled.requestAllow.has('accept'), 'entries are added to the defaults, lower-cased');
    t.ok(compiled.responseAllow.has('x-ratelimit-remaining') && compiled.responseAllow.has('etag'));
    t.equal(compiled.trusted('10.2.3.4'), true);
    t.equal(compiled.trusted('11.2.3.4'), false);
  }
});

t.test('client response: only allowlisted upstream fields; the exchange headers set over', async (t) => {
  const upstream = {
    'content-type': 'application/json',
    'content-length': '42',
    'content-encoding': 'gzip',
    connection: 'keep-alive, ETag',
    'keep-alive': 'timeout=5',
    'transfer-encoding': 'chunked',
    'set-cookie': ['sid=1'],
    'x-backend-host': 'db-3',
    via: '1.1 varnish',
    server: 'legacy/1.0',
    'x-powered-by': 'PHP/5.2',
    'x-aspnet-version': '4.0',
    'access-control-allow-origin': '*',
    'strict-transport-security': 'max-age=0',
    deprecation: 'upstream says no',
    etag: '"1"',
    'cache-control': 'no-store',
    'last-modified': 'x',
    expires: '0',
    'retry-after': '5',
    vary: 'accept',
    'content-language': 'en',
  };
  const ex = exchange({}, { deprecation: '@1767225600', sunset: 'Thu, 05 Dec 2030 00:00:00 GMT' });
  t.strictSame(clientResponseHeaders(DEFAULT, upstream, ex), {
    'content-type': 'application/json',
    'content-length': '42',
    'content-encoding': 'gzip',
    'cache-control': 'no-store',
    'last-modified': 'x',
    expires: '0',
    'retry-after': '5',
    vary: 'accept',
    'content-language': 'en',
    deprecation: '@1767225600',
    sunset: 'Thu, 05 Dec 2030 00:00:00 GMT',
  }, 'etag is named by Connection: removed');
  t.equal(upstream.deprecation, 'upstream says no', 'the upstream headers are not changed');
  const rewritten = clientResponseHeaders(DEFAULT, upstream, ex, true);
  t.notOk('content-length' in rewritten || 'content-encoding' in rewritten, 'withoutLength: neither framing field of the old bytes');
  const extended = clientResponseHeaders(rules([], ['X-RateLimit-Remaining', 'Set-Cookie', 'Access-Control-Allow-Origin']), { 'x-ratelimit-remaining': '3', 'set-cookie': 'a', 'access-control-allow-origin': '*' }, exchange());
  t.strictSame(extended, { 'x-ratelimit-remaining': '3' }, 'extensible; Set-Cookie and Access-Control-* never');
  t.ok(DEFAULT_RESPONSE_ALLOW.includes('content-type'));
});

t.test('tooManyHeaders: more than 100 fields', async (t) => {
  const h = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`x-${i}`, 'v']));
  t.equal(tooManyHeaders(h(100)), false);
  t.equal(tooManyHeaders(h(101)), true);
});

// ---------------------------------------------------------------------------------------------
// Property: over generated header sets (fast-check; bounded runs, fixed seed).

const TRICKY = [
  'connection', 'keep-alive', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'proxy-authorization', 'expect', 'host', 'authorization', 'cookie', 'range',
  'accept-encoding', 'x-http-method-override', 'x-http-method', 'x-method-override', 'x-original-url', 'x-rewrite-url', 'x-original-method',
  'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'forwarded', 'x-real-ip', ...DEFAULT_REQUEST_ALLOW, 'x-tenant', 'x-extra',
];
const OVERRIDES = ['x-http-method-override', 'x-http-method', 'x-method-override', 'x-original-url', 'x-rewrite-url', 'x-original-method'];
const GATEWAY_FIELDS = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'forwarded']);
const token = fc.stringMatching(/^[a-z0-9-]{1,12}$/);
const name = fc.oneof(fc.constantFrom(...TRICKY), token);
const value = fc.stringMatching(/^[\x20-\x7e]{0,20}$/);
const peer = fc.oneof(fc.ipV4(), fc.constantFrom('10.1.2.3', '::1', '::ffff:10.0.0.9', '2001:db8::1'));

t.test('property: nothing outside allowlist ∪ gateway-set reaches the upstream; X-Forwarded-For is right', async (t) => {
  // Override and credential names listed too: compileHeaderRules must still never forward them.
  const r = rules(['x-tenant', 'cookie', ...OVERRIDES, 'authorization', 'host', 'accept-encoding'], [], ['10.0.0.0/8', '::1']);
  let trustedRuns = 0;
  fc.assert(
    fc.property(
      fc.dictionary(name, value, { maxKeys: 20 }),
      fc.subarray(TRICKY),
      peer,
      fc.boolean(),
      (generated, connectionNames, address, tls) => {
        const incoming: Record<string, string> = { ...generated };
        if (connectionNames.length > 0) incoming.connection = connectionNames.map((n) => n.toUpperCase()).join(', ');
        const out = upstreamRequestHeaders(r, incoming, exchange(), { remoteAddress: address, tls, host: incoming.host });
        const trusted = address.startsWith('10.') || address === '::1' || address === '::ffff:10.0.0.9';
        if (trusted) trustedRuns++;
        for (const field of Object.keys(out)) {
          if (!r.requestAllow.has(field) && !GATEWAY_FIELDS.has(field)) return false;
          if (OVERRIDES.includes(field) || field === 'authorization' || field === 'host' || field === 'accept-encoding') return false;
          if (connectionNames.includes(field) && !GATEWAY_FIELDS.has(field) && !CONNECTION_PROTECTED.has(field)) return false;
          if (field !== 'x-forwarded-for' && field !== 'x-forwarded-proto' && field !== 'x-forwarded-host' && field !== 'forwarded' && out[field] !== incoming[field]) return false;
        }
        const prior = incoming['x-forwarded-for'];
        const expectedFor = trusted && prior !== undefined && prior.trim() !== '' ? `${prior}, ${address}` : address;
        if (out['x-forwarded-for'] !== expectedFor) return false;
        if (!trusted && ('forwarded' in out || out['x-forwarded-proto'] !== (tls ? 'https' : 'http'))) return false;
        if (!trusted && out['x-forwarded-host'] !== (incoming.host === undefined || incoming.host === '' || !isValidHost(incoming.host) ? undefined : incoming.host)) return false;
        return true;
      },
    ),
    { numRuns: 1000, seed: 12 },
  );
  t.ok(trustedRuns > 50 && trustedRuns < 950, `both trusted and untrusted peers were generated (${trustedRuns} of 1000 trusted)`);
});

t.test('property: nothing outside the response allowlist reaches the client but the gateway own', async (t) => {
  fc.assert(
    fc.property(fc.dictionary(fc.oneof(fc.constantFrom('set-cookie', 'server', 'via', 'access-control-allow-origin', 'strict-transport-security', ...DEFAULT_RESPONSE_ALLOW), token), value, { maxKeys: 20 }), fc.boolean(), (upstream, withoutLength) => {
      const out = clientResponseHeaders(DEFAULT, upstream, exchange({}, { deprecation: 'true' }), withoutLength);
      for (const field of Object.keys(out)) {
        if (field === 'deprecation') continue;
        if (!DEFAULT.responseAllow.has(field)) return false;
        if (withoutLength && (field === 'content-length' || field === 'content-encoding')) return false;
      }
      return out.deprecation === 'true';
    }),
    { numRuns: 500, seed: 12 },
  );
  t.pass('500 generated header sets');
});
