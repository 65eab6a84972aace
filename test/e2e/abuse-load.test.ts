/**
 * Load from one client cannot hurt the others (issue 25, items 1 and 2), over raw sockets on
 * 127.0.0.1, on every engine, with a real redis-server where Redis is involved:
 * - a pipelined flood cannot escape a Redis rate limit: the flood's own event-loop lag is not a
 *   store failure, and a store that does fail leaves this process's own counters deciding;
 */
import { connect } from 'node:net';
import t from 'tap';
import { closeStores, storesReady } from '../../src/stores/index.js';
import { startRedis } from '../helpers/redis.js';
import { forEachEngine, startGateway } from '../helpers/servers.js';

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

forEachEngine(t, async (t, engine) => {
  t.test('a pipelined flood cannot escape a Redis rate limit (limit 10, a 10 ms store deadline)', async (t) => {
    const redis = await startRedis();
    t.teardown(() => redis.stop());
    t.teardown(() => closeStores());
    // A 10 ms deadline: the flood's parsing alone holds the loop longer than that.
    const store = { redis: { url: redis.url, prefix: `flood-${engine}:`, commandTimeoutMs: 10 } };
    const gw = await startGateway(t, { policies: { 'rate-limit': { limit: 10, windowSeconds: 3600, store } } }, { engine });
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
