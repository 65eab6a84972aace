/**
 * The `new-pet` policy: what createPet accepts as a body. The media type is checked before the body
 * is read (415), the size while it is read (413, enforced by the adapter with `maxBytes`), then the
 * JSON and the NewPet schema once it is complete (400, every violation in one message). The
 * upstream receives the client's bytes unchanged; only `unknownFields: strip` rewrites them, and
 * losslessly.
 */
import { compileNewPet, isJsonMediaType, parseLossless, stringifyLossless } from '../../core/contract.js';
import { GatewayError } from '../../core/errors.js';
import type { Decision, Exchange, PolicyModule } from '../../core/policy.js';
import { schema, type NewPetConfig } from './schema.js';

export type { NewPetConfig } from './schema.js';

const unsupported = new GatewayError('unsupported_media_type');
const empty = new GatewayError('malformed_json', 'The request body is empty: a NewPet JSON object is required.');

function create(config: NewPetConfig) {
  const validate = compileNewPet(config.unknownFields);
  return {
    name: 'new-pet',
    onRequest(ex: Exchange): Decision {
      if (ex.operation?.hasBody !== true) return undefined;
      return isJsonMediaType(ex.head.headers['content-type']) ? undefined : unsupported;
    },
    onBody(ex: Exchange, body: Buffer): Decision {
      if (body.length === 0) return empty;
      let value: unknown;
      try {
        value = parseLossless(body);
      } catch (err) {
        // SyntaxError names the position (or a duplicate key); TypeError is bad UTF-8; RangeError too deep.
        const detail =
          err instanceof SyntaxError ? ` ${err.message}.` : err instanceof TypeError ? ' It is not UTF-8.' : ' It is nested too deeply.';
        return new GatewayError('malformed_json', `The request body is not valid JSON.${detail.slice(0, 200)}`);
      }
      const check = validate(value);
      if (check.errors.length > 0) return new GatewayError('invalid_body', check.errors.join('; '));
      if (check.stripped !== undefined) ex.upstreamBody = Buffer.from(stringifyLossless(check.stripped));
      return undefined;
    },
  };
}

export const newPet: PolicyModule<NewPetConfig> = {
  name: 'new-pet',
  description: schema.description,
  schema,
  create,
};
