/**
 * TLS on the API listener, on every engine: HTTP/1.1 (node:https) and HTTP/2 (node:http2, curl
 * --http2) on one port through ALPN, the same answers as over plain HTTP, HSTS, mutual TLS, and a
 * plain-HTTP client answered with nothing that looks like HTTP. Certificates are made at run time.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { connect as h2connect, constants as h2c } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import type { ExchangeRecord } from '../../src/core/record.js';
import { h2CountsOf } from '../../src/tls/h2-streams.js';
import { LIMIT } from '../helpers/pet-store.js';
import { makeTestPki, h2Request, httpsRequest, type TestPki } from '../helpers/certs.js';
import { bearer, forEachEngine, JSON_TYPE, rawExchange, sendJson, startGateway, startStubUpstream, waitFor, type TeardownHost } from '../helpers/servers.js';

const pki: TestPki = makeTestPki(t);
const ca = pki.read(pki.ca);

function tlsPolicy(extra: Record<string, unknown> = {}, server: Record<string, unknown> = {}): Record<string, unknown> {
  return { server: { tls: { certFile: pki.server.cert, keyFile: pki.server.key }, hsts: { maxAgeSeconds: 31536000 }, ...server }, ...extra };
}

async function startTls(t: TeardownHost, engine: Parameters<typeof startGateway>[2] extends infer O ? (O extends { engine?: infer E } ? E : never) : never, policy: Record<string, unknown>) {
  const gw = await startGateway(t, policy, { engine });
  const { port } = gw.server.address() as AddressInfo;
  return { ...gw, port, origin: `https://127.0.0.1:${port}` };
}

/** curl's status, HTTP version and body (curl --http2 negotiates h2 through ALPN). */
function curl(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn('curl', ['-sS', '--max-time', '5', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.on('close', (code) => resolve({ code, out }));
  });
}

const UNAUTHORIZED = '{"code":"missing_api_key","message":"An API key is required: send Authorization: Bearer <key>.","status":401}';

