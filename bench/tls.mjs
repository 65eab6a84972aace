// What TLS and HTTP/2 cost the gateway, beside nginx terminating TLS with the same certificate in
// the same run. Six rows: for both the gateway (`serve`, the CLI) and nginx (a plain reverse proxy,
// keep-alive to the upstream), each proxying to the same upstream process (bench/target.mjs
// upstream): plain HTTP/1.1 and HTTPS/1.1 measured with wrk, HTTP/2 over TLS measured with h2load
// (BENCH_TLS_STREAMS streams per connection). The certificate (ECDSA P-256, signed by a CA made
// for the run) is made with the openssl command into a temporary directory, removed at exit.
//
// The targets:
//   gateway https ÷ gateway http ≥ nginx https ÷ nginx http − 0.05
//   gateway HTTP/2 (10 streams per connection) ≥ gateway HTTPS/1.1
//
//   npm run build && node bench/tls.mjs
//
// Knobs (environment): BENCH_TLS_SECONDS (5) per measurement, BENCH_TLS_ROUNDS (3) interleaved
// rounds (median reported), BENCH_TLS_CONNECTIONS (50) for wrk, BENCH_TLS_H2_CONNECTIONS (10) and
// BENCH_TLS_STREAMS (10) for h2load, BENCH_TLS_ENGINE (undici), BENCH_TLS_PATH (/v1/pets/1),
// BENCH_TLS_WARMUP_SECONDS (2) of load on every row before the first round, not counted.
// wrk, h2load (nghttp2-client) and nginx must be installed; a missing one is said, and its rows skipped.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AUTH, KEY, ROOT, envNum, fmt, isMain, median, startProcess, startTarget, stopProcess, table } from './lib.mjs';

const SECONDS = envNum('BENCH_TLS_SECONDS', 5, 1, 600);
const ROUNDS = envNum('BENCH_TLS_ROUNDS', 3, 1, 50);
const CONNECTIONS = envNum('BENCH_TLS_CONNECTIONS', 50, 1, 10_000);
const H2_CONNECTIONS = envNum('BENCH_TLS_H2_CONNECTIONS', 10, 1, 10_000);
const STREAMS = envNum('BENCH_TLS_STREAMS', 10, 1, 1000);
const WARMUP = envNum('BENCH_TLS_WARMUP_SECONDS', 2, 1, 60);
const ENGINE = process.env.BENCH_TLS_ENGINE ?? 'undici';
const PATH = process.env.BENCH_TLS_PATH ?? '/v1/pets/1';
const log = (s) => process.stderr.write(s + '\n');

const have = (cmd) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;

function openssl(dir, args) {
  const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8', timeout: 20_000 });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
}

