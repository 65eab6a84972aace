/**
 * Redis as operators run it, for tests: a TLS server with an ACL user (certificates made at run
 * time with openssl), a master-replica pair watched by a sentinel, and a three-node Cluster made
 * with `redis-cli --cluster create`. Every process listens on a free loopback port, keeps no data
 * on disk beyond a temporary directory, and is stopped at teardown.
 */
import type { RedisStore } from '../../src/stores/redis.js';
import type { RedisStoreConfig } from '../../src/stores/types.js';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { REDIS_SERVER } from './redis.js';
import { tempDir, type TeardownHost } from './servers.js';
import { sleep } from './wait.js';

export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/** redis-cli with arguments; its stdout (bounded by a timeout). */
export function cli(args: string[], timeoutMs = 5000): string {
  const r = spawnSync('redis-cli', args, { encoding: 'utf8', timeout: timeoutMs });
  return `${r.stdout ?? ''}${r.stderr ?? ''}`;
}

/** Polls `redis-cli` until its answer matches (at most `tries` times, 100 ms apart). */
export async function until(args: string[], pattern: RegExp, what: string, tries = 100): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (pattern.test(cli(args, 1000))) return;
    await sleep(100);
  }
  throw new Error(`${what}: no ${pattern} from redis-cli ${args.join(' ')}`);
}

function start(t: TeardownHost, binary: string, args: string[], cwd: string): ChildProcess {
  const child = spawn(binary, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
  child.stderr?.resume();
  t.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exit = once(child, 'exit');
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    await exit;
  });
  return child;
}

const BASE = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];

export interface TlsRedis {
  readonly port: number;
  readonly caFile: string;
  readonly user: string;
  readonly password: string;
}

/** redis-server on TLS only, its certificate signed by a CA made here; the default user off. */
export async function startTlsRedis(t: TeardownHost): Promise<TlsRedis> {
  const dir = tempDir(t, 'redis-tls');
  const ssl = (args: string[]) => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8', timeout: 20_000 });
    if (r.status !== 0) throw new Error(`openssl ${args[0]} failed: ${r.stderr}`);
  };
  // P-256 keys, as test/helpers/certs.ts makes: an RSA key costs openssl many times the CPU.
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1'];
  ssl(['req', '-x509', ...ec, '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=petstore-gateway test CA']);
  ssl(['req', ...ec, '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1']);
  writeFileSync(join(dir, 'ext'), 'subjectAltName=IP:127.0.0.1\n');
  ssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.pem', '-days', '1', '-extfile', 'ext']);
  const port = await freePort();
  const password = `pw-${Math.random().toString(36).slice(2)}`;
  writeFileSync(
    join(dir, 'redis.conf'),
    [
      'port 0',
      `tls-port ${port}`,
      'bind 127.0.0.1',
      'tls-cert-file server.pem',
      'tls-key-file server.key',
      'tls-ca-cert-file ca.pem',
      'tls-auth-clients no',
      'save ""',
      'appendonly no',
      'user default off',
      `user gateway on >${password} ~* &* +@all`,
      '',
    ].join('\n'),
  );
  const child = start(t, REDIS_SERVER, ['redis.conf'], dir);
  await until(['--tls', '--cacert', join(dir, 'ca.pem'), '-p', String(port), '--user', 'gateway', '--pass', password, '--no-auth-warning', 'PING'], /PONG/, 'TLS redis');
  if (child.exitCode !== null) throw new Error('redis-server (TLS) exited');
  return { port, caFile: join(dir, 'ca.pem'), user: 'gateway', password };
}

export interface SentinelSetup {
  readonly sentinelPort: number;
  readonly masterName: string;
  /** The port of the master now, as the sentinel says. */
  master(): number;
  /**
   * Once the sentinel has promoted the replica: points the old master (`oldPort`) at the new one,
   * as the sentinel itself does, but only when its next INFO round (every 10 s, fixed in Redis)
   * finds the old master still claiming the role. Until then the old master takes writes that its
   * resync drops. True when the old master is a replica now.
   */
  demote(oldPort: number): boolean;
}

