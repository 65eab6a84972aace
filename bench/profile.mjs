// Where the CPU of a request goes: each target is warmed up, then CPU-profiled (V8's sampling
// profiler, what `node --cpu-prof` uses, started through node:inspector after start-up so module
// loading is left out) for a few seconds of load (the four routes of bench/forward.mjs in turn on
// every connection); the profile's self time is summed per function and per package. Writes the tables between the `profile` markers of BENCHMARKS.md (with --write).
//
//   npm run build && node bench/profile.mjs [--write]
//
// Environment: BENCH_PROFILE_SECONDS (5), BENCH_PROFILE_TARGETS (bare,undici,fastify,http-proxy-3,builtin;
// also floor, monitor, contract, cached, cached-enforce), BENCH_PROFILE_TOP (15), BENCH_PROFILE_ROUTE (all; or list20, list100, get, create).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AUTH, NEW_PET, ROOT, envNum, fmt, isMain, load, machine, sleep, startTarget, table, writeSection } from './lib.mjs';

const KINDS = {
  bare: { name: 'bare @fastify/http-proxy', args: (up) => ['bare-proxy', up] },
  floor: { name: 'floor: node:http + undici Pool, nothing else', args: (up) => ['floor', up] },
  undici: { name: 'gateway, engine undici', args: (up) => ['gateway', up, '--engine', 'undici'] },
  fastify: { name: 'gateway, engine fastify', args: (up) => ['gateway', up, '--engine', 'fastify'] },
  'http-proxy-3': { name: 'gateway, engine http-proxy-3', args: (up) => ['gateway', up, '--engine', 'http-proxy-3'] },
  monitor: { name: 'gateway, undici + response-contract monitor', args: (up) => ['gateway', up, '--engine', 'undici', '--contract', 'monitor'] },
  contract: { name: 'gateway, undici + response-contract enforce', args: (up) => ['gateway', up, '--engine', 'undici', '--contract', 'enforce'] },
  builtin: { name: 'gateway, built-in backend (undici)', args: () => ['gateway', 'builtin', '--engine', 'undici'] },
  // The response cache (bench/fixtures.mjs: getPet 30 s, listPets 5 s): after the warm-up, hits.
  cached: { name: 'gateway, engine undici, response cache', args: (up) => ['gateway', up, '--engine', 'undici', '--cache', 'on'] },
  // The same with the response contract enforced, as a policy file without the section runs.
  'cached-enforce': { name: 'gateway, engine undici, response cache, contract enforce', args: (up) => ['gateway', up, '--engine', 'undici', '--cache', 'on', '--contract', 'enforce'] },
};

const ALL_REQUESTS = [
  { method: 'GET', path: '/v1/pets?limit=20' },
  { method: 'GET', path: '/v1/pets?limit=100' },
  { method: 'GET', path: '/v1/pets/7' },
  { method: 'POST', path: '/v1/pets', body: NEW_PET, headers: { authorization: AUTH, 'content-type': 'application/json' } },
];

const ROUTE_INDEX = { list20: 0, list100: 1, get: 2, create: 3 };
/** BENCH_PROFILE_ROUTE: one of list20, list100, get, create, or all (the four in turn). */
const ROUTE = process.env.BENCH_PROFILE_ROUTE ?? 'all';
if (ROUTE !== 'all' && !(ROUTE in ROUTE_INDEX)) throw new Error(`BENCH_PROFILE_ROUTE: unknown route ${ROUTE}`);
const REQUESTS = ROUTE === 'all' ? ALL_REQUESTS : [ALL_REQUESTS[ROUTE_INDEX[ROUTE]]];

