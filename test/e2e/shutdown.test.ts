/**
 * Graceful shutdown of the built CLI (`serve`), each gateway its own process on 127.0.0.1 port 0,
 * in front of a slow stub upstream: on SIGTERM the listener closes at once (new connections are
 * refused), requests in flight complete, and the process exits 0; past `server.shutdownGraceMs`
 * the connections still open are closed and the process exits 0 all the same.
 */
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { assertError, type TapTest } from '../helpers/assert.js';
import {
  bearer,
  ENGINES,
  ensureBuilt,
  JSON_TYPE,
  request,
  sendJson,
  sleep,
  spawnCliUntil,
  startStubUpstream,
  tempDir,
  testKey,
  waitFor,
  type Engine,
  type ProcessHandle,
  type Response,
  type StubUpstream,
} from '../helpers/servers.js';
import { within } from '../helpers/wait.js';

ensureBuilt();

const dir = tempDir(t, 'shutdown');

const KEY = testKey();
// The banner (stderr) and the start probe's log line (stdout), so the probe's one request to the
// stub is over before a test counts the stub's requests.
const READY = /^(?=[\s\S]*petstore-gateway listening on (http:\/\/127\.0\.0\.1:(\d+)) )(?=[\s\S]*"msg":"upstream probe: )/;
/** Slack for process scheduling on a loaded machine, on top of each expected time. */
const SLACK_MS = 1500;



function pet(id: number): string {
  return `{"id":${id},"name":"pet${id}","categoryId":1,"status":"available"}`;
}

/** A stub that answers every request after `delayMs` (unless the socket is gone by then). */
function slowStub(delayMs: number) {
  return startStubUpstream(t, (req, res) => {
    const timer = setTimeout(() => {
      if (res.destroyed) return;
      const path = req.url.split('?')[0]!;
      if (req.method === 'POST') return sendJson(res, 201, `{"id":1,${req.body.toString('utf8').slice(1)}`);
      if (path === '/v1/pets') return sendJson(res, 200, `[${pet(1)},${pet(2)}]`);
      return sendJson(res, 200, pet(Number(path.split('/').pop())));
    }, delayMs);
    res.on('close', () => clearTimeout(timer));
  });
}

interface Gw {
  readonly url: string;
  readonly port: number;
  readonly handle: ProcessHandle;
}

async function serve(name: string, stub: Promise<StubUpstream>, engine: Engine, server: Record<string, unknown> = {}): Promise<Gw> {
  const s = await stub;
  const file = join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    JSON.stringify({ version: 1, upstream: { url: `${s.origin}/v1` }, server, policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS' } } }),
  );
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--host', '127.0.0.1', '--port', '0', '--engine', engine], READY, {
    env: { PETSTORE_API_KEYS: KEY, LOG_LEVEL: 'info' },
    timeoutMs: 30_000,
  });
  return { url: match[1]!, port: Number(match[2]), handle };
}

/** Whether a new TCP connection to the port is accepted or refused (an accepted one is closed at once). */
function tryConnect(port: number): Promise<'accepted' | 'refused' | string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const timer = setTimeout(() => {
      socket.destroy();
      resolve('no answer');
    }, 1000);
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.destroy();
      resolve('accepted');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(err.code === 'ECONNREFUSED' ? 'refused' : (err.code ?? err.message));
    });
  });
}

/** Resolves with the exit and how long after `since` it came; rejects past `timeoutMs`. */
async function exitWithin(handle: ProcessHandle, since: number, timeoutMs: number) {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the process did not exit within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    const exit = await Promise.race([handle.exited, timeout]);
    return { ...exit, ms: performance.now() - since };
  } finally {
    clearTimeout(timer);
  }
}