forEachEngine(t, async (t, engine) => {
  t.test('HTTP/1.1 and HTTP/2 on one TLS port: the same answers, HSTS on each', async (t) => {
    const gw = await startTls(t, engine, tlsPolicy());
    for (const [name, send] of [
      ['https', (path: string, o: Parameters<typeof httpsRequest>[1]) => httpsRequest(gw.origin + path, o)],
      ['h2', (path: string, o: Parameters<typeof httpsRequest>[1]) => h2Request(gw.origin, path, o)],
    ] as const) {
      const denied = await send('/v1/pets', { ca });
      t.equal(denied.alpn, name === 'h2' ? 'h2' : false, `${name}: ALPN chose h2, or a client without ALPN got HTTP/1.1`);
      t.equal(denied.status, 401, `${name}: no key, 401`);
      t.equal(denied.body, UNAUTHORIZED, `${name}: the exact Error body`);
      t.equal(denied.headers['content-type'], JSON_TYPE);
      t.equal(denied.headers['strict-transport-security'], 'max-age=31536000', `${name}: HSTS on an error`);
      t.match(denied.headers['x-request-id'], /^\S+$/, `${name}: a request id`);
      const created = await send('/v1/pets', { ca, method: 'POST', headers: bearer(gw.key, { 'content-type': 'application/json' }) as Record<string, string>, body: '{"name":"Rex","categoryId":1,"status":"available"}' });
      t.equal(created.status, 201, `${name}: createPet`);
      t.match(JSON.parse(created.body), { name: 'Rex', categoryId: 1, status: 'available' });
      t.equal(created.headers['strict-transport-security'], 'max-age=31536000', `${name}: HSTS on a success`);
      const bad = await send('/v1/pets?limit=0', { ca, headers: bearer(gw.key) as Record<string, string> });
      t.equal(bad.status, 400, `${name}: a policy denial`);
      t.match(JSON.parse(bad.body), { code: 'invalid_query', status: 400 });
      if (name === 'h2') {
        for (const field of ['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection']) t.equal(denied.headers[field], undefined, `h2: no ${field}`);
      }
    }
  });

  t.test('the record (access log, metrics) of a request is the same over HTTP/2 and HTTP/1.1', async (t) => {
    const records: ExchangeRecord[] = [];
    const gw = await startGateway(t, tlsPolicy(), { engine, observer: { onEnd: (r) => void records.push(r) } });
    const origin = `https://127.0.0.1:${(gw.server.address() as AddressInfo).port}`;
    await httpsRequest(`${origin}/v1/pets?limit=5`, { ca, headers: bearer(gw.key) as Record<string, string> });
    await h2Request(origin, '/v1/pets?limit=5', { ca, headers: bearer(gw.key) as Record<string, string> });
    await httpsRequest(`${origin}/v1/pets/abc`, { ca });
    await h2Request(origin, '/v1/pets/abc', { ca });
    await waitFor('four records', () => records.length === 4, 3000);
    const view = (r: ExchangeRecord) => ({ method: r.method, route: r.route, operation: r.operation, status: r.status, errorCode: r.errorCode, rejectedBy: r.rejectedBy, bytesOut: r.bytesOut, consumer: r.consumer, limit: r.facts.get(LIMIT), clientAddress: r.clientAddress });
    t.strictSame(view(records[1]!), view(records[0]!), 'listPets: the same record');
    t.strictSame(view(records[3]!), view(records[2]!), 'a denial: the same record');
    t.match(view(records[2]!), { status: 401, errorCode: 'missing_api_key', rejectedBy: 'auth' });
    // What differs is recorded: the protocol the client spoke (the access line's `protocol`).
    t.strictSame(records.map((r) => r.protocol), ['1.1', '2.0', '1.1', '2.0'], 'the protocol of each request');
  });

  t.test('HTTP/2: a header list over server.maxHeaderBytes is reset, never forwarded', async (t) => {
    const stub = await startStubUpstream(t, (_req, res) => sendJson(res, 200, []));
    const gw = await startTls(t, engine, tlsPolicy({ upstream: { url: `${stub.origin}/v1` } }));
    const session = h2connect(gw.origin, { ca });
    t.teardown(() => session.destroy());
    session.on('error', () => {});
    // Our SETTINGS bind the client once it has acknowledged them (RFC 9113 section 6.5.3); before
    // that, node's default of 64 KiB applies (the next case).
    await new Promise((r) => session.once('remoteSettings', r));
    const send = (bytes: number) =>
      new Promise<number | undefined>((resolve) => {
        const st = session.request({ ':path': '/v1/pets', ...bearer(gw.key), 'x-big': 'a'.repeat(bytes) });
        st.on('error', () => {});
        st.on('response', (h) => resolve(Number(h[':status'])));
        st.on('close', () => resolve(undefined));
        st.resume();
      });
    t.equal(await send(20_000), undefined, 'no answer: the stream is reset');
    t.equal(await send(100), 200, 'the session goes on');
    const fresh = h2connect(gw.origin, { ca });
    t.teardown(() => fresh.destroy());
    fresh.on('error', () => {});
    const first = await new Promise<number | undefined>((resolve) => {
      const st = fresh.request({ ':path': '/v1/pets', ...bearer(gw.key), 'x-big': 'a'.repeat(70_000) });
      st.on('error', () => {});
      st.on('response', (h) => resolve(Number(h[':status'])));
      st.on('close', () => resolve(undefined));
    });
    t.equal(first, undefined, 'in the first flight, over 64 KiB: reset');
    t.equal(stub.requests.length, 1, 'only the normal request reached the upstream');
  });

  t.test('curl --http2 speaks HTTP/2 to it and verifies the certificate', async (t) => {
    const gw = await startTls(t, engine, tlsPolicy());
    const ok = await curl(['--http2', '--cacert', pki.ca, '-H', `Authorization: Bearer ${gw.key}`, '-w', '\n%{http_version} %{http_code}', `${gw.origin}/v1/pets`]);
    t.equal(ok.code, 0, ok.out);
    t.match(ok.out, /^\[\]\n2 200$/, 'HTTP/2, 200, the empty list');
    const local = await curl(['--http2', '--cacert', pki.ca, '-w', '\n%{http_version} %{http_code}', `https://localhost:${gw.port}/v1/pets`]);
    t.match(local.out, /"code":"missing_api_key"[^\n]*\n2 401$/, 'by name too (SAN localhost)');
    const untrusted = await curl(['--http2', `${gw.origin}/v1/pets`]);
    t.not(untrusted.code, 0, 'without the CA, curl refuses the certificate');
  });

  t.test('a plain-HTTP client gets nothing that looks like HTTP', async (t) => {
    const gw = await startTls(t, engine, tlsPolicy());
    const text = await rawExchange(gw.port, `GET /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${gw.key}\r\n\r\n`, 3000);
    t.notMatch(text, /HTTP\/|pets|code/, 'no HTTP status line, no body');
    t.ok(text.length < 16, `at most a TLS alert (${text.length} bytes)`);
  });

  t.test('upstream sees X-Forwarded-Proto https and :authority as the host', async (t) => {
    const stub = await startStubUpstream(t, (_req, res) => sendJson(res, 200, []));
    const gw = await startTls(t, engine, tlsPolicy({ upstream: { url: `${stub.origin}/v1` } }));
    const one = await h2Request(gw.origin, '/v1/pets', { ca, headers: bearer(gw.key) as Record<string, string> });
    t.equal(one.status, 200);
    const two = await httpsRequest(`${gw.origin}/v1/pets`, { ca, headers: bearer(gw.key) as Record<string, string> });
    t.equal(two.status, 200);
    t.equal(stub.requests.length, 2);
    for (const r of stub.requests) {
      t.equal(r.headers['x-forwarded-proto'], 'https');
      t.equal(r.headers['x-forwarded-host'], `127.0.0.1:${gw.port}`);
      for (const name of Object.keys(r.headers)) t.notMatch(name, /^:/, 'no pseudo-header upstream');
    }
  });

  t.test('HTTP/2 CONNECT: 501 not_implemented in the Error shape', async (t) => {
    const gw = await startTls(t, engine, tlsPolicy());
    const session = h2connect(gw.origin, { ca });
    t.teardown(() => session.destroy());
    session.on('error', () => {});
    const stream = session.request({ ':method': 'CONNECT', ':authority': 'example.com:443', ...bearer(gw.key) });
    stream.on('error', () => {});
    const chunks: Buffer[] = [];
    const status = await new Promise<number>((resolve) => stream.on('response', (h) => resolve(Number(h[':status']))));
    stream.on('data', (c: Buffer) => chunks.push(c));
    await new Promise((r) => stream.on('close', r));
    t.equal(status, 501);
    t.match(JSON.parse(Buffer.concat(chunks).toString('utf8')), { code: 'not_implemented', status: 501 });
  });

  t.test("a client's stream reset aborts the upstream call", async (t) => {
    let upstreamClosed = false;
    const stub = await startStubUpstream(t, (_req, res) => {
      res.on('close', () => (upstreamClosed = !res.writableFinished));
    });
    const gw = await startTls(t, engine, tlsPolicy({ upstream: { url: `${stub.origin}/v1` } }));
    const session = h2connect(gw.origin, { ca });
    t.teardown(() => session.destroy());
    session.on('error', () => {});
    const stream = session.request({ ':path': '/v1/pets', ...bearer(gw.key) });
    stream.on('error', () => {});
    await waitFor('the upstream call', () => stub.requests.length === 1, 3000);
    stream.close(h2c.NGHTTP2_CANCEL);
    await waitFor('the upstream call to close', () => upstreamClosed, 3000);
    t.ok(upstreamClosed, 'the upstream request was closed before it was answered');
  });

  t.test('mutual TLS: clientCaFile asks every client for a certificate', async (t) => {
    const gw = await startTls(t, engine, tlsPolicy({}, { tls: { certFile: pki.server.cert, keyFile: pki.server.key, clientCaFile: pki.ca } }));
    const client = { ca, cert: pki.read(pki.client.cert), key: pki.read(pki.client.key) };
    const ok = await h2Request(gw.origin, '/v1/pets', { ...client, headers: bearer(gw.key) as Record<string, string> });
    t.equal(ok.status, 200, 'with a certificate of the CA (h2)');
    const ok1 = await httpsRequest(`${gw.origin}/v1/pets`, { ...client, headers: bearer(gw.key) as Record<string, string> });
    t.equal(ok1.status, 200, 'with a certificate of the CA (HTTP/1.1)');
    await t.rejects(httpsRequest(`${gw.origin}/v1/pets`, { ca, headers: bearer(gw.key) as Record<string, string> }), 'without a certificate: no answer');
    await t.rejects(
      httpsRequest(`${gw.origin}/v1/pets`, { ca, cert: pki.read(pki.foreignClient.cert), key: pki.read(pki.foreignClient.key), headers: bearer(gw.key) as Record<string, string> }),
      'with a certificate of another CA: no answer',
    );
  });

  t.test('http2: false serves HTTP/1.1 only over TLS', async (t) => {
    const gw = await startTls(t, engine, tlsPolicy({}, { http2: false }));
    const r = await httpsRequest(`${gw.origin}/v1/pets`, { ca });
    t.equal(r.status, 401);
    t.equal(r.alpn, false, 'no ALPN protocol offered by the server');
    await t.rejects(h2Request(gw.origin, '/v1/pets', { ca, timeoutMs: 2000 }), 'an h2-only client is refused');
  });
});

