/**
 * The `response-contract` policy: checks what a 2xx upstream answer holds against the interface:
 * the operation's one 2xx status with its body (the document's schema: in the shipped interface,
 * listPets 200 with Pets, createPet 201 with a Pet, getPet 200 with a Pet), as application/json,
 * every int64 exact. `enforce` (the default: a violating answer becomes 502
 * upstream_contract_violation), `monitor` (violations logged and counted, the answer passes) or
 * `off` (no body is read).
 *
 * On by default: the gateway's promise to clients is the interface, and an
 * upstream's HTML page, truncated JSON or internal fields must not reach them through it.
 *
 * Fields the interface does not define (`unknownFields`): `drop` by default. An answer's schema
 * lists its fields (Pet: "all fields of NewPet plus id"), so anything else is the upstream's internals
 * (an `internalNote`), never something a client may rely on; dropping it leaks nothing and keeps
 * the answer, whereas `refuse` would turn every answer into a 502 as soon as an upstream adds a
 * harmless field. `refuse` is for operators who want such an upstream to fail loudly; `pass`
 * lets them through (the behaviour before the option existed).
 *
 * Content codings: the gateway never forwards Accept-Encoding, so a coded
 * (gzip...) answer is the upstream's own choice. A 2xx with a coding the client did not accept
 * becomes 502 upstream_contract_violation, in every mode; with the contract on, any coded 2xx
 * does, since the gateway can check only the bytes it can read. The gateway does not decompress:
 * an upstream's compression ratio would decide how much memory one answer takes.
 */
import { isJsonMediaType } from '../../core/contract.js';
import { errorResponse, GatewayError } from '../../core/errors.js';
import { acceptsCoding, contentCoding } from '../../core/headers.js';
import { LIST_CHECK, type ShapeScan } from '../../api/scan/index.js';
import { apiOf } from '../../api/index.js';
import { scannerOf } from '../../api/scanners.js';
import type { ApiOperation } from '../../api/model.js';
import type { SchemaType } from '../../core/options.js';
import type { Exchange, PolicyEnv, PolicyModule, ResponseBody, UpstreamResponse } from '../../core/policy.js';
import { TRACE_EVENTS } from '../../core/trace.js';
import { CONTRACT_VIOLATION, DECLARES, violationText } from './facts.js';

export const schema = {
  type: 'object',
  description: 'Validation of 2xx upstream answers against the interface (Pet / Pets): "enforce" (default: 502), "monitor" (log and count) or "off".',
  additionalProperties: false,
  properties: {
    mode: {
      type: 'string',
      enum: ['off', 'monitor', 'enforce'],
      default: 'enforce',
      description: 'enforce (default): an answer that is not the interface\'s Pet / Pets becomes 502 upstream_contract_violation; monitor: logged and counted, passed on; off: not read.',
    },
    unknownFields: {
      type: 'string',
      enum: ['drop', 'refuse', 'pass'],
      default: 'drop',
      description: 'Fields of a Pet that the interface does not define (e.g. internalNote): "drop" (default: removed from the answer), "refuse" (a violation: 502 under enforce) or "pass".',
    },
  },
} as const;

/** The answer's content coding when the client did not accept it; undefined for none or an accepted one. */
function uninvitedCoding(ex: Exchange, res: UpstreamResponse): string | undefined {
  const coding = contentCoding(res.headers['content-encoding']);
  return coding === undefined || acceptsCoding(ex.head.headers['accept-encoding'], coding) ? undefined : coding;
}

export type ResponseContractConfig = SchemaType<typeof schema>;

