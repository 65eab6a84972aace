// How cost grows over sockets, short interleaved rounds, fresh target processes:
//   (a) connections, 10 to 1,000, against the gateway in built-in mode and bare @fastify/http-proxy
//       (GET /v1/pets?limit=20): req/s, latency, CPU per request, peak RSS;
//   (b) memory under 1,000 connections: the built-in gateway under steady load (listPets, getPet:
//       nothing created, so the store does not grow), RSS sampled every 250 ms; flat = the mean
//       of the last third exceeds the mean of the first third (after a warm-up) by at most 5 MB or 5%;
//   (c) a stream of distinct unknown keys over sockets (each request a new key, 401), same rule;
//   (d) createPet body size over sockets, 100 B and 16 KiB, gateway (undici) vs bare.
//
//   npm run build && node bench/scaling.mjs
//
// Environment: BENCH_CONN_LEVELS (10,100,1000), BENCH_CONN_ROUNDS (2), BENCH_CONN_SECONDS (1.5),
// BENCH_CONN_TARGETS (builtin,bare; also undici, fastify, http-proxy-3), BENCH_MEM_SECONDS (6),
// BENCH_MEM_CONNECTIONS (1000), BENCH_MEM_WARMUP_SECONDS (10), BENCH_INVALID_KEYS (200000), BENCH_BODY_ROUNDS (2),
// BENCH_BODY_SECONDS (1.5).
import { AUTH, envNum, fmt, isMain, load, machine, measured, median, ratio, rotate, rssSampler, sleep, startTarget, statusMb, table } from './lib.mjs';
import { newPetOfSize } from './fixtures.mjs';

const LIST = { path: '/v1/pets?limit=20', headers: { authorization: AUTH } };

const KINDS = {
  builtin: { name: 'gateway, built-in backend (undici)', start: () => startTarget('gateway', 'builtin', '--engine', 'undici') },
  undici: { name: 'gateway, engine undici, upstream', start: (up) => startTarget('gateway', up.url, '--engine', 'undici') },
  bare: { name: 'bare @fastify/http-proxy', start: (up) => startTarget('bare-proxy', up.url) },
  fastify: { name: 'gateway, engine fastify, upstream', start: (up) => startTarget('gateway', up.url, '--engine', 'fastify') },
  'http-proxy-3': { name: 'gateway, engine http-proxy-3, upstream', start: (up) => startTarget('gateway', up.url, '--engine', 'http-proxy-3') },
};

/** Flat: the last third's mean RSS over the first third's (after warm-up) within 5 MB or 5%. */
function flatness(samples, warmup) {
  const steady = samples.slice(warmup).filter(Number.isFinite);
  const third = Math.max(1, Math.floor(steady.length / 3));
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const first = mean(steady.slice(0, third));
  const last = mean(steady.slice(-third));
  const growth = last - first;
  return { first, last, growth, pct: (growth / first) * 100, flat: growth <= 5 || growth / first <= 0.05, peak: Math.max(...steady) };
}

async function connections(up, log) {
  const levels = (process.env.BENCH_CONN_LEVELS ?? '10,100,1000').split(',').map(Number).filter((n) => n > 0 && n <= 5000);
  const ROUNDS = envNum('BENCH_CONN_ROUNDS', 2, 1, 20);
  const SECONDS = envNum('BENCH_CONN_SECONDS', 1.5, 0.5, 60);
  const ids = (process.env.BENCH_CONN_TARGETS ?? 'builtin,bare').split(',').map((s) => s.trim()).filter((s) => s in KINDS);
  const targets = [];
  try {
    for (const id of ids) {
      const p = await KINDS[id].start(up);
      targets.push({ id, name: KINDS[id].name, ...p, rssStart: statusMb(p.pid) });
    }
    for (const t of targets) await load(t.url, { ...LIST, connections: 50, duration: 1 }); // warm-up
    const res = {};
    for (const [li, level] of levels.entries()) {
      res[level] = Object.fromEntries(targets.map((t) => [t.id, []]));
      for (let r = 0; r < ROUNDS; r++) {
        for (const t of rotate(targets, r + li)) {
          const x = await measured(t.url, [t.pid], { ...LIST, connections: level, duration: SECONDS });
          if (x.non2xx > 0 || x.errors > 0 || x.timeouts > 0) log(`  warning: ${t.id} at ${level} connections: ${x.non2xx} non-2xx, ${x.errors} errors, ${x.timeouts} timeouts`);
          res[level][t.id].push(x);
          log(`  connections ${String(level).padStart(5)} round ${r + 1}/${ROUNDS} ${t.id.padEnd(14)} ${fmt(x.rps).padStart(6)} req/s  p99 ${x.p99.toFixed(1).padStart(7)} ms  ${fmt(x.cpuUsPerReq).padStart(5)} µs CPU/req  RSS ${fmt(x.peakRssMb, 0)} MB`);
        }
      }
    }
    const rows = [];
    const summary = {};
    for (const level of levels) {
      summary[level] = {};
      for (const t of targets) {
        const xs = res[level][t.id];
        const s = {
          rps: median(xs.map((x) => x.rps)),
          p50: median(xs.map((x) => x.p50)),
          p99: median(xs.map((x) => x.p99)),
          cpuUs: median(xs.map((x) => x.cpuUsPerReq)),
          peakRss: Math.max(...xs.map((x) => x.peakRssMb)),
          failed: xs.reduce((a, x) => a + x.non2xx + x.errors + x.timeouts, 0),
        };
        summary[level][t.id] = s;
      }
      for (const t of targets) {
        const s = summary[level][t.id];
        const first = summary[levels[0]][t.id];
        const vsBare = t.id !== 'bare' && summary[level].bare ? ratio(median(res[level][t.id].map((x, i) => x.rps / res[level].bare[i].rps))) : '';
        rows.push([fmt(level), t.name, fmt(s.rps), ratio(s.rps / first.rps), vsBare, s.p50.toFixed(1), s.p99.toFixed(1), fmt(s.cpuUs), ratio(s.cpuUs / first.cpuUs), fmt(t.rssStart, 1), fmt(s.peakRss, 1), fmt(s.failed)]);
      }
    }
    return {
      summary,
      markdown: [
        '#### Connections',
        '',
        `GET /v1/pets?limit=20, ${ROUNDS} interleaved rounds of ${SECONDS} s per target per level, fresh processes warmed up with 1 s at 50 connections.`,
        '',
        table(['connections', 'target', 'req/s', `×${levels[0]} conns`, 'req/s ×bare (paired)', 'p50 ms', 'p99 ms', 'CPU µs/req', `CPU ×${levels[0]} conns`, 'RSS at start MB', 'peak RSS MB', 'failed requests'], rows),
      ].join('\n'),
    };
  } finally {
    for (const t of targets) await t.stop();
  }
}

