/**
 * The TLS material and failure mapping, without sockets: PEM files read and checked as a pair,
 * upstream.tls's files, and which error codes are TLS failures.
 */
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeTestPki } from '../helpers/certs.js';
import { daysLeft, readCa, readKeyPair, validityProblem } from '../../src/tls/material.js';
import { readUpstreamTls } from '../../src/tls/upstream.js';
import { ListenerTls } from '../../src/tls/listener.js';
import { failureKind, isTlsCode } from '../../src/upstreams/errors.js';
import type { UpstreamConfig } from '../../src/config/types.js';

const pki = makeTestPki(t);

t.test('readKeyPair: a matching pair, with its dates and names', async (t) => {
  const r = readKeyPair(pki.server.cert, pki.server.key);
  t.ok(r.ok);
  if (!r.ok) return;
  t.match(r.value, { subject: 'CN=server', altNames: 'IP Address:127.0.0.1, DNS:localhost' });
  t.equal(daysLeft(r.value.notAfterMs, r.value.notBeforeMs), 30);
  t.equal(validityProblem(r.value, 'cert.pem'), undefined);
});

t.test('readKeyPair: every problem names the file and what is wrong, never key material', async (t) => {
  const notPem = join(pki.dir, 'not.pem');
  writeFileSync(notPem, 'hello');
  const cases: Array<[string, string, RegExp]> = [
    [pki.server.cert, pki.server2.key, /keyFile .*server2\.key is not the key of the certificate in .*server\.pem \(the pair does not match\)/],
    [join(pki.dir, 'missing.pem'), pki.server.key, /certFile .*missing\.pem cannot be read \(ENOENT\)/],
    [pki.server.cert, join(pki.dir, 'missing.key'), /keyFile .*missing\.key cannot be read \(ENOENT\)/],
    [notPem, pki.server.key, /certFile .*not\.pem holds no PEM block/],
    [pki.server.key, pki.server.key, /certFile .*server\.key is not a PEM certificate/],
    [pki.server.cert, pki.server.cert, /keyFile .*server\.pem is not a usable private key/],
  ];
  for (const [cert, key, problem] of cases) {
    const r = readKeyPair(cert, key);
    t.notOk(r.ok);
    if (r.ok) continue;
    t.match(r.problem, problem);
    t.notMatch(r.problem, /BEGIN|PRIVATE/);
  }
});

t.test('an expired certificate is read, and refused by the listener', async (t) => {
  const r = readKeyPair(pki.expired.cert, pki.expired.key);
  t.ok(r.ok, 'the pair itself matches');
  if (r.ok) t.match(validityProblem(r.value, 'x.pem'), /^certFile x\.pem expired on 2020-02-01T00:00:00\.000Z$/);
  const opened = ListenerTls.open({ certFile: pki.expired.cert, keyFile: pki.expired.key, minVersion: 'TLSv1.2', clientCaFile: null });
  t.notOk(opened.ok);
  const ca = ListenerTls.open({ certFile: pki.server.cert, keyFile: pki.server.key, minVersion: 'TLSv1.2', clientCaFile: join(pki.dir, 'none.pem') });
  t.match(ca, { ok: false, problem: /clientCaFile .*none\.pem cannot be read/ });
  t.match(readCa(null, 'caFile'), { ok: true, value: undefined }, 'no CA file: the system store');
});

t.test('readUpstreamTls: http needs nothing; https reads caFile and the client pair', async (t) => {
  // readUpstreamTls reads only url and tls: the rest of an UpstreamConfig is left out.
  const base = { url: 'https://127.0.0.1:8443/v1', tls: { caFile: null, certFile: null, keyFile: null, servername: null } } as unknown as UpstreamConfig;
  t.match(readUpstreamTls({ ...base, url: 'http://127.0.0.1/v1', tls: { ...base.tls, caFile: '/nope' } }), { ok: true, value: undefined }, 'plain http: upstream.tls unused');
  t.match(readUpstreamTls(base), { ok: true, value: { rejectUnauthorized: true, minVersion: 'TLSv1.2' } });
  const full = readUpstreamTls({ ...base, tls: { caFile: pki.ca, certFile: pki.client.cert, keyFile: pki.client.key, servername: 'api.internal' } });
  t.ok(full.ok && full.value?.ca !== undefined && full.value.cert !== undefined && full.value.servername === 'api.internal');
  t.match(readUpstreamTls({ ...base, tls: { ...base.tls, certFile: pki.client.cert } }), { ok: false, problem: /certFile and keyFile go together/ });
  t.match(readUpstreamTls({ ...base, tls: { ...base.tls, certFile: pki.client.cert, keyFile: pki.server.key } }), { ok: false, problem: /^upstream\.tls: keyFile .* does not match\)$/ });
});

t.test('which failures are TLS failures', async (t) => {
  for (const code of ['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'CERT_HAS_EXPIRED', 'ERR_TLS_CERT_ALTNAME_INVALID', 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED', 'ERR_SSL_WRONG_VERSION_NUMBER', 'EPROTO']) {
    t.ok(isTlsCode(code), code);
  }
  for (const code of ['ECONNRESET', 'ECONNREFUSED', 'UND_ERR_SOCKET', 'HPE_INVALID_CONSTANT', 'ERR_HTTP2_STREAM_ERROR']) t.notOk(isTlsCode(code), code);
  const tlsErr = Object.assign(new Error('unable to verify the first certificate'), { code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' });
  // reply-from wraps a transport error in a code of its own, which its table maps first.
  const wrapped = Object.assign(new Error('Bad Gateway', { cause: tlsErr }), { code: 'FST_REPLY_FROM_BAD_GATEWAY' });
  t.equal(failureKind(wrapped, new Map([['FST_REPLY_FROM_BAD_GATEWAY', 'invalid_response']])), 'tls', 'a TLS cause wins over the library code');
  t.equal(failureKind(Object.assign(new Error('x'), { code: 'ECONNRESET' }), new Map()), 'reset');
});
