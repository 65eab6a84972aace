/**
 * The built CLI with TLS: `check` validates the certificate files (pair, expiry, days left),
 * `serve` refuses unusable files, warns near expiry, exports the expiry gauge, and SIGHUP rotates
 * the certificate: new connections get the new one, an established HTTP/2 session keeps working,
 * and an unusable pair is refused with the old certificate kept.
 */
import t from 'tap';
import { copyFileSync, renameSync, writeFileSync } from 'node:fs';
import { connect as h2connect, type ClientHttp2Session } from 'node:http2';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import { h2Request, httpsRequest, makeTestPki, type CertFiles } from '../helpers/certs.js';
import { parseExposition, value } from '../helpers/prom.js';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { ENGINES, ensureBuilt, request, runCli, spawnCliUntil, testKey, waitFor, logEntries, type LogEntry } from '../helpers/servers.js';
import { within } from '../helpers/wait.js';

ensureBuilt();
const pki = makeTestPki(t);
const KEY = testKey();
const env = { PETSTORE_API_KEYS: KEY, LOG_LEVEL: 'info' };

function policyFile(name: string, pair: CertFiles, server: Record<string, unknown> = {}): string {
  const file = join(pki.dir, `${name}.yaml`);
  const text = { version: 1, upstream: { url: 'builtin' }, server: { tls: { certFile: pair.cert, keyFile: pair.key }, ...server }, policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS' } } };
  writeFileSync(file, JSON.stringify(text));
  return file;
}

function fingerprint(file: string): string {
  return new X509Certificate(pki.read(file)).fingerprint256;
}

/** The fingerprint of the certificate a new TLS connection to `port` is given. */
function servedFingerprint(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket: TLSSocket = tlsConnect({ host: '127.0.0.1', port, ca: pki.read(pki.ca), ALPNProtocols: ['http/1.1'] }, () => {
      resolve(socket.getPeerX509Certificate()?.fingerprint256 ?? '');
      socket.destroy();
    });
    socket.setTimeout(5000, () => socket.destroy(new Error('timed out')));
    socket.on('error', reject);
  });
}

const READY = /petstore-gateway listening on https:\/\/127\.0\.0\.1:(\d+) /;

