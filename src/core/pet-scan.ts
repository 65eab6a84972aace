/**
 * The checks of Pet and Pets, now a scanner compiled from the Pet shape by src/api/scan: kept here,
 * under the old names, until their last importers move to src/api/scan.
 */
import { compileShape, LIST_CHECK, type ListFindings, type PageScan, type ShapeScan, type UnknownFieldMode } from '../api/scan/index.js';
import { PET_STATUSES } from './contract.js';

export type { PageScan, UnknownFieldMode };
export type PetScan = ShapeScan;
export type PetsFindings = ListFindings;

/** Pet (docs/interface.md, "Pet"), as PET_SCHEMA in contract.ts says it. */
const PET = compileShape(
  {
    name: 'Pet',
    fields: [
      { name: 'id', type: { kind: 'int64' } },
      { name: 'name', type: { kind: 'string' } },
      { name: 'categoryId', type: { kind: 'int64' } },
      { name: 'status', type: { kind: 'enum', values: PET_STATUSES } },
    ],
    required: ['id', 'name', 'categoryId'],
    forbidden: [],
  },
  { filterField: 'status' },
);

export const PETS_CHECK = LIST_CHECK;

export function scanPetBody(body: Buffer, list: boolean, unknownFields: UnknownFieldMode): PetScan {
  return PET.scanBody(body, list, unknownFields);
}

export function scanPetPage(buf: Buffer, limit: number, status: string | undefined): PageScan {
  return PET.scanPage(buf, limit, status);
}

export function finishPets(findings: PetsFindings, unknownFields: UnknownFieldMode): PetScan {
  return PET.finish(findings, unknownFields);
}
