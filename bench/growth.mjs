// How the cost of the policy chain grows (no sockets; dist's chain with every policy on):
//   (a) createPet body size, 100 B to the 16 KiB limit, beside JSON.parse of the same bytes;
//   (b) listPets response enforcement on lists of 20 to 10,000 animals (a legacy upstream that
//       ignores limit/status), beside JSON.parse + JSON.stringify of the same body, and with
//       response-contract monitor (folded in from the former bench/list-enforcement.mjs);
//   (c) the number of configured keys, 10 to 100,000: chain.begin with a valid and an unknown key
//       per ring size (lookup must stay O(1)), and the ring's heap per key;
//   (d) memory under 1,000,000 distinct unknown keys through chain.begin (heap after GC, RSS).
// Interleaved rounds, median.
//
//   npm run build && node --expose-gc bench/growth.mjs
//
// Environment: BENCH_GROWTH_ROUNDS (5), BENCH_GROWTH_MS (50), BENCH_MAX_KEYS (100000),
// BENCH_INVALID_KEYS_CHAIN (1000000).
import { KEY, benchGateway, newPetOfSize, petList } from './fixtures.mjs';
import { envNum, fmt, isMain, machine, microRounds, ratio, table } from './lib.mjs';
import { exchange } from './chain.mjs';

const HOST = '127.0.0.1:8080';
const gc = globalThis.gc ?? (() => {});
const heapMb = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed / 1048576;
};
const rssMb = () => process.memoryUsage().rss / 1048576;

function bodySizes(ROUNDS, PASS_MS) {
  const gw = benchGateway({ upstream: 'http://127.0.0.1:1/v1' });
  const created = Buffer.from('{"id":151,"name":"x","categoryId":1,"status":"available"}');
  const sizes = [100, 1024, 4096, 16384];
  const cases = [];
  for (const size of sizes) {
    const body = Buffer.from(newPetOfSize(size));
    const r = { method: 'POST', target: '/v1/pets', headers: { host: HOST, authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'content-length': String(size) }, body, upstream: { status: 201, body: created } };
    if (exchange(gw, r) !== 201) throw new Error(`createPet of ${size} B not accepted`);
    cases.push({ name: `chain ${size}`, size, fn: () => exchange(gw, r) });
    cases.push({ name: `JSON.parse ${size}`, size, fn: () => JSON.parse(body.toString('utf8')) });
  }
  // 16 KiB + 1 is refused by the adapter before the chain (413); not a chain case.
  const res = microRounds(cases, ROUNDS, PASS_MS);
  const by = Object.fromEntries(res.map((r) => [r.name, r.ns]));
  const base = by['chain 100'];
  const rows = sizes.map((s) => [
    s === 16384 ? '16,384 (the limit)' : fmt(s),
    fmt(by[`chain ${s}`]),
    ratio(by[`chain ${s}`] / base),
    fmt(by[`chain ${s}`] / s, 1),
    fmt(by[`JSON.parse ${s}`]),
    ratio(by[`chain ${s}`] / by[`JSON.parse ${s}`]),
  ]);
  return {
    data: res,
    markdown: [
      '#### createPet body size',
      '',
      'Whole chain per request (begin, acceptBody: lossless parse + NewPet validation, wantsResponseBody); the name is padded to reach the size.',
      '',
      table(['body bytes', 'chain ns/request', '×100 B', 'ns per byte', 'JSON.parse alone ns', 'chain ÷ JSON.parse'], rows),
    ].join('\n'),
  };
}