// parity: the CLI's file checks and reload act on the listening server that createNodeServer makes for every engine (tls.test.ts runs each engine)
t.test('check: a valid pair with its expiry; a mismatched, expired or missing one refused', async (t) => {
  const ok = await runCli(t, ['check', policyFile('check-ok', pki.server)], { env });
  t.equal(ok.code, 0, ok.stdout + ok.stderr);
  t.match(ok.stdout, /tls .*server\.pem: CN=server \(IP Address:127\.0\.0\.1, DNS:localhost\), expires \d{4}-\d\d-\d\dT[\d:.]+Z, (29|30) days left/);

  const mismatched = await runCli(t, ['check', policyFile('check-mismatch', { cert: pki.server.cert, key: pki.server2.key })], { env });
  t.equal(mismatched.code, 78);
  t.match(mismatched.stdout, /\$\.server\.tls: keyFile .* is not the key of the certificate in .*server\.pem \(the pair does not match\)/);

  const expired = await runCli(t, ['check', policyFile('check-expired', pki.expired)], { env });
  t.equal(expired.code, 78);
  t.match(expired.stdout, /\$\.server\.tls: certFile .*expired\.pem expired on 2020-02-01/);

  const missing = await runCli(t, ['check', policyFile('check-missing', { cert: join(pki.dir, 'nope.pem'), key: pki.server.key })], { env });
  t.equal(missing.code, 78);
  t.match(missing.stdout, /cannot be read \(ENOENT\)/);

  const upstream = join(pki.dir, 'check-upstream.yaml');
  writeFileSync(upstream, JSON.stringify({ version: 1, upstream: { url: 'https://127.0.0.1:1/v1', tls: { caFile: join(pki.dir, 'nope.pem') } }, policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS' } } }));
  const up = await runCli(t, ['check', upstream], { env });
  t.equal(up.code, 78);
  t.match(up.stdout, /\$\.upstream\.tls: upstream\.tls\.caFile .*nope\.pem cannot be read/);
});

// parity: the CLI's file checks and reload act on the listening server that createNodeServer makes for every engine (tls.test.ts runs each engine)
t.test('serve: refuses an unusable pair before listening', async (t) => {
  const r = await runCli(t, ['serve', '--policy', policyFile('serve-expired', pki.expired), '--port', '0'], { env });
  t.equal(r.code, 78);
  t.match(r.stderr, /expired on 2020-02-01/);
});

// parity: the CLI's file checks and reload act on the listening server that createNodeServer makes for every engine (tls.test.ts runs each engine)
t.test('serve: warns when the certificate expires within 14 days', async (t) => {
  const { handle } = await spawnCliUntil(t, ['serve', '--policy', policyFile('serve-soon', pki.soon), '--port', '0'], READY, { env, timeoutMs: 30_000 });
  const warning = await waitFor('the expiry warning', () => logEntries(handle).find((e) => e.msg === 'the TLS certificate expires in less than 14 days'), 5000);
  t.match(warning, { level: 40, daysLeft: 4 });
});

// parity: the CLI's file checks and reload act on the listening server that createNodeServer makes for every engine (tls.test.ts runs each engine)
t.test('SIGHUP rotates the certificate; a bad pair is refused and the old one kept', async (t) => {
  const live: CertFiles = { cert: join(pki.dir, 'live.pem'), key: join(pki.dir, 'live.key') };
  copyFileSync(pki.server.cert, live.cert);
  copyFileSync(pki.server.key, live.key);
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', policyFile('rotate', live), '--port', '0'], READY, { env, timeoutMs: 30_000 });
  const port = Number(match[1]);
  const origin = `https://127.0.0.1:${port}`;
  t.equal(await servedFingerprint(port), fingerprint(pki.server.cert), 'the first certificate');

  // The expiry gauge, on the admin listener.
  const admin = await waitFor('the admin URL', () => logEntries(handle).find((e) => typeof e.url === 'string' && String(e.msg).startsWith('admin listening'))?.url as string | undefined);
  const metrics = await request(`${admin}/metrics`);
  const notAfter = Math.floor(Date.parse(new X509Certificate(pki.read(pki.server.cert)).validTo) / 1000);
  t.match(metrics.body, new RegExp(`^petstore_gateway_tls_certificate_expiry_seconds ${notAfter}$`, 'm'), 'the gauge carries notAfter in Unix seconds');

  // An HTTP/2 session opened before the rotation.
  const session: ClientHttp2Session = h2connect(origin, { ca: pki.read(pki.ca) });
  t.teardown(() => session.destroy());
  session.on('error', () => {});
  const get = (s: ClientHttp2Session) =>
    new Promise<number>((resolve, reject) => {
      const st = s.request({ ':path': '/v1/pets', authorization: `Bearer ${KEY}` });
      st.on('response', (h) => resolve(Number(h[':status'])));
      st.on('error', reject);
      st.resume();
    });
  t.equal(await get(session), 200);

  const reload = async (): Promise<LogEntry> => {
    const since = handle.output().stdout.length;
    handle.child.kill('SIGHUP');
    return waitFor('a certificate reload outcome', () => logEntries(handle, since).find((e) => String(e.msg).startsWith('TLS certificate reload')), 5000);
  };
  // A TLS 1.2 session from before the rotation: its ticket still resumes after it.
  const ticket = await new Promise<Buffer>((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ca: pki.read(pki.ca), maxVersion: 'TLSv1.2' }, () => {
      const s = socket.getSession();
      socket.destroy();
      if (s === undefined) reject(new Error('no session'));
      else resolve(s);
    });
    socket.on('error', reject);
  });
  copyFileSync(pki.server2.cert, live.cert);
  copyFileSync(pki.server2.key, live.key);
  t.match(await reload(), { msg: 'TLS certificate reloaded', reason: 'SIGHUP' });
  const resumed = await new Promise<boolean>((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ca: pki.read(pki.ca), maxVersion: 'TLSv1.2', session: ticket }, () => {
      resolve(socket.isSessionReused());
      socket.destroy();
    });
    socket.on('error', reject);
  });
  t.ok(resumed, 'a session ticket issued before the reload resumes after it');
  t.equal(await servedFingerprint(port), fingerprint(pki.server2.cert), 'a new connection gets the new certificate');
  t.equal(await get(session), 200, 'the established session keeps working');
  const rotated = await request(`${admin}/metrics`);
  const notAfter2 = Math.floor(Date.parse(new X509Certificate(pki.read(pki.server2.cert)).validTo) / 1000);
  t.match(rotated.body, new RegExp(`^petstore_gateway_tls_certificate_expiry_seconds ${notAfter2}$`, 'm'), 'the gauge follows the rotation');

  // A key that is not the certificate's: refused, the second certificate stays.
  copyFileSync(pki.server.key, live.key);
  const refused = await reload();
  t.match(refused, { msg: 'TLS certificate reload refused; the previous certificate stays', problem: /does not match/ });
  t.equal(await servedFingerprint(port), fingerprint(pki.server2.cert), 'still the second certificate');
  const fresh = h2connect(origin, { ca: pki.read(pki.ca) });
  t.teardown(() => fresh.destroy());
  t.equal(await get(fresh), 200, 'new connections are served');
  t.notMatch(handle.output().stdout, /BEGIN|PRIVATE KEY/, 'no key material in the log');
});

