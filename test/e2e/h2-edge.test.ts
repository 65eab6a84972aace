/**
 * HTTP/2 clients that attack the gateway's edge, through a real gateway process (its RSS read
 * from /proc) and raw frames: a client that never reads its answers (SETTINGS_INITIAL_WINDOW_SIZE
 * 0, 100 streams per connection, no key), one that grants a byte now and then, one that keeps its
 * streams open after complete answers; rapid reset with RST_STREAM(NO_ERROR); a Host field that
 * disagrees with :authority; a body shorter than its content-length. One gateway process for all,
 * with `server.streamStallTimeoutMs: 1000` and `requestTimeoutMs: 1500`, so that the deadlines
 * are seen in a second or two. Also a request whose body never ends.
 */
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { h2Request, makeTestPki } from '../helpers/certs.js';
import { bearer, sendJson, spawnCliUntil, startStubUpstream, testKey, waitFor } from '../helpers/servers.js';
import { sleep, within } from '../helpers/wait.js';

const pki = makeTestPki(t);
const ca = pki.read(pki.ca);
const KEY = testKey();
const STALL_MS = 1000;
const REQUEST_MS = 1500;

// ---- raw HTTP/2 frames ------------------------------------------------------------------------

const T = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, GOAWAY: 7, WINDOW_UPDATE: 8 } as const;

function frame(type: number, flags: number, id: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id, 5);
  return Buffer.concat([h, payload]);
}

/** An HPACK literal field without indexing (names and values under 128 bytes). */
function field(name: string, value: string): Buffer {
  return Buffer.concat([Buffer.from([0, name.length]), Buffer.from(name), Buffer.from([value.length]), Buffer.from(value)]);
}

function headers(id: number, fields: Array<[string, string]>, endStream: boolean): Buffer {
  return frame(T.HEADERS, endStream ? 5 : 4, id, Buffer.concat(fields.map(([n, v]) => field(n, v))));
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

interface Seen {
  /** RST_STREAM frames: stream, error code, ms since the connection was set up. */
  readonly resets: Array<{ id: number; code: number; at: number }>;
  readonly goaways: number[];
  /** Bodies of DATA frames, by stream. */
  readonly data: Map<number, string>;
  closed: boolean;
}

/** A TLS connection speaking raw HTTP/2: the preface and SETTINGS (`window`: INITIAL_WINDOW_SIZE), then what the test writes. */
/** The raw connections open now: `served` closes them before it connects. */
const raws: TLSSocket[] = [];

async function rawH2(port: number, window?: number): Promise<{ socket: TLSSocket; seen: Seen; write(...frames: Buffer[]): void }> {
  const socket = tlsConnect({ host: '127.0.0.1', port, ca, servername: 'localhost', ALPNProtocols: ['h2'] });
  const seen: Seen = { resets: [], goaways: [], data: new Map(), closed: false };
  let buf = Buffer.alloc(0);
  let start = 0;
  socket.on('data', (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 9 && buf.length >= 9 + buf.readUIntBE(0, 3)) {
      const len = buf.readUIntBE(0, 3);
      const id = buf.readUInt32BE(5) & 0x7fffffff;
      const p = buf.subarray(9, 9 + len);
      if (buf[3] === T.RST_STREAM) seen.resets.push({ id, code: p.readUInt32BE(0), at: performance.now() - start });
      if (buf[3] === T.GOAWAY) seen.goaways.push(p.readUInt32BE(4));
      if (buf[3] === T.DATA) seen.data.set(id, (seen.data.get(id) ?? '') + p.toString('utf8'));
      buf = buf.subarray(9 + len);
    }
  });
  socket.on('error', () => undefined);
  socket.on('close', () => (seen.closed = true));
  t.teardown(() => socket.destroy());
  raws.push(socket);
  // Bounded: a handshake a loaded gateway never completes fails this test, not the whole file.
  const connected = await within(new Promise<true>((r) => socket.once('secureConnect', () => r(true))), 10_000, false);
  if (!connected) throw new Error('the TLS handshake with the gateway did not complete within 10 s');
  const settings = window === undefined ? Buffer.alloc(0) : Buffer.concat([Buffer.from([0, 4]), u32(window)]);
  socket.write(Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), frame(T.SETTINGS, 0, 0, settings), frame(T.SETTINGS, 1, 0)]));
  start = performance.now();
  return { socket, seen, write: (...frames) => socket.write(Buffer.concat(frames)) };
}

function get(id: number, path: string, extra: Array<[string, string]> = []): Buffer {
  return headers(id, [[':method', 'GET'], [':scheme', 'https'], [':authority', 'localhost'], [':path', path], ...extra], true);
}

function rssMB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
}

// ---- the gateway ------------------------------------------------------------------------------

