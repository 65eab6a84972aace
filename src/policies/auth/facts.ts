/**
 * What `auth` learns of a request, in slots of its own (src/core/facts.ts). Other policies may
 * import these (the rate limit counts per key id); the core and the observers read the key id
 * only as the consumer `auth` declares (`DECLARES`), never by this name.
 */
import { slot, type Declarations } from '../../core/facts.js';
import type { Consumer } from '../../core/policy.js';

/** The id of the API key that authenticated the request (never the key). */
export const KEY_ID = slot<string>('keyId');

/** The authenticated consumer's lifecycle: one frozen object per key, set with `KEY_ID`. */
export const CONSUMER = slot<Consumer>('consumer');

/** The key id names the consumer: the access log's `consumer` field, the deprecation report. */
export const DECLARES: Declarations = Object.freeze({ consumer: KEY_ID });
