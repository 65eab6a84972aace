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
