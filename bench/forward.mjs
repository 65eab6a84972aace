// Side by side, in one run, interleaved rounds: bare @fastify/http-proxy forwarding vs the gateway
// with every default policy on (to the same upstream process) vs the gateway with its built-in
// backend. GET /v1/pets?limit=20 with a valid key. Prints req/s per round, medians and ratios.
//   npm run build && node bench/forward.mjs [seconds-per-round] [rounds]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';

const SECONDS = Number(process.argv[2] ?? 3);
const ROUNDS = Number(process.argv[3] ?? 3);
const KEY = 'bench_' + 'k'.repeat(32);
const children = [];

function start(...args) {
  const child = spawn(process.execPath, ['bench/target.mjs', ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /ready (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`target ${args.join(' ')} exited ${code}`)));
  });
}

function cpuOf(pid) {
  // utime + stime in clock ticks (100 Hz) from /proc, for CPU per request of the proxy process.
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10; // ms
}

async function round(url) {
  const r = await autocannon({ url: url + '/v1/pets?limit=20', connections: 50, duration: SECONDS, headers: { authorization: `Bearer ${KEY}` } });
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${url}: ${r.non2xx} non-2xx, ${r.errors} errors`);
  return { rps: r.requests.average, p99: r.latency.p99, total: r.requests.total };
}

try {
  const upstream = await start('upstream');
  const targets = [
    { name: 'bare @fastify/http-proxy', url: await start('bare-proxy', upstream), child: children[1] },
    { name: 'gateway, all policies, upstream', url: await start('gateway', upstream), child: children[2] },
    { name: 'gateway, all policies, builtin', url: await start('gateway', 'builtin'), child: children[3] },
  ];
  const results = targets.map(() => []);
  for (let r = 0; r < ROUNDS; r++) {
    for (const [i, t] of targets.entries()) {
      const cpu0 = cpuOf(t.child.pid);
      const res = await round(t.url);
      res.cpuUsPerReq = ((cpuOf(t.child.pid) - cpu0) * 1000) / res.total;
      results[i].push(res);
    }
  }
  const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const base = median(results[0].map((x) => x.rps));
  console.log(`node ${process.version}, ${ROUNDS} interleaved rounds of ${SECONDS}s, 50 connections, GET /v1/pets?limit=20`);
  console.log('| target | req/s (median) | ratio to bare | p99 ms | proxy CPU µs/req |');
  console.log('|---|---|---|---|---|');
  targets.forEach((t, i) => {
    const rps = median(results[i].map((x) => x.rps));
    console.log(`| ${t.name} | ${Math.round(rps)} | ${(rps / base).toFixed(2)} | ${median(results[i].map((x) => x.p99))} | ${Math.round(median(results[i].map((x) => x.cpuUsPerReq)))} |`);
  });
} finally {
  for (const c of children) c.kill('SIGKILL');
}
