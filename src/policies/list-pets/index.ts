/**
 * The `list-pets` policy: the query of every operation that has one (the document's parameters:
 * bounds, defaults, enums; docs/interface.md, "listPets": `limit` 1..100, default 20, `status` a
 * PetStatus) and, because a legacy backend may ignore them, the list it answers (`x-list-limit`:
 * never more items than the limit; `x-list-filter`: only items matching the filter). The upstream
 * always receives the parameters as applied, defaults included, so a backend with another default
 * still honours the contract. Response enforcement copies the kept items as their original bytes
 * and scans no further than it must: nothing is parsed and re-stringified. When the response
 * contract asked for it (LIST_CHECK), the same pass checks each kept item for it.
 */
import { apiOf } from '../../api/index.js';
import { compileQuery, unknownParams } from '../../api/query.js';
import { filterArray, LIST_CHECK, ScanError } from '../../api/scan/index.js';
import { scannerOf } from '../../api/scanners.js';
import { errorResponse, GatewayError } from '../../core/errors.js';
import type { Slot } from '../../core/facts.js';
import type { Decision, Exchange, PolicyEnv, PolicyModule, ResponseBody, UpstreamResponse } from '../../core/policy.js';
import { declaresOf, paramSlot } from './facts.js';
import { schema, type ListPetsConfig } from './schema.js';
import type { ApiOperation } from '../../api/model.js';

export type { ListPetsConfig } from './schema.js';

function isSuccess(status: number): boolean {
  return status >= 200 && status < 300;
}

/** True on the 1st, 10th, 100th, ... time: a legacy backend may break the contract on every request. */
function sampled(count: number): boolean {
  return Number.isInteger(Math.log10(count));
}

/** What the policy does for one operation, compiled when it is created. */
function planOf(op: ApiOperation, clamp: boolean) {
  if (op.query.length === 0) return undefined;
  const list = op.success?.list === true && (op.listLimit !== undefined || op.listFilter !== undefined);
  return {
    op,
    parse: compileQuery(op.query, clamp),
    slots: op.query.map((p) => paramSlot(p.name)),
    limit: list && op.listLimit !== undefined ? (paramSlot(op.listLimit) as Slot<number>) : undefined,
    filter: list && op.listFilter !== undefined ? (paramSlot(op.listFilter.param) as Slot<string>) : undefined,
    field: op.listFilter?.field,
    list,
    scanner: scannerOf(op),
  };
}

function create(config: ListPetsConfig, env: PolicyEnv) {
  const api = apiOf(env);
  const clamp = config.outOfRange === 'clamp';
  const plans = api.operations.map((op) => planOf(op, clamp));
  const params = api.operations.flatMap((op) => op.query.map((p) => p.name));
  const filters = new Set(api.operations.flatMap((op) => (op.listFilter === undefined ? [] : [op.listFilter.param])));
  const violation = new GatewayError('upstream_contract_violation', { message: 'The upstream service sent an invalid list.' });
  let enforced = 0;
  const planFor = (ex: Exchange) => plans[(ex.operation as ApiOperation | undefined)?.index ?? -1];
  return {
    name: 'list-pets',
    declares: declaresOf(params, filters),
    onRequest(ex: Exchange): Decision {
      const plan = planFor(ex);
      if (plan === undefined) return undefined;
      if (config.unknownParams === 'reject') {
        const name = unknownParams(plan.op.query, ex.rawQuery);
        if (name !== undefined) return new GatewayError('invalid_query', { message: `unknown query parameter '${name.slice(0, 64)}'` });
      }
      const query = plan.parse(ex.rawQuery);
      if ('error' in query) return new GatewayError('invalid_query', { message: query.error });
      for (let i = 0; i < plan.slots.length; i++) {
        const value = query.values[i];
        if (value !== undefined) ex.set(plan.slots[i]!, value);
      }
      // Only what the interface defines, normalised: no client text reaches the upstream query.
      ex.upstreamQuery = query.upstream;
      return undefined;
    },
    wantsResponseBody(ex: Exchange, res: UpstreamResponse): boolean {
      const plan = planFor(ex);
      // A request whose query was refused has no applied limit: there is no list to cut.
      return config.enforceResponse && plan?.list === true && (plan.limit === undefined || ex.get(plan.limit) !== undefined) && isSuccess(res.status);
    },
    onResponseBody(ex: Exchange, res: ResponseBody): ResponseBody {
      const plan = planFor(ex);
      if (!config.enforceResponse || plan === undefined || !plan.list || !isSuccess(res.status)) return res;
      const limit = plan.limit === undefined ? Number.MAX_SAFE_INTEGER : (ex.get(plan.limit) ?? Number.MAX_SAFE_INTEGER);
      const filter = plan.filter === undefined ? undefined : ex.get(plan.filter);
      try {
        // When the response contract will check this list, each item is checked during this same
        // pass and the findings handed on: the list is read once, not twice.
        const scanner = plan.scanner;
        const checked = ex.get(LIST_CHECK) === 'wanted' && scanner !== undefined;
        const out = checked ? scanner.scanPage(res.body, limit, filter) : filterArray(res.body, limit, plan.field, filter);
        if (checked && 'findings' in out && out.findings !== undefined && !res.truncated) ex.set(LIST_CHECK, out.findings);
        if (!out.changed) {
          if (res.truncated) throw new ScanError('truncated');
          return res;
        }
        // A copy run aside (a comparison) is not this gateway's answer: nothing logged of it.
        if (!ex.aside && sampled(++enforced)) {
          env.log?.warn({ policy: 'list-pets', operation: plan.op.id, limit, filter, times: enforced }, 'upstream list exceeded the limit or the filter; enforced');
        }
        return { ...res, body: out.body, truncated: false };
      } catch (err) {
        if (!(err instanceof ScanError)) throw err;
        if (!ex.aside) env.log?.warn({ policy: 'list-pets', operation: plan.op.id, reason: err.message }, 'upstream list is not a JSON array that can be enforced');
        return errorResponse(violation);
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
