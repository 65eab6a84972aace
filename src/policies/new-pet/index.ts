/**
 * The `new-pet` policy: what an operation with a request body accepts (the document's schema;
 * createPet's NewPet in the shipped interface). The media type is checked before the body
 * is read (415: application/json in UTF-8 only), the size while it is read (413, enforced by the front with `maxBytes`: src/fronts/body.ts), then the
 * JSON and the operation's schema once it is complete (400, every violation in one message). The
 * upstream receives the client's bytes unchanged; only `unknownFields: strip` rewrites them, and
 * losslessly.
 */
import { apiOf } from '../../api/index.js';
import { compileBody } from '../../api/body.js';
import type { ApiOperation } from '../../api/model.js';
import { jsonCharset, parseLossless, startsWithBom, stringifyLossless } from '../../core/contract.js';
import { GatewayError, type ErrorCode } from '../../core/errors.js';
import type { Decision, Exchange, PolicyEnv, PolicyModule } from '../../core/policy.js';
import { schema, type NewPetConfig } from './schema.js';

export type { NewPetConfig } from './schema.js';

const unsupported = new GatewayError('unsupported_media_type');
// JSON is UTF-8 (RFC 8259 section 8.1); a body labelled in another charset
// would be validated as UTF-8 here and read otherwise by an upstream that honours the label.
const notUtf8 = new GatewayError('unsupported_media_type', { message: 'The request body must be application/json in UTF-8: send no charset, or charset=utf-8.' });
// A BOM is refused, not stripped: RFC 8259 section 8.1 says senders MUST NOT add one, and the
// upstream receives the client's bytes unchanged, so stripping would forward bytes that differ
// from the ones checked (or forward the BOM to a parser that may refuse it).
const bom = new GatewayError('malformed_json', { message: 'The request body starts with a byte order mark (U+FEFF): send UTF-8 JSON without one (RFC 8259 section 8.1).' });

function create(config: NewPetConfig, env: PolicyEnv) {
  // Per operation (by index): its body's check, the code of a violation (`x-error-code` of its
  // 400, else invalid_body) and the answer to an empty body.
  const bodies = apiOf(env).operations.map((op) =>
    op.body === undefined
      ? undefined
      : {
          validate: compileBody(op.body, config.unknownFields),
          code: (op.errorCodes[400] ?? 'invalid_body') as ErrorCode,
          empty: new GatewayError('malformed_json', { message: `The request body is empty: a ${op.body.name} JSON object is required.` }),
        },
  );
  return {
    name: 'new-pet',
    onRequest(ex: Exchange): Decision {
      if (ex.operation?.hasBody !== true) return undefined;
      const charset = jsonCharset(ex.head.headers['content-type']);
      return charset === 'utf-8' ? undefined : charset === 'other' ? notUtf8 : unsupported;
    },
    onBody(ex: Exchange, body: Buffer): Decision {
      const plan = bodies[(ex.operation as ApiOperation | undefined)?.index ?? -1];
      if (plan === undefined) return undefined;
      if (body.length === 0) return plan.empty;
      if (startsWithBom(body)) return bom;
      let value: unknown;
      try {
        value = parseLossless(body);
      } catch (err) {
        // SyntaxError names the position (or a duplicate key); TypeError is bad UTF-8; RangeError too deep.
        const detail =
          err instanceof SyntaxError ? ` ${err.message}.` : err instanceof TypeError ? ' It is not UTF-8.' : ' It is nested too deeply.';
        return new GatewayError('malformed_json', { message: `The request body is not valid JSON.${detail.slice(0, 200)}` });
      }
      const check = plan.validate(value);
      if (check.errors.length > 0) return new GatewayError(plan.code, { message: check.errors.join('; ') });
      if (check.stripped !== undefined) ex.upstreamBody = Buffer.from(stringifyLossless(check.stripped));
      return undefined;
    },
  };
}

export const newPet: PolicyModule<NewPetConfig, 'new-pet'> = {
  name: 'new-pet',
  description: schema.description,
  schema,
  create,
};
