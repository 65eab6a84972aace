/**
 * The migration lane attacked: a hostile `next` (an in-test server on a real socket) beside the
 * reference backend as legacy (its own process). What a next answers never reaches the client, a
 * log or the report unmasked; every shadow copy ends (the lane's in-flight count back to 0); a
 * reload changes only what it says it changes.
 */
import t from 'tap';
import { gzipSync } from 'node:zlib';
import type { ServerResponse } from 'node:http';
import { bearer, forEachEngine, request, sendJson, startBackendProcess, startStubUpstream, testKey, type TeardownHost } from '../helpers/servers.js';
import { until } from '../helpers/wait.js';
import { seed, startLaneGateway, type Backends, type LaneGateway, type NextUpstream } from '../helpers/migration.js';
import { hashKey } from '../../src/policies/auth/keys.js';

const legacy = (await startBackendProcess(t)).url;
await seed(legacy);

/** How the hostile next answers, by request (a test sets it). */
let behave: (path: string, headers: Record<string, string | string[] | undefined>, res: ServerResponse) => void = (_p, _h, res) => sendJson(res, 500, { code: 'internal_error', message: 'unset', status: 500 });
const hostile = await startStubUpstream(t, (req, res) => behave(req.url, req.headers, res));
const backends: Backends = { legacy, next: { url: `${hostile.origin}/v1` } as NextUpstream };

/** The lane inside a holder: its in-flight shadow copies. */
function inFlight(gw: LaneGateway): number {
  return (gw.holder as unknown as { lane: { lane: { inFlight: number } } }).lane.lane.inFlight;
}

async function settled(gw: LaneGateway, ms = 5000): Promise<void> {
  await until('every shadow copy ended', async () => inFlight(gw) === 0, ms);
}

const PET1 = '{"id":1,"name":"Rex","categoryId":1,"status":"available"}';

async function legacyPet1(): Promise<string> {
  return (await request(`${legacy}/pets/1`)).body;
}

// parity: the samples are masked by the lane's comparison, above every transport; engines are covered by the scenario below
t.test('a key the client presented is masked in the samples, even when next echoes it (forwarded credential)', async (t) => {
  const key = testKey();
  behave = (_p, headers, res) => {
    const token = String(headers.authorization ?? '').replace(/^Bearer /, '');
    sendJson(res, 200, `{"id":1,"name":"${token}","categoryId":1,"status":"available"}`);
  };
  const gw = await startLaneGateway(t, 'undici', backends, { operations: { getPet: { mode: 'shadow' } } }, { policies: { auth: { keysFromEnv: null, keys: [{ id: 'k1', hash: hashKey(key) }], upstreamAuthorization: 'forward' } } }, key);
  const res = await request(`${gw.url}/v1/pets/1`, { headers: bearer(key) });
  t.equal(res.status, 200);
  await until('compared', async () => ((await gw.op('getPet'))?.compared ?? 0) >= 1, 5000);
  const report = JSON.stringify(await gw.report());
  t.ok(report.includes('$.name'), 'the difference is found');
  t.notOk(report.includes(key), 'the key is not in the report');
  t.notOk(report.includes(key.slice(0, 12)), 'nor a part of it');
});

