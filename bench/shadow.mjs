// Shadow mode beside nginx's `mirror`, with the same slow mirror: the primary's req/s and latency
// when every request (listPets, getPet) is also copied to a backend that answers in 500 ms.
//   gateway          the gateway (bench/target.mjs gateway, engine undici, everything on), no migration section
//   gateway-shadow   the same, with the migration lane: listPets and getPet in shadow mode to the slow
//                    mirror (`shadow:` at its defaults: maxInFlight 64, timeoutMs 2000; the answers compared)
//   nginx            nginx, 1 worker, plain proxy (bench/nginx.mjs)
//   nginx-mirror     the same with `mirror /__mirror;` (a location that proxies to the slow mirror)
// One upstream (bench/target.mjs upstream) serves the primary; the slow mirror is the same seeded
// reference backend answering each request after BENCH_SHADOW_DELAY_MS (bench/target.mjs
// slow-upstream), counting what it gets (copies per second in the tables). As bench/peers.mjs:
// interleaved rounds (the order rotated each round) of every target, route and load generator
// (autocannon in this process, Debian's wrk in its own), keep-alive connections, after a warm-up;
// between two cells the mirror is let drain (at most 5 s), so no target pays for another's copies.
// nginx keeps a keep-alive connection's next request until the mirror's subrequest of the one
// before has finished: its clients wait for the mirror. The gateway's copies never hold the client's
// connection; past maxInFlight copies waiting, the rest are dropped (counted).
//
//   npm run build && node bench/shadow.mjs [--write]     (--write: the `shadow` block of BENCHMARKS.md)
//
// Environment: BENCH_SHADOW_ROUNDS (3), BENCH_SHADOW_SECONDS (3 per cell), BENCH_SHADOW_DELAY_MS
// (500), BENCH_SHADOW_ROUTES (list20,get), BENCH_SHADOW_LOADGENS (autocannon,wrk),
// BENCH_CONNECTIONS (50), BENCH_WARMUP_SECONDS (1), BENCH_NGINX (bench/nginx.mjs). A target or load
// generator that cannot run here is skipped with a line. About 3 × 3 × 4 × 2 × 2 = 144 s of load.
import { join } from 'node:path';
import { AUTH, ROOT, call, envNum, fmt, isMain, load, machine, measured, median, ratio, rotate, sleep, startTarget, table, wrkVersion, writeSection } from './lib.mjs';
import { ROUTES, loadOptions } from './forward.mjs';
import { nginxMissing, nginxVersion, startNginx } from './nginx.mjs';

const GENERATORS = ['autocannon', 'wrk'];

function settings() {
  return {
    ROUNDS: envNum('BENCH_SHADOW_ROUNDS', 3, 1, 50),
    SECONDS: envNum('BENCH_SHADOW_SECONDS', 3, 1, 120),
    DELAY_MS: envNum('BENCH_SHADOW_DELAY_MS', 500, 0, 60_000),
    CONNECTIONS: envNum('BENCH_CONNECTIONS', 50, 1, 2000),
    WARMUP: envNum('BENCH_WARMUP_SECONDS', 1, 0, 30),
  };
}

function list(name, def, known) {
  const ids = (process.env[name] ?? def.join(',')).split(',').map((s) => s.trim()).filter(Boolean);
  for (const id of ids) if (!known.includes(id)) throw new Error(`${name}: unknown ${id} (one of ${known.join(', ')})`);
  return ids;
}

/** The slow mirror's counts. */
async function mirrorStats(mirror) {
  return JSON.parse((await call(`${mirror.url}/__stats`)).text);
}

/** Until the mirror holds no request (at most 5 s): the next cell starts with no copy pending. */
async function drained(mirror) {
  for (let i = 0; i < 100; i++) {
    if ((await mirrorStats(mirror)).inFlight === 0) return true;
    await sleep(50);
  }
  return false;
}

/** Both routes answer as the interface says, through `t`. */
async function verify(t) {
  const h = { authorization: AUTH };
  const list20 = await call(`${t.url}/v1/pets?limit=20`, { headers: h });
  if (list20.status !== 200 || JSON.parse(list20.text).length !== 20) throw new Error(`${t.id}: listPets ${list20.status} ${list20.text.slice(0, 80)}`);
  const one = await call(`${t.url}/v1/pets/7`, { headers: h });
  if (one.status !== 200 || !one.text.startsWith('{"id":7,')) throw new Error(`${t.id}: getPet ${one.status} ${one.text.slice(0, 80)}`);
}