/** A master, one replica, and one sentinel (quorum 1) watching them. */
export async function startSentinel(t: TeardownHost): Promise<SentinelSetup> {
  const dir = tempDir(t, 'redis-sentinel');
  const [m, r, s] = [await freePort(), await freePort(), await freePort()];
  start(t, REDIS_SERVER, ['--port', String(m), ...BASE], dir);
  await until(['-p', String(m), 'PING'], /PONG/, 'master');
  start(t, REDIS_SERVER, ['--port', String(r), ...BASE, '--replicaof', '127.0.0.1', String(m)], dir);
  await until(['-p', String(r), 'INFO', 'replication'], /master_link_status:up/, 'replica');
  const conf = join(dir, 'sentinel.conf');
  writeFileSync(
    conf,
    [
      `port ${s}`,
      'bind 127.0.0.1',
      `sentinel monitor mymaster 127.0.0.1 ${m} 1`,
      'sentinel down-after-milliseconds mymaster 1000',
      'sentinel failover-timeout mymaster 3000',
      '',
    ].join('\n'),
  );
  start(t, 'redis-sentinel', [conf], dir);
  await until(['-p', String(s), 'SENTINEL', 'replicas', 'mymaster'], new RegExp(String(r)), 'sentinel sees the replica');
  const master = () => Number(/\n?(\d+)\s*$/.exec(cli(['-p', String(s), 'SENTINEL', 'get-master-addr-by-name', 'mymaster']).trim())?.[1]);
  return {
    sentinelPort: s,
    masterName: 'mymaster',
    master,
    demote(oldPort) {
      const now = master();
      if (now === oldPort || !Number.isInteger(now)) return false;
      if (/^master/.test(cli(['-p', String(oldPort), 'ROLE'], 1000))) cli(['-p', String(oldPort), 'REPLICAOF', '127.0.0.1', String(now)], 1000);
      return /^slave/.test(cli(['-p', String(oldPort), 'ROLE'], 1000));
    },
  };
}

/** Three masters, no replicas, slots spread by `redis-cli --cluster create`. */
export async function startCluster(t: TeardownHost): Promise<{ nodes: string[] }> {
  const dir = tempDir(t, 'redis-cluster');
  const ports = [await freePort(), await freePort(), await freePort()];
  for (const p of ports) {
    start(t, REDIS_SERVER, ['--port', String(p), ...BASE, '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${p}.conf`, '--cluster-node-timeout', '2000'], dir);
    await until(['-p', String(p), 'PING'], /PONG/, `cluster node ${p}`);
  }
  const nodes = ports.map((p) => `127.0.0.1:${p}`);
  const out = cli(['--cluster', 'create', ...nodes, '--cluster-replicas', '0', '--cluster-yes'], 30_000);
  if (!/All 16384 slots covered/.test(out)) throw new Error(`redis-cli --cluster create failed:\n${out}`);
  for (const p of ports) await until(['-p', String(p), 'CLUSTER', 'INFO'], /cluster_state:ok/, `cluster state on ${p}`);
  return { nodes };
}

/** A rule of 4 takes a minute: small enough to exhaust in a test, shared by the multi-instance store tests. */
export const RULE_OF_FOUR = { limit: 4, windowMs: 60_000 };

/**
 * Two stores on two connections to the same Redis: two gateway instances. The connection pool
 * shares one connection per distinct config, so the two differ by 1 ms of connect timeout.
 */
export async function twoInstances<S extends { readonly ready: Promise<unknown> }>(make: (config: RedisStoreConfig) => S, config: RedisStoreConfig): Promise<[S, S]> {
  const a = make({ ...config, connectTimeoutMs: 1000 });
  const b = make({ ...config, connectTimeoutMs: 1001 });
  await Promise.all([a.ready, b.ready]);
  return [a, b];
}

/** Takes alternate between the instances; how many were allowed (the limit holds across both). */
export async function allowedAcross(stores: readonly RedisStore[], key: string, calls = 10): Promise<number> {
  let allowed = 0;
  for (let i = 0; i < calls; i++) {
    const instance = stores[i % stores.length];
    if (instance !== undefined && (await instance.take(key, RULE_OF_FOUR)).allowed) allowed++;
  }
  return allowed;
}