// parity: the TLS parameters belong to the listening server that createNodeServer makes for every engine; the engine plays no part in a handshake
t.test('the cipher and version policy: AEAD suites only, TLS 1.2 minimum', async (t) => {
  const gw = await startTls(t, 'undici', tlsPolicy());
  const handshake = (options: ConnectionOptions) =>
    new Promise<{ version: string | null; cipher: string }>((resolve, reject) => {
      const socket = tlsConnect({ host: '127.0.0.1', port: gw.port, ca, ...options }, () => {
        resolve({ version: socket.getProtocol(), cipher: socket.getCipher().name });
        socket.destroy();
      });
      socket.on('error', reject);
    });
  t.match(await handshake({}), { version: 'TLSv1.3' }, 'TLS 1.3 when the client has it');
  t.match(await handshake({ maxVersion: 'TLSv1.2' }), { version: 'TLSv1.2', cipher: 'ECDHE-ECDSA-AES128-GCM-SHA256' }, 'TLS 1.2 with the first AEAD suite');
  await t.rejects(handshake({ maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-SHA256:ECDHE-ECDSA-AES256-SHA' }), 'CBC suites are refused');
  await t.rejects(handshake({ minVersion: 'TLSv1.1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT:@SECLEVEL=0' }), 'TLS 1.1 is refused');
});

// parity: HTTP/2 settings and flood limits belong to the listening server that createNodeServer makes for every engine; nghttp2 enforces them before any engine sees a request
t.test('HTTP/2 limits: advertised settings, and a rapid-reset flood ends the session while others are served', async (t) => {
  const gw = await startTls(t, 'undici', tlsPolicy());
  const session = h2connect(gw.origin, { ca });
  t.teardown(() => session.destroy());
  session.on('error', () => {});
  const settings = await new Promise<Record<string, unknown>>((resolve) => session.once('remoteSettings', (s) => resolve(s as Record<string, unknown>)));
  t.match(settings, { maxConcurrentStreams: 100, maxHeaderListSize: 16384, initialWindowSize: 65535, enablePush: false });

  // Rapid reset (CVE-2023-44487): streams opened and cancelled at once, far past any legitimate use.
  // node's client reads nothing from its socket while it has a write in progress: a flood written
  // without a pause learns nothing of the GOAWAY meanwhile, and once the server has closed the
  // connection (1.25 s after its GOAWAY) the client's next write fails (EPIPE) and its session
  // hangs with no event at all, which a flood slowed by a loaded machine ran into. So the flood goes
  // in bursts of 250 streams, each followed by a PING: the client reads everything the server sent
  // before the PING's ACK, a GOAWAY included. The gateway's bound is 500 resets within 10 s.
  let goaway: number | undefined;
  session.on('goaway', (code) => (goaway = code));
  const ended = () => goaway !== undefined || session.destroyed || session.closed;
  const deadline = Date.now() + 20_000;
  let sent = 0;
  for (let burst = 0; burst < 20 && !ended() && Date.now() < deadline; burst++) {
    for (let i = 0; i < 250 && !ended(); i++) {
      const st = session.request({ ':path': '/v1/pets', authorization: `Bearer ${gw.key}` });
      st.on('error', () => {});
      st.close(h2c.NGHTTP2_CANCEL);
      sent++;
      if (i % 100 === 99) await new Promise((r) => setImmediate(r));
    }
    if (ended()) break;
    // Bounded: the ACK, the session's end, or 5 s.
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        session.off('close', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, Math.min(5000, deadline - Date.now())));
      session.once('close', done);
      session.ping(done);
    });
  }
  await waitFor('the session to end', () => goaway !== undefined || session.destroyed, 5000).catch(() => undefined);
  t.ok(goaway !== undefined || session.destroyed, `the server ended the session (GOAWAY ${String(goaway)}) after ${sent} resets`);
  t.equal(h2CountsOf(gw.server)?.rapidReset, 1, "the gateway's own bound ended it (h2_rapid_reset)");
  const other = await h2Request(gw.origin, '/v1/pets', { ca, headers: bearer(gw.key) as Record<string, string> });
  t.equal(other.status, 200, 'another client is served');
});
