/**
 * `server.maxInFlightPerConsumer`: one consumer's requests past the bound wait, in arrival order,
 * unread and unsent, then get 429 too_many_in_flight; another consumer is not held back; over
 * HTTP/1.1 the waiting request's connection is not read; over HTTP/2 a waiting stream does not
 * hold the session's other streams. Real servers on 127.0.0.1, every engine, a stub upstream that
 * answers when the test says.
 */
import { writeFileSync } from 'node:fs';
import { connect as h2connect } from 'node:http2';
import { connect } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { makeTestPki, type TestPki } from '../helpers/certs.js';
import { assertError } from '../helpers/assert.js';
import { parseExposition, value } from '../helpers/prom.js';
import { bearer, ensureBuilt, forEachEngine, JSON_TYPE, request, sleep, spawnCliUntil, startGateway, startStubUpstream, tempDir, testKey, type Response } from '../helpers/servers.js';
import { waitFor } from '../helpers/wait.js';

ensureBuilt();
const pki: TestPki = makeTestPki(t);
const ca = pki.read(pki.ca);
const dir = tempDir(t, 'consumer-bound');
const READY = /^(?=[\s\S]*petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) )(?=[\s\S]*"url":"(http:\/\/127\.0\.0\.1:\d+)","msg":"admin listening)/;

/** A stub upstream that answers getPet only when `answer(id)` is called; `seen(id)`: it was asked. */
async function heldUpstream(t: Parameters<typeof startStubUpstream>[0]) {
  const waiting = new Map<string, () => void>();
  const stub = await startStubUpstream(t, (req, res) => {
    const id = /\/pets\/(\d+)/.exec(req.url)?.[1] ?? '0';
    waiting.set(id, () => {
      const body = `{"id":${id},"name":"p${id}","categoryId":1}`;
      res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  });
  const seen = (id: number) => stub.requests.some((r) => r.url.endsWith(`/pets/${id}`));
  const answer = async (id: number) => {
    const go = await waitFor(`the upstream got /pets/${id}`, () => waiting.get(String(id)));
    waiting.delete(String(id));
    go();
  };
  return { stub, seen, answer };
}

forEachEngine(t, async (t, engine) => {
  t.test('maxInFlightPerConsumer 2: the third waits unsent and gets 429; a freed place goes to the oldest waiting; another consumer passes', async (t) => {
    const up = await heldUpstream(t);
    const [a, b] = [testKey(), testKey()];
    const gw = await startGateway(t, { upstream: { url: `${up.stub.origin}/v1` }, server: { maxInFlightPerConsumer: 2, consumerQueueMs: 400 } }, { engine, key: `${a},${b}` });
    const get = (id: number, key: string) => request(`${gw.url}/v1/pets/${id}`, { headers: bearer(key), timeoutMs: 5000 });
    const r1 = get(1, a);
    const r2 = get(2, a);
    await waitFor('two of A at the upstream', () => up.seen(1) && up.seen(2));

    // Another consumer is not held back by A's bound.
    const rb = get(3, b);
    await up.answer(3);
    t.equal((await rb).status, 200, "B is served while A's places are taken");

    // A's third waits queueMs, never reaches the upstream, and is told to retry.
    const sent = performance.now();
    const r4 = await get(4, a);
    const waited = performance.now() - sent;
    assertError(t, r4, 429, 'too_many_in_flight', { headers: { 'retry-after': '1' } });
    t.ok(waited >= 350, `it waited consumerQueueMs first (${waited.toFixed(0)} ms)`);
    t.notOk(up.seen(4), 'it never reached the upstream');

    // Two more of A wait; the first freed place goes to the older one, the next to the other.
    const r5 = get(5, a);
    await sleep(50);
    const r6 = get(6, a);
    await sleep(100);
    t.notOk(up.seen(5) || up.seen(6), 'both wait while two of A are in flight');
    await up.answer(1);
    t.equal((await r1).status, 200, 'the first answer');
    await waitFor('the older waiting request got the place', () => up.seen(5));
    t.notOk(up.seen(6), 'the younger still waits');
    await up.answer(2);
    await up.answer(5);
    await up.answer(6);
    const [s2, s5, s6] = await Promise.all([r2, r5, r6]).then((rs: Response[]) => rs.map((r) => r.status));
    t.strictSame([s2, s5, s6], [200, 200, 200], 'the others are served');
  });

  t.test('a waiting request keeps its HTTP/1.1 connection unread', async (t) => {
    const up = await heldUpstream(t);
    const [a, b] = [testKey(), testKey()];
    const gw = await startGateway(t, { upstream: { url: `${up.stub.origin}/v1` }, server: { maxInFlightPerConsumer: 1, consumerQueueMs: 600 } }, { engine, key: `${a},${b}` });
    const first = request(`${gw.url}/v1/pets/1`, { headers: bearer(a), timeoutMs: 5000 });
    await waitFor('A has its one place', () => up.seen(1));
    const socket = connect(Number(new URL(gw.url).port), '127.0.0.1');
    t.teardown(() => socket.destroy());
    let text = '';
    socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
    socket.on('error', () => undefined);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    const head = (id: number, key: string) => `GET /v1/pets/${id} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\n\r\n`;
    socket.write(head(2, a));
    await sleep(150);
    // B's request comes in a later read of the same connection: not parsed while A's waits.
    socket.write(head(3, b));
    await sleep(250);
    t.notOk(up.seen(3), "B's pipelined request was not read while A's waited");
    // A's expires (429), then the connection is read again and B's goes through.
    await waitFor('the upstream got B', () => up.seen(3), 3000);
    await up.answer(3);
    await waitFor('both answers', () => (text.match(/HTTP\/1\.1 \d{3} /g) ?? []).length >= 2 || undefined, 3000);
    const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    t.strictSame(statuses, [429, 200], "A's 429, then B's 200, in order");
    await up.answer(1);
    t.equal((await first).status, 200);
  });

  t.test('over HTTP/2 a waiting stream does not hold the session: another stream on it is served', async (t) => {
    const up = await heldUpstream(t);
    const [a, b] = [testKey(), testKey()];
    const tls = { certFile: pki.server.cert, keyFile: pki.server.key };
    const gw = await startGateway(t, { upstream: { url: `${up.stub.origin}/v1` }, server: { tls, maxInFlightPerConsumer: 1, consumerQueueMs: 500 } }, { engine, key: `${a},${b}` });
    const session = h2connect(gw.url.replace('http:', 'https:'), { ca });
    t.teardown(() => session.destroy());
    session.on('error', () => undefined);
    const stream = (id: number, key: string) =>
      new Promise<number>((resolve) => {
        const s = session.request({ ':method': 'GET', ':path': `/v1/pets/${id}`, authorization: `Bearer ${key}` });
        let status = 0;
        s.on('response', (h) => (status = Number(h[':status'])));
        s.on('error', () => resolve(-1));
        s.on('close', () => resolve(status));
        s.resume();
      });
    const s1 = stream(1, a);
    await waitFor('A has its one place', () => up.seen(1));
    const s2 = stream(2, a);
    await sleep(100);
    const s3 = stream(3, b);
    await up.answer(3);
    t.equal(await s3, 200, "B's stream is served while A's second waits on the same session");
    t.equal(await s2, 429, "A's second gets 429 after consumerQueueMs");
    t.notOk(up.seen(2), 'and never reached the upstream');
    await up.answer(1);
    t.equal(await s1, 200);
  });
});

forEachEngine(t, async (t, engine) => {
  t.test('the CLI counts waiting and expired requests in petstore_gateway_overflows_total', async (t) => {
    const up = await heldUpstream(t);
    const key = testKey();
    const file = join(dir, `metrics-${engine}.yaml`);
    const server = { maxInFlightPerConsumer: 1, consumerQueueMs: 300 };
    writeFileSync(file, JSON.stringify({ version: 1, upstream: { url: `${up.stub.origin}/v1` }, server, policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS' } } }));
    const { match } = await spawnCliUntil(t, ['serve', '--policy', file, '--host', '127.0.0.1', '--port', '0', '--engine', engine], READY, {
      env: { PETSTORE_API_KEYS: key, LOG_LEVEL: 'info' },
      timeoutMs: 30_000,
    });
    const [url, admin] = [match[1] ?? '', match[2] ?? ''];
    const first = request(`${url}/v1/pets/1`, { headers: bearer(key) });
    await waitFor('the one place taken', () => up.seen(1));
    assertError(t, await request(`${url}/v1/pets/2`, { headers: bearer(key) }), 429, 'too_many_in_flight', { headers: { 'retry-after': '1' } });
    await up.answer(1);
    t.equal((await first).status, 200);
    const exp = parseExposition((await request(`${admin}/metrics`)).body);
    t.equal(value(exp, 'petstore_gateway_overflows_total', { event: 'consumer_queued' }), 1, 'one request waited');
    t.equal(value(exp, 'petstore_gateway_overflows_total', { event: 'consumer_expired' }), 1, 'and got its 429');
    t.equal(value(exp, 'petstore_gateway_overflows_total', { event: 'pipeline_closed' }), 0, 'no connection closed');
  });
});
