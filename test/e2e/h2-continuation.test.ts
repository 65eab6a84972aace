/**
 * A CONTINUATION flood over HTTP/2 (CVE-2024-27316 in Apache httpd, CVE-2024-27983 in node,
 * CVE-2024-28182 in nghttp2): a client opens a header block with HEADERS and never ends it,
 * sending CONTINUATION frames for ever. node:http2 cannot produce that, so the client here is
 * node:tls and hand-made frames (RFC 9113 section 4.1). On every engine the gateway must end
 * the session within a bounded time, having read a bounded number of bytes from it, and go on
 * serving another client, both on a session opened before the flood and on a new one.
 */
import t from 'tap';
import { connect as h2connect } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { makeTestPki, h2Request, type TestPki } from '../helpers/certs.js';
import { bearer, forEachEngine, startGateway } from '../helpers/servers.js';

const pki: TestPki = makeTestPki(t);
const ca = pki.read(pki.ca);

const HEADERS = 0x1;
const SETTINGS = 0x4;
const GOAWAY = 0x7;
const CONTINUATION = 0x9;
const END_STREAM = 0x1;
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** One frame: 24-bit length, type, flags, 31-bit stream id, payload (RFC 9113 section 4.1). */
function frame(type: number, flags: number, streamId: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** An HPACK string literal without Huffman coding (RFC 7541 section 5.2), values under 127 bytes. */
function literal(s: string): Buffer {
  const b = Buffer.from(s, 'latin1');
  if (b.length > 126) throw new Error('literal too long for a one-byte length');
  return Buffer.concat([Buffer.from([b.length]), b]);
}

/** GET /v1/pets: :method GET (static 2), :scheme https (static 7), :path and :authority as literals without indexing. */
function requestBlock(authority: string): Buffer {
  return Buffer.concat([Buffer.from([0x82, 0x87, 0x04]), literal('/v1/pets'), Buffer.from([0x01]), literal(authority)]);
}

/** A literal header field with a new name, never indexed (RFC 7541 section 6.2.3), about 100 bytes. */
function filler(i: number): Buffer {
  return Buffer.concat([Buffer.from([0x10]), literal(`x-flood-${i % 1000}`), literal('f'.repeat(80))]);
}

interface Flood {
  /** CONTINUATION frames written before the session ended (or the bounds ran out). */
  readonly frames: number;
  readonly bytes: number;
  readonly ms: number;
  /** The GOAWAY error code the server sent, if it sent one. */
  readonly goaway: number | undefined;
  /** Whether the server closed the connection. */
  readonly closed: boolean;
}

const MAX_FRAMES = 200_000;
const MAX_MS = 8_000;

/**
 * Opens a TLS connection with ALPN h2, sends the preface, SETTINGS and a HEADERS frame without
 * END_HEADERS, then CONTINUATION frames (never END_HEADERS) in batches until the server ends the
 * session, MAX_FRAMES were sent or MAX_MS passed.
 */
async function flood(port: number, payload: (i: number) => Buffer): Promise<Flood> {
  const socket: TLSSocket = await new Promise((resolve, reject) => {
    const s = tlsConnect({ host: '127.0.0.1', port, ca, ALPNProtocols: ['h2'] }, () => resolve(s));
    s.once('error', reject);
  });
  if (socket.alpnProtocol !== 'h2') throw new Error(`ALPN chose ${String(socket.alpnProtocol)}, not h2`);
  let goaway: number | undefined;
  let closed = false;
  let inbox = Buffer.alloc(0);
  socket.on('error', () => {});
  socket.on('close', () => (closed = true));
  socket.on('end', () => (closed = true));
  socket.on('data', (chunk: Buffer) => {
    inbox = Buffer.concat([inbox, chunk]);
    while (inbox.length >= 9) {
      const length = inbox.readUIntBE(0, 3);
      if (inbox.length < 9 + length) break;
      if (inbox[3] === GOAWAY && length >= 8) goaway = inbox.readUInt32BE(9 + 4);
      inbox = inbox.subarray(9 + length);
    }
  });
  socket.write(Buffer.concat([PREFACE, frame(SETTINGS, 0, 0), frame(HEADERS, END_STREAM, 1, requestBlock(`127.0.0.1:${port}`))]));
  const started = performance.now();
  let frames = 0;
  let bytes = 0;
  const ended = () => closed || goaway !== undefined;
  while (!ended() && frames < MAX_FRAMES && performance.now() - started < MAX_MS) {
    const batch: Buffer[] = [];
    for (let i = 0; i < 64; i++) batch.push(frame(CONTINUATION, 0, 1, payload(frames + i)));
    const chunk = Buffer.concat(batch);
    frames += batch.length;
    bytes += chunk.length;
    if (!socket.write(chunk)) {
      // The server stopped reading: wait for it to drain, close, or the bound (a server that
      // stops reading without closing the session would hold the connection; that fails below).
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 500);
        const done = () => {
          clearTimeout(timer);
          socket.off('drain', done);
          socket.off('close', done);
          resolve();
        };
        socket.once('drain', done);
        socket.once('close', done);
      });
    } else if (frames % 1024 === 0) {
      await new Promise((r) => setImmediate(r));
    }
  }
  // The GOAWAY may still be on its way when the loop stopped on the socket's close, or the reverse.
  const waitUntil = performance.now() + 2000;
  while (!closed && performance.now() < waitUntil) await new Promise((r) => setTimeout(r, 20));
  const ms = performance.now() - started;
  socket.destroy();
  return { frames, bytes, ms, goaway, closed };
}

