/**
 * Hostile clients against the standalone gateway, over raw sockets on 127.0.0.1: bodies over
 * `new-pet.maxBytes` (413, declared or chunked), heads over `server.maxHeaderBytes` (431),
 * slowloris (408 past `server.headersTimeoutMs` / `server.requestTimeoutMs`, then the socket is
 * closed), the `server.maxConnections` cap, request smuggling (ambiguous framing: 400 and closed,
 * never forwarded) and path tricks (never past authentication, never to an upstream path the
 * interface does not list).
 *
 * Every gateway sits in front of an in-process stub upstream that records what reaches it. Each
 * section runs against every engine (undici, fastify, http-proxy-3), which share the listening
 * socket (src/fronts/node-server.ts) and the exchange (src/core/exchange.ts), but each reads bodies
 * through its own front (src/fronts/node-http.ts, src/fronts/fastify.ts).
 */
import t from 'tap';
import { request as httpRequest, Agent, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { isInt64Text } from '../../src/core/contract.js';
import { assertError, type TapTest } from '../helpers/assert.js';
import { bearer, ENGINES, JSON_TYPE, parseRawResponse, request, sleep, startGateway, startStubUpstream, testKey, type Engine, type Response, type StubUpstream } from '../helpers/servers.js';


const PET = '{"id":1,"name":"Rex","categoryId":1}';
const NEW_PET = '{"name":"Rex","categoryId":1}';

// ---------------------------------------------------------------------------------------------
// Local helpers: a gateway on a chosen engine, raw socket sessions with timing, raw responses as
// the Response of the shared helpers (so assertError applies).

interface Gw {
  readonly url: string;
  readonly port: number;
  readonly key: string;
  readonly server: Server;
  readonly stub: StubUpstream;
}

/** A stub upstream that answers every operation correctly (and records every request). */
async function goodStub(t: TapTest): Promise<StubUpstream> {
  return startStubUpstream(t, (req, res) => {
    const body = req.method === 'POST' ? PET : req.url.startsWith('/v1/pets/') ? PET : '[]';
    res.writeHead(req.method === 'POST' ? 201 : 200, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
}

/** The gateway of `engine` on 127.0.0.1:0 in front of a fresh stub upstream, with policy overrides. */
async function startEngine(t: TapTest, engine: Engine, policy: Record<string, unknown> = {}): Promise<Gw> {
  const stub = await goodStub(t);
  const gw = await startGateway(t, { ...policy, upstream: { url: `${stub.origin}/v1` } }, { engine });
  return { url: gw.url, port: (gw.server.address() as AddressInfo).port, key: gw.key, server: gw.server, stub };
}

interface RawOutcome {
  /** Everything received. */
  readonly text: string;
  /** Milliseconds from connect to the first byte received, if any. */
  readonly firstByteMs: number | undefined;
  /** Milliseconds from connect to the close. */
  readonly closeMs: number;
  /** True when the server closed (or reset) the connection, false when our timeout cut it. */
  readonly closedByPeer: boolean;
  /** Bytes written after `first` (the trickled part) when the first byte arrived, or in all. */
  readonly trickledAtFirstByte: number | undefined;
  readonly trickled: number;
  /** A socket error other than a reset (a reset counts as a close by the peer). */
  readonly error: string | undefined;
}

interface RawOptions {
  /** Written one by one every `everyMs` after `first`, until the server answers or closes. */
  readonly trickle?: { readonly everyMs: number; readonly chunks: ReadonlyArray<string | Buffer> };
  /** Our own limit: past it the socket is destroyed (closedByPeer false). */
  readonly timeoutMs?: number;
}

/** One connection: writes `first`, optionally trickles more, and records what comes back and when. */
function rawSession(port: number, first: string | Buffer, options: RawOptions = {}): Promise<RawOutcome> {
  const timeoutMs = options.timeoutMs ?? 3000;
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let start = performance.now();
    let firstByteMs: number | undefined;
    let trickled = 0;
    let trickledAtFirstByte: number | undefined;
    let closedByPeer = true;
    let error: string | undefined;
    let trickleTimer: NodeJS.Timeout | undefined;
    const limit = setTimeout(() => {
      closedByPeer = false;
      socket.destroy();
    }, timeoutMs);
    socket.on('connect', () => {
      start = performance.now();
      socket.write(first);
      const queue = [...(options.trickle?.chunks ?? [])];
      const next = () => {
        if (firstByteMs !== undefined || socket.destroyed || !socket.writable) return;
        const chunk = queue.shift();
        if (chunk === undefined) return;
        socket.write(chunk);
        trickled += Buffer.byteLength(chunk);
        trickleTimer = setTimeout(next, options.trickle!.everyMs);
      };
      if (queue.length > 0) trickleTimer = setTimeout(next, options.trickle!.everyMs);
    });
    socket.on('data', (c: Buffer) => {
      if (firstByteMs === undefined) {
        firstByteMs = performance.now() - start;
        trickledAtFirstByte = trickled;
      }
      chunks.push(c);
    });
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'ECONNRESET' && err.code !== 'EPIPE') error = err.code ?? err.message;
    });
    socket.on('close', () => {
      clearTimeout(limit);
      clearTimeout(trickleTimer);
      resolve({
        text: Buffer.concat(chunks).toString('latin1'),
        firstByteMs,
        closeMs: performance.now() - start,
        closedByPeer,
        trickledAtFirstByte,
        trickled,
        error,
      });
    });
  });
}

