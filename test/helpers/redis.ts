/**
 * A real redis-server for tests (Debian's package; .ci/run installs it when missing): on a free
 * loopback port, without persistence, stopped at teardown. `kill()` makes it vanish as a crash
 * would (SIGKILL); `restart()` brings it back, empty, on the same port ("Redis returns");
 * `pause()` freezes it (SIGSTOP) so commands get no answer at all.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, connect } from 'node:net';
import { sleep } from './wait.js';

/** On PATH (Debian installs /usr/bin/redis-server); REDIS_SERVER names another binary. */
export const REDIS_SERVER = process.env.REDIS_SERVER ?? 'redis-server';

const HOW_TO_GET_IT = `install it (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) or set REDIS_SERVER to its path`;

/** Whether `binary` runs (`--version`, bounded). */
function redisRuns(binary: string): boolean {
  const r = spawnSync(binary, ['--version'], { stdio: 'ignore', timeout: 5000 });
  return r.error === undefined && r.status === 0;
}

/**
 * Why a test that needs redis-server is skipped (one line: what is missing and how to get it), or
 * false when it runs. With CI=true a missing redis-server is never skipped: those tests fail (CI
 * must run them), with the same advice from `startRedis`.
 */
export function redisSkipReason(binary: string, env: NodeJS.ProcessEnv): string | false {
  return env.CI === 'true' || redisRuns(binary) ? false : `needs redis-server, not found as '${binary}': ${HOW_TO_GET_IT}`;
}

/** For a test that needs redis-server, as its `skip` option; the rest of the suite runs without it. */
export const REDIS_SKIP: string | false = redisSkipReason(REDIS_SERVER, process.env);

export interface TestRedis {
  readonly url: string;
  readonly port: number;
  /** Stops it (SIGTERM) and waits for the exit. Idempotent. */
  stop(): Promise<void>;
  /** Kills it (SIGKILL), as a crash, and waits for the exit. */
  kill(): Promise<void>;
  /** Starts it again on the same port (empty: no persistence), once it answers PING. */
  restart(): Promise<void>;
  /** Freezes it (SIGSTOP): connections stay open, nothing answers (a hung Redis). */
  pause(): void;
  /** Thaws it (SIGCONT). */
  resume(): void;
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

/** One PING over a raw socket: true when the answer is +PONG. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => done(d.toString('latin1').startsWith('+PONG')));
  });
}

/** A spawned server and the error of spawning it, if any (ENOENT: not installed). */
interface Spawned {
  readonly child: ChildProcess;
  error: Error | undefined;
}

function spawnServer(port: number, binary: string): Spawned {
  const child = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const spawned: Spawned = { child, error: undefined };
  // Without a listener a failed spawn is an uncaught exception that fails the whole file.
  child.on('error', (err) => (spawned.error = err));
  child.stderr?.resume();
  return spawned;
}

async function waitForPing(port: number, spawned: Spawned, binary: string): Promise<void> {
  const { child } = spawned;
  // Bounded: 100 tries of at most ~550 ms; fails early if the server exited or never started.
  for (let i = 0; i < 100; i++) {
    if (spawned.error !== undefined) throw new Error(`cannot start '${binary}' (${(spawned.error as NodeJS.ErrnoException).code ?? spawned.error.message}): ${HOW_TO_GET_IT}`);
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode} on port ${port}`);
    if (await ping(port)) return;
    await sleep(50);
  }
  throw new Error(`redis-server on port ${port} did not answer PING`);
}

async function ended({ child, error }: Spawned, signal: NodeJS.Signals): Promise<void> {
  if (error !== undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exit = once(child, 'exit');
  child.kill('SIGCONT'); // a paused server would not act on SIGTERM
  child.kill(signal);
  await exit;
}

/** Starts redis-server (`binary`: REDIS_SERVER by default); register `stop` with t.teardown. */
export async function startRedis(binary = REDIS_SERVER): Promise<TestRedis> {
  const port = await freePort();
  let child = spawnServer(port, binary);
  await waitForPing(port, child, binary);
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    stop: () => ended(child, 'SIGTERM'),
    kill: () => ended(child, 'SIGKILL'),
    pause: () => void child.child.kill('SIGSTOP'),
    resume: () => void child.child.kill('SIGCONT'),
    async restart() {
      await ended(child, 'SIGKILL');
      child = spawnServer(port, binary);
      await waitForPing(port, child, binary);
    },
  };
}
