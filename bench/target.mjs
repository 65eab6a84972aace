// One benchmark target in its own process: prints "ready http://127.0.0.1:PORT" and serves until
// SIGTERM/SIGINT (then exits 0). Usage:
//   node bench/target.mjs upstream                      the reference backend on node:http, seeded
//   node bench/target.mjs bare-proxy URL                bare @fastify/http-proxy to URL, no policy
//   node bench/target.mjs bare-http-proxy-3 URL         bare node:http + http-proxy-3 to URL, no policy
//   node bench/target.mjs floor URL                     node:http + an undici Pool to URL and nothing else: the
//                                                       least any proxy on this stack can cost (no policy; only the
//                                                       hop-by-hop fields dropped both ways; the body read whole as
//                                                       the gateway does, answered with one end())
//   node bench/target.mjs fast-gateway URL DIR          fast-gateway (from folder DIR) to URL with a bearer-key check and
//                                                       listPets' `limit` bound (1..100, else 400) in its middleware
//   node bench/target.mjs gateway URL|builtin [--engine undici|fastify|http-proxy-3] [--contract off|monitor|enforce] [--ops on|off] [--console on|off]
//                                                       [--consumer-bound on|off] (server.maxInFlightPerConsumer: default, or null)
//                         [--rate-limit memory|redis|off] [--redis-url redis://HOST:PORT] [--cache on|off] [--cache-ttl SECONDS] [--shadow NEXT_URL]
//                                                       the gateway with every policy on (bench/fixtures.mjs) and, with
//                                                       --ops on (the default, as `serve` runs), metrics, the access log
//                                                       (to a file, asynchronously, as on stdout) and the deprecation report.
//                                                       --rate-limit: a limit that never trips in memory (the default), in
//                                                       Redis (--redis-url, else BENCH_REDIS_URL; the target waits for the
//                                                       connection before it is ready, and closes it on SIGTERM; with --ops on
//                                                       the deprecation report is kept in Redis too, as `serve` does), or no
//                                                       rate-limit section at all (off)
//                                                       --cache on: the response cache (memory store), TTL --cache-ttl
//                                                       seconds for both operations (default listPets 5, getPet 30)
//                                                       --shadow NEXT_URL: the migration lane, listPets and getPet shadowed to
//                                                       NEXT_URL (its /v1 base), `shadow:` at its defaults (bench/shadow.mjs)
//   node bench/target.mjs slow-upstream MS              the seeded reference backend answering every request after MS ms (the
//                                                       slow mirror of bench/shadow.mjs); GET /__stats: {"requests","inFlight","maxInFlight"}
//   node bench/target.mjs gateway-handler URL [--bound on|off]
//                                                       the undici engine's node:http handler (createUndiciHandler, every
//                                                       policy on, ops off) on a bare node:http server, with (on, the
//                                                       default) or without the per-connection in-flight bound the gateway's
//                                                       listener puts in front of it (dist/fronts/connections.js, limit 8):
//                                                       the pair differs only in that bound, to measure its cost
// Every upstream and built-in backend serves SEED_PETS (150) animals. With BENCH_PROFILE_FILE set,
// SIGUSR2 starts the CPU profiler and SIGTERM writes the profile there (bench/profile.mjs).
import { rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import inspector from 'node:inspector';
import { createRequire } from 'node:module';
import Fastify from 'fastify';
import httpProxy from '@fastify/http-proxy';
import { createServer, Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { URLSearchParams } from 'node:url';
import { join } from 'node:path';
import { createProxyServer } from 'http-proxy-3';
import { Pool } from 'undici';
import { pino } from 'pino';
import { createBackendServer } from '../dist/index.js';
import { logDestination } from '../dist/ops/log-destination.js';
import { createOps } from '../dist/ops/index.js';
import { closeStores, storesReady } from '../dist/stores/index.js';
import { KEY, RATE_LIMITS, benchGateway, seededBackend } from './fixtures.mjs';

const [kind, url, ...rest] = process.argv.slice(2);
const flag = (name, def) => {
  const i = rest.indexOf(name);
  return i === -1 ? def : rest[i + 1];
};
let close = async () => {};

async function listen(server) {
  await new Promise((r, j) => server.listen(0, '127.0.0.1', r).once('error', j));
  return `http://127.0.0.1:${server.address().port}`;
}

async function main() {
  if (kind === 'upstream') {
    const server = createBackendServer({ backend: seededBackend() });
    // BENCH_UPSTREAM_KEEPALIVE_MS: a gateway run under valgrind (bench/instr.mjs) is slow enough that
    // node's 5 s keep-alive would close connections its pool is about to reuse (a reset, then a 502).
    const keepAlive = Number(process.env.BENCH_UPSTREAM_KEEPALIVE_MS);
    if (keepAlive > 0) server.keepAliveTimeout = keepAlive;
    close = () => new Promise((r) => server.close(r));
    return listen(server);
  }
  if (kind === 'slow-upstream') {
    // The reference backend's own handler, each request handed to it after `ms`; counted.
    const ms = Number(url);
    if (!(ms >= 0)) throw new Error(`slow-upstream MS: a delay in ms, not ${url}`);
    const answer = createBackendServer({ backend: seededBackend() }).listeners('request')[0];
    const stats = { requests: 0, inFlight: 0, maxInFlight: 0 };
    const server = createServer((req, res) => {
      if (req.url === '/__stats') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify(stats));
      }
      stats.requests++;
      stats.maxInFlight = Math.max(stats.maxInFlight, ++stats.inFlight);
      res.once('close', () => stats.inFlight--);
      setTimeout(() => answer(req, res), ms);
    });
    server.keepAliveTimeout = 60_000;
    close = () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(r));
    };
    return listen(server);
  }
  if (kind === 'bare-proxy') {
    const app = Fastify({ logger: false });
    await app.register(httpProxy, { upstream: url });
    await app.listen({ host: '127.0.0.1', port: 0 });
    close = () => app.close();
    return `http://127.0.0.1:${app.server.address().port}`;
  }
  if (kind === 'floor') {
    // The gateway's own transport (node:http in, an undici Pool out, dispatch with a handler
    // object) with nothing on top: what the undici engine would cost if its policies, header rules
    // and operations were free.
    const pool = new Pool(url, { connections: 128 });
    const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'host', 'upgrade', 'te', 'trailer', 'proxy-connection']);
    const copy = (from) => {
      const out = {};
      for (const k in from) if (!HOP.has(k)) out[k] = from[k];
      return out;
    };
    const server = createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        let status = 0;
        let headers;
        const parts = [];
        const body = chunks.length === 0 ? undefined : Buffer.concat(chunks);
        pool.dispatch({ path: req.url, method: req.method, headers: copy(req.headers), body }, {
          onRequestStart() {},
          onResponseStart(_c, s, h) {
            status = s;
            headers = h;
          },
          onResponseData(_c, chunk) {
            parts.push(chunk);
          },
          onResponseEnd() {
            res.writeHead(status, copy(headers));
            res.end(parts.length === 1 ? parts[0] : Buffer.concat(parts));
          },
          onResponseError() {
            res.statusCode = 502;
            res.end();
          },
        });
      });
    });
    close = async () => {
      await new Promise((r) => server.close(r));
      await pool.close();
    };
    return listen(server);
  }
  if (kind === 'fast-gateway') {
    // fast-gateway (restana + fast-proxy-lite), the Node gateway a user would pick instead, doing
    // what a gateway in front of this interface must at least do: the bearer key (a set of SHA-256
    // digests, as the gateway keeps its keys), the `limit` bound of listPets (1..100, default 20,
    // else 400) and the key kept from the upstream. `rest[0]` is the package's folder (bench/lib.mjs
    // peerPackage: node_modules or bench/.peers).
    const fastGateway = createRequire(import.meta.url)(rest[0]);
    const sha = (s) => createHash('sha256').update(s).digest('base64');
    const digests = new Set([sha(KEY)]);
    const deny = (res, status, code, message) => {
      const body = JSON.stringify({ code, message, status });
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    };
    const checks = (req, res, next) => {
      const auth = req.headers.authorization;
      if (auth === undefined || !auth.startsWith('Bearer ') || !digests.has(sha(auth.slice(7)))) return deny(res, 401, 'invalid_api_key', 'The API key is not valid.');
      const q = req.url.indexOf('?');
      if (req.method === 'GET' && q !== -1 && req.url.slice(0, q) === '/v1/pets') {
        const limit = new URLSearchParams(req.url.slice(q + 1)).get('limit');
        if (limit !== null && !/^(?:[1-9][0-9]?|100)$/.test(limit)) return deny(res, 400, 'invalid_query', 'limit must be an integer from 1 to 100');
      }
      delete req.headers.authorization;
      return next();
    };
    const service = fastGateway({ middlewares: [checks], routes: [{ prefix: '/v1', prefixRewrite: '/v1', target: url }] });
    const server = await service.start(0, '127.0.0.1');
    close = () => service.close();
    return `http://127.0.0.1:${server.address().port}`;
  }
  if (kind === 'bare-http-proxy-3') {
    const agent = new Agent({ keepAlive: true, maxSockets: 128 });
    const proxy = createProxyServer({ target: url, agent });
    proxy.on('error', () => {});
    const server = createServer((req, res) => proxy.web(req, res, {}, () => res.destroy()));
    close = () => new Promise((r) => server.close(r));
    return listen(server);
  }
  if (kind === 'gateway') {
    const rateLimit = flag('--rate-limit', 'memory');
    if (!RATE_LIMITS.includes(rateLimit)) throw new Error(`--rate-limit must be one of ${RATE_LIMITS.join(', ')}, not '${rateLimit}'`);
    const redisUrl = flag('--redis-url', process.env.BENCH_REDIS_URL);
    if (rateLimit === 'redis' && !redisUrl) throw new Error('--rate-limit redis needs --redis-url redis://HOST:PORT (or BENCH_REDIS_URL)');
    const shadow = flag('--shadow');
    const gateway = benchGateway({ upstream: url === 'builtin' ? 'builtin' : url + '/v1', contract: flag('--contract', 'off'), rateLimit, redisUrl, cache: flag('--cache', 'off') === 'on', cacheTtl: flag('--cache-ttl') === undefined ? undefined : Number(flag('--cache-ttl')), consumerBound: flag('--consumer-bound', 'on') === 'on', shadow: shadow === undefined ? undefined : shadow + '/v1' });
    // The stores the policy opened (a Redis connection): closed after the server, as `serve` does.
    const closeWith = (closeServer) => async () => {
      try {
        await closeServer();
      } finally {
        await closeStores();
      }
    };
    close = closeWith(async () => {});
    // Not ready before Redis is: the first measured requests must not wait for the connection.
    if (rateLimit === 'redis' && !(await storesReady(5000))) throw new Error(`Redis at ${redisUrl} did not accept a connection within 5 s`);
    const engine = flag('--engine', 'undici');
    let options = {};
    if (flag('--ops', 'on') === 'on') {
      // As `serve` runs it: one pino logger on an asynchronous destination (a file here, stdout there).
      const logFile = join(tmpdir(), `petstore-gateway-bench-access-${process.pid}.log`);
      const log = pino({ level: 'info' }, logDestination(logFile));
      // After pino's own exit hook has written what is pending: the lines are not kept.
      process.on('exit', () => rmSync(logFile, { force: true }));
      // --console off: the operator console's counts left out (server.admin.console: false), to weigh them.
      const config = flag('--console', 'on') === 'on' ? gateway.config : { ...gateway.config, server: { ...gateway.config.server, admin: { ...gateway.config.server.admin, console: false } } };
      const ops = createOps(config, { log, breakerOpen: () => false });
      options = { log, observer: ops.observer };
    }
    if (!['undici', 'http-proxy-3', 'fastify'].includes(engine)) throw new Error(`unknown engine ${engine}`);
    const running = await gateway.listen({ engine, host: '127.0.0.1', port: 0, ...options });
    close = closeWith(() => running.close());
    return `http://127.0.0.1:${running.server.address().port}`;
  }
  if (kind === 'gateway-handler') {
    const { createUndiciHandler } = await import('../dist/index.js');
    const { boundInFlight } = await import('../dist/fronts/connections.js');
    const engine = createUndiciHandler(benchGateway({ upstream: url + '/v1' }));
    // The listener's default (server.maxInFlightPerConnection, 8).
    const handler = flag('--bound', 'on') === 'on' ? boundInFlight(8, engine.handler) : engine.handler;
    const server = createServer(handler);
    close = async () => {
      await new Promise((r) => server.close(r));
      await engine.close();
    };
    return listen(server);
  }
  throw new Error(`unknown target kind ${kind}`);
}