/** One HTTP/1.1 GET over a TLS connection: whether the session was resumed, the status line, the session to resume later. */
function tlsGet(port: number, options: { maxVersion: 'TLSv1.2' | 'TLSv1.3'; session?: Buffer; cert?: CertFiles }): Promise<{ reused: boolean; status: string; session?: Buffer; error?: string }> {
  return new Promise((resolve) => {
    const client = options.cert === undefined ? {} : { cert: pki.read(options.cert.cert), key: pki.read(options.cert.key) };
    const socket = tlsConnect({ host: '127.0.0.1', port, ca: pki.read(pki.ca), servername: 'localhost', ALPNProtocols: ['http/1.1'], maxVersion: options.maxVersion, session: options.session, ...client });
    let reused = false;
    let got = '';
    let session: Buffer | undefined;
    let error: string | undefined;
    socket.on('session', (s: Buffer) => (session = s));
    socket.on('secureConnect', () => {
      reused = socket.isSessionReused();
      socket.write(`GET /v1/pets HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${KEY}\r\nConnection: close\r\n\r\n`);
    });
    socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
    socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    socket.setTimeout(5000, () => socket.destroy(new Error('timed out')));
    // TLS 1.3 tickets come after the handshake: a moment after the close, they have.
    socket.on('close', () => setTimeout(() => resolve({ reused, status: got.split('\r\n')[0] ?? '', session, error }), 50));
  });
}

// parity: the CLI's reload acts on the listening server that createNodeServer makes for every engine (tls.test.ts runs each engine)
t.test('SIGHUP with a new clientCaFile: a session saved under the old CA no longer resumes (TLS 1.2 and 1.3)', async (t) => {
  const clientCa = join(pki.dir, 'live-client-ca.pem');
  copyFileSync(pki.ca, clientCa);
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', policyFile('client-ca', pki.server, { tls: { certFile: pki.server.cert, keyFile: pki.server.key, clientCaFile: clientCa } }), '--port', '0'], READY, { env, timeoutMs: 30_000 });
  const port = Number(match[1]);
  const reload = async (): Promise<LogEntry> => {
    const since = handle.output().stdout.length;
    handle.child.kill('SIGHUP');
    return waitFor('a certificate reload outcome', () => logEntries(handle, since).find((e) => String(e.msg).startsWith('TLS certificate reload')), 5000);
  };
  const versions = ['TLSv1.2', 'TLSv1.3'] as const;
  const saved = new Map<string, Buffer>();
  for (const maxVersion of versions) {
    const first = await tlsGet(port, { maxVersion, cert: pki.client });
    t.equal(first.status, 'HTTP/1.1 200 OK', `${maxVersion}: served with the client certificate`);
    saved.set(maxVersion, first.session!);
  }
  // A reload that leaves the client CA as it is keeps the sessions (as for a server certificate rotation).
  t.match(await reload(), { msg: 'TLS certificate reloaded' });
  for (const maxVersion of versions) {
    const again = await tlsGet(port, { maxVersion, session: saved.get(maxVersion) });
    t.match(again, { reused: true, status: 'HTTP/1.1 200 OK' }, `${maxVersion}: the same client CA, the session resumes`);
    if (again.session !== undefined) saved.set(maxVersion, again.session);
  }
  // The client CA replaced: the old client certificate is refused, and so is a session of it.
  copyFileSync(join(pki.dir, 'foreign-ca.pem'), clientCa);
  t.match(await reload(), { msg: 'TLS certificate reloaded' });
  for (const maxVersion of versions) {
    const fresh = await tlsGet(port, { maxVersion, cert: pki.client });
    t.not(fresh.status, 'HTTP/1.1 200 OK', `${maxVersion}: a new handshake with the old certificate is refused`);
    const resumed = await tlsGet(port, { maxVersion, session: saved.get(maxVersion) });
    t.equal(resumed.reused, false, `${maxVersion}: the session saved under the old CA is not resumed`);
    t.not(resumed.status, 'HTTP/1.1 200 OK', `${maxVersion}: and without a certificate nothing is served (${resumed.error ?? resumed.status})`);
  }
  const foreign = await tlsGet(port, { maxVersion: 'TLSv1.3', cert: pki.foreignClient });
  t.equal(foreign.status, 'HTTP/1.1 200 OK', 'a certificate of the new CA is served');
});

