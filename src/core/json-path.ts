/**
 * JSON paths as problems name them (`$.policies.auth.keys[0].hash`), for the loader and for the
 * policies' own cross-field rules alike, so a path reads the same whoever reports it.
 */

/** One step of a path: `[0]` for an index, `.name` for an identifier, `["a b"]` for anything else. */
export function pathSegment(seg: string): string {
  return /^\d+$/.test(seg) ? `[${seg}]` : /^[A-Za-z_$][\w$]*$/.test(seg) ? `.${seg}` : `[${JSON.stringify(seg)}]`;
}

/** `/policies/auth/keys/0/hash` (a JSON Pointer, RFC 6901) -> `$.policies.auth.keys[0].hash` */
export function toJsonPath(pointer: string): string {
  if (pointer === '') return '$';
  return (
    '$' +
    pointer
      .slice(1)
      .split('/')
      .map((seg) => pathSegment(seg.replace(/~1/g, '/').replace(/~0/g, '~')))
      .join('')
  );
}
