/**
 * Header rules against abuse: Host syntax, fields a Connection header cannot
 * remove, shared caches on authenticated answers, content codings, and trace sampling only from a
 * trusted proxy. Pure functions, no sockets.
 */
import t from 'tap';
import { acceptsCoding, clientResponseHeaders, type ClientView, compileHeaderRules, contentCoding, isValidHost, privateCacheControl, upstreamRequestHeaders } from '../../src/core/headers.js';
import type { Exchange } from '../../src/core/policy.js';

const RULES = compileHeaderRules({ headers: { request: { allow: [] }, response: { allow: [] } }, server: { trustedProxies: ['10.0.0.0/8'] } });

function exchange(consumerId?: string): Exchange & ClientView {
  return { upstreamHeaders: {}, responseHeaders: {}, upstreamBody: undefined, consumerId } as unknown as Exchange & ClientView;
}

t.test('isValidHost: RFC 9110 uri-host [":" port]', async (t) => {
  for (const ok of ['gw.example', 'gw.example:8080', '127.0.0.1:80', '[::1]', '[2001:db8::1]:443', 'xn--bcher-kva.example', 'a_b~c', '', undefined, 'h%20x', 'host:']) {
    t.ok(isValidHost(ok), `valid: ${String(ok)}`);
  }
  for (const bad of ['evil.example/path', 'a b', 'a\tb', 'x@y', 'a"b', '<script>', '[::1', '[zz::1]', '[1.2.3.4]', 'h:80:81', 'h:123456', 'h%zz', 'a\\b', 'x'.repeat(300), ['a', 'b']]) {
    t.notOk(isValidHost(bad as string), `invalid: ${JSON.stringify(bad).slice(0, 40)}`);
  }
});

t.test('isValidHost: the answer for a value never depends on the value checked before it', async (t) => {
  // The last valid value is remembered: a value checked right after a valid one, or a valid one
  // checked again after an invalid one, must get its own answer.
  const valid = ['gw.example:8080', '[::1]:443', '127.0.0.1:80'];
  const invalid = ['gw.example:8080 ', '[zz::1]:443', '127.0.0.1:80:81', 'gw.example:8080/x'];
  for (const a of valid) {
    for (const b of invalid) {
      t.ok(isValidHost(a), `valid: ${a}`);
      t.notOk(isValidHost(b), `invalid after ${a}: ${JSON.stringify(b)}`);
      t.notOk(isValidHost(b), `invalid twice: ${JSON.stringify(b)}`);
      t.ok(isValidHost(a), `valid again after ${JSON.stringify(b)}: ${a}`);
    }
  }
});

t.test('X-Forwarded-Host never carries a Host of invalid syntax, from the client or a trusted proxy', async (t) => {
  const untrusted = upstreamRequestHeaders(RULES, {}, exchange(), { remoteAddress: '192.0.2.1', tls: false, host: 'a b<x>' });
  t.equal(untrusted['x-forwarded-host'], undefined);
  const fromProxy = upstreamRequestHeaders(RULES, { 'x-forwarded-host': 'evil"host' }, exchange(), { remoteAddress: '10.0.0.1', tls: false, host: 'gw.example' });
  t.equal(fromProxy['x-forwarded-host'], 'gw.example', 'an invalid forwarded host falls back to the Host');
  const good = upstreamRequestHeaders(RULES, { 'x-forwarded-host': 'shop.example' }, exchange(), { remoteAddress: '10.0.0.1', tls: false, host: 'gw.example' });
  t.equal(good['x-forwarded-host'], 'shop.example');
});

t.test('traceparent: sampled only from a trusted proxy, ids kept', async (t) => {
  const sampled = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
  const ex = () => ({ ...exchange(), upstreamHeaders: { traceparent: sampled } }) as unknown as Exchange;
  const client = upstreamRequestHeaders(RULES, {}, ex(), { remoteAddress: '192.0.2.1', tls: false, host: 'h' });
  t.equal(client.traceparent, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00');
  const proxy = upstreamRequestHeaders(RULES, {}, ex(), { remoteAddress: '10.1.1.1', tls: false, host: 'h' });
  t.equal(proxy.traceparent, sampled);
});

t.test('privateCacheControl: RFC 9111 section 3.5 invitations become private, other directives kept', async (t) => {
  const table: [string | string[] | undefined, string | string[] | undefined][] = [
    ['public, max-age=31536000', 'private, max-age=31536000'],
    ['s-maxage=600, max-age=60', 'private, max-age=60'],
    ['max-age=60, must-revalidate', 'private, max-age=60, must-revalidate'],
    ['PUBLIC', 'private'],
    ['private, public, max-age=5', 'private, max-age=5'],
    ['private="x-a", public', 'private, private="x-a"'],
    [['public', 'max-age=1'], 'private, max-age=1'],
    ['no-store', 'no-store'],
    ['max-age=60', 'max-age=60'],
    ['no-cache, x-public-ext', 'no-cache, x-public-ext'],
    [undefined, undefined],
  ];
  for (const [input, out] of table) t.strictSame(privateCacheControl(input), out, JSON.stringify(input));
});

t.test('clientResponseHeaders: authenticated answers are private; Connection cannot strip what the gateway checks', async (t) => {
  const upstream = { 'content-type': 'application/json', 'cache-control': 'public, max-age=31536000', connection: 'content-type, cache-control, etag', etag: '"1"' };
  const authed = clientResponseHeaders(RULES, upstream, exchange('team-a'));
  t.strictSame(authed, { 'content-type': 'application/json', 'cache-control': 'private, max-age=31536000' }, 'etag named by Connection goes; the rest stays');
  const anonymous = clientResponseHeaders(RULES, upstream, exchange());
  t.equal(anonymous['cache-control'], 'public, max-age=31536000', 'no consumer: not an authenticated answer');
});

t.test('contentCoding and acceptsCoding (RFC 9110 sections 8.4 and 12.5.3)', async (t) => {
  t.equal(contentCoding(undefined), undefined);
  t.equal(contentCoding('identity'), undefined);
  t.equal(contentCoding(' GZIP '), 'gzip');
  t.equal(contentCoding(['gzip', 'br']), 'gzip,br');
  const table: [string | undefined, string, boolean][] = [
    [undefined, 'gzip', false],
    ['gzip', 'gzip', true],
    ['br, gzip;q=0.5', 'gzip', true],
    ['gzip;q=0', 'gzip', false],
    ['*', 'br', true],
    ['*;q=0', 'br', false],
    ['gzip;q=0, *', 'gzip', false],
    ['identity', 'gzip', false],
    ['deflate', 'gzip', false],
  ];
  for (const [accept, coding, ok] of table) t.equal(acceptsCoding(accept, coding), ok, `${String(accept)} accepts ${coding}: ${ok}`);
});