/** A raw keep-alive connection: write request heads, read the responses that come back (by content-length). */
function rawConnection(port: number) {
  const socket = connect(port, '127.0.0.1');
  let data = Buffer.alloc(0);
  let closedAt: number | undefined;
  let firstAnswerAt: number | undefined;
  socket.on('data', (c: Buffer) => {
    data = Buffer.concat([data, c]);
    if (firstAnswerAt === undefined && responses().length > 0) firstAnswerAt = performance.now();
  });
  socket.on('error', () => undefined);
  socket.on('close', () => (closedAt = performance.now()));
  const responses = () => {
    const out: Array<{ status: number; headers: Record<string, string>; body: string }> = [];
    let rest = data;
    for (let i = 0; i < 10; i++) {
      const end = rest.indexOf('\r\n\r\n');
      if (end === -1) break;
      const [statusLine = '', ...lines] = rest.subarray(0, end).toString('latin1').split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const c = line.indexOf(':');
        if (c > 0) headers[line.slice(0, c).trim().toLowerCase()] = line.slice(c + 1).trim();
      }
      const length = Number(headers['content-length'] ?? 0);
      if (rest.length < end + 4 + length) break;
      out.push({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0), headers, body: rest.subarray(end + 4, end + 4 + length).toString('utf8') });
      rest = rest.subarray(end + 4 + length);
    }
    return out;
  };
  return {
    socket,
    responses,
    closed: () => closedAt !== undefined,
    closedAt: () => closedAt,
    firstAnswerAt: () => firstAnswerAt,
    send: (path: string) => socket.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${KEY}\r\nconnection: keep-alive\r\n\r\n`),
  };
}

// Every process starts now, concurrently; the tests await them.
const slow = slowStub(700);
const hanging = slowStub(5000);
const gateways = Object.fromEntries(
  ENGINES.map((e) => [
    e,
    // keepAliveTimeoutMs 4000 (default 5000): bounds how long an idle kept-alive connection can hold the exit back.
    { inFlight: serve(`in-flight-${e}`, slow, e, { keepAliveTimeoutMs: 4000 }), grace: serve(`grace-${e}`, hanging, e, { shutdownGraceMs: 300 }) },
  ]),
) as Record<Engine, { inFlight: Promise<Gw>; grace: Promise<Gw> }>;
const idle = serve('idle', slow, 'fastify');
for (const p of [idle, ...Object.values(gateways).flatMap((g) => [g.inFlight, g.grace])]) p.catch(() => undefined);


function assertErrorShape(t: TapTest, res: { status: number; headers: Record<string, string | string[] | undefined>; body: string }, todo?: string): void {
  const x = todo === undefined ? {} : { todo };
  t.equal(res.headers['content-type'], JSON_TYPE, `content-type of the Error (${res.status})`, x);
  let body: unknown;
  try {
    body = JSON.parse(res.body);
  } catch {
    body = undefined;
  }
  const b = body as Record<string, unknown> | undefined;
  t.strictSame(b === undefined || b === null ? [] : Object.keys(b).sort(), ['code', 'message', 'status'], `the Error shape: ${res.body.slice(0, 200)}`, x);
  t.equal(b?.status, res.status, 'status field equals the HTTP status', x);
}

for (const engine of ENGINES) {
  t.test(`engine ${engine}: SIGTERM with requests in flight`, async (t) => {
    const s = await slow;
    const gw = await gateways[engine].inFlight;
    const before = s.requests.length;

    const sent: Array<[string, Promise<Response>, number]> = [
      ['getPet 1', request(`${gw.url}/v1/pets/1`, { headers: bearer(KEY), timeoutMs: 10_000 }), 200],
      ['getPet 2', request(`${gw.url}/v1/pets/2`, { headers: bearer(KEY), timeoutMs: 10_000 }), 200],
      ['listPets', request(`${gw.url}/v1/pets?limit=2`, { headers: bearer(KEY), timeoutMs: 10_000 }), 200],
      [
        'createPet',
        request(`${gw.url}/v1/pets`, { method: 'POST', headers: bearer(KEY, { 'content-type': 'application/json' }), body: '{"name":"Rex","categoryId":7}', timeoutMs: 10_000 }),
        201,
      ],
      ['getPet 3', request(`${gw.url}/v1/pets/3`, { headers: bearer(KEY), timeoutMs: 10_000 }), 200],
    ];
    const completedAt: number[] = [];
    for (const [, p] of sent) {
      p.then(
        () => completedAt.push(performance.now()),
        () => completedAt.push(performance.now()),
      );
    }
    // Two kept-alive connections, each with a request in flight; `kept` gets a second request after the signal.
    const kept = rawConnection(gw.port);
    const quiet = rawConnection(gw.port);
    t.teardown(() => {
      kept.socket.destroy();
      quiet.socket.destroy();
    });
    kept.send('/v1/pets/9');
    quiet.send('/v1/pets/8');
    await waitFor('every request at the upstream', () => s.requests.length >= before + sent.length + 2);
    t.equal(completedAt.length, 0, 'nothing has completed yet');

    const since = gw.handle.output().stdout.length;
    const t0 = performance.now();
    gw.handle.child.kill('SIGTERM');

    // New connections are refused once the signal is handled (well before the upstream answers).
    let outcome = '';
    for (let i = 0; i < 50 && performance.now() - t0 < 500; i++) {
      outcome = await tryConnect(gw.port);
      if (outcome === 'refused') break;
      await sleep(10);
    }
    const refusedAfter = performance.now() - t0;
    t.equal(outcome, 'refused', `a new connection is refused (${Math.round(refusedAfter)} ms after SIGTERM)`);
    t.equal(completedAt.length, 0, 'while the requests are still in flight');
    gw.handle.child.kill('SIGTERM'); // a second signal changes nothing
    // A second request on the kept-alive connection, after the signal.
    kept.send('/v1/pets/10');

    for (const [name, p, status] of sent) {
      const res = await p;
      t.equal(res.status, status, `${name}: completes with ${status}: ${res.body.slice(0, 100)}`);
    }
    t.equal((JSON.parse((await sent[0]![1]).body) as { id: number }).id, 1, 'with the upstream answer');

    const exit = await exitWithin(gw.handle, t0, 10_000);
    t.equal(exit.code, 0, 'exit code 0');
    t.equal(exit.signal, null, 'not killed by the signal');
    t.ok(exit.ms < 10_000, `within the 10 s grace period (${Math.round(exit.ms)} ms after SIGTERM)`);
    t.ok(exit.ms < 700 + SLACK_MS, `soon after the last request completed (${Math.round(exit.ms)} ms after SIGTERM)`);
    t.ok(Math.max(...completedAt) - t0 <= exit.ms + 50, 'not before the in-flight requests completed');
    const logged = gw.handle.output().stdout.slice(since);
    t.match(logged, /"msg":"shutting down"/, 'logs the shutdown');
    t.notMatch(logged, /closing their connections/, 'no connection had to be cut');

    await waitFor('the kept-alive connections to close', () => kept.closed() && quiet.closed(), 3000).catch(() => undefined);
    const [calm] = quiet.responses();
    t.equal(calm?.status, 200, 'a kept-alive connection: its request in flight completes 200');
    t.equal(calm?.body, pet(8));
    const lingered = (quiet.closedAt() ?? Infinity) - (quiet.firstAnswerAt() ?? NaN);
    t.ok(calm?.headers.connection === 'close' || lingered < 300, `then it is closed: Connection: ${calm?.headers.connection}, closed ${Math.round(lingered)} ms after the answer`);
    const answers = kept.responses();
    t.equal(answers[0]?.status, 200, 'the kept-alive connection: its request in flight completes 200');
    t.equal(answers[0]?.body, pet(9));
    t.ok(kept.closed(), 'then the connection is closed');
    // The request sent after the signal on that connection: served, or refused in the Error shape.
    const late = answers[1];
    if (late === undefined) {
      t.pass('the request sent after the signal was not answered: the connection was closed');
    } else {
      t.comment(`the request sent after SIGTERM on the kept-alive connection got ${late.status} ${late.body.slice(0, 120)}`);
      if (late.status >= 200 && late.status < 300) t.equal(late.body, pet(10), 'served');
      else assertErrorShape(t, late);
    }
  });

  t.test(`engine ${engine}: server.shutdownGraceMs: 300 and an upstream that hangs 5 s`, async (t) => {
    const s = await hanging;
    const gw = await gateways[engine].grace;
    const before = s.requests.length;
    let settled: { at: number; outcome: string } | undefined;
    const pending = request(`${gw.url}/v1/pets/1`, { headers: bearer(KEY), timeoutMs: 10_000 }).then(
      (res) => (settled = { at: performance.now(), outcome: `answered ${res.status} ${res.body.slice(0, 100)}` }),
      (err: Error) => (settled = { at: performance.now(), outcome: `closed: ${err.message}` }),
    );
    await waitFor('the request at the upstream', () => s.requests.length > before);
    const since = gw.handle.output().stdout.length;
    const t0 = performance.now();
    gw.handle.child.kill('SIGTERM');
    const exit = await exitWithin(gw.handle, t0, 8000);
    t.equal(exit.code, 0, 'exit code 0');
    t.equal(exit.signal, null);
    t.ok(exit.ms >= 250, `not before the grace period (${Math.round(exit.ms)} ms)`);
    t.ok(exit.ms < 300 + SLACK_MS, `shortly after the 300 ms grace period (${Math.round(exit.ms)} ms), not after the 5 s upstream`);
    await within(pending, 2000, undefined);
    t.ok(settled !== undefined, 'the hanging client is not left waiting');
    t.match(settled?.outcome ?? '', /^closed: /, `its connection is closed (${settled?.outcome})`);
    t.ok((settled?.at ?? Infinity) - t0 < 300 + SLACK_MS, `at the end of the grace period (${Math.round((settled?.at ?? NaN) - t0)} ms)`);
    const logged = gw.handle.output().stdout.slice(since);
    t.match(logged, /"msg":"requests still in flight after the grace period; closing their connections"/, 'logs the forced close');
  });
}

// parity: SIGINT reaches the CLI's one stop(), as SIGTERM does; each engine's stop (requests in flight,
// past the grace period) is tested on every engine above.
t.test('SIGINT on an idle gateway: exit 0 at once', async (t) => {
  const gw = await idle;
  assertError(t, await request(`${gw.url}/v1/pets`), 401, 'missing_api_key');
  const t0 = performance.now();
  gw.handle.child.kill('SIGINT');
  const exit = await exitWithin(gw.handle, t0, 5000);
  t.equal(exit.code, 0);
  t.ok(exit.ms < SLACK_MS, `within ${SLACK_MS} ms (${Math.round(exit.ms)} ms)`);
  t.equal(await tryConnect(gw.port), 'refused', 'nothing listens any more');
});
