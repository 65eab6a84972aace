/**
 * The shipped pet store interface (openapi/pet-store.yaml) as the tests name it: its operations
 * by id, its router, the NewPet check and listPets' query check, all compiled from the document
 * by src/api, so the tests hold the compiled interface to the values docs/interface.md states.
 */
import { shippedApi, type ApiOperation } from '../../src/api/index.js';
import { compileBody, type BodyCheck, type UnknownFields } from '../../src/api/body.js';
import { compileQuery } from '../../src/api/query.js';
import type { LosslessValue } from '../../src/core/contract.js';
import type { Slot } from '../../src/core/facts.js';
import type { RouteMatch } from '../../src/core/operations.js';
import { paramSlot } from '../../src/policies/list-pets/facts.js';

function op(id: string): ApiOperation {
  const found = shippedApi().operations.find((o) => o.id === id);
  if (found === undefined) throw new Error(`no ${id} in the shipped document`);
  return found;
}

export const OPERATIONS = { listPets: op('listPets'), createPet: op('createPet'), getPet: op('getPet') } as const;

export function matchRoute(method: string, path: string): RouteMatch {
  return shippedApi().router.match(method, path);
}

const statusParam = OPERATIONS.listPets.query.find((p) => p.name === 'status');
export const PET_STATUSES: readonly string[] = statusParam?.kind === 'enum' ? statusParam.values : [];

export function isPetStatus(value: unknown): boolean {
  return typeof value === 'string' && PET_STATUSES.includes(value);
}

const limitParam = OPERATIONS.listPets.query.find((p) => p.name === 'limit');
export const LIMIT_MIN = limitParam?.kind === 'integer' ? limitParam.min : NaN;
export const LIMIT_MAX = limitParam?.kind === 'integer' ? limitParam.max : NaN;
export const LIMIT_DEFAULT = limitParam?.kind === 'integer' ? limitParam.default : NaN;

export function compileNewPet(mode: UnknownFields): (value: LosslessValue) => BodyCheck {
  return compileBody(OPERATIONS.createPet.body!, mode);
}

export function parseListQuery(rawQuery: string, clamp: boolean): { limit: number; status: string | undefined } | { error: string } {
  const r = compileQuery(OPERATIONS.listPets.query, clamp)(rawQuery);
  if ('error' in r) return r;
  return { limit: r.values[0] as number, status: r.values[1] as string | undefined };
}

/** listPets' `limit` and `status` as list-pets keeps them (the slots of its query parameters). */
export const LIMIT = paramSlot('limit') as Slot<number>;
export const STATUS = paramSlot('status') as Slot<string>;