const stub = await startStubUpstream(t, (req, res) => {
  if (req.method === 'POST') return sendJson(res, 201, { id: 7, name: 'Rex', categoryId: 1, status: 'available' });
  sendJson(res, 200, [{ id: 1, name: 'Rex', categoryId: 1, status: 'available' }]);
});
const policyFile = join(pki.dir, 'h2-edge.json');
writeFileSync(
  policyFile,
  JSON.stringify({
    version: 1,
    upstream: { url: `${stub.origin}/v1` },
    server: { tls: { certFile: pki.server.cert, keyFile: pki.server.key }, streamStallTimeoutMs: STALL_MS, headersTimeoutMs: 1000, requestTimeoutMs: REQUEST_MS, shutdownGraceMs: 1000 },
    policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS' } },
  }),
);
const READY = /^(?=[\s\S]*petstore-gateway listening on https:\/\/127\.0\.0\.1:(\d+) )(?=[\s\S]*"url":"(http:\/\/127\.0\.0\.1:\d+)","msg":"admin listening)/;
const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', policyFile, '--host', '127.0.0.1', '--port', '0'], READY, {
  env: { PETSTORE_API_KEYS: KEY, LOG_LEVEL: 'info' },
  timeoutMs: 30_000,
});
const port = Number(match[1]);
const admin = match[2]!;

/** What the overflow counter says of one event, from the admin listener's /metrics. */
async function overflows(event: string): Promise<number> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const m = new RegExp(`^petstore_gateway_overflows_total\\{event="${event}"\\} (\\d+)$`, 'm').exec(text);
  return m === null ? -1 : Number(m[1]);
}
const pid = handle.child.pid!;
const origin = `https://127.0.0.1:${port}`;

/**
 * The status another client gets, on a new connection. The connections a subtest's attacker opened
 * are closed first (the server counts them against 127.0.0.1's share until it sees them go), and a
 * refused or reset attempt is tried again for up to 5 s: on a loaded machine the server may still
 * be tearing the attacker's sessions down.
 */
async function served(): Promise<number> {
  for (const socket of raws.splice(0)) socket.destroy();
  let last: unknown;
  for (let attempt = 0, until = Date.now() + 5000; attempt < 20 && Date.now() < until; attempt++) {
    try {
      return (await h2Request(origin, '/v1/pets', { ca, headers: bearer(KEY) as Record<string, string> })).status;
    } catch (err) {
      last = err;
      await sleep(250);
    }
  }
  throw last;
}

// parity: HTTP/2 stream bounds belong to the listening server that createNodeServer makes for every engine (src/tls/h2-streams.ts); a refused stream never reaches an engine
t.test('a client that never reads (window 0, 100 streams a connection, no key): memory bounded, sessions ended', async (t) => {
  // Warm up (JIT, the first sessions and answers), then measure.
  for (let i = 0; i < 20; i++) await served();
  const before = rssMB(pid);
  const CONNECTIONS = 40;
  const conns: Array<Awaited<ReturnType<typeof rawH2>>> = [];
  for (let c = 0; c < CONNECTIONS; c++) {
    const conn = await rawH2(port, 0);
    const frames = [];
    for (let i = 0; i < 100; i++) frames.push(get(2 * i + 1, `/v1/pets/${i}`));
    conn.write(...frames);
    conns.push(conn);
  }
  await waitFor('every session to end', () => conns.every((c) => c.seen.closed), 10_000).catch(() => undefined);
  const grown = rssMB(pid) - before;
  // Unbounded, each of the 4,000 streams held ~10 KB (40 MB here, 300 MB for 300 connections).
  t.ok(grown < 20, `RSS grew ${grown.toFixed(1)} MB for ${CONNECTIONS} x 100 streams (under 20 MB)`);
  const notEnded = conns.filter((c) => !c.seen.closed);
  t.same(notEnded.map((c) => ({ goaways: c.seen.goaways, answered: c.seen.data.size, resets: c.seen.resets.length })), [], 'each session was ended');
  // At once when its answers are written as its streams arrive (GOAWAY ENHANCE_YOUR_CALM), else by
  // the deadline list a second later (the streams past 8 reset, GOAWAY).
  t.ok(conns.filter((c) => c.seen.goaways.includes(11)).length >= CONNECTIONS / 2, 'with GOAWAY ENHANCE_YOUR_CALM');
  t.ok((await overflows('h2_session_not_reading')) >= CONNECTIONS / 2, 'counted: overflows_total{event="h2_session_not_reading"}');
  t.equal(await served(), 200, 'another client is served');
});