function create(config: ResponseContractConfig, env: PolicyEnv) {
  // Each operation's answer scanner (by index), compiled once: shared with list-pets.
  const scanners = apiOf(env).operations.map((op) => scannerOf(op));
  // Absent (a config built in code, not loaded): the schema's default.
  const unknownFields = config.unknownFields ?? 'drop';
  let violations = 0;
  const violation = new GatewayError('upstream_contract_violation');

  /** The problems of the answer (empty when it conforms), and the body to send when it changed. */
  function check(ex: Exchange, op: ApiOperation, res: ResponseBody): ShapeScan {
    const success = op.success;
    const scanner = scanners[op.index];
    if (success === undefined || scanner === undefined) return { problems: [] };
    if (res.status !== success.status) return { problems: [`status ${res.status} where the interface says ${success.status}`] };
    const type = res.headers['content-type'];
    if (!isJsonMediaType(typeof type === 'string' ? type : undefined)) return { problems: ['content-type is not application/json'] };
    if (res.truncated) return { problems: ['body larger than the gateway buffers'] };
    // list-pets read this very list already, checking each item on the way: finished from there.
    const findings = success.list ? ex.get(LIST_CHECK) : undefined;
    if (typeof findings === 'object' && findings.body === res.body) return scanner.finish(findings, unknownFields);
    // One pass over the bytes, nothing parsed: a conforming answer is forwarded as received.
    return scanner.scanBody(res.body, success.list, unknownFields);
  }

  return {
    name: 'response-contract',
    declares: DECLARES,
    /** How many violating answers were seen since the policy was loaded. */
    get violations(): number {
      return violations;
    },
    onRequest(ex: Exchange): undefined {
      // Asks list-pets, which reads a list it cuts first, to check each item in that same pass.
      const op = ex.operation as ApiOperation | undefined;
      if (config.mode !== 'off' && op !== undefined && (op.listLimit !== undefined || op.listFilter !== undefined)) ex.set(LIST_CHECK, 'wanted');
      return undefined;
    },
    wantsResponseBody(ex: Exchange, res: UpstreamResponse): boolean {
      if (ex.operation === undefined || res.status < 200 || res.status >= 300) return false;
      return config.mode !== 'off' || uninvitedCoding(ex, res) !== undefined;
    },
    onResponseBody(ex: Exchange, res: ResponseBody): ResponseBody {
      const operation = ex.operation as ApiOperation | undefined;
      if (operation === undefined || res.status < 200 || res.status >= 300) return res;
      const op = operation.id;
      const coding = config.mode === 'off' ? uninvitedCoding(ex, res) : contentCoding(res.headers['content-encoding']);
      // A copy run aside (a comparison) is not this gateway's answer: nothing counted or logged of it.
      const log = ex.aside === true ? undefined : env.log;
      if (coding !== undefined) {
        if (ex.aside !== true) {
          violations++;
          ex.set(CONTRACT_VIOLATION, violationText([`content-encoding ${coding.slice(0, 32)}`]));
        }
        ex.trace?.event(TRACE_EVENTS.contractViolation, { 'gateway.violation': 'content-encoding', 'gateway.violations': 1, 'gateway.contract.mode': config.mode });
        log?.warn({ policy: 'response-contract', operation: op, problems: [`content-encoding ${coding.slice(0, 32)}`], violations, mode: config.mode }, 'upstream answer violates the interface');
        return errorResponse(violation);
      }
      if (config.mode === 'off') return res;
      const verdict = check(ex, operation, res);
      if (verdict.problems.length === 0) {
        // Valid, with fields outside the interface to drop (unknownFields: drop).
        if (verdict.body === undefined || config.mode !== 'enforce') return res;
        return { ...res, body: verdict.body, truncated: false };
      }
      if (ex.aside !== true) {
        violations++;
        // The access line's `contractViolation`: why this answer broke the interface.
        ex.set(CONTRACT_VIOLATION, violationText(verdict.problems));
      }
      ex.trace?.event(TRACE_EVENTS.contractViolation, { 'gateway.violation': (verdict.problems[0] ?? '').slice(0, 200), 'gateway.violations': verdict.problems.length, 'gateway.contract.mode': config.mode });
      log?.warn({ policy: 'response-contract', operation: op, problems: verdict.problems, violations, mode: config.mode }, 'upstream answer violates the interface');
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
