// Young-generation garbage per request of the gateway (engine undici, everything on): a count that
// does not depend on how busy the machine is, unlike req/s or CPU time. The target runs with
// --trace-gc and a semi-space fixed at BENCH_ALLOC_SEMI_MB (1 MB), so each scavenge marks about
// that many megabytes allocated; after a warm-up, a fixed number of requests per route, and the
// scavenges counted over them. Objects made per request (closures, wrappers, option objects) show
// as kilobytes per request; two builds are compared by running this once for each:
//
//   npm run build && node bench/alloc.mjs [DIR]        DIR: a built checkout (default: this one)
//
// Environment: BENCH_ALLOC_REQUESTS (6,000 per route), BENCH_ALLOC_SEMI_MB (1), BENCH_CONNECTIONS (20),
// BENCH_ALLOC_UPSTREAM (the upstream URL, or builtin), BENCH_ALLOC_FLAGS (more bench/target.mjs gateway flags,
// e.g. '--cache on --cache-ttl 3600' or '--contract enforce').
// The resolution is one scavenge (SEMI_MB over REQUESTS, 0.17 KB with the defaults).
import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { AUTH, NEW_PET, ROOT, envNum, isMain, load, sleep, startTarget } from './lib.mjs';

// Every route authenticated: without the key a route measures the 401 path, not its own.
const ROUTES = {
  list20: { path: '/v1/pets?limit=20', headers: { authorization: AUTH } },
  list100: { path: '/v1/pets?limit=100', headers: { authorization: AUTH } },
  get: { path: '/v1/pets/7', headers: { authorization: AUTH } },
  create: { path: '/v1/pets', method: 'POST', body: NEW_PET, headers: { authorization: AUTH, 'content-type': 'application/json' } },
};

export async function runAlloc(dir = ROOT) {
  const N = envNum('BENCH_ALLOC_REQUESTS', 6000, 100, 1_000_000);
  const SEMI = envNum('BENCH_ALLOC_SEMI_MB', 1, 1, 64);
  const connections = envNum('BENCH_CONNECTIONS', 20, 1, 1000);
  const up = await startTarget('upstream');
  // Another gateway config: BENCH_ALLOC_UPSTREAM=builtin, BENCH_ALLOC_FLAGS='--cache on --cache-ttl 3600'.
  const extra = (process.env.BENCH_ALLOC_FLAGS ?? '').split(' ').filter(Boolean);
  const flags = ['--trace-gc', `--min-semi-space-size=${SEMI}`, `--max-semi-space-size=${SEMI}`];
  const child = spawn(process.execPath, [...flags, resolve(dir, 'bench', 'target.mjs'), 'gateway', process.env.BENCH_ALLOC_UPSTREAM ?? up.url, '--engine', 'undici', ...extra], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (s) => (out += s));
  const scavenges = () => (out.match(/Scavenge/g) ?? []).length;
  try {
    const started = Date.now();
    while (!/ready (\S+)/.test(out)) {
      if (Date.now() - started > 30_000 || child.exitCode !== null) throw new Error(`the gateway did not start:\n${out}`);
      await sleep(100);
    }
    const url = /ready (\S+)/.exec(out)[1];
    for (const r of Object.values(ROUTES)) await load(url, { ...r, amount: Math.ceil(N / 2), connections });
    const result = {};
    for (const [id, r] of Object.entries(ROUTES)) {
      await sleep(300);
      const before = scavenges();
      const x = await load(url, { ...r, amount: N, connections });
      // Counted only over answers of the route itself: an error path allocates otherwise.
      if (x.ok < x.total) throw new Error(`${id}: ${x.ok} of ${x.total} answers 2xx (${JSON.stringify(x.statuses)})`);
      await sleep(300);
      const n = scavenges() - before;
      result[id] = { scavenges: n, kbPerRequest: Number(((n * SEMI * 1024) / N).toFixed(2)) };
    }
    return result;
  } finally {
    child.kill('SIGTERM');
    await up.stop();
  }
}

if (isMain(import.meta.url)) {
  const result = await runAlloc(process.argv[2] ?? ROOT);
  for (const [id, r] of Object.entries(result)) process.stdout.write(`${id.padEnd(8)} ${r.kbPerRequest.toFixed(2)} KB/request (${r.scavenges} scavenges)\n`);
}
