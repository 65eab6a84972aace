/**
 * The TLS listener's protocols and suites as a standard client sees them: `openssl s_client`
 * (Debian's openssl) against the gateway on every engine. TLS 1.2 with an AEAD suite and TLS 1.3
 * are accepted; TLS 1.0, TLS 1.1, CBC and NULL suites are refused by the server, which proves it
 * with its alert (protocol_version 70, handshake_failure 40; RFC 8446 section 6.2), not by a
 * client that never offered them: the client is told `@SECLEVEL=0` so that it does offer them.
 * 3DES and RC4 are checked too when this openssl can still offer them (OpenSSL 3 builds often
 * cannot); testssl.sh, which speaks them over raw sockets, found them absent (docs/tls.md).
 */
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { makeTestPki, type TestPki } from '../helpers/certs.js';
import { forEachEngine, startGateway } from '../helpers/servers.js';

const pki: TestPki = makeTestPki(t);

/** s_client's output (stdout and stderr) for one handshake, stdin closed so that it ends at once. */
function sClient(port: number, args: string[]): Promise<string> {
  return new Promise((resolve) => {
    const child = spawn('openssl', ['s_client', '-brief', '-connect', `127.0.0.1:${port}`, '-CAfile', pki.ca, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (out += c.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
  });
}

/** Whether this openssl can offer a TLS 1.2 suite at all (else a refusal would prove nothing). */
function canOffer(suite: string): boolean {
  return spawnSync('openssl', ['ciphers', '-s', '-tls1_2', `${suite}:@SECLEVEL=0`], { stdio: 'ignore', timeout: 5000 }).status === 0;
}

const ALERT_PROTOCOL_VERSION = /SSL alert number 70\b/;
const ALERT_HANDSHAKE_FAILURE = /SSL alert number 40\b/;

forEachEngine(t, async (t, engine) => {
  t.test('openssl s_client: TLS 1.2 AEAD and TLS 1.3 accepted; TLS 1.0/1.1, CBC and NULL refused by the server', async (t) => {
    const gw = await startGateway(t, { server: { tls: { certFile: pki.server.cert, keyFile: pki.server.key } } }, { engine });
    const { port } = gw.server.address() as AddressInfo;

    const aead = await sClient(port, ['-tls1_2', '-cipher', 'ECDHE-ECDSA-AES128-GCM-SHA256']);
    t.match(aead, /CONNECTION ESTABLISHED[\s\S]*Protocol version: TLSv1\.2[\s\S]*Ciphersuite: ECDHE-ECDSA-AES128-GCM-SHA256/, 'TLS 1.2 with an AEAD suite');
    t.match(await sClient(port, ['-tls1_3']), /CONNECTION ESTABLISHED[\s\S]*Protocol version: TLSv1\.3/, 'TLS 1.3');

    for (const version of ['-tls1', '-tls1_1']) {
      const out = await sClient(port, [version, '-cipher', 'DEFAULT:@SECLEVEL=0']);
      t.match(out, ALERT_PROTOCOL_VERSION, `${version}: the server answers protocol_version`);
      t.notMatch(out, /CONNECTION ESTABLISHED/, `${version}: no connection`);
    }
    const suites = ['ECDHE-ECDSA-AES128-SHA', 'ECDHE-ECDSA-AES256-SHA384', 'ECDHE-ECDSA-NULL-SHA', 'ECDHE-ECDSA-DES-CBC3-SHA', 'ECDHE-ECDSA-RC4-SHA'];
    for (const suite of suites) {
      if (!canOffer(suite)) {
        t.comment(`${suite}: this openssl cannot offer it, not checked here`);
        continue;
      }
      const out = await sClient(port, ['-tls1_2', '-cipher', `${suite}:@SECLEVEL=0`]);
      t.match(out, ALERT_HANDSHAKE_FAILURE, `${suite}: the server answers handshake_failure`);
      t.notMatch(out, /CONNECTION ESTABLISHED/, `${suite}: no connection`);
    }
  });
});