/** Which package (or part of node) a profile URL belongs to. */
function bucket(url, fn) {
  if (url === '') return fn.startsWith('(') ? fn : '(native / V8 builtins)';
  if (url.startsWith('node:')) return 'node: core';
  const nm = url.lastIndexOf('node_modules/');
  if (nm !== -1) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  if (url.includes('/dist/')) return 'petstore-gateway (dist/)';
  if (url.includes('/bench/')) return 'bench harness';
  return url.replace(/^file:\/\//, '');
}

function shortUrl(url) {
  if (url === '') return '';
  let u = url.replace(/^file:\/\//, '').replace(ROOT + '/', '');
  const nm = u.lastIndexOf('node_modules/');
  if (nm !== -1) u = u.slice(nm + 'node_modules/'.length);
  return u;
}

export function analyse(profile, top) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const { samples, timeDeltas } = profile;
  for (let i = 0; i < samples.length; i++) self.set(samples[i], (self.get(samples[i]) ?? 0) + (timeDeltas[i] ?? 0));
  const fns = new Map();
  const buckets = new Map();
  let total = 0;
  let idle = 0;
  for (const [id, us] of self) {
    const { callFrame: cf } = byId.get(id);
    const fn = cf.functionName || '(anonymous)';
    if (fn === '(idle)') {
      idle += us;
      continue;
    }
    total += us;
    const key = `${fn}\t${shortUrl(cf.url)}${cf.url ? `:${cf.lineNumber + 1}` : ''}`;
    fns.set(key, (fns.get(key) ?? 0) + us);
    const b = bucket(cf.url, fn);
    buckets.set(b, (buckets.get(b) ?? 0) + us);
  }
  const sorted = (m) => [...m.entries()].sort((a, b) => b[1] - a[1]);
  const own = sorted(fns).filter(([k]) => k.split('\t')[1].startsWith('dist/'));
  return {
    all: new Map([...fns.entries()].map(([k, us]) => [k, us / 1000])),
    own: own.slice(0, top).map(([k, us]) => ({ fn: k.split('\t')[0], where: k.split('\t')[1], ms: us / 1000, pct: (us / total) * 100 })),
    totalMs: total / 1000,
    idleMs: idle / 1000,
    functions: sorted(fns).slice(0, top).map(([k, us]) => ({ fn: k.split('\t')[0], where: k.split('\t')[1], ms: us / 1000, pct: (us / total) * 100 })),
    buckets: sorted(buckets).map(([b, us]) => ({ bucket: b, ms: us / 1000, pct: (us / total) * 100 })),
  };
}

export async function runProfile(o = {}) {
  const log = o.log ?? ((s) => process.stderr.write(s + '\n'));
  const SECONDS = envNum('BENCH_PROFILE_SECONDS', 5, 1, 60);
  const TOP = envNum('BENCH_PROFILE_TOP', 15, 5, 100);
  const ids = (process.env.BENCH_PROFILE_TARGETS ?? 'bare,undici,fastify,http-proxy-3,builtin').split(',').map((s) => s.trim()).filter((s) => s in KINDS);
  const up = await startTarget('upstream');
  const results = [];
  try {
    for (const id of ids) {
      const dir = mkdtempSync(join(tmpdir(), 'petstore-prof-'));
      const file = join(dir, `${id}.cpuprofile`);
      try {
        const t = await startTarget(...KINDS[id].args(up.url), { env: { ...process.env, BENCH_PROFILE_FILE: file } });
        // Warm-up outside the profile (start-up and module loading are not per request).
        await load(t.url, { requests: REQUESTS, headers: { authorization: AUTH }, connections: 50, duration: 1 });
        t.child.kill('SIGUSR2');
        const deadline = Date.now() + 5000;
        while (!t.output().out.includes('profiling') && Date.now() < deadline) await sleep(20);
        const r = await load(t.url, { requests: REQUESTS, headers: { authorization: AUTH }, connections: 50, duration: SECONDS });
        await t.stop();
        if (!existsSync(file)) throw new Error(`${id}: no profile written`);
        const a = analyse(JSON.parse(readFileSync(file, 'utf8')), TOP);
        results.push({ id, name: KINDS[id].name, requests: r.total, ...a, usPerReq: (a.totalMs * 1000) / r.total });
        log(`  profiled ${id}: ${fmt(r.total)} requests, ${fmt(a.totalMs)} ms of CPU samples (${fmt((a.totalMs * 1000) / r.total)} µs per request)`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  } finally {
    await up.stop();
  }

  const allBuckets = [...new Set(results.flatMap((r) => r.buckets.filter((b) => b.pct >= 1).map((b) => b.bucket)))];
  const bucketRows = allBuckets.map((b) => [b, ...results.map((r) => {
    const x = r.buckets.find((y) => y.bucket === b);
    return x === undefined ? '–' : `${fmt(x.pct, 1)}% (${fmt((x.ms * 1000) / r.requests, 0)} µs/req)`;
  })]);
  const parts = [
    '### Profiles (V8 CPU profiler, as node --cpu-prof)',
    '',
    `Each target warmed up 1 s, then profiled alone for ${SECONDS} s (start-up excluded), 50 connections, ${ROUTE === 'all' ? 'the four routes in turn (listPets 20 and 100, getPet, createPet)' : `route ${ROUTE} only`}, sampling every 200 µs. Self time of the target process, idle excluded. Command: \`npm run build && node bench/profile.mjs --write\`.`,
    '',
    '#### Self time by package',
    '',
    table(['package', ...results.map((r) => `${r.name} (${fmt(r.usPerReq)} µs/req sampled)`)], bucketRows),
  ];
  const rowsOf = (r, list) => list.map((f) => [`\`${f.fn}\``, f.where === '' ? '' : `\`${f.where}\``, fmt(f.pct, 1), fmt((f.ms * 1000) / r.requests, 1)]);
  for (const r of results) {
    parts.push('', `#### Top self-time functions: ${r.name}`, '', table(['function', 'where', 'self %', 'µs/req'], rowsOf(r, r.functions)));
    if (r.own.length > 0) parts.push('', `Of which the gateway's own code (dist/), top ${r.own.length}:`, '', table(['function', 'where', 'self %', 'µs/req'], rowsOf(r, r.own)));
  }
  // Where each gateway spends more per request than bare forwarding does, function by function.
  const bare = results.find((r) => r.id === 'bare');
  for (const r of results) {
    if (bare === undefined || r === bare || r.id.startsWith('builtin')) continue;
    const keys = new Set([...r.all.keys(), ...bare.all.keys()]);
    const deltas = [...keys]
      .map((k) => ({ k, d: ((r.all.get(k) ?? 0) * 1000) / r.requests - ((bare.all.get(k) ?? 0) * 1000) / bare.requests }))
      .sort((a, b) => b.d - a.d)
      .slice(0, TOP);
    parts.push(
      '',
      `#### Where ${r.name} spends more than bare forwarding (self µs/req, gateway − bare; ${fmt(r.usPerReq - bare.usPerReq)} µs/req in all)`,
      '',
      table(['function', 'where', 'gateway − bare µs/req'], deltas.map(({ k, d }) => [`\`${k.split('\t')[0]}\``, k.split('\t')[1] === '' ? '' : `\`${k.split('\t')[1]}\``, fmt(d, 1)])),
    );
  }
  const m = machine();
  parts.push('', `Profiled on ${m.date} (node ${m.node}, ${m.nproc} × ${m.model}, load average ${m.loadavg}).`);
  return { markdown: parts.join('\n'), results: results.map(({ all, ...rest }) => rest) };
}

if (isMain(import.meta.url)) {
  const r = await runProfile();
  console.log(r.markdown);
  if (process.argv.includes('--write')) writeSection(join(ROOT, 'BENCHMARKS.md'), 'profile', r.markdown);
  process.exit(0);
}
