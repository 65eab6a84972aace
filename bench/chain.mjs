// The policy chain alone, no sockets: ns per request through dist's createGateway(parsePolicy(...))
// with every policy on, calling what an adapter calls: chain.begin, acceptBody (createPet),
// wantsResponseBody and, when some policy asks for the body, finishResponse. Interleaved rounds,
// median. Also with response-contract in monitor mode.
//
//   npm run build && node bench/chain.mjs
//
// Environment: BENCH_CHAIN_ROUNDS (7), BENCH_CHAIN_MS (100: the length of one pass of one case).
import { KEY, benchGateway, petList } from './fixtures.mjs';
import { envNum, fmt, isMain, machine, microRounds, table } from './lib.mjs';

const HOST = '127.0.0.1:8080';
const JSON_TYPE = 'application/json';

/** One request through the chain as the adapters run it; returns the status the client gets. */
export function exchange(gateway, { method, target, headers, body, upstream }) {
  const chain = gateway.chain;
  const { ex, error } = chain.begin({ method, target, headers });
  if (error !== undefined) return error.status;
  if (ex.operation.hasBody) {
    const denied = chain.acceptBody(ex, body);
    if (denied !== undefined) return denied.status;
  }
  const head = { status: upstream.status, headers: { 'content-type': JSON_TYPE, 'content-length': String(upstream.body.length) } };
  if (!chain.wantsResponseBody(ex, head)) return head.status;
  return chain.finishResponse(ex, { ...head, body: upstream.body, truncated: false }).status;
}

export function chainCases() {
  const gw = benchGateway({ upstream: 'http://127.0.0.1:1/v1' });
  const monitor = benchGateway({ upstream: 'http://127.0.0.1:1/v1', contract: 'monitor' });
  const auth = { host: HOST, authorization: `Bearer ${KEY}` };
  const list20 = petList(20);
  const list100 = petList(100);
  const pet = Buffer.from('{"id":7,"name":"pet 6","categoryId":6,"status":"available"}');
  const newPet = Buffer.from('{"name":"bench pet","categoryId":9223372036854775807,"status":"available"}');
  const created = Buffer.from('{"id":151,"name":"bench pet","categoryId":9223372036854775807,"status":"available"}');
  const post = { ...auth, 'content-type': JSON_TYPE, 'content-length': String(newPet.length) };
  const req = {
    list20: { method: 'GET', target: '/v1/pets?limit=20', headers: auth, upstream: { status: 200, body: list20 } },
    list100: { method: 'GET', target: '/v1/pets?limit=100', headers: auth, upstream: { status: 200, body: list100 } },
    get: { method: 'GET', target: '/v1/pets/7', headers: auth, upstream: { status: 200, body: pet } },
    create: { method: 'POST', target: '/v1/pets', headers: post, body: newPet, upstream: { status: 201, body: created } },
    invalid: { method: 'GET', target: '/v1/pets?limit=20', headers: { host: HOST, authorization: 'Bearer psg_' + 'x'.repeat(43) }, upstream: { status: 200, body: list20 } },
    missing: { method: 'GET', target: '/v1/pets?limit=20', headers: { host: HOST }, upstream: { status: 200, body: list20 } },
  };
  const expect = (g, r, status) => {
    const got = exchange(g, r);
    if (got !== status) throw new Error(`${r.method} ${r.target}: ${got}, expected ${status}`);
    return () => exchange(g, r);
  };
  return [
    { name: 'listPets limit=20, valid (20 animals enforced)', fn: expect(gw, req.list20, 200) },
    { name: 'listPets limit=100, valid (100 animals enforced)', fn: expect(gw, req.list100, 200) },
    { name: 'getPet, valid (streamed: no body phase)', fn: expect(gw, req.get, 200) },
    { name: 'createPet, valid 73 B NewPet', fn: expect(gw, req.create, 201) },
    { name: 'rejected: unknown key (401)', fn: expect(gw, req.invalid, 401) },
    { name: 'rejected: no Authorization (401)', fn: expect(gw, req.missing, 401) },
    { name: 'listPets limit=20 + response-contract monitor', fn: expect(monitor, req.list20, 200) },
    { name: 'createPet + response-contract monitor', fn: expect(monitor, req.create, 201) },
  ];
}

export function runChain() {
  const ROUNDS = envNum('BENCH_CHAIN_ROUNDS', 7, 1, 100);
  const PASS_MS = envNum('BENCH_CHAIN_MS', 100, 10, 5000);
  const results = microRounds(chainCases(), ROUNDS, PASS_MS);
  const rows = results.map((r) => [r.name, fmt(r.ns), `${fmt(r.min)}–${fmt(r.max)}`, fmt(1e9 / r.ns)]);
  const markdown = [
    '### The policy chain alone (no sockets)',
    '',
    `dist's createGateway with every policy on; per request: chain.begin, acceptBody (createPet), wantsResponseBody, finishResponse when a policy reads the body (list enforcement; monitor). ${ROUNDS} interleaved rounds of about ${PASS_MS} ms per case, median.`,
    '',
    table(['request', 'ns/request (median)', 'range over rounds', 'requests per CPU-second'], rows),
  ].join('\n');
  return { markdown, results: results.map(({ name, ns, min, max }) => ({ name, ns, min, max })) };
}

if (isMain(import.meta.url)) {
  const r = runChain();
  if (process.argv.includes('--json')) console.log(JSON.stringify(r));
  else {
    const m = machine();
    console.log(`node ${m.node}, ${m.nproc} × ${m.model}, ${m.date}\n`);
    console.log(r.markdown);
  }
}


