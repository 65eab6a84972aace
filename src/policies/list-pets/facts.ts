/**
 * What `list-pets` learns of a listPets request, in slots of its own (src/core/facts.ts): the
 * page size and status filter the upstream was asked for, once validated. It offers both to the
 * access log; no other value of the client's query is kept.
 */
import { slot, type Declarations } from '../../core/facts.js';

/** `limit` as applied: 20 when the client sent none. */
export const LIMIT = slot<number>('limit');

/** The `status` filter, a PetStatus, when the client sent one. */
export const STATUS = slot<string>('status');

export const DECLARES: Declarations = Object.freeze({
  logFields: Object.freeze([
    { name: 'limit', slot: LIMIT },
    { name: 'statusFilter', slot: STATUS },
  ]),
});
