/**
 * One source for each config section's options (issue 11, item 4 "Types"): the TypeScript interface
 * the code reads and the JSON Schema Ajv validates (and fills defaults from) must describe the same
 * value, so neither can drift. json-schema-to-ts derives a type from each schema (`FromSchema`), and
 * the assertions below fail to COMPILE when it differs from the interface: `npx tsc -p
 * tsconfig.test.json` (part of `npm test`) is the real check. The tap run only proves the file loads
 * (tap's TS loader strips types without checking them).
 *
 * What is compared: the config AFTER Ajv applied the defaults (`useDefaults: true`, src/config/load.ts),
 * which is what the interfaces describe. FromSchema's default (`keepDefaultedPropertiesOptional`
 * false) marks a property with a `default` as required, exactly that. Both sides are normalised to
 * deep-readonly (the interfaces are readonly, FromSchema's output is mutable) and then compared for
 * IDENTITY, not mere mutual assignability: mutual assignability would miss a property one side
 * has as optional and the other lacks (`{a}` and `{a; b?}` are assignable both ways).
 *
 * What FromSchema cannot say, so the interface may be narrower than the schema's type:
 * - `pattern` / `propertyNames.pattern` / `minLength` / ranges: a string stays `string`, a number
 *   `number` (e.g. upstream-errors' statusMap keys '^[1-5][0-9]{2}$' are `string`). Ajv checks them.
 * - `DEFAULT_BRUTE_FORCE` and other defaults are not part of the type (only their presence is).
 */
import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import t from 'tap';
import type { ADMIN_SCHEMA } from '../../src/ops/admin.js';
import type { LOG_SCHEMA, LogConfig } from '../../src/ops/access-log.js';
import type { HEADERS_SCHEMA, SERVER_ADMIN_SCHEMA, SERVER_SCHEMA, UPSTREAM_SCHEMA } from '../../src/config/schema.js';
import type { HeadersConfig, PolicyConfig, ServerConfig, UpstreamConfig } from '../../src/config/types.js';
import type { schema as authSchema, AuthConfig } from '../../src/policies/auth/schema.js';
import type { schema as cacheSchema, CacheConfig } from '../../src/policies/cache/schema.js';
import type { schema as corsSchema, CorsConfig } from '../../src/policies/cors/schema.js';
import type { schema as deprecationSchema, DeprecationConfig } from '../../src/policies/deprecation/schema.js';
import type { schema as listPetsSchema, ListPetsConfig } from '../../src/policies/list-pets/schema.js';
import type { schema as newPetSchema, NewPetConfig } from '../../src/policies/new-pet/schema.js';
import type { schema as rateLimitSchema, RateLimitConfig } from '../../src/policies/rate-limit/schema.js';
import type { schema as responseContractSchema, ResponseContractConfig } from '../../src/policies/response-contract/index.js';
import type { schema as routeSchema, RouteConfig } from '../../src/policies/route/index.js';
import type { schema as upstreamErrorsSchema, UpstreamErrorsConfig } from '../../src/policies/upstream-errors/schema.js';

type DeepReadonly<T> = T extends (...args: never[]) => unknown
  ? T
  : T extends readonly (infer U)[]
    ? ReadonlyArray<DeepReadonly<U>>
    : T extends object
      ? { readonly [K in keyof T]: DeepReadonly<T[K]> }
      : T;

/** True only when A and B are the same type (TypeScript's own identity relation, via generic functions). */
type Identical<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
/** The interface and the schema's type, after defaults, agree. */
type Agree<I, S> = Identical<DeepReadonly<I>, DeepReadonly<S>>;
type Schema<S extends JSONSchema> = FromSchema<S>;

/** Compiles only when given `true`; on a mismatch tsc names the pair in the error. */
function agree<_T extends true>(): void {}

agree<Agree<AuthConfig, Schema<typeof authSchema>>>();
agree<Agree<DeprecationConfig, Schema<typeof deprecationSchema>>>();
agree<Agree<ListPetsConfig, Schema<typeof listPetsSchema>>>();
agree<Agree<NewPetConfig, Schema<typeof newPetSchema>>>();
agree<Agree<RateLimitConfig, Schema<typeof rateLimitSchema>>>();
agree<Agree<ResponseContractConfig, Schema<typeof responseContractSchema>>>();
// route has no options. FromSchema renders "an object with no properties" as `{}`, which TypeScript
// reads as "any non-null value", so the interface stays `Record<string, never>` (no property can
// hold a value) and what can be asserted is: the schema admits no property, and the interface fits it.
agree<Identical<keyof Schema<typeof routeSchema>, never>>();
agree<RouteConfig extends Schema<typeof routeSchema> ? true : false>();
agree<Agree<UpstreamErrorsConfig, Schema<typeof upstreamErrorsSchema>>>();
agree<Agree<CacheConfig, Schema<typeof cacheSchema>>>();
agree<Agree<CorsConfig, Schema<typeof corsSchema>>>();

agree<Agree<UpstreamConfig, Schema<typeof UPSTREAM_SCHEMA>>>();
agree<Agree<ServerConfig, Schema<typeof SERVER_SCHEMA>>>();
agree<Agree<LogConfig, Schema<typeof LOG_SCHEMA>>>();
// server.admin adds the key admin API's tokensFromEnv to the listener's own options.
agree<Agree<ServerConfig['admin'], Schema<typeof SERVER_ADMIN_SCHEMA>>>();
agree<Agree<Omit<NonNullable<ServerConfig['admin']>, 'tokensFromEnv'> | null, Schema<typeof ADMIN_SCHEMA>>>();
agree<Agree<HeadersConfig, Schema<typeof HEADERS_SCHEMA>>>();

// The checks can fail: a type that differs from its schema's is rejected (an extra optional field,
// a defaulted field made optional, a wider enum).
type Not<B extends boolean> = B extends true ? false : true;
agree<Not<Agree<ListPetsConfig & { readonly extra?: string }, Schema<typeof listPetsSchema>>>>();
agree<Not<Agree<Omit<NewPetConfig, 'maxBytes'> & { readonly maxBytes?: number }, Schema<typeof newPetSchema>>>>();
agree<Not<Agree<{ readonly mode: 'off' | 'monitor' | 'enforce' | 'strict' }, Schema<typeof responseContractSchema>>>>();

// Every policy module's section is covered above (a new module must add its line).
type Covered = 'auth' | 'cache' | 'cors' | 'deprecation' | 'list-pets' | 'new-pet' | 'rate-limit' | 'response-contract' | 'route' | 'upstream-errors';
agree<Identical<Covered, keyof PolicyConfig['policies']>>();

t.pass('compiled: every config interface agrees with its JSON Schema (checked by tsc -p tsconfig.test.json)');
