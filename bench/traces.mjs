// What tracing costs (issue goal: on Node 24, beside tracing off, co-scheduled, at sampleRatio 1.0
// at least 0.85 of the req/s, at 0.1 with errors still kept at least 0.95). Two gateways through
// the CLI (`dist/cli/main.js serve`, Node 24, every policy on: bench/fixtures.mjs, access log on
// stdout into a file), the same upstream (the seeded reference backend, bench/target.mjs upstream,
// by URL: each request has its SERVER and its CLIENT span), one without tracing (A) and one with
// `telemetry.traces` at a ratio (B), exporting OTLP/HTTP protobuf to a sink collector in its own
// process (bench/otlp-sink.mjs: 200 at once, spans counted by kind). As bench/ab.mjs: both
// gateways pinned to the same CPU and loaded together, each by half the connections (the load
// generator, the upstream and the sink on the other CPUs), fresh process pairs (started A-first
// and B-first in turn), a warm-up of every route, then per route a warm-up and runs; each ratio is
// B over A, the median over runs of a pair, then the median over pairs with a 95% bootstrap
// interval. Under autocannon (in this process) and wrk (one process, a thread per gateway; the p99s
// from a second run of two wrk processes, as bench/ab.mjs does).
// The spans are counted: each pair's traced gateway is stopped (SIGTERM: it flushes its queue) and
// the spans the sink got are divided by the requests that gateway answered; the gateway's own
// counts of dropped and failed spans are read from its /metrics before. At 1.0: 2 spans a request.
//
// `keep`: by default error, contract_violation and rate_limited, not deprecated: getPet is
// deprecated in the bench policy, so the deprecated class would keep every getPet whatever the
// ratio (BENCH_TRACES_KEEP=error,contract_violation,deprecated,rate_limited to measure that).
//
//   npm run build && node bench/traces.mjs [--write]     (--write: the `traces` block of BENCHMARKS.md)
//
// Environment: BENCH_TRACES_ROUNDS (3 process pairs per ratio and load generator),
// BENCH_TRACES_RUNS (2 runs per route and pair), BENCH_TRACES_SECONDS (2 per run),
// BENCH_TRACES_WARMUP (2 s per route, twice), BENCH_TRACES_RATIOS (1,0.1), BENCH_TRACES_KEEP (above),
// BENCH_TRACES_ROUTES (list20,get), BENCH_TRACES_LOADGENS (autocannon,wrk), BENCH_TRACES_UPSTREAM
// (url; builtin: the built-in backend, no CLIENT span), BENCH_TRACES_DELAY_MS (the exporter's
// batch.delayMs, default unset: 1000), BENCH_CONNECTIONS (50 in all: half each), BENCH_AB_PIN (1
// with 2 or more CPUs), BENCH_NODE24 (bench/lib.mjs findNode24). About 5 minutes with the defaults.
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { bootstrapMedian } from './ab.mjs';
import { ROUTES, loadOptions } from './forward.mjs';
import { KEY, SEED_PETS, petText, policyText } from './fixtures.mjs';
import { AUTH, BENCH, ROOT, call, envNum, findNode24, fmt, freePort, isMain, machine, measuredPair, median, pin, ratio, sleep, spawnTracked, startProcess, startTarget, stopProcess, table, wrkLoad, wrkVersion, writeSection } from './lib.mjs';

const CLI = join(ROOT, 'dist', 'cli', 'main.js');
const GENERATORS = ['autocannon', 'wrk'];
const GOALS = { 1: 0.85, 0.1: 0.95 };

function settings() {
  return {
    ROUNDS: envNum('BENCH_TRACES_ROUNDS', 3, 1, 50),
    RUNS: envNum('BENCH_TRACES_RUNS', 2, 1, 50),
    SECONDS: envNum('BENCH_TRACES_SECONDS', 2, 1, 60),
    WARMUP: envNum('BENCH_TRACES_WARMUP', 2, 1, 60),
    CONNECTIONS: envNum('BENCH_CONNECTIONS', 50, 2, 2000),
    DELAY_MS: process.env.BENCH_TRACES_DELAY_MS ? envNum('BENCH_TRACES_DELAY_MS', 1000, 1, 60_000) : undefined,
  };
}

function list(name, def, known) {
  const ids = (process.env[name] ?? def.join(',')).split(',').map((s) => s.trim()).filter(Boolean);
  if (known !== undefined) for (const id of ids) if (!known.includes(id)) throw new Error(`${name}: unknown ${id} (one of ${known.join(', ')})`);
  return ids;
}

