/**
 * Which headers cross the gateway, as the adapters build them (src/core/headers.ts): the request
 * headers the upstream receives and the response headers the client gets. Both are new objects;
 * the inputs are never changed.
 */
import t from 'tap';
import { clientResponseHeaders, tooManyHeaders, upstreamRequestHeaders } from '../../src/core/headers.js';
import type { Exchange } from '../../src/core/policy.js';

/** Only the fields the header functions read. */
function exchange(upstreamHeaders: Record<string, string | null> = {}, responseHeaders: Record<string, string> = {}): Exchange {
  return { upstreamHeaders, responseHeaders } as unknown as Exchange;
}

t.test('upstream request: hop-by-hop, expect, proxy-authorization and accept-encoding never go upstream', async (t) => {
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
    accept: 'application/json',
    'x-request-id': 'abc',
    'content-type': 'application/json',
  };
  const before = { ...client };
  const out = upstreamRequestHeaders(client, exchange());
  t.strictSame(out, { host: 'gw.example', accept: 'application/json', 'x-request-id': 'abc', 'content-type': 'application/json' });
  t.strictSame(client, before, 'the client headers are not changed');
  t.not(out, client, 'a new object');
});

t.test('upstream request: what the adapter sets itself is left out', async (t) => {
  const out = upstreamRequestHeaders({ host: 'gw', 'content-length': '12', accept: '*/*' }, exchange(), new Set(['host', 'content-length']));
  t.strictSame(out, { accept: '*/*' });
});

t.test("upstream request: the policies' changes win; null removes a header", async (t) => {
  const out = upstreamRequestHeaders(
    { authorization: 'Bearer client-key', accept: '*/*', 'x-api-key': 'old' },
    exchange({ authorization: null, 'x-api-key': 'upstream-secret', 'x-new': 'v' }),
  );
  t.strictSame(out, { accept: '*/*', 'x-api-key': 'upstream-secret', 'x-new': 'v' });
  t.notOk('authorization' in out, "the client's key is not forwarded");
});

t.test('upstream request: header names that are Object.prototype members are plain headers', async (t) => {
  const out = upstreamRequestHeaders({ constructor: 'c', tostring: 't', __proto__x: 'p' } as Record<string, string>, exchange({ authorization: null }));
  t.strictSame(Object.keys(out).sort(), ['__proto__x', 'constructor', 'tostring']);
});

t.test('client response: hop-by-hop, Connection-named, server and x-powered-by dropped; the exchange headers set over', async (t) => {
  const upstream = {
    'content-type': 'application/json',
    'content-length': '42',
    connection: 'keep-alive, X-Internal',
    'keep-alive': 'timeout=5',
    'transfer-encoding': 'chunked',
    'x-internal': 'secret-route',
    server: 'legacy/1.0',
    'x-powered-by': 'PHP/5.2',
    deprecation: 'upstream says no',
    etag: '"1"',
  };
  const ex = exchange({}, { deprecation: '@1767225600', sunset: 'Thu, 05 Dec 2030 00:00:00 GMT' });
  const out = clientResponseHeaders(upstream, ex);
  t.strictSame(out, {
    'content-type': 'application/json',
    'content-length': '42',
    deprecation: '@1767225600',
    etag: '"1"',
    sunset: 'Thu, 05 Dec 2030 00:00:00 GMT',
  });
  t.equal(upstream.deprecation, 'upstream says no', 'the upstream headers are not changed');
  t.notOk('content-length' in clientResponseHeaders(upstream, ex, true), 'withoutLength: for a body the gateway rewrote');
});

t.test('tooManyHeaders: more than 100 fields', async (t) => {
  const h = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`x-${i}`, 'v']));
  t.equal(tooManyHeaders(h(100)), false);
  t.equal(tooManyHeaders(h(101)), true);
});
