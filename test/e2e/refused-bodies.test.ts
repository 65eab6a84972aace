/**
 * Refused bodies are not read, over raw sockets on 127.0.0.1, on every engine:
 * - a refused request (401) announcing a large body: the answer says `Connection: close` and the
 *   connection is closed after a small bound, instead of the body being drained whole;
 * - a body over the limit (413): the same, even when the client keeps sending;
 * - `Expect: 100-continue`: `100 Continue` only once the request phase passed (never to a client
 *   that is about to be refused), and a small refused body keeps the connection usable.
 */
import { connect } from 'node:net';
import t from 'tap';
import { REFUSED_BODY_BYTES } from '../../src/fronts/body.js';
import { assertError, type TapTest } from '../helpers/assert.js';
import { forEachEngine, parseRawResponse, startGateway, type Engine, type Response } from '../helpers/servers.js';

const NEW_PET = '{"name":"Rex","categoryId":1}';
/** What the hostile client offers to send; the server must stop it long before. */
const OFFERED = 64 * 1024 * 1024;
/** Loopback socket buffers hold a few MB both ways: more than this read means the body was drained. */
const MOST_ACCEPTED = 16 * 1024 * 1024;

interface Flood {
  readonly text: string;
  /** Bytes of body written before the server closed (or our limit cut it). */
  readonly written: number;
  readonly closedByServer: boolean;
}

/** Sends `head`, then body bytes as fast as the server takes them, up to `OFFERED`, until it closes. */
function flood(port: number, head: string, timeoutMs = 8000): Promise<Flood> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const block = Buffer.alloc(64 * 1024, 0x61);
    let written = 0;
    let closedByServer = true;
    const limit = setTimeout(() => {
      closedByServer = false;
      socket.destroy();
    }, timeoutMs);
    const pump = () => {
      // Bounded: at most OFFERED / 64 KiB writes.
      while (written < OFFERED && !socket.destroyed && socket.writable) {
        written += block.length;
        if (!socket.write(block)) return void socket.once('drain', pump);
      }
    };
    socket.on('connect', () => {
      socket.write(head);
      pump();
    });
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => undefined); // a reset or EPIPE is the server closing
    socket.on('close', () => {
      clearTimeout(limit);
      resolve({ text: Buffer.concat(chunks).toString('latin1'), written, closedByServer });
    });
  });
}

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

/** Writes `head`, and returns the first bytes the server sends (or '' after `waitMs`), socket left open. */
function firstAnswer(port: number, head: string, waitMs = 3000): Promise<{ text: string; socket: ReturnType<typeof connect> }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.on('error', () => undefined);
    const timer = setTimeout(() => resolve({ text: '', socket }), waitMs);
    socket.once('data', (c: Buffer) => {
      clearTimeout(timer);
      resolve({ text: c.toString('latin1'), socket });
    });
    socket.on('connect', () => socket.write(head));
  });
}

/** Reads from `socket` until `pred` holds on what arrived or `waitMs` passes. */
function readUntil(socket: ReturnType<typeof connect>, pred: (text: string) => boolean, waitMs = 3000): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    const done = () => {
      clearTimeout(timer);
      socket.off('data', onData);
      resolve(text);
    };
    const onData = (c: Buffer) => {
      text += c.toString('latin1');
      if (pred(text)) done();
    };
    const timer = setTimeout(done, waitMs);
    socket.on('data', onData);
  });
}

async function gateway(t: TapTest, engine: Engine) {
  const gw = await startGateway(t, { policies: { 'new-pet': { maxBytes: 256 } } }, { engine });
  const port = Number(new URL(gw.url).port);
  return { ...gw, port };
}

forEachEngine(t, async (t, engine) => {
  const gw = await gateway(t, engine);
  const post = (auth: string, length: number, extra = '') =>
    `POST /v1/pets HTTP/1.1\r\nHost: a\r\n${auth}Content-Type: application/json\r\nContent-Length: ${length}\r\n${extra}\r\n`;

  t.test('a 401 with 64 MB announced: answered, then closed after a small bound, not drained', async (t) => {
    const r = await flood(gw.port, post('Authorization: Bearer wrong-key\r\n', OFFERED));
    const res = asResponse(r.text);
    assertError(t, res, 401, 'invalid_api_key');
    t.equal(res.headers.connection?.toLowerCase(), 'close', 'the answer says Connection: close');
    t.ok(r.closedByServer, 'the server closed the connection');
    t.ok(r.written < MOST_ACCEPTED, `the server stopped taking the body (${r.written} bytes of ${OFFERED} written)`);
  });

  t.test('a chunked body with no key: 401, closed after a small bound', async (t) => {
    const r = await flood(gw.port, 'POST /v1/pets HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n4000000\r\n');
    assertError(t, asResponse(r.text), 401, 'missing_api_key');
    t.ok(r.closedByServer, 'the server closed the connection');
    t.ok(r.written < MOST_ACCEPTED, `the server stopped taking the body (${r.written} bytes written)`);
  });

  t.test('a 413 over new-pet.maxBytes: the rest of the body is not read whole', async (t) => {
    const r = await flood(gw.port, post(`Authorization: Bearer ${gw.key}\r\n`, OFFERED));
    assertError(t, asResponse(r.text), 413, 'payload_too_large');
    t.ok(r.closedByServer, 'the server closed the connection');
    t.ok(r.written < MOST_ACCEPTED, `the server stopped taking the body (${r.written} bytes written)`);
  });

  t.test('Expect: 100-continue with a bad key: the 401 comes first, never a 100', async (t) => {
    const { text, socket } = await firstAnswer(gw.port, post('Authorization: Bearer wrong-key\r\n', NEW_PET.length, 'Expect: 100-continue\r\n'));
    t.teardown(() => socket.destroy());
    t.notMatch(text, /^HTTP\/1\.1 100/, 'no 100 Continue before authentication');
    t.match(text, /^HTTP\/1\.1 401 /, 'the first answer is the 401');
  });

  t.test('Expect: 100-continue with a good key: 100, then the body, then 201', async (t) => {
    const { text, socket } = await firstAnswer(gw.port, post(`Authorization: Bearer ${gw.key}\r\n`, NEW_PET.length, 'Expect: 100-continue\r\n'));
    t.teardown(() => socket.destroy());
    t.match(text, /^HTTP\/1\.1 100 Continue\r\n\r\n/, '100 Continue once the request phase passed');
    const rest = text.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, '');
    socket.write(NEW_PET);
    const answer = rest.includes('\r\n\r\n') ? rest : rest + (await readUntil(socket, (s) => /\r\n\r\n[\s\S]*\}/.test(rest + s)));
    t.equal(parseRawResponse(answer).status, 201, 'created');
  });

  t.test(`a small refused body (up to ${REFUSED_BODY_BYTES} bytes) is drained: the connection stays usable`, async (t) => {
    const body = 'x'.repeat(1000);
    const second = `GET /v1/pets HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${gw.key}\r\nConnection: close\r\n\r\n`;
    const { text, socket } = await firstAnswer(gw.port, post('Authorization: Bearer wrong-key\r\n', body.length) + body + second);
    t.teardown(() => socket.destroy());
    const answers = (s: string) => (s.match(/HTTP\/1\.1 \d{3} /g) ?? []).length;
    const all = answers(text) >= 2 ? text : text + (await readUntil(socket, (s) => answers(text + s) >= 2));
    t.strictSame((all.match(/HTTP\/1\.1 (\d{3}) /g) ?? []).map((l) => l.slice(9, 12)), ['401', '200'], 'the refused request, then the next one on the same connection');
  });
});