export async function runShadow(o = {}) {
  const log = o.log ?? ((s) => process.stderr.write(s + '\n'));
  const s = settings();
  const routeIds = list('BENCH_SHADOW_ROUTES', ['list20', 'get'], ['list', 'list20', 'list100', 'get']);
  const skipped = [];
  const gens = list('BENCH_SHADOW_LOADGENS', GENERATORS, GENERATORS).filter((g) => {
    if (g !== 'wrk' || wrkVersion() !== undefined) return true;
    skipped.push('wrk: skipped, not installed (apt-get install wrk, or BENCH_WRK=/path/to/wrk)');
    return false;
  });
  const nginx = nginxVersion();
  const up = await startTarget('upstream');
  const mirror = await startTarget('slow-upstream', String(s.DELAY_MS));
  const gatewayOn = (...more) => async () => {
    const p = await startTarget('gateway', up.url, '--engine', 'undici', ...more);
    return { ...p, pids: [p.pid] };
  };
  const described = [
    { id: 'gateway', name: `gateway, no shadow (Node ${process.versions.node})`, start: gatewayOn() },
    { id: 'gateway-shadow', name: `**gateway, shadow mode** to the slow mirror (Node ${process.versions.node})`, start: gatewayOn('--shadow', mirror.url) },
    { id: 'nginx', name: `nginx ${nginx ?? ''}, no mirror`, skip: nginxMissing(false), start: () => startNginx(up.url) },
    { id: 'nginx-mirror', name: `nginx ${nginx ?? ''}, \`mirror\` to the slow mirror`, skip: nginxMissing(false), start: () => startNginx(up.url, { mirror: mirror.url }) },
  ];
  const targets = [];
  try {
    for (const d of described) {
      if (d.skip !== undefined) {
        skipped.push(`${d.id}: skipped, ${d.skip}`);
        log(`  ${d.id}: skipped, ${d.skip}`);
        continue;
      }
      const p = await d.start();
      targets.push({ ...d, url: p.url, pids: p.pids, stop: p.stop });
    }
    for (const t of targets) await verify(t);
    if (s.WARMUP > 0) {
      const requests = routeIds.map((r) => loadOptions(ROUTES[r]));
      for (const t of targets) {
        await load(t.url, { requests, connections: s.CONNECTIONS, duration: s.WARMUP });
        await drained(mirror);
      }
    }
    const results = {};
    const problems = [];
    const started = Date.now();
    for (const [gi, gen] of gens.entries()) {
      results[gen] = {};
      for (const [ri, routeId] of routeIds.entries()) {
        results[gen][routeId] = Object.fromEntries(targets.map((t) => [t.id, []]));
        for (let r = 0; r < s.ROUNDS; r++) {
          for (const t of rotate(targets, r + ri + gi)) {
            const m0 = (await mirrorStats(mirror)).requests;
            const res = await measured(t.url, t.pids, { ...loadOptions(ROUTES[routeId]), connections: s.CONNECTIONS, duration: s.SECONDS, generator: gen });
            const copies = ((await mirrorStats(mirror)).requests - m0) / res.seconds;
            if (!(await drained(mirror))) problems.push(`${t.id} ${ROUTES[routeId].name} under ${gen}, round ${r + 1}: the mirror still held copies 5 s after the cell`);
            if (res.non2xx > 0 || res.errors > 0 || res.timeouts > 0) problems.push(`${t.id} ${ROUTES[routeId].name} under ${gen}, round ${r + 1}: ${res.non2xx} non-2xx, ${res.errors} errors, ${res.timeouts} timeouts`);
            results[gen][routeId][t.id].push({ ...res, copies });
            log(`  ${gen.padEnd(10)} ${ROUTES[routeId].name.padEnd(22)} round ${r + 1}/${s.ROUNDS} ${t.id.padEnd(14)} ${fmt(res.rps).padStart(6)} req/s  p50 ${res.p50.toFixed(1).padStart(6)} ms  p99 ${res.p99.toFixed(1).padStart(6)} ms  ${fmt(res.cpuUsPerReq, 1).padStart(6)} µs CPU/req  ${fmt(copies).padStart(5)} copies/s`);
          }
        }
      }
    }
    const elapsed = (Date.now() - started) / 1000;
    const cell = (gen, routeId, id) => {
      const rs = results[gen][routeId][id];
      return rs === undefined ? undefined : { rps: median(rs.map((x) => x.rps)), p50: median(rs.map((x) => x.p50)), p99: median(rs.map((x) => x.p99)), cpuUs: median(rs.map((x) => x.cpuUsPerReq)), copies: median(rs.map((x) => x.copies)), rounds: rs };
    };
    // B against A measured in the same round: the median of the per-round ratios.
    const paired = (gen, routeId, a, b, f) => {
      const ra = results[gen][routeId][a];
      const rb = results[gen][routeId][b];
      if (ra === undefined || rb === undefined) return undefined;
      return median(ra.map((x, i) => f(rb[i]) / f(x)));
    };
    const summary = Object.fromEntries(gens.map((g) => [g, Object.fromEntries(routeIds.map((r) => [r, Object.fromEntries(targets.map((t) => [t.id, cell(g, r, t.id)]))]))]));
    const ratios = gens.flatMap((g) =>
      routeIds.map((r) => ({
        gen: g,
        route: r,
        gwRps: paired(g, r, 'gateway', 'gateway-shadow', (x) => x.rps),
        gwP99: paired(g, r, 'gateway', 'gateway-shadow', (x) => x.p99),
        gwCpu: paired(g, r, 'gateway', 'gateway-shadow', (x) => x.cpuUsPerReq),
        ngRps: paired(g, r, 'nginx', 'nginx-mirror', (x) => x.rps),
        ngP99: paired(g, r, 'nginx', 'nginx-mirror', (x) => x.p99),
      })),
    );
    const m = machine();
    const parts = [
      '### Shadow mode beside nginx `mirror`, with the same slow mirror',
      '',
      `${m.nproc} × ${m.model}, Node ${process.versions.node} (the gateway's and the harness's), ${nginx === undefined ? 'nginx not installed' : `nginx ${nginx}`}, load average ${m.loadavg} at the end, ${m.date}. Command: \`node bench/shadow.mjs\` (\`npm run bench\` runs it as its \`shadow\` section).`,
      '',
      `The primary is the reference backend (bench/target.mjs upstream); the mirror is the same backend answering every request after ${s.DELAY_MS} ms. ${s.ROUNDS} interleaved rounds (order rotated) of ${s.SECONDS} s per target, route and load generator, ${s.CONNECTIONS} keep-alive connections, after a ${s.WARMUP} s warm-up; ${fmt(elapsed)} s of load. The gateway: engine undici, every policy on (bench/fixtures.mjs); with shadow mode, listPets and getPet copied to the mirror (\`shadow:\` defaults: maxInFlight 64, timeoutMs 2000) and both answers compared. nginx: one worker; \`mirror /__mirror;\` with \`location = /__mirror { internal; proxy_pass http://mirror$request_uri; }\`. CPU per request: utime+stime of the target's process(es) (nginx: master and worker) over the cell ÷ the requests answered. Copies/s: requests the mirror got per second of the cell.`,
      '',
      table(
        ['load generator', 'route', 'shadow ÷ no shadow, req/s', 'p99', 'CPU µs/req', 'nginx mirror ÷ no mirror, req/s', 'p99'],
        ratios.map((x) => [x.gen, ROUTES[x.route].name, ratio(x.gwRps), ratio(x.gwP99), ratio(x.gwCpu), ratio(x.ngRps), ratio(x.ngP99)]),
      ),
      '',
      'Each ratio: the median over rounds of the two targets measured in the same round.',
      '',
    ];
    for (const g of gens) {
      parts.push(
        `#### ${g}: req/s, p50 / p99 ms, CPU µs per request of the target process(es), copies/s to the mirror (medians over rounds)`,
        '',
        table(
          ['target', ...routeIds.map((r) => ROUTES[r].name)],
          targets.map((t) => [t.name, ...routeIds.map((r) => {
            const c = summary[g][r][t.id];
            return `${fmt(c.rps)} req/s, ${c.p50.toFixed(1)} / ${c.p99.toFixed(1)} ms, ${fmt(c.cpuUs, 1)} µs, ${fmt(c.copies)} copies/s`;
          })]),
        ),
        '',
      );
    }
    for (const x of [...skipped, ...problems]) parts.push(`- ${x}`);
    return { markdown: parts.join('\n').trim(), summary, ratios, skipped, problems };
  } finally {
    for (const t of targets) await t.stop();
    await mirror.stop();
    await up.stop();
  }
}

if (isMain(import.meta.url)) {
  // Bounded as a whole, as bench/run.mjs is: the exit kills every child (bench/lib.mjs, bench/nginx.mjs).
  const maxMinutes = envNum('BENCH_MAX_MINUTES', 15, 1, 600);
  setTimeout(() => {
    process.stderr.write(`bench/shadow.mjs: still running after ${maxMinutes} min (BENCH_MAX_MINUTES): stopped\n`);
    process.exit(1);
  }, maxMinutes * 60_000).unref();
  const r = await runShadow();
  console.log(r.markdown);
  if (process.argv.includes('--write')) writeSection(join(ROOT, 'BENCHMARKS.md'), 'shadow', r.markdown);
  process.exit(0);
}
