/**
 * The core's Chain with the shipped interface's router, for tests that build a chain from
 * policies: the gateway hands the router in (src/gateway.ts); a test names only its policies.
 */
import { shippedApi } from '../../src/api/index.js';
import { Chain as CoreChain, OpenExchange } from '../../src/core/chain.js';
import type { Router } from '../../src/core/operations.js';
import type { Policy } from '../../src/core/policy.js';

export { OpenExchange };

export class Chain extends CoreChain {
  constructor(policies: ReadonlyArray<Policy>, router: Router = shippedApi().router) {
    super(policies, router);
  }
}
