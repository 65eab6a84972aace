/**
 * The span exporter (src/telemetry/exporter.ts) against a hostile collector on 127.0.0.1: one that
 * redirects elsewhere (never followed: the headers hold the collector's key), one behind a
 * certificate nobody trusts (refused, never downgraded), one that answers gzip, garbage, a flood
 * of headers, or a head one byte at a time. Each costs spans, counted; none a rejection, nor an
 * export past its bounds. The spans are the real encoder's (otlp-proto.ts).
 */
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { test, type Test } from 'tap';
import { SpanExporter, type SpanExporterOptions } from '../../src/telemetry/exporter.js';
import { encodeProtobuf } from '../../src/telemetry/otlp-proto.js';
import type { SpanData, SpanSource } from '../../src/telemetry/span.js';
import { makeTestPki } from '../helpers/certs.js';
import { sleep } from '../helpers/wait.js';

const unhandled: unknown[] = [];
process.on('unhandledRejection', (reason) => void unhandled.push(reason));

const SECRET = 'collector-key-5f3c9a1e7b';
const SOURCE: SpanSource = { resource: { 'service.name': 'gw-attack' }, scope: { name: 'petstore-gateway', version: '0.1.0' } };

function span(i: number): SpanData {
  return {
    traceId: (i + 1).toString(16).padStart(32, '0'),
    spanId: (i + 1).toString(16).padStart(16, '0'),
    parentSpanId: undefined,
    traceState: undefined,
    name: 'GET /v1/pets',
    kind: 2,
    start: 1_700_000_000_000 + i,
    end: 1_700_000_000_001 + i,
    attributes: { 'test.i': i },
    events: [],
    status: 0,
    statusMessage: undefined,
    flags: 1,
  };
}

interface Hit {
  readonly method: string | undefined;
  readonly url: string | undefined;
  readonly headers: IncomingMessage['headers'];
}

/** A node:http(s) server on 127.0.0.1:0 (its origin written http:) that records each request and answers with `answer`; closed at teardown. */
async function listen(t: Test, server: Server, answer: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ origin: string; hits: Hit[] }> {
  const hits: Hit[] = [];
  const sockets = new Set<Socket>();
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      hits.push({ method: req.method, url: req.url, headers: req.headers });
      answer(req, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  const port = (server.address() as AddressInfo).port;
  return { origin: `http://127.0.0.1:${port}`, hits };
}

function exporter(t: Test, endpoint: string, options: Partial<SpanExporterOptions> = {}): SpanExporter {
  const e = new SpanExporter({
    endpoint: new URL(endpoint),
    contentType: 'application/x-protobuf',
    encode: encodeProtobuf,
    source: SOURCE,
    headers: { authorization: `Bearer ${SECRET}` },
    delayMs: 10_000,
    timeoutMs: 1000,
    maxAttempts: 2,
    initialBackoffMs: 10,
    maxBackoffMs: 20,
    ...options,
  });
  t.teardown(() => e.close(100));
  return e;
}

function scenario(name: string, fn: (t: Test) => Promise<void>): void {
  void test(name, async (t) => {
    const before = unhandled.length;
    await fn(t);
    await sleep(20);
    t.same(unhandled.slice(before), [], 'no unhandled rejection');
  });
}

function enqueue(e: SpanExporter, n: number): void {
  for (let i = 0; i < n; i++) e.enqueue(span(i));
}

for (const status of [301, 302, 303, 307, 308]) {
  scenario(`a ${status} to elsewhere is not followed: the key never leaves for another host`, async (t) => {
    const elsewhere = await listen(t, createHttpServer(), (_req, res) => res.writeHead(200).end());
    const collector = await listen(t, createHttpServer(), (_req, res) => res.writeHead(status, { location: `${elsewhere.origin}/v1/traces` }).end());
    const e = exporter(t, `${collector.origin}/v1/traces`);
    enqueue(e, 3);
    await e.flush(5000);
    t.equal(collector.hits.length, 1, 'one POST to the collector: a redirect is not retried either');
    t.equal(elsewhere.hits.length, 0, 'nothing reached the redirect target');
    t.match(e.stats(), { exported: 0, failed: 3, exports: { ok: 0, failed: 1 } }, 'the batch counted failed');
  });
}

scenario('a TLS collector with a certificate nobody trusts is refused, never downgraded to http', async (t) => {
  const pki = makeTestPki(t);
  // The foreign CA's certificate: valid for 127.0.0.1, but no trusted root signed it.
  const server = createHttpsServer({ cert: pki.read(pki.foreign.cert), key: pki.read(pki.foreign.key) });
  let handshakes = 0;
  server.on('secureConnection', () => handshakes++);
  const tlsErrors: string[] = [];
  server.on('tlsClientError', (err: Error) => tlsErrors.push(err.message));
  const collector = await listen(t, server, (_req, res) => res.writeHead(200).end());
  const https = collector.origin.replace(/^http:/, 'https:');
  const e = exporter(t, `${https}/v1/traces`);
  enqueue(e, 2);
  await e.flush(5000);
  t.equal(collector.hits.length, 0, 'no request was sent over the untrusted connection');
  t.equal(handshakes, 0, 'no handshake completed');
  t.ok(tlsErrors.length >= 1, 'the client broke off the handshake');
  t.match(e.stats(), { exported: 0, failed: 2 });
});

scenario('a collector that answers gzip, garbage or a lie about its encoding: counted exported, nothing thrown', async (t) => {
  const answers: Array<(res: ServerResponse) => void> = [
    (res) => res.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' }).end(Buffer.from('not gzip at all \x1f\x8b')),
    (res) => res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x08])),
    (res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"partialSuccess":{"rejectedSpans":"1e400"}}'),
    (res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>not a collector</h1>'),
  ];
  let n = 0;
  const collector = await listen(t, createHttpServer(), (_req, res) => answers[n++ % answers.length]!(res));
  const e = exporter(t, `${collector.origin}/v1/traces`, { maxBatchSpans: 1 });
  for (let i = 0; i < answers.length; i++) {
    e.enqueue(span(i));
    await e.flush(5000);
  }
  t.equal(collector.hits.length, answers.length);
  const s = e.stats();
  t.same(s, { queued: 0, exported: answers.length, dropped: 0, failed: 0, exports: { ok: answers.length, retried: 0, failed: 0 } }, 'a 2xx is accepted whatever its body says');
});