function listLengths(ROUNDS, PASS_MS) {
  const gw = benchGateway({ upstream: 'http://127.0.0.1:1/v1' });
  const monitor = benchGateway({ upstream: 'http://127.0.0.1:1/v1', contract: 'monitor' });
  const auth = { host: HOST, authorization: `Bearer ${KEY}` };
  const lists = new Map([20, 100, 1000, 10000].map((n) => [n, petList(n)]));
  const spec = [
    { label: '20 animals, limit=20 (nothing removed)', n: 20, q: 'limit=20' },
    { label: '100 animals, limit=100 (nothing removed)', n: 100, q: 'limit=100' },
    { label: '20 animals, limit=20&status=sold (14 removed)', n: 20, q: 'limit=20&status=sold' },
    { label: '1,000 animals, limit=100 (legacy ignores limit)', n: 1000, q: 'limit=100' },
    { label: '10,000 animals, limit=20', n: 10000, q: 'limit=20' },
    { label: '10,000 animals, limit=100', n: 10000, q: 'limit=100' },
    { label: '10,000 animals, limit=100&status=sold', n: 10000, q: 'limit=100&status=sold' },
  ];
  const cases = [];
  for (const [i, s] of spec.entries()) {
    const body = lists.get(s.n);
    const r = { method: 'GET', target: `/v1/pets?${s.q}`, headers: auth, upstream: { status: 200, body } };
    if (exchange(gw, r) !== 200 || exchange(monitor, r) !== 200) throw new Error(`${s.label}: not 200`);
    cases.push({ name: `enforce ${i}`, fn: () => exchange(gw, r) });
    cases.push({ name: `monitor ${i}`, fn: () => exchange(monitor, r) });
    cases.push({ name: `parse ${i}`, fn: () => JSON.stringify(JSON.parse(body.toString('utf8'))) });
  }
  const res = microRounds(cases, ROUNDS, PASS_MS);
  const by = Object.fromEntries(res.map((r) => [r.name, r.ns]));
  const rows = spec.map((s, i) => [
    s.label,
    fmt(lists.get(s.n).length),
    fmt(by[`enforce ${i}`]),
    ratio(by[`enforce ${i}`] / by['enforce 0']),
    fmt(by[`monitor ${i}`]),
    fmt(by[`parse ${i}`]),
    ratio(by[`enforce ${i}`] / by[`parse ${i}`]),
  ]);
  return {
    data: res,
    markdown: [
      '#### listPets response enforcement and list length',
      '',
      'Whole chain per request (begin, wantsResponseBody, finishResponse with list-pets enforcing the upstream body), beside JSON.parse + JSON.stringify of the same body (which would also lose every id above 2^53).',
      '',
      table(['upstream body', 'bytes', 'chain ns (enforce)', '×20 animals', 'chain ns (enforce + contract monitor)', 'JSON.parse+stringify ns', 'enforce ÷ parse+stringify'], rows),
    ].join('\n'),
  };
}

function keyRings(ROUNDS, PASS_MS, MAX_KEYS) {
  const sizes = [10, 100, 1000, 10000, 100000].filter((n) => n <= MAX_KEYS);
  const cases = [];
  const build = [];
  const list20 = petList(20);
  for (const n of sizes) {
    const keys = [];
    for (let i = 0; i < n - 1; i++) keys.push('psg_' + String(i).padStart(43, 'k'));
    keys.push(KEY);
    const h0 = heapMb();
    const t0 = process.hrtime.bigint();
    const gw = benchGateway({ upstream: 'http://127.0.0.1:1/v1', keys: keys.join(',') });
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    const h1 = heapMb();
    build.push({ n, ms, heapPerKey: ((h1 - h0) * 1048576) / n, gw });
    // getPet: the request phase only (auth, route, deprecation), so the key lookup is most of it.
    const valid = { method: 'GET', target: '/v1/pets/7', headers: { host: HOST, authorization: `Bearer ${KEY}` }, upstream: { status: 200, body: list20 } };
    const unknown = { method: 'GET', target: '/v1/pets/7', headers: { host: HOST, authorization: 'Bearer psg_' + 'z'.repeat(43) }, upstream: { status: 200, body: list20 } };
    const realPrefix = { method: 'GET', target: '/v1/pets/7', headers: { host: HOST, authorization: `Bearer ${KEY.slice(0, -1)}X` }, upstream: { status: 200, body: list20 } };
    if (exchange(gw, valid) !== 200 || exchange(gw, unknown) !== 401 || exchange(gw, realPrefix) !== 401) throw new Error(`ring ${n}: wrong answers`);
    // Timed: chain.begin alone (the request phase, where the key is looked up).
    const begin = (r) => () => gw.chain.begin(r).error;
    cases.push({ name: `valid ${n}`, fn: begin(valid) });
    cases.push({ name: `unknown ${n}`, fn: begin(unknown) });
    cases.push({ name: `prefix ${n}`, fn: begin(realPrefix) });
  }
  // Cheap cases at the scale of a few µs, where noise shows most: more rounds.
  const res = microRounds(cases, ROUNDS + 4, PASS_MS);
  const by = Object.fromEntries(res.map((r) => [r.name, r.ns]));
  const roundsOf = Object.fromEntries(res.map((r) => [r.name, r.rounds]));
  // On a shared machine interference only ever adds time: the fastest round of each case is the
  // cleanest estimate of the lookup's own cost, so the O(1) check compares minima (medians shown).
  const best = (name) => Math.min(...roundsOf[name]);
  const vsTen = (kind, n) => best(`${kind} ${n}`) / best(`${kind} ${sizes[0]}`);
  const rows = build.map((b) => [
    fmt(b.n),
    fmt(by[`valid ${b.n}`]),
    fmt(best(`valid ${b.n}`)),
    ratio(vsTen('valid', b.n)),
    fmt(by[`unknown ${b.n}`]),
    fmt(best(`unknown ${b.n}`)),
    ratio(vsTen('unknown', b.n)),
    fmt(by[`prefix ${b.n}`]),
    fmt(b.ms),
    b.n >= 1000 ? fmt(b.heapPerKey) : '–',
  ]);
  // O(1): the largest ring against the smallest (a single noisy row in between is not a trend).
  const worst = Math.max(...sizes.map((n) => vsTen('valid', n)), ...sizes.map((n) => vsTen('unknown', n)));
  return {
    data: { res, build: build.map(({ n, ms, heapPerKey }) => ({ n, ms, heapPerKey })), worstRatio: worst, largest: sizes[sizes.length - 1] },
    markdown: [
      '#### Number of configured keys',
      '',
      `\`chain.begin\` of a getPet request (the request phase: auth, route, deprecation), ${ROUNDS + 4} rounds, with a ring of N keys (from PETSTORE_API_KEYS, hashed at load). The machine is shared and interference only adds time, so the ×10 keys columns compare the fastest round of each case (the median is shown too). The near-miss key shares all but its last character with a real one (nothing may depend on how much of a real key is guessed).`,
      '',
      table(['keys', 'valid key ns (median)', 'valid (fastest round)', 'valid ×10 keys', 'unknown key ns (median)', 'unknown (fastest round)', 'unknown ×10 keys', 'near-miss key ns', 'build ms (parse + hash all)', 'heap bytes per key (≥ 1,000 keys)'], rows),
    ].join('\n'),
  };
}