// With BENCH_PROFILE_FILE set: SIGUSR2 starts the CPU profiler (after start-up and warm-up, so
// module loading is not in the profile); SIGTERM stops it and writes the profile there.
const profileFile = process.env.BENCH_PROFILE_FILE;
let session;
if (profileFile) {
  process.on('SIGUSR2', () => {
    if (session !== undefined) return;
    session = new inspector.Session();
    session.connect();
    session.post('Profiler.enable');
    session.post('Profiler.setSamplingInterval', { interval: Number(process.env.BENCH_PROFILE_INTERVAL_US ?? 200) });
    session.post('Profiler.start', () => process.stdout.write('profiling\n'));
  });
}
function writeProfile() {
  return new Promise((r) => {
    if (session === undefined) return r();
    session.post('Profiler.stop', (err, result) => {
      if (!err) writeFileSync(profileFile, JSON.stringify(result.profile));
      r();
    });
  });
}

for (const sig of ['SIGTERM', 'SIGINT']) {
  process.once(sig, async () => {
    await writeProfile();
    // Exit promptly even with connections open.
    setTimeout(() => process.exit(0), 1000).unref();
    close().finally(() => process.exit(0));
  });
}

main().then((u) => process.stdout.write(`ready ${u}\n`), (err) => {
  console.error(err);
  process.exit(1);
});
