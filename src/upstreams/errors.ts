/**
 * Node's socket error codes as failure kinds, for the transports built on node sockets (all of
 * them): each transport maps its own library's codes first, then falls back on these.
 */
import type { FailureKind } from '../core/upstream.js';

const NODE_KINDS: ReadonlyMap<string, FailureKind> = new Map<string, FailureKind>([
  ['ECONNREFUSED', 'refused'],
  ['ENOTFOUND', 'refused'],
  ['EAI_AGAIN', 'refused'],
  ['EHOSTUNREACH', 'refused'],
  ['ENETUNREACH', 'refused'],
  ['EADDRNOTAVAIL', 'refused'],
  ['ECONNRESET', 'reset'],
  ['EPIPE', 'reset'],
  ['ECONNABORTED', 'reset'],
  ['ETIMEDOUT', 'connect_timeout'],
]);

/**
 * OpenSSL's certificate verification results as node names them (X509_V_ERR_* without the
 * prefix, plus node's own name check): the upstream's certificate was not accepted.
 */
const VERIFY_CODES: ReadonlySet<string> = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_SIGNATURE_FAILURE',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'INVALID_CA',
  'INVALID_PURPOSE',
  'HOSTNAME_MISMATCH',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * True for a TLS failure: a certificate not verified, or the handshake refused (OpenSSL's
 * `ERR_SSL_*`, e.g. an alert from an upstream that wants a client certificate; node's `ERR_TLS_*`;
 * `EPROTO`, which node gives a handshake that failed on a protocol error).
 */
export function isTlsCode(code: string): boolean {
  return VERIFY_CODES.has(code) || code.startsWith('ERR_SSL_') || code.startsWith('ERR_TLS_') || code === 'EPROTO';
}

/** The codes and names along an error's cause chain, outermost first. */
export function codesOf(err: unknown): string[] {
  const codes: string[] = [];
  for (let e = err, depth = 0; e !== null && typeof e === 'object' && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, name } = e as { code?: unknown; name?: unknown };
    if (typeof code === 'string') codes.push(code);
    if (typeof name === 'string') codes.push(name);
  }
  return codes;
}

/**
 * The kind of a transport error: the first code along the cause chain that `own` (the library's
 * table) or node's table names; a parse error (`HPE_*`) is an invalid response; anything else a
 * broken connection.
 */
export function failureKind(err: unknown, own: ReadonlyMap<string, FailureKind>): FailureKind {
  // undici (and reply-from over it) names a 101 that nobody asked for a socket error, "bad
  // upgrade", and an unsolicited 100 Continue or an answer to no request "bad response": answers
  // that are not HTTP the gateway can relay, not a broken connection (undici drops the socket).
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) if (e.message === 'bad upgrade' || e.message === 'bad response') return 'invalid_response';
  const codes = codesOf(err);
  // Before the library's own table: reply-from wraps a TLS error in a code of its own.
  if (codes.some(isTlsCode)) return 'tls';
  for (const c of codes) {
    const k = own.get(c) ?? (c.startsWith('HPE_') ? 'invalid_response' : undefined);
    if (k !== undefined) return k;
  }
  for (const c of codes) {
    const k = NODE_KINDS.get(c);
    if (k !== undefined) return k;
  }
  return 'reset';
}