/** A CA and a server certificate for 127.0.0.1/localhost, in `dir`. */
function makeCertificate(dir) {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(dir, ['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=bench-ca']);
  openssl(dir, ['req', '-new', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=localhost']);
  writeFileSync(join(dir, 'server.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  openssl(dir, ['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '2', '-extfile', 'server.ext']);
  return { cert: join(dir, 'server.pem'), key: join(dir, 'server.key') };
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

/** The gateway from the built CLI, plain or with server.tls (HTTP/2 on by default). */
async function startGateway(dir, upstreamUrl, tls) {
  const file = join(dir, `gateway-${tls ? 'tls' : 'plain'}.json`);
  const server = { admin: null, ...(tls ? { tls: { certFile: tls.cert, keyFile: tls.key } } : {}) };
  writeFileSync(file, JSON.stringify({ version: 1, upstream: { url: `${upstreamUrl}/v1` }, server, policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS' } } }));
  return startProcess([join(ROOT, 'dist', 'cli', 'main.js'), 'serve', '--policy', file, '--port', '0', '--engine', ENGINE], {
    ready: /petstore-gateway listening on (\S+) /,
    env: { ...process.env, PETSTORE_API_KEYS: KEY, LOG_LEVEL: 'warn' },
  });
}

/** nginx with one plain and one TLS+HTTP/2 server, both proxying to the upstream with keep-alive. */
async function startNginx(dir, upstreamUrl, tls) {
  const [plain, secure] = [await freePort(), await freePort()];
  const up = new URL(upstreamUrl);
  const location = `location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; proxy_set_header Host $host; }`;
  const conf = `worker_processes 1;
daemon off;
pid ${join(dir, 'nginx.pid')};
error_log ${join(dir, 'nginx-error.log')} warn;
events { worker_connections 4096; }
http {
  access_log off;
  # nginx closes a client connection after 1,000 requests by default (HTTP/2 included), and h2load
  # does not reconnect: its req/s would be 10 connections x 1,000 over the run. The gateway sets no
  # such limit, so neither does nginx here.
  keepalive_requests 100000000;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream up { server ${up.hostname}:${up.port}; keepalive 128; }
  server { listen 127.0.0.1:${plain}; ${location} }
  server {
    listen 127.0.0.1:${secure} ssl http2;
    ssl_certificate ${tls.cert}; ssl_certificate_key ${tls.key};
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:1m;
    ${location}
  }
}
`;
  const file = join(dir, 'nginx.conf');
  writeFileSync(file, conf);
  const child = spawn('nginx', ['-p', dir, '-c', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr.on('data', (c) => (err += c));
  // nginx prints nothing when it is up: wait until the TLS port accepts.
  for (let i = 0; i < 100; i++) {
    if (child.exitCode !== null) throw new Error(`nginx exited: ${err}`);
    const r = spawnSync('curl', ['-sk', '-o', '/dev/null', '-w', '%{http_code}', `https://127.0.0.1:${secure}/v1/pets/1`], { encoding: 'utf8', timeout: 2000 });
    if (r.stdout !== '000' && r.status === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  return { http: `http://127.0.0.1:${plain}`, https: `https://127.0.0.1:${secure}`, stop: () => stopProcess(child) };
}

/**
 * A load generator's output. Asynchronous, not spawnSync: while it runs, this process keeps reading
 * the pipes of the targets it started (a target blocked on a full stdout pipe would be measured).
 */
function generate(command, args, seconds) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'ignore'] });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (s) => (stdout += s));
    const timer = setTimeout(() => child.kill('SIGKILL'), (seconds + 30) * 1000);
    child.on('close', () => {
      clearTimeout(timer);
      resolve({ stdout });
    });
    child.on('error', () => resolve({ stdout }));
  });
}

/** req/s of one wrk run (HTTP/1.1, keep-alive). */
async function wrk(url, seconds = SECONDS) {
  const r = await generate('wrk', ['-t', '1', '-c', String(CONNECTIONS), '-d', `${seconds}s`, '-H', `Authorization: ${AUTH}`, url + PATH], seconds);
  const m = /Requests\/sec:\s+([\d.]+)/.exec(r.stdout ?? '');
  const errors = /Non-2xx or 3xx responses: (\d+)/.exec(r.stdout ?? '');
  if (errors !== null) log(`  wrk ${url}: ${errors[1]} non-2xx answers`);
  return m === null ? NaN : Number(m[1]);
}

/** req/s of one h2load run (HTTP/2 over TLS, STREAMS streams per connection). */
async function h2load(url, seconds = SECONDS) {
  const r = await generate('h2load', ['-c', String(H2_CONNECTIONS), '-m', String(STREAMS), '-D', String(seconds), '-H', `authorization: ${AUTH}`, url + PATH], seconds);
  const m = /finished in [\d.]+\w*, ([\d.]+) req\/s/.exec(r.stdout ?? '');
  const status = /status codes: (\d+) 2xx/.exec(r.stdout ?? '');
  if (status !== null && Number(status[1]) === 0) log(`  h2load ${url}: no 2xx answer\n${r.stdout}`);
  return m === null ? NaN : Number(m[1]);
}

export async function runTls() {
  const missing = ['wrk', 'h2load', 'nginx', 'openssl'].filter((c) => !have(c));
  if (missing.length > 0) log(`bench/tls: not installed: ${missing.join(', ')} (their rows are skipped)`);
  const dir = mkdtempSync(join(tmpdir(), 'petstore-gateway-bench-tls-'));
  const stops = [];
  try {
    const tls = makeCertificate(dir);
    const upstream = await startTarget('upstream');
    stops.push(() => upstream.stop());
    const gwPlain = await startGateway(dir, upstream.url, undefined);
    stops.push(() => gwPlain.stop());
    const gwTls = await startGateway(dir, upstream.url, tls);
    stops.push(() => gwTls.stop());
    const nginx = have('nginx') ? await startNginx(dir, upstream.url, tls) : undefined;
    if (nginx) stops.push(() => nginx.stop());
    const rows = [
      ['gateway', 'http/1.1', (s) => wrk(gwPlain.url, s)],
      ['gateway', 'https/1.1', (s) => wrk(gwTls.url, s)],
      ['gateway', `h2 (${STREAMS} streams)`, (s) => h2load(gwTls.url, s)],
      ...(nginx ? [['nginx', 'http/1.1', (s) => wrk(nginx.http, s)], ['nginx', 'https/1.1', (s) => wrk(nginx.https, s)], ['nginx', `h2 (${STREAMS} streams)`, (s) => h2load(nginx.https, s)]] : []),
    ].filter(([, proto]) => (proto.startsWith('h2') ? have('h2load') : have('wrk')));
    const figures = new Map(rows.map(([who, proto]) => [`${who} ${proto}`, []]));
    // A warm-up of every row first, not counted: a fresh Node process still compiles for seconds.
    for (const [, , run] of rows) await run(WARMUP);
    for (let round = 0; round < ROUNDS; round++) {
      // Interleaved, the order rotated each round, so drift in the machine's load spreads evenly.
      const order = rows.map((_, i) => rows[(i + round) % rows.length]);
      for (const [who, proto, run] of order) figures.get(`${who} ${proto}`).push(await run(SECONDS));
      log(`bench/tls: round ${round + 1}/${ROUNDS} done`);
    }
    const med = (k) => median(figures.get(k) ?? [NaN]);
    const result = Object.fromEntries([...figures.keys()].map((k) => [k, med(k)]));
    const gwRatio = med('gateway https/1.1') / med('gateway http/1.1');
    const ngRatio = med('nginx https/1.1') / med('nginx http/1.1');
    const h2 = `h2 (${STREAMS} streams)`;
    log(`\nengine ${ENGINE}, ${PATH}, ${ROUNDS} rounds × ${SECONDS} s, wrk -c ${CONNECTIONS}, h2load -c ${H2_CONNECTIONS} -m ${STREAMS}; medians:`);
    for (const [k, v] of Object.entries(result)) log(`  ${k.padEnd(28)} ${fmt(v)} req/s`);
    log(`  gateway https ÷ http: ${fmt(gwRatio, 2)}; nginx https ÷ http: ${fmt(ngRatio, 2)}; target: gateway ≥ nginx − 0.05: ${gwRatio >= ngRatio - 0.05 ? 'met' : 'not met'}`);
    log(`  gateway h2 ÷ https/1.1: ${fmt(med(`gateway ${h2}`) / med('gateway https/1.1'), 2)}; target ≥ 1: ${med(`gateway ${h2}`) >= med('gateway https/1.1') ? 'met' : 'not met'}`);
    const h2Ratio = med(`gateway ${h2}`) / med('gateway https/1.1');
    const tlsMet = gwRatio >= ngRatio - 0.05;
    const h2Met = h2Ratio >= 1;
    const markdown = [
      '### TLS and HTTP/2: the gateway beside nginx',
      '',
      `Engine ${ENGINE}, ${PATH}, ${ROUNDS} interleaved rounds × ${SECONDS} s (order rotated each round), medians; wrk -t 1 -c ${CONNECTIONS} for HTTP/1.1, h2load -c ${H2_CONNECTIONS} -m ${STREAMS} for HTTP/2; the gateway (\`serve\`) and nginx (one worker, keep-alive upstream) proxy to the same upstream process, with the same ECDSA P-256 certificate.${missing.length === 0 ? '' : ` Not installed, rows skipped: ${missing.join(', ')}.`}`,
      '',
      table(['server', 'protocol', 'req/s (median)', 'per round'], [...figures.entries()].map(([k, v]) => [k.split(' ')[0], k.split(' ').slice(1).join(' '), fmt(med(k)), v.map((x) => fmt(x)).join(' ')])),
      '',
      table(
        ['goal', 'measured', 'verdict'],
        [
          ['gateway https ÷ http ≥ nginx https ÷ http − 0.05', `gateway ${fmt(gwRatio, 2)}, nginx ${fmt(ngRatio, 2)}`, Number.isFinite(gwRatio) && Number.isFinite(ngRatio) ? (tlsMet ? 'met' : '**not met**') : 'not measured'],
          [`gateway HTTP/2 (${STREAMS} streams per connection) ≥ gateway HTTPS/1.1`, `${fmt(h2Ratio, 2)}×`, Number.isFinite(h2Ratio) ? (h2Met ? 'met' : '**not met**') : 'not measured'],
        ],
      ),
    ].join('\n');
    return { result, gwRatio, ngRatio, h2Ratio, tlsMet, h2Met, markdown };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) {
  runTls().then(
    (r) => process.stdout.write(JSON.stringify(r) + '\n'),
    (err) => {
      process.stderr.write(`bench/tls: ${err.stack ?? err}\n`);
      process.exitCode = 1;
    },
  );
}
