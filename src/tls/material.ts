/**
 * TLS material read from PEM files: the listener's certificate and key (checked as a pair, with
 * their expiry), the CA bundles for client certificates and for the upstream. Everything here
 * reads files once and returns problems as values: a start, a `check` and a reload share it.
 */
import { readFileSync } from 'node:fs';
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import type { SecureContextOptions } from 'node:tls';

/** Whole days the certificate has left at `now` (negative once expired). */
export function daysLeft(notAfterMs: number, now = Date.now()): number {
  return Math.floor((notAfterMs - now) / 86_400_000);
}

/** A certificate chain and its key, read and checked. */
export interface KeyPair {
  readonly cert: Buffer;
  readonly key: Buffer;
  /** The leaf certificate's notAfter, epoch milliseconds. */
  readonly notAfterMs: number;
  readonly notBeforeMs: number;
  /** The leaf's subject and SANs, for `check` and the log (never sent to a client). */
  readonly subject: string;
  readonly altNames: string;
}

export type Read<T> = { ok: true; value: T } | { ok: false; problem: string };

/** A file's bytes, or a problem that names the file and why it could not be read (ENOENT, EACCES). */
export function readPemFile(file: string, what: string): Read<Buffer> {
  try {
    const bytes = readFileSync(file);
    if (!bytes.includes('-----BEGIN ')) return { ok: false, problem: `${what} ${file} holds no PEM block` };
    return { ok: true, value: bytes };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return { ok: false, problem: `${what} ${file} cannot be read (${e.code ?? e.message})` };
  }
}

function parseKey(bytes: Buffer, file: string): Read<KeyObject> {
  try {
    return { ok: true, value: createPrivateKey(bytes) };
  } catch (err) {
    // The parser's message names the format problem; it never contains key material.
    return { ok: false, problem: `keyFile ${file} is not a usable private key (${(err as Error).message})` };
  }
}

function parseLeaf(bytes: Buffer, file: string): Read<X509Certificate> {
  try {
    // The first certificate of a chain is the leaf (RFC 8446 section 4.4.2: the sender's comes first).
    return { ok: true, value: new X509Certificate(bytes) };
  } catch (err) {
    return { ok: false, problem: `certFile ${file} is not a PEM certificate (${(err as Error).message})` };
  }
}

/**
 * Reads `certFile` and `keyFile` and checks that the key is the certificate's. An expired
 * certificate is read (the caller decides: `check` refuses it, a running server keeps serving).
 */
export function readKeyPair(certFile: string, keyFile: string): Read<KeyPair> {
  const cert = readPemFile(certFile, 'certFile');
  if (!cert.ok) return cert;
  const key = readPemFile(keyFile, 'keyFile');
  if (!key.ok) return key;
  const leaf = parseLeaf(cert.value, certFile);
  if (!leaf.ok) return leaf;
  const pk = parseKey(key.value, keyFile);
  if (!pk.ok) return pk;
  if (!leaf.value.checkPrivateKey(pk.value)) {
    return { ok: false, problem: `keyFile ${keyFile} is not the key of the certificate in ${certFile} (the pair does not match)` };
  }
  return {
    ok: true,
    value: {
      cert: cert.value,
      key: key.value,
      notAfterMs: Date.parse(leaf.value.validTo),
      notBeforeMs: Date.parse(leaf.value.validFrom),
      subject: leaf.value.subject.replace(/\n/g, ', '),
      altNames: leaf.value.subjectAltName ?? '',
    },
  };
}

/** The validity problem of a pair at `now`, or undefined. */
export function validityProblem(pair: KeyPair, certFile: string, now = Date.now()): string | undefined {
  if (now >= pair.notAfterMs) return `certFile ${certFile} expired on ${new Date(pair.notAfterMs).toISOString()}`;
  if (now < pair.notBeforeMs) return `certFile ${certFile} is not valid before ${new Date(pair.notBeforeMs).toISOString()}`;
  return undefined;
}

/** Reads an optional CA bundle: undefined for none (the system's trust store). */
export function readCa(file: string | null, what: string): Read<Buffer | undefined> {
  if (file === null) return { ok: true, value: undefined };
  const ca = readPemFile(file, what);
  if (!ca.ok) return ca;
  try {
    new X509Certificate(ca.value);
  } catch (err) {
    return { ok: false, problem: `${what} ${file} is not a PEM certificate (${(err as Error).message})` };
  }
  return ca;
}

export type { SecureContextOptions };