/** A raw HTTP/1.1 response (one, with a Content-Length body) as the shared Response. */
function asResponse(text: string): Response {
  const p = parseRawResponse(text);
  let json: unknown;
  try {
    json = JSON.parse(p.body);
  } catch {
    json = undefined;
  }
  return { status: p.status, headers: p.headers, rawHeaders: [], raw: Buffer.from(p.body, 'latin1'), body: p.body, json };
}

/** How many complete HTTP responses a raw text holds (status lines at message starts). */
function statusLines(text: string): number[] {
  return [...text.matchAll(/HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));
}


function head(lines: readonly string[]): string {
  return lines.map((l) => l + '\r\n').join('') + '\r\n';
}

function chunk(data: string): string {
  return `${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`;
}

/**
 * A rejection of a malformed request: either 400 invalid_request in the Error shape, after which
 * the server closes the connection, or a close with no answer at all.
 */
function assertRejected(t: TapTest, out: RawOutcome, what: string): void {
  t.ok(out.closedByPeer, `${what}: the server closed the connection (${Math.round(out.closeMs)} ms)`);
  t.equal(out.error, undefined, `${what}: no socket error`);
  if (out.text === '') {
    t.pass(`${what}: closed without an answer`);
    return;
  }
  t.strictSame(statusLines(out.text), [400], `${what}: exactly one answer, a 400`);
  const res = asResponse(out.text);
  assertError(t, res, 400, 'invalid_request');
  t.equal(res.headers.connection?.toLowerCase(), 'close', `${what}: connection: close`);
}

// ---------------------------------------------------------------------------------------------