/** A raw TCP collector: reads the request, then answers with `write(socket)`. */
async function rawCollector(t: Test, write: (s: Socket) => void): Promise<{ origin: string; connections: () => number }> {
  let connections = 0;
  const sockets = new Set<Socket>();
  const server = createTcpServer((s) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    let seen = '';
    s.on('data', (d: Buffer) => {
      seen += d.toString('latin1');
      if (seen.includes('\r\n\r\n')) {
        seen = '';
        write(s);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of sockets) s.destroy();
    return new Promise<void>((r) => server.close(() => r()));
  });
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, connections: () => connections };
}

scenario('a slowloris head, a byte at a time: each attempt ends at its timeout, the batch at maxAttempts', async (t) => {
  const timers = new Set<NodeJS.Timeout>();
  t.teardown(() => timers.forEach((x) => clearInterval(x)));
  const collector = await rawCollector(t, (s) => {
    const head = 'HTTP/1.1 200 OK\r\nX-Slow: ' + 'a'.repeat(10_000);
    let i = 0;
    const timer = setInterval(() => {
      if (s.destroyed || i >= head.length) return clearInterval(timer);
      s.write(head[i++]!);
    }, 20);
    timers.add(timer);
  });
  const e = exporter(t, `${collector.origin}/v1/traces`, { timeoutMs: 300, maxAttempts: 2 });
  enqueue(e, 2);
  const started = performance.now();
  await e.flush(5000);
  const ms = performance.now() - started;
  t.ok(ms < 1500, `two attempts of 300 ms, not the collector's pace (${Math.round(ms)} ms)`);
  t.match(e.stats(), { exported: 0, failed: 2, exports: { retried: 1, failed: 1 } });
});

scenario('a flood of answer headers: refused by the HTTP parser, counted, bounded', async (t) => {
  const collector = await rawCollector(t, (s) => {
    let head = 'HTTP/1.1 200 OK\r\n';
    for (let i = 0; i < 20_000; i++) head += `X-H${i}: ${'v'.repeat(40)}\r\n`;
    s.end(head + 'Content-Length: 0\r\n\r\n');
  });
  const e = exporter(t, `${collector.origin}/v1/traces`);
  enqueue(e, 2);
  await e.flush(5000);
  t.match(e.stats(), { exported: 0, failed: 2 });
  t.ok(collector.connections() <= 2, 'at most one connection per attempt');
});
