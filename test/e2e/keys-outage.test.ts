/**
 * Authentication with the key registry never waits on Redis: the auth policy reads the local copy
 * only. With Redis frozen (SIGSTOP: connections open, nothing answers, the worst case for a client
 * that would wait), a registry key is still answered at once on every engine, a wrong key is
 * refused at once, and a mistyped registry key is refused without a lookup.
 */
import { spawnSync } from 'node:child_process';
import t from 'tap';
import { KeyRegistry } from '../../src/registry/registry.js';
import { closeRegistries } from '../../src/registry/index.js';
import { startRedis } from '../helpers/redis.js';
import { bearer, forEachEngine, request, startGateway } from '../helpers/servers.js';

/** Far above a loaded machine's request time, far below the registry's command timeout (5 s here). */
const FAST_MS = 1500;

forEachEngine(t, async (t, engine) => {
  void t.test('registry keys are answered from the local copy, never from Redis', async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    const registry = { redis: { url: redis.url }, prefix: `outage-${engine}:`, syncIntervalMs: 200, maxStaleSeconds: 3600, commandTimeoutMs: 5000 };
    const writer = new KeyRegistry(registry, { env: {}, follow: false });
    t.teardown(() => writer.close());
    await writer.ready;
    const made = await writer.create({ id: 'partner' });
    const gw = await startGateway(t, { policies: { auth: { registry } } }, { engine });
    t.teardown(() => closeRegistries());
    // The gateway's copy fills from Redis (bounded).
    let status = 0;
    for (let i = 0; i < 100 && status !== 200; i++) {
      status = (await request(`${gw.url}/v1/pets`, { headers: bearer(made.key) })).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 50));
    }
    t.equal(status, 200, 'the registry key works');

    // No Redis round trip per request: 100 authenticated requests cost Redis at most the
    // background work of that second (a last-used flush, periodic version checks), not 100 commands.
    const processed = () => Number(/total_commands_processed:(\d+)/.exec(spawnSync('redis-cli', ['-p', String(redis.port), 'INFO', 'stats'], { encoding: 'utf8', timeout: 5000 }).stdout)?.[1]);
    const before = processed();
    for (let i = 0; i < 100; i++) t.equal((await request(`${gw.url}/v1/pets`, { headers: bearer(made.key) })).status, 200);
    const commands = processed() - before - 1; // the INFO itself
    t.ok(commands < 25, `${commands} Redis commands for 100 requests (syncs every 200 ms and a last-used flush, none per request)`);

    redis.pause();
    t.teardown(() => redis.resume());
    // Past a sync interval, so the gateway's own sync is stuck on the frozen Redis meanwhile.
    await new Promise((r) => setTimeout(r, 400));
    for (const [name, key, expected] of [
      ['the registry key', made.key, 200],
      ['a wrong key', 'psg_not-a-key-0123456789', 401],
      ['a mistyped registry key', made.key.slice(0, -1) + (made.key.endsWith('a') ? 'b' : 'a'), 401],
      ['the file/env key', gw.key, 200],
    ] as const) {
      const start = performance.now();
      const r = await request(`${gw.url}/v1/pets`, { headers: bearer(key) });
      const ms = performance.now() - start;
      t.equal(r.status, expected, `${name} with Redis frozen`);
      t.ok(ms < FAST_MS, `${name}: answered in ${Math.round(ms)} ms, without waiting on Redis`);
    }
  });
});
