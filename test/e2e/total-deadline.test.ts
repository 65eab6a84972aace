/**
 * upstream.timeouts.totalMs against a hostile upstream process (test/fixtures/drip-upstream.mjs)
 * that sends one byte every 100 ms: never idle long enough for bodyMs, and for ever without a total
 * deadline. Past totalMs the client gets 504 when nothing was sent to it yet, and its connection is
 * closed when the body was streaming; the upstream connection is closed either way.
 *
 * Bands: the lower bound is exact (the deadline never cuts an answer short); the upper bound only
 * proves the cut comes from totalMs, long before headersMs (5 s) or the drip's end.
 */
import { spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import t from 'tap';
import { assertError } from '../helpers/assert.js';
import { bearer, forEachEngine, PROJECT_ROOT, request, startGateway, type TeardownHost, nodeCommand } from '../helpers/servers.js';
import { sleep } from '../helpers/wait.js';

const TOTAL_MS = 700;
const TIMEOUTS = { connectMs: 1000, headersMs: 5000, bodyMs: 1000, totalMs: TOTAL_MS };
/** How late a timer may fire on a loaded 2-core machine before the test calls it a failure. */
const LATE_MS = 3000;

async function startDrip(t: TeardownHost): Promise<string> {
  const child = spawn(...nodeCommand([join(PROJECT_ROOT, 'test', 'fixtures', 'drip-upstream.mjs')]), { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('drip upstream did not start within 10 s')), 10_000);
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      out += s;
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+\/v1)/.exec(out);
      if (m?.[1] !== undefined) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once('exit', (code) => reject(new Error(`drip upstream exited (${code})`)));
  });
}

async function closedEarly(upstream: string): Promise<number> {
  const res = await request(upstream.replace(/\/v1$/, '/__closed'));
  return (res.json as { closedEarly: number }).closedEarly;
}

/** Whether the upstream saw a connection closed mid-drip since `before` (bounded: 5 s). */
async function closedSince(upstream: string, before: number): Promise<boolean> {
  for (let i = 0; i < 100; i++) {
    if ((await closedEarly(upstream)) > before) return true;
    await sleep(50);
  }
  return false;
}

/** A GET that reports how its response ended: complete, or its connection closed mid-body. */
function streamed(url: string, key: string): Promise<{ status: number; bytes: number; complete: boolean; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers: bearer(key), agent: false, timeout: 20_000 });
    req.on('timeout', () => req.destroy(new Error('no end within 20 s')));
    req.on('error', reject);
    req.on('response', (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('error', () => undefined);
      res.on('close', () => resolve({ status: res.statusCode ?? 0, bytes, complete: res.complete, ms: performance.now() - t0 }));
    });
    req.end();
  });
}

forEachEngine(t, async (t, engine) => {
  const upstream = await startDrip(t);
  const gw = await startGateway(t, { upstream: { url: upstream, timeouts: TIMEOUTS }, policies: { 'response-contract': { mode: 'off' } } }, { engine });

  t.test('a list whose body drips: 504 at totalMs (nothing was sent yet)', async (t) => {
    const before = await closedEarly(upstream);
    const t0 = performance.now();
    const res = await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key), timeoutMs: 20_000 });
    const ms = performance.now() - t0;
    assertError(t, res, 504, 'upstream_timeout');
    t.ok(ms >= TOTAL_MS - 5, `not before totalMs (${Math.round(ms)} ms)`);
    t.ok(ms < TOTAL_MS + LATE_MS, `cut by totalMs, not by the drip's end (${Math.round(ms)} ms)`);
    t.ok(await closedSince(upstream, before), 'the upstream connection was closed too');
  });

  t.test('a response head that drips: 504 at totalMs', async (t) => {
    const t0 = performance.now();
    const res = await request(`${gw.url}/v1/pets/1`, { headers: bearer(gw.key), timeoutMs: 20_000 });
    const ms = performance.now() - t0;
    assertError(t, res, 504, 'upstream_timeout');
    t.ok(ms >= TOTAL_MS - 5, `not before totalMs (${Math.round(ms)} ms)`);
    t.ok(ms < TOTAL_MS + LATE_MS, `before headersMs (${Math.round(ms)} ms)`);
  });

  t.test('a streamed body that drips: the client connection is closed at totalMs', async (t) => {
    const before = await closedEarly(upstream);
    const r = await streamed(`${gw.url}/v1/pets/2`, gw.key);
    t.equal(r.status, 200, 'the status was already out');
    t.equal(r.complete, false, 'the body is cut: the connection closed, not ended');
    t.ok(r.bytes < 10_000, `part of the body only (${r.bytes} bytes)`);
    t.ok(r.ms >= TOTAL_MS - 5, `not before totalMs (${Math.round(r.ms)} ms)`);
    t.ok(r.ms < TOTAL_MS + LATE_MS, `cut by totalMs (${Math.round(r.ms)} ms)`);
    t.ok(await closedSince(upstream, before), 'the upstream connection was closed too');
  });
});
