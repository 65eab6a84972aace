// Instructions per request of the metrics observer alone (GatewayMetrics.onEnd: two histogram
// observations and the deprecated-call counter for a getPet record), counted under valgrind's
// callgrind and so independent of the machine's load. bench/instr.mjs measures whole requests,
// where an observer's share is spread over V8's builtins and C++ runtime without a caller's name;
// this measures the observer by itself: a fresh process records N1 and then N2 records (after the
// same warm-up), and the difference of the two totals over N2 - N1 is the cost of one record,
// with start-up and the module loading cancelled out (the loop's own work, reading a record, is
// about 10 Ir; a JIT or GC event that falls in one run and not the other moves a figure by a few
// hundred, so compare figures thousands apart only).
//
//   npm run build && node bench/instr-observers.mjs [--baseline /path/to/older/built/checkout]
//
// Environment: BENCH_OBS_N1 (20000), BENCH_OBS_N2 (120000), BENCH_VALGRIND (valgrind).
// About a minute per checkout.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ROOT, envNum, fmt, isMain, table } from './lib.mjs';

const VALGRIND = process.env.BENCH_VALGRIND || 'valgrind';
const SELF = fileURLToPath(import.meta.url);

/** The child: `n` getPet records through the metrics observer of the checkout at `root`. */
async function child(root, n) {
  const { GatewayMetrics } = await import(pathToFileURL(join(root, 'dist', 'ops', 'metrics.js')).href);
  const metrics = new GatewayMetrics({ defaultMetrics: false });
  // Durations spread over several buckets, as a route's are; each record built as the exchange builds one.
  const records = Array.from({ length: 1024 }, (_, i) => {
    const d = 0.3 + ((i * 7919) % 1000) / 250;
    return {
      startedAt: 1767225600000, durationMs: d, requestId: 'r', method: 'GET', route: '/v1/pets/{petId}', operation: 'getPet', status: 200, errorCode: undefined,
      rejectedBy: undefined, upstreamStatus: 200, upstreamMs: d * 0.7, upstreamFailure: undefined, bytesIn: 0, bytesOut: 90, clientAddress: '127.0.0.1', protocol: '1.1', consumer: 'bench', facts: {},
    };
  });
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const r = records[i & 1023];
    metrics.onEnd(r);
    sum += r.status;
  }
  // Every record counted (the loop did what it says), and read as a scrape reads it.
  const text = await metrics.registry.metrics();
  const count = /^http_server_request_duration_seconds_count\{.*\} (\d+)$/m.exec(text);
  if (Number(count?.[1]) !== n || sum !== 200 * n) throw new Error(`expected ${n} observations, /metrics says ${count?.[1]}`);
}

/** Total Ir of one child process under callgrind. */
function count(root, n) {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-obs-'));
  try {
    // valgrind reports its count on stderr.
    const run = spawnSync(VALGRIND, ['--tool=callgrind', `--callgrind-out-file=${dir}/cg`, process.execPath, SELF, '--child', root, String(n)], {
      stdio: ['ignore', 'ignore', 'pipe'],
      timeout: 600_000,
    });
    const out = run.stderr?.toString() ?? '';
    if (run.status !== 0) throw new Error(`${root}: exit ${run.status}: ${out.slice(-500)}`);
    const m = /Collected : (\d+)/.exec(out);
    if (m === null) throw new Error(`no count from callgrind: ${out.slice(-500)}`);
    return Number(m[1]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Instructions per record of the metrics observer of `root`. */
export function measure(root, n1, n2) {
  return (count(root, n2) - count(root, n1)) / (n2 - n1);
}

if (isMain(import.meta.url)) {
  const argv = process.argv.slice(2);
  if (argv[0] === '--child') {
    await child(argv[1], Number(argv[2]));
  } else {
    const i = argv.indexOf('--baseline');
    const n1 = envNum('BENCH_OBS_N1', 20_000, 1000);
    const n2 = envNum('BENCH_OBS_N2', 120_000, n1 + 1000);
    const roots = [...(i === -1 ? [] : [['baseline', resolve(argv[i + 1])]]), ['this', ROOT]];
    const rows = roots.map(([id, root]) => [id, fmt(measure(root, n1, n2))]);
    process.stdout.write(`${process.version}, valgrind callgrind, (Ir(${n2}) - Ir(${n1})) / ${n2 - n1} records\n\n` + table(['checkout', 'metrics observer, Ir per getPet record'], rows) + '\n');
  }
}
