/**
 * The gateway whose log reader goes away (N1): stdout and stderr on one pipe, as `2>&1 | head`
 * or a log shipper that exits gives it. A write to a pipe without a reader fails (EPIPE); the
 * banner's write on stderr used to be an uncaught exception, whose exit hook (pino's sync flush of
 * stdout) then retried the failing write forever: no answer, SIGTERM unheard, only SIGKILL. The
 * gateway must go on serving, count what it could not write, and stop on SIGTERM.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { childEnv, CLI, ensureBuilt, nodeCommand, PROJECT_ROOT, request, sleep, tempDir } from '../helpers/servers.js';
import { until, within } from '../helpers/wait.js';

ensureBuilt();

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

// parity: the log destination is the process's (src/ops/log-destination.ts), the same whatever engine serves
t.test('stdout and stderr on one pipe whose reader is gone: serves, counts, stops on SIGTERM', async (t) => {
  const dir = tempDir(t, 'stdio-pipe');
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, 'version: 1\n');
  const port = await freePort();
  const adminPort = await freePort();
  const [command, args] = nodeCommand([CLI, 'serve', '--policy', policy, '--port', String(port), '--admin-port', String(adminPort), '--ephemeral-key']);
  // sh makes fd 2 a copy of fd 1 (one pipe), then becomes the command (same pid: signals reach node).
  const child = spawn('sh', ['-c', 'exec "$@" 2>&1', 'sh', command, ...args], {
    cwd: PROJECT_ROOT,
    env: childEnv({ LOG_LEVEL: 'info' }),
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  // The reader goes away before the gateway writes anything: every write of it fails.
  child.stdout.destroy();

  const answers = async (): Promise<boolean> => {
    if (child.exitCode !== null || child.signalCode !== null) return false;
    const r = await within(request(`http://127.0.0.1:${port}/v1/pets`).catch(() => undefined), 2000, undefined);
    return r?.status === 401;
  };
  await until('the gateway answers', answers, 15_000);
  await sleep(500); // the banner and the first log lines were written (and failed) by now
  t.ok(await answers(), 'still serving after its writes to stdout and stderr failed');
  t.equal(child.exitCode, null, 'the process is alive');
  const metrics = await within(request(`http://127.0.0.1:${adminPort}/metrics`).catch(() => undefined), 2000, undefined);
  const dropped = /^petstore_gateway_log_dropped_lines_total (\d+)/m.exec(metrics?.body ?? '');
  t.ok(dropped !== null && Number(dropped[1]) > 0, `the lines it could not write are counted (${dropped?.[0] ?? 'no metric'})`);

  child.kill('SIGTERM');
  const end = await within(exited, 8000, 'still running 8 s after SIGTERM');
  t.equal(end, 0, 'SIGTERM stops it with code 0');
});

// parity: the exit flush is the logger's, before and outside any engine
t.test('an exit with lines pending on a stdout without reader ends (sonic-boom flushSync bounded)', async (t) => {
  // Two lines: the first is an asynchronous write in flight, the second waits in the destination;
  // process.exit then has pino's exit hook write it synchronously to the pipe without reader.
  const script = [
    `import { processLogger } from ${JSON.stringify(join(PROJECT_ROOT, 'dist', 'ops', 'log-destination.js'))};`,
    `const log = processLogger({ level: 'info' });`,
    `log.info('one');`,
    `log.info('two');`,
    `process.exit(3);`,
  ].join('\n');
  const child = spawn(...nodeCommand(['--input-type=module', '-e', script]), { cwd: PROJECT_ROOT, env: childEnv(), stdio: ['ignore', 'pipe', 'ignore'] });
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  child.stdout.destroy();
  t.equal(await within(exited, 8000, 'still running 8 s after process.exit(3)'), 3, 'exits with its own code');
});
