/**
 * Owners and contacts of the environment's keys (docs/keys.md, "Owner and contact"). The keys'
 * variable holds secrets only (as a secret manager injects them); who to tell about each is in a
 * companion variable, the same name and `_OWNERS`, which is no secret: a JSON array with one
 * entry per key, in the keys' order (the n-th entry is the key `NAME#n`), each
 * `{"owner"?, "contact"?}` or null.
 *
 *   PETSTORE_API_KEYS='psg_...,psg_...'
 *   PETSTORE_API_KEYS_OWNERS='[{"owner":"Payments team","contact":"#payments"},null]'
 */
import { ownerFieldsProblem, type KeyOwnerFields } from '../../core/key-owner.js';

/** The companion variable of the keys' variable `keysFromEnv`. */
export function ownersVariable(keysFromEnv: string): string {
  return `${keysFromEnv}_OWNERS`;
}

/** Owners and contacts of the environment's keys, by position, and what is wrong with the variable. */
export interface EnvOwners {
  /** Entry i describes key `NAME#(i+1)`; undefined: none (or a refused entry). */
  readonly owners: ReadonlyArray<KeyOwnerFields | undefined>;
  /** Each a message naming the variable (and the entry): never a value of it. */
  readonly problems: readonly string[];
}

/**
 * Reads the companion variable of `keysFromEnv` for `keyCount` keys. Absent or blank: no owners.
 * An entry past the last key is refused: the entries would not say whose keys they describe.
 */
export function envOwners(keysFromEnv: string | null, env: Readonly<Record<string, string | undefined>>, keyCount: number): EnvOwners {
  if (keysFromEnv === null) return { owners: [], problems: [] };
  const name = ownersVariable(keysFromEnv);
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return { owners: [], problems: [] };
  const form = `${name} must be a JSON array with one entry per key of ${keysFromEnv}, in order, each {"owner"?, "contact"?} or null`;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return { owners: [], problems: [`${form}: it is not JSON`] };
  }
  if (!Array.isArray(value)) return { owners: [], problems: [form] };
  const problems: string[] = [];
  if (value.length > keyCount) problems.push(`${name} has ${value.length} entries but ${keysFromEnv} has ${keyCount} key(s): each entry describes the key at its position`);
  const owners = value.map((entry: unknown, i): KeyOwnerFields | undefined => {
    if (entry === null) return undefined;
    if (typeof entry !== 'object' || Array.isArray(entry)) {
      problems.push(`${name}[${i}] must be {"owner"?, "contact"?} or null`);
      return undefined;
    }
    const e = entry as Record<string, unknown>;
    const unknown = Object.keys(e).find((k) => k !== 'owner' && k !== 'contact');
    if (unknown !== undefined) {
      problems.push(`${name}[${i}]: unknown property '${unknown.slice(0, 40)}' (an entry has "owner" and "contact")`);
      return undefined;
    }
    const problem = ownerFieldsProblem(e);
    if (problem !== undefined) {
      problems.push(`${name}[${i}].${problem.field} ${problem.message}`);
      return undefined;
    }
    return { ...(typeof e.owner === 'string' ? { owner: e.owner } : {}), ...(typeof e.contact === 'string' ? { contact: e.contact } : {}) };
  });
  return { owners, problems };
}