for (const engine of ENGINES) {
  t.test(`engine: ${engine}`, async (t) => {
    t.test('body limit (new-pet.maxBytes: 256): 413 in the Error shape, never forwarded', async (t) => {
      const LIMIT = 256;
      const gw = await startEngine(t, engine, { policies: { 'new-pet': { maxBytes: LIMIT } } });
      const post = (framing: string[]) =>
        head(['POST /v1/pets HTTP/1.1', 'Host: 127.0.0.1', `Authorization: Bearer ${gw.key}`, 'Content-Type: application/json', ...framing]);

      t.test('Content-Length over the limit: answered before any body byte is sent', async (t) => {
        const out = await rawSession(gw.port, post(['Content-Length: 1048576']), { timeoutMs: 3000 });
        t.ok(out.firstByteMs !== undefined, 'an answer arrived although no body byte was sent');
        assertError(t, asResponse(out.text), 413, 'payload_too_large');
        t.equal(asResponse(out.text).headers.connection?.toLowerCase(), 'close', 'connection: close (the unread body is not drained)');
        t.ok(out.closedByPeer, `the server closed the connection (${Math.round(out.closeMs)} ms)`);
        t.ok(out.closeMs < 2000, `within 2 s (${Math.round(out.closeMs)} ms)`);
        t.equal(gw.stub.requests.length, 0, 'nothing reached the upstream');
      });

      t.test('the limit is exact: maxBytes is accepted, maxBytes + 1 is 413', async (t) => {
        const body = `{"name":"${'x'.repeat(LIMIT - '{"name":"","categoryId":1}'.length)}","categoryId":1}`;
        t.equal(Buffer.byteLength(body), LIMIT, `the body is ${LIMIT} bytes`);
        const ok = await request(`${gw.url}/v1/pets`, { method: 'POST', headers: bearer(gw.key, { 'content-type': 'application/json' }), body });
        t.equal(ok.status, 201, `${LIMIT} bytes: 201`);
        t.equal(gw.stub.requests.at(-1)?.body.toString(), body, 'the upstream received the exact bytes');
        const before = gw.stub.requests.length;
        const over = body.replace('"name":"', '"name":"y');
        const res = await request(`${gw.url}/v1/pets`, { method: 'POST', headers: bearer(gw.key, { 'content-type': 'application/json' }), body: over });
        assertError(t, res, 413, 'payload_too_large');
        t.equal(gw.stub.requests.length, before, `${LIMIT + 1} bytes: nothing reached the upstream`);
      });

      t.test('a chunked body that grows past the limit: 413 as soon as it does', async (t) => {
        // 64-byte chunks every 25 ms, up to 2048 bytes (8x the limit); never the last chunk.
        const before = gw.stub.requests.length;
        const chunks = Array.from({ length: 32 }, () => chunk('a'.repeat(64)));
        const out = await rawSession(gw.port, post(['Transfer-Encoding: chunked']) + chunk('{"name":"'), {
          trickle: { everyMs: 25, chunks },
          timeoutMs: 5000,
        });
        assertError(t, asResponse(out.text), 413, 'payload_too_large');
        t.ok(out.closedByPeer, 'the server closed the connection');
        // Body bytes sent when the answer came: 9 + 64 per chunk (each chunk is 70 bytes on the wire).
        const payload = 9 + ((out.trickledAtFirstByte ?? Infinity) / 70) * 64;
        t.ok(payload > LIMIT, `not before the limit was passed (${payload} body bytes sent)`);
        t.ok(payload <= LIMIT + 16 * 64, `soon after it was passed, not at the end (${payload} of ${9 + 32 * 64} body bytes sent)`);
        t.equal(gw.stub.requests.length, before, 'nothing reached the upstream');
      });

      t.test('a chunked body within the limit is forwarded as its bytes (control)', async (t) => {
        const out = await rawSession(gw.port, post(['Transfer-Encoding: chunked', 'Connection: close']) + chunk('{"name":"Rex",') + chunk('"categoryId":1}') + '0\r\n\r\n');
        t.equal(asResponse(out.text).status, 201, '201');
        t.equal(gw.stub.requests.at(-1)?.body.toString(), NEW_PET, 'the upstream received the de-chunked bytes');
      });
    });

    t.test('header size limit (server.maxHeaderBytes: 2048): 431 in the Error shape', async (t) => {
      const gw = await startEngine(t, engine, { server: { maxHeaderBytes: 2048 } });
      const base = ['GET /v1/pets HTTP/1.1', 'Host: 127.0.0.1', `Authorization: Bearer ${gw.key}`];
      const cases: Array<[string, string[]]> = [
        ['one 3000-byte header', [...base, `X-Big: ${'a'.repeat(3000)}`]],
        ['50 small headers, 3500 bytes in all', [...base, ...Array.from({ length: 50 }, (_, i) => `X-Pad-${i}: ${'b'.repeat(60)}`)]],
        ['a 3000-byte request line', [`GET /v1/pets?${'c'.repeat(3000)} HTTP/1.1`, 'Host: 127.0.0.1', `Authorization: Bearer ${gw.key}`]],
      ];
      for (const [name, lines] of cases) {
        t.test(name, async (t) => {
          const out = await rawSession(gw.port, head(lines));
          const res = asResponse(out.text);
          assertError(t, res, 431, 'headers_too_large');
          t.equal(res.headers.connection?.toLowerCase(), 'close', 'connection: close');
          t.ok(out.closedByPeer, 'the server closed the connection');
          t.equal(gw.stub.requests.length, 0, 'nothing reached the upstream');
        });
      }
      t.test('a 1500-byte head is served (control)', async (t) => {
        const out = await rawSession(gw.port, head([...base, `X-Mid: ${'d'.repeat(1300)}`, 'Connection: close']));
        t.equal(asResponse(out.text).status, 200, '200');
        t.equal(gw.stub.requests.length, 1, 'forwarded once');
      });
    });

    t.test('slowloris: 408 in the Error shape, then the socket is closed', async (t) => {
      const gw = await startEngine(t, engine, { server: { headersTimeoutMs: 500, requestTimeoutMs: 800 } });
      // The lower bounds are the deadlines. Upper bounds only prove the server closes first: the body
      // trickle runs 4 s, sessions give up at 4-5 s (the header trickle's cut is proven by its byte
      // count). Not precision claims: a loaded 2-core machine runs timers late.
      const HEADERS_BOUND = 3000;
      const BODY_BOUND = 3500;
      const postHead = head(['POST /v1/pets HTTP/1.1', 'Host: 127.0.0.1', `Authorization: Bearer ${gw.key}`, 'Content-Type: application/json', 'Content-Length: 64']);
      // The slow clients run at once (each is bounded by its own timeout); each is then checked.
      const [trickledHeaders, stalledLine, silent, trickledBody, stalledBody] = await Promise.all([
        rawSession(gw.port, `GET /v1/pets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${gw.key}\r\n`, {
          trickle: { everyMs: 100, chunks: Array.from({ length: 20 }, (_, i) => `X-Slow-${String(i).padStart(2, '0')}: 1\r\n`) },
          timeoutMs: 4000,
        }),
        rawSession(gw.port, 'GET /v1/pe', { timeoutMs: 4000 }),
        rawSession(gw.port, '', { timeoutMs: 4000 }),
        rawSession(gw.port, postHead, { trickle: { everyMs: 100, chunks: Array.from({ length: 40 }, () => ' ') }, timeoutMs: 5000 }),
        rawSession(gw.port, postHead + '{"name":"R', { timeoutMs: 5000 }),
      ]);

      t.test('headers trickled one line every 100 ms (headersTimeoutMs: 500)', async (t) => {
        const out = trickledHeaders;
        assertError(t, asResponse(out.text), 408, 'request_timeout');
        t.ok(out.closedByPeer, 'the server closed the connection');
        t.ok(out.firstByteMs! >= 450, `not before headersTimeoutMs (${Math.round(out.firstByteMs!)} ms)`);
        t.ok(out.closeMs < HEADERS_BOUND, `closed within ${HEADERS_BOUND} ms (${Math.round(out.closeMs)} ms)`);
        t.ok(out.trickled < 20 * 13, `cut before the client was done trickling (${out.trickled} bytes trickled)`);
      });

      t.test('a request line that stalls half-way', async (t) => {
        const out = stalledLine;
        assertError(t, asResponse(out.text), 408, 'request_timeout');
        t.ok(out.closedByPeer, 'the server closed the connection');
        t.ok(out.firstByteMs! >= 450, `not before headersTimeoutMs (${Math.round(out.firstByteMs!)} ms)`);
        t.ok(out.closeMs < HEADERS_BOUND, `closed within ${HEADERS_BOUND} ms (${Math.round(out.closeMs)} ms)`);
      });

      t.test('a connection that sends nothing at all', async (t) => {
        const out = silent;
        t.ok(out.closedByPeer, `the server closed the idle connection (${Math.round(out.closeMs)} ms)`);
        t.ok(out.closeMs < HEADERS_BOUND, `within ${HEADERS_BOUND} ms`);
        if (out.text !== '') assertError(t, asResponse(out.text), 408, 'request_timeout');
      });

      t.test('a body trickled one byte every 100 ms (requestTimeoutMs: 800)', async (t) => {
        const out = trickledBody;
        assertError(t, asResponse(out.text), 408, 'request_timeout');
        t.ok(out.closedByPeer, 'the server closed the connection');
        t.ok(out.firstByteMs! >= 750, `not before requestTimeoutMs (${Math.round(out.firstByteMs!)} ms)`);
        t.ok(out.closeMs < BODY_BOUND, `closed within ${BODY_BOUND} ms (${Math.round(out.closeMs)} ms)`);
      });

      t.test('a body that stalls after 10 bytes', async (t) => {
        const out = stalledBody;
        assertError(t, asResponse(out.text), 408, 'request_timeout');
        t.ok(out.closedByPeer, 'the server closed the connection');
        t.ok(out.firstByteMs! >= 750, `not before requestTimeoutMs (${Math.round(out.firstByteMs!)} ms)`);
        t.ok(out.closeMs < BODY_BOUND, `closed within ${BODY_BOUND} ms (${Math.round(out.closeMs)} ms)`);
      });

      t.test('nothing reached the upstream, and an honest client is still served', async (t) => {
        t.equal(gw.stub.requests.length, 0, 'no slow request was forwarded');
        const res = await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key) });
        t.equal(res.status, 200);
        t.equal(gw.stub.requests.length, 1);
      });
    });

    t.test('server.maxConnections: 5: a 6th connection is refused while 5 are open', async (t) => {
      // One address here: its share (a quarter of maxConnections by default) raised to the whole.
      const gw = await startEngine(t, engine, { server: { maxConnections: 5, maxConnectionsPerAddress: 5 } });
      const agent = new Agent({ keepAlive: true, maxSockets: 5 });
      t.teardown(() => agent.destroy());
      const get = () =>
        new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
          const req = httpRequest(`${gw.url}/v1/pets`, { agent, headers: bearer(gw.key) }, (res) => {
            res.resume();
            res.on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket }));
          });
          req.setTimeout(3000, () => req.destroy(new Error('timed out')));
          req.on('error', reject);
          req.end();
        });
      const connections = () => new Promise<number>((r) => gw.server.getConnections((_e, n) => r(n)));

      const first = await Promise.all(Array.from({ length: 5 }, get));
      t.strictSame(first.map((r) => r.status), [200, 200, 200, 200, 200], '5 keep-alive clients are served');
      t.equal(await connections(), 5, 'the server holds 5 connections');

      const sixth = await rawSession(gw.port, head(['GET /v1/pets HTTP/1.1', 'Host: 127.0.0.1', `Authorization: Bearer ${gw.key}`]), { timeoutMs: 2000 });
      t.ok(sixth.closedByPeer, `the 6th connection is closed by the server (${Math.round(sixth.closeMs)} ms)`);
      t.equal(sixth.text, '', 'with no answer');
      t.ok(sixth.closeMs < 1500, `before the client gives up (${Math.round(sixth.closeMs)} ms of 2000)`);
      t.equal(gw.stub.requests.length, 5, 'its request never reached the upstream');

      const again = await Promise.all(Array.from({ length: 5 }, get));
      t.strictSame(again.map((r) => r.status), [200, 200, 200, 200, 200], 'the 5 open connections are still served');
      t.ok(again.every((r) => r.reused), 'on the same 5 sockets');

      agent.destroy();
      const deadline = Date.now() + 3000;
      while ((await connections()) > 0 && Date.now() < deadline) await sleep(20);
      t.equal(await connections(), 0, 'once the 5 close, the server holds none');
      const later = await Promise.all(Array.from({ length: 5 }, () => request(`${gw.url}/v1/pets`, { headers: bearer(gw.key) })));
      t.strictSame(later.map((r) => r.status), [200, 200, 200, 200, 200], 'new connections are served again');
    });

    t.test('request smuggling: ambiguous framing is rejected and never forwarded', async (t) => {
      const gw = await startEngine(t, engine);
      const auth = `Authorization: Bearer ${gw.key}`;
      const postLines = ['POST /v1/pets HTTP/1.1', 'Host: 127.0.0.1', auth, 'Content-Type: application/json'];
      // A complete, authenticated request hidden in the body: if any parser took it for the next
      // request on the connection, the stub would record GET /v1/pets/7.
      const inner = head(['GET /v1/pets/7 HTTP/1.1', 'Host: 127.0.0.1', auth]);
      const cases: Array<[string, string]> = [
        ['Content-Length and Transfer-Encoding: chunked', head([...postLines, `Content-Length: ${5 + inner.length}`, 'Transfer-Encoding: chunked']) + '0\r\n\r\n' + inner],
        ['Transfer-Encoding: chunked and Content-Length', head([...postLines, 'Transfer-Encoding: chunked', 'Content-Length: 4']) + `${(NEW_PET.length).toString(16)}\r\n${NEW_PET}\r\n0\r\n\r\n` + inner],
        ['duplicate Content-Length with different values', head([...postLines, `Content-Length: ${NEW_PET.length}`, `Content-Length: ${NEW_PET.length + inner.length}`]) + NEW_PET + inner],
        ['a Content-Length list with different values', head([...postLines, `Content-Length: ${NEW_PET.length}, ${NEW_PET.length + inner.length}`]) + NEW_PET + inner],
        ['Content-Length: +N', head([...postLines, `Content-Length: +${NEW_PET.length}`]) + NEW_PET],
        ['obsolete line folding in a header', head([...postLines, 'X-Folded: a', ' b', `Content-Length: ${NEW_PET.length}`]) + NEW_PET],
        ['obsolete line folding continuing Transfer-Encoding', head([...postLines, 'Transfer-Encoding: identity', ' chunked', `Content-Length: ${NEW_PET.length}`]) + NEW_PET],
        ['obsolete line folding in Authorization', head(['GET /v1/pets HTTP/1.1', 'Host: 127.0.0.1', 'Authorization: Bearer', ` ${gw.key}`])],
        ['Transfer-Encoding: chunked with an invalid chunk size', head([...postLines, 'Transfer-Encoding: chunked']) + `zz\r\n${NEW_PET}\r\n0\r\n\r\n` + inner],
        ['Transfer-Encoding: chunked with a negative chunk size', head([...postLines, 'Transfer-Encoding: chunked']) + `-1\r\n${NEW_PET}\r\n0\r\n\r\n`],
        ['Transfer-Encoding: chunked with an overflowing chunk size', head([...postLines, 'Transfer-Encoding: chunked']) + 'fffffffffffffffffffff\r\n' + NEW_PET],
        ['a chunk longer than its size', head([...postLines, 'Transfer-Encoding: chunked']) + `5\r\n${NEW_PET}\r\n0\r\n\r\n` + inner],
        ['Transfer-Encoding: xchunked', head([...postLines, 'Transfer-Encoding: xchunked']) + chunk(NEW_PET) + '0\r\n\r\n' + inner],
        ['Transfer-Encoding: chunked, identity', head([...postLines, 'Transfer-Encoding: chunked, identity']) + chunk(NEW_PET) + '0\r\n\r\n' + inner],
        ['Transfer-Encoding twice (chunked, then identity)', head([...postLines, 'Transfer-Encoding: chunked', 'Transfer-Encoding: identity']) + chunk(NEW_PET) + '0\r\n\r\n' + inner],
        ['a space before the colon of Transfer-Encoding', head([...postLines, 'Transfer-Encoding : chunked', `Content-Length: ${NEW_PET.length}`]) + NEW_PET],
        ['bare LF line endings', `POST /v1/pets HTTP/1.1\nHost: 127.0.0.1\n${auth}\nContent-Type: application/json\nContent-Length: ${NEW_PET.length}\n\n${NEW_PET}`],
        ['a NUL byte in a header value', head([...postLines, 'X-Nul: a\u0000b', `Content-Length: ${NEW_PET.length}`]) + NEW_PET],
      ];
      for (const [name, bytes] of cases) {
        t.test(name, async (t) => {
          const out = await rawSession(gw.port, bytes);
          await sleep(20);
          assertRejected(t, out, name);
          t.strictSame(gw.stub.requests.map((r) => `${r.method} ${r.url}`), [], 'nothing reached the upstream');
        });
      }

      t.test('duplicate Content-Length with the same value (recorded)', async (t) => {
        const out = await rawSession(gw.port, head([...postLines, `Content-Length: ${NEW_PET.length}`, `Content-Length: ${NEW_PET.length}`, 'Connection: close']) + NEW_PET + inner);
        await sleep(20);
        const statuses = statusLines(out.text);
        t.comment(`node ${process.version} answers duplicate identical Content-Length with: ${out.text === '' ? 'a close, no answer' : statuses.join(', ')}`);
        if (statuses[0] === 400 || out.text === '') {
          assertRejected(t, out, 'identical Content-Lengths');
          t.strictSame(gw.stub.requests, [], 'nothing reached the upstream');
        } else {
          // RFC 9112 section 6.3 allows folding identical values into one; then exactly the body.
          t.strictSame(statuses, [201], 'one answer only: the bytes after the body are not a request');
          t.strictSame(gw.stub.requests.map((r) => `${r.method} ${r.url} ${r.body.toString()}`), [`POST /v1/pets ${NEW_PET}`], 'exactly the declared body was forwarded');
        }
      });

      t.test('controls: well-framed messages on the same connection are answered as such', async (t) => {
        t.test('two pipelined requests: two answers, two forwards', async (t) => {
          const before = gw.stub.requests.length;
          const out = await rawSession(
            gw.port,
            head([...postLines, `Content-Length: ${NEW_PET.length}`]) + NEW_PET + head(['GET /v1/pets/7 HTTP/1.1', 'Host: 127.0.0.1', auth, 'Connection: close']),
          );
          t.strictSame(statusLines(out.text), [201, 200], 'both answered, in order');
          // node hands both to the gateway at once: the GET may be forwarded before the POST's body is read.
          t.strictSame(gw.stub.requests.slice(before).map((r) => `${r.method} ${r.url}`).sort(), ['GET /v1/pets/7', 'POST /v1/pets']);
        });
        t.test('a GET with a body: the body is never read as a request', async (t) => {
          const before = gw.stub.requests.length;
          const out = await rawSession(gw.port, head(['GET /v1/pets HTTP/1.1', 'Host: 127.0.0.1', auth, `Content-Length: ${inner.length}`, 'Connection: close']) + inner);
          t.strictSame(statusLines(out.text), [200], 'one answer');
          t.strictSame(gw.stub.requests.slice(before).map((r) => `${r.method} ${r.url} ${r.body.length}`), ['GET /v1/pets?limit=20 0'], 'listPets only, without the body');
        });
      });
    });

    t.test('path tricks never bypass authentication nor reach an unlisted upstream path', async (t) => {
      const gw = await startEngine(t, engine);
      /** [request-target, status with a key, accepted codes (for an error)] */
      const TRICKS: Array<[string, number, string[]]> = [
        ['//v1/pets', 404, ['not_found']],
        ['/v1/./pets', 404, ['not_found']],
        ['/v1/pets/../pets', 404, ['not_found']],
        ['/v1/pets/%2e%2e/x', 404, ['not_found']],
        ['/v1/pets%2F1', 404, ['not_found']],
        ['/v1/pets%2f1', 404, ['not_found']],
        ['/V1/pets', 404, ['not_found']],
        ['/v1/PETS', 404, ['not_found']],
        ['/v1/pets/', 404, ['not_found']],
        ['/v1/pets;x=1', 404, ['not_found']],
        ['/v1/pets/1;x', 404, ['not_found']],
        ['/v1/pets/%31', 404, ['pet_not_found']],
        ['/v1/%70ets', 404, ['not_found']],
        // One segment with encoded slashes: an unknown path or a petId that is not an int64.
        ['/v1/pets/..%2f..%2fadmin', 404, ['not_found', 'pet_not_found']],
        ['/v1/pets/%2e%2e', 404, ['not_found', 'pet_not_found']],
        ['/v1/pets/..', 404, ['not_found']],
        ['/v1/pets/1/', 404, ['not_found']],
        ['/v1/pets/1/..', 404, ['not_found']],
        ['/v1/pets/01', 404, ['pet_not_found']],
        ['/v1/pets/9223372036854775808', 404, ['pet_not_found']],
        ['/v1/pets\\..\\admin', 404, ['not_found']],
        ['/v1', 404, ['not_found']],
        ['/admin', 404, ['not_found']],
        ['*', 404, ['not_found']],
        // Absolute form: the raw target is not /v1/pets; paths are matched raw and exactly (docs/security.md).
        ['http://127.0.0.1/v1/pets', 404, ['not_found']],
        ['http://127.0.0.1/v1/pets/1', 404, ['not_found']],
        ['/v1/pets#frag', 404, ['not_found']],
        ['/v1/pets/1#frag', 404, ['not_found']],
        ['/v1/pets?', 200, []],
        ['/v1/pets?limit=5&limit=', 400, ['invalid_query']],
        ['/v1/pets/1', 200, []],
        ['/v1/pets/1?/../../admin', 200, []],
        ['/v1/pets/9223372036854775807', 200, []],
      ];
      const send = (target: string, withKey: boolean) =>
        rawSession(gw.port, head([`GET ${target} HTTP/1.1`, 'Host: 127.0.0.1', ...(withKey ? [`Authorization: Bearer ${gw.key}`] : []), 'Connection: close']));

      for (const [target, status, codes] of TRICKS) {
        t.test(JSON.stringify(target), async (t) => {
          const before = gw.stub.requests.length;
          const anonymous = asResponse((await send(target, false)).text);
          assertError(t, anonymous, 401, 'missing_api_key', { headers: { 'www-authenticate': 'Bearer realm="petstore"' } });
          const wrong = asResponse(
            (await rawSession(gw.port, head([`GET ${target} HTTP/1.1`, 'Host: 127.0.0.1', `Authorization: Bearer ${testKey()}`, 'Connection: close']))).text,
          );
          assertError(t, wrong, 401, 'invalid_api_key', { message: 'any' });
          t.equal(gw.stub.requests.length, before, 'unauthenticated: nothing reached the upstream');

          const res = asResponse((await send(target, true)).text);
          if (status >= 400) {
            t.ok(codes.includes((res.json as { code?: string } | undefined)?.code ?? ''), `code ${(res.json as { code?: string } | undefined)?.code} is one of ${codes.join(', ')}`);
            assertError(t, res, status, (res.json as { code: string }).code, { message: 'any' });
            t.equal(gw.stub.requests.length, before, 'nothing reached the upstream');
          } else {
            t.equal(res.status, status, `with a key: ${status}`);
            t.equal(gw.stub.requests.length, before + 1, 'forwarded once');
          }
        });
      }

      t.test('the upstream only ever received /v1/pets?limit=N or /v1/pets/<int64>', async (t) => {
        const urls = gw.stub.requests.map((r) => r.url);
        t.ok(urls.length >= 4, `${urls.length} requests were forwarded`);
        for (const url of urls) {
          const [path = '', query] = url.split('?', 2) as [string, string | undefined];
          const m = /^\/v1\/pets\/([^/]+)$/.exec(path);
          if (path === '/v1/pets') t.match(query, /^limit=\d+$/, `${url}: listPets with only the rebuilt query`);
          else t.ok(m !== null && isInt64Text(m[1]!), `${url}: getPet with an int64 petId`);
        }
        // Recorded, not asserted: getPet and createPet forward the client's raw query string (the
        // Exchange's upstreamQuery defaults to rawQuery, pinned by test/unit/route.test.ts), while
        // listPets' is rebuilt from validated values. The path is always the operation's.
        const withQuery = gw.stub.requests.filter((r) => r.url.startsWith('/v1/pets/') && r.url.includes('?')).map((r) => r.url);
        t.comment(`getPet requests that reached the upstream with the client's query: ${withQuery.join(' ') || 'none'}`);
      });
    });
  });
}