forEachEngine(t, async (t, engine) => {
  for (const [name, payload] of [
    ['empty CONTINUATION frames', () => Buffer.alloc(0)],
    ['CONTINUATION frames of 100-byte header fields', filler],
  ] as const) {
    t.test(`HTTP/2 ${name} without END_HEADERS: the session is ended, others are served`, async (t) => {
      const gw = await startGateway(t, { server: { tls: { certFile: pki.server.cert, keyFile: pki.server.key } } }, { engine });
      const { port } = gw.server.address() as AddressInfo;
      const origin = `https://127.0.0.1:${port}`;
      // A well-behaved client with a session open before the flood.
      const other = h2connect(origin, { ca });
      t.teardown(() => other.destroy());
      other.on('error', () => {});
      const get = () =>
        new Promise<number>((resolve, reject) => {
          const st = other.request({ ':path': '/v1/pets', ...bearer(gw.key) });
          st.on('response', (h) => resolve(Number(h[':status'])));
          st.on('error', reject);
          st.resume();
        });
      t.equal(await get(), 200, 'the other client, before');

      const heapBefore = process.memoryUsage().heapUsed;
      const r = await flood(port, payload);
      t.ok(r.closed, `the server closed the connection (GOAWAY ${String(r.goaway)}) after ${r.frames} frames, ${r.bytes} bytes, ${Math.round(r.ms)} ms`);
      t.ok(r.ms < MAX_MS, 'within the time bound');
      t.ok(r.frames < MAX_FRAMES, 'long before the frame bound');
      // What the client managed to write before it saw the close: the socket buffers of both sides
      // and the frames in flight, never the flood itself (200,000 frames would be 1.8 MB empty, 20 MB full).
      t.ok(r.bytes < 2 * 1024 * 1024, `at most 2 MiB written before the close (${r.bytes})`);
      t.ok(process.memoryUsage().heapUsed - heapBefore < 64 * 1024 * 1024, 'the heap of the gateway process did not grow by the flood');

      t.equal(await get(), 200, 'the other client, on its session opened before');
      const fresh = await h2Request(origin, '/v1/pets', { ca, headers: bearer(gw.key) as Record<string, string> });
      t.equal(fresh.status, 200, 'a new client');
    });
  }
});
