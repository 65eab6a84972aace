/**
 * Certificates made at test time with the `openssl` command (nothing of them is in the repository):
 * a CA, server certificates for 127.0.0.1/localhost (valid, expired, for another host, signed by
 * another CA), and a client certificate. Files live in a temporary directory removed at teardown.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { tempDir, type TeardownHost } from './servers.js';

export interface CertFiles {
  readonly cert: string;
  readonly key: string;
}

export interface TestPki {
  readonly dir: string;
  /** The CA that signs every certificate below except `foreign`. */
  readonly ca: string;
  /** 127.0.0.1 and localhost, valid for 30 days. */
  readonly server: CertFiles;
  /** Another valid server certificate for the same names (to see a rotation). */
  readonly server2: CertFiles;
  /** Valid for 5 days: inside the expiry warning. */
  readonly soon: CertFiles;
  /** Expired in 2020. */
  readonly expired: CertFiles;
  /** For wrong.example only. */
  readonly wrongHost: CertFiles;
  /** 127.0.0.1/localhost, signed by a CA the tests never trust. */
  readonly foreign: CertFiles;
  /** A client certificate (extendedKeyUsage clientAuth) signed by the CA. */
  readonly client: CertFiles;
  /** A client certificate signed by the foreign CA. */
  readonly foreignClient: CertFiles;
  /** The PEM bytes of a file. */
  read(file: string): Buffer;
}

function openssl(dir: string, args: string[]): void {
  const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8', timeout: 20_000 });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')} failed: ${r.stderr}`);
}

const CA_CONF = `[ ca ]
default_ca = test_ca
[ test_ca ]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = any
copy_extensions = copy
unique_subject = no
[ any ]
commonName = supplied
`;

/** Makes one CA-signed certificate; `days` or explicit dates (YYYYMMDDHHMMSSZ) for an expired one. */
function issue(dir: string, name: string, caName: string, subjectAltName: string, usage: 'serverAuth' | 'clientAuth', dates: { days: number } | { start: string; end: string }): CertFiles {
  const key = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const cert = join(dir, `${name}.pem`);
  const ext = join(dir, `${name}.ext`);
  writeFileSync(ext, `subjectAltName=${subjectAltName}\nextendedKeyUsage=${usage}\nbasicConstraints=CA:FALSE\n`);
  openssl(dir, ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', csr, '-subj', `/CN=${name}`]);
  const period = 'days' in dates ? ['-days', String(dates.days)] : ['-startdate', dates.start, '-enddate', dates.end];
  openssl(dir, ['ca', '-batch', '-config', join(dir, 'ca.conf'), '-notext', '-cert', join(dir, `${caName}.pem`), '-keyfile', join(dir, `${caName}.key`), '-in', csr, '-out', cert, '-extfile', ext, ...period]);
  return { cert, key };
}

function makeCa(dir: string, name: string): void {
  openssl(dir, ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.pem`, '-days', '60', '-subj', `/CN=${name}`, '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
}

/** A fresh PKI in a temporary directory (about a second of openssl runs). */
export function makeTestPki(t: TeardownHost): TestPki {
  const dir = tempDir(t, 'pki');
  writeFileSync(join(dir, 'ca.conf'), CA_CONF);
  writeFileSync(join(dir, 'index.txt'), '');
  writeFileSync(join(dir, 'serial'), '1000\n');
  makeCa(dir, 'ca');
  makeCa(dir, 'foreign-ca');
  const local = 'IP:127.0.0.1,DNS:localhost';
  return {
    dir,
    ca: join(dir, 'ca.pem'),
    server: issue(dir, 'server', 'ca', local, 'serverAuth', { days: 30 }),
    server2: issue(dir, 'server2', 'ca', local, 'serverAuth', { days: 40 }),
    soon: issue(dir, 'soon', 'ca', local, 'serverAuth', { days: 5 }),
    expired: issue(dir, 'expired', 'ca', local, 'serverAuth', { start: '20200101000000Z', end: '20200201000000Z' }),
    wrongHost: issue(dir, 'wrong-host', 'ca', 'DNS:wrong.example', 'serverAuth', { days: 30 }),
    foreign: issue(dir, 'foreign', 'foreign-ca', local, 'serverAuth', { days: 30 }),
    client: issue(dir, 'client', 'ca', 'DNS:client.test', 'clientAuth', { days: 30 }),
    foreignClient: issue(dir, 'foreign-client', 'foreign-ca', 'DNS:client.test', 'clientAuth', { days: 30 }),
    read: (file: string) => readFileSync(file),
  };
}

// ---------------------------------------------------------------------------------------------
// Clients over TLS: node:https (HTTP/1.1) and node:http2, each on a fresh connection.

export interface TlsResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  /** `h2` or `http/1.1`, as ALPN chose. */
  readonly alpn: string | false;
}

export interface TlsRequestOptions {
  readonly method?: string;
  readonly headers?: Record<string, string>;
  readonly body?: string;
  readonly ca: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
  readonly timeoutMs?: number;
}

/** One HTTP/1.1 request over TLS (ALPN offers http/1.1 only). */
export async function httpsRequest(url: string, o: TlsRequestOptions): Promise<TlsResponse> {
  const { request } = await import('node:https');
  // node:https offers no ALPN protocol by default: the server picks HTTP/1.1.
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: o.method ?? 'GET', headers: { ...(o.headers ?? {}), ...(o.body === undefined ? {} : { 'content-length': String(Buffer.byteLength(o.body)) }) }, ca: o.ca, cert: o.cert, key: o.key, agent: false, timeout: o.timeoutMs ?? 5000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), alpn: (res.socket as TLSSocket).alpnProtocol ?? false }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(o.body);
  });
}

/** One HTTP/2 request on a new session, closed after the answer. */
export async function h2Request(origin: string, path: string, o: TlsRequestOptions): Promise<TlsResponse> {
  const { connect } = await import('node:http2');
  return new Promise((resolve, reject) => {
    const session = connect(origin, { ca: o.ca, cert: o.cert, key: o.key });
    const timer = setTimeout(() => session.destroy(new Error('timed out')), o.timeoutMs ?? 5000);
    const fail = (err: Error) => {
      clearTimeout(timer);
      session.destroy();
      reject(err);
    };
    session.on('error', fail);
    const stream = session.request({ ':method': o.method ?? 'GET', ':path': path, ...(o.headers ?? {}) }, { endStream: o.body === undefined });
    let status = 0;
    let headers: Record<string, string | string[] | undefined> = {};
    const chunks: Buffer[] = [];
    stream.on('response', (h) => {
      status = Number(h[':status']);
      headers = h as Record<string, string | string[] | undefined>;
    });
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('error', fail);
    stream.on('end', () => {
      clearTimeout(timer);
      const alpn = session.alpnProtocol ?? false;
      session.close();
      resolve({ status, headers, body: Buffer.concat(chunks).toString('utf8'), alpn });
    });
    if (o.body !== undefined) stream.end(o.body);
  });
}