// parity: the CLI's file watch and reload act on the listening server that createNodeServer makes for every engine (tls.test.ts runs each engine)
t.test('--watch: a certificate file replaced is reloaded without a signal', async (t) => {
  const live: CertFiles = { cert: join(pki.dir, 'watched.pem'), key: join(pki.dir, 'watched.key') };
  copyFileSync(pki.server.cert, live.cert);
  copyFileSync(pki.server.key, live.key);
  const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', policyFile('watched', live), '--port', '0', '--watch'], READY, { env, timeoutMs: 30_000 });
  const port = Number(match[1]);
  const since = handle.output().stdout.length;
  // Key first, then certificate (renamed into place): a reload in between is refused, the last one takes.
  copyFileSync(pki.server2.key, live.key);
  copyFileSync(pki.server2.cert, `${live.cert}.tmp`);
  renameSync(`${live.cert}.tmp`, live.cert);
  await waitFor('a reload logged after both files changed', () => logEntries(handle, since).find((e) => e.msg === 'TLS certificate reloaded' && e.notAfter === new Date(Date.parse(new X509Certificate(pki.read(pki.server2.cert)).validTo)).toISOString()), 5000);
  const reloaded = logEntries(handle, since).filter((e) => e.msg === 'TLS certificate reloaded');
  t.ok(reloaded.length >= 1, 'a reload after the files changed');
  t.match(reloaded.at(-1), { reason: 'certificate file changed' });
  t.equal(await servedFingerprint(port), fingerprint(pki.server2.cert), 'new connections get the new certificate');
});

