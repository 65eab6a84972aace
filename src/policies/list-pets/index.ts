/**
 * The `list-pets` policy: listPets' query (docs/interface.md, "listPets": `limit` integer
 * 1..100, default 20; `status` a PetStatus) and, because a legacy backend may ignore both, its
 * response. The upstream always receives an explicit `limit`, so a backend with another default
 * still honours the contract. Response enforcement copies the kept animals as their original
 * bytes and scans no further than it must: nothing is parsed and re-stringified. When the
 * response contract asked for it (PETS_CHECK), the same pass checks each kept Pet for it.
 */
import { parseListQuery } from '../../core/contract.js';
import { errorResponse, GatewayError } from '../../core/errors.js';
import { filterArray, ScanError } from '../../core/json-scan.js';
import { PETS_CHECK, scanPetPage } from '../../core/pet-scan.js';
import type { Decision, Exchange, PolicyEnv, PolicyModule, ResponseBody, UpstreamResponse } from '../../core/policy.js';
import { DECLARES, LIMIT, STATUS } from './facts.js';
import { schema, type ListPetsConfig } from './schema.js';

export type { ListPetsConfig } from './schema.js';

function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}

/** True on the 1st, 10th, 100th, ... time: a legacy backend may break the contract on every request. */
function sampled(count: number): boolean {
  return Number.isInteger(Math.log10(count));
}

function create(config: ListPetsConfig, env: PolicyEnv) {
  const clamp = config.outOfRange === 'clamp';
  let enforced = 0;
  return {
    name: 'list-pets',
    declares: DECLARES,
    onRequest(ex: Exchange): Decision {
      if (ex.operation?.id !== 'listPets') return undefined;
      if (config.unknownParams === 'reject') {
        for (const name of new URLSearchParams(ex.rawQuery).keys()) {
          if (name !== 'limit' && name !== 'status') return new GatewayError('invalid_query', { message: `unknown query parameter '${name.slice(0, 64)}'` });
        }
      }
      const query = parseListQuery(ex.rawQuery, clamp);
      if ('error' in query) return new GatewayError('invalid_query', { message: query.error });
      const { limit, status } = query;
      ex.set(LIMIT, limit);
      ex.set(STATUS, status);
      // Only what the interface defines, normalised: no client text reaches the upstream query.
      ex.upstreamQuery = status === undefined ? `limit=${limit}` : `limit=${limit}&status=${status}`;
      return undefined;
    },
    wantsResponseBody(ex: Exchange, res: UpstreamResponse): boolean {
      return config.enforceResponse && ex.get(LIMIT) !== undefined && isSuccess(res.status);
    },
    onResponseBody(ex: Exchange, res: ResponseBody): ResponseBody {
      const limit = ex.get(LIMIT);
      if (!config.enforceResponse || limit === undefined || !isSuccess(res.status)) return res;
      const status = ex.get(STATUS);
      try {
        // When the response contract will check this list as Pets, each Pet is checked during this
        // same pass and the findings handed on: the list is read once, not twice.
        const checked = ex.get(PETS_CHECK) === 'wanted';
        const out = checked ? scanPetPage(res.body, limit, status) : filterArray(res.body, limit, status);
        if (checked && 'findings' in out && out.findings !== undefined && !res.truncated) ex.set(PETS_CHECK, out.findings);
        if (!out.changed) {
          if (res.truncated) throw new ScanError('truncated');
          return res;
        }
        if (sampled(++enforced)) {
          env.log?.warn({ policy: 'list-pets', limit, status, times: enforced }, 'upstream list exceeded the limit or the status filter; enforced');
        }
        return { ...res, body: out.body, truncated: false };
      } catch (err) {
        if (!(err instanceof ScanError)) throw err;
        env.log?.warn({ policy: 'list-pets', reason: err.message }, 'upstream listPets body is not a JSON array that can be enforced');
        return errorResponse(new GatewayError('upstream_contract_violation', { message: 'The upstream service sent an invalid list of animals.' }));
      }
    },
  };
}

export const listPets: PolicyModule<ListPetsConfig, 'list-pets'> = {
  name: 'list-pets',
  description: schema.description,
  schema,
  create,
};
