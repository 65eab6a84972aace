/**
 * TLS towards the upstream, on every engine: an https upstream verified against `caFile`, mutual
 * TLS with `certFile`/`keyFile`, `servername`; and every failed handshake or verification is
 * 502 upstream_tls_error with the catalogue's message, the reason in the operator log only.
 */
import t from 'tap';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { makeTestPki, type CertFiles, type TestPki } from '../helpers/certs.js';
import { bearer, forEachEngine, JSON_TYPE, listenEngine, policyText, request, testKey, type Engine, type TeardownHost } from '../helpers/servers.js';
import { parsePolicy, formatProblems } from '../../src/config/load.js';
import { createGateway } from '../../src/gateway.js';
import type { ExchangeRecord } from '../../src/core/record.js';

const pki: TestPki = makeTestPki(t);

interface TlsUpstream {
  readonly url: string;
  /** Requests served, each with the subject of the client certificate when one was sent. */
  readonly served: Array<{ url: string; clientCert: string | undefined; forwardedProto: string | undefined }>;
}

/** An https upstream answering listPets with `[]`; `requireClient`: mutual TLS against the test CA. */
async function startTlsUpstream(t: TeardownHost, pair: CertFiles, requireClient = false, maxVersion: 'TLSv1.2' | 'TLSv1.3' = 'TLSv1.3'): Promise<TlsUpstream> {
  const served: TlsUpstream['served'] = [];
  const server: Server = createServer(
    { cert: pki.read(pair.cert), key: pki.read(pair.key), ca: pki.read(pki.ca), requestCert: requireClient, rejectUnauthorized: requireClient, maxVersion },
    (req, res) => {
      const peer = (req.socket as TLSSocket).getPeerCertificate();
      served.push({ url: req.url ?? '', clientCert: peer?.subject?.CN as string | undefined, forwardedProto: req.headers['x-forwarded-proto'] as string | undefined });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('[]');
    },
  );
  server.on('tlsClientError', () => {});
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  );
  return { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, served };
}

interface Started {
  readonly url: string;
  readonly key: string;
  readonly logged: Array<{ fields: Record<string, unknown>; message: string }>;
  readonly records: ExchangeRecord[];
}

async function gatewayTo(t: TeardownHost, engine: Engine, upstream: Record<string, unknown>): Promise<Started> {
  const key = testKey();
  const env = { PETSTORE_API_KEYS: key };
  const loaded = parsePolicy(policyText({ upstream }), { env });
  if (!loaded.ok) throw new Error(formatProblems('policy', loaded.problems));
  const logged: Started['logged'] = [];
  const records: ExchangeRecord[] = [];
  const push = (fields: unknown, message?: string) => void logged.push({ fields: fields as Record<string, unknown>, message: message ?? '' });
  const log = { warn: push, error: push, info: push, debug: push, trace: push, fatal: push, child: () => log, level: 'info' } as unknown as Parameters<typeof listenEngine>[3];
  const { url } = await listenEngine(t, engine, createGateway(loaded.config, { env }), log, { onEnd: (r) => void records.push(r) });
  return { url, key, logged, records };
}

const TLS_ERROR = '{"code":"upstream_tls_error","message":"A secure connection to the upstream service could not be established.","status":502}';

forEachEngine(t, async (t, engine) => {
  t.test('an https upstream verified against caFile; X-Forwarded-Proto stays the client side', async (t) => {
    const up = await startTlsUpstream(t, pki.server);
    const gw = await gatewayTo(t, engine, { url: up.url, tls: { caFile: pki.ca } });
    for (let i = 0; i < 3; i++) {
      const r = await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key) });
      t.equal(r.status, 200, r.body);
      t.equal(r.body, '[]');
    }
    t.equal(up.served.length, 3);
    t.equal(up.served[0]?.url, '/v1/pets?limit=20');
    t.equal(up.served[0]?.forwardedProto, 'http', 'the client came over plain HTTP');
  });

  t.test('mutual TLS: the gateway presents certFile to an upstream that requires it', async (t) => {
    const up = await startTlsUpstream(t, pki.server, true);
    const gw = await gatewayTo(t, engine, { url: up.url, tls: { caFile: pki.ca, certFile: pki.client.cert, keyFile: pki.client.key } });
    const r = await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key) });
    t.equal(r.status, 200, r.body);
    t.equal(up.served[0]?.clientCert, 'client', 'the upstream saw the client certificate');

    // TLS 1.3 (RFC 8446 section 4.4.2.4): the server refuses a missing client certificate after the
    // client's handshake is done, with an alert. node's own client (http-proxy-3) reads the alert;
    // undici (the undici and fastify engines) may see the connection end first and report a
    // closed socket, so the client gets 502 either way, with the TLS code when the alert was read.
    const without = await gatewayTo(t, engine, { url: up.url, tls: { caFile: pki.ca } });
    const refused = await request(`${without.url}/v1/pets`, { headers: bearer(without.key) });
    t.equal(refused.status, 502);
    t.match(JSON.parse(refused.body), { code: engine === 'http-proxy-3' ? 'upstream_tls_error' : /^(upstream_tls_error|upstream_unavailable)$/, status: 502 });
    t.equal(up.served.length, 1, 'the upstream served nothing to the gateway without a certificate');

    // TLS 1.2: the certificate is part of the handshake, which fails: the TLS code on every engine.
    const up12 = await startTlsUpstream(t, pki.server, true, 'TLSv1.2');
    const without12 = await gatewayTo(t, engine, { url: up12.url, tls: { caFile: pki.ca } });
    const refused12 = await request(`${without12.url}/v1/pets`, { headers: bearer(without12.key) });
    t.equal(refused12.body, TLS_ERROR, 'TLS 1.2, no certificate: upstream_tls_error');
    t.equal(up12.served.length, 0);
  });

  for (const [name, pair, tls] of [
    ['a certificate the CA did not sign', pki.foreign, { caFile: pki.ca }],
    ['a certificate for another host', pki.wrongHost, { caFile: pki.ca }],
    ['an expired certificate', pki.expired, { caFile: pki.ca }],
    ['no caFile: the system store does not know the test CA', pki.server, {}],
  ] as const) {
    t.test(`${name}: 502 upstream_tls_error, the reason in the log only`, async (t) => {
      const up = await startTlsUpstream(t, pair);
      const gw = await gatewayTo(t, engine, { url: up.url, tls });
      const r = await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key) });
      t.equal(r.status, 502);
      t.equal(r.headers['content-type'], JSON_TYPE);
      t.equal(r.body, TLS_ERROR, 'the exact Error body: no certificate detail');
      t.equal(up.served.length, 0, 'nothing was served');
      t.equal(gw.records[0]?.upstreamFailure, 'tls', 'the record names the failure kind');
      const line = gw.logged.find((l) => l.fields.code === 'upstream_tls_error');
      t.ok(line, 'an operator log line with the code');
      t.match(String(line?.fields.cause), /certificate|cert|self[- ]signed|altname|issuer|expired/i, `the reason: ${String(line?.fields.cause)}`);
    });
  }

  t.test('servername: SNI and the name checked are the configured one', async (t) => {
    const up = await startTlsUpstream(t, pki.wrongHost);
    const gw = await gatewayTo(t, engine, { url: up.url, tls: { caFile: pki.ca, servername: 'wrong.example' } });
    const r = await request(`${gw.url}/v1/pets`, { headers: bearer(gw.key) });
    t.equal(r.status, 200, r.body);
  });
});