function invalidKeys(COUNT) {
  const gw = benchGateway({ upstream: 'http://127.0.0.1:1/v1' });
  const headers = { host: HOST, authorization: '' };
  const head = { method: 'GET', target: '/v1/pets?limit=20', headers };
  const run = (from, to) => {
    for (let i = from; i < to; i++) {
      headers.authorization = 'Bearer psg_inv_' + i.toString(36).padStart(39, '0');
      if (gw.chain.begin(head).error?.status !== 401) throw new Error('a distinct key was not refused');
    }
  };
  run(0, 20_000); // warm-up, JIT
  const samples = [{ keys: 0, heap: heapMb(), rss: rssMb() }];
  const steps = 4;
  const t0 = process.hrtime.bigint();
  for (let s = 1; s <= steps; s++) {
    run(20_000 + ((s - 1) * COUNT) / steps, 20_000 + (s * COUNT) / steps);
    samples.push({ keys: (s * COUNT) / steps, heap: heapMb(), rss: rssMb() });
  }
  const ns = Number(process.hrtime.bigint() - t0) / COUNT;
  const heapGrowth = samples[samples.length - 1].heap - samples[0].heap;
  const rows = samples.map((s) => [fmt(s.keys), fmt(s.heap, 1), fmt(s.rss, 1)]);
  return {
    data: { count: COUNT, samples, heapGrowthMb: heapGrowth, rssGrowthMb: samples[samples.length - 1].rss - samples[0].rss, nsPerKey: ns, gcExposed: globalThis.gc !== undefined },
    markdown: [
      `#### ${fmt(COUNT)} distinct unknown keys through the chain`,
      '',
      `Each request a new well-formed key (401 invalid_api_key); heap used after a full GC${globalThis.gc === undefined ? ' (GC not exposed: run with --expose-gc)' : ''} and RSS after each quarter; ${fmt(ns)} ns per rejected key.`,
      '',
      table(['distinct keys so far', 'heap used after GC MB', 'RSS MB'], rows),
    ].join('\n'),
  };
}

export function runGrowth() {
  const ROUNDS = envNum('BENCH_GROWTH_ROUNDS', 5, 1, 100);
  const PASS_MS = envNum('BENCH_GROWTH_MS', 50, 10, 5000);
  const MAX_KEYS = envNum('BENCH_MAX_KEYS', 100_000, 10, 1_000_000);
  const COUNT = envNum('BENCH_INVALID_KEYS_CHAIN', 1_000_000, 1000, 100_000_000);
  const body = bodySizes(ROUNDS, PASS_MS);
  const list = listLengths(ROUNDS, PASS_MS);
  const keys = keyRings(ROUNDS, PASS_MS, MAX_KEYS);
  const invalid = invalidKeys(COUNT);
  return {
    markdown: [
      '### How the cost grows (the chain alone, no sockets)',
      '',
      `${ROUNDS} interleaved rounds of about ${PASS_MS} ms per case, median ns per request.`,
      '',
      body.markdown,
      '',
      list.markdown,
      '',
      keys.markdown,
      '',
      invalid.markdown,
    ].join('\n'),
    body: body.data,
    list: list.data,
    keys: keys.data,
    invalid: invalid.data,
  };
}

if (isMain(import.meta.url)) {
  const r = runGrowth();
  if (process.argv.includes('--json')) console.log(JSON.stringify(r));
  else {
    const m = machine();
    console.log(`node ${m.node}, ${m.nproc} × ${m.model}, ${m.date}\n`);
    console.log(r.markdown);
  }
}