async function memoryUnder(kindId, up, loadOptions, seconds, label) {
  const t = await KINDS[kindId].start(up);
  try {
    // Warm-up with the phase's own traffic, so the heap reaches its working size before sampling
    // (a fresh process grows for about 10 s under load before its RSS levels off).
    await load(t.url, { ...loadOptions, amount: undefined, duration: envNum('BENCH_MEM_WARMUP_SECONDS', 10, 1, 120) });
    const start = statusMb(t.pid);
    const sampler = rssSampler([t.pid], 250);
    // An amount-bounded phase may take at most amount/500 s (at least 60 s): at 500 req/s something is wrong anyway.
    const maxSeconds = loadOptions.amount === undefined ? seconds + 30 : Math.max(60, loadOptions.amount / 500);
    const r = await load(t.url, { ...loadOptions, duration: loadOptions.amount === undefined ? seconds : undefined, maxSeconds });
    const { samples } = sampler.stop();
    const f = flatness(samples, Math.round(samples.length * 0.2));
    if (loadOptions.amount !== undefined && r.total < loadOptions.amount) label += ` (stopped after ${fmt(r.total)} of ${fmt(loadOptions.amount)}: time limit)`;
    return { label, target: KINDS[kindId].name, start, requests: r.total, rps: r.rps, statuses: r.statuses, errors: r.errors + r.timeouts, samples, ...f, hwm: statusMb(t.pid, 'VmHWM') };
  } finally {
    await t.stop();
  }
}

async function bodySizes(up, log) {
  const ROUNDS = envNum('BENCH_BODY_ROUNDS', 2, 1, 20);
  const SECONDS = envNum('BENCH_BODY_SECONDS', 1.5, 0.5, 60);
  const sizes = [100, 16384];
  const targets = [];
  try {
    for (const id of ['bare', 'undici']) targets.push({ id, name: KINDS[id].name, ...(await KINDS[id].start(up)) });
    const res = {};
    for (const [si, size] of sizes.entries()) {
      const route = { path: '/v1/pets', method: 'POST', body: newPetOfSize(size), headers: { authorization: AUTH, 'content-type': 'application/json' } };
      for (const t of targets) if (si === 0) await load(t.url, { ...route, connections: 50, duration: 1 });
      res[size] = Object.fromEntries(targets.map((t) => [t.id, []]));
      for (let r = 0; r < ROUNDS; r++) {
        for (const t of rotate(targets, r + si)) {
          const x = await measured(t.url, [t.pid], { ...route, connections: 50, duration: SECONDS });
          if (x.non2xx > 0 || x.errors > 0) throw new Error(`${t.id} POST ${size} B: ${JSON.stringify(x.statuses)}, ${x.errors} errors`);
          res[size][t.id].push(x);
          log(`  POST ${String(size).padStart(5)} B round ${r + 1}/${ROUNDS} ${t.id.padEnd(8)} ${fmt(x.rps).padStart(6)} req/s  ${fmt(x.cpuUsPerReq).padStart(5)} µs CPU/req`);
        }
      }
    }
    const rows = [];
    const summary = {};
    for (const size of sizes) {
      summary[size] = {};
      for (const t of targets) {
        const xs = res[size][t.id];
        summary[size][t.id] = { rps: median(xs.map((x) => x.rps)), cpuUs: median(xs.map((x) => x.cpuUsPerReq)), p99: median(xs.map((x) => x.p99)) };
      }
      const g = summary[size].undici;
      const b = summary[size].bare;
      const cpuX = median(res[size].undici.map((x, i) => x.cpuUsPerReq / res[size].bare[i].cpuUsPerReq));
      const rpsX = median(res[size].undici.map((x, i) => x.rps / res[size].bare[i].rps));
      rows.push([fmt(size), fmt(b.rps), fmt(g.rps), ratio(rpsX), fmt(b.cpuUs), fmt(g.cpuUs), ratio(cpuX), fmt(g.cpuUs - b.cpuUs)]);
    }
    return {
      summary,
      markdown: [
        '#### createPet body size over sockets',
        '',
        `POST /v1/pets to the upstream, ${ROUNDS} interleaved rounds of ${SECONDS} s, 50 connections.`,
        '',
        table(['body bytes', 'bare req/s', 'gateway req/s', 'req/s ×bare', 'bare CPU µs/req', 'gateway CPU µs/req', 'CPU ×bare', 'gateway extra CPU µs/req'], rows),
      ].join('\n'),
    };
  } finally {
    for (const t of targets) await t.stop();
  }
}

