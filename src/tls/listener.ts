/**
 * TLS on the API listener: the secure-context options built from the policy's `server.tls`, the
 * material in force (replaced on a reload with `setSecureContext`, so new connections get the new
 * certificate and established ones keep theirs), its expiry for the log and the metrics.
 */
import { randomBytes } from 'node:crypto';
import type { Server as NetServer } from 'node:net';
import type { SecureContextOptions, Server as TlsServer } from 'node:tls';
import { daysLeft, readCa, readKeyPair, validityProblem, type KeyPair, type Read } from './material.js';

/**
 * A listener's TLS options as this folder reads them: `server.tls` (src/fronts/config.ts declares
 * it) or the admin listener's `tls` (src/ops/admin.ts), each of which fits this. Stated here so
 * that src/tls imports nothing of the folders that import it.
 */
export interface ListenerTlsConfig {
  readonly certFile: string;
  readonly keyFile: string;
  readonly minVersion: 'TLSv1.2' | 'TLSv1.3';
  readonly clientCaFile: string | null;
}

/**
 * Forward-secret AEAD suites only (Mozilla's "intermediate" list without the DHE ones). Node's
 * default list also admits CBC suites (through `HIGH`): they are dropped because CBC with TLS 1.2's
 * MAC-then-encrypt has a history of padding-oracle attacks (Lucky Thirteen, POODLE-style), and
 * because RFC 9113 section 9.2.2 forbids them for HTTP/2 (a client may answer INADEQUATE_SECURITY).
 * DHE is dropped because finite-field groups are slower and every current client offers ECDHE.
 * The TLS 1.3 suites are all AEAD and are listed so that a TLSv1.2-only setting changes nothing.
 */
export const CIPHERS = [
  'TLS_AES_128_GCM_SHA256',
  'TLS_AES_256_GCM_SHA384',
  'TLS_CHACHA20_POLY1305_SHA256',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

/** When `serve` warns that the certificate is about to expire. */
export const EXPIRY_WARNING_DAYS = 14;

/** The listener's TLS material in force. */
export class ListenerTls {
  /**
   * The session ticket keys (RFC 5077; TLS 1.3 tickets are PSKs, RFC 8446 section 2.2). Kept
   * across a reload that changes only the server's certificate: a context made by
   * `setSecureContext` would otherwise get new keys and every client would lose its resumption.
   * New ones when the client CA changes (`clientCaFile`'s content): OpenSSL does not verify a
   * client certificate again when a session resumes, so a ticket issued under the old CA would
   * let a client the new CA refuses resume without any certificate (the new context also starts
   * with an empty session-ID cache). Per process: with --workers, a ticket resumes only at the
   * worker that issued it.
   */
  private ticketKeys: Buffer = randomBytes(48);

  private constructor(
    readonly config: ListenerTlsConfig,
    private current: KeyPair,
    private clientCa: Buffer | undefined,
  ) {}

  /** Reads and checks the files of `config`; a problem names the file and what is wrong. */
  static open(config: ListenerTlsConfig): Read<ListenerTls> {
    const read = readMaterial(config);
    return read.ok ? { ok: true, value: new ListenerTls(config, read.value.pair, read.value.clientCa) } : read;
  }

  get pair(): KeyPair {
    return this.current;
  }

  /** The options of `tls.createServer` / `http2.createSecureServer` for the material in force. */
  options(): SecureContextOptions & { requestCert: boolean; rejectUnauthorized: boolean; ticketKeys: Buffer } {
    const mtls = this.clientCa !== undefined;
    return { ...this.contextOptions(), requestCert: mtls, rejectUnauthorized: mtls, ticketKeys: this.ticketKeys };
  }

  private contextOptions(): SecureContextOptions {
    return {
      cert: this.current.cert,
      key: this.current.key,
      ca: this.clientCa,
      minVersion: this.config.minVersion,
      ciphers: CIPHERS,
      // Mozilla's intermediate groups; OpenSSL's default list adds X448, P-521 and, for TLS 1.3,
      // finite-field groups, slower and offered by no client that lacks these three.
      ecdhCurve: 'X25519:prime256v1:secp384r1',
      honorCipherOrder: true,
      ticketKeys: this.ticketKeys,
    };
  }

  /**
   * Re-reads the files and, when they form a valid pair, makes them the context of new
   * connections. On a problem nothing changes: the server keeps the material it had.
   */
  reload(server: TlsServer): Read<KeyPair> {
    const read = readMaterial(this.config);
    if (!read.ok) return read;
    const previous = { pair: this.current, ca: this.clientCa, ticketKeys: this.ticketKeys };
    this.current = read.value.pair;
    this.clientCa = read.value.clientCa;
    const caChanged = !sameBytes(previous.ca, this.clientCa);
    if (caChanged) this.ticketKeys = randomBytes(48);
    try {
      server.setSecureContext(this.contextOptions());
      // node keeps the server's own ticket keys apart from the context's: set both.
      if (caChanged) server.setTicketKeys(this.ticketKeys);
    } catch (err) {
      this.current = previous.pair;
      this.clientCa = previous.ca;
      this.ticketKeys = previous.ticketKeys;
      return { ok: false, problem: `the new certificate was refused by TLS (${(err as Error).message})` };
    }
    return { ok: true, value: read.value.pair };
  }
}

function sameBytes(a: Buffer | undefined, b: Buffer | undefined): boolean {
  return a === undefined || b === undefined ? a === b : a.equals(b);
}

function readMaterial(config: ListenerTlsConfig): Read<{ pair: KeyPair; clientCa: Buffer | undefined }> {
  const pair = readKeyPair(config.certFile, config.keyFile);
  if (!pair.ok) return pair;
  // An expired certificate is refused here: every client would reject it. (A certificate that
  // expires while serving keeps being served: refusing connections would not help anyone.)
  const invalid = validityProblem(pair.value, config.certFile);
  if (invalid !== undefined) return { ok: false, problem: invalid };
  const ca = readCa(config.clientCaFile, 'clientCaFile');
  if (!ca.ok) return ca;
  return { ok: true, value: { pair: pair.value, clientCa: ca.value } };
}

const LISTENERS = new WeakMap<NetServer, ListenerTls>();

/** Marks `server` as serving with `tls` (createNodeServer does it). */
export function attachListenerTls(server: NetServer, tls: ListenerTls): void {
  LISTENERS.set(server, tls);
}

/** The TLS material of a server made by createNodeServer, or undefined for a plain one. */
export function listenerTlsOf(server: NetServer): ListenerTls | undefined {
  return LISTENERS.get(server);
}

/** What the operator is told about a certificate: when it expires and how many days are left. */
export function describePair(pair: KeyPair, now = Date.now()): { notAfter: string; daysLeft: number; subject: string; altNames: string } {
  return { notAfter: new Date(pair.notAfterMs).toISOString(), daysLeft: daysLeft(pair.notAfterMs, now), subject: pair.subject, altNames: pair.altNames };
}
