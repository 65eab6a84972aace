/** The shape of a policy file once it is validated and its defaults filled in. */
import type { Api } from '../api/index.js';
import type { LogConfig } from '../ops/access-log.js';
import type { HeadersConfig } from '../core/headers.js';
import type { SchemaType } from '../core/options.js';
import type { MIGRATION_SECTION_SCHEMA, SERVER_SCHEMA } from './schema.js';
import type { PolicyConfigs } from '../policies/index.js';
import type { TelemetrySection } from '../telemetry/schema.js';
import type { UpstreamConfig } from '../upstreams/config.js';

/** The `server:` section: the API listener's options (src/fronts) and the admin listener's (src/ops). */
export type ServerConfig = SchemaType<typeof SERVER_SCHEMA>;

/** The `migration:` section (src/migration, docs/migration.md); null: one upstream. */
export type MigrationSection = SchemaType<typeof MIGRATION_SECTION_SCHEMA>;

export interface PolicyConfig {
  readonly version: 1;
  /** The interface document the file names (`interface:`), as written; absent: the shipped one. */
  readonly interface?: string;
  /** The compiled interface (src/api): set by the loader, not enumerable; the shipped one when absent. */
  readonly api?: Api;
  readonly upstream: UpstreamConfig;
  readonly server: ServerConfig;
  readonly headers: HeadersConfig;
  readonly log: LogConfig;
  /** Absent in a config built in code before the section existed: read as null. */
  readonly migration?: MigrationSection;
  /** `telemetry:` (src/telemetry, docs/operations.md "Traces"); absent: nothing but what the OTEL_* environment turns on. */
  readonly telemetry?: TelemetrySection;
  readonly policies: PolicyConfigs;
}

export type { HeadersConfig, PolicyConfigs, TelemetrySection, UpstreamConfig };
export type { ListenerConfig, ServerTlsConfig } from '../fronts/config.js';
export type { UpstreamTlsConfig } from '../upstreams/config.js';
