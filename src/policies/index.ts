/**
 * The policy modules, in the order the chain runs them. This list is the only place that order is
 * written: `auth` first (an unauthenticated client learns nothing else), then `route`, then the
 * checks of one operation. The name of each module is its key under `policies:` in a policy file.
 */
import type { PolicyModule } from '../core/policy.js';
import { auth } from './auth/index.js';
import { newPet } from './new-pet/index.js';
import { route } from './route/index.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const POLICY_MODULES: ReadonlyArray<PolicyModule<any>> = Object.freeze([auth, route, newPet]);

export { auth, newPet, route };
