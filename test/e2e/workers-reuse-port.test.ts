/**
 * `serve --workers N` where `server.listen` takes `reusePort` (Node 22.12 / 23.1 and later, Linux):
 * each worker binds the port itself, so the kernel holds one listening socket per worker and
 * balances new connections between them; no primary is in the connection path. On a Node without
 * it the workers share node:cluster's socket (cli.test.ts covers that path and the supervision).
 */
import t from 'tap';
import { readFileSync } from 'node:fs';
import { reusePortSupported } from '../../src/cli/supervisor.js';
import { bearer, ENGINES, ensureBuilt, request, spawnCliUntil } from '../helpers/servers.js';
import { within } from '../helpers/wait.js';

// parity: a pure function of the Node version and platform, no engine involved
t.test('reusePortSupported: Linux, Node 22.12+, 23.1+ and 24+', async (t) => {
  const cases: Array<[string, string, boolean]> = [
    ['20.20.2', 'linux', false],
    ['22.11.0', 'linux', false],
    ['22.12.0', 'linux', true],
    ['23.0.0', 'linux', false],
    ['23.1.0', 'linux', true],
    ['24.21.0', 'linux', true],
    ['24.21.0', 'darwin', false],
    ['24.21.0', 'win32', false],
  ];
  for (const [version, platform, expected] of cases) t.equal(reusePortSupported(version, platform), expected, `${version} on ${platform}`);
});

/** Listening TCP sockets on `port` (IPv4), from the kernel's own table: one per bound socket. */
function listeningSockets(port: number): number {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  return readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => f[1]?.endsWith(`:${hexPort}`) === true && f[3] === '0A').length;
}

const skip = reusePortSupported() ? false : `this Node (${process.versions.node} on ${process.platform}) has no reusePort in server.listen`;

// Each engine binds the port its own way (node:http's listen, Fastify's listen), so each is run.
for (const engine of ENGINES) t.test(`serve --workers 2 --engine ${engine} with reusePort: one socket per worker, both serve, SIGTERM stops all`, { skip }, async (t) => {
  ensureBuilt();
  const { handle, match } = await spawnCliUntil(
    t,
    ['serve', '--host', '127.0.0.1', '--port', '0', '--ephemeral-key', '--workers', '2', '--engine', engine],
    new RegExp(`^(?=[\\s\\S]*petstore-gateway listening on (http://127\\.0\\.0\\.1:(\\d+)) \\(upstream: builtin, engine: ${engine}\\) with 2 workers\n)(?=[\\s\\S]*API key for this run \\(kept in memory only\\): (psg_[A-Za-z0-9_-]{43})\n)`),
    { timeoutMs: 60_000, env: { LOG_LEVEL: 'info' } },
  );
  const [, url, port, key] = match as unknown as [string, string, string, string];
  t.match(handle.output().stdout, /"msg":"each worker listens itself \(reusePort\)/, 'the primary says how the workers listen');
  // node:cluster's shared socket is one listening socket (the primary's); reusePort is one per worker.
  t.equal(listeningSockets(Number(port)), 2, 'two listening sockets on the port, one per worker');

  // Each request on its own connection (request() uses no agent), so the kernel places each anew:
  // 40 connections all on one of two sockets would have odds of 2^-39.
  const statuses: number[] = [];
  for (let i = 0; i < 40; i++) statuses.push((await request(`${url}/v1/pets`, { headers: bearer(key) })).status);
  t.strictSame(statuses, Array(40).fill(200), 'every request is served');
  const accessPids = new Set(
    handle
      .output()
      .stdout.split('\n')
      .filter((l) => l.includes('"operation":"listPets"'))
      .map((l) => (JSON.parse(l) as { pid: number }).pid),
  );
  t.equal(accessPids.size, 2, `both workers served connections (access lines from pids ${[...accessPids].join(', ')})`);
  t.notOk(accessPids.has(handle.child.pid ?? -1), 'the primary served none');

  handle.child.kill('SIGTERM');
  // The primary gives its workers DEFAULT_LIMITS' stop timeout (drainDelayMs + shutdownGraceMs +
  // 5 s: 15 s here) and then exits anyway, so the bound is above it: a stuck worker shows as the
  // primary's "still running" line below, and a slow machine does not race the primary's own timer.
  const exit = await within(handle.exited, 25_000, 'timeout' as const);
  const { stdout, stderr } = handle.output();
  const diagnostics = { stdout: stdout.split('\n').slice(-30).join('\n'), stderr: stderr.split('\n').slice(-10).join('\n') };
  t.not(exit, 'timeout', 'the primary stops on SIGTERM', diagnostics);
  if (exit !== 'timeout') t.equal(exit.code, 0, 'and exits 0 once its workers have', diagnostics);
  t.notMatch(stdout, /workers still running after the stop timeout/, 'every worker stopped by itself, before the primary\'s stop timeout', diagnostics);
  t.equal(listeningSockets(Number(port)), 0, 'no socket is left listening');
});
