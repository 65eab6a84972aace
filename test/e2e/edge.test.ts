/**
 * Edge hardening, end to end on every engine, over real sockets on 127.0.0.1:
 *
 * - node's own answers replaced by Error-shape ones (no Host, two Host, Expect other than
 *   100-continue, CONNECT, an upgrade request and one pipelined after it), the connection closed
 *   when its framing cannot be trusted;
 * - the request header allowlist, Connection-named fields, X-Forwarded-* and trusted proxies;
 * - the response header allowlist on 2xx, Content-Length true to the body;
 * - createPet bodies in UTF-8 only (charset 415 before the upstream, invalid UTF-8 and BOM 400);
 * - the gateway's upstream credential refused (502 upstream_auth_failed, never echoed) and
 *   a forwarded client key refused (401 with a Bearer challenge);
 * - invalid upstream statuses (999, 600, an unasked 101) -> 502 at once;
 * - a slow-reading client is not an upstream failure; large error bodies do not raise RSS;
 *   retryIdempotent never retries a GET that got (part of) an answer;
 * - repeated `status` members dropped under a status filter.
 */
import t from 'tap';
import { connect, type Socket } from 'node:net';
import type { ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { assertError, assertJson, type TapTest } from '../helpers/assert.js';
import {
  bearer,
  forEachEngine,
  JSON_TYPE,
  parseRawResponse,
  request,
  sendJson,
  startGateway,
  startStubUpstream,
  type Engine,
  type GatewayHandle,
  type StubHandler,
} from '../helpers/servers.js';

const MiB = 1024 * 1024;
const NEW_PET = '{"name":"Rex","categoryId":1}';
const PET = '{"id":1,"name":"Rex","categoryId":1,"status":"available"}';

// ---------------------------------------------------------------------------------------------
// Helpers

interface RawResult {
  readonly text: string;
  /** The server closed the connection (rather than the timeout here). */
  readonly closedByServer: boolean;
}

/** Writes raw bytes and collects what arrives until the server closes, or timeoutMs passes. */
function rawUntilClose(port: number, bytes: string | Buffer, timeoutMs = 3000): Promise<RawResult> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      socket.destroy();
    }, timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => undefined); // a reset after the answer: what arrived still counts
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ text: Buffer.concat(chunks).toString('utf8'), closedByServer: !timedOut });
    });
    socket.write(bytes);
  });
}

const responsesIn = (text: string) => text.match(/HTTP\/1\.1 \d{3} /g)?.length ?? 0;

/** Asserts that raw text is one Error response with this status and code. */
function assertRawError(t: TapTest, text: string, status: number, code: string): void {
  const r = parseRawResponse(text);
  t.equal(r.status, status, `HTTP status ${status}: ${text.slice(0, 120)}`);
  t.equal(r.headers['content-type'], JSON_TYPE, 'content-type of the Error');
  t.equal(r.headers['content-length'], String(Buffer.byteLength(r.body)), 'content-length true to the body');
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(r.body) as Record<string, unknown>;
  } catch {
    t.fail(`the body is JSON: ${r.body}`);
  }
  t.strictSame(Object.keys(body).sort(), ['code', 'message', 'status'], 'exactly code, message, status');
  t.equal(body.code, code, 'code');
  t.equal(body.status, status, 'status field equals the HTTP status');
}

/** A gateway in front of a stub whose behaviour can be swapped between subtests. */
async function switchable(t: TapTest, engine: Engine, upstream: Record<string, unknown> = {}, policy: Record<string, unknown> = {}, env: Record<string, string> = {}) {
  let current: StubHandler = (_r, res) => sendJson(res, 200, '[]');
  const stub = await startStubUpstream(t, (req, res, raw) => current(req, res, raw));
  const gw = await startGateway(t, { ...policy, upstream: { url: `${stub.origin}/v1`, ...upstream } }, { engine, env });
  return { stub, gw, use: (h: StubHandler) => (current = h) };
}

/**
 * Writes `size` bytes of `filler` between `head` and `tail`, respecting back-pressure; stops when the
 * connection closes. Returns the count of filler bytes handed to the socket so far.
 */
function pump(res: ServerResponse, size: number, head: string, tail: string, filler: Buffer): () => number {
  const total = size - head.length - tail.length;
  let left = total;
  let closed = false;
  res.on('close', () => (closed = true));
  res.write(head);
  const more = (): void => {
    while (!closed && left > 0) {
      const n = Math.min(left, filler.length);
      left -= n;
      if (!res.write(n === filler.length ? filler : filler.subarray(0, n))) return void res.once('drain', more);
    }
    if (!closed) res.end(tail);
  };
  more();
  return () => total - left;
}

