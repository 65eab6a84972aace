/**
 * Readiness does not depend on the upstream by default (issue 38, item 5): every replica shares
 * one upstream, and a 503 /readyz on all of them would turn the interface's Error shape into
 * refused connections. A real `serve` process in front of an upstream that refuses connections:
 * the client gets 502 upstream_unavailable, /readyz stays 200 with the upstream's state in its
 * detail, and petstore_gateway_upstream_reachable is 0. (The opt-in,
 * server.admin.readiness.upstream: true, is exercised by ops.test.ts's `down` gateways.)
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { assertError } from '../helpers/assert.js';
import { parseExposition, value } from '../helpers/prom.js';
import { bearer, closedPort, ensureBuilt, request, spawnCliUntil, tempDir, testKey } from '../helpers/servers.js';

ensureBuilt();

const READY = /^(?=[\s\S]*petstore-gateway listening on (http:\/\/127\.0\.0\.1:\d+) )(?=[\s\S]*"url":"(http:\/\/[^"]+)","msg":"admin listening)/;

// parity: readiness is computed by the process's ops (src/ops), not by an engine; ops.test.ts runs the opt-in on every engine
t.test('an unreachable upstream: 502 to clients, /readyz 200 with the state in its detail', async (t) => {
  const dir = tempDir(t, 'readiness-upstream');
  const file = join(dir, 'p.json');
  const port = await closedPort();
  writeFileSync(file, JSON.stringify({ version: 1, upstream: { url: `http://127.0.0.1:${port}/v1` } }));
  const key = testKey();
  const { match } = await spawnCliUntil(t, ['serve', '--policy', file, '--port', '0'], READY, { env: { LOG_LEVEL: 'info', PETSTORE_API_KEYS: key }, timeoutMs: 30_000 });
  const [url, admin] = [match[1]!, match[2]!];
  assertError(t, await request(`${url}/v1/pets`, { headers: bearer(key) }), 502, 'upstream_unavailable', { message: 'any' });
  const ready = await request(`${admin}/readyz`);
  t.equal(ready.status, 200, 'still ready');
  t.strictSame(ready.json, { status: 'ready', detail: { upstream: { reachable: false, circuitBreaker: 'closed', decidesReadiness: false } } });
  const scrape = parseExposition((await request(`${admin}/metrics`)).body);
  t.equal(value(scrape, 'petstore_gateway_upstream_reachable'), 0, 'the metric shows it');
});