// parity: the start-up probe is the CLI's, run once whatever the engine
t.test('the start-up probe trusts upstream.tls.caFile as the transports do', async (t) => {
  const upstream = createHttpsServer({ cert: pki.read(pki.server.cert), key: pki.read(pki.server.key) }, (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('[]');
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => upstream.close(() => r())));
  const url = `https://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;
  const file = join(pki.dir, 'probe.json');
  writeFileSync(file, JSON.stringify({ version: 1, upstream: { url, tls: { caFile: pki.ca } }, policies: { auth: { keys: [], keysFromEnv: 'PETSTORE_API_KEYS' } } }));
  const { handle } = await spawnCliUntil(t, ['serve', '--policy', file, '--port', '0'], /petstore-gateway listening on (http:\/\/\S+) /, { env, timeoutMs: 30_000 });
  const probe = await waitFor('the probe line', () => logEntries(handle).find((e) => String(e.msg).startsWith('upstream probe')), 10_000);
  t.match(probe, { verdict: 'ok', status: 200 }, String(probe.msg));
});

// One gateway per engine for both: the protocol counts first (they must be its only requests),
// then the stop, which ends it.
for (const engine of ENGINES) {
  t.test(`serve over TLS (${engine}): the protocol in /metrics, then SIGTERM with an idle HTTP/2 session`, async (t) => {
    const { handle, match } = await spawnCliUntil(t, ['serve', '--policy', policyFile(`tls-${engine}`, pki.server, { shutdownGraceMs: 20_000 }), '--port', '0', '--engine', engine], READY, { env, timeoutMs: 30_000 });
    await t.test('/metrics records the protocol: network_protocol_version 1.1 and 2', async (t) => {
      const origin = `https://127.0.0.1:${match[1]}`;
      const admin = await waitFor('the admin URL', () => logEntries(handle).find((e) => typeof e.url === 'string' && String(e.msg).startsWith('admin listening'))?.url as string | undefined, 10_000);
      const ca = pki.read(pki.ca);
      const headers = { authorization: `Bearer ${KEY}` };
      const h1 = [await httpsRequest(`${origin}/v1/pets`, { ca, headers }), await httpsRequest(`${origin}/v1/pets`, { ca })];
      const h2 = [await h2Request(origin, '/v1/pets', { ca, headers }), await h2Request(origin, '/v1/pets', { ca, headers }), await h2Request(origin, '/v1/pets', { ca })];
      t.same([...h1, ...h2].map((r) => [r.alpn, r.status]), [[false, 200], [false, 401], ['h2', 200], ['h2', 200], ['h2', 401]], 'the requests, over the protocol meant');
      const series = (status: string, protocol: string) => ({ http_request_method: 'GET', http_route: '/v1/pets', http_response_status_code: status, network_protocol_version: protocol });
      // The exchange records a request once its answer is written; poll (bounded) until all five are counted.
      const counted = (x: ReturnType<typeof parseExposition>) => x.samples.filter((m) => m.name === 'http_server_request_duration_seconds_count').reduce((n, m) => n + m.value, 0);
      let s = parseExposition((await request(`${admin}/metrics`)).body);
      for (let i = 0; i < 50 && counted(s) < 5; i++) {
        await new Promise((r) => setTimeout(r, 100));
        s = parseExposition((await request(`${admin}/metrics`)).body);
      }
      t.equal(value(s, 'http_server_request_duration_seconds_count', series('200', '1.1')), 1, 'HTTP/1.1 200: 1');
      t.equal(value(s, 'http_server_request_duration_seconds_count', series('401', '1.1')), 1, 'HTTP/1.1 401: 1');
      t.equal(value(s, 'http_server_request_duration_seconds_count', series('200', '2')), 2, 'HTTP/2 200: 2');
      t.equal(value(s, 'http_server_request_duration_seconds_count', series('401', '2')), 1, 'HTTP/2 401: 1');
      const versions = new Set(s.samples.filter((x) => x.name === 'http_server_request_duration_seconds_count').map((x) => x.labels.network_protocol_version));
      t.same([...versions].sort(), ['1.1', '2'], 'no other protocol value');
    });
    await t.test('SIGTERM with an idle HTTP/2 session open: the session is told to go away and the process exits', async (t) => {
      const session = h2connect(`https://127.0.0.1:${match[1]}`, { ca: pki.read(pki.ca) });
      t.teardown(() => session.destroy());
      session.on('error', () => {});
      await new Promise<void>((resolve, reject) => {
        const st = session.request({ ':path': '/v1/pets', authorization: `Bearer ${KEY}` });
        st.on('response', () => resolve());
        st.on('error', reject);
        st.resume();
      });
      let goaway = false;
      session.on('goaway', () => (goaway = true));
      const since = Date.now();
      handle.child.kill('SIGTERM');
      const exit = await within(handle.exited, 15_000, undefined);
      t.match(exit, { code: 0 }, 'exited 0');
      t.ok(Date.now() - since < 15_000, `well before the 20 s grace (${Date.now() - since} ms)`);
      t.ok(goaway || session.closed || session.destroyed, 'the session was closed by the server');
    });
  });
}

// parity: the cluster supervisor and its metrics aggregation are the CLI's, the same for every engine
t.test('--workers 2: the expiry gauge is aggregated as the soonest expiry, not a sum', async (t) => {
  const { handle } = await spawnCliUntil(t, ['serve', '--policy', policyFile('workers', pki.server), '--port', '0', '--workers', '2'], READY, { env, timeoutMs: 60_000 });
  const admin = await waitFor('the admin URL', () => logEntries(handle).find((e) => typeof e.url === 'string' && String(e.msg).startsWith('admin listening'))?.url as string | undefined, 10_000);
  const notAfter = Math.floor(Date.parse(new X509Certificate(pki.read(pki.server.cert)).validTo) / 1000);
  const line = new RegExp(`^petstore_gateway_tls_certificate_expiry_seconds ${notAfter}$`, 'm');
  // Both workers report once they are up; the aggregate is the same value whatever their number.
  let text = '';
  for (let i = 0; i < 50 && !line.test(text); i++) {
    text = (await request(`${admin}/metrics`)).body;
    if (!line.test(text)) await new Promise((r) => setTimeout(r, 100));
  }
  t.match(text, line);
});