const portOf = (gw: GatewayHandle) => Number(new URL(gw.url).port);

// ---------------------------------------------------------------------------------------------

forEachEngine(t, async (t, engine) => {
  t.test('what node answered itself is answered in the Error shape', async (t) => {
    const gw = await startGateway(t, {}, { engine });
    const port = portOf(gw);
    const get = `GET /v1/pets HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${gw.key}\r\n\r\n`;

    t.test('HTTP/1.1 without Host: 400, closed; a pipelined request is not served', async (t) => {
      const r = await rawUntilClose(port, `GET /v1/pets HTTP/1.1\r\nAuthorization: Bearer ${gw.key}\r\n\r\n${get}`);
      assertRawError(t, r.text, 400, 'invalid_request');
      t.ok(r.closedByServer, 'the server closed the connection');
      t.equal(responsesIn(r.text), 1, 'one answer only');
    });
    t.test('HTTP/1.0 without Host is fine', async (t) => {
      const r = await rawUntilClose(port, `GET /v1/pets HTTP/1.0\r\nAuthorization: Bearer ${gw.key}\r\n\r\n`);
      t.equal(parseRawResponse(r.text).status, 200);
    });
    t.test('two Host headers: 400 (RFC 9112 section 3.2), closed', async (t) => {
      const r = await rawUntilClose(port, `GET /v1/pets HTTP/1.1\r\nHost: a\r\nhost: b\r\nAuthorization: Bearer ${gw.key}\r\n\r\n${get}`);
      assertRawError(t, r.text, 400, 'invalid_request');
      t.ok(r.closedByServer, 'the server closed the connection');
      t.equal(responsesIn(r.text), 1, 'one answer only');
    });
    t.test('Expect: 200-ok: 417 expectation_failed, closed', async (t) => {
      const r = await rawUntilClose(
        port,
        `POST /v1/pets HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${gw.key}\r\nExpect: 200-ok\r\nContent-Type: application/json\r\nContent-Length: ${NEW_PET.length}\r\n\r\n${NEW_PET}`,
      );
      assertRawError(t, r.text, 417, 'expectation_failed');
      t.ok(r.closedByServer, 'the server closed the connection');
    });
    t.test('Expect: 100-continue still works', async (t) => {
      const r = await rawUntilClose(port, `GET /v1/pets HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${gw.key}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`);
      t.match(r.text, /HTTP\/1\.1 200 /, 'answered');
    });
    t.test('CONNECT: 501 not_implemented, closed', async (t) => {
      const r = await rawUntilClose(port, `CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nAuthorization: Bearer ${gw.key}\r\n\r\n`);
      assertRawError(t, r.text, 501, 'not_implemented');
      t.ok(r.closedByServer, 'the server closed the connection');
    });
    t.test('an upgrade request is answered as any other, with Connection: close; the pipelined one is not left hanging', async (t) => {
      const upgrade = `GET /v1/pets HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${gw.key}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`;
      const r = await rawUntilClose(port, upgrade + get);
      const first = parseRawResponse(r.text);
      t.equal(first.status, 200, 'the request itself is served (the Upgrade field is ignored, RFC 9110 section 7.8)');
      t.equal(first.headers.connection?.toLowerCase(), 'close', 'Connection: close tells the client the pipelined request was not processed');
      t.ok(r.closedByServer, 'the server closed the connection (not left open with the pipelined request unread)');
      const noKey = await rawUntilClose(port, 'GET /v1/pets HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
      assertRawError(t, noKey.text, 401, 'missing_api_key');
      t.ok(noKey.closedByServer, 'closed');
    });
    t.test('an Upgrade field without Connection: upgrade changes nothing: both pipelined requests served', async (t) => {
      const r = await rawUntilClose(port, `GET /v1/pets HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${gw.key}\r\nUpgrade: websocket\r\n\r\n${get.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n')}`);
      t.equal(responsesIn(r.text), 2, 'two answers');
    });
  });

  t.test('request headers by allowlist, X-Forwarded-* from the connection', async (t) => {
    const { stub, gw } = await switchable(t, engine, {}, { headers: { request: { allow: ['X-Tenant', 'X-Named'] } } });
    const last = () => stub.requests[stub.requests.length - 1]!.headers;
    const res = await request(`${gw.url}/v1/pets`, {
      headers: bearer(gw.key, {
        'x-http-method-override': 'DELETE',
        'x-original-url': '/admin',
        'x-rewrite-url': '/admin',
        cookie: 'session=1',
        range: 'bytes=0-1',
        'x-custom': 'nope',
        'x-tenant': 't1',
        'x-named': 'goes',
        connection: 'keep-alive, X-Named',
        accept: 'application/json',
        'accept-language': 'fr',
        'user-agent': 'edge-test',
        'x-forwarded-for': '6.6.6.6',
        'x-forwarded-proto': 'https',
        'x-forwarded-host': 'evil.example',
        forwarded: 'for=6.6.6.6',
      }),
    });
    assertJson(t, res, 200);
    const h = last();
    for (const name of ['x-http-method-override', 'x-original-url', 'x-rewrite-url', 'cookie', 'range', 'x-custom', 'forwarded', 'authorization']) {
      t.notOk(name in h, `${name} never arrives`);
    }
    t.notOk('x-named' in h, 'a field named in Connection is removed, even when allowed (RFC 9110 section 7.6.1)');
    t.equal(h['x-tenant'], 't1', 'headers.request.allow adds a field');
    t.equal(h.accept, 'application/json');
    t.equal(h['accept-language'], 'fr');
    t.equal(h['user-agent'], 'edge-test');
    t.equal(h['x-forwarded-for'], '127.0.0.1', "X-Forwarded-For is the peer's address, the client's ignored");
    t.equal(h['x-forwarded-proto'], 'http');
    t.equal(h['x-forwarded-host'], `127.0.0.1:${portOf(gw)}`, "X-Forwarded-Host is the client's Host");

    t.test('an override header in headers.request.allow is refused at load', async (t) => {
      await t.rejects(startGateway(t, { headers: { request: { allow: ['X-HTTP-Method-Override'] } } }, { engine }), /headers\.request\.allow/);
    });
    t.test('with server.trustedProxies: [127.0.0.1], the client values are kept and appended to', async (t) => {
      const trusted = await switchable(t, engine, {}, { server: { trustedProxies: ['127.0.0.1'] } });
      const r = await request(`${trusted.gw.url}/v1/pets`, {
        headers: bearer(trusted.gw.key, { 'x-forwarded-for': '6.6.6.6', 'x-forwarded-proto': 'https', 'x-forwarded-host': 'shop.example' }),
      });
      assertJson(t, r, 200);
      const th = trusted.stub.requests[0]!.headers;
      t.equal(th['x-forwarded-for'], '6.6.6.6, 127.0.0.1');
      t.equal(th['x-forwarded-proto'], 'https');
      t.equal(th['x-forwarded-host'], 'shop.example');
    });
  });

  t.test('upstream response headers by allowlist on a 2xx', async (t) => {
    const { gw, use } = await switchable(t, engine);
    const leaky = {
      'set-cookie': 'sid=1',
      server: 'Apache/2.2',
      via: '1.1 backend',
      'x-powered-by': 'PHP/5',
      'access-control-allow-origin': '*',
      'strict-transport-security': 'max-age=0',
      'x-backend-host': 'db-7.internal',
      etag: '"v1"',
      'cache-control': 'no-store',
    };
    for (const [name, path, body] of [
      ['getPet (streamed)', '/v1/pets/1', PET],
      ['listPets (buffered)', '/v1/pets', `[${PET}]`],
    ] as const) {
      await t.test(name, async (t) => {
        use((_r, res) => sendJson(res, 200, body, leaky));
        const res = await request(gw.url + path, { headers: bearer(gw.key) });
        assertJson(t, res, 200);
        for (const h of ['set-cookie', 'server', 'via', 'x-powered-by', 'access-control-allow-origin', 'strict-transport-security', 'x-backend-host']) {
          t.notOk(h in res.headers, `no ${h}`);
        }
        t.equal(res.headers.etag, '"v1"', 'ETag passes');
        t.equal(res.headers['cache-control'], 'no-store', 'Cache-Control passes');
        t.equal(res.headers['content-length'], String(res.raw.length), 'Content-Length true to the body');
      });
    }
  });

  t.test('createPet bodies in UTF-8 only', async (t) => {
    const { stub, gw } = await switchable(t, engine);
    const post = (contentType: string, body: string | Buffer) =>
      request(`${gw.url}/v1/pets`, { method: 'POST', headers: bearer(gw.key, { 'content-type': contentType }), body });
    for (const cs of ['utf-7', 'utf-16', 'latin1']) {
      const res = await post(`application/json; charset=${cs}`, NEW_PET);
      assertError(t, res, 415, 'unsupported_media_type', { message: 'any' });
    }
    assertError(t, await post('application/json', Buffer.from([0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])), 400, 'malformed_json', { message: 'any' });
    assertError(t, await post('application/json', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(NEW_PET)])), 400, 'malformed_json', { message: /BOM|byte order mark/i });
    t.equal(stub.requests.length, 0, 'nothing reached the upstream');
  });

  t.test('the upstream refusing credentials', async (t) => {
    const CREDENTIAL = 'Bearer up-tok-9f3a';
    const refuse: StubHandler = (_r, res) => sendJson(res, 401, { code: 'invalid_api_key', message: `Invalid API key ${CREDENTIAL.slice(7)} (sent ${CREDENTIAL})`, status: 401 });
    t.test('fromEnv: 502 upstream_auth_failed, the credential never echoed', async (t) => {
      const { gw, use, stub } = await switchable(t, engine, {}, { policies: { auth: { upstreamAuthorization: { fromEnv: 'UP' } } } }, { UP: CREDENTIAL });
      use(refuse);
      const res = await request(`${gw.url}/v1/pets/1`, { headers: bearer(gw.key) });
      assertError(t, res, 502, 'upstream_auth_failed', { message: 'any', absent: ['www-authenticate'] });
      t.notMatch(res.raw.toString('latin1'), 'up-tok-9f3a', 'no part of the credential in the body');
      t.notMatch(JSON.stringify(res.headers), 'up-tok-9f3a', 'nor in a header');
      t.equal(stub.requests[0]?.headers.authorization, CREDENTIAL, 'the upstream did get the credential');
    });
    t.test('forward: a 401 Error with a Bearer challenge', async (t) => {
      const { gw, use } = await switchable(t, engine, {}, { policies: { auth: { upstreamAuthorization: 'forward' } } });
      use(refuse);
      const res = await request(`${gw.url}/v1/pets/1`, { headers: bearer(gw.key) });
      assertError(t, res, 401, 'invalid_api_key', { message: 'any' });
      t.match(res.headers['www-authenticate'], /^Bearer realm="petstore"/);
      t.notMatch(res.body, 'up-tok-9f3a');
    });
  });

  t.test('an invalid upstream status is a 502 at once', async (t) => {
    const { gw, use } = await switchable(t, engine, { timeouts: { connectMs: 1000, headersMs: 5000, bodyMs: 5000 } });
    const lines: Record<string, string> = {
      '999': 'HTTP/1.1 999 Odd\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
      '600': 'HTTP/1.1 600 Odd\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
      'a 101 nobody asked for': 'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n',
    };
    for (const [name, raw] of Object.entries(lines)) {
      await t.test(name, async (t) => {
        use((_r, _res, req) => req.socket.write(raw));
        const start = performance.now();
        const res = await request(`${gw.url}/v1/pets/1`, { headers: bearer(gw.key), timeoutMs: 8000 });
        const ms = performance.now() - start;
        t.equal(res.status, 502, `502 (${Math.round(ms)} ms)`);
        // undici refuses a 101 to a request without Upgrade as a socket error ("bad upgrade") before
        // the exchange sees a status; the transports map that to an invalid response too.
        const codes = ['bad_gateway'];
        const code = String((res.json as { code?: unknown } | undefined)?.code);
        t.ok(codes.includes(code), `code ${code} in ${codes.join(', ')}`);
        assertError(t, res, 502, code, { message: 'any' });
        t.ok(ms < 2000, `well under headersMs (5000): ${Math.round(ms)} ms`);
      });
    }
  });

  t.test('an element with two status members is dropped under a status filter', async (t) => {
    const { gw, use } = await switchable(t, engine);
    use((_r, res) =>
      sendJson(res, 200, '[{"id":1,"name":"a","categoryId":1,"status":"sold","status":"available"},{"id":2,"name":"b","categoryId":1,"status":"available"}]'),
    );
    const res = await request(`${gw.url}/v1/pets?status=available`, { headers: bearer(gw.key) });
    assertJson(t, res, 200);
    t.same((res.json as { id: number }[]).map((p) => p.id), [2], 'only the unambiguous element');
  });

  t.test('a slow-reading client is not an upstream failure', async (t) => {
    const SIZE = 16 * MiB;
    const filler = Buffer.alloc(64 * 1024, 'a');
    // The contract off: getPet then streams, so the client's stall reaches the upstream read (with
    // the contract on, the answer is read whole before a byte goes out and the client never stalls it).
    const { gw, use } = await switchable(
      t,
      engine,
      { timeouts: { connectMs: 1000, headersMs: 2000, bodyMs: 300 }, circuitBreaker: { failures: 1, coolDownMs: 30_000 } },
      { policies: { 'response-contract': { mode: 'off' } } },
    );
    use((req, res) => {
      if (req.url.endsWith('/pets/3')) return sendJson(res, 200, PET);
      res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': String(SIZE) });
      pump(res, SIZE, '{"id":1,"name":"', '","categoryId":1}', filler);
    });
    // A client that reads the head, then stops reading for well past bodyMs.
    const socket: Socket = connect(portOf(gw), '127.0.0.1');
    socket.on('error', () => undefined);
    t.teardown(() => socket.destroy());
    await new Promise<void>((r) => socket.once('connect', () => r()));
    socket.write(`GET /v1/pets/1 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${gw.key}\r\n\r\n`);
    await new Promise<void>((r) => socket.once('data', () => r()));
    socket.pause();
    await sleep(1500);
    socket.destroy();
    await sleep(200);
    const after = await request(`${gw.url}/v1/pets/3`, { headers: bearer(gw.key) });
    t.equal(after.status, 200, `the next request is served, not 503 (got ${after.status} ${after.body.slice(0, 100)})`);
  });

  t.test('large upstream error bodies are not buffered', async (t) => {
    const SIZE = 20 * MiB;
    const filler = Buffer.alloc(64 * 1024, 'x');
    const { gw, use } = await switchable(t, engine, { timeouts: { connectMs: 1000, headersMs: 5000, bodyMs: 5000 } });
    const written: (() => number)[] = [];
    use((_r, res) => {
      res.writeHead(404, { 'content-type': 'text/html', 'content-length': String(SIZE) });
      written.push(pump(res, SIZE, '<html>', '</html>', filler));
    });
    const gc = (globalThis as { gc?: () => void }).gc;
    gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    for (let i = 0; i < 20; i++) {
      const res = await request(`${gw.url}/v1/pets/${i + 10}`, { headers: bearer(gw.key), timeoutMs: 10_000 });
      assertError(t, res, 404, 'pet_not_found', { message: 'any' });
      peak = Math.max(peak, process.memoryUsage().rss);
    }
    gc?.();
    const growth = Math.max(peak, process.memoryUsage().rss) - before;
    t.ok(growth < 100 * MiB, `RSS grew by ${(growth / MiB).toFixed(1)} MiB over 20 x 20 MiB 404s (bound 100 MiB)`);
    await sleep(200);
    const sent = written.reduce((sum, w) => sum + w(), 0);
    // The gateway reads what the error mapping needs (16 KiB) and aborts the rest: the stub cannot
    // hand over more than socket buffers hold, far from the 400 MiB it was asked to send.
    t.equal(written.length, 20, 'twenty 404s were served');
    t.ok(sent < 5 * SIZE, `the stub could write ${(sent / MiB).toFixed(1)} MiB of 400 MiB: the rest was not read`);
  });

  t.test('retryIdempotent never retries a GET that got an answer', async (t) => {
    const { gw, use, stub } = await switchable(t, engine, { retryIdempotent: true, timeouts: { connectMs: 1000, headersMs: 2000, bodyMs: 2000 } });
    const cases: Record<string, StubHandler> = {
      'a 503': (_r, res) => sendJson(res, 503, { message: 'busy' }),
      'a head, then the connection dies': (_r, res, raw) => {
        res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': '100' });
        res.flushHeaders();
        setTimeout(() => raw.socket.destroy(), 50);
      },
      'part of a body, then the connection dies': (_r, res, raw) => {
        res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': '100' });
        res.write('[{"id":1', () => raw.socket.destroy());
      },
    };
    for (const [name, handler] of Object.entries(cases)) {
      await t.test(name, async (t) => {
        use(handler);
        const before = stub.requests.length;
        await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key) }).catch(() => undefined);
        await sleep(300);
        t.equal(stub.requests.length - before, 1, 'the upstream received exactly one request');
      });
    }
  });
});