// parity: the stall deadline is kept by the listening server that createNodeServer makes for every engine, on node's stream, whatever wrote the answer
t.test('a stalled stream is reset within streamStallTimeoutMs, also with 1-byte WINDOW_UPDATEs, and its session ends', async (t) => {
  const stalledBefore = await overflows('h2_stream_stalled');
  const silent = await rawH2(port, 0);
  const trickled = await rawH2(port, 0);
  const ids = [1, 3, 5, 7];
  silent.write(...ids.map((id) => get(id, `/v1/pets/${id}`)));
  trickled.write(...ids.map((id) => get(id, `/v1/pets/${id}`)));
  // A byte per stream (and for the connection) every 200 ms: progress, but never an answer whole.
  const trickle = setInterval(() => trickled.write(frame(T.WINDOW_UPDATE, 0, 0, u32(10)), ...ids.map((id) => frame(T.WINDOW_UPDATE, 0, id, u32(1)))), 200);
  t.teardown(() => clearInterval(trickle));
  await waitFor('both sessions to end', () => silent.seen.closed && trickled.seen.closed, 6000).catch(() => undefined);
  clearInterval(trickle);
  for (const [name, conn] of [['no WINDOW_UPDATE', silent], ['1-byte WINDOW_UPDATEs', trickled]] as const) {
    const resets = conn.seen.resets.filter((r) => r.code === 8);
    t.same(resets.map((r) => r.id).sort((a, b) => a - b), ids, `${name}: every stream reset (CANCEL)`);
    const last = Math.max(...resets.map((r) => r.at));
    t.ok(last >= STALL_MS - 50 && last < STALL_MS + 1500, `${name}: at ${Math.round(last)} ms (deadline ${STALL_MS} ms)`);
    t.ok(conn.seen.closed && conn.seen.goaways.length > 0, `${name}: session ended with GOAWAY`);
  }
  t.equal((await overflows('h2_stream_stalled')) - stalledBefore, 2 * ids.length, 'each reset counted: overflows_total{event="h2_stream_stalled"}');
});

// parity: the stall deadline is kept by the listening server that createNodeServer makes for every engine, on node's stream, whatever wrote the answer
t.test('streams left open by their client after complete answers are reset (NO_ERROR) once answered', async (t) => {
  const conn = await rawH2(port);
  const ids = [1, 3, 5, 7, 9, 11, 13, 15, 17, 19];
  // POSTs without END_STREAM and without a body: each answered 401 at once, the client's side never ends.
  conn.write(...ids.map((id) => headers(id, [[':method', 'POST'], [':scheme', 'https'], [':authority', 'localhost'], [':path', '/v1/pets'], ['content-type', 'application/json']], false)));
  await waitFor('the streams to be reset', () => conn.seen.resets.length >= ids.length, 3000).catch(() => undefined);
  t.same(conn.seen.resets.map((r) => [r.id, r.code]).sort(), ids.map((id) => [id, 0]).sort(), 'every stream reset with NO_ERROR after its answer (RFC 9113 section 8.1)');
  t.ok(ids.every((id) => conn.seen.data.get(id)?.includes('missing_api_key')), 'each got its whole answer first');
  t.ok(Math.max(...conn.seen.resets.map((r) => r.at)) < STALL_MS, 'at once, not at the stall deadline');
  t.notOk(conn.seen.closed, 'the session goes on');
});

// parity: the rapid-reset bound belongs to the listening server that createNodeServer makes for every engine
t.test('rapid reset with RST_STREAM(NO_ERROR) ends the session like any other code', async (t) => {
  for (const code of [0, 8]) {
    const conn = await rawH2(port);
    let id = 1;
    for (let burst = 0; burst < 20 && !conn.seen.closed && conn.seen.goaways.length === 0; burst++) {
      const frames = [];
      for (let i = 0; i < 100; i++, id += 2) frames.push(get(id, `/v1/pets/${id}`, [['authorization', `Bearer ${KEY}`]]), frame(T.RST_STREAM, 0, id, u32(code)));
      conn.write(...frames);
      await sleep(5);
    }
    // The flood is written faster than a loaded gateway reads it: its GOAWAY may come seconds later.
    await waitFor('the session to end', () => conn.seen.closed, 15_000).catch(() => undefined);
    // The gateway's bound answers GOAWAY ENHANCE_YOUR_CALM after 500 resets; node 24's nghttp2 may
    // be first with its own GOAWAY (INTERNAL_ERROR), and the gateway's bound then ends the session.
    const { goaways, closed } = conn.seen;
    t.ok(closed && (goaways[0] === 11 || (process.versions.node.split('.')[0] !== '20' && goaways.length > 0)), `RST_STREAM(${code}): session ended after ${(id - 1) / 2} streams, GOAWAY ${JSON.stringify(goaways)}`);
  }
  t.equal(await served(), 200, 'another client is served');
});

