/**
 * The `response-contract` policy: checks what a 2xx upstream answer holds against the interface:
 * listPets 200 with Pets, createPet 201 with a Pet, getPet 200 with a Pet, as application/json,
 * every int64 exact. `off` (default: no body is read), `monitor` (violations logged and counted,
 * the answer passes) or `enforce` (a violating answer becomes 502 upstream_contract_violation).
 */
import { compileResponseShapes, isJsonMediaType, parseLossless } from '../../core/contract.js';
import { errorResponse, GatewayError } from '../../core/errors.js';
import type { OperationId } from '../../core/operations.js';
import type { SchemaType } from '../../core/options.js';
import type { Exchange, PolicyEnv, PolicyModule, ResponseBody, UpstreamResponse } from '../../core/policy.js';

export const schema = {
  type: 'object',
  description: 'Validation of 2xx upstream answers against Pet / Pets: "off", "monitor" (log and count) or "enforce" (502).',
  additionalProperties: false,
  properties: {
    mode: { type: 'string', enum: ['off', 'monitor', 'enforce'], default: 'off', description: 'off | monitor | enforce' },
  },
} as const;

export type ResponseContractConfig = SchemaType<typeof schema>;

const EXPECTED_STATUS: Record<OperationId, number> = { listPets: 200, createPet: 201, getPet: 200 };

function create(config: ResponseContractConfig, env: PolicyEnv) {
  const shapes = config.mode === 'off' ? undefined : compileResponseShapes();
  let violations = 0;
  const violation = new GatewayError('upstream_contract_violation');

  function problemsOf(op: OperationId, res: ResponseBody): string[] {
    if (res.status !== EXPECTED_STATUS[op]) return [`status ${res.status} where the interface says ${EXPECTED_STATUS[op]}`];
    const type = res.headers['content-type'];
    if (!isJsonMediaType(typeof type === 'string' ? type : undefined)) return ['content-type is not application/json'];
    if (res.truncated) return ['body larger than the gateway buffers'];
    let value: unknown;
    try {
      value = parseLossless(res.body);
    } catch {
      return ['body is not valid JSON'];
    }
    if (shapes === undefined) return [];
    return (op === 'listPets' ? shapes.pets : shapes.pet)(value).slice(0, 5);
  }

  return {
    name: 'response-contract',
    /** How many violating answers were seen since the policy was loaded. */
    get violations(): number {
      return violations;
    },
    wantsResponseBody(ex: Exchange, res: UpstreamResponse): boolean {
      return config.mode !== 'off' && ex.operation !== undefined && res.status >= 200 && res.status < 300;
    },
    onResponseBody(ex: Exchange, res: ResponseBody): ResponseBody {
      const op = ex.operation?.id;
      if (config.mode === 'off' || op === undefined || res.status < 200 || res.status >= 300) return res;
      const problems = problemsOf(op, res);
      if (problems.length === 0) return res;
      violations++;
      env.log?.warn({ policy: 'response-contract', operation: op, problems, violations, mode: config.mode }, 'upstream answer violates the interface');
      return config.mode === 'enforce' ? errorResponse(violation) : res;
    },
  };
}

export const responseContract: PolicyModule<ResponseContractConfig, 'response-contract'> = {
  name: 'response-contract',
  description: schema.description,
  schema,
  create,
};
