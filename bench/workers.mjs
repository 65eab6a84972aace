// Scaling with `serve --workers N` (node:cluster), built-in backend, through the CLI
// (dist/cli/main.js) with PETSTORE_API_KEYS set and the bench policy (every policy on):
// workers 1 vs 2, interleaved rounds, GET /v1/pets?limit=20. CPU is summed over the primary and
// its workers. Each worker has its own in-memory store, so each is seeded over fresh connections
// (the cluster hands connections out round-robin) and checked to answer 20 animals.
// When dist/cli/main.js has no --workers, reports that it was not measured.
//
//   npm run build && node bench/workers.mjs
//
// Environment: BENCH_WORKERS (1,2), BENCH_WORKERS_ROUNDS (3), BENCH_WORKERS_SECONDS (1.5),
// BENCH_WORKERS_CONNECTIONS (100).
import { spawnSync } from 'node:child_process';
import { request } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AUTH, KEY, ROOT, envNum, fmt, isMain, load, machine, measured, median, processTree, ratio, rotate, sleep, startProcess, table } from './lib.mjs';
import { SEED_PETS, petText, policyText } from './fixtures.mjs';

const CLI = join(ROOT, 'dist', 'cli', 'main.js');

export function hasWorkers() {
  const r = spawnSync(process.execPath, [CLI, 'serve', '--help'], { encoding: 'utf8', timeout: 10_000 });
  return /--workers/.test(r.stdout ?? '');
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** One request on a fresh connection (agent: false), so the cluster may hand it to any worker. */
function fresh(url, { method = 'GET', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers: { ...headers, ...(body === undefined ? {} : { 'content-length': Buffer.byteLength(body) }) }, agent: false });
    req.setTimeout(10_000, () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode, text }));
    });
    req.end(body);
  });
}

async function startServe(workers, policyFile) {
  const port = await freePort();
  const p = await startProcess([CLI, 'serve', '--policy', policyFile, '--host', '127.0.0.1', '--port', String(port), '--admin-port', '0', '--workers', String(workers)], {
    ready: /listening on (http:\/\/127\.0\.0\.1:\d+)/,
    env: { PATH: process.env.PATH ?? '', PETSTORE_API_KEYS: KEY, LOG_LEVEL: 'warn' },
  });
  // The banner comes with the first worker; wait (bounded) for all of them.
  const deadline = Date.now() + 20_000;
  let pids = processTree(p.pid);
  while (pids.length < (workers > 1 ? workers + 1 : 1) && Date.now() < deadline) {
    await sleep(100);
    pids = processTree(p.pid);
  }
  await sleep(500);
  pids = processTree(p.pid);
  // Seed every worker's store: SEED_PETS animals each, spread over fresh connections.
  for (let i = 0; i < SEED_PETS * workers * 1.5; i++) {
    const r = await fresh(`${p.url}/v1/pets`, { method: 'POST', headers: { authorization: AUTH, 'content-type': 'application/json' }, body: petText(i) });
    if (r.status !== 201) throw new Error(`seeding: ${r.status} ${r.text}`);
  }
  for (let i = 0; i < 10 * workers; i++) {
    const r = await fresh(`${p.url}/v1/pets?limit=20`, { headers: { authorization: AUTH } });
    if (r.status !== 200 || JSON.parse(r.text).length !== 20) throw new Error(`workers ${workers}: a worker answers ${r.status} with ${r.text.slice(0, 60)}...: not seeded`);
  }
  return { ...p, workers, pids };
}

export async function runWorkers(o = {}) {
  const log = o.log ?? ((s) => process.stderr.write(s + '\n'));
  if (!hasWorkers()) {
    return {
      measured: false,
      markdown: ['### serve --workers N', '', table(['workers', 'req/s', '×1 worker'], [['1 vs 2', 'not measured: dist/cli/main.js has no --workers', '']])].join('\n'),
    };
  }
  const counts = (process.env.BENCH_WORKERS ?? '1,2').split(',').map(Number).filter((n) => n >= 1 && n <= 16);
  const ROUNDS = envNum('BENCH_WORKERS_ROUNDS', 3, 1, 20);
  const SECONDS = envNum('BENCH_WORKERS_SECONDS', 1.5, 0.5, 60);
  const CONNECTIONS = envNum('BENCH_WORKERS_CONNECTIONS', 100, 1, 2000);
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-'));
  const policyFile = join(dir, 'policy.json');
  writeFileSync(policyFile, policyText('builtin'));
  const targets = [];
  try {
    for (const n of counts) targets.push(await startServe(n, policyFile));
    const route = { path: '/v1/pets?limit=20', headers: { authorization: AUTH } };
    for (const t of targets) await load(t.url, { ...route, connections: CONNECTIONS, duration: 1 });
    const res = new Map(targets.map((t) => [t, []]));
    for (let r = 0; r < ROUNDS; r++) {
      for (const t of rotate(targets, r)) {
        const x = await measured(t.url, t.pids, { ...route, connections: CONNECTIONS, duration: SECONDS });
        if (x.non2xx > 0 || x.errors > 0) throw new Error(`workers ${t.workers}: ${JSON.stringify(x.statuses)}, ${x.errors} errors`);
        res.get(t).push(x);
        log(`  workers ${t.workers} round ${r + 1}/${ROUNDS} ${fmt(x.rps).padStart(6)} req/s  p99 ${x.p99.toFixed(1).padStart(6)} ms  ${fmt(x.cpuUsPerReq).padStart(4)} µs CPU/req  gateway ${x.targetCores.toFixed(2)} cores, load generator ${x.loadgenCores.toFixed(2)} cores`);
      }
    }
    const base = res.get(targets[0]);
    const rows = targets.map((t) => {
      const xs = res.get(t);
      return [
        String(t.workers),
        String(t.pids.length),
        fmt(median(xs.map((x) => x.rps))),
        ratio(median(xs.map((x, i) => x.rps / base[i].rps))),
        median(xs.map((x) => x.p99)).toFixed(1),
        fmt(median(xs.map((x) => x.cpuUsPerReq))),
        median(xs.map((x) => x.targetCores)).toFixed(2),
        median(xs.map((x) => x.loadgenCores)).toFixed(2),
      ];
    });
    const summary = Object.fromEntries(targets.map((t) => [t.workers, { rps: median(res.get(t).map((x) => x.rps)), rpsX: median(res.get(t).map((x, i) => x.rps / base[i].rps)) }]));
    return {
      measured: true,
      summary,
      markdown: [
        '### serve --workers N (built-in backend, through the CLI)',
        '',
        `\`petstore-gateway serve --upstream builtin --workers N\` with PETSTORE_API_KEYS set and every policy on, GET /v1/pets?limit=20, ${CONNECTIONS} connections, ${ROUNDS} interleaved rounds of ${SECONDS} s. CPU summed over the primary and its workers. The load generator runs on the same ${machine().nproc} cores.`,
        '',
        table(['workers', 'processes', 'req/s', 'req/s ×1 worker (paired)', 'p99 ms', 'CPU µs/req (all processes)', 'gateway cores used', 'load generator cores used'], rows),
      ].join('\n'),
    };
  } finally {
    for (const t of targets) await t.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) {
  const r = await runWorkers();
  console.log(r.markdown);
  process.exit(0);
}