/** The sink's counts. */
async function sinkStats(sink) {
  return JSON.parse((await call(`${sink.url}/__stats`)).text);
}

/** The sink's counts once they stop moving (at most 3 s): the last export of a stopped gateway is in. */
async function settledStats(sink) {
  let last = await sinkStats(sink);
  for (let i = 0; i < 30; i++) {
    await sleep(100);
    const now = await sinkStats(sink);
    if (now.spans === last.spans && now.exports === last.exports) return now;
    last = now;
  }
  return last;
}

/**
 * What the gateway's /metrics (admin listener) says: requests answered (every series of
 * http_server_request_duration_seconds_count), spans dropped and failed; NaN what cannot be read.
 */
async function gatewayCounts(adminUrl) {
  let text = '';
  try {
    text = (await call(`${adminUrl}/metrics`)).text;
  } catch {
    // NaN below
  }
  const spans = (outcome) => Number(new RegExp(`^petstore_gateway_trace_spans_total\\{outcome="${outcome}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  const counts = [...text.matchAll(/^http_server_request_duration_seconds_count(?:\{.*\})? (\S+)$/gm)].map((x) => Number(x[1]));
  return { requests: counts.length === 0 ? NaN : counts.reduce((a, b) => a + b, 0), dropped: spans('dropped'), failed: spans('failed') };
}

/**
 * `serve` with a policy file (every policy on, plus `telemetry` when given), on `node`: stdout (the
 * JSON log, access lines included) into a file as a log shipper would take it, the banner read on
 * stderr. Returns { url, adminUrl, pid, stop }.
 */
async function startServe(node, dir, name, upstream, telemetry) {
  const policy = JSON.parse(policyText(upstream));
  if (telemetry !== undefined) policy.telemetry = telemetry;
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(policy));
  const port = await freePort();
  const adminPort = await freePort();
  const logFd = openSync(join(dir, `${name}.log`), 'w');
  // No OTEL_* variable: the policy file alone says whether and how this gateway traces.
  const env = { PATH: process.env.PATH ?? '', PETSTORE_API_KEYS: KEY };
  const child = spawnTracked(node, [CLI, 'serve', '--policy', file, '--host', '127.0.0.1', '--port', String(port), '--admin-host', '127.0.0.1', '--admin-port', String(adminPort)], { cwd: ROOT, env, stdio: ['ignore', logFd, 'pipe'] });
  closeSync(logFd);
  let err = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`serve ${name}: not listening within 30 s\n${err}`));
    }, 30_000);
    child.stderr.setEncoding('utf8').on('data', (s) => {
      err = (err + s).slice(-10_000);
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(err);
      if (m !== null) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`serve ${name} exited (${code ?? signal}) before it listened\n${err}`));
    });
  });
  if (upstream === 'builtin') {
    for (let i = 0; i < SEED_PETS; i++) {
      const r = await call(`${url}/v1/pets`, { method: 'POST', headers: { authorization: AUTH, 'content-type': 'application/json' }, body: petText(i) });
      if (r.status !== 201) throw new Error(`seeding ${name}: ${r.status} ${r.text.slice(0, 80)}`);
    }
  }
  return { name, url, adminUrl: `http://127.0.0.1:${adminPort}`, pid: child.pid, stop: () => stopProcess(child, 10_000) };
}

/** Both routes answer as the interface says: 2 requests. */
async function verify(t) {
  const h = { authorization: AUTH };
  const list20 = await call(`${t.url}/v1/pets?limit=20`, { headers: h });
  if (list20.status !== 200 || JSON.parse(list20.text).length !== 20) throw new Error(`${t.name}: listPets ${list20.status} ${list20.text.slice(0, 80)}`);
  const one = await call(`${t.url}/v1/pets/7`, { headers: h });
  if (one.status !== 200 || !one.text.startsWith('{"id":7,')) throw new Error(`${t.name}: getPet ${one.status} ${one.text.slice(0, 80)}`);
  return 2;
}

export async function runTraces(o = {}) {
  const log = o.log ?? ((s) => process.stderr.write(s + '\n'));
  const s = settings();
  const routeIds = list('BENCH_TRACES_ROUTES', ['list20', 'get'], Object.keys(ROUTES));
  const ratios = list('BENCH_TRACES_RATIOS', ['1', '0.1']).map(Number);
  for (const r of ratios) if (!(r >= 0 && r <= 1)) throw new Error(`BENCH_TRACES_RATIOS: ratios from 0 to 1, not ${r}`);
  const keep = list('BENCH_TRACES_KEEP', ['error', 'contract_violation', 'rate_limited']);
  const upstreamKind = process.env.BENCH_TRACES_UPSTREAM ?? 'url';
  if (upstreamKind !== 'url' && upstreamKind !== 'builtin') throw new Error(`BENCH_TRACES_UPSTREAM: url or builtin, not ${upstreamKind}`);
  const skipped = [];
  const gens = list('BENCH_TRACES_LOADGENS', GENERATORS, GENERATORS).filter((g) => {
    if (g !== 'wrk' || wrkVersion() !== undefined) return true;
    skipped.push('wrk: skipped, not installed (apt-get install wrk, or BENCH_WRK=/path/to/wrk)');
    return false;
  });
  const node24 = await findNode24(log);
  if (node24.bin === undefined) return { markdown: `### What tracing costs, co-scheduled\n\nNot measured: no Node 24 (${node24.reason}).`, skipped: [node24.reason] };
  const half = Math.max(1, Math.floor(s.CONNECTIONS / 2));
  const cpuCount = cpus().length;
  const PIN = envNum('BENCH_AB_PIN', cpuCount >= 2 ? 1 : 0, 0, 1) === 1 && cpuCount >= 2;
  const targetCpu = String(cpuCount - 1);
  const otherCpus = cpuCount === 2 ? '0' : `0-${cpuCount - 2}`;
  const place = (pid, cpuList) => {
    if (PIN && !pin(pid, cpuList)) throw new Error('BENCH_AB_PIN: taskset could not pin a process (set BENCH_AB_PIN=0)');
  };
  const m = machine();
  place(process.pid, otherCpus);
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-traces-'));
  const up = upstreamKind === 'url' ? await startTarget('upstream') : undefined;
  if (up !== undefined) place(up.pid, otherCpus);
  const sink = await startProcess([join(BENCH, 'otlp-sink.mjs')]);
  place(sink.pid, otherCpus);
  const upstream = up === undefined ? 'builtin' : `${up.url}/v1`;
  let started = [];
  const stopAll = async () => {
    for (const t of started) await t.stop();
    started = [];
  };
  const telemetry = (r) => ({ traces: { endpoint: `${sink.url}/v1/traces`, sampleRatio: r, keep, ...(s.DELAY_MS === undefined ? {} : { batch: { delayMs: s.DELAY_MS } }) } });
  const gen0 = Date.now();
  const results = [];
  const problems = [];
  try {
    for (const gen of gens) {
      for (const r of ratios) {
        const genOpts = { generator: gen, ...(gen === 'wrk' && PIN ? { cpus: otherCpus } : {}) };
        const res = { gen, ratio: r, rps: {}, cpu: {}, p99: {}, p99A: {}, p99B: {}, spans: [], perPair: [] };
        for (const id of routeIds) {
          res.rps[id] = [];
          res.cpu[id] = [];
          res.p99[id] = [];
          res.p99A[id] = [];
          res.p99B[id] = [];
        }
        for (let epoch = 0; epoch < s.ROUNDS; epoch++) {
          const before = await settledStats(sink);
          const aFirst = epoch % 2 === 0;
          const startA = () => startServe(node24.bin, dir, `off-${gen}-${r}-${epoch}`, upstream, undefined);
          const startB = () => startServe(node24.bin, dir, `traced-${gen}-${r}-${epoch}`, upstream, telemetry(r));
          const t1 = await (aFirst ? startA() : startB());
          started.push(t1);
          place(t1.pid, targetCpu);
          const t2 = await (aFirst ? startB() : startA());
          started.push(t2);
          place(t2.pid, targetCpu);
          const [a, b] = aFirst ? [t1, t2] : [t2, t1];
          // Requests the traced gateway answered in this pair (each has its SERVER span when kept).
          await verify(a);
          let servedB = await verify(b);
          const both = async (opts) => {
            const [ra, rb] = await measuredPair(a, b, { ...opts, ...genOpts });
            servedB += rb.total;
            if (ra.non2xx > 0 || rb.non2xx > 0 || ra.errors > 0 || rb.errors > 0) throw new Error(`non-2xx answers or errors (${gen}, ratio ${r}, pair ${epoch + 1}): off ${ra.non2xx}/${ra.errors}, traced ${rb.non2xx}/${rb.errors}`);
            return [ra, rb];
          };
          for (const id of routeIds) await both({ ...loadOptions(ROUTES[id]), connections: half, duration: s.WARMUP });
          for (const id of routeIds) {
            const opts = { ...loadOptions(ROUTES[id]), connections: half };
            await both({ ...opts, duration: s.WARMUP });
            const runs = { rps: [], cpu: [], pa: [], pb: [], p99: [] };
            for (let run = 0; run < s.RUNS; run++) {
              const [ra, rb] = await both({ ...opts, duration: s.SECONDS });
              let [pa, pb] = [ra.p99, rb.p99];
              if (gen === 'wrk') {
                const [la, lb] = await Promise.all([wrkLoad(a.url, { ...opts, ...genOpts, duration: s.SECONDS }), wrkLoad(b.url, { ...opts, ...genOpts, duration: s.SECONDS })]);
                if (la.non2xx + lb.non2xx + la.errors + lb.errors > 0) throw new Error('non-2xx answers or errors in a latency run');
                servedB += lb.total;
                [pa, pb] = [la.p99, lb.p99];
              }
              runs.rps.push(rb.total / ra.total);
              runs.cpu.push(rb.cpuUsPerReq / ra.cpuUsPerReq);
              runs.pa.push(pa);
              runs.pb.push(pb);
              runs.p99.push(pb / pa);
              log(`  ${gen.padEnd(10)} ratio ${String(r).padEnd(4)} ${ROUTES[id].name.padEnd(22)} pair ${epoch + 1}/${s.ROUNDS} run ${run + 1}/${s.RUNS}  off ${fmt(ra.rps)} req/s ${fmt(ra.cpuUsPerReq, 1)} µs p99 ${pa.toFixed(2)} ms  traced ${fmt(rb.rps)} req/s ${fmt(rb.cpuUsPerReq, 1)} µs p99 ${pb.toFixed(2)} ms  req/s ${ratio(rb.total / ra.total)} CPU ${ratio(rb.cpuUsPerReq / ra.cpuUsPerReq)} p99 ${ratio(pb / pa)}`);
            }
            res.rps[id].push(median(runs.rps));
            res.cpu[id].push(median(runs.cpu));
            res.p99A[id].push(median(runs.pa));
            res.p99B[id].push(median(runs.pb));
            res.p99[id].push(median(runs.p99));
          }
          // The gateway's own count of requests answered: the harness's misses those in flight when a run stops.
          const { requests, dropped, failed } = await gatewayCounts(b.adminUrl);
          const counted = servedB;
          if (Number.isFinite(requests)) servedB = requests;
          // SIGTERM: the traced gateway exports what it holds before it exits.
          await stopAll();
          const after = await settledStats(sink);
          const got = { spans: after.spans - before.spans, server: after.server - before.server, client: after.client - before.client, bad: after.bad - before.bad };
          const pair = { served: servedB, ...got, dropped, failed, perRequest: got.spans / servedB, serverPerRequest: got.server / servedB, clientPerRequest: got.client / servedB };
          res.perPair.push(pair);
          log(`  ${gen.padEnd(10)} ratio ${String(r).padEnd(4)} pair ${epoch + 1}: the sink got ${fmt(got.spans)} spans (${fmt(got.server)} SERVER, ${fmt(got.client)} CLIENT) for ${fmt(servedB)} requests (the load generators counted ${fmt(counted)}): ${pair.perRequest.toFixed(3)} a request; the gateway dropped ${fmt(dropped)}, failed ${fmt(failed)}`);
          if (got.bad > 0) problems.push(`${gen}, ratio ${r}, pair ${epoch + 1}: ${got.bad} export bodies the sink could not read`);
          if (dropped > 0 || failed > 0) problems.push(`${gen}, ratio ${r}, pair ${epoch + 1}: the traced gateway dropped ${dropped} and failed ${failed} spans (the figures then undercount the export)`);
        }
        results.push(res);
      }
    }
  } finally {
    await stopAll();
    await sink.stop();
    await up?.stop();
    rmSync(dir, { recursive: true, force: true });
    if (PIN) pin(process.pid, `0-${cpuCount - 1}`);
  }
  const elapsed = (Date.now() - gen0) / 1000;
  const expected = (r) => (upstreamKind === 'url' ? 2 : 1) * r;
  const rows = results.flatMap((x) =>
    routeIds.map((id) => {
      const goal = GOALS[x.ratio];
      const v = median(x.rps[id]);
      const [lo, hi] = bootstrapMedian(x.rps[id]);
      const [clo, chi] = bootstrapMedian(x.cpu[id]);
      const [plo, phi] = bootstrapMedian(x.p99[id]);
      return [
        x.gen,
        String(x.ratio),
        ROUTES[id].name,
        `**${ratio(v)}** [${ratio(lo)}–${ratio(hi)}]`,
        x.rps[id].map((y) => y.toFixed(3)).join(' '),
        `${ratio(median(x.cpu[id]))} [${ratio(clo)}–${ratio(chi)}]`,
        `${median(x.p99A[id]).toFixed(2)} / ${median(x.p99B[id]).toFixed(2)}`,
        `${ratio(median(x.p99[id]))} [${ratio(plo)}–${ratio(phi)}]`,
        goal === undefined ? 'no goal' : v >= goal ? `met (≥ ${goal})` : `**not met** (≥ ${goal})`,
      ];
    }),
  );
  const spanRows = results.map((x) => [
    x.gen,
    String(x.ratio),
    fmt(x.perPair.reduce((n, p) => n + p.served, 0)),
    fmt(x.perPair.reduce((n, p) => n + p.spans, 0)),
    x.perPair.map((p) => p.perRequest.toFixed(3)).join(' '),
    `${median(x.perPair.map((p) => p.serverPerRequest)).toFixed(3)} / ${median(x.perPair.map((p) => p.clientPerRequest)).toFixed(3)}`,
    expected(x.ratio).toFixed(2),
    `${fmt(x.perPair.reduce((n, p) => n + p.dropped, 0))} / ${fmt(x.perPair.reduce((n, p) => n + p.failed, 0))}`,
  ]);
  const markdown = [
    '### What tracing costs, co-scheduled',
    '',
    `${m.nproc} × ${m.model}, the gateways on Node ${node24.version} (the harness on ${process.version}), load average ${m.loadavg} at the start, ${m.date}. Command: \`node bench/traces.mjs\` (\`npm run bench\` runs it as its \`traces\` section).`,
    '',
    `Two gateways through the CLI (\`serve\`, every policy on, the access log on stdout into a file), the same upstream (${upstreamKind === 'url' ? 'the seeded reference backend by URL: a SERVER and a CLIENT span per request' : 'the built-in backend: a SERVER span per request'}): A without tracing, B with \`telemetry.traces\` (\`sampleRatio\` as below, \`keep: [${keep.join(', ')}]\`${keep.includes('deprecated') ? '' : ' (not `deprecated`: getPet is deprecated in the bench policy, and that class would keep every getPet whatever the ratio)'}${s.DELAY_MS === undefined ? '' : `, \`batch.delayMs: ${s.DELAY_MS}\``}, OTLP/HTTP protobuf) to a sink collector in its own process that answers 200 at once and counts the spans. ${PIN ? `Both gateways pinned to CPU ${targetCpu} and loaded together, ${half} connections each (load generator, upstream and sink on ${otherCpus})` : `Unpinned, loaded together, ${half} connections each`}; ${s.ROUNDS} fresh pairs of processes per ratio and load generator, a ${s.WARMUP} s warm-up of every route, then per route a ${s.WARMUP} s warm-up and ${s.RUNS} runs of ${s.SECONDS} s; ${fmt(elapsed)} s in all. Each cell: the median over pairs (each the median of its runs) with a 95% bootstrap interval. CPU µs/req: utime+stime of the gateway's process over the run ÷ its requests. p99 under wrk: from a run of two wrk processes started together, one per gateway.`,
    '',
    table(['load generator', 'sampleRatio', 'route', 'req/s traced ÷ off', 'per pair', 'CPU µs/req traced ÷ off', 'p99 ms off / traced', 'p99 traced ÷ off', 'goal'], rows),
    '',
    'The spans the sink got (each pair\'s traced gateway stopped with SIGTERM, which exports what it holds) over the requests that gateway answered (its own count on /metrics, warm-ups and checks included):',
    '',
    table(['load generator', 'sampleRatio', 'requests', 'spans received', 'spans a request, per pair', 'SERVER / CLIENT a request (median)', 'expected', 'dropped / failed (its /metrics)'], spanRows),
    '',
    ...[...skipped, ...problems].map((x) => `- ${x}`),
  ].join('\n');
  return { markdown: markdown.trim(), results, skipped, problems };
}

if (isMain(import.meta.url)) {
  // Bounded as a whole, as bench/run.mjs is: the exit kills every child (bench/lib.mjs).
  const maxMinutes = envNum('BENCH_MAX_MINUTES', 20, 1, 600);
  setTimeout(() => {
    process.stderr.write(`bench/traces.mjs: still running after ${maxMinutes} min (BENCH_MAX_MINUTES): stopped\n`);
    process.exit(1);
  }, maxMinutes * 60_000).unref();
  const r = await runTraces();
  console.log(r.markdown);
  if (process.argv.includes('--write')) writeSection(join(ROOT, 'BENCHMARKS.md'), 'traces', r.markdown);
  process.exit(0);
}