// parity: the Host/:authority check runs in createNodeServer's request entry, before any engine's handler
t.test('a Host field that disagrees with :authority is refused (400), the upstream never asked', async (t) => {
  const calls = stub.requests.length;
  const conn = await rawH2(port);
  const base: Array<[string, string]> = [[':method', 'GET'], [':scheme', 'https'], [':path', '/v1/pets']];
  const key: [string, string] = ['authorization', `Bearer ${KEY}`];
  conn.write(
    headers(1, [...base, [':authority', 'good.example'], key, ['host', 'evil.example']], true),
    headers(3, [...base, [':authority', 'Good.Example:443'], key, ['host', 'good.example']], true),
  );
  await waitFor('both answers', () => (conn.seen.data.get(1)?.endsWith('}') ?? false) && (conn.seen.data.get(3)?.endsWith(']') ?? false), 3000).catch(() => undefined);
  t.match(JSON.parse(conn.seen.data.get(1) ?? '{}'), { code: 'invalid_request', status: 400 }, 'another authority: 400 invalid_request');
  t.match(conn.seen.data.get(3), /Rex/, 'the same authority (case, default port): served');
  t.equal(stub.requests.length, calls + 1, 'only the second reached the upstream');
  t.match(stub.requests.at(-1)?.headers['x-forwarded-host'], /^good\.example(:443)?$/i, 'the one authority as X-Forwarded-Host');
});

// parity: readBody (src/fronts/body.ts) is the one body reader of both fronts (node-http and the Fastify plugin), and the check is on its bytes
t.test('a body shorter than its content-length (END_STREAM early) never reaches the upstream', async (t) => {
  const calls = stub.requests.length;
  const body = Buffer.from('{"name":"Rex","categoryId":1,"status":"available"}');
  const post = (id: number, length: number): Buffer[] => [
    headers(id, [[':method', 'POST'], [':scheme', 'https'], [':authority', 'localhost'], [':path', '/v1/pets'], ['content-type', 'application/json'], ['content-length', String(length)], ['authorization', `Bearer ${KEY}`]], false),
    frame(T.DATA, 1, id, body),
  ];
  const conn = await rawH2(port);
  conn.write(...post(1, body.length + 450));
  await waitFor('the stream to be reset', () => conn.seen.resets.some((r) => r.id === 1), 3000).catch(() => undefined);
  await sleep(300);
  t.equal(stub.requests.length, calls, 'the upstream got nothing');
  conn.write(...post(3, body.length));
  await waitFor('the control to be forwarded', () => stub.requests.length > calls, 3000).catch(() => undefined);
  t.equal(stub.requests.at(-1)?.method, 'POST', 'the same request with its true length is forwarded');
  t.equal(stub.requests.at(-1)?.body.length, body.length);
});

// parity: the request deadline is kept by the listening server that createNodeServer makes for every engine, on node's stream, whichever front reads the body
t.test('a request whose body never ends is reset at requestTimeoutMs, the upstream never asked', async (t) => {
  const calls = stub.requests.length;
  const conn = await rawH2(port);
  conn.write(
    headers(1, [[':method', 'POST'], [':scheme', 'https'], [':authority', 'localhost'], [':path', '/v1/pets'], ['content-type', 'application/json'], ['content-length', '50'], ['authorization', `Bearer ${KEY}`]], false),
    frame(T.DATA, 0, 1, Buffer.from('{"name":')),
  );
  await waitFor('the stream to be reset', () => conn.seen.resets.length > 0, 5000).catch(() => undefined);
  const reset = conn.seen.resets[0];
  t.equal(reset?.code, 8, 'RST_STREAM CANCEL');
  t.ok(reset !== undefined && reset.at >= REQUEST_MS - 50 && reset.at < REQUEST_MS + 1500, `at ${Math.round(reset?.at ?? -1)} ms (requestTimeoutMs ${REQUEST_MS})`);
  t.equal(stub.requests.length, calls, 'the upstream got nothing');
  t.notOk(conn.seen.closed, 'the session goes on');
});

// parity: the HTTP/2 sessions' shutdown belongs to the listening server that createNodeServer makes for every engine
t.test('SIGTERM with clients that do not read still connected: the process exits after the grace', async (t) => {
  for (let c = 0; c < 5; c++) {
    const conn = await rawH2(port, 0);
    conn.write(...[1, 3, 5].map((id) => get(id, `/v1/pets/${id}`)));
  }
  // The signal comes about when their streams reach the stall deadline and their sessions end.
  await sleep(STALL_MS);
  handle.child.kill('SIGTERM');
  const exited = await within(handle.exited, 8000, undefined);
  t.same(exited, { code: 0, signal: null }, 'exited 0 within the grace period and a few seconds');
});
