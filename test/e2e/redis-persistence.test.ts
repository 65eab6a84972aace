/**
 * D3: the shipped Redis keeps the key registry across a restart. The redis-server arguments of
 * deploy/kubernetes-redis.yaml and deploy/compose.yaml are run as they are (only the port, the bind
 * address and the directory changed), a registry key is written, Redis is stopped and started
 * again on the same directory, and the key is still there.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { parse, parseAllDocuments } from 'yaml';
import { KeyRegistry } from '../../src/registry/registry.js';
import { REDIS_SERVER } from '../helpers/redis.js';
import { PROJECT_ROOT, tempDir } from '../helpers/servers.js';
import { until } from '../helpers/wait.js';

type Doc = Record<string, unknown>;

function shippedArgs(): Array<[string, string[]]> {
  const k8s = parseAllDocuments(readFileSync(join(PROJECT_ROOT, 'deploy/kubernetes-redis.yaml'), 'utf8')).map((d) => d.toJS() as Doc);
  const deployment = k8s.find((d) => d.kind === 'Deployment') as Doc;
  const container = ((((deployment.spec as Doc).template as Doc).spec as Doc).containers as Doc[])[0] as Doc;
  const compose = parse(readFileSync(join(PROJECT_ROOT, 'deploy/compose.yaml'), 'utf8'), { merge: true }) as Doc;
  const redis = (compose.services as Doc).redis as Doc;
  return [
    ['deploy/kubernetes-redis.yaml', (container.args as string[]).slice(1)],
    ['deploy/compose.yaml', (redis.command as string[]).slice(1)],
  ];
}

/** The shipped arguments, with --dir, --port and --bind of this test. */
function localArgs(args: string[], dir: string, port: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (['--dir', '--port', '--bind'].includes(args[i]!)) i++;
    else out.push(args[i]!);
  }
  return [...out, '--dir', dir, '--port', String(port), '--bind', '127.0.0.1'];
}

async function freePort(): Promise<number> {
  const s = createServer().listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exit = once(child, 'exit');
  child.kill('SIGTERM');
  await exit;
}

// parity: no gateway runs here: the shipped redis-server arguments and the registry module only
for (const [file, args] of shippedArgs()) {
  t.test(`${file}: Redis keeps the key registry across a restart`, async (t) => {
    t.ok(args.includes('--appendonly') && args[args.indexOf('--appendonly') + 1] === 'yes', 'AOF on');
    const dir = tempDir(t, 'redis-aof');
    const port = await freePort();
    const start = () => {
      const child = spawn(REDIS_SERVER, localArgs(args, dir, port), { stdio: 'ignore' });
      t.teardown(() => stop(child));
      return child;
    };
    let redis = start();
    const config = { redis: { url: `redis://127.0.0.1:${port}`, connectTimeoutMs: 500 }, prefix: 'persist:', syncIntervalMs: 200, maxStaleSeconds: 60, commandTimeoutMs: 1000 };
    const writer = new KeyRegistry(config as never, { env: {}, follow: false });
    t.teardown(() => writer.close());
    await until('Redis answers', async () => (await writer.list().then(() => true, () => false)), 10_000);
    const made = await writer.create({ id: 'persisted' });
    // A gateway's copy (following Redis): across the restart it sees the same epoch, no data loss.
    const reader = new KeyRegistry(config as never, { env: {} });
    t.teardown(() => reader.close());
    await reader.ready;
    t.ok(reader.knows(made.key), 'the follower knows the key');
    await stop(redis);
    redis = start();
    let ids: string[] = [];
    await until('Redis answers again', async () => {
      const list = await writer.list().catch(() => undefined);
      ids = list?.map((k) => k.id) ?? [];
      return list !== undefined;
    }, 10_000);
    t.strictSame(ids, ['persisted'], 'the key is still in the registry');
    await until('the follower reconnected', async () => reader.status().connected, 10_000);
    // Confirmed current again since (a copy kept after a loss is never confirmed): syncs every 200 ms.
    await new Promise((r) => setTimeout(r, 1000));
    t.ok((reader.status().confirmedAgeSeconds ?? 99) < 0.6, 'confirmed current after the restart');
    t.match(reader.status(), { dataLoss: false, dataLossDetected: 0, keys: 1 }, 'a persistent Redis is no data loss');
  });
}