forEachEngine(t, async (t, engine) => {
  t.test('shadow: a hostile next never changes the client\'s answer, and every copy ends', async (t) => {
    const gw = await startLaneGateway(t, engine, backends, { operations: { getPet: { mode: 'shadow' } }, shadow: { timeoutMs: 500 } });
    const expected = await legacyPet1();
    const kinds: Record<string, (res: ServerResponse) => void> = {
      huge: (res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(Buffer.alloc(8 * 1024 * 1024, 0x20));
      },
      status999: (res) => {
        res.socket!.end('HTTP/1.1 999 Nope\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}');
      },
      headerFlood: (res) => {
        for (let i = 0; i < 200; i++) res.setHeader(`x-flood-${i}`, 'v'.repeat(100));
        sendJson(res, 200, PET1);
      },
      gzip: (res) => {
        const body = gzipSync(PET1);
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': body.length });
        res.end(body);
      },
      html: (res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.end('<html><body>DB_PASSWORD=hunter2hunter2</body></html>');
      },
      shortLength: (res) => {
        res.socket!.end(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n${PET1}`);
      },
      drip: (res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        const timer = setInterval(() => res.write(' '), 50);
        res.on('close', () => clearInterval(timer));
      },
      headersThenReset: (res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"id":1,');
        setTimeout(() => res.socket?.destroy(), 20);
      },
      informational: (res) => {
        res.writeContinue();
        res.writeProcessing?.();
        sendJson(res, 200, PET1);
      },
    };
    for (const [kind, answer] of Object.entries(kinds)) {
      behave = (_p, _h, res) => answer(res);
      const res = await request(`${gw.url}/v1/pets/1`, { headers: bearer(gw.key) });
      t.equal(res.status, 200, `${kind}: 200`);
      t.equal(res.body, expected, `${kind}: legacy's answer, byte for byte`);
      t.notOk(JSON.stringify(res.headers).includes('flood'), `${kind}: nothing of next's headers`);
    }
    await settled(gw);
    t.equal(inFlight(gw), 0, 'no copy left in flight');
    const report = JSON.stringify(await gw.report());
    t.notOk(report.includes('hunter2'), 'nothing of next\'s body in the report');
  });
});

// parity: the lane's in-flight count is the lane's own, above every transport; the engines' answers are covered above
t.test('a client that leaves mid-request leaves no copy in flight (next hangs)', async (t) => {
  const hung: ServerResponse[] = [];
  behave = (_p, _h, res) => void hung.push(res);
  t.teardown(() => hung.forEach((r) => r.destroy()));
  const gw = await startLaneGateway(t, 'undici', backends, { operations: { getPet: { mode: 'shadow' }, listPets: { mode: 'next' } }, shadow: { timeoutMs: 300 } });
  for (let i = 0; i < 5; i++) {
    await request(`${gw.url}/v1/pets/1`, { headers: bearer(gw.key), timeoutMs: 1 }).catch(() => undefined);
    await request(`${gw.url}/v1/pets?limit=2`, { headers: bearer(gw.key), timeoutMs: 50 }).catch(() => undefined);
  }
  await settled(gw, 3000);
  t.equal(inFlight(gw), 0, 'in flight back to 0');
});

function reloadGate(t: TeardownHost) {
  return startLaneGateway(t, 'undici', backends, { operations: { getPet: { mode: 'shadow' } }, compare: { maxSamples: 20 } });
}

// parity: a reload's refusal is decided by restartOnlyChanges, before any engine sees it
t.test('a reload that changes compare.maxSamples or maxPaths is refused: the tally keeps its bounds until a restart', async (t) => {
  const gw = await reloadGate(t);
  const problems = await gw.reload({ operations: { getPet: { mode: 'shadow' } }, compare: { maxSamples: 0 } });
  t.ok(problems.some((p) => p.includes('maxSamples')), `refused: ${problems.join('; ')}`);
  const paths = await gw.reload({ operations: { getPet: { mode: 'shadow' } }, compare: { maxSamples: 20, maxPaths: 5 } });
  t.ok(paths.some((p) => p.includes('maxPaths')), `refused: ${paths.join('; ')}`);
  t.same(await gw.reload({ operations: { getPet: { mode: 'split', percent: 5 } }, compare: { maxSamples: 20 } }), [], 'a mode still reloads');
});

const NEXT_PET1 = '{"id":1,"name":"Nx","categoryId":1,"status":"available"}';

// parity: next is reached with the lane's own undici pool whatever the engine (src/gateway.ts openLane)
t.test('next mode: whatever a hostile next does to a getPet, the client gets a whole answer (legacy\'s on a failure)', async (t) => {
  const gw = await startLaneGateway(t, 'undici', backends, { operations: { getPet: { mode: 'next' } } }, {}, undefined);
  const expected = await legacyPet1();
  const kinds: Record<string, [(res: ServerResponse) => void, string]> = {
    good: [(res) => sendJson(res, 200, NEXT_PET1), NEXT_PET1],
    brokenBody: [(res) => sendJson(res, 200, '{"id":1,"name":'), expected],
    headersThenReset: [(res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"id":1,');
      setTimeout(() => res.socket?.destroy(), 20);
    }, expected],
    huge: [(res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(Buffer.alloc(8 * 1024 * 1024, 0x20));
    }, expected],
    status999: [(res) => void res.socket!.end('HTTP/1.1 999 Nope\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}'), expected],
    gzip: [(res) => {
      const body = gzipSync(NEXT_PET1);
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': body.length });
      res.end(body);
    }, expected],
    html: [(res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>oops</html>');
    }, expected],
    shortLength: [(res) => void res.socket!.end(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n${NEXT_PET1}`), expected],
    informational: [(res) => {
      res.writeProcessing?.();
      sendJson(res, 200, NEXT_PET1);
    }, NEXT_PET1],
  };
  for (const [kind, [answer, want]] of Object.entries(kinds)) {
    behave = (_p, _h, res) => answer(res);
    const res = await request(`${gw.url}/v1/pets/1`, { headers: bearer(gw.key) });
    t.equal(res.status, 200, `${kind}: 200`);
    t.equal(res.body, want, `${kind}: ${want === expected ? "legacy's" : "next's"} answer`);
  }
  const op = await gw.op('getPet');
  t.ok(Object.values(op?.fallbacks ?? {}).reduce((a, b) => a + b, 0) >= 7, `fallbacks counted: ${JSON.stringify(op?.fallbacks)}`);
});

// parity: next is reached with the lane's own undici pool whatever the engine (src/gateway.ts openLane)
t.test('next mode: a createPet next fails is never repeated, never created twice', async (t) => {
  const gw = await startLaneGateway(t, 'undici', backends, { operations: { createPet: { mode: 'next' } }, next: { url: backends.next.url, timeouts: { headersMs: 300 } } });
  const count = async () => ((await request(`${legacy}/pets?limit=100`)).json as unknown[]).length;
  const before = await count();
  const kinds: Record<string, (res: ServerResponse) => void> = {
    headersThenReset: (res) => {
      res.writeHead(201, { 'content-type': 'application/json' });
      res.write('{"id":9,');
      setTimeout(() => res.socket?.destroy(), 20);
    },
    status999: (res) => void res.socket!.end('HTTP/1.1 999 Nope\r\ncontent-length: 0\r\n\r\n'),
    error500: (res) => sendJson(res, 500, { code: 'internal_error', message: 'broke', status: 500 }),
    reset: (res) => void res.socket?.destroy(),
    hang: () => undefined,
  };
  for (const [kind, answer] of Object.entries(kinds)) {
    const posts = hostile.requests.filter((r) => r.method === 'POST').length;
    behave = (_p, _h, res) => answer(res);
    const res = await request(`${gw.url}/v1/pets`, { method: 'POST', headers: bearer(gw.key, { 'content-type': 'application/json' }), body: '{"name":"Once","categoryId":5}' }).catch((err: Error) => ({ status: 0, body: err.message }));
    t.not(res.status, 201, `${kind}: not a creation (${res.status})`);
    t.equal(hostile.requests.filter((r) => r.method === 'POST').length, posts + 1, `${kind}: next got it once`);
  }
  t.equal(await count(), before, 'legacy created nothing');
});

// parity: the cache and the lane are wrappers of send above every transport; the engines' shadow path is covered above
t.test('the response cache with the lane: shadow hits and misses are compared; next\'s answers are never cached', async (t) => {
  const tester = testKey();
  const plain = testKey();
  behave = (_p, _h, res) => sendJson(res, 200, NEXT_PET1);
  const auth = { keysFromEnv: null, keys: [{ id: 'tester', hash: hashKey(tester), scopes: ['migration:tester'] }, { id: 'plain', hash: hashKey(plain) }] };
  const gw = await startLaneGateway(t, 'undici', backends, { operations: { getPet: { mode: 'shadow' } } }, { policies: { auth, cache: { ttlSeconds: { getPet: 60 } } } }, plain);
  const first = await request(`${gw.url}/v1/pets/1`, { headers: bearer(plain) });
  const second = await request(`${gw.url}/v1/pets/1`, { headers: bearer(plain) });
  t.match(String(first.headers['cache-status']), /miss|stored/i, `the first is a miss: ${String(first.headers['cache-status'])}`);
  t.match(String(second.headers['cache-status']), /hit/i, `the second a hit: ${String(second.headers['cache-status'])}`);
  t.equal(second.body, first.body, "the hit is legacy's answer");
  await until('both compared', async () => ((await gw.op('getPet'))?.compared ?? 0) >= 2, 5000);
  const op = await gw.op('getPet');
  t.equal(op?.different, 2, 'the hit compared too (next differs at $.name)');
  t.same(op?.paths.map((p) => p.path), ['$.name']);
  const picked = await request(`${gw.url}/v1/pets/1`, { headers: bearer(tester, { 'x-migration-side': 'next' }) });
  t.equal(picked.body, NEXT_PET1, "a tester's pick of next is next's answer, not the cached one");
  const again = await request(`${gw.url}/v1/pets/1`, { headers: bearer(plain) });
  t.equal(again.body, first.body, "next's answer was not cached");
  await settled(gw);
});

// parity: HTTP/2 is served by the node listener the CLI makes; the engines' shadow path is covered above
t.test('HTTP/2 clients in shadow mode: the client gets legacy\'s answer, the copy is compared', async (t) => {
  const { makeTestPki, h2Request } = await import('../helpers/certs.js');
  const pki = makeTestPki(t);
  behave = (_p, _h, res) => sendJson(res, 200, NEXT_PET1);
  const gw = await startLaneGateway(t, 'undici', backends, { operations: { getPet: { mode: 'shadow' } } }, { server: { tls: { certFile: pki.server.cert, keyFile: pki.server.key } } });
  const res = await h2Request(gw.url.replace('http:', 'https:'), '/v1/pets/1', { ca: pki.read(pki.ca), headers: bearer(gw.key) as Record<string, string> });
  t.equal(res.alpn, 'h2');
  t.equal(res.body, await legacyPet1());
  await until('compared', async () => ((await gw.op('getPet'))?.compared ?? 0) >= 1, 5000);
  t.same((await gw.op('getPet'))?.paths.map((p) => p.path), ['$.name']);
});

// parity: talks to the CLI (check, SIGHUP), the same for every engine
t.test('the CLI: check refuses a bad section; SIGHUP reloads modes, refuses a new next or no section', async (t) => {
  const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { tmpdir } = await import('node:os');
  const { runCli, spawnCliUntil } = await import('../helpers/servers.js');
  const dir = mkdtempSync(join(tmpdir(), 'migration-attack-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const key = testKey();
  const env = { PETSTORE_API_KEYS: key, LOG_LEVEL: 'info' };
  const file = join(dir, 'policy.json');
  const write = (migration: unknown, upstream = legacy) =>
    writeFileSync(file, JSON.stringify({ version: 1, upstream: { url: upstream }, ...(migration === undefined ? {} : { migration }), policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS' } } }));
  const next = { url: backends.next.url };
  for (const [what, migration, upstream, word] of [
    ['an operation the interface lacks', { next, operations: { deletePet: { mode: 'shadow' } } }, legacy, 'deletePet'],
    ['a builtin upstream', { next }, 'builtin', 'builtin'],
    ['next = upstream', { next: { url: `${legacy}/` } }, legacy, 'legacy upstream itself'],
  ] as const) {
    write(migration, upstream);
    const r = await runCli(t, ['check', file], { env });
    t.not(r.code, 0, `check refuses ${what}`);
    t.match(r.stdout + r.stderr, word, `and says so: ${what}`);
  }
  behave = (_p, _h, res) => sendJson(res, 200, NEXT_PET1);
  write({ next, operations: { getPet: { mode: 'shadow' } } });
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--host', '127.0.0.1', '--port', '0'], /petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) /, { env, timeoutMs: 30_000 });
  const url = `${match[1]!}/v1/pets/1`;
  const expected = await legacyPet1();
  t.equal((await request(url, { headers: bearer(key) })).body, expected, "shadow: legacy's answer");
  write({ next, operations: { getPet: { mode: 'next' } } });
  handle.child.kill('SIGHUP');
  await until('next mode in force', async () => (await request(url, { headers: bearer(key) })).body === NEXT_PET1, 5000);
  for (const [what, migration] of [['a new next', { next: { url: `${hostile.origin}/v2` }, operations: { getPet: { mode: 'next' } } }], ['no section', undefined]] as const) {
    const since = handle.output().stdout.length + handle.output().stderr.length;
    write(migration);
    handle.child.kill('SIGHUP');
    await until(`${what}: refused`, async () => /migration/.test((handle.output().stdout + handle.output().stderr).slice(since)), 5000);
    t.equal((await request(url, { headers: bearer(key) })).body, NEXT_PET1, `${what}: refused, next mode still in force`);
  }
});
