/**
 * The reference backend: listPets, createPet and getPet exactly as docs/interface.md says,
 * framework-free. The gateway calls `handle` in process (`upstream: builtin`, no loopback hop);
 * `server.ts` puts it on its own port (`petstore-gateway backend`).
 *
 * Where the interface is silent the backend answers as the gateway's default policies do: a
 * `limit` outside 1..100 or a `status` outside PetStatus is a 400, a petId that is not an int64 is
 * an unknown animal (404).
 */
import { shippedApi } from '../api/index.js';
import { compileBody } from '../api/body.js';
import type { ApiOperation } from '../api/model.js';
import { compileQuery } from '../api/query.js';
import { isInt64Text, parseLossless, type LosslessNumber } from '../core/contract.js';
import { GatewayError, renderError, type ErrorCode } from '../core/errors.js';
import { PetStore, type PetStatus } from './store.js';

/** An operation of the shipped interface (openapi/pet-store.yaml), which the backend implements. */
function operation(id: string): ApiOperation {
  const op = shippedApi().operations.find((o) => o.id === id);
  if (op === undefined) throw new Error(`the shipped interface has no ${id}`);
  return op;
}

export interface BackendRequest {
  /** The operation's id; one the backend does not implement is answered 501. */
  readonly operation: string;
  readonly petId?: string | undefined;
  /** The raw query string, without '?'. */
  readonly query: string;
  readonly body?: Buffer | undefined;
}

export interface BackendResponse {
  readonly status: number;
  /** JSON: a Pet, Pets, or an Error (read-only: a list may be shared between answers). */
  readonly body: Buffer;
  /** The Error's catalogue code when the answer is one. */
  readonly code?: ErrorCode;
}

export interface BackendOptions {
  /** Most animals kept; past it createPet answers 507 store_full. */
  readonly maxPets?: number;
}

function error(code: ErrorCode, message?: string): BackendResponse {
  const err = new GatewayError(code, { message });
  return { status: err.status, body: Buffer.from(renderError(err)), code };
}

export class ReferenceBackend {
  readonly store: PetStore;
  private readonly validate = compileBody(operation('createPet').body!, 'reject');
  private readonly query = compileQuery(operation('listPets').query, false);

  constructor(options: BackendOptions = {}) {
    this.store = new PetStore(options.maxPets ?? 100_000);
  }

  handle(req: BackendRequest): BackendResponse {
    switch (req.operation) {
      case 'listPets':
        return this.list(req.query);
      case 'createPet':
        return this.create(req.body ?? Buffer.alloc(0));
      case 'getPet':
        return this.get(req.petId ?? '');
      default:
        return error('not_implemented', `The reference backend implements listPets, createPet and getPet, not ${req.operation.slice(0, 64)}.`);
    }
  }

  private list(query: string): BackendResponse {
    const parsed = this.query(query);
    if ('error' in parsed) return error('invalid_query', parsed.error);
    const [limit, status] = parsed.values as [number, PetStatus | undefined];
    return { status: 200, body: this.store.list(limit, status) };
  }

  private create(body: Buffer): BackendResponse {
    let value: unknown;
    try {
      value = parseLossless(body);
    } catch {
      return error('malformed_json');
    }
    const check = this.validate(value);
    if (check.errors.length > 0) return error('invalid_body', check.errors.join('; '));
    const pet = value as { name: string; categoryId: LosslessNumber; status?: PetStatus };
    const created = this.store.create({ name: pet.name, categoryIdText: pet.categoryId.value, status: pet.status });
    return created === undefined ? error('store_full') : { status: 201, body: created };
  }

  private get(petId: string): BackendResponse {
    const body = isInt64Text(petId) ? this.store.get(petId) : undefined;
    return body === undefined ? error('pet_not_found') : { status: 200, body };
  }
}