export async function runScaling(o = {}) {
  const log = o.log ?? ((s) => process.stderr.write(s + '\n'));
  const MEM_SECONDS = envNum('BENCH_MEM_SECONDS', 6, 3, 600);
  const MEM_CONNECTIONS = envNum('BENCH_MEM_CONNECTIONS', 1000, 10, 5000);
  const INVALID = envNum('BENCH_INVALID_KEYS', 200_000, 1000, 10_000_000);
  const up = await startTarget('upstream');
  try {
    const conns = await connections(up, log);

    log(`  memory: ${MEM_CONNECTIONS} connections for ${MEM_SECONDS} s`);
    const steady = await memoryUnder('builtin', up, {
      connections: MEM_CONNECTIONS,
      headers: { authorization: AUTH },
      requests: [{ method: 'GET', path: '/v1/pets?limit=20' }, { method: 'GET', path: '/v1/pets/7' }],
    }, MEM_SECONDS, `${fmt(MEM_CONNECTIONS)} connections, listPets + getPet`);

    log(`  memory: ${fmt(INVALID)} distinct unknown keys`);
    let n = 0;
    const keys = await memoryUnder('builtin', up, {
      connections: 100,
      amount: INVALID,
      requests: [{ method: 'GET', path: '/v1/pets?limit=20', setupRequest: (req) => ({ ...req, headers: { authorization: `Bearer psg_inv_${(n++).toString(36).padStart(39, '0')}` } }) }],
    }, MEM_SECONDS, `${fmt(INVALID)} distinct unknown keys (401), 100 connections`);
    if (Object.keys(keys.statuses).some((s) => s !== '401')) throw new Error(`distinct keys: not all 401: ${JSON.stringify(keys.statuses)}`);

    const bodies = await bodySizes(up, log);

    const memRows = [steady, keys].map((m) => [
      m.label,
      m.target,
      fmt(m.requests),
      fmt(m.rps),
      fmt(m.start, 1),
      `${fmt(m.first, 1)} → ${fmt(m.last, 1)}`,
      `${m.growth >= 0 ? '+' : ''}${fmt(m.growth, 1)} MB (${m.pct >= 0 ? '+' : ''}${fmt(m.pct, 1)}%)`,
      fmt(m.peak, 1),
      m.flat ? 'flat' : '**grows**',
    ]);
    const markdown = [
      '### Sockets: connections, memory, body size',
      '',
      conns.markdown,
      '',
      '#### Memory under load',
      '',
      `Fresh built-in gateway per phase, warmed up ${envNum('BENCH_MEM_WARMUP_SECONDS', 10, 1, 120)} s with the phase's own traffic; RSS sampled every 250 ms; the first 20% of samples are warm-up. Flat: the mean of the last third is within 5 MB or 5% of the mean of the first third.`,
      '',
      table(['phase', 'target', 'requests', 'req/s', 'RSS at start MB', 'RSS first third → last third MB', 'growth', 'peak MB', 'verdict'], memRows),
      '',
      `RSS samples (MB), ${steady.label}: ${steady.samples.filter((_, i) => i % 4 === 0).map((x) => x.toFixed(0)).join(' ')}`,
      '',
      `RSS samples (MB), ${keys.label}: ${keys.samples.filter((_, i) => i % 4 === 0).map((x) => x.toFixed(0)).join(' ')}`,
      '',
      bodies.markdown,
    ].join('\n');
    return { markdown, connections: conns.summary, memory: { steady: { ...steady, samples: undefined }, keys: { ...keys, samples: undefined } }, bodies: bodies.summary };
  } finally {
    await up.stop();
  }
}

if (isMain(import.meta.url)) {
  const m = machine();
  const r = await runScaling();
  console.log(`node ${m.node}, ${m.nproc} × ${m.model}, load ${m.loadavg}, ${m.date}\n`);
  console.log(r.markdown);
  await sleep(0);
  process.exit(0);
}
