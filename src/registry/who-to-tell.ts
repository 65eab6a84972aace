/**
 * Who to tell about a registry key: its owner and contact (changed by `PATCH /keys/{id}` and
 * `keys set`), and the revocations the registry remembers (the last REVOKED_KEPT, newest first, in
 * `<prefix>{keys}:revoked`), each with who revoked it and whom to tell.
 */
import { ownerFieldsProblem } from '../core/key-owner.js';
import { jsonObject, type KeyRecord } from './records.js';
import { RegistryError } from './types.js';

/** How many revocations the registry keeps. */
export const REVOKED_KEPT = 100;

/** A change of owner and contact: a string sets, null clears, absent leaves as it is. */
export interface OwnerPatch {
  readonly owner?: string | null | undefined;
  readonly contact?: string | null | undefined;
}

/** A revocation the registry remembers. */
export interface Revocation {
  readonly id: string;
  /** RFC 3339. */
  readonly at: string;
  /** Who revoked it: the admin token's name (`PETSTORE_ADMIN_TOKENS#1`) or `cli:<user>@<host>`; null: not said. */
  readonly by: string | null;
  /** The key's owner and contact when it was revoked. */
  readonly owner: string | null;
  readonly contact: string | null;
}

/** Refuses an owner or contact out of form (src/core/key-owner.ts) before anything is written. */
export function checkOwnerFields(fields: { readonly owner?: unknown; readonly contact?: unknown }): void {
  const problem = ownerFieldsProblem({ owner: fields.owner ?? undefined, contact: fields.contact ?? undefined });
  if (problem !== undefined) throw new RegistryError('invalid', `${problem.field} ${problem.message}`);
}

/** The record with the patch applied (null clears the field). */
export function patchOwner(record: KeyRecord, patch: OwnerPatch): KeyRecord {
  const { owner, contact, ...rest } = record;
  const nextOwner = patch.owner === undefined ? owner : (patch.owner ?? undefined);
  const nextContact = patch.contact === undefined ? contact : (patch.contact ?? undefined);
  // The fields in the order a new record has them: the secrets last.
  const { secrets, ...head } = rest;
  return { ...head, ...(nextOwner === undefined ? {} : { owner: nextOwner }), ...(nextContact === undefined ? {} : { contact: nextContact }), secrets };
}

/** The list entry of a revocation (JSON). */
export function revocationEntry(record: KeyRecord, by: string | undefined, atMs: number): string {
  const r: Revocation = { id: record.id, at: new Date(atMs).toISOString(), by: by ?? null, owner: record.owner ?? null, contact: record.contact ?? null };
  return JSON.stringify(r);
}

/** An entry of the list, or undefined when it is not one (a hand edit). */
export function parseRevocation(text: string): Revocation | undefined {
  const r = jsonObject(text);
  if (r === undefined || typeof r.id !== 'string' || typeof r.at !== 'string' || Number.isNaN(Date.parse(r.at))) return undefined;
  const text_ = (x: unknown) => (typeof x === 'string' ? x : null);
  return { id: r.id, at: r.at, by: text_(r.by), owner: text_(r.owner), contact: text_(r.contact) };
}
