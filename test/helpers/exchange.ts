/** Exchanges for policy unit tests that need one without running the whole chain. */
import { Chain, type OpenExchange } from './chain.js';
import { KEY_ID } from '../../src/policies/auth/facts.js';

/** A listPets exchange that `auth` has already accepted under key id `id` (its `KEY_ID` fact). */
export function keyed(id: string): OpenExchange {
  const ex = new Chain([]).open({ method: 'GET', target: '/v1/pets', headers: {} });
  ex.set(KEY_ID, id);
  return ex;
}
