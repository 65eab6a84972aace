/**
 * `petstore-gateway health`, the image's HEALTHCHECK: it reads the checked process's command line
 * and finds where that process listens (serve: its admin listener, or its API port when the admin
 * listener is off; backend: its port), so one healthcheck fits every way the image runs (D14:
 * `docker run … backend` was always unhealthy against a hard-wired :9464).
 */
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { checkHealth, healthTarget } from '../../src/cli/health.js';
import { closedPort, ensureBuilt, PROJECT_ROOT, runCli, spawnCliUntil, tempDir } from '../helpers/servers.js';
import { within } from '../helpers/wait.js';

ensureBuilt();
const dir = tempDir(t, 'health');

// parity: `health` is the CLI's own check of a process; the engine a gateway runs does not change where it listens.
t.test('health finds the port from the process command line: backend on 0.0.0.0, serve with --admin-port; 1 once it is gone', async (t) => {
  const backendPort = await closedPort();
  const backend = await spawnCliUntil(t, ['backend', '--host', '0.0.0.0', '--port', String(backendPort)], /listening on /, { timeoutMs: 30_000 });
  const adminPort = await closedPort();
  const gateway = await spawnCliUntil(t, ['serve', '--ephemeral-key', '--port', '0', '--admin-port', String(adminPort)], /petstore-gateway listening on /, { timeoutMs: 30_000, stream: 'stderr' });
  const [ofBackend, ofGateway] = await Promise.all([
    runCli(t, ['health', '--pid', String(backend.handle.child.pid)], { timeoutMs: 30_000 }),
    runCli(t, ['health', '--pid', String(gateway.handle.child.pid)], { timeoutMs: 30_000 }),
  ]);
  t.equal(ofBackend.code, 0, `the backend on 0.0.0.0:${backendPort} is healthy (${ofBackend.stderr.trim()})`);
  t.equal(ofGateway.code, 0, `the gateway's admin listener on :${adminPort} is healthy (${ofGateway.stderr.trim()})`);
  backend.handle.child.kill('SIGTERM');
  await within(backend.handle.exited, 10_000, 'timeout' as const);
  gateway.handle.child.kill('SIGTERM');
  await within(gateway.handle.exited, 10_000, 'timeout' as const);
  const gone = await runCli(t, ['health', '--url', `http://127.0.0.1:${backendPort}/v1/pets?limit=1`], { timeoutMs: 30_000 });
  t.equal(gone.code, 1, 'nothing answers: unhealthy');
  t.match(gone.stderr, /^petstore-gateway health: GET http:\/\/127\.0\.0\.1:\d+\/v1\/pets\?limit=1 got no answer \(ECONNREFUSED\)\n$/);
  const usage = await runCli(t, ['health', '--pid', 'one'], { timeoutMs: 30_000 });
  t.equal(usage.code, 2, 'a bad --pid is a usage error');
});

// parity: the health target is worked out from a command line and a policy, no engine involved.
t.test('the target of each command line, as the process itself worked it out', async (t) => {
  const env = {};
  const at = (argv: string[], cwd = PROJECT_ROOT) => healthTarget(['node', '/app/dist/cli/main.js', ...argv], cwd, env, PROJECT_ROOT);
  t.strictSame(at(['serve', '--host', '0.0.0.0', '--port', '8080', '--admin-host', '0.0.0.0', '--admin-port', '9464']), { kind: 'http', url: 'http://127.0.0.1:9464/healthz' }, "the image's default command");
  t.strictSame(at(['backend', '--host', '0.0.0.0']), { kind: 'http', url: 'http://127.0.0.1:8081/v1/pets?limit=1' }, 'backend: its default port');
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, 'version: 1\nserver: { port: 8443, admin: { host: "::", port: 9999 } }\n');
  t.strictSame(at(['serve', '--policy', 'policy.yaml', '--workers', '2'], dir), { kind: 'http', url: 'http://[::1]:9999/healthz' }, "the policy's server.admin, the file relative to the process's directory");
  writeFileSync(policy, 'version: 1\nserver: { host: 0.0.0.0, port: 8443, admin: null }\n');
  t.strictSame(at(['serve', '--policy', policy]), { kind: 'tcp', host: '127.0.0.1', port: 8443 }, 'admin listener off: the API port');
  t.match(at(['serve', '--policy', policy, '--port', '0']), /port 0/, 'port 0: said, not guessed');
  t.match(at(['keys', 'list']), /not a petstore-gateway serve or backend process/);

  const listener = createServer((s) => s.destroy());
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  const port = (listener.address() as AddressInfo).port;
  t.equal(await checkHealth({ kind: 'tcp', host: '127.0.0.1', port }), 0, 'a TCP listener: healthy');
  await new Promise<void>((r) => listener.close(() => r()));
  t.equal(await checkHealth({ kind: 'tcp', host: '127.0.0.1', port }), 1, 'closed: unhealthy');
});
